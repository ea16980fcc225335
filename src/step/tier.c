/*
 * tier.c: the SSD tier's part of a step (tier.h): begin, staging a route,
 * flushing before a checkpoint.  The memory tier has nothing to do.
 */
#include "step/tier.h"

void ember_tier_begin(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++)
        ember_store_begin(c->ptables[p].store, c->stats.steps);
}

int ember_tier_stage_route(ember_collection *c, ember_ptable *pt, ember_route *r)
{
    if (!pt->store->staged)
        return EMBER_OK;
    r->nkeys = 0; /* keys and sources were built from rows */
    r->sorted_all = 0;
    r->sources_ready = 0;
    return ember_ptable_stage(c, pt, r->row, r->row, r->n);
}

int ember_tier_flush(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_store *s = c->ptables[p].store;
        if (s->staged && s->ops->flush(s) != EMBER_OK)
            return ember_fail(c, EMBER_EIO, "%s", s->errmsg);
    }
    return EMBER_OK;
}
