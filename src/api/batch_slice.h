/*
 * batch_slice.h: data-parallel input for the library's scans over a world
 * (ember_limits_run, ember_bench_run).  Under mpirun every rank draws (or
 * reads) the same global batch and keeps a contiguous run of its samples,
 * rank r of W: [r*B/W, (r+1)*B/W).  The local batches
 * concatenated in rank order are the global batch, which is what ember's
 * collective forward and backward expect (docs/distributed.md).
 */
#ifndef EMBER_API_BATCH_SLICE_H
#define EMBER_API_BATCH_SLICE_H

#include <stdint.h>

#include "ember.h"

/* Rank r's samples of a batch of B: [B*r/W, B*(r+1)/W) (64-bit products),
 * so shares differ by at most one sample and cover [0, B) in rank order. */
void batch_slice_range(int32_t batch_size, int32_t rank, int32_t world, int32_t *first,
                       int32_t *count);

/*
 * The samples [first, first+count) of b as a batch of their own:
 *   for f in features: out.lengths[f*count + i] = b.lengths[f*B + first + i]
 *   ids (and weights, when b has them) of those bags, feature-major, in order
 * lengths must hold num_features*count, ids and weights (NULL when b has no
 * weights) *num_ids, which batch_slice_count() gives.  *out points at the
 * caller's arrays.  Returns 0, or EMBER_EINVAL when b is malformed (a negative
 * length, lengths summing past num_ids, a range outside [0, B)).
 */
int batch_slice_count(const ember_batch *b, int32_t first, int32_t count, int64_t *num_ids);
int batch_slice_copy(const ember_batch *b, int32_t first, int32_t count, int32_t *lengths,
                     int64_t *ids, float *weights, ember_batch *out);

/* A slice in buffers of its own that grow as needed. */
typedef struct batch_slice {
    int32_t *lengths;
    int64_t *ids;
    float *weights;
    int64_t cap_lengths, cap_ids, cap_weights;
    ember_batch batch; /* the slice; valid until the next take or free */
} batch_slice;

/* Rank `rank` of `world`'s share of b into s->batch.  0, EMBER_EINVAL for a
 * malformed b, EMBER_ENOMEM when out of memory.  With world 1 the slice is a copy of b. */
int batch_slice_take(batch_slice *s, const ember_batch *b, int32_t rank, int32_t world);
void batch_slice_free(batch_slice *s);

#endif
