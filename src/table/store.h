/*
 * store.h: where a physical table's rows and optimizer state live.
 *
 * Kernels never assume a tier: they ask the store for the rows of a set of
 * ids (acquire), work on the returned row pointers, and hand them back
 * (release, with dirty = 1 after an update).  The memory tier answers with
 * pointers into one huge-page mapping and does nothing on release; a tiered
 * store (DRAM cache over disk) can stage rows in acquire and write them back
 * in release without any kernel changing.  Rows are `dim` floats; state rows
 * are `state_floats` floats, stored beside the values in a second mapping so
 * that forward gathers touch values only.
 *
 * The SSD tier (src/tier/, docs/tiers.md) is such a staged store; the
 * store of encoded rows (tier/store_quant.c) is a memory store that decodes
 * in acquire.  For the
 * step it does more than acquire: stage() makes a step's rows resident in
 * its DRAM cache, pins them, and translates each row number into the cache
 * slot that holds it; `values` and `state` then point at the cache's slot
 * arrays, so the kernels read and update slot s at values + s * dim exactly
 * as the memory tier's row s.  The arithmetic is the same; only the index
 * space changes, and slot_row[] maps a slot back to its row for messages.
 */
#ifndef EMBER_TABLE_STORE_H
#define EMBER_TABLE_STORE_H

#include <stdint.h>

#include "ember.h"

typedef struct ember_store ember_store;

typedef struct ember_store_ops {
    /* Fills values[i] and state[i] (state may be NULL) for rows[i], i < n.
     * The pointers stay valid until the matching release.  One acquire may
     * be outstanding per store (row access, checkpoints; not thread-safe on
     * a staged store).  Errors: EMBER_EIO, EMBER_ENOMEM (message in errmsg). */
    int (*acquire)(ember_store *s, const uint32_t *rows, int64_t n, float **values,
                   float **state);
    /* dirty: the rows were written; a staged store writes them back. */
    int (*release)(ember_store *s, const uint32_t *rows, int64_t n, int dirty);
    void (*destroy)(ember_store *s);
    /* Staged stores only (NULL for the memory tier). */
    /* Step `step` (completed backwards so far) begins: the previous step's
     * pins are released, announced batches before it are forgotten. */
    void (*begin)(ember_store *s, int64_t step);
    /* Makes rows[0..n) resident and pinned until the next begin, and writes
     * each one's slot to slots[i] (may equal rows); EMBER_ROW_DROPPED stays.
     * Errors: EMBER_ELIMIT (the pinned rows do not fit the cache), EMBER_EIO;
     * the rows' contents never change. */
    int (*stage)(ember_store *s, const uint32_t *rows, uint32_t *slots, int64_t n);
    /* The pinned rows are about to be updated (backward). */
    void (*mark_dirty)(ember_store *s);
    /* Writes every dirty cached row back to the store file. */
    int (*flush)(ember_store *s);
    /* Announces the rows of the batch that step `seq` will train on
     * (lookahead); may start background reads.  Called for every announced
     * batch, n = 0 when it has no rows here (seq stays consecutive).
     * Errors: EMBER_EIO. */
    int (*announce)(ember_store *s, const uint32_t *rows, int64_t n, int64_t seq);
} ember_store_ops;

struct ember_store {
    const ember_store_ops *ops;
    int64_t rows;
    int32_t dim, state_floats;
    /* Direct addressing, when the tier allows it (memory tier): row r's
     * values at values + r * dim, state at state + r * state_floats.  NULL
     * for tiers that must stage rows; kernels then use acquire/release. */
    float *values;
    float *state;
    int64_t value_bytes, state_bytes;
    /* Staged stores: values/state index slots, not rows (see above). */
    int staged;
    const uint32_t *slot_row; /* [slots] local row held by each slot        */
    int64_t disk_bytes;       /* bytes of the store file                    */
    /* Simulated quantization of reads (ember_table_config.quant_*): the
     * pooling kernel reads x as ember_fake_quant(x, fq_low, fq_high,
     * fq_step); fq_step 0 = off.  Set by the layout for every tier. */
    float fq_low, fq_high, fq_step;
    int64_t meta_bytes;       /* cache bookkeeping (map, lists, flags)      */
    /* Encoded rows (ember_table_config.rows_encoding; tier/store_quant.c):
     * encoding > 0 (quant.h's ember_encoding), row r at qrows + r *
     * qrow_bytes; values and state are then NULL and value_bytes counts
     * qrows.  The forward reads qrows; acquire and release decode and
     * encode. */
    int encoding;
    uint8_t *qrows;
    int64_t qrow_bytes;
    /* Optimizer state in half precision (ember_table_config.state_precision;
     * tier/store_quant.c): state_enc fp16 or bf16, row r's state_floats
     * halves at qstate + r * state_floats; state is then NULL and
     * state_bytes counts qstate.  0: fp32 state (state, or none). */
    int state_enc;
    uint16_t *qstate;
    char errmsg[400];         /* detail of the last failed call             */
};

/* The local row that kernel index i addresses (a slot of a staged store). */
static inline uint32_t ember_store_row_of(const ember_store *s, uint32_t i)
{
    return s->staged ? s->slot_row[i] : i;
}

/* Memory tier: values and state in anonymous mappings with
 * madvise(MADV_HUGEPAGE), state zeroed; values left for the initializer. */
int ember_store_memory_create(int64_t rows, int32_t dim, int32_t state_floats, ember_store **out);


static inline void ember_store_destroy(ember_store *s)
{
    if (s)
        s->ops->destroy(s);
}

/* A step's calls on a store, which only a staged store answers (the memory
 * tier's rows are their own slots): begin, stage (EMBER_OK, or the status
 * with the message in s->errmsg), mark dirty. */
static inline void ember_store_begin(ember_store *s, int64_t step)
{
    if (s->staged)
        s->ops->begin(s, step);
}

static inline int ember_store_stage(ember_store *s, const uint32_t *rows, uint32_t *slots, int64_t n)
{
    return s->staged ? s->ops->stage(s, rows, slots, n) : EMBER_OK;
}

static inline void ember_store_mark_dirty(ember_store *s)
{
    if (s->staged)
        s->ops->mark_dirty(s);
}


#endif
