/*
 * forward_limit.c: ember_forward against plain gather loops over the same
 * ids and the same table memory, in one process, alternating per batch, so
 * that a noisy shared machine moves both alike.
 *
 *   forward_limit [--tables T --rows R --dim D --batch B --pooling P
 *                  --dist zipf|uniform --alpha A --seed S --batches N
 *                  --threads K --workload NAME --precision fp32|fp16|bf16]
 *                 (default: W1, fp32)
 *
 * Prints one JSON line: medians (ms) of ember_forward, of its routing alone
 * (validate + build), of a table-by-table gather (one table's bags after
 * another) and of a sample-by-sample gather (ember's visiting order), each
 * summing rows with a 16-ahead prefetch into the real [B x T*D] output
 * layout; and the forward limit bench/compare.py divides by: the faster
 * gather's rows (ids) per second, `limit_rows_per_s`.  The gathers run on
 * --threads OpenMP threads, each a contiguous share of the bags in visiting
 * order that prefetches only inside its own share (as one thread would on a
 * share of that size).  The table is ember's own (the same mapping,
 * MADV_HUGEPAGE), so the limit has ember's page mode: "pages" is "2M" when at
 * least half of the table bytes sit in transparent huge pages (AnonHugePages
 * of the table's mappings, "table_huge_mb"), else "4K".  Uses library internals (it measures the
 * routing step by itself), so it is a benchmark, not a tool.
 *
 * With --precision fp16 or bf16 the tables hold half rows (2 bytes per
 * element), and the gathers read them from the same memory, widening each
 * element to fp32 as they add it (16 at a time with AVX-512): the limit of
 * a forward over half rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "bench_util.h"
#include "limit_setup.h"
#include "collection/collection.h"
#include "prep/routing.h"
#include "quant/quant.h"

#define PF 16

/* Both gathers sum each bag's rows into the [B x T*D] output, visiting bags
 * table-major (t outer) or sample-major (b outer), and prefetch the row of
 * the id PF ahead in that same visiting order (exact, across bags).  With
 * several threads each takes a contiguous share [q0, q1) of the visiting
 * order and prefetches only ids of its own share.  The dim is a compile-time
 * constant. */
/* acc[0..dim) += row, row of elements of e bytes: 4 fp32, 2 fp16 (half
 * nonzero: 1 fp16, 2 bf16). */
static inline void add_row(float *acc, const void *row, int32_t dim, int half)
{
    if (!half) {
        const float *r = row;
        for (int32_t k = 0; k < dim; k++)
            acc[k] += r[k];
        return;
    }
    const uint16_t *h = row;
    int32_t k = 0;
#ifdef __AVX512F__
    for (; k + 16 <= dim; k += 16) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(h + k));
        __m512 x = half == 1 ? _mm512_cvtph_ps(v) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
        _mm512_storeu_ps(acc + k, _mm512_add_ps(_mm512_loadu_ps(acc + k), x));
    }
#endif
    for (; k < dim; k++) {
        uint32_t u = (uint32_t)h[k] << 16;
        float x;
        if (half == 1)
            x = ember_half_to_float(h[k]);
        else
            memcpy(&x, &u, 4);
        acc[k] += x;
    }
}

#define DEFINE_GATHER(DIM)                                                                       \
    static void gather_##DIM(const void *tab_, const int64_t *ids, int64_t R, int32_t T,         \
                             int32_t B, int32_t P, int sample_major, int threads, float *out,    \
                             int half)                                                           \
    {                                                                                            \
        const char *tab = tab_;                                                                  \
        const int64_t rb = (int64_t)(DIM) * (half ? 2 : 4);                                      \
        _Pragma("omp parallel num_threads(threads)")                                             \
        {                                                                                        \
            int64_t nq = (int64_t)T * B, nt = omp_get_num_threads(), me = omp_get_thread_num();  \
            int64_t q0 = nq * me / nt, q1 = nq * (me + 1) / nt, end = q1 * P;                    \
            for (int64_t q = q0; q < q1; q++) { /* q-th bag visited */                           \
                int32_t t = sample_major ? (int32_t)(q % T) : (int32_t)(q / B);                  \
                int32_t b = sample_major ? (int32_t)(q / T) : (int32_t)(q % B);                  \
                const int64_t *x = ids + ((int64_t)t * B + b) * P;                               \
                const char *tb = tab + (int64_t)t * R * rb;                                      \
                float acc[DIM];                                                                  \
                for (int k = 0; k < (DIM); k++)                                                  \
                    acc[k] = 0.0f;                                                               \
                for (int32_t j = 0; j < P; j++) {                                                \
                    int64_t v = q * P + j + PF; /* visiting index to prefetch */                 \
                    if (v < end) {                                                               \
                        int64_t vq = v / P;                                                      \
                        int32_t vt = sample_major ? (int32_t)(vq % T) : (int32_t)(vq / B);       \
                        int32_t vb = sample_major ? (int32_t)(vq / T) : (int32_t)(vq % B);       \
                        int64_t id = ids[((int64_t)vt * B + vb) * P + v % P];                    \
                        const char *p = tab + ((int64_t)vt * R + id) * rb;                       \
                        for (int c = 0; c < rb; c += 64)                                         \
                            __builtin_prefetch(p + c, 0, 0);                                     \
                    }                                                                            \
                    add_row(acc, tb + x[j] * rb, (DIM), half);                                   \
                }                                                                                \
                memcpy(out + ((int64_t)b * T + t) * (DIM), acc, sizeof acc);                     \
            }                                                                                    \
        }                                                                                        \
    }
DEFINE_GATHER(16)
DEFINE_GATHER(32)
DEFINE_GATHER(64)
DEFINE_GATHER(128)
DEFINE_GATHER(256)

static int gather(int32_t D, const void *tab, const int64_t *ids, int64_t R, int32_t T, int32_t B,
                  int32_t P, int sample_major, int threads, float *out, int half)
{
    switch (D) {
    case 16: gather_16(tab, ids, R, T, B, P, sample_major, threads, out, half); return 0;
    case 32: gather_32(tab, ids, R, T, B, P, sample_major, threads, out, half); return 0;
    case 64: gather_64(tab, ids, R, T, B, P, sample_major, threads, out, half); return 0;
    case 128: gather_128(tab, ids, R, T, B, P, sample_major, threads, out, half); return 0;
    case 256: gather_256(tab, ids, R, T, B, P, sample_major, threads, out, half); return 0;
    default: return -1;
    }
}

int main(int argc, char **argv)
{
    limit_shape sh;
    if (limit_parse("forward_limit", argc, argv, &sh, NULL, NULL))
        return 2;
    const int32_t T = sh.T, D = sh.D, B = sh.B, P = sh.P, N = sh.N, threads = sh.threads;
    const int64_t R = sh.R;
    ember_collection *c;
    ember_synth *s;
    if (limit_open("forward_limit", &sh, ember_table_config_default().optimizer, &c, &s))
        return 1;
    int64_t n = (int64_t)T * B * P;
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)B * T * D);
    /* one stacked table: offset t * R; half rows: the encoded rows */
    int half = sh.precision == EMBER_PRECISION_FP16 ? 1 : sh.precision == EMBER_PRECISION_BF16 ? 2 : 0;
    const void *tab = half ? (const void *)c->ptables[0].store->qrows : (const void *)c->ptables[0].store->values;
    const double eb = half ? 2 : 4;
    double *tf = malloc(sizeof(double) * (size_t)N * 4), *tr = tf + N, *tt = tf + 2 * N, *ts = tf + 3 * N;
    for (int it = 0; it < N; it++) {
        ember_batch b;
        ember_synth_next(s, &b);
        memcpy(ids, b.ids, sizeof(int64_t) * (size_t)n);
        double t0 = bench_now();
        ember_forward(c, &b, out, NULL);
        tf[it] = bench_now() - t0;
        int64_t dropped;
        t0 = bench_now();
        ember_prep prep = ember_collection_prep(c); /* what routing reads of the collection */
        ember_route_validate(&prep, &b, &c->shape);
        ember_route_build(&prep, &b, &c->shape, 0, &dropped);
        tr[it] = bench_now() - t0;
        t0 = bench_now();
        gather(D, tab, ids, R, T, B, P, 0, threads, out, half);
        tt[it] = bench_now() - t0;
        t0 = bench_now();
        gather(D, tab, ids, R, T, B, P, 1, threads, out, half);
        ts[it] = bench_now() - t0;
    }
    int w = 3; /* warm-up */
    double mf = bench_median(tf + w, N - w), mr = bench_median(tr + w, N - w), mt = bench_median(tt + w, N - w),
           ms = bench_median(ts + w, N - w);
    double rows_mb = (double)T * (double)R * D * eb / 1048576.0,
           huge = bench_huge_mb(tab, (size_t)T * (size_t)R * (size_t)D * (size_t)eb);
    double ids_n = (double)n, best = mt < ms ? mt : ms;
    printf("{\"bench\":\"forward_limit\",\"workload\":\"%s\",\"tables\":%d,\"rows\":%lld,\"dim\":%d,"
           "\"batch\":%d,\"pooling\":%d,\"dist\":\"%s\",\"alpha\":%g,\"seed\":%llu,\"threads\":%d,"
           "\"precision\":\"%s\",\"batches\":%d,\"warmup\":%d,"
           "\"ember_forward_ms\":%.3f,\"ember_route_ms\":%.3f,\"gather_table_major_ms\":%.3f,"
           "\"gather_sample_major_ms\":%.3f,\"ember_vs_table_major\":%.3f,"
           "\"ember_forward_rows_per_s\":%.1f,\"gather_table_major_rows_per_s\":%.1f,"
           "\"gather_sample_major_rows_per_s\":%.1f,\"limit_rows_per_s\":%.1f,\"limit_order\":\"%s\","
           "\"rows_mb\":%.1f,\"table_huge_mb\":%.1f,\"pages\":\"%s\"}\n",
           sh.workload, T, (long long)R, D, B, P, sh.zipf ? "zipf" : "uniform", sh.alpha, sh.seed, threads,
           ember_precision_name(sh.precision), N, w,
           mf * 1e3, mr * 1e3, mt * 1e3, ms * 1e3, mt / mf, ids_n / mf, ids_n / mt, ids_n / ms,
           ids_n / best, mt <= ms ? "table_major" : "sample_major", rows_mb, huge,
           huge >= 0.5 * rows_mb ? "2M" : "4K");
    ember_synth_destroy(s);
    ember_collection_destroy(c);
    free(ids);
    free(out);
    free(tf);
    return 0;
}
