/*
 * keymap.c: the dynamic table's key map alone (src/dyn/keymap.h) against
 * the plain C peer (peer_plain_map.h); bench/peer_absl_map.cc runs the same
 * workload on absl::flat_hash_map.  JSON lines, one per (map, operation,
 * load, threads), with the median of the repetitions.
 *
 *   bench_keymap [--log2-buckets K] [--reps R] [--threads T] [--only ember|plain]
 *
 * Workload (the same in the absl peer): n = load x 2^K random 64-bit keys
 * are inserted; then
 *   find:   batches of 4096 keys drawn uniformly from the inserted ones,
 *           2^22 lookups (every thread takes its share of each batch);
 *   upsert: 2^18 keys, half present, half new (the load grows by at most
 *           2^17 / 2^K), insert-or-find; with T threads each thread takes
 *           the keys of its own sub-maps (ember: 2^s sub-maps; plain and
 *           absl: one map per thread, the keys split by a hash bit).
 * ns_per_key = wall time / keys; mkeys_per_s = its inverse.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "dyn/keymap.h"
#include "peer_plain_map.h"

#define FIND_KEYS (1 << 22)
#define FIND_BATCH 4096
#define UPSERT_KEYS (1 << 18)

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void emit(const char *impl, const char *op, double load, int threads, int64_t n, double ns, int reps)
{
    printf("{\"bench\":\"keymap\",\"impl\":\"%s\",\"op\":\"%s\",\"load\":%.2f,\"threads\":%d,\"keys\":%lld,"
           "\"ns_per_key\":%.2f,\"mkeys_per_s\":%.1f,\"reps\":%d,\"compiler\":\"gcc %d.%d\",\"isa\":\"%s\"}\n",
           impl, op, load, threads, (long long)n, ns, 1e3 / ns, reps, __GNUC__, __GNUC_MINOR__,
#ifdef __AVX512F__
           "avx512"
#elif defined(__AVX2__)
           "avx2"
#else
           "sse2"
#endif
    );
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int K = 23, reps = 5, max_threads = 2;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--log2-buckets") && i + 1 < argc)
            K = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--log2-buckets K] [--reps R] [--threads T] [--only ember|plain]\n", argv[0]);
            return 2;
        }
    }
    static const double loads[] = {0.5, 0.9, 0.95};
    uint64_t buckets = (uint64_t)1 << K;
    uint64_t *queries = malloc(8 * (size_t)FIND_KEYS), *up = malloc(8 * (size_t)UPSERT_KEYS);
    uint32_t *out = malloc(4 * (size_t)(FIND_KEYS > UPSERT_KEYS ? FIND_KEYS : UPSERT_KEYS));
    uint32_t *vals = malloc(4 * (size_t)UPSERT_KEYS);
    for (int i = 0; i < UPSERT_KEYS; i++)
        vals[i] = (uint32_t)i;
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int li = 0; li < 3; li++) {
        double load = loads[li];
        int64_t n = (int64_t)(load * (double)buckets);
        uint64_t seed = 12345 + (uint64_t)li;
        uint64_t *keys = malloc(8 * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            keys[i] = rng(&seed);
        for (int64_t i = 0; i < FIND_KEYS; i++)
            queries[i] = keys[rng(&seed) % (uint64_t)n];
        for (int64_t i = 0; i < UPSERT_KEYS; i++)
            up[i] = i % 2 ? keys[rng(&seed) % (uint64_t)n] : rng(&seed);
        for (int threads = 1; threads <= max_threads; threads++) {
            int32_t sub_bits = threads > 1 ? 1 : 0;
            /* --- ember */
            if (!only || !strcmp(only, "ember")) {
                ember_keymap m;
                /* max_load a hair above `load`: exactly 2^K buckets in all */
                double max_load = load + 0.001 > 0.999 ? 0.999 : load + 0.001;
                if (ember_keymap_init(&m, n, max_load, sub_bits, 99) != 0)
                    return 1;
                for (int64_t i = 0; i < n; i++)
                    ember_keymap_insert(&m, keys[i], (uint32_t)i);
                for (int r = 0; r < reps; r++) {
                    double t0 = bench_now();
#pragma omp parallel num_threads(threads)
                    {
                        int th = omp_get_thread_num(), nt = omp_get_num_threads();
                        for (int64_t b0 = 0; b0 < FIND_KEYS; b0 += FIND_BATCH) {
                            int64_t lo = b0 + FIND_BATCH * th / nt, hi = b0 + FIND_BATCH * (th + 1) / nt;
                            ember_keymap_find_batch(&m, queries + lo, hi - lo, out + lo);
                        }
                    }
                    t[r] = (bench_now() - t0) * 1e9 / FIND_KEYS;
                }
                emit("ember", "find", load, threads, n, median(t, reps), reps);
                for (int r = 0; r < reps; r++) {
                    ember_keymap c;
                    ember_keymap_init(&c, n, max_load, sub_bits, 99);
                    for (int64_t i = 0; i < n; i++)
                        ember_keymap_insert(&c, keys[i], (uint32_t)i);
                    double t0 = bench_now();
#pragma omp parallel num_threads(threads)
                    {
                        int th = omp_get_thread_num(), nt = omp_get_num_threads(), ns = 1 << sub_bits;
                        ember_keymap_upsert_batch(&c, up, vals, UPSERT_KEYS, ns * th / nt, ns * (th + 1) / nt, out);
                    }
                    t[r] = (bench_now() - t0) * 1e9 / UPSERT_KEYS;
                    ember_keymap_free(&c);
                }
                emit("ember", "upsert", load, threads, n, median(t, reps), reps);
                ember_keymap_free(&m);
            }
            /* --- the plain C peer: one map per thread (keys split by a hash bit) */
            if (!only || !strcmp(only, "plain")) {
                plain_map pm[2];
                int shards = threads > 1 ? 2 : 1;
                for (int s = 0; s < shards; s++)
                    plain_init(&pm[s], buckets / (uint64_t)shards);
                for (int64_t i = 0; i < n; i++)
                    plain_upsert(&pm[shards > 1 ? plain_hash(keys[i]) >> 63 : 0], keys[i], (uint32_t)i);
                for (int r = 0; r < reps; r++) {
                    double t0 = bench_now();
#pragma omp parallel num_threads(threads)
                    {
                        int th = omp_get_thread_num(), nt = omp_get_num_threads();
                        for (int64_t b0 = 0; b0 < FIND_KEYS; b0 += FIND_BATCH) {
                            int64_t lo = b0 + FIND_BATCH * th / nt, hi = b0 + FIND_BATCH * (th + 1) / nt;
                            for (int64_t i = lo; i < hi; i++)
                                out[i] = plain_find(&pm[shards > 1 ? plain_hash(queries[i]) >> 63 : 0], queries[i]);
                        }
                    }
                    t[r] = (bench_now() - t0) * 1e9 / FIND_KEYS;
                }
                emit("plain", "find", load, threads, n, median(t, reps), reps);
                for (int s = 0; s < shards; s++)
                    plain_free(&pm[s]);
                for (int r = 0; r < reps; r++) {
                    for (int s = 0; s < shards; s++)
                        plain_init(&pm[s], buckets / (uint64_t)shards);
                    for (int64_t i = 0; i < n; i++)
                        plain_upsert(&pm[shards > 1 ? plain_hash(keys[i]) >> 63 : 0], keys[i], (uint32_t)i);
                    double t0 = bench_now();
#pragma omp parallel num_threads(threads)
                    {
                        int th = omp_get_thread_num();
                        for (int64_t i = 0; i < UPSERT_KEYS; i++) {
                            int s = shards > 1 ? (int)(plain_hash(up[i]) >> 63) : 0;
                            if (s == th || shards == 1)
                                out[i] = plain_upsert(&pm[s], up[i], vals[i]);
                        }
                    }
                    t[r] = (bench_now() - t0) * 1e9 / UPSERT_KEYS;
                    for (int s = 0; s < shards; s++)
                        plain_free(&pm[s]);
                }
                emit("plain", "upsert", load, threads, n, median(t, reps), reps);
            }
        }
        free(keys);
    }
    free(queries);
    free(up);
    free(out);
    free(vals);
    free(t);
    return 0;
}
