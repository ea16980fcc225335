/*
 * step.c: ember_forward (and ember_partition_counts), the spine of
 * docs/embedding-core.md, "One step", for a world of one:
 *
 *   validate -> [dynamic keys -> rows] -> route (COO, dedup, stacking
 *   offsets) -> limits -> [exchange ids: nothing to send] -> shard lookup
 *   and pool -> [exchange vectors: nothing to send]
 *
 * The backward is backward.c's.  A failed call changes no table: forward
 * never writes tables.  After a failed forward the routed batch is gone,
 * so backward answers EMBER_ESTATE.
 *
 * In a world of W > 1 the bracketed exchanges are real (exchange/): the local
 * phase (validate, route, limits) ends with an agreement on the status and
 * the number of mini-batch rounds, every exchange agrees before it sends,
 * and every rank returns the same status.
 */
#include <math.h>
#include <string.h>

#include "exchange/exchange.h"
#include "lookup/lookup.h"
#include "prep/limits.h"
#include "prep/routing.h"
#include "step/dynamic_keys.h"
#include "step/step.h"
#include "step/tier.h"


/* Shard lookup and pooling of physical table p, one mini-batch at a time
 * (in a world of one every shard is local and the exchanges are empty).  An
 * SSD table first stages the batch's rows: the route then holds slots. */
static int lookup_ptable(ember_collection *c, int32_t p, float *pooled, float *sequence)
{
    ember_ptable *pt = &c->ptables[p];
    ember_route *r = &pt->route;
    int st = ember_tier_stage_route(c, pt, r);
    if (st != EMBER_OK)
        return st;
    const ember_batch_shape *bs = &c->shape;
    for (int32_t m = 0; m < bs->num_minibatches; m++)
        ember_pool(r, pt->store, r->sample_seg[bs->minibatch_start[m]], r->sample_seg[bs->minibatch_start[m + 1]],
                   pooled, sequence, c->threads);
    return EMBER_OK;
}

/* Debug check of one forward's outputs: names table, row, feature, sample. */
static int check_outputs(ember_collection *c, float *pooled, float *sequence)
{
    for (int32_t p = 0; p < c->num_ptables; p++) {
        const ember_ptable *pt = &c->ptables[p];
        const ember_route *r = &pt->route;
        for (int64_t g = 0; g < r->nseg; g++) {
            const float *o = ember_seg_out(r, g, pooled, sequence);
            int ok = 1;
            for (int32_t k = 0; k < pt->dim && ok; k++)
                ok = isfinite(o[k]);
            if (ok)
                continue;
            const ember_lfeature *fe = &c->features[r->seg_feature[g]];
            int64_t bad_row = -1;
            /* rows of other ranks (and encoded rows) are not inspected here */
            int local = c->world->size == 1 && pt->store->values;
            for (int64_t e = r->seg_start[g]; local && e < r->seg_start[g + 1] && bad_row < 0; e++) {
                if (r->row[e] == EMBER_ROW_DROPPED)
                    continue;
                const float *v = pt->store->values + (int64_t)r->row[e] * pt->dim;
                for (int32_t k = 0; k < pt->dim; k++)
                    if (!isfinite(v[k]))
                        bad_row = (int64_t)ember_store_row_of(pt->store, r->row[e]) - fe->offset;
            }
            if (bad_row >= 0)
                return ember_fail(c, EMBER_ENUMERIC,
                                  "table '%s' row %lld holds a non-finite value (feature '%s', sample %d)",
                                  c->tables[fe->table].cfg.name, (long long)bad_row, fe->name,
                                  r->seg_sample[g]);
            return ember_fail(c, EMBER_ENUMERIC,
                              "feature '%s' sample %d: pooled output is not finite (table '%s'; "
                              "weights overflow)",
                              fe->name, r->seg_sample[g], c->tables[fe->table].cfg.name);
        }
    }
    return EMBER_OK;
}

void ember_comm_count_begin(ember_collection *c)
{
    c->bytes_sent0 = c->world->bytes_sent;
    c->bytes_received0 = c->world->bytes_received;
    c->comm_seconds0 = c->world->seconds;
    c->world->counting = 1;
}

void ember_comm_count_end(ember_collection *c)
{
    c->world->counting = 0;
    c->stats.last_bytes_sent = c->world->bytes_sent - c->bytes_sent0;
    c->stats.last_bytes_received = c->world->bytes_received - c->bytes_received0;
    c->stats.last_comm_seconds = c->world->seconds - c->comm_seconds0;
}

int ember_forward_validate(ember_collection *c, const ember_batch *b, float *pooled, float *sequence)
{
    ember_prep P = ember_collection_prep(c);
    int st;
    if ((st = ember_route_validate(&P, b, &c->shape)) != EMBER_OK)
        return st;
    int64_t seq_needed = ember_sequence_size(c, b);
    if ((b->batch_size > 0 && c->pooled_width > 0 && !pooled) || (seq_needed > 0 && !sequence))
        return ember_fail(c, EMBER_EINVAL, "output buffer is NULL (pooled width %lld, sequence floats %lld)",
                          (long long)c->pooled_width, (long long)seq_needed);
    return EMBER_OK;
}

int ember_forward_route(ember_collection *c, const ember_batch *b, int st, int64_t *dropped)
{
    ember_prep P = ember_collection_prep(c);
    dropped[0] = dropped[1] = 0;
    if (st == EMBER_OK)
        st = ember_route_build(&P, b, &c->shape, ember_limits_active(&P) || c->observe_limits, &dropped[0]);
    if (st == EMBER_OK)
        ember_limits_observe_batch(c);
    if (st == EMBER_OK)
        st = ember_limits_apply(&P, &c->shape, &dropped[1]);
    int64_t rounds = st == EMBER_OK ? c->shape.num_minibatches : 0;
    if ((st = ember_dist_agree(c, st, &rounds)) != EMBER_OK)
        return st;
    c->num_rounds = (int32_t)rounds;
    return EMBER_OK;
}

int ember_forward_lookup(ember_collection *c, int32_t p, float *pooled, float *sequence)
{
    if (ember_distributed(c))
        return ember_dist_forward(c, p, pooled, sequence);
    return lookup_ptable(c, p, pooled, sequence);
}

int ember_forward_done(ember_collection *c, int64_t num_ids, const int64_t *dropped, float *pooled,
                       float *sequence)
{
    int st = c->cfg.debug_checks ? check_outputs(c, pooled, sequence) : EMBER_OK;
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
        return st;
    c->stats.dropped_bounds += dropped[0];
    c->stats.dropped_limit += dropped[1];
    c->stats.minibatches = c->shape.num_minibatches;
    c->stats.last_ids = num_ids - dropped[0];
    c->stats.last_unique_rows = 0;
    c->routed = 1;
    ember_limits_observe_done(c);
    return EMBER_OK;
}

/* Forward of a validated batch whose ids are rows (dynamic keys resolved):
 * local status st of what came before, routing and limits, agreement,
 * lookups and pooling, debug checks. */
static int forward_routed(ember_collection *c, const ember_batch *b, int st, float *pooled, float *sequence)
{
    int64_t dropped[2];
    if ((st = ember_forward_route(c, b, st, dropped)) != EMBER_OK)
        return st;
    ember_comm_count_begin(c);
    ember_tier_begin(c);
    for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++)
        st = ember_forward_lookup(c, p, pooled, sequence);
    ember_comm_count_end(c);
    if (st != EMBER_OK)
        return st;
    return ember_forward_done(c, b->num_ids, dropped, pooled, sequence);
}

int ember_forward(ember_collection *c, const ember_batch *b, float *pooled, float *sequence)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if (c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_forward while a batch is begun (ember_forward_begin): end it "
                          "first");
    c->routed = 0;
    int st = ember_forward_validate(c, b, pooled, sequence);
    if (c->num_dynamic == 0)
        return forward_routed(c, b, st, pooled, sequence);
    /* dynamic tables: keys become rows first, which is collective, so the
     * ranks agree on the batches being valid before it */
    ember_batch rows;
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK) {
        ember_dyn_forward_end(c, st);
        return st;
    }
    ember_comm_count_begin(c); /* the keys to their owners and the slots back count as the step's bytes */
    st = ember_dyn_forward_begin(c, b, &rows);
    ember_comm_count_end(c);
    ember_stats keys = c->stats;
    c->stats.last_bytes_sent = c->stats.last_bytes_received = 0;
    c->stats.last_comm_seconds = 0;
    if (st == EMBER_OK)
        st = forward_routed(c, &rows, EMBER_OK, pooled, sequence);
    c->stats.last_bytes_sent += keys.last_bytes_sent;
    c->stats.last_bytes_received += keys.last_bytes_received;
    c->stats.last_comm_seconds += keys.last_comm_seconds;
    ember_dyn_forward_end(c, st);
    return st;
}

int ember_partition_counts(ember_collection *c, const ember_batch *b, int64_t *ids, int64_t *unique)
{
    int st;
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if (c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_partition_counts while a batch is begun (ember_forward_begin)");
    c->routed = 0; /* the routing buffers are reused: a pending forward is cancelled */
    ember_prep P = ember_collection_prep(c);
    P.bounds = EMBER_BOUNDS_ERROR; /* every id counted as it is, each one */
    P.dedup = 0;
    st = ember_route_validate(&P, b, &c->shape);
    int64_t dropped = 0;
    if (st == EMBER_OK)
        st = ember_route_build(&P, b, &c->shape, 1, &dropped);
    if (st != EMBER_OK)
        return st;
    int64_t n = (int64_t)c->cfg.num_tables * c->cfg.num_shards;
    memset(ids, 0, sizeof(int64_t) * (size_t)n);
    memset(unique, 0, sizeof(int64_t) * (size_t)n);
    ember_limits_count(&P, ids, unique);
    return c->num_dynamic ? ember_dyn_partition_counts(c, b, ids, unique) : EMBER_OK;
}
