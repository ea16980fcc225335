/*
 * pool.c: the forward kernel: every output row is the scaled, weighted sum
 * of its entries' table rows, summed in entry order.
 *
 * Segments are visited feature-major (route.h: seg_order), so the hot rows
 * of one table stay in cache while its bags are pooled, and split statically
 * over threads; a segment is always computed by exactly one thread in a
 * fixed order, so the output is bit-identical for any thread count.  Rows
 * are prefetched PREFETCH entries ahead in visiting order (the
 * workload-shaped gather limit in bench/peer measured 16 ahead as best).
 * Dims that are multiples of 16 get a kernel with the dim known at compile
 * time; any other dim gets the generic loop, which GCC also vectorises.
 */
#include <omp.h>
#include <string.h>

#include "lookup/lookup.h"

#define PREFETCH 16

/* Walks the entries in pool order (segments of seg_order[k0, k1), entries
 * in each) PREFETCH entries ahead of the kernel, prefetching their rows. */
typedef struct lookahead {
    int64_t k, e, end;
} lookahead;

static inline void la_settle(const ember_route *r, lookahead *la, int64_t k1)
{
    while (la->e >= la->end && ++la->k < k1) {
        int32_t g = r->seg_order[la->k];
        la->e = r->seg_start[g];
        la->end = r->seg_start[g + 1];
    }
}

static inline void la_step(const ember_route *r, lookahead *la, int64_t k1, const float *values,
                           int32_t dim)
{
    if (la->k >= k1)
        return;
    uint32_t x = r->row[la->e];
    if (x != EMBER_ROW_DROPPED) {
        const char *p = (const char *)(values + (int64_t)x * dim);
        for (int32_t c = 0; c < dim * 4; c += 64)
            __builtin_prefetch(p + c, 0, 0);
    }
    la->e++;
    la_settle(r, la, k1);
}

#define POOL_BODY(DIM)                                                                    \
    lookahead la = {k0, 0, 0};                                                            \
    if (k0 < k1) {                                                                        \
        la.e = r->seg_start[r->seg_order[k0]];                                            \
        la.end = r->seg_start[r->seg_order[k0] + 1];                                      \
        la_settle(r, &la, k1);                                                            \
    }                                                                                     \
    for (int i = 0; i < PREFETCH; i++)                                                    \
        la_step(r, &la, k1, values, (DIM));                                               \
    for (int64_t k = k0; k < k1; k++) {                                                   \
        int32_t g = r->seg_order[k];                                                      \
        float acc[DIM];                                                                   \
        for (int32_t j = 0; j < (DIM); j++)                                               \
            acc[j] = 0.0f;                                                                \
        int64_t e1 = r->seg_start[g + 1];                                                 \
        for (int64_t e = r->seg_start[g]; e < e1; e++) {                                  \
            la_step(r, &la, k1, values, (DIM));                                           \
            uint32_t x = row[e];                                                          \
            if (x == EMBER_ROW_DROPPED)                                                   \
                continue;                                                                 \
            const float *v = values + (int64_t)x * (DIM);                                 \
            if (weight) {                                                                 \
                float w = weight[e];                                                      \
                _Pragma("omp simd") for (int32_t j = 0; j < (DIM); j++) acc[j] += w * v[j]; \
            } else {                                                                      \
                _Pragma("omp simd") for (int32_t j = 0; j < (DIM); j++) acc[j] += v[j];   \
            }                                                                             \
        }                                                                                 \
        float sc = r->seg_scale[g];                                                       \
        float *o = ember_seg_out(r, g, pooled, sequence);                                 \
        _Pragma("omp simd") for (int32_t j = 0; j < (DIM); j++) o[j] = acc[j] * sc;      \
    }

#define DEFINE_POOL(NAME, DIM_EXPR)                                                       \
    static void NAME(const ember_route *r, const float *values, int32_t dim, int64_t k0,  \
                     int64_t k1, float *pooled, float *sequence)                          \
    {                                                                                     \
        const uint32_t *row = r->row;                                                     \
        const float *weight = r->weighted ? r->weight : NULL;                             \
        (void)dim;                                                                        \
        POOL_BODY(DIM_EXPR)                                                               \
    }

DEFINE_POOL(pool_16, 16)
DEFINE_POOL(pool_32, 32)
DEFINE_POOL(pool_64, 64)
DEFINE_POOL(pool_128, 128)
DEFINE_POOL(pool_256, 256)
DEFINE_POOL(pool_any, dim)

typedef void (*pool_fn)(const ember_route *, const float *, int32_t, int64_t, int64_t, float *, float *);

static pool_fn pick(int32_t dim)
{
    switch (dim) {
    case 16: return pool_16;
    case 32: return pool_32;
    case 64: return pool_64;
    case 128: return pool_128;
    case 256: return pool_256;
    default: return pool_any;
    }
}

void ember_pool(const ember_route *r, const ember_store *s, int64_t k0, int64_t k1, float *pooled,
                float *sequence, int threads)
{
    if (k1 <= k0)
        return;
    pool_fn fn = pick(s->dim);
    if (threads > 1 && k1 - k0 < 256)
        threads = 1;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        fn(r, s->values, s->dim, k0 + (k1 - k0) * t / nt, k0 + (k1 - k0) * (t + 1) / nt, pooled, sequence);
    }
}
