/*
 * lookup.h: the forward's kernel: every output row of a route pooled from
 * the rows of a store (docs/embedding-core.md, "One step").
 */
#ifndef EMBER_LOOKUP_LOOKUP_H
#define EMBER_LOOKUP_LOOKUP_H

#include <stdint.h>

#include "prep/route.h"
#include "table/store.h"

/* Writes the output rows of segments [g0, g1) of route r. */
void ember_pool(const ember_route *r, const ember_store *s, int64_t g0, int64_t g1, float *pooled,
                float *sequence, int threads);

#endif
