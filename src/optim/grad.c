/*
 * grad.c: the backward's kernel (grad.h): sum each touched row's gradient
 * over its occurrences in the fixed order, then apply the fused optimizer.
 *
 * Each occurrence's source (upstream row offset and scale) is computed in
 * entry order, then gathered into key order, so the aggregation loop reads
 * them sequentially and prefetches upstream rows from that sequence.  With
 * debug checks, the step first computes every gradient and checks it
 * (ember_grad_first_nonfinite) before any row changes.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "core/rng.h"
#include "optim/grad.h"
#include "quant/round.h"

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
    /* half rows (store.h's qrows of encoding enc) and half state (qstate
     * of senc), rounded by rd */
    uint8_t *qrows;
    int enc;
    uint16_t *qstate;
    int senc;
    const ember_grad_rounding *rd;
    const uint32_t *slot_row; /* staged store: a slot's local row */
} apply_args;

/* A row's state for the update: fp32 state in place, or half state
 * decoded into buf (dim <= 1024: at most 2048 elements, ember.h). */
static inline float *state_in(const apply_args *a, uint32_t row, float *buf)
{
    if (!a->sf)
        return NULL;
    if (!a->qstate)
        return a->state + (int64_t)row * a->sf;
    ember_half_decode_row(a->senc, a->sf, a->qstate + (int64_t)row * a->sf, buf);
    return buf;
}

/* HALF = 0: fp32 rows, updated in place.  HALF = 1: half rows (store.h's
 * qrows of encoding enc), each decoded to fp32, updated, written back
 * rounded by rd (quant/round.h).  Half state (qstate) is read and written
 * back the same way, whatever the rows. */
#define DEFINE_APPLY(NAME, DIM, HALF)                                                             \
    static void NAME(const apply_args *a, int64_t u0, int64_t u1)                                 \
    {                                                                                             \
        const ember_route *r = a->r;                                                              \
        const uint64_t *starts = a->starts, *keys = r->keys;                                      \
        const int32_t sf = a->sf, dim = a->dim;                                                   \
        (void)dim;                                                                                \
        const char *base = HALF ? (const char *)a->qrows : (const char *)a->values;               \
        const int64_t row_bytes = (int64_t)(DIM) * (HALF ? 2 : 4);                                \
        const char *sbase = a->qstate ? (const char *)a->qstate : (const char *)a->state;         \
        const int64_t state_bytes = (int64_t)sf * (a->qstate ? 2 : 4);                            \
        int64_t jend = (int64_t)starts[u1], clips[2] = {0, 0};                                    \
        for (int64_t u = u0; u < u1; u++) {                                                       \
            if (u + PREFETCH_ROWS < u1) {                                                         \
                uint32_t pr = (uint32_t)(keys[starts[u + PREFETCH_ROWS]] >> 32);                  \
                const char *pv = base + (int64_t)pr * row_bytes;                                  \
                for (int64_t b = 0; b < row_bytes; b += 64)                                       \
                    __builtin_prefetch(pv + b, 1, 3);                                             \
                if (HALF && row_bytes % 64) /* such half rows are not line-aligned */             \
                    __builtin_prefetch(pv + row_bytes - 1, 1, 3);                                 \
                const char *ps = sbase + (int64_t)pr * state_bytes;                               \
                for (int64_t b = 0; b < state_bytes; b += 64)                                     \
                    __builtin_prefetch(ps + b, 1, 3);                                             \
            }                                                                                     \
            float g[1024], hw[HALF ? 1024 : 1], sbuf[2048]; /* dim <= 1024 (ember.h) */           \
            row_gradient(r, (int64_t)starts[u], (int64_t)starts[u + 1], jend, (DIM), a->dp, a->ds, g); \
            uint32_t row = (uint32_t)(keys[starts[u]] >> 32);                                     \
            uint32_t local = a->slot_row ? a->slot_row[row] : row;                                \
            float *st = state_in(a, row, sbuf);                                                   \
            uint16_t *hr = HALF ? (uint16_t *)a->qrows + (int64_t)row * (DIM) : NULL;             \
            float *w = HALF ? hw : a->values + (int64_t)row * (DIM);                              \
            if (HALF)                                                                             \
                ember_half_decode_row(a->enc, (DIM), hr, hw);                                     \
            ember_optim_clip(a->o, (DIM), g, clips);                                              \
            ember_optim_row(a->o, (DIM), w, st, g);                                               \
            if (HALF)                                                                             \
                ember_half_encode_row(a->enc, a->rd->stochastic,                                  \
                                      ember_grad_round_bits(a->rd, local, EMBER_ROUND_ROW),       \
                                      a->rd->col0, (DIM), hw, hr);                                \
            if (a->qstate)                                                                        \
                ember_grad_round_state(a->rd, a->senc, -1, local, (DIM), sf, st,                  \
                                       a->qstate + (int64_t)row * sf);                            \
        }                                                                                         \
        ember_optim_count_clips(a->o, clips);                                                     \
    }

#define DEFINE_APPLY_DIMS(P, HALF)                                                                \
    DEFINE_APPLY(P##16, 16, HALF)                                                                 \
    DEFINE_APPLY(P##32, 32, HALF)                                                                 \
    DEFINE_APPLY(P##64, 64, HALF)                                                                 \
    DEFINE_APPLY(P##128, 128, HALF)                                                               \
    DEFINE_APPLY(P##256, 256, HALF)                                                               \
    DEFINE_APPLY(P##any, dim, HALF)

DEFINE_APPLY_DIMS(apply_, 0)
DEFINE_APPLY_DIMS(apply_half_, 1)

typedef void (*apply_fn)(const apply_args *, int64_t, int64_t);

static apply_fn pick_apply(int32_t dim, int half)
{
    static const apply_fn fns[2][6] = {
        {apply_16, apply_32, apply_64, apply_128, apply_256, apply_any},
        {apply_half_16, apply_half_32, apply_half_64, apply_half_128, apply_half_256, apply_half_any},
    };
    int d = dim == 16 ? 0 : dim == 32 ? 1 : dim == 64 ? 2 : dim == 128 ? 3 : dim == 256 ? 4 : 5;
    return fns[half][d];
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


ember_grad_runs ember_grad_runs_of(ember_route *r, int64_t rows, int64_t *sort_hist, int threads)
{
    ember_route_sort_rows(r, rows, 1, sort_hist, threads);
    ember_grad_runs u;
    u.n = r->nkeys;
    u.starts = r->keys_tmp; /* free after the sort */
    u.threads = u.n < 2048 ? 1 : threads;
    u.nu = 0;
    if (u.n == 0) /* no runs: their sources would never be read */
        return u;
    u.nu = find_runs(r->keys, u.n, r->keys_tmp, u.threads);
    if (!r->sources_ready) { /* once per routed batch, also with the debug pass */
        build_sources(r, u.threads);
        sort_sources(r, u.n, u.threads);
        r->sources_ready = 1;
    }
    return u;
}

int64_t ember_grad_first_nonfinite(const ember_route *r, const ember_grad_runs *u, int32_t dim, const float *dp,
                                   const float *ds)
{
    return check_gradients(r, dim, u->starts, u->nu, dp, ds, u->threads);
}

uint64_t ember_grad_round_bits(const ember_grad_rounding *rd, uint32_t local, int stream)
{
    if (!rd->stochastic)
        return 0;
    if (rd->slot_key) /* a dynamic table: one logical table, rows by key */
        return ember_rng_bits(rd->tables[rd->ids[0]].rng_key, rd->slot_key[local], (uint64_t)rd->step,
                              (uint64_t)stream);
    return ember_grad_round_bits_phys(rd, (int64_t)local * rd->row_stride + rd->row_base, stream);
}

uint64_t ember_grad_round_bits_phys(const ember_grad_rounding *rd, int64_t phys, int stream)
{
    if (!rd->stochastic)
        return 0;
    int32_t lo = 0, hi = rd->num_tables - 1; /* the last table with offset <= phys */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (rd->tables[rd->ids[mid]].offset <= phys)
            lo = mid;
        else
            hi = mid - 1;
    }
    const ember_ltable *lt = &rd->tables[rd->ids[lo]];
    return ember_rng_bits(lt->rng_key, (uint64_t)(phys - lt->offset), (uint64_t)rd->step, (uint64_t)stream);
}

void ember_grad_round_state(const ember_grad_rounding *rd, int enc, int64_t phys, uint32_t local, int32_t dim,
                            int32_t sf, const float *st, uint16_t *out)
{
    uint64_t h[2] = {0, 0}; /* Adagrad: 1 vector, Adam: 2 */
    for (int32_t j = 0; rd->stochastic && j < 2 && (int64_t)j * dim < sf; j++)
        h[j] = phys >= 0 ? ember_grad_round_bits_phys(rd, phys, EMBER_ROUND_STATE + j)
                         : ember_grad_round_bits(rd, local, EMBER_ROUND_STATE + j);
    ember_half_encode_state(enc, rd->stochastic, h, rd->col0, dim, sf, st, out);
}

void ember_grad_apply_runs(const ember_route *r, const ember_grad_runs *u, ember_store *s, int32_t dim,
                           const float *dp, const float *ds, const ember_optim_step *o,
                           const ember_grad_rounding *rd)
{
    const uint64_t *starts = u->starts;
    int64_t n = u->n, nu = u->nu;
    int half = ember_enc_half(s->encoding);
    apply_args a = {r,         starts,      dp, ds, s->values, s->state, s->state_floats, dim, o,
                    s->qrows,  s->encoding, s->qstate, s->state_enc, rd, s->staged ? s->slot_row : NULL};
    apply_fn fn = pick_apply(dim, half);
#pragma omp parallel num_threads(u->threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t u0 = t == 0 ? 0 : run_at(starts, nu, n * t / nt);
        int64_t u1 = t == nt - 1 ? nu : run_at(starts, nu, n * (t + 1) / nt);
        fn(&a, u0, u1);
    }
}

void ember_grad_run_gradient(const ember_route *r, const ember_grad_runs *u, int64_t run, int32_t dim,
                             const float *dp, const float *ds, float *g)
{
    int64_t j0 = (int64_t)u->starts[run], j1 = (int64_t)u->starts[run + 1];
    row_gradient(r, j0, j1, j1, dim, dp, ds, g);
}
