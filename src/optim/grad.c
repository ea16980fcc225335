/*
 * grad.c: backward for one physical table: sum each touched row's gradient
 * over its occurrences in the fixed order, then apply the fused optimizer.
 *
 * The route's keys (row << 32 | entry) are sorted stably by row, so a row's
 * occurrences sit together in entry order, which is sample order (route.h).
 * Unique rows are split over threads by occurrence count, each row wholly
 * owned by one thread: no locks, no atomics, and the same sums in the same
 * order for any thread count.  Each occurrence's source (upstream row offset
 * and scale) is computed in entry order, then gathered into key order, so
 * the aggregation loop reads them sequentially and prefetches upstream rows
 * from that sequence.  With debug checks, a first pass computes every
 * gradient and checks it before the second pass changes any row.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "collection/collection.h"
#include "core/parallel.h"
#include "exchange/exchange.h"
#include "lookup/lookup.h"
#include "optim/optim.h"

#define PREFETCH_ROWS 4 /* runs ahead: table row and state            */
#define PREFETCH_D 16   /* occurrences ahead: the upstream gradient row */

/* Per-entry gradient source in entry order (a sequential pass): the offset
 * of the entry's upstream row and weight / divisor. */
static void build_sources(ember_route *r, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t g = 0; g < r->nseg; g++) {
        float dv = r->seg_div[g];
        for (int64_t e = r->seg_start[g]; e < r->seg_start[g + 1]; e++) {
            float w = r->weighted ? r->weight[e] : 1.0f;
            r->src_off[e] = r->seg_out[g];
            r->src_scale[e] = ember_grad_scale(dv, w);
        }
    }
}

/* Upstream row of a source offset (as seg_out: >= 0 pooled, else sequence). */
static inline const float *src_row(int64_t off, const float *dp, const float *ds)
{
    return off >= 0 ? dp + off : ds + (-1 - off);
}

/* Sources in sorted-key order: a gather whose iterations are independent,
 * so the CPU overlaps its cache misses; the aggregation loop then reads its
 * sources sequentially. */
static void sort_sources(ember_route *r, int64_t n, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t j = 0; j < n; j++) {
        uint32_t e = (uint32_t)r->keys[j];
        r->sorted_off[j] = r->src_off[e];
        r->sorted_scale[j] = r->src_scale[e];
    }
}

/* Summed gradient of the occurrences [j0, j1) of one row into g[dim];
 * jend bounds the prefetches (end of this thread's keys). */
static inline void row_gradient(const ember_route *r, int64_t j0, int64_t j1, int64_t jend, int32_t dim,
                                const float *dp, const float *ds, float *restrict g)
{
    memset(g, 0, sizeof(float) * (size_t)dim);
    for (int64_t j = j0; j < j1; j++) {
        if (j + PREFETCH_D < jend) {
            const char *pd = (const char *)src_row(r->sorted_off[j + PREFETCH_D], dp, ds);
            for (int32_t b = 0; b < dim * 4; b += 64)
                __builtin_prefetch(pd + b, 0, 3);
        }
        ember_grad_accumulate(g, r->sorted_scale[j], src_row(r->sorted_off[j], dp, ds), dim);
    }
}

/* The fused update of runs [u0, u1): each row's summed gradient, then its
 * optimizer step.  One kernel per dim known at compile time (as the pool's):
 * the accumulation and the update unroll into whole-register loops. */
typedef struct apply_args {
    const ember_route *r;
    const uint64_t *starts;
    const float *dp, *ds;
    float *values, *state;
    int32_t sf, dim;
    const ember_optim_step *o;
} apply_args;

#define DEFINE_APPLY(NAME, DIM)                                                                   \
    static void NAME(const apply_args *a, int64_t u0, int64_t u1)                                 \
    {                                                                                             \
        const ember_route *r = a->r;                                                              \
        const uint64_t *starts = a->starts, *keys = r->keys;                                      \
        float *values = a->values, *state = a->state;                                             \
        const int32_t sf = a->sf, dim = a->dim;                                                   \
        (void)dim;                                                                                \
        int64_t jend = (int64_t)starts[u1];                                                       \
        for (int64_t u = u0; u < u1; u++) {                                                       \
            if (u + PREFETCH_ROWS < u1) {                                                         \
                uint32_t pr = (uint32_t)(keys[starts[u + PREFETCH_ROWS]] >> 32);                  \
                const char *pv = (const char *)(values + (int64_t)pr * (DIM));                    \
                for (int32_t b = 0; b < (DIM) * 4; b += 64)                                       \
                    __builtin_prefetch(pv + b, 1, 3);                                             \
                const char *ps = (const char *)(state + (int64_t)pr * sf);                        \
                for (int32_t b = 0; b < sf * 4; b += 64)                                          \
                    __builtin_prefetch(ps + b, 1, 3);                                             \
            }                                                                                     \
            float g[1024]; /* dim <= 1024 (ember.h) */                                            \
            row_gradient(r, (int64_t)starts[u], (int64_t)starts[u + 1], jend, (DIM), a->dp, a->ds, g); \
            uint32_t row = (uint32_t)(keys[starts[u]] >> 32);                                     \
            ember_optim_row(a->o, (DIM), values + (int64_t)row * (DIM),                           \
                            sf ? state + (int64_t)row * sf : NULL, g);                            \
        }                                                                                         \
    }

DEFINE_APPLY(apply_16, 16)
DEFINE_APPLY(apply_32, 32)
DEFINE_APPLY(apply_64, 64)
DEFINE_APPLY(apply_128, 128)
DEFINE_APPLY(apply_256, 256)
DEFINE_APPLY(apply_any, dim)

typedef void (*apply_fn)(const apply_args *, int64_t, int64_t);

static apply_fn pick_apply(int32_t dim)
{
    switch (dim) {
    case 16: return apply_16;
    case 32: return apply_32;
    case 64: return apply_64;
    case 128: return apply_128;
    case 256: return apply_256;
    default: return apply_any;
    }
}

/* Starts of the runs of equal rows in the sorted keys; returns the number of
 * runs.  starts[u] = first key of run u, starts[nu] = n. */
static int64_t find_runs(const uint64_t *keys, int64_t n, uint64_t *starts, int threads)
{
    int64_t nu;
    EMBER_PARALLEL_COMPACT(&nu, n, threads, 0, i == 0 || (keys[i] >> 32) != (keys[i - 1] >> 32),
                           starts[k] = (uint64_t)i);
    starts[nu] = (uint64_t)n;
    return nu;
}

/* First run whose first key is >= j. */
static int64_t run_at(const uint64_t *starts, int64_t nu, int64_t j)
{
    int64_t lo = 0, hi = nu;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)starts[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Debug pass: the first non-finite gradient, as (run, entry); -1 if none. */
static int64_t check_gradients(const ember_route *r, int32_t dim, const uint64_t *starts, int64_t nu,
                               const float *dp, const float *ds, int threads)
{
    int64_t bad = -1;
#pragma omp parallel num_threads(threads)
    {
        float g[1024];
        int64_t mine = -1;
#pragma omp for schedule(static)
        for (int64_t u = 0; u < nu; u++) {
            if (mine >= 0)
                continue;
            row_gradient(r, (int64_t)starts[u], (int64_t)starts[u + 1], (int64_t)starts[u + 1], dim, dp,
                         ds, g);
            for (int32_t k = 0; k < dim; k++)
                if (!isfinite(g[k])) {
                    mine = u;
                    break;
                }
        }
#pragma omp critical
        if (mine >= 0 && (bad < 0 || mine < bad))
            bad = mine;
    }
    return bad;
}

/* Row-wise Adagrad on a COLUMN slice: the mean of g^2 runs over the whole
 * row, whose columns live on every rank.  Each rank sums its real columns
 * per touched row (after weight decay), the sums are all-gathered and added
 * in rank order, then every rank applies the same multiplier to its slice.
 * Every rank holds the same touched rows (COLUMN ids are all-gathered). */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int apply_rowwise_column(ember_collection *c, const ember_grad_target *gt, const uint64_t *starts,
                                int64_t nu, const float *dp, const float *ds, const ember_optim_step *o)
{
    ember_route *r = gt->route;
    int32_t dim = gt->dim, W = c->world->size;
    float *g_all = malloc(sizeof(float) * ((size_t)nu * (size_t)dim + 1));
    float *sq = malloc(sizeof(float) * ((size_t)nu * (size_t)(W + 1) + 1));
    /* runs in row order: an SSD store's runs come in slot order, which
     * differs between ranks; (row << 32 | run) sorted gives every rank the
     * same order */
    uint64_t *ord = malloc(sizeof(uint64_t) * ((size_t)nu + 1));
    int st = g_all && sq && ord ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory for %lld rows", (long long)nu);
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK) {
        free(g_all);
        free(sq);
        free(ord);
        return st;
    }
    for (int64_t u = 0; u < nu; u++)
        ord[u] = (uint64_t)ember_store_row_of(gt->store, (uint32_t)(r->keys[starts[u]] >> 32)) << 32 | (uint64_t)u;
    if (gt->store->staged)
        qsort(ord, (size_t)nu, sizeof(uint64_t), cmp_u64);
    float *values = gt->store->values, *state = gt->store->state;
    float *mine = sq + (int64_t)nu * W;
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (int64_t k = 0; k < nu; k++) {
        int64_t u = (int64_t)(uint32_t)ord[k];
        float *g = g_all + u * dim;
        uint32_t row = (uint32_t)(r->keys[starts[u]] >> 32);
        row_gradient(r, (int64_t)starts[u], (int64_t)starts[u + 1], (int64_t)starts[u + 1], dim, dp, ds, g);
        ember_optim_decay(o, gt->real_cols, values + (int64_t)row * dim, g);
        mine[k] = ember_optim_sumsq(g, gt->real_cols);
    }
    if (ember_comm_allgather(c->world, mine, (int64_t)sizeof(float) * nu, sq) != EMBER_OK) {
        free(g_all);
        free(sq);
        free(ord);
        c->panicked = 1;
        return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
    }
#pragma omp parallel for schedule(static) num_threads(c->threads)
    for (int64_t k = 0; k < nu; k++) {
        int64_t u = (int64_t)(uint32_t)ord[k];
        float total = 0.0f;
        for (int32_t q = 0; q < W; q++)
            total += sq[(int64_t)q * nu + k];
        uint32_t row = (uint32_t)(r->keys[starts[u]] >> 32);
        ember_optim_rowwise(o, gt->real_cols, values + (int64_t)row * dim, state + row, g_all + u * dim,
                            total / (float)gt->full_dim);
    }
    free(g_all);
    free(sq);
    free(ord);
    return EMBER_OK;
}

int ember_grad_apply(ember_collection *c, int32_t p, const float *dp, const float *ds, int64_t step,
                     int check_only)
{
    ember_ptable *pt = &c->ptables[p];
    ember_grad_target gt = {&pt->route, pt->store, &pt->opt, pt->dim, pt->rows, 1, 0, 0, 0};
    return ember_grad_route(c, &gt, dp, ds, step, check_only);
}

int ember_grad_route(ember_collection *c, const ember_grad_target *gt, const float *dp, const float *ds,
                     int64_t step, int check_only)
{
    ember_route *r = gt->route;
    ember_store *s = gt->store;
    int32_t dim = gt->dim;
    int st = ember_route_sort_rows(c, r, gt->rows, 1);
    if (st != EMBER_OK)
        return st;
    int64_t n = r->nkeys;
    if (n == 0 && !gt->full_dim)
        return EMBER_OK;
    uint64_t *starts = r->keys_tmp; /* free after the sort */
    int threads = c->threads;
    if (n < 2048)
        threads = 1;
    int64_t nu = n ? find_runs(r->keys, n, starts, threads) : 0;
    if (!r->sources_ready) { /* once per routed batch, also with the debug pass */
        build_sources(r, threads);
        sort_sources(r, n, threads);
        r->sources_ready = 1;
    }
    if (check_only) {
        int64_t bad = check_gradients(r, dim, starts, nu, dp, ds, threads);
        if (bad >= 0) {
            uint32_t row = (uint32_t)(r->keys[starts[bad]] >> 32);
            uint32_t e = (uint32_t)r->keys[starts[bad]];
            int64_t seg = ember_route_segment_of(r, e);
            const ember_lfeature *fe = &c->features[r->seg_feature[seg]];
            int64_t phys = (int64_t)ember_store_row_of(gt->store, row) * gt->row_stride + gt->row_base;
            return ember_fail(c, EMBER_ENUMERIC,
                              "table '%s' row %lld: gradient is not finite (feature '%s', sample %d); "
                              "no table was changed",
                              c->tables[fe->table].cfg.name, (long long)(phys - fe->offset), fe->name,
                              r->seg_sample[seg]);
        }
        return EMBER_OK;
    }
    c->stats.last_unique_rows += nu;
    ember_optim_step o = ember_optim_prepare(gt->opt, step, c->lr_scale);
    if (gt->full_dim)
        return apply_rowwise_column(c, gt, starts, nu, dp, ds, &o);
    apply_args a = {r, starts, dp, ds, s->values, s->state, s->state_floats, dim, &o};
    apply_fn fn = pick_apply(dim);
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t u0 = t == 0 ? 0 : run_at(starts, nu, n * t / nt);
        int64_t u1 = t == nt - 1 ? nu : run_at(starts, nu, n * (t + 1) / nt);
        fn(&a, u0, u1);
    }
    return EMBER_OK;
}
