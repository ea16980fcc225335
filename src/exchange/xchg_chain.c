/*
 * xchg_chain.c: a begun batch's forward as a chain of started exchanges
 * (exchange.h, ember_dist_forward_start ...; docs/distributed.md, "Schedules").
 *
 * Each table's forward is the phases of xchg_fwd.c; here every phase's
 * exchange is started (MPI_Ialltoallv) and the next phase runs when a
 * progress call finds it complete.  The chain is one sequence, the same on
 * every rank: table after table, round after round, so the ranks start the
 * exchanges in the same order whatever their timing.  It runs on a world
 * of its own (the caller swaps it in), so that these exchanges and the
 * current batch's blocking ones (its backward, the dense model's
 * all-reduce) are never mistaken for each other.
 *
 *   exact (OVERLAP)  per table: counts -> agreement -> ids sent, then the
 *                    next table; lookups and vectors at the finish, after
 *                    the caller's backward.  A batch split into several
 *                    mini-batch rounds (limits) reuses one message buffer
 *                    per round: its tables run whole at the finish.
 *   stale            per table and round: counts -> agreement -> ids ->
 *                    lookup -> vectors; the last round's vectors stay in
 *                    flight while the next table starts.
 *
 * Progress never blocks: a failed agreement stops the chain at the same
 * table and round on every rank, and the failing rank's message is
 * broadcast at the next settle or finish, which every rank calls at the
 * same point; the finish then completes what is in flight and reports it.
 */
#include <string.h>

#include "collection/collection.h"
#include "exchange/exchange.h"
#include "exchange/xchg.h"

/* Completes x's exchange in flight: *done = 0 when it is still going and
 * the call may not wait. */
static int complete(ember_collection *c, ember_xchg *x, int block, int *done)
{
    *done = 1;
    if (!x->req.pending)
        return EMBER_OK;
    int st = block ? ember_comm_wait(c->world, &x->req) : ember_comm_test(c->world, &x->req, done);
    return st == EMBER_OK ? EMBER_OK : ember_dist_comm_failed(c);
}

/* One move of the table at work; *moved = 0 when it waits on an exchange. */
static int step(ember_collection *c, int block, int *moved)
{
    int32_t p = c->chain_p, R = c->num_rounds;
    ember_ptable *pt = &c->ptables[p];
    ember_xchg *x = pt->xchg;
    int done, st = complete(c, x, block, &done);
    *moved = done;
    if (st != EMBER_OK || !done)
        return st;
    int32_t m = x->round;
    switch (x->stage) {
    case XS_NONE:
        if (R == 0 || (!c->chain_stale && R > 1)) { /* the finish runs it whole */
            c->chain_p++;
            return EMBER_OK;
        }
        x->stage = XS_COUNTS;
        return ember_xchg_counts(c, pt, x, m, 1);
    case XS_COUNTS:
        x->stage = XS_AGREE;
        st = ember_xchg_reserve(c, pt, x, m);
        if (st != EMBER_OK) /* kept for the agreement: other calls may come first */
            memcpy(c->chain_msg, c->errmsg, sizeof c->chain_msg);
        return ember_xchg_agree_start(c, x, st);
    case XS_AGREE:
        for (int32_t r = 0; r < c->world->size; r++)
            if (x->agree[2 + 2 * r] != EMBER_OK) {
                if (!block) { /* the failing rank's message is broadcast: at a settle or the finish */
                    *moved = 0;
                    return EMBER_OK;
                }
                memcpy(c->errmsg, c->chain_msg, sizeof c->errmsg);
                return ember_dist_agree_gathered(c, x->agree + 2, NULL);
            }
        x->stage = XS_IDS;
        st = ember_xchg_send_ids(c, pt, x, m, 1);
        if (st == EMBER_OK && !c->chain_stale) { /* lookups wait for the finish */
            x->stage = XS_SENT_IDS;
            c->chain_p++;
        }
        return st;
    case XS_IDS: /* stale: the ids are here */
        x->stage = XS_VECTORS;
        st = ember_xchg_lookup(c, pt, x, m, 1, c->pending_pooled, c->pending_sequence);
        if (st == EMBER_OK && m == R - 1) { /* its vectors travel while the next table starts */
            x->stage = XS_LOOKED_UP;
            c->chain_p++;
        }
        return st;
    case XS_VECTORS: /* an earlier round's vectors are here: the next round */
        ember_xchg_assemble(c, pt, x, m, c->pending_pooled, c->pending_sequence);
        x->round = m + 1;
        x->stage = XS_COUNTS;
        return ember_xchg_counts(c, pt, x, m + 1, 1);
    }
    return EMBER_OK;
}

/* Moves the chain on until it waits (block: until it is through). */
static int advance(ember_collection *c, int block)
{
    int moved = 1;
    while (c->chain_status == EMBER_OK && c->chain_p < c->num_ptables && moved) {
        int st = step(c, block, &moved);
        if (st != EMBER_OK)
            c->chain_status = st;
    }
    return c->chain_status;
}

int ember_dist_forward_start(ember_collection *c, int stale)
{
    c->chain_p = 0;
    c->chain_stale = stale;
    c->chain_status = EMBER_OK;
    int st = EMBER_OK;
    for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++) {
        ember_xchg *x;
        if ((st = ember_xchg_prepare(c, p, &x)) == EMBER_OK) {
            x->stage = XS_NONE;
            x->round = 0;
        }
    }
    if (st != EMBER_OK)
        return st;
    return advance(c, 0);
}

int ember_dist_forward_progress(ember_collection *c) { return advance(c, 0); }

int ember_dist_forward_settle(ember_collection *c) { return c->chain_stale ? advance(c, 1) : EMBER_OK; }

void ember_dist_forward_cancel(ember_collection *c)
{
    /* the ranks may be at different places in the chain: run it to its end
     * (or its agreed failure) first, so that all hold the same exchanges */
    if (!c->panicked && c->chain_status == EMBER_OK)
        advance(c, 1);
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_xchg *x = c->ptables[p].xchg;
        if (x && x->req.pending && !c->panicked)
            ember_comm_wait(c->world, &x->req);
        if (x)
            x->stage = XS_NONE;
    }
    c->chain_p = c->num_ptables;
}

int ember_dist_forward_finish(ember_collection *c, float *pooled, float *sequence)
{
    int st = advance(c, 1);
    for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++) {
        ember_ptable *pt = &c->ptables[p];
        ember_xchg *x = pt->xchg;
        int stage = x->stage;
        x->stage = XS_NONE;
        if (stage == XS_NONE) { /* not started: the whole forward */
            st = ember_dist_forward(c, p, pooled, sequence);
            continue;
        }
        if ((st = ember_xchg_wait(c, x)) != EMBER_OK)
            break;
        if (stage == XS_SENT_IDS) {
            st = ember_xchg_lookup(c, pt, x, 0, 0, pooled, sequence);
            if (st == EMBER_OK)
                ember_xchg_assemble(c, pt, x, 0, pooled, sequence);
        } else { /* XS_LOOKED_UP */
            ember_xchg_assemble(c, pt, x, c->num_rounds - 1, pooled, sequence);
        }
        if (st == EMBER_OK)
            st = ember_dist_agree(c, ember_xchg_finish(c, pt, x), NULL);
    }
    if (st != EMBER_OK)
        ember_dist_forward_cancel(c);
    return st;
}
