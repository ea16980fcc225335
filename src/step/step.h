/*
 * step.h: the parts of ember_forward (step.c) that the split forward
 * (schedule.c) runs at other times: validation, routing with its
 * agreement, one physical table's lookup, and the checks and statistics
 * that make a routed batch current.
 */
#ifndef EMBER_STEP_H
#define EMBER_STEP_H

#include <stdint.h>

#include "collection/collection.h"

/* The batch and the output buffers (no messages). */
int ember_forward_validate(ember_collection *c, const ember_batch *b, float *pooled, float *sequence);
/* Routes and applies the limits after a local status st, agrees over the
 * world and sets the rounds; dropped[0..1]: ids dropped by bounds, limits. */
int ember_forward_route(ember_collection *c, const ember_batch *b, int st, int64_t *dropped);
/* The lookahead window (window.c): set at create from the config; moved
 * after a backward every few steps (collective when it follows the data). */
void ember_window_init(ember_collection *c);
int ember_window_step(ember_collection *c);

/* Limits' observation (limits_observe.c): the routed batch counted, and
 * its record joining the sums once its forward is done. */
void ember_limits_observe_batch(ember_collection *c);
void ember_limits_observe_done(ember_collection *c);
/* Lookup and pooling of physical table p (over the world when W > 1). */
int ember_forward_lookup(ember_collection *c, int32_t p, float *pooled, float *sequence);
/* Debug checks (agreed), statistics; the batch becomes current. */
int ember_forward_done(ember_collection *c, int64_t num_ids, const int64_t *dropped, float *pooled,
                       float *sequence);
/* A STALE batch begun (schedule.c): its lookups finished now, before the
 * tables change (backward, row writes); collective, a no-op otherwise. */
int ember_schedule_settle(ember_collection *c);

/* A batch begun and never ended: what is in flight completes (every rank
 * has the same in flight after an agreed failure) and is forgotten.  For
 * ember_collection_destroy. */
void ember_schedule_cancel(ember_collection *c);

/* The spare batch state (schedule.c): freed at destroy, counted as
 * workspace. */
void ember_slot_free(ember_collection *c);
int64_t ember_slot_bytes(const ember_collection *c);

/* Counting of the exchanged bytes into the statistics' last_* fields. */
void ember_comm_count_begin(ember_collection *c);
void ember_comm_count_end(ember_collection *c);

#endif
