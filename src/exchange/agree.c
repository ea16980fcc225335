/*
 * agree.c: every rank returns the same status from a collective call.
 *
 * Each rank contributes its local status (and a value, e.g. its number of
 * mini-batch rounds) to one small all-gather.  If any rank failed, the first
 * failing rank broadcasts its message and every rank returns that status
 * with "rank R: message".  Every collective call of the step passes through
 * here before its first payload exchange, so a rank never waits in an
 * exchange that another rank has abandoned.
 */
#include <string.h>

#include "exchange/exchange.h"

int ember_dist_comm_failed(ember_collection *c)
{
    c->panicked = 1;
    return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
}

int ember_dist_exchange(ember_collection *c, const void *send, const int64_t *scount, void *recv,
                        const int64_t *rcount, size_t elem)
{
    int32_t W = c->world->size;
    int64_t *b = c->exchange_scratch, so = 0, ro = 0;
    for (int32_t r = 0; r < W; r++) {
        b[r] = scount[r] * (int64_t)elem;
        b[W + r] = so;
        so += b[r];
        b[2 * W + r] = rcount[r] * (int64_t)elem;
        b[3 * W + r] = ro;
        ro += b[2 * W + r];
    }
    if (ember_comm_alltoallv(c->world, send, b, b + W, recv, b + 2 * W, b + 3 * W) != EMBER_OK)
        return ember_dist_comm_failed(c);
    return EMBER_OK;
}

int ember_dist_agree_gathered(ember_collection *c, const int64_t *all, int64_t *value)
{
    ember_world *w = c->world;
    int32_t first = -1;
    int64_t vmax = all[1];
    for (int32_t r = 0; r < w->size; r++) {
        if (all[2 * r] != EMBER_OK && first < 0)
            first = r;
        if (all[2 * r + 1] > vmax)
            vmax = all[2 * r + 1];
    }
    int status = first >= 0 ? (int)all[2 * first] : EMBER_OK;
    if (value)
        *value = vmax;
    if (first < 0)
        return EMBER_OK;
    char msg[sizeof c->errmsg];
    memset(msg, 0, sizeof msg);
    if (w->rank == first)
        memcpy(msg, c->errmsg, sizeof msg);
    if (ember_comm_bcast(w, msg, (int64_t)sizeof msg, first) != EMBER_OK)
        return ember_dist_comm_failed(c);
    msg[sizeof msg - 1] = 0;
    return ember_fail(c, status, "rank %d: %s", first, msg);
}

int ember_dist_agree(ember_collection *c, int st, int64_t *value)
{
    ember_world *w = c->world;
    if (w->size == 1)
        return st;
    int64_t mine[2] = {st, value ? *value : 0};
    int64_t *all = c->comm_scratch;
    if (ember_comm_allgather(w, mine, (int64_t)sizeof mine, all) != EMBER_OK)
        return ember_dist_comm_failed(c);
    return ember_dist_agree_gathered(c, all, value);
}
