/*
 * prep.h: what preparing a batch reads and what it leaves
 * (docs/architecture.md, prep's floor; docs/embedding-core.md, "One step").
 *
 * Preparing (validation, routing, limits, the sort) reads the collection's
 * layout (table/layout.h) and options, which the step hands over as an
 * ember_prep for each call (ember_collection_prep, collection/collection.c):
 * the features, the logical tables, and per physical table its features,
 * tables and route.  It leaves the batch's shape (ember_batch_shape: bag
 * offsets, sequence offsets, mini-batches) and one route per physical
 * table, which the step keeps until the backward.  Messages go to the buffer the caller names.
 */
#ifndef EMBER_PREP_PREP_H
#define EMBER_PREP_PREP_H

#include <stdint.h>

#include "ember.h"
#include "prep/route.h"
#include "table/layout.h"

/* One physical table as preparing reads it. */
typedef struct ember_prep_table {
    ember_route *route;           /* its route of the current batch          */
    int64_t rows;                 /* physical rows, over the whole world     */
    int32_t num_tables;           /* logical tables stacked in it, ascending */
    const int32_t *tables;        /* offsets                                 */
    int32_t num_features;         /* features reading it, config order       */
    const int32_t *features;
} ember_prep_table;

/* The limits' grow-only scratch (limits.c). */
typedef struct ember_limit_scratch {
    int64_t *counts;              /* [4 * tables * shards] limit counters    */
    uint64_t *mb_hash;            /* mini-batch split: (ptable, row, stamp)  */
    int64_t mb_hash_cap;
} ember_limit_scratch;

/* The layout, the options and the scratch of one preparing call. */
typedef struct ember_prep {
    int32_t num_features, num_tables, num_ptables;
    int32_t num_shards;           /* limits' shards: row % num_shards        */
    const ember_lfeature *features;
    const ember_ltable *tables;
    const ember_prep_table *ptables;
    int64_t pooled_width;         /* floats of one sample's pooled output    */
    int dedup;                    /* merge repeated ids of a bag             */
    ember_bounds_policy bounds;   /* ids outside their table: error or drop  */
    int threads;
    int64_t *sort_hist;           /* [EMBER_SORT_HIST_SIZE] radix scratch    */
    ember_limit_scratch *limits;
    char *errmsg;                 /* [EMBER_ERRMSG_SIZE] a failure's message */
} ember_prep;

/* A batch's shape, as validation, routing and the limits leave it: where
 * each bag's ids start, where each sequence feature's outputs start, where
 * each mini-batch starts.  The step keeps two (the current batch's and a
 * begun batch's, step/schedule.c). */
typedef struct ember_batch_shape {
    int32_t batch_size;
    int64_t *bag_off;             /* [num_features * (B+1)] id offsets      */
    int64_t bag_off_cap;
    int64_t *seq_off;             /* [num_features] float offset in sequence */
    int64_t seq_floats;
    int32_t num_minibatches;
    int32_t *minibatch_start;     /* [batch capacity + 1]                    */
    int64_t minibatch_cap;
} ember_batch_shape;

#endif
