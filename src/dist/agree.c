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

#include "dist/dist.h"

static int comm_failed(ember_collection *c)
{
    c->panicked = 1;
    return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
}

int ember_dist_agree(ember_collection *c, int st, int64_t *value)
{
    ember_world *w = c->world;
    if (w->size == 1)
        return st;
    int64_t mine[2] = {st, value ? *value : 0};
    int64_t *all = c->comm_scratch;
    if (ember_comm_allgather(w, mine, (int64_t)sizeof mine, all) != EMBER_OK)
        return comm_failed(c);
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
        return comm_failed(c);
    msg[sizeof msg - 1] = 0;
    return ember_fail(c, status, "rank %d: %s", first, msg);
}
