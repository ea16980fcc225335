/*
 * backward_limit.c: ember_backward against the plain memory work of the
 * same update, in one process, alternating per batch (as forward_limit.c),
 * to tell how far ember's training step is from the machine's limits.
 *
 *   backward_limit [--tables T --rows R --dim D --batch B --pooling P
 *                   --dist zipf|uniform --alpha A --seed S --batches N --threads K
 *                   --workload NAME --optimizer sgd|rowwise_adagrad]  (default: W1, sgd)
 *
 * Per batch (fresh ids from ember_synth, a fixed random d_pooled [B x T*D]):
 *  (a) ember_backward (sort, runs, sources, fused optimizer), timed alone;
 *  (b) the plain fused update, the occurrences grouped by row beforehand
 *      (untimed qsort of (stacked row << 32 | entry): ember's order, rows
 *      ascending, a row's occurrences in sample order): per distinct row, the
 *      sum of its d_pooled slices (PF occurrences prefetched ahead), then the
 *      optimizer's row update (row and state PFR rows ahead).  No sorting:
 *      the floor of ember's fused loop;
 *  (c) the same distinct rows read and written (w -= constant), no d_pooled:
 *      the table's random read-modify-write floor;
 *  (d) a plain parallel LSD radix sort of the same keys by the row bits
 *      (digits up to 11 bits), beside what ember spends sorting (not exposed:
 *      (a) - (b) bounds ember's whole overhead).
 * (b) and (c) run on ember's own table and state (stacked: table t at row
 * t * R), so they have its page mode; the values drift a little faster, which
 * changes no timing.  Each of (a), (b), (c) follows an untimed ember_forward
 * of the batch, so each finds the rows as a training step's backward does.
 * (b) and (c) run on --threads OpenMP threads, each a contiguous range of
 * distinct rows ((b) split by occurrences, as ember; (c) by rows), with the
 * dim a compile-time constant.  Before timing, one batch checks (b) against
 * ember (rows and state saved, ember steps, rows put back, (b) steps: equal
 * to 1e-5 relative).  One JSON line of medians after 3 warm-up batches.
 * Uses library internals, so it is a benchmark, not a tool.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "bench_util.h"
#include "limit_setup.h"
#include "collection/collection.h"

#define PF 16 /* occurrences ahead: d_pooled slices */
#define PFR 4 /* distinct rows ahead: table row and state */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A batch's occurrences grouped by row: keys (row << 32 | entry) in entry
 * order and sorted; distinct row u is urow[u], its occurrences [start[u],
 * start[u + 1]) in sorted order, occurrence i's d_pooled slice at doff[i]. */
typedef struct groups {
    int64_t n, nu;
    uint64_t *keys, *sorted;
    int64_t *urow, *start;
    uint32_t *doff;
} groups;

/* Entry e = (b * T + t) * P + j (sample, feature, position: ember's order). */
static void group(groups *g, const int64_t *ids, const ember_collection *c, int32_t T, int32_t B, int32_t P,
                  int32_t D)
{
    for (int32_t t = 0; t < T; t++)
        for (int32_t b = 0; b < B; b++)
            for (int32_t j = 0; j < P; j++) {
                uint64_t e = ((uint64_t)b * T + t) * P + j;
                g->keys[e] = (uint64_t)(c->features[t].offset + ids[((int64_t)t * B + b) * P + j]) << 32 | e;
            }
    memcpy(g->sorted, g->keys, sizeof(uint64_t) * (size_t)g->n);
    qsort(g->sorted, (size_t)g->n, sizeof(uint64_t), cmp_u64);
    g->nu = 0;
    for (int64_t i = 0; i < g->n; i++) {
        int64_t row = (int64_t)(g->sorted[i] >> 32);
        if (i == 0 || row != g->urow[g->nu - 1]) {
            g->urow[g->nu] = row;
            g->start[g->nu++] = i;
        }
        g->doff[i] = (uint32_t)((uint32_t)g->sorted[i] / (uint32_t)P * (uint32_t)D);
    }
    g->start[g->nu] = g->n;
}

/* First distinct row whose first occurrence is >= j. */
static int64_t run_at(const int64_t *start, int64_t nu, int64_t j)
{
    int64_t lo = 0, hi = nu;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (start[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void prefetch_row(const float *p, int bytes)
{
    for (int c = 0; c < bytes; c += 64)
        __builtin_prefetch((const char *)p + c, 1, 3);
}

/* The distinct rows of g (and their row-wise state, or zeros without st)
 * copied out of the table into buf [nu x D, then nu states], or back (put). */
static void rows_copy(float *buf, float *tab, float *st, const groups *g, int32_t D, int put)
{
    for (int64_t u = 0; u < g->nu; u++) {
        float *r = tab + g->urow[u] * D, *v = buf + u * D, *sv = buf + g->nu * D + u;
        memcpy(put ? r : v, put ? v : r, sizeof(float) * (size_t)D);
        if (put && st)
            st[g->urow[u]] = *sv;
        else if (!put)
            *sv = st ? st[g->urow[u]] : 0.0f;
    }
}

/* (b) the plain fused update of w (and row-wise Adagrad's state st), and
 * (c) the rows alone (w -= bump). */
#define DEFINE_KERNELS(DIM)                                                                       \
    static void update_##DIM(float *w, float *st, const groups *g, const float *dp, int rowwise,  \
                             float lr, float eps, int threads)                                    \
    {                                                                                             \
        _Pragma("omp parallel num_threads(threads)")                                              \
        {                                                                                         \
            int64_t nt = omp_get_num_threads(), me = omp_get_thread_num(), n = g->n, nu = g->nu;  \
            int64_t u0 = me == 0 ? 0 : run_at(g->start, nu, n * me / nt);                         \
            int64_t u1 = me == nt - 1 ? nu : run_at(g->start, nu, n * (me + 1) / nt);             \
            int64_t jend = g->start[u1];                                                          \
            for (int64_t u = u0; u < u1; u++) {                                                   \
                if (u + PFR < u1) {                                                               \
                    prefetch_row(w + g->urow[u + PFR] * (DIM), (DIM) * 4);                        \
                    if (rowwise)                                                                  \
                        __builtin_prefetch(st + g->urow[u + PFR], 1, 3);                          \
                }                                                                                 \
                float acc[DIM];                                                                   \
                for (int k = 0; k < (DIM); k++)                                                   \
                    acc[k] = 0.0f;                                                                \
                for (int64_t j = g->start[u]; j < g->start[u + 1]; j++) {                         \
                    if (j + PF < jend)                                                            \
                        for (int c = 0; c < (DIM) * 4; c += 64)                                   \
                            __builtin_prefetch((const char *)(dp + g->doff[j + PF]) + c, 0, 3);   \
                    const float *d = dp + g->doff[j];                                             \
                    for (int k = 0; k < (DIM); k++)                                               \
                        acc[k] += d[k];                                                           \
                }                                                                                 \
                float *r = w + g->urow[u] * (DIM), mult = lr;                                     \
                if (rowwise) {                                                                    \
                    float sq = 0.0f;                                                              \
                    _Pragma("omp simd reduction(+ : sq)")                                         \
                    for (int k = 0; k < (DIM); k++)                                               \
                        sq += acc[k] * acc[k];                                                    \
                    float s = st[g->urow[u]] + sq / (float)(DIM);                                 \
                    st[g->urow[u]] = s;                                                           \
                    mult = lr / (sqrtf(s) + eps);                                                 \
                }                                                                                 \
                for (int k = 0; k < (DIM); k++)                                                   \
                    r[k] -= mult * acc[k];                                                        \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    static void rmw_##DIM(float *w, const groups *g, float bump, int threads)                     \
    {                                                                                             \
        _Pragma("omp parallel num_threads(threads)")                                              \
        {                                                                                         \
            int64_t nt = omp_get_num_threads(), me = omp_get_thread_num();                        \
            int64_t u0 = g->nu * me / nt, u1 = g->nu * (me + 1) / nt;                             \
            for (int64_t u = u0; u < u1; u++) {                                                   \
                if (u + PFR < u1)                                                                 \
                    prefetch_row(w + g->urow[u + PFR] * (DIM), (DIM) * 4);                        \
                float *r = w + g->urow[u] * (DIM);                                                \
                for (int k = 0; k < (DIM); k++)                                                   \
                    r[k] -= bump;                                                                 \
            }                                                                                     \
        }                                                                                         \
    }
DEFINE_KERNELS(16)
DEFINE_KERNELS(32)
DEFINE_KERNELS(64)
DEFINE_KERNELS(128)
DEFINE_KERNELS(256)

typedef void update_fn(float *, float *, const groups *, const float *, int, float, float, int);
typedef void rmw_fn(float *, const groups *, float, int);
static update_fn *const updates[] = {update_16, update_32, update_64, update_128, update_256};
static rmw_fn *const rmws[] = {rmw_16, rmw_32, rmw_64, rmw_128, rmw_256};

/* (d): stable parallel LSD radix sort of keys[0, n) by bits [32, 32 + bits),
 * tmp the same size, hist threads x 2048; returns the buffer holding the
 * result (keys or tmp). */
static uint64_t *radix_sort(uint64_t *keys, uint64_t *tmp, int64_t *hist, int64_t n, int bits, int threads)
{
    int passes = (bits + 10) / 11, db = passes ? (bits + passes - 1) / passes : 0;
    int64_t nb = (int64_t)1 << db;
    for (int p = 0; p < passes; p++) {
        int shift = 32 + p * db;
#pragma omp parallel num_threads(threads)
        {
            int64_t nt = omp_get_num_threads(), me = omp_get_thread_num();
            int64_t lo = n * me / nt, hi = n * (me + 1) / nt, *h = hist + me * nb;
            memset(h, 0, sizeof(int64_t) * (size_t)nb);
            for (int64_t i = lo; i < hi; i++)
                h[(keys[i] >> shift) & (uint64_t)(nb - 1)]++;
#pragma omp barrier
#pragma omp single
            {
                int64_t sum = 0;
                for (int64_t d = 0; d < nb; d++)
                    for (int64_t q = 0; q < nt; q++) {
                        int64_t cnt = hist[q * nb + d];
                        hist[q * nb + d] = sum;
                        sum += cnt;
                    }
            }
            for (int64_t i = lo; i < hi; i++)
                tmp[h[(keys[i] >> shift) & (uint64_t)(nb - 1)]++] = keys[i];
        }
        uint64_t *x = keys;
        keys = tmp, tmp = x;
    }
    return keys;
}

/* backward_limit's own flag: --optimizer */
static int optimizer_flag(const char *k, const char *v, void *arg)
{
    if (strcmp(k, "--optimizer"))
        return 1;
    *(const char **)arg = v;
    return 0;
}

int main(int argc, char **argv)
{
    limit_shape sh;
    const char *optname = "sgd";
    if (limit_parse("backward_limit", argc, argv, &sh, optimizer_flag, &optname))
        return 2;
    const int32_t T = sh.T, D = sh.D, B = sh.B, P = sh.P, N = sh.N, threads = sh.threads;
    const int64_t R = sh.R;
    int rowwise = !strcmp(optname, "rowwise_adagrad");
    int di = D == 16 ? 0 : D == 32 ? 1 : D == 64 ? 2 : D == 128 ? 3 : 4;
    if (sh.precision != EMBER_PRECISION_FP32) { /* its plain loops update fp32 rows */
        fprintf(stderr, "backward_limit: fp32 rows only (bench_forward_limit --precision measures half rows)\n");
        return 2;
    }
    if ((!rowwise && strcmp(optname, "sgd")) || (double)T * B * P >= 4294967296.0 ||
        (double)T * B * D >= 4294967296.0 || (double)T * R >= 4294967296.0) {
        fprintf(stderr, "backward_limit: bad arguments (optimizer sgd or rowwise_adagrad; tables*batch*pooling, "
                        "tables*batch*dim and tables*rows below 2^32)\n");
        return 2;
    }
    ember_optimizer opt = ember_optimizer_default(rowwise ? EMBER_OPT_ROWWISE_ADAGRAD : EMBER_OPT_SGD);
    ember_collection *c;
    ember_synth *s;
    if (limit_open("backward_limit", &sh, opt, &c, &s))
        return 1;
    ember_store *store = c->ptables[0].store;
    if (c->num_ptables != 1 || !store->values || (rowwise && store->state_floats != 1)) {
        fprintf(stderr, "backward_limit: expected one stacked table in memory\n");
        return 1;
    }
    int64_t n = (int64_t)T * B * P, W = (int64_t)B * T * D;
    int bits = T * R > 1 ? 64 - __builtin_clzll((unsigned long long)(T * R - 1)) : 0;
    float *tab = store->values, *st = store->state, lr = opt.lr, eps = opt.eps;
    float *out = malloc(sizeof(float) * (size_t)W), *dp = malloc(sizeof(float) * (size_t)W);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ sh.seed; /* d_pooled: fixed, uniform on [-1, 1) */
    for (int64_t i = 0; i < W; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        dp[i] = (float)((double)(x >> 40) / 8388608.0 - 1.0);
    }
    groups g = {n, 0, malloc(8 * (size_t)n), malloc(8 * (size_t)n), malloc(8 * (size_t)(n + 1)),
                malloc(8 * (size_t)(n + 1)), malloc(4 * (size_t)n)};
    uint64_t *work = malloc(8 * (size_t)n), *tmp = malloc(8 * (size_t)n);
    int64_t *hist = malloc(sizeof(int64_t) * 2048 * (size_t)threads);
    ember_batch b;

    /* the check: one batch's touched rows after ember's step and after (b)'s */
    char check[200] = "ok";
    ember_synth_next(s, &b);
    group(&g, b.ids, c, T, B, P, D);
    int64_t m = g.nu * (D + 1);
    float *save = malloc(sizeof(float) * (size_t)m), *ref = malloc(sizeof(float) * (size_t)m), *sst = rowwise ? st : NULL;
    rows_copy(save, tab, sst, &g, D, 0);
    if (ember_forward(c, &b, out, NULL) != EMBER_OK || ember_backward(c, dp, NULL) != EMBER_OK) {
        fprintf(stderr, "backward_limit: %s\n", ember_errmsg(c));
        return 1;
    }
    rows_copy(ref, tab, sst, &g, D, 0);
    rows_copy(save, tab, sst, &g, D, 1);
    updates[di](tab, st, &g, dp, rowwise, lr, eps, threads);
    rows_copy(save, tab, sst, &g, D, 0);
    for (int64_t i = 0; i < m; i++)
        if (!(fabsf(save[i] - ref[i]) <= 1e-5f * fmaxf(fabsf(ref[i]), 1e-3f))) {
            int64_t u = i < g.nu * D ? i / D : i - g.nu * D;
            snprintf(check, sizeof check, "row %lld %s %lld: ember %.9g plain %.9g", (long long)g.urow[u],
                     i < g.nu * D ? "col" : "state", (long long)(i < g.nu * D ? i % D : 0), ref[i], save[i]);
            break;
        }
    free(save);
    free(ref);

    double *ta = malloc(sizeof(double) * (size_t)N * 4), *tb = ta + N, *tc_ = ta + 2 * N, *td = ta + 3 * N;
    double sum_nu = 0;
    int sort_ok = 1;
    for (int it = 0; it < N; it++) {
        ember_synth_next(s, &b);
        group(&g, b.ids, c, T, B, P, D); /* untimed */
        if (it >= 3)
            sum_nu += (double)g.nu;
        ember_forward(c, &b, out, NULL);
        double t0 = bench_now();
        if (ember_backward(c, dp, NULL) != EMBER_OK) {
            fprintf(stderr, "backward_limit: %s\n", ember_errmsg(c));
            return 1;
        }
        ta[it] = bench_now() - t0;
        ember_forward(c, &b, out, NULL); /* the rows as (a) found them */
        t0 = bench_now();
        updates[di](tab, st, &g, dp, rowwise, lr, eps, threads);
        tb[it] = bench_now() - t0;
        ember_forward(c, &b, out, NULL);
        t0 = bench_now();
        rmws[di](tab, &g, 1e-7f, threads);
        tc_[it] = bench_now() - t0;
        memcpy(work, g.keys, sizeof(uint64_t) * (size_t)n);
        t0 = bench_now();
        uint64_t *sorted = radix_sort(work, tmp, hist, n, bits, threads);
        td[it] = bench_now() - t0;
        sort_ok &= !memcmp(sorted, g.sorted, sizeof(uint64_t) * (size_t)n);
    }
    int w = 3; /* warm-up */
    double ma = bench_median(ta + w, N - w), mb = bench_median(tb + w, N - w), mc = bench_median(tc_ + w, N - w),
           md = bench_median(td + w, N - w), nu = sum_nu / (N - w);
    double rows_mb = (double)T * (double)R * D * 4 / 1048576.0, huge = bench_huge_mb(tab, (size_t)T * (size_t)R * (size_t)D * 4);
    double row_bytes = nu * D * 4, dp_bytes = (double)W * 4, occ_bytes = (double)n * D * 4;
    printf("{\"bench\":\"backward_limit\",\"workload\":\"%s\",\"tables\":%d,\"rows\":%lld,\"dim\":%d,"
           "\"batch\":%d,\"pooling\":%d,\"dist\":\"%s\",\"alpha\":%g,\"seed\":%llu,\"optimizer\":\"%s\","
           "\"threads\":%d,\"batches\":%d,\"warmup\":%d,"
           "\"ember_backward_ms\":%.3f,\"plain_update_ms\":%.3f,\"rows_rmw_ms\":%.3f,\"plain_sort_ms\":%.3f,"
           "\"ember_vs_plain\":%.3f,\"ember_minus_plain_update_ms\":%.3f,"
           "\"distinct_rows\":%.1f,\"occurrences\":%lld,\"d_pooled_bytes\":%.0f,\"distinct_row_bytes\":%.0f,"
           "\"rmw_rows_per_s\":%.1f,\"rmw_gbytes_per_s\":%.3f,\"plain_update_gbytes_per_s\":%.3f,"
           "\"rows_mb\":%.1f,\"table_huge_mb\":%.1f,\"pages\":\"%s\",\"sort_check\":\"%s\",\"check\":\"%s\"}\n",
           sh.workload, T, (long long)R, D, B, P, sh.zipf ? "zipf" : "uniform", sh.alpha, sh.seed, optname, threads, N, w,
           ma * 1e3, mb * 1e3, mc * 1e3, md * 1e3, (mb + md) / ma, (ma - mb) * 1e3, nu, (long long)n, dp_bytes,
           row_bytes, nu / mc, 2 * row_bytes / mc / 1e9,
           (2 * row_bytes + occ_bytes + (rowwise ? 8 * nu : 0)) / mb / 1e9, rows_mb, huge,
           huge >= 0.5 * rows_mb ? "2M" : "4K", sort_ok ? "ok" : "mismatch", check);
    ember_synth_destroy(s);
    ember_collection_destroy(c);
    free(out), free(dp), free(work), free(tmp), free(hist), free(ta);
    free(g.keys), free(g.sorted), free(g.urow), free(g.start), free(g.doff);
    return 0;
}
