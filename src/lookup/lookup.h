/*
 * lookup.h: the hot kernels of one step: pooled forward over a route, and
 * the backward aggregation fused with the optimizer.
 */
#ifndef EMBER_LOOKUP_H
#define EMBER_LOOKUP_H

#include <stdint.h>

#include "ember.h"
#include "prep/route.h"
#include "table/store.h"

/* Writes the output rows of segments [g0, g1) of route r. */
void ember_pool(const ember_route *r, const ember_store *s, int64_t g0, int64_t g1, float *pooled,
                float *sequence, int threads);

/* One occurrence's share of a row's gradient: g[k] += scale * d[k], each
 * element in sequence.  The one formula of every gradient sum (grad.c and
 * the hot rows' sums along the ranks, exchange/hot.c), so that both round
 * alike. */
static inline void ember_grad_accumulate(float *restrict g, float scale, const float *restrict d, int32_t dim)
{
#pragma omp simd
    for (int32_t k = 0; k < dim; k++)
        g[k] += scale * d[k];
}

/* An occurrence's scale: its weight over its bag's divisor (0 for a zero
 * divisor). */
static inline float ember_grad_scale(float divisor, float weight)
{
    return divisor == 1.0f ? weight : divisor == 0.0f ? 0.0f : weight / divisor;
}

struct ember_collection;
/* Backward of physical table p: sorts its keys, sums each row's gradient in
 * sample order and applies the optimizer for global step `step`; with
 * check_only, only checks that every gradient is finite (EMBER_ENUMERIC). */
int ember_grad_apply(struct ember_collection *c, int32_t p, const float *dp, const float *ds,
                     int64_t step, int check_only);

/* What a backward aggregates into: a route over the rows of a store (this
 * rank's own route, or the entries an owner received).  Error messages name
 * physical row local * row_stride + row_base.  full_dim > 0 marks row-wise
 * Adagrad on a COLUMN slice (real_cols real columns of full_dim), whose
 * row mean needs the other ranks' slices. */
typedef struct ember_grad_target {
    ember_route *route;
    ember_store *store;
    const ember_optimizer *opt;
    int32_t dim;
    int64_t rows;
    int64_t row_stride, row_base;
    int32_t full_dim, real_cols;
} ember_grad_target;
int ember_grad_route(struct ember_collection *c, const ember_grad_target *t, const float *dp,
                     const float *ds, int64_t step, int check_only);

/* Output row of segment g: pooled + off, or sequence + (-1 - off). */
static inline float *ember_seg_out(const ember_route *r, int64_t g, float *pooled, float *sequence)
{
    int64_t off = r->seg_out[g];
    return off >= 0 ? pooled + off : sequence + (-1 - off);
}

#endif
