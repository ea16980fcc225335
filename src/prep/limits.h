/*
 * limits.h: per-partition limits (SparseCore's) on a routed batch.
 */
#ifndef EMBER_PREP_LIMITS_H
#define EMBER_PREP_LIMITS_H

#include <stdint.h>

struct ember_collection;

/* 1 if any table has a limit (then routing must compute unit leaders). */
int ember_limits_active(const struct ember_collection *coll);

/* Splits the routed batch into mini-batches (coll->minibatch_start), checks
 * error-policy tables and drops units of drop-policy tables, per mini-batch.
 * *dropped gets the entries dropped.  EMBER_ELIMIT names table, shard,
 * counts (and the sample for a single-sample overflow). */
int ember_limits_apply(struct ember_collection *coll, int64_t *dropped);

/* Adds the routed batch's per (table, shard) unit counts into ids/unique. */
void ember_limits_count(struct ember_collection *coll, int64_t *ids, int64_t *unique);

#endif
