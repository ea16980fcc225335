/*
 * limits_adapt.h: per-partition limits that follow the data while training
 * (docs/adaptive.md, "Limits that follow the data").
 *
 * Every step, each rank hands in what its forwards saw (per table: the most
 * ids and unique ids of one partition, and the ids over the limits:
 * ember_limits_observed).  At agreed steps the ranks' figures are reduced
 * (the maxima by max, the excess by sum) into a window of per-step global
 * maxima, and a decision sets each adapted table's limits to
 *     ceil(quantile of the window's maxima x (1 + headroom))
 * when the limit in force is below that (raise), or more than (1 + headroom)
 * above it (shrink); other tables keep theirs.  Adapted tables are those
 * with a limit or a drop or mini-batch policy.  A bound on the bytes the
 * limits reserve (limits_adapt_bytes) cuts raises back, table by table in
 * config order, to what fits beside the tables before it and the floors of
 * those after it (their limits with shrinks taken and raises not); past it
 * the table's policy applies, and the change says it was capped.  When
 * even the floors do not fit, no limit rises.  Everything is a function of the steps'
 * figures, so the schedule is the same on every rank, for any thread count,
 * and again after a resume (the state rides in checkpoints).
 */
#ifndef EMBER_PLAN_LIMITS_ADAPT_H
#define EMBER_PLAN_LIMITS_ADAPT_H

#include <stdint.h>

#include "ember.h"

typedef enum limits_adapt_mode {
    LIMITS_ADAPT_OFF = 0,
    LIMITS_ADAPT_FIRST = 1,   /* decided once, from the first `window` steps */
    LIMITS_ADAPT_RUNNING = 2, /* every `every` steps, from the last `window` */
} limits_adapt_mode;

typedef struct limits_adapt_config {
    limits_adapt_mode mode;
    int64_t every;            /* steps between decisions (running)        */
    int64_t window;           /* steps of figures a decision reads        */
    double quantile;          /* of the window's per-step maxima, in [0, 1] */
    double headroom;          /* >= 0                                     */
    int64_t max_bytes;        /* all adapted tables' limit bytes; 0: no bound */
} limits_adapt_config;

limits_adapt_config limits_adapt_config_default(void);

/* One table's change at a decision; the over counts are the window's since
 * the last decision, over all ranks, under the old limits. */
typedef struct limits_change {
    int32_t table;
    int64_t old_ids, old_unique, new_ids, new_unique;
    int64_t want_ids, want_unique; /* what the rule asked before the bound  */
    int64_t over_ids, over_unique;
    int capped;
} limits_change;

typedef struct limits_adapt limits_adapt;

/* For the collection config's tables (their limits are the starting ones)
 * and its limits' partitions.  EMBER_EINVAL (err) for a bad config,
 * EMBER_ENOMEM. */
int limits_adapt_create(const limits_adapt_config *cfg, const ember_collection_config *cc, limits_adapt **out,
                        char *err, size_t errlen);
void limits_adapt_destroy(limits_adapt *a);

/* One step's local figures (ember_limits_observed's out[4 * tables]).
 * EMBER_ENOMEM only when more than `every` steps wait for an agreement. */
int limits_adapt_observe(limits_adapt *a, const int64_t *obs);
/* A decision is due after this step. */
int limits_adapt_due(const limits_adapt *a, int64_t step);
/* The waiting steps' figures reduced over the world into the window.
 * Collective (every rank the same steps waiting); EMBER_ECOMM. */
int limits_adapt_agree(limits_adapt *a, ember_world *w);
/* The decision after `step` (limits_adapt_due; agreed before): the new
 * limits in force, the changes into changes[tables] and *n.  Local, the
 * same on every rank. */
void limits_adapt_decide(limits_adapt *a, int64_t step, limits_change *changes, int32_t *n);

/* Nothing more to decide: "first", decided. */
int limits_adapt_done(const limits_adapt *a);

/* A table's limits in force, and whether it is adapted. */
void limits_adapt_limits(const limits_adapt *a, int32_t table, int64_t *max_ids, int64_t *max_unique);
int limits_adapt_adapted(const limits_adapt *a, int32_t table);
/* The bytes limits reserve: per partition, a 4-byte row and a 4-byte bag
 * per id and a row of 4 x dim bytes per unique id; times the partitions.
 * A table with a zero limit has no bound: INT64_MAX.  table -1: every
 * adapted table's. */
int64_t limits_adapt_bytes(const limits_adapt *a, int32_t table);

/* The most ids and unique ids one partition had in one agreed step so far:
 * the least limits that would have dropped nothing; and their bytes over
 * the adapted tables (limits_adapt_bytes' rule). */
void limits_adapt_peak(const limits_adapt *a, int32_t table, int64_t *ids, int64_t *unique);
int64_t limits_adapt_peak_bytes(const limits_adapt *a);

/* The state for a checkpoint (agreed first: nothing waits), malloc'd into
 * *blob; and back.  load: EMBER_EFORMAT (err) when the blob is not one of
 * this config's tables and window; the adapter is unchanged then. */
int limits_adapt_save(const limits_adapt *a, void **blob, int64_t *bytes);
int limits_adapt_load(limits_adapt *a, const void *blob, int64_t bytes, char *err, size_t errlen);

#endif
