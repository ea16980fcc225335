/*
 * backward.c: ember_backward, in a world of one and over the world
 * (docs/embedding-core.md, "One step"; docs/distributed.md):
 *
 *   checks (a forward first, buffers, fp32 rows; debug: finite upstream)
 *   -> [gradients to the rows' owners (exchange/xchg_bwd.c), hot rows'
 *      sums along the ranks (exchange/hot.c)]
 *   -> per physical table: sort the route by row, sum in sample order,
 *      fused optimizer (optim/grad.h)
 *
 * What the kernel leaves to this file: which route and store, the
 * statistics, the all-gathers of row sums on a COLUMN slice, and the
 * messages that name a table, row, feature and sample.  With debug checks,
 * every table's gradients are checked before any table changes.
 */
#include <math.h>
#include <stdlib.h>

#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "exchange/xchg.h"
#include "optim/grad.h"
#include "quant/quant.h"
#include "step/step.h"

/* What a backward aggregates into: a route over the rows of a store (this
 * rank's own route, or the entries an owner received).  Error messages name
 * physical row local * row_stride + row_base.  full_dim > 0 marks an
 * update on a COLUMN slice (real_cols real columns of full_dim) that needs
 * sums over the row, from the other ranks' slices too. */
typedef struct grad_target {
    ember_route *route;
    ember_store *store;
    const ember_optimizer *opt;
    int32_t dim;
    int64_t rows;
    int64_t row_stride, row_base;
    int32_t full_dim, real_cols;
    int32_t ptable;
} grad_target;

/* A half-precision table's rounding for step `step` (optim/grad.h). */
static ember_grad_rounding rounding_of(const ember_collection *c, const grad_target *gt, int64_t step)
{
    const ember_ptable *pt = &c->ptables[gt->ptable];
    const ember_table_config *first = &c->tables[pt->tables[0]].cfg;
    return (ember_grad_rounding){first->rounding == EMBER_ROUND_STOCHASTIC, step, gt->row_stride, gt->row_base,
                                 pt->col0, c->tables, pt->tables, pt->num_tables,
                                 pt->dyn ? pt->dyn->d.slot_key : NULL};
}

/* The message of a non-finite gradient in run `bad`: table, row, feature,
 * sample. */
static int nonfinite_gradient(ember_collection *c, const grad_target *gt, const ember_grad_runs *u, int64_t bad)
{
    const ember_route *r = gt->route;
    uint32_t row = (uint32_t)(r->keys[u->starts[bad]] >> 32);
    uint32_t e = (uint32_t)r->keys[u->starts[bad]];
    int64_t seg = ember_route_segment_of(r, e);
    const ember_lfeature *fe = &c->features[r->seg_feature[seg]];
    int64_t phys = (int64_t)ember_store_row_of(gt->store, row) * gt->row_stride + gt->row_base;
    return ember_fail(c, EMBER_ENUMERIC,
                      "table '%s' row %lld: gradient is not finite (feature '%s', sample %d); "
                      "no table was changed",
                      c->tables[fe->table].cfg.name, (long long)(phys - fe->offset), fe->name, r->seg_sample[seg]);
}

/* All-gathers n floats of every rank's sums (mine) into all, in rank order. */
static int gather_sums(ember_collection *c, const float *mine, int64_t n, float *all)
{
    if (ember_comm_allgather(c->world, mine, (int64_t)sizeof(float) * n, all) == EMBER_OK)
        return EMBER_OK;
    c->panicked = 1;
    return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
}

/* A COLUMN slice whose update needs sums over the whole row (clip_norm, the
 * row-wise kinds, LAMB, LARS: optim/grad.h), whose columns live on every
 * rank: each rank sums its real columns per touched row, the sums are
 * all-gathered and added in rank order, then every rank applies the same
 * row factors to its slice.  Every rank holds the same touched rows (COLUMN
 * ids are all-gathered), so every rank makes the same gathers. */
static int apply_column_sums(ember_collection *c, const grad_target *gt, const ember_grad_runs *u,
                             const float *dp, const float *ds, const ember_optim_step *o,
                             const ember_grad_rounding *rd)
{
    int64_t nu = u->nu;
    int32_t dim = gt->dim, W = c->world->size;
    int nsum = ember_optim_row_sums(o->kind), per = nsum > 1 ? nsum : 1;
    float *g_all = malloc(sizeof(float) * ((size_t)nu * (size_t)dim + 1));
    float *sq = malloc(sizeof(float) * ((size_t)nu * (size_t)per * (size_t)(W + 1) + 1));
    uint64_t *ord = malloc(sizeof(uint64_t) * ((size_t)nu + 1));
    int st = g_all && sq && ord ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory for %lld rows", (long long)nu);
    if ((st = ember_dist_agree(c, st, NULL)) == EMBER_OK) {
        float *mine = sq + nu * per * W;
        int clip = o->clip_norm > 0.0f;
        ember_grad_column_order(gt->route, u, gt->store, ord);
        ember_grad_column_gradients(gt->route, u, dim, gt->real_cols, ord, dp, ds, o, g_all, clip ? mine : NULL,
                                    c->threads);
        if (clip && (st = gather_sums(c, mine, nu, sq)) == EMBER_OK)
            ember_grad_column_clip(u, dim, gt->real_cols, ord, sq, W, g_all, o, c->threads);
        if (st == EMBER_OK && nsum) {
            ember_grad_column_sums(gt->route, u, gt->store, dim, gt->real_cols, ord, o, rd, g_all, mine, c->threads);
            st = gather_sums(c, mine, nu * nsum, sq);
        }
        if (st == EMBER_OK)
            ember_grad_column_apply(gt->route, u, gt->store, dim, gt->real_cols, gt->full_dim, ord, sq, W, g_all, o,
                                    rd, c->threads);
    }
    free(g_all);
    free(sq);
    free(ord);
    return st;
}

/* The backward of one target for global step `step`; check_only: only
 * checks that every gradient is finite (EMBER_ENUMERIC). */
static int apply_target(ember_collection *c, const grad_target *gt, const float *dp, const float *ds, int64_t step,
                        int check_only)
{
    ember_route *r = gt->route;
    ember_grad_runs u = ember_grad_runs_of(r, gt->rows, c->sort_hist, c->threads);
    if (u.n == 0 && !gt->full_dim) /* COLUMN sums: their all-gathers still run */
        return EMBER_OK;
    if (check_only) {
        int64_t bad = ember_grad_first_nonfinite(r, &u, gt->dim, dp, ds);
        return bad >= 0 ? nonfinite_gradient(c, gt, &u, bad) : EMBER_OK;
    }
    c->stats.last_unique_rows += u.nu;
    ember_optim_step o = ember_optim_prepare(gt->opt, step, c->lr_scale);
    int64_t clips[2] = {0, 0};
    o.clipped = clips;
    ember_grad_rounding rd = rounding_of(c, gt, step);
    int st = EMBER_OK;
    if (gt->full_dim)
        st = apply_column_sums(c, gt, &u, dp, ds, &o, &rd);
    else
        ember_grad_apply_runs(r, &u, gt->store, gt->dim, dp, ds, &o, &rd);
    c->stats.clipped_values += clips[0];
    c->stats.clipped_rows += clips[1];
    return st;
}

/* The backward of physical table p in a world of one: its own route. */
static int local_apply(ember_collection *c, int32_t p, const float *dp, const float *ds, int64_t step,
                       int check_only)
{
    ember_ptable *pt = &c->ptables[p];
    grad_target gt = {&pt->route, pt->store, &pt->opt, pt->dim, pt->rows, 1, 0, 0, 0, p};
    return apply_target(c, &gt, dp, ds, step, check_only);
}

/* The owner's backward of physical table p over the world: the entries it
 * received (x->rr, in the global batch's order) with the gradients the
 * requesters sent (ember_dist_send_grads).  check_only: the debug check, a
 * local result the caller agrees on. */
static int owner_apply(ember_collection *c, int32_t p, int64_t step, int check_only)
{
    ember_ptable *pt = &c->ptables[p];
    ember_xchg *x = pt->xchg;
    int32_t W = c->world->size, rank = c->world->rank;
    int column_sums = pt->placement == EMBER_PLACE_COLUMN &&
                      (ember_optim_row_sums(pt->opt.kind) || pt->opt.clip_norm > 0.0f);
    int32_t real = pt->dim - pt->col0;
    real = real < 0 ? 0 : real > pt->local_dim ? pt->local_dim : real;
    grad_target gt = {&x->rr,
                            pt->store,
                            &pt->opt,
                            pt->local_dim,
                            pt->local_rows,
                            pt->placement == EMBER_PLACE_ROW ? W : 1,
                            pt->placement == EMBER_PLACE_ROW ? rank : 0,
                            column_sums ? pt->dim : 0,
                            real,
                            p};
    if (!check_only)
        ember_store_mark_dirty(pt->store);
    return apply_target(c, &gt, x->grad_in, NULL, step, check_only);
}

/* Debug check of the upstream gradient slices the batch will read. */
static int check_upstream(ember_collection *c, const float *dp, const float *ds)
{
    for (int32_t p = 0; p < c->num_ptables; p++) {
        const ember_ptable *pt = &c->ptables[p];
        const ember_route *r = &pt->route;
        for (int64_t g = 0; g < r->nseg; g++) {
            const float *d = ember_seg_out(r, g, (float *)dp, (float *)ds);
            for (int32_t k = 0; k < pt->dim; k++)
                if (!isfinite(d[k])) {
                    const ember_lfeature *fe = &c->features[r->seg_feature[g]];
                    return ember_fail(c, EMBER_ENUMERIC,
                                      "feature '%s' sample %d: upstream gradient element %d is not finite "
                                      "(table '%s'); no table was changed",
                                      fe->name, r->seg_sample[g], k, c->tables[fe->table].cfg.name);
                }
        }
    }
    return EMBER_OK;
}

/* Backward over the world: gradient exchange, agreed debug check, update. */
static int backward_world(ember_collection *c, const float *dp, const float *ds, int64_t step)
{
    int st = EMBER_OK;
    for (int32_t p = 0; p < c->num_ptables; p++)
        if ((st = ember_dist_send_grads(c, p, dp, ds)) != EMBER_OK || (st = ember_hot_sum(c, p, dp, ds)) != EMBER_OK)
            return st;
    if (c->cfg.debug_checks) {
        for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++)
            if ((st = owner_apply(c, p, step, 1)) == EMBER_OK)
                st = ember_hot_check(c, p);
        if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
            return st;
    }
    for (int32_t p = 0; p < c->num_ptables; p++) {
        if ((st = owner_apply(c, p, step, 0)) != EMBER_OK)
            return st;
        ember_hot_apply(c, p, step);
        ember_hot_count_served(c, p);
    }
    return EMBER_OK;
}

/* Local checks before backward changes anything. */
static int backward_checks(ember_collection *c, const float *d_pooled, const float *d_sequence)
{
    if (!c->routed)
        return ember_fail(c, EMBER_ESTATE, "ember_backward needs a successful ember_forward first");
    const ember_batch_shape *bs = &c->shape;
    if ((bs->batch_size > 0 && c->pooled_width > 0 && !d_pooled) || (bs->seq_floats > 0 && !d_sequence))
        return ember_fail(c, EMBER_EINVAL, "gradient buffer is NULL");
    for (int32_t t = 0; t < c->cfg.num_tables; t++)
        if (c->tables[t].cfg.rows_encoding != EMBER_ROWS_FP32)
            return ember_fail(c, EMBER_EINVAL, "table '%s' holds encoded rows (%s): an inference table, read-only; "
                              "train with fp32 rows", c->tables[t].cfg.name,
                              ember_encoding_name((ember_encoding)c->tables[t].cfg.rows_encoding));
    return c->cfg.debug_checks ? check_upstream(c, d_pooled, d_sequence) : EMBER_OK;
}

int ember_backward(ember_collection *c, const float *d_pooled, const float *d_sequence)
{
    int st;
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if ((st = ember_schedule_settle(c)) != EMBER_OK) /* a stale batch begun looks up first */
        return st;
    if ((st = ember_dist_agree(c, backward_checks(c, d_pooled, d_sequence), NULL)) != EMBER_OK)
        return st;
    int64_t step = c->stats.steps + 1;
    c->stats.last_unique_rows = 0;
    if (ember_distributed(c)) {
        int64_t sent0 = c->stats.last_bytes_sent, recv0 = c->stats.last_bytes_received;
        double sec0 = c->stats.last_comm_seconds;
        ember_comm_count_begin(c);
        st = backward_world(c, d_pooled, d_sequence, step);
        ember_comm_count_end(c);
        c->stats.last_bytes_sent += sent0;
        c->stats.last_bytes_received += recv0;
        c->stats.last_comm_seconds += sec0;
        if (st != EMBER_OK)
            return st;
    } else {
        /* With debug checks every table's gradients are checked before any
         * table changes: first a checking pass over all physical tables. */
        for (int pass = c->cfg.debug_checks ? 0 : 1; pass < 2; pass++)
            for (int32_t p = 0; p < c->num_ptables; p++) {
                if (pass == 1)
                    ember_store_mark_dirty(c->ptables[p].store);
                if ((st = local_apply(c, p, d_pooled, d_sequence, step, pass == 0)) != EMBER_OK)
                    return st;
            }
    }
    c->stats.steps = step;
    c->routed = 0;
    return ember_window_step(c); /* the lookahead window follows the data */
}
