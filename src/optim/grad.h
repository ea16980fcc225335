/*
 * grad.h: the backward's kernel over one route and one store
 * (docs/embedding-core.md, "One step"): the route's keys sorted by row,
 * each row's occurrences summed in sample order, the fused optimizer
 * (optim.h) applied to the row.  It takes the route, the store, the
 * optimizer's step constants and a thread count; which route and store,
 * the agreement over ranks and the messages are the step's (step/backward.c).
 *
 * The route's keys (row << 32 | entry) are sorted stably by row, so a row's
 * occurrences sit together in entry order, which is sample order
 * (prep/route.h).  Runs of one row are split over threads by occurrence
 * count, each row wholly owned by one thread: no locks, no atomics, and the
 * same sums in the same order for any thread count.
 */
#ifndef EMBER_OPTIM_GRAD_H
#define EMBER_OPTIM_GRAD_H

#include <stdint.h>

#include "optim/optim.h"
#include "prep/route.h"
#include "table/layout.h"
#include "table/store.h"

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

/* The runs of equal rows in a route's sorted keys (ember_grad_runs_of). */
typedef struct ember_grad_runs {
    const uint64_t *starts; /* [nu + 1] first key of each run (the route's keys_tmp); starts[nu] = n */
    int64_t n, nu;          /* keys, runs (distinct rows) */
    int threads;            /* what the kernels use: 1 below 2048 keys */
} ember_grad_runs;

/* Sorts route r's keys by row (prep/route.h, ember_route_sort_rows: rows
 * below `rows`, sort_hist its scratch), finds the runs of equal rows and,
 * once per routed batch, each occurrence's gradient source (its upstream
 * row's offset and its weight over its divisor) in sorted-key order.  No
 * keys: no runs, nothing else done. */
ember_grad_runs ember_grad_runs_of(ember_route *r, int64_t rows, int64_t *sort_hist, int threads);

/* The first run whose summed gradient (dim floats) is not finite, or -1.
 * dp, ds: the upstream gradients the route's segments point into. */
int64_t ember_grad_first_nonfinite(const ember_route *r, const ember_grad_runs *u, int32_t dim, const float *dp,
                                   const float *ds);

/* How the backward writes a half-precision row back (docs/precision.md):
 * to nearest, or stochastically with the random bits of
 *     h = ember_rng_bits(key of the row's logical table, logical row, step, 3)
 * (core/rng.h) drawn per column by quant/round.h's rule.  A local row's
 * logical coordinates: physical row = local * row_stride + row_base, whose
 * logical table is the last one with offset <= it; column col0 + k.  A
 * dynamic table's row is its key instead (slot_key: the key each local slot
 * holds), so that the bits follow the key whatever slot or rank holds it. */
typedef struct ember_grad_rounding {
    int stochastic;
    int64_t step;
    int64_t row_stride, row_base;
    int32_t col0;
    const ember_ltable *tables; /* the collection's logical tables          */
    const int32_t *ids;         /* [num_tables] this physical table's, by
                                   ascending offset                          */
    int32_t num_tables;
    const uint64_t *slot_key;   /* dynamic table: [local slot] key; else NULL */
} ember_grad_rounding;

/* The generator's streams: a row's values, and its state vector j at
 * EMBER_ROUND_STATE + j (docs/precision.md, "Optimizer state"). */
enum { EMBER_ROUND_ROW = 3, EMBER_ROUND_STATE = 4 };

/* The 64 random bits of local row `local` for this step from `stream` (0
 * when rounding to nearest, which draws none). */
uint64_t ember_grad_round_bits(const ember_grad_rounding *rd, uint32_t local, int stream);
/* The same for physical row phys of the physical table (hot rows' copies). */
uint64_t ember_grad_round_bits_phys(const ember_grad_rounding *rd, int64_t phys, int stream);
/* A row's state st[sf] (vectors of dim columns, sf / dim of them) into
 * halves of encoding enc at out, rounded by rd with the bits of physical
 * row phys, or (phys < 0) of local row `local`. */
void ember_grad_round_state(const ember_grad_rounding *rd, int enc, int64_t phys, uint32_t local, int32_t dim,
                            int32_t sf, const float *st, uint16_t *out);

/* The fused update of every run: each row's summed gradient, then the
 * optimizer step o on the store's row (values and state: direct addressing,
 * a staged store's slots).  A store of half rows (encoding fp16 or bf16)
 * or half state (state_enc) reads each to fp32, updates it and writes it
 * back by rd. */
void ember_grad_apply_runs(const ember_route *r, const ember_grad_runs *u, ember_store *s, int32_t dim,
                           const float *dp, const float *ds, const ember_optim_step *o,
                           const ember_grad_rounding *rd);

/* The summed gradient of run `run` into g[dim] (the fused kernel's sum). */
void ember_grad_run_gradient(const ember_route *r, const ember_grad_runs *u, int64_t run, int32_t dim,
                             const float *dp, const float *ds, float *g);

/* grad_column.c: the update of a COLUMN slice when it needs sums over the
 * row's whole columns, whose other columns live on the other ranks
 * (clip_norm; the row-wise kinds, LAMB and LARS: ember_optim_row_sums), in
 * parts around the caller's all-gathers of the per-run sums (a run's floats
 * together, the runs in `ord` order, the ranks' blocks in rank order):
 *   order      ord[k] = (row << 32 | run), sorted by row when the store is
 *              staged (slots differ between ranks; rows do not)
 *   gradients  per run: the summed gradient into g_all (dim floats a run),
 *              clip_value applied; with clip_norm its sum of squares into
 *              mine[k] (1 float a run)
 *   clip       (clip_norm) g scaled to clip_norm where the ranks' total is above
 *   sums       (a kind with row sums) weight decay and the kind's first half
 *              (LAMB: m, v and its direction over g), its sums into mine
 *              (ember_optim_row_sums floats a run)
 *   apply      the step of any kind, with the ranks' totals (sq: W blocks,
 *              rank q's at q * nu * nsum; nsum 0: none)
 * The gathered sums are added in rank order, so every rank computes the
 * same row floats and the result does not depend on the thread count. */
void ember_grad_column_order(const ember_route *r, const ember_grad_runs *u, const ember_store *s, uint64_t *ord);
void ember_grad_column_gradients(const ember_route *r, const ember_grad_runs *u, int32_t dim, int32_t real_cols,
                                 const uint64_t *ord, const float *dp, const float *ds, const ember_optim_step *o,
                                 float *g_all, float *mine, int threads);
void ember_grad_column_clip(const ember_grad_runs *u, int32_t dim, int32_t real_cols, const uint64_t *ord,
                            const float *sq, int32_t W, float *g_all, const ember_optim_step *o, int threads);
void ember_grad_column_sums(const ember_route *r, const ember_grad_runs *u, ember_store *s, int32_t dim,
                            int32_t real_cols, const uint64_t *ord, const ember_optim_step *o,
                            const ember_grad_rounding *rd, float *g_all, float *mine, int threads);
void ember_grad_column_apply(const ember_route *r, const ember_grad_runs *u, ember_store *s, int32_t dim,
                             int32_t real_cols, int32_t full_dim, const uint64_t *ord, const float *sq, int32_t W,
                             float *g_all, const ember_optim_step *o, const ember_grad_rounding *rd,
                             int threads);

#endif
