/*
 * routing.h: a batch into one route per physical table (routing.c):
 * validation first, then the build.  What both read and leave is prep.h's.
 */
#ifndef EMBER_PREP_ROUTING_H
#define EMBER_PREP_ROUTING_H

#include <stdint.h>

#include "prep/prep.h"

/* Validates the whole batch against the layout; on error nothing is routed
 * and the message (P->errmsg) names feature, sample and id.  Fills
 * bs->bag_off. */
int ember_route_validate(const ember_prep *P, const ember_batch *b, ember_batch_shape *bs);

/* Builds every physical table's route from a validated batch, and the
 * batch's sequence offsets and size into bs.  units: compute leaders
 * (per-bag distinct ids) for limit counting.  Ids skipped under
 * bounds=drop are counted into *dropped_bounds. */
int ember_route_build(const ember_prep *P, const ember_batch *b, ember_batch_shape *bs, int units,
                      int64_t *dropped_bounds);

#endif
