/*
 * forward_limit.c: ember_forward against plain gather loops over the same
 * ids and the same table memory, in one process, alternating per batch, so
 * that a noisy shared machine moves both alike.
 *
 *   forward_limit [--tables T --rows R --dim D --batch B --pooling P
 *                  --dist zipf|uniform --batches N --threads K]   (default: W1)
 *
 * Prints one JSON line: medians (ms) of ember_forward, of its routing alone
 * (validate + build), of a table-by-table gather (the shape of the
 * memory-limit probe of docs/PERFORMANCE.md: one table's bags after another) and
 * of a sample-by-sample gather (ember's visiting order), each summing rows
 * with a 16-ahead prefetch into the real [B x T*D] output layout.  Used for
 * the "why" of the forward rows in docs/PERFORMANCE.md.  The gather loops
 * run on one thread: compare them with --threads 1.  Uses library
 * internals (it measures the routing step by itself), so it is a benchmark,
 * not a tool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "core/collection.h"

#define PF 16

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* Both gathers sum each bag's rows into the [B x T*D] output, visiting bags
 * table-major (t outer) or sample-major (b outer), and prefetch the row of
 * the id PF ahead in that same visiting order (exact, across bags).  The
 * dim is a compile-time constant, as in memlimits. */
#define DEFINE_GATHER(DIM)                                                                       \
    static void gather_##DIM(const float *tab, const int64_t *ids, int64_t R, int32_t T,         \
                             int32_t B, int32_t P, int sample_major, float *out)                 \
    {                                                                                            \
        int64_t n = (int64_t)T * B * P;                                                          \
        for (int64_t q = 0; q < (int64_t)T * B; q++) { /* q-th bag visited */                    \
            int32_t t = sample_major ? (int32_t)(q % T) : (int32_t)(q / B);                      \
            int32_t b = sample_major ? (int32_t)(q / T) : (int32_t)(q % B);                      \
            const int64_t *x = ids + ((int64_t)t * B + b) * P;                                   \
            const float *tb = tab + (int64_t)t * R * (DIM);                                      \
            float acc[DIM];                                                                      \
            for (int k = 0; k < (DIM); k++)                                                      \
                acc[k] = 0.0f;                                                                   \
            for (int32_t j = 0; j < P; j++) {                                                    \
                int64_t v = q * P + j + PF; /* visiting index to prefetch */                     \
                if (v < n) {                                                                     \
                    int64_t vq = v / P;                                                          \
                    int32_t vt = sample_major ? (int32_t)(vq % T) : (int32_t)(vq / B);           \
                    int32_t vb = sample_major ? (int32_t)(vq / T) : (int32_t)(vq % B);           \
                    int64_t id = ids[((int64_t)vt * B + vb) * P + v % P];                        \
                    const char *p = (const char *)(tab + ((int64_t)vt * R + id) * (DIM));        \
                    for (int c = 0; c < (DIM) * 4; c += 64)                                      \
                        __builtin_prefetch(p + c, 0, 0);                                         \
                }                                                                                \
                const float *r = tb + x[j] * (DIM);                                              \
                for (int k = 0; k < (DIM); k++)                                                  \
                    acc[k] += r[k];                                                              \
            }                                                                                    \
            memcpy(out + ((int64_t)b * T + t) * (DIM), acc, sizeof acc);                         \
        }                                                                                        \
    }
DEFINE_GATHER(16)
DEFINE_GATHER(32)
DEFINE_GATHER(64)
DEFINE_GATHER(128)
DEFINE_GATHER(256)

static int gather(int32_t D, const float *tab, const int64_t *ids, int64_t R, int32_t T, int32_t B,
                  int32_t P, int sample_major, float *out)
{
    switch (D) {
    case 16: gather_16(tab, ids, R, T, B, P, sample_major, out); return 0;
    case 32: gather_32(tab, ids, R, T, B, P, sample_major, out); return 0;
    case 64: gather_64(tab, ids, R, T, B, P, sample_major, out); return 0;
    case 128: gather_128(tab, ids, R, T, B, P, sample_major, out); return 0;
    case 256: gather_256(tab, ids, R, T, B, P, sample_major, out); return 0;
    default: return -1;
    }
}

int main(int argc, char **argv)
{
    int32_t T = 8, D = 64, B = 4096, P = 20, N = 20, threads = 1;
    int64_t R = 1000000;
    int zipf = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--tables")) T = atoi(v);
        else if (!strcmp(k, "--rows")) R = atoll(v);
        else if (!strcmp(k, "--dim")) D = atoi(v);
        else if (!strcmp(k, "--batch")) B = atoi(v);
        else if (!strcmp(k, "--pooling")) P = atoi(v);
        else if (!strcmp(k, "--dist")) zipf = !strcmp(v, "zipf");
        else if (!strcmp(k, "--batches")) N = atoi(v);
        else if (!strcmp(k, "--threads")) threads = atoi(v);
        else {
            fprintf(stderr, "forward_limit: unknown option %s\n", k);
            return 2;
        }
    }
    if (T < 1 || R < 1 || (D != 16 && D != 32 && D != 64 && D != 128 && D != 256) || B < 1 || P < 1 ||
        N < 4) {
        fprintf(stderr, "forward_limit: bad shape (dim 16, 32, 64, 128 or 256)\n");
        return 2;
    }
    ember_table_config *tc = calloc((size_t)T, sizeof *tc);
    ember_feature_config *fc = calloc((size_t)T, sizeof *fc);
    char (*names)[32] = calloc((size_t)T * 2, 32);
    for (int32_t t = 0; t < T; t++) {
        tc[t] = ember_table_config_default();
        snprintf(names[t], 32, "t%d", t);
        snprintf(names[T + t], 32, "f%d", t);
        tc[t].name = names[t];
        tc[t].rows = R;
        tc[t].dim = D;
        fc[t] = (ember_feature_config){names[T + t], t, EMBER_COMBINER_SUM};
    }
    ember_collection_config cfg = ember_collection_config_default();
    cfg.tables = tc;
    cfg.num_tables = T;
    cfg.features = fc;
    cfg.num_features = T;
    cfg.threads = threads;
    ember_collection *c;
    if (ember_collection_create(&cfg, &c) != EMBER_OK) {
        fprintf(stderr, "forward_limit: %s\n", ember_errmsg(NULL));
        return 1;
    }
    ember_synth_config sc = ember_synth_config_default();
    sc.tables = T;
    sc.rows = R;
    sc.batch_size = B;
    sc.pooling = P;
    sc.zipf = zipf;
    ember_synth *s;
    if (ember_synth_create(&sc, &s) != EMBER_OK)
        return 1;
    int64_t n = (int64_t)T * B * P;
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)B * T * D);
    const float *tab = c->ptables[0].store->values; /* one stacked table: offset t * R */
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
        ember_route_validate(c, &b);
        ember_route_build(c, &b, 0, &dropped);
        tr[it] = bench_now() - t0;
        t0 = bench_now();
        gather(D, tab, ids, R, T, B, P, 0, out);
        tt[it] = bench_now() - t0;
        t0 = bench_now();
        gather(D, tab, ids, R, T, B, P, 1, out);
        ts[it] = bench_now() - t0;
    }
    int w = 3; /* warm-up */
    double mf = median(tf + w, N - w), mr = median(tr + w, N - w), mt = median(tt + w, N - w),
           ms = median(ts + w, N - w);
    printf("{\"bench\":\"forward_limit\",\"tables\":%d,\"rows\":%lld,\"dim\":%d,\"batch\":%d,"
           "\"pooling\":%d,\"dist\":\"%s\",\"threads\":%d,\"batches\":%d,"
           "\"ember_forward_ms\":%.3f,\"ember_route_ms\":%.3f,\"gather_table_major_ms\":%.3f,"
           "\"gather_sample_major_ms\":%.3f,\"ember_vs_table_major\":%.3f}\n",
           T, (long long)R, D, B, P, zipf ? "zipf" : "uniform", threads, N, mf * 1e3, mr * 1e3,
           mt * 1e3, ms * 1e3, mt / mf);
    ember_synth_destroy(s);
    ember_collection_destroy(c);
    free(ids);
    free(out);
    free(tf);
    free(tc);
    free(fc);
    free(names);
    return 0;
}
