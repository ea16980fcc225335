/*
 * limits.h: the statistics of `ember limits` (include/ember-plan.h,
 * "limits"), beside the planner's id statistics: per table the series of
 * per-batch maxima over shards, summarised as maximum, percentiles and
 * suggested limits (limits.c); per dynamic table its distinct keys by
 * owner, per batch and over all batches (limits_keys.c).  The scan that
 * feeds them (sources, collection, ranks) is src/api/limits.c.
 */
#ifndef EMBER_PLAN_LIMITS_H
#define EMBER_PLAN_LIMITS_H

#include <stdint.h>

#include "ember-plan.h"
#include "ember.h"

/* One table's per-batch maxima over shards, of ids and of unique ids. */
typedef struct limits_series {
    int64_t *max_ids, *max_unique;
    int64_t n, cap;
} limits_series;

/* Room for n values: EMBER_OK or EMBER_ENOMEM (nothing lost). */
int limits_series_reserve(limits_series *s, int64_t n);
/* Appends one batch's maxima (room reserved before). */
void limits_series_add(limits_series *s, int64_t max_ids, int64_t max_unique);
void limits_series_free(limits_series *s);

/* p in [0, 1] of sorted[n], linear between order statistics (numpy's
 * default); 0 for n = 0. */
double limits_percentile(const int64_t *sorted, int64_t n, double p);

/* Sorts the series in place and fills out's max_ids, max_unique_ids, the
 * p50/p99/p99.9 of both and the suggested limits: ceil(p99.9), where an
 * interpolation a rounding error (1e-9) above an integer stays it. */
void limits_series_summarise(limits_series *s, ember_limits_table *out);

/* Dynamic tables' keys by owner (limits_keys.c).  Every rank counts the
 * same global batches, so no reduction is needed. */
typedef struct limits_keys limits_keys;
/* For the tables t < info->num_tables with dynamic[t] (capacity[t] rows
 * per rank), counted over `owners` owners.  *out NULL when no table is
 * dynamic.  EMBER_OK or EMBER_ENOMEM. */
int limits_keys_create(const ember_batch_file_info *info, const int *dynamic, const int64_t *capacity,
                       int64_t owners, limits_keys **out);
/* Counts one global batch: EMBER_OK or EMBER_ENOMEM. */
int limits_keys_add(limits_keys *k, const ember_batch *global);
/* Table t's key counts into out's dynamic fields (nothing for a fixed
 * table or k NULL). */
void limits_keys_fill(const limits_keys *k, int32_t t, ember_limits_table *out);
void limits_keys_destroy(limits_keys *k);

#endif
