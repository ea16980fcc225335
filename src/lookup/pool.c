/*
 * pool.c: the forward kernel: every output row is the scaled, weighted sum
 * of its entries' table rows, summed in entry order.
 *
 * Work is split statically by entries (not segments), so threads get equal
 * numbers of row reads whatever the bag sizes; a segment is always computed
 * by exactly one thread in a fixed order, so the output is bit-identical for
 * any thread count.  Rows are prefetched PREFETCH entries ahead (the
 * workload-shaped gather limit in bench/peer measured 16 ahead as best).
 * The prefetch is unconditional (the route pads its rows so that reading
 * ahead past the end stays in bounds); a dropped entry's sentinel row gives a
 * harmless prefetch of an unmapped address.  An earlier version wrapped it
 * in a helper with a bounds test, and GCC 12 silently dropped every prefetch
 * instruction: check `objdump -d | grep prefetch` after touching this loop.
 * Dims that are multiples of 16 get a kernel with the dim known at compile
 * time; any other dim gets the generic loop, which GCC also vectorises.
 * A store of encoded rows (inference) goes to quant/qpool.c's fused
 * dequantize-and-pool kernel, which sums in the same order.
 */
#include <omp.h>
#include <string.h>

#include "core/parallel.h"
#include "lookup/lookup.h"
#include "quant/qpool.h"
#include "quant/quant.h"

#define PREFETCH 16 /* route.h pads row[] with EMBER_ROUTE_PAD valid rows past n */
_Static_assert(PREFETCH <= EMBER_ROUTE_PAD, "prefetch reads past the route's padding");
_Static_assert(EMBER_ROW_DROPPED == EMBER_QPOOL_SKIP, "the fused kernel skips dropped entries");

#define POOL_BODY(DIM)                                                                   \
    for (int64_t g = g0; g < g1; g++) {                                                  \
        float acc[DIM];                                                                  \
        for (int32_t k = 0; k < (DIM); k++)                                              \
            acc[k] = 0.0f;                                                               \
        int64_t e1 = r->seg_start[g + 1];                                                \
        for (int64_t e = r->seg_start[g]; e < e1; e++) {                                 \
            {                                                                            \
                const char *pf = (const char *)(values + (int64_t)row[e + PREFETCH] * (DIM)); \
                for (int32_t c = 0; c < (DIM) * 4; c += 64)                              \
                    __builtin_prefetch(pf + c, 0, 0);                                    \
            }                                                                            \
            uint32_t x = row[e];                                                         \
            if (x == EMBER_ROW_DROPPED)                                                  \
                continue;                                                                \
            const float *v = values + (int64_t)x * (DIM);                                \
            if (weight) {                                                                \
                float w = weight[e];                                                     \
                _Pragma("omp simd") for (int32_t k = 0; k < (DIM); k++) acc[k] += w * v[k]; \
            } else {                                                                     \
                _Pragma("omp simd") for (int32_t k = 0; k < (DIM); k++) acc[k] += v[k];  \
            }                                                                            \
        }                                                                                \
        float dv = r->seg_div[g];                                                        \
        float *o = ember_seg_out(r, g, pooled, sequence);                                \
        if (dv == 1.0f) {                                                                \
            _Pragma("omp simd") for (int32_t k = 0; k < (DIM); k++) o[k] = acc[k];       \
        } else if (dv == 0.0f) {                                                         \
            _Pragma("omp simd") for (int32_t k = 0; k < (DIM); k++) o[k] = 0.0f;         \
        } else {                                                                         \
            _Pragma("omp simd") for (int32_t k = 0; k < (DIM); k++) o[k] = acc[k] / dv;  \
        }                                                                                \
    }

#define DEFINE_POOL(NAME, DIM_EXPR)                                                      \
    static void NAME(const ember_route *r, const float *values, int32_t dim, int64_t g0, \
                     int64_t g1, float *pooled, float *sequence)                         \
    {                                                                                    \
        const uint32_t *row = r->row;                                                    \
        const float *weight = r->weighted ? r->weight : NULL;                            \
        (void)dim;                                                                       \
        POOL_BODY(DIM_EXPR)                                                              \
    }

DEFINE_POOL(pool_16, 16)
DEFINE_POOL(pool_32, 32)
DEFINE_POOL(pool_64, 64)
DEFINE_POOL(pool_128, 128)
DEFINE_POOL(pool_256, 256)
DEFINE_POOL(pool_any, dim)

/* Simulated quantization (ember_table_config.quant_*): the same sums, each
 * element read through ember_fake_quant.  One generic kernel: it is a
 * training-time option, its cost is the quantization's, not the gather's. */
static void pool_fq(const ember_route *r, const ember_store *s, int64_t g0, int64_t g1, float *pooled,
                    float *sequence)
{
    const uint32_t *row = r->row;
    const float *weight = r->weighted ? r->weight : NULL, *values = s->values;
    const float lo = s->fq_low, hi = s->fq_high, step = s->fq_step;
    const int32_t dim = s->dim;
    float acc[1024]; /* dim <= 1024 (ember.h) */
    for (int64_t g = g0; g < g1; g++) {
        for (int32_t k = 0; k < dim; k++)
            acc[k] = 0.0f;
        for (int64_t e = r->seg_start[g]; e < r->seg_start[g + 1]; e++) {
            uint32_t x = row[e];
            if (x == EMBER_ROW_DROPPED)
                continue;
            const float *v = values + (int64_t)x * dim;
            float w = weight ? weight[e] : 1.0f;
            for (int32_t k = 0; k < dim; k++) {
                float q = ember_fake_quant(v[k], lo, hi, step);
                acc[k] = weight ? acc[k] + w * q : acc[k] + q;
            }
        }
        float dv = r->seg_div[g];
        float *o = ember_seg_out(r, g, pooled, sequence);
        for (int32_t k = 0; k < dim; k++)
            o[k] = dv == 1.0f ? acc[k] : dv == 0.0f ? 0.0f : acc[k] / dv;
    }
}

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

void ember_pool(const ember_route *r, const ember_store *s, int64_t g0, int64_t g1, float *pooled,
                float *sequence, int threads)
{
    if (g1 <= g0)
        return;
    if (s->encoding) { /* encoded rows: the fused kernel, the same sums (qpool.h) */
        ember_qpool_args a = {(ember_encoding)s->encoding, s->dim, s->qrows, s->qrow_bytes, g1 - g0,
                              r->seg_start + g0, r->row, r->weighted ? r->weight : NULL, r->seg_div + g0,
                              pooled, r->seg_out + g0, sequence};
        ember_qpool(&a, threads);
        return;
    }
    pool_fn fn = pick(s->dim);
    if (threads > 1 && r->seg_start[g1] - r->seg_start[g0] < 4096)
        threads = 1;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = ember_split_segments(r->seg_start, g0, g1, t, nt);
        int64_t hi = ember_split_segments(r->seg_start, g0, g1, t + 1, nt);
        if (s->fq_step > 0)
            pool_fq(r, s, lo, hi, pooled, sequence);
        else
            fn(r, s->values, s->dim, lo, hi, pooled, sequence);
    }
}
