/*
 * dense_sync.h: how the ranks' dense gradients become one identical update
 * of the replicated dense model (docs/distributed.md, "The dense update"),
 * with the optimizer state replicated or sharded.
 *
 * Both ways sum the gradients by chunks in rank order: the vector is cut
 * into R contiguous chunks, rank c receives chunk c from every rank (one
 * alltoallv) and adds the R copies in rank order 0, 1, ..., R-1.  So every
 * element's sum is the same bits whatever follows.
 *
 *   replicated (group 0): every rank receives every summed chunk and runs
 *     the optimizer over all parameters; each rank holds all the state.
 *   sharded (group g >= 1, dividing R): ranks form groups of g consecutive
 *     ranks; position p = rank % g owns shard p of the parameters (the
 *     vector cut into g contiguous parts), and holds the optimizer state of
 *     that shard only (PopART's replicated tensor sharding, ZeRO stage 1).
 *     The summed chunks go to the ranks whose shard they overlap (one
 *     alltoallv), each rank steps its shard, and the updated shards are
 *     all-gathered within each group (one alltoallv).  g = R shards over the
 *     whole world; g = 1 keeps a whole copy per rank.
 *
 * The optimizer is elementwise, so both give every rank the same parameter
 * bits as the replicated update, for any g: tests/mpi_train.c checks it.
 * Optimizer state per rank: 2 n / g floats with Adam instead of 2 n.
 */
#ifndef EMBER_MODEL_DENSE_SYNC_H
#define EMBER_MODEL_DENSE_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "dense/dense.h"
#include "ember.h"

typedef struct dense_sync dense_sync;

/* n parameters over world w; group 0 (replicated) or g >= 1 dividing the
 * world size.  0, or an ember status with err. */
int dense_sync_create(ember_world *w, int64_t n, int32_t group, const dense_optim_config *oc, dense_sync **out,
                      char *err, size_t errlen);
void dense_sync_destroy(dense_sync *s);

/* One update, in three calls (the model times them apart):
 *   reduce  sums grads over the ranks (collective; grads is overwritten:
 *           replicated, with the sums; sharded, unspecified);
 *   apply   the optimizer step on this rank's parameters (all, or its
 *           shard);
 *   gather  sharded: every rank's shard to its group (collective; nothing
 *           when replicated).
 * After gather, params are the same bits on every rank. */
int dense_sync_reduce(dense_sync *s, float *grads, char *err, size_t errlen);
void dense_sync_apply(dense_sync *s, float *params, const float *grads);
int dense_sync_gather(dense_sync *s, float *params, char *err, size_t errlen);

/* The dense optimizer's learning rate times scale from the next apply on. */
void dense_sync_set_lr_scale(dense_sync *s, float scale);
/* The OpenMP threads of apply (dense_optim_set_threads). */
void dense_sync_set_threads(dense_sync *s, int32_t threads);

/* Optimizer state floats per parameter (0 SGD, 2 Adam: m[n] then v[n]). */
int64_t dense_sync_state_floats(const dense_sync *s);
/* Bytes of optimizer state this rank holds. */
int64_t dense_sync_state_bytes(const dense_sync *s);
/* Steps taken. */
int64_t dense_sync_steps(const dense_sync *s);
/* The whole state (floats x n, the replicated layout) into full on rank 0
 * (full may be NULL elsewhere).  Collective; allocates nothing, so it fails
 * only as MPI fails, on every rank. */
int dense_sync_gather_state(dense_sync *s, float *full, char *err, size_t errlen);
/* The whole state without a copy when this rank holds it all (replicated,
 * or a world of one), else NULL. */
const float *dense_sync_state_whole(dense_sync *s);
/* Restores from the whole state (every rank passes it) and the step. */
void dense_sync_set_state(dense_sync *s, const float *full, int64_t steps);

#endif
