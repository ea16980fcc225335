/*
 * exchange.h: the distributed parts of the step (docs/distributed.md): error
 * agreement and the per-table exchanges of forward and backward.  In a
 * world of one the step calls none of the exchanges (they would only
 * copy); agreement still works.  Row access over the world is
 * step/rows.h's.
 */
#ifndef EMBER_EXCHANGE_EXCHANGE_H
#define EMBER_EXCHANGE_EXCHANGE_H

#include <stdint.h>

#include "collection/collection.h"

/* Agrees on a status over the world: every rank passes its own; all return
 * the first failing rank's status and message ("rank R: ...").  *value is
 * replaced by the max over ranks (NULL: none).  A failed exchange returns
 * EMBER_ECOMM and disables the collection. */
int ember_dist_agree(ember_collection *c, int st, int64_t *value);

/* The second half of an agreement whose {status, value} pairs of every
 * rank were gathered into all[2 * W] some other way (a started exchange):
 * the first failing rank's message is broadcast (collective then). */
int ember_dist_agree_gathered(ember_collection *c, const int64_t *all, int64_t *value);

/* A failed exchange: disables the collection, returns EMBER_ECOMM. */
int ember_dist_comm_failed(ember_collection *c);
/* alltoallv with counts in elements of `elem` bytes, packed in rank order
 * on both sides (displacements are the prefix sums).  Counted as payload. */
int ember_dist_exchange(ember_collection *c, const void *send, const int64_t *scount, void *recv,
                        const int64_t *rcount, size_t elem);

/* Forward of physical table p over the world: ids exchange, shard lookup,
 * vector exchange and pooling of this rank's outputs, round by round. */
int ember_dist_forward(ember_collection *c, int32_t p, float *pooled, float *sequence);

/* The forward of every table in parts, with the caller's work and other
 * collectives between them (exchange/xchg_chain.c, for step/schedule.c).
 * c->world must be a world of its own (ember_world_dup) during all of
 * them, so that these exchanges, started and completed at different
 * moments on different ranks, never meet the others.
 *   start     every table's state prepared (agreed), the first exchange
 *             started; stale: lookups allowed before the end.
 *   progress  tests what is in flight and starts what follows, in a fixed
 *             order (the same on every rank), never waiting.  Exact: counts,
 *             agreement and ids of each table (one mini-batch round; more
 *             rounds are left to the end).  Stale: the same, then lookups
 *             and vectors, round after round.
 *   settle    stale: waits until every lookup is done (before the tables
 *             change).
 *   finish    waits for the rest, looks up (exact), writes the outputs,
 *             agrees.
 *   cancel    runs the chain to its end (or its agreed failure), then
 *             completes what is in flight and forgets it: after a failure,
 *             or a batch never ended. */
int ember_dist_forward_start(ember_collection *c, int stale);
int ember_dist_forward_progress(ember_collection *c);
int ember_dist_forward_settle(ember_collection *c);
int ember_dist_forward_finish(ember_collection *c, float *pooled, float *sequence);
void ember_dist_forward_cancel(ember_collection *c);

/* Backward of physical table p, first part: the gradient exchange
 * (collective, agreed).  The owner's sorted aggregation and optimizer over
 * the entries it received (x->rr, x->grad_in) is the step's
 * (step/backward.c). */
int ember_dist_send_grads(ember_collection *c, int32_t p, const float *dp, const float *ds);

void ember_xchg_free(struct ember_xchg *x);
/* Bytes held by the exchange buffers (for ember_collection_memory). */
int64_t ember_xchg_bytes(const struct ember_xchg *x);

#endif
