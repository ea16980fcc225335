/*
 * dist.h: the distributed parts of the step (docs/distributed.md): error
 * agreement, the per-table exchanges of forward and backward, and row
 * access over the world.  In a world of one the step calls none of the
 * exchanges (they would only copy); row access and agreement still work.
 */
#ifndef EMBER_DIST_H
#define EMBER_DIST_H

#include <stdint.h>

#include "core/collection.h"

/* Agrees on a status over the world: every rank passes its own; all return
 * the first failing rank's status and message ("rank R: ...").  *value is
 * replaced by the max over ranks (NULL: none).  A failed exchange returns
 * EMBER_ECOMM and disables the collection. */
int ember_dist_agree(ember_collection *c, int st, int64_t *value);

/* A failed exchange: disables the collection, returns EMBER_ECOMM. */
int ember_dist_comm_failed(ember_collection *c);
/* alltoallv with counts in elements of `elem` bytes, packed in rank order
 * on both sides (displacements are the prefix sums).  Counted as payload. */
int ember_dist_exchange(ember_collection *c, const void *send, const int64_t *scount, void *recv,
                        const int64_t *rcount, size_t elem);

/* Forward of physical table p over the world: ids exchange, shard lookup,
 * vector exchange and pooling of this rank's outputs, round by round. */
int ember_dist_forward(ember_collection *c, int32_t p, float *pooled, float *sequence);

/* The same forward in two calls, with other work (even other collectives,
 * in the same order on every rank) between them (lookup/schedule.c).
 * start, exact (stale 0): every round's counts are exchanged now; with one
 * mini-batch round its ids are sent (MPI_Ialltoallv) and the finish
 * receives them, looks up and exchanges the vectors; with more rounds the
 * finish runs them all.  start, stale: every round is looked up now, from
 * the tables as they are, the last round's vectors left in flight; the
 * finish receives them and writes the outputs.  progress drives what is
 * in flight; cancel completes it and forgets it (after a failure). */
int ember_dist_forward_start(ember_collection *c, int32_t p, int stale, float *pooled, float *sequence);
int ember_dist_forward_progress(ember_collection *c, struct ember_xchg *x);
int ember_dist_forward_finish(ember_collection *c, int32_t p, float *pooled, float *sequence);
void ember_dist_forward_cancel(ember_collection *c, struct ember_xchg *x);

/* Backward of physical table p, in two parts: the gradient exchange
 * (collective, agreed), then the owner's sorted aggregation and optimizer
 * over the entries it received (check_only: only the debug check, a local
 * result the caller agrees on). */
int ember_dist_send_grads(ember_collection *c, int32_t p, const float *dp, const float *ds);
int ember_dist_apply(ember_collection *c, int32_t p, int64_t step, int check_only);

/* Row access (include/ember.h): copies rows [first, first+count) of table t
 * between buf and the store (to_table) or from the world into buf, values or
 * state.  Collective when the world has more than one rank. */
int ember_dist_rows(ember_collection *c, int32_t t, int64_t first, int64_t count, float *buf, int to_table,
                    int state);
/* Stores rows [first, first + count) of table t, already encoded as its
 * store holds them (rows_encoding; row first + i at rows + i * row_bytes):
 * each rank copies the rows it holds, with no messages.  EMBER_EINVAL when
 * the table is not encoded that way. */
int ember_dist_write_encoded(ember_collection *c, int32_t t, int64_t first, int64_t count, const uint8_t *rows,
                             int64_t row_bytes);

void ember_xchg_free(struct ember_xchg *x);
/* Bytes held by the exchange buffers (for ember_collection_memory). */
int64_t ember_xchg_bytes(const struct ember_xchg *x);

#endif
