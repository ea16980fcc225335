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
 */
#ifndef EMBER_TABLE_STORE_H
#define EMBER_TABLE_STORE_H

#include <stdint.h>

typedef struct ember_store ember_store;

typedef struct ember_store_ops {
    /* Fills values[i] and state[i] (state may be NULL) for rows[i], i < n.
     * The pointers stay valid until the matching release. */
    int (*acquire)(ember_store *s, const uint32_t *rows, int64_t n, float **values,
                   float **state);
    void (*release)(ember_store *s, const uint32_t *rows, int64_t n, int dirty);
    void (*destroy)(ember_store *s);
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
};

/* Memory tier: values and state in anonymous mappings with
 * madvise(MADV_HUGEPAGE), state zeroed; values left for the initializer. */
int ember_store_memory_create(int64_t rows, int32_t dim, int32_t state_floats, ember_store **out);

static inline void ember_store_destroy(ember_store *s)
{
    if (s)
        s->ops->destroy(s);
}

/* Large zero-filled allocations that ask for transparent huge pages. */
void *ember_huge_alloc(int64_t bytes);
void ember_huge_free(void *p, int64_t bytes);

#endif
