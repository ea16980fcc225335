/*
 * hot.h: hot-row replication of a row-wise table (docs/distributed.md,
 * "Hot rows").
 *
 * The hot rows of a ROW-placed, ROWS-exchange physical table are copied
 * (values and optimizer state) onto every rank.  The forward reads them
 * from the copy: they are neither sent as ids nor returned as rows.  The
 * backward sums their gradients along the ranks in rank order (rank 0's
 * occurrences, then rank 1's continuing its sums, ...), which is the order
 * one process sums the global batch in, then every rank applies the same
 * optimizer step to its copy and the owner writes it to its store: every
 * copy and the store hold the bits one process would.  The owner's store
 * stays the table of record (checkpoints, row reads).
 */
#ifndef EMBER_EXCHANGE_HOT_H
#define EMBER_EXCHANGE_HOT_H

#include <stdint.h>

#include "collection/collection.h"

typedef struct ember_hot {
    int64_t cap;          /* the tables' hot_rows summed                    */
    int64_t n;            /* rows hot now                                   */
    uint32_t *rows;       /* [n] physical rows, ascending                   */
    float *values, *state;/* [n][dim], [n][state floats]: the copies         */
    int32_t *slot;        /* [n] a round's slot of the row in rows_in, or -1 */
    uint32_t *counts;     /* [local rows] entries served as owner since the
                             last refresh                                   */
    uint64_t *hot_counts; /* [n] this rank's occurrences of each hot row     */
    float *g;             /* [n][dim] gradient sums along the ranks, then [n]
                             occurrence counts; as much again to receive    */
    int64_t *touched;     /* [n] occurrences in the global batch             */
    uint64_t *keys;       /* this rank's hot occurrences, by row then entry  */
    int64_t *at;          /* [n + 1] counting-sort starts                    */
    int64_t keys_cap;
    uint32_t *table;      /* [2 (mask + 1)] (row, index) pairs; UINT32_MAX: empty */
    uint32_t mask;
} ember_hot;

/* Index of physical row `row` among the hot rows, or -1: an open-addressing
 * table (multiplicative hash, linear probing, at most a quarter full), so
 * the forward's per-id test costs a probe or two, hit or miss. */
/* Row's first bucket in the table (multiplicative hash). */
static inline uint32_t ember_hot_bucket(const ember_hot *h, uint32_t row)
{
    return (uint32_t)((row * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & h->mask;
}

static inline int64_t ember_hot_find(const ember_hot *h, uint32_t row)
{
    if (!h || h->n == 0)
        return -1;
    for (uint32_t b = ember_hot_bucket(h, row);; b = (b + 1) & h->mask) {
        uint32_t k = h->table[2 * (int64_t)b];
        if (k == row)
            return h->table[2 * (int64_t)b + 1];
        if (k == UINT32_MAX)
            return -1;
    }
}

/* Creates the hot state of every table whose config asks for hot rows
 * (at create; a world of one keeps none).  EMBER_OK or EMBER_ENOMEM. */
int ember_hot_create(ember_collection *c);
void ember_hot_free(ember_hot *h);
/* Bytes of its copies, sums, counts and scratch (workspace). */
int64_t ember_hot_bytes(const ember_ptable *pt);

/* Copies of the hot rows, refilled from their owners (collective): after a
 * new hot set, and after rows were written or loaded. */
int ember_hot_reload(ember_collection *c, int32_t p);

/* Rows [phys0, phys0 + count) written from buf (values, or state when
 * `state`; every rank passes them all): the copies among them follow. */
void ember_hot_write(const ember_ptable *pt, int64_t phys0, int64_t count, const float *buf, int state);

/* Backward of the hot rows of table p (collective, every rank): the sums
 * along the ranks into h->g; then apply (no messages) steps every touched
 * copy and the owner's store row.  check: the debug check of h->g. */
int ember_hot_sum(ember_collection *c, int32_t p, const float *dp, const float *ds);
int ember_hot_check(ember_collection *c, int32_t p);
void ember_hot_apply(ember_collection *c, int32_t p, int64_t step);

/* Counting for the refresh: entries an owner received (rr). */
void ember_hot_count_served(ember_collection *c, int32_t p);

#endif
