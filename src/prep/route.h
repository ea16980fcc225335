/*
 * route.h: a batch routed to one physical table (host preprocessing,
 * as SparseCore's): jagged bags -> COO entries in sample-major order, optional
 * per-bag dedup, limits applied, and the sorted (row, entry) keys that the
 * backward aggregation and the limit checks share.  This header is the route
 * alone: its buffers, its segments and the sort; routing.h routes a batch.
 *
 * Entries are laid out sample-major (sample, then feature in config order,
 * then position), so a contiguous sample range is a contiguous entry range
 * (mini-batches) and a stable sort by row leaves each row's occurrences in
 * the order the spec sums them.  A segment is one output row: a bag of a
 * pooled feature, or a single id of a NONE feature.
 */
#ifndef EMBER_PREP_ROUTE_H
#define EMBER_PREP_ROUTE_H

#include <stdint.h>

#define EMBER_ROW_DROPPED UINT32_MAX
/* The id a dynamic table's key with no row becomes before routing
 * (step/dynamic_keys.c): the route gives it a zero row that counts in
 * mean/sqrtn divisors and gets no update. */
#define EMBER_ID_UNSEEN INT64_MIN
#define EMBER_ROUTE_PAD 32 /* valid rows (0) after row[n], for read-ahead */

typedef struct ember_route {
    int64_t n;            /* entries                                         */
    int64_t nseg;         /* segments                                        */
    uint32_t *row;        /* [n] physical row, or EMBER_ROW_DROPPED          */
    float *weight;        /* [n] or NULL (all 1)                             */
    int32_t *leader;      /* [n] first entry of the same id in its bag
                             (only when a limit is set)                       */
    int32_t *mult;        /* [n] batch ids merged into the entry (only with
                             dedup; 1 otherwise)                              */
    int64_t *seg_start;   /* [nseg + 1] first entry of each segment          */
    int64_t *seg_out;     /* [nseg] float offset into pooled or sequence     */
    float *seg_div;       /* [nseg] combiner divisor (1 sum/none; 0: zeros)  */
    int32_t *seg_feature; /* [nseg] feature index                            */
    int32_t *seg_sample;  /* [nseg] sample index                             */
    int64_t *sample_seg;  /* [B + 1] first segment of each sample            */
    int64_t *src_off;     /* [n] backward: entry's d_out offset (as seg_out) */
    float *src_scale;     /* [n] backward: weight / seg_div (0 when div 0)   */
    int64_t *sorted_off;  /* [n] src_off in sorted-key order                 */
    float *sorted_scale;  /* [n] src_scale in sorted-key order               */
    uint64_t *keys;       /* [n] (row << 32 | entry), sorted by row          */
    uint64_t *keys_tmp;   /* [n] radix sort scratch                          */
    int64_t nkeys;        /* valid keys (0 when not sorted)                  */
    int sorted_all;       /* keys hold every kept entry (not only leaders)   */
    int weighted;         /* weight[] is filled (batch weights or dedup)     */
    int dedup;            /* mult[] is filled                                */
    int sources_ready;    /* src_* and sorted_* match the current keys       */
    /* capacities of the grow-only buffers above */
    int64_t cap_n, cap_seg, cap_b;
} ember_route;

/* Output row of segment g: pooled + off, or sequence + (-1 - off). */
static inline float *ember_seg_out(const ember_route *r, int64_t g, float *pooled, float *sequence)
{
    int64_t off = r->seg_out[g];
    return off >= 0 ? pooled + off : sequence + (-1 - off);
}

/* Segment of entry e (binary search of seg_start). */
int64_t ember_route_segment_of(const ember_route *r, int64_t e);

/* Sorts r's keys (row << 32 | entry) by row, rows below `rows`: all = 1,
 * every kept entry (the backward); 0, only the bag's first entry of each
 * id (the limits' units).  Stable, so a row's occurrences stay in entry
 * order; the same for any thread count.  hist: EMBER_SORT_HIST_SIZE
 * scratch.  A no-op when the keys are sorted that way already. */
void ember_route_sort_rows(ember_route *r, int64_t rows, int all, int64_t *hist, int threads);

/* Makes r hold n entries (plus EMBER_ROUTE_PAD), nseg segments and B
 * samples; grow-only, contents kept. */
int ember_route_reserve(ember_route *r, int64_t n, int64_t nseg, int32_t B);

void ember_route_free(ember_route *r);

/* Bytes held by the route's buffers (for ember_collection_memory). */
int64_t ember_route_bytes(const ember_route *r);

/* Stable LSD radix sort of keys by bits [lo, hi) using tmp (n keys) and hist
 * (EMBER_SORT_HIST_SIZE) as scratch; result in keys.  Static split over
 * threads, so the result does not depend on the thread count. */
#define EMBER_SORT_MAX_THREADS 64
#define EMBER_SORT_DIGIT_BITS 11
#define EMBER_SORT_HIST_SIZE (EMBER_SORT_MAX_THREADS << EMBER_SORT_DIGIT_BITS)
void ember_radix_sort(uint64_t *keys, uint64_t *tmp, int64_t *hist, int64_t n, int lo_bit,
                      int hi_bit, int threads);

#endif
