/*
 * tier.h: the stores beyond fp32 rows in memory (table/store.h): the SSD
 * tier's constructor and queries (docs/tiers.md), and the store of encoded
 * rows (store_quant.c; docs/inference.md).  For the layout code that
 * creates stores (assemble/layout.c) and for the planner, checkpoints and
 * tools that ask about them.  Which tables go to the SSD tier is the
 * collection's rule (collection/config.h); the tier's part in a step is
 * step/tier.h.
 */
#ifndef EMBER_TIER_TIER_H
#define EMBER_TIER_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"
#include "table/store.h"

typedef void (*ember_row_init_fn)(void *ctx, uint32_t row, float *values);

typedef struct ember_ssd_params {
    const char *dir;          /* folder of the store file                     */
    const char *name;         /* file stem (the first table's name)           */
    const char *label;        /* for messages, e.g. "table 'user'"            */
    int32_t rank;
    int64_t rows;             /* local rows                                   */
    int32_t dim, state_floats;
    int64_t cache_bytes;
    ember_cache_policy policy; /* LRU, LFU or LOOKAHEAD                       */
    int32_t lookahead;        /* window of announced batches, 1..63           */
    int32_t io_threads;
    int buffered;             /* 1: through the page cache; 0: O_DIRECT
                                 where the filesystem allows it          */
    ember_row_init_fn init;   /* values of a row never written (thread-safe)  */
    void *init_ctx;
} ember_ssd_params;

/* Creates the store file <dir>/<name>.rank<rank>.ember-store (locked,
 * space reserved) and the cache.  Errors: EMBER_EIO (missing folder,
 * read-only, in use by another process, too small: named), EMBER_EINVAL (a
 * cache that holds no row), EMBER_ENOMEM; the message goes to err. */
int ember_store_ssd_create(const ember_ssd_params *p, ember_store **out, char *err, size_t errlen);

/* Bytes of one row in a store file under O_DIRECT (the default): values
 * and state, padded to 512. */
static inline int64_t ember_ssd_stride(int32_t dim, int32_t state_floats)
{
    return ((int64_t)sizeof(float) * (dim + state_floats) + 511) / 512 * 512;
}

/* DRAM bytes per cached row: values, state and bookkeeping. */
int64_t ember_ssd_slot_bytes(int32_t dim, int32_t state_floats, ember_cache_policy policy);

/* DRAM bytes of a store's written-row bitmap: one bit per row of the store
 * (the table's rows on this rank; a stacked store's summed), in 8-byte
 * words. */
static inline int64_t ember_ssd_bitmap_bytes(int64_t rows) { return 8 * ((rows + 63) / 64); }

/* The cache's rule (docs/tiers.md, "The cache"): cache_bytes pays for the
 * bitmap of the store's rows and, per cached row, ember_ssd_slot_bytes; the
 * cache holds the most rows that fit, at most the store's rows:
 *     min(rows, (cache_bytes - bitmap) / slot_bytes), 0 when none fits.
 * What collection create gives a store and what the planner assumes. */
int64_t ember_ssd_cache_rows(int64_t cache_bytes, int64_t rows, int32_t dim, int32_t state_floats,
                             ember_cache_policy policy);
/* The cache_bytes that hold exactly k rows of a store of `rows` rows (one
 * byte less holds k - 1): k x slot bytes + the bitmap. */
static inline int64_t ember_ssd_cache_bytes_for(int64_t k, int64_t rows, int32_t dim, int32_t state_floats,
                                                ember_cache_policy policy)
{
    return k * ember_ssd_slot_bytes(dim, state_floats, policy) + ember_ssd_bitmap_bytes(rows);
}
/* The DRAM such a cache takes (ember_collection_memory's row, state and
 * cache_meta bytes): cache rows x slot bytes + the bitmap; cache_bytes when
 * it holds no row (create refuses it). */
int64_t ember_ssd_cache_dram(int64_t cache_bytes, int64_t rows, int32_t dim, int32_t state_floats,
                             ember_cache_policy policy);

#define EMBER_SSD_CACHE_DEFAULT ((int64_t)256 << 20)

/* Encoded rows (store_quant.c): rows of `encoding` (> 0), no optimizer
 * state (reads as zeros, writes dropped); threads: the most OpenMP threads
 * that acquire single rows at once. */
int ember_store_quant_create(int64_t rows, int32_t dim, int32_t state_floats, int encoding, int32_t threads,
                             ember_store **out);

/* Counters of a store (zeros for the memory tier). */
void ember_store_tier_stats(const ember_store *s, ember_tier_stats *out);

/* sim.c: Belady's offline optimum on a sequence of steps; rows[s][0..n[s])
 * are the distinct rows (< rows_total) step s needs at once.  Counts the
 * accesses and loads of steps >= first_counted for a cache of cap rows.
 * 0; -1 out of memory; -2 a step has more rows than the cache. */
int ember_cache_sim_belady(const uint32_t *const *rows, const int64_t *n, int64_t steps, int64_t rows_total,
                           int64_t cap, int64_t first_counted, int64_t *accesses, int64_t *loads);

/* Test hook (tests/test_tier.c): the k-th I/O request from now and all
 * later ones fail with errno err; k = 0 turns it off. */
void ember_store_ssd_inject_failure(ember_store *s, int64_t k, int err, int writes_only);

#endif
