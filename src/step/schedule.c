/*
 * schedule.c: the split forward (ember_forward_begin / _progress / _end;
 * docs/distributed.md, "Schedules").
 *
 * A begun batch is routed while the current batch still waits for its
 * backward, so the collection keeps two sets of per-batch state: its own
 * fields (the current batch) and a spare ember_slot.  begin swaps the spare
 * in, validates, routes and agrees, starts what the schedule allows, and
 * swaps back; progress and end swap it in again.  The routing, lookup
 * and exchange code is ember_forward's own (step.c, exchange/xchg_fwd.c,
 * driven by exchange/xchg_chain.c): it only ever sees "the current batch".
 * Over more than one rank the begun batch's exchanges use a duplicate of
 * the world (sched_world), swapped in with its state.
 *
 *   BLOCKING  begin: route.              end: the whole exchange and lookup.
 *   OVERLAP   begin: route, start the    progress: counts, agreement, ids.
 *                    chain.              end: the rest of that, lookups,
 *                                             vectors.
 *   STALE     begin: route, start the    progress: all of it, table by
 *                    chain.                        table; backward and row
 *                                                  writes settle it first.
 *                                        end: the last vectors.
 *
 * BLOCKING and OVERLAP look up at end, after the current batch's backward:
 * the results are ember_forward's.  STALE looks up before that backward.
 * In a world of one there is nothing to exchange: STALE looks up at begin,
 * the others at end.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/collection.h"
#include "exchange/exchange.h"
#include "exchange/xchg.h"
#include "prep/route.h"
#include "step/step.h"
#include "step/tier.h"

static int slot_create(ember_collection *c)
{
    if (c->spare)
        return EMBER_OK;
    ember_slot *s = calloc(1, sizeof *s);
    if (s) {
        s->shape.seq_off = calloc((size_t)c->cfg.num_features + 1, sizeof *s->shape.seq_off);
        s->route = calloc((size_t)c->num_ptables + 1, sizeof *s->route);
        s->xchg = calloc((size_t)c->num_ptables + 1, sizeof *s->xchg);
    }
    if (!s || !s->shape.seq_off || !s->route || !s->xchg) {
        if (s) {
            free(s->shape.seq_off);
            free(s->route);
            free(s->xchg);
        }
        free(s);
        return ember_fail(c, EMBER_ENOMEM, "out of memory for a second batch's state");
    }
    c->spare = s;
    return EMBER_OK;
}

void ember_slot_free(ember_collection *c)
{
    ember_slot *s = c->spare;
    if (!s)
        return;
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_route_free(&s->route[p]);
        ember_xchg_free(s->xchg[p]);
    }
    free(s->shape.seq_off);
    free(s->route);
    free(s->xchg);
    free(s->shape.minibatch_start);
    free(s->shape.bag_off);
    free(s);
    c->spare = NULL;
}

int64_t ember_slot_bytes(const ember_collection *c)
{
    const ember_slot *s = c->spare;
    if (!s)
        return 0;
    int64_t n = s->shape.bag_off_cap * (int64_t)sizeof(int64_t) + s->shape.minibatch_cap * (int64_t)sizeof(int32_t);
    for (int32_t p = 0; p < c->num_ptables; p++)
        n += ember_route_bytes(&s->route[p]) + ember_xchg_bytes(s->xchg[p]);
    return n;
}

#define SWAP(a, b)                                                                                                    \
    do {                                                                                                              \
        __typeof__(a) tmp_ = (a);                                                                                     \
        (a) = (b);                                                                                                    \
        (b) = tmp_;                                                                                                   \
    } while (0)

/* The spare's batch becomes the collection's, and the other way round. */
static void slot_swap(ember_collection *c)
{
    ember_slot *s = c->spare;
    SWAP(c->routed, s->routed);
    SWAP(c->num_rounds, s->num_rounds);
    SWAP(c->shape, s->shape);
    for (int32_t p = 0; p < c->num_ptables; p++) {
        SWAP(c->ptables[p].route, s->route[p]);
        SWAP(c->ptables[p].xchg, s->xchg[p]);
    }
}

/* The begun batch's exchanges run on a world of their own: swapped in
 * with its state. */
static void world_swap(ember_collection *c)
{
    if (c->sched_world) {
        ember_world *w = c->world;
        c->world = c->sched_world;
        c->sched_world = w;
    }
}

/* Bytes and seconds counted since ember_comm_count_begin go to the begun
 * batch; the current batch's own counts are left as they were. */
static void count_to_pending(ember_collection *c, const ember_stats *before)
{
    ember_comm_count_end(c);
    c->pending_sent += c->stats.last_bytes_sent;
    c->pending_received += c->stats.last_bytes_received;
    c->pending_seconds += c->stats.last_comm_seconds;
    c->stats.last_bytes_sent = before->last_bytes_sent;
    c->stats.last_bytes_received = before->last_bytes_received;
    c->stats.last_comm_seconds = before->last_comm_seconds;
}

/* The begun batch's work at begin, on its state (swapped in). */
static int begin_swapped(ember_collection *c, const ember_batch *b, float *pooled, float *sequence)
{
    c->routed = 0;
    int st = ember_forward_validate(c, b, pooled, sequence);
    if ((st = ember_forward_route(c, b, st, c->pending_dropped)) != EMBER_OK)
        return st;
    int stale = c->cfg.schedule == EMBER_SCHEDULE_STALE;
    if (c->cfg.schedule == EMBER_SCHEDULE_BLOCKING || (!stale && !ember_distributed(c)))
        return EMBER_OK;
    ember_stats before = c->stats;
    ember_comm_count_begin(c);
    if (stale)
        ember_tier_begin(c);
    if (ember_distributed(c)) {
        c->pending_pooled = pooled; /* the chain writes the outputs */
        c->pending_sequence = sequence;
        if ((st = ember_dist_forward_start(c, stale)) != EMBER_OK)
            ember_dist_forward_cancel(c);
    } else {
        for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++)
            st = ember_forward_lookup(c, p, pooled, sequence);
    }
    count_to_pending(c, &before);
    return st;
}

int ember_forward_begin(ember_collection *c, const ember_batch *b, float *pooled, float *sequence)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if (c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_forward_begin while a batch is begun: end it first");
    if (c->num_dynamic) /* its keys become rows inside ember_forward itself */
        return ember_fail(c, EMBER_EINVAL, "the split forward does not take dynamic tables: use ember_forward");
    int st = ember_dist_agree(c, slot_create(c), NULL);
    if (st == EMBER_OK && ember_distributed(c) && !c->sched_world && c->cfg.schedule != EMBER_SCHEDULE_BLOCKING) {
        int made = ember_world_dup(c->world, &c->sched_world);
        if (made == EMBER_ECOMM)
            return ember_dist_comm_failed(c);
        st = ember_dist_agree(c, made == EMBER_OK ? EMBER_OK : ember_fail(c, made, "out of memory"), NULL);
    }
    if (st != EMBER_OK)
        return st;
    c->pending_sent = c->pending_received = 0;
    c->pending_seconds = 0;
    c->pending_ids = b ? b->num_ids : 0;
    slot_swap(c);
    world_swap(c);
    st = begin_swapped(c, b, pooled, sequence);
    world_swap(c);
    slot_swap(c);
    if (st != EMBER_OK)
        return st;
    c->pending = 1;
    c->pending_pooled = pooled;
    c->pending_sequence = sequence;
    return EMBER_OK;
}

/* The begun batch's chain moved on (settle: through its lookups), its
 * state and world swapped in, the time counted as its exchange time. */
static int move_chain(ember_collection *c, int settle)
{
    slot_swap(c);
    world_swap(c);
    double s0 = c->world->seconds;
    int64_t b0 = c->world->bytes_sent, r0 = c->world->bytes_received;
    int counting = c->world->counting;
    c->world->counting = 1;
    int st = settle ? ember_dist_forward_settle(c) : ember_dist_forward_progress(c);
    c->world->counting = counting;
    c->pending_seconds += c->world->seconds - s0;
    c->pending_sent += c->world->bytes_sent - b0;
    c->pending_received += c->world->bytes_received - r0;
    world_swap(c);
    slot_swap(c);
    return st;
}

int ember_forward_progress(ember_collection *c)
{
    if (!c->pending || c->panicked || !ember_distributed(c) || c->cfg.schedule == EMBER_SCHEDULE_BLOCKING)
        return EMBER_OK;
    int st = move_chain(c, 0);
    return st == EMBER_ECOMM ? st : EMBER_OK; /* other failures: at the end */
}

int ember_schedule_settle(ember_collection *c)
{
    if (!c->pending || c->panicked || !ember_distributed(c) || c->cfg.schedule != EMBER_SCHEDULE_STALE)
        return EMBER_OK;
    int st = move_chain(c, 1);
    return st == EMBER_ECOMM ? st : EMBER_OK; /* other failures: at the end */
}

void ember_schedule_cancel(ember_collection *c)
{
    if (!c->pending || !c->spare)
        return;
    c->pending = 0;
    if (c->panicked || !ember_distributed(c) || c->cfg.schedule == EMBER_SCHEDULE_BLOCKING)
        return;
    slot_swap(c);
    world_swap(c);
    ember_dist_forward_cancel(c);
    world_swap(c);
    slot_swap(c);
}

int ember_forward_end(ember_collection *c)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if (!c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_forward_end without ember_forward_begin");
    c->pending = 0;
    slot_swap(c); /* the current batch's state is the spare's now, to be reused */
    c->routed = 0;
    float *pooled = c->pending_pooled, *sequence = c->pending_sequence;
    int stale = c->cfg.schedule == EMBER_SCHEDULE_STALE, st = EMBER_OK;
    if (!stale)
        ember_tier_begin(c);
    world_swap(c);
    ember_comm_count_begin(c);
    if (ember_distributed(c) && c->cfg.schedule != EMBER_SCHEDULE_BLOCKING)
        st = ember_dist_forward_finish(c, pooled, sequence);
    else if (!stale) /* BLOCKING, or OVERLAP in a world of one */
        for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++)
            st = ember_forward_lookup(c, p, pooled, sequence);
    ember_comm_count_end(c);
    world_swap(c);
    c->stats.last_bytes_sent += c->pending_sent;
    c->stats.last_bytes_received += c->pending_received;
    c->stats.last_comm_seconds += c->pending_seconds;
    if (st != EMBER_OK)
        return st;
    return ember_forward_done(c, c->pending_ids, c->pending_dropped, pooled, sequence);
}
