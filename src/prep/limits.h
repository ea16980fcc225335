/*
 * limits.h: per-partition limits (SparseCore's) on a routed batch
 * (limits.c): counting, the error and drop policies, the mini-batch split.
 */
#ifndef EMBER_PREP_LIMITS_H
#define EMBER_PREP_LIMITS_H

#include <stdint.h>

#include "prep/prep.h"

/* 1 if any table has a limit (then routing must compute unit leaders). */
int ember_limits_active(const ember_prep *P);

/* Splits the routed batch into mini-batches (bs->minibatch_start), checks
 * error-policy tables and drops units of drop-policy tables, per mini-batch.
 * *dropped gets the entries dropped.  EMBER_ELIMIT names table, shard,
 * counts (and the sample for a single-sample overflow). */
int ember_limits_apply(const ember_prep *P, ember_batch_shape *bs, int64_t *dropped);

/* Adds the routed batch's per (table, shard) unit counts into ids/unique. */
void ember_limits_count(const ember_prep *P, int64_t *ids, int64_t *unique);

#endif
