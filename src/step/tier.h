/*
 * tier.h: the SSD tier on the spine of a step (docs/tiers.md):
 *
 *   ember_forward:  begin (last step's pins released) -> route -> stage the
 *                   rows each store must serve (translating row -> slot in
 *                   the route the kernels read) -> pool
 *   ember_prefetch: announce the next batches' rows (prefetch.c)
 *   ember_backward: mark the pinned rows dirty -> fused optimizer on slots
 *   ember_save:     flush dirty rows (the checkpoint reads every row anyway)
 *
 * An owner's received rows are staged by the exchange itself
 * (exchange/xchg_fwd.c, through ember_ptable_stage).
 */
#ifndef EMBER_STEP_TIER_H
#define EMBER_STEP_TIER_H

#include "collection/collection.h"

/* A step begins on every staged store: the last step's pins are released. */
void ember_tier_begin(ember_collection *c);
/* Stages a route's rows in place (they become slots) and drops its keys,
 * which were built from rows. */
int ember_tier_stage_route(ember_collection *c, ember_ptable *pt, ember_route *r);
/* Writes every staged store's dirty rows back to its file. */
int ember_tier_flush(ember_collection *c);

#endif
