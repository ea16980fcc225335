/*
 * layout.h: logical tables and features -> physical tables (table stacking).
 */
#ifndef EMBER_TABLE_LAYOUT_H
#define EMBER_TABLE_LAYOUT_H

#include <stdint.h>

#include "ember.h"

struct ember_collection;

/* Where the k-th table (k from 0) of a physical table starts, when the
 * tables before it end at row `end`: end itself, or, row-wise with S > 1
 * shards (num_shards; the world size by default, which makes them the
 * ranks), the first row at or after it that is k modulo S.  The planner
 * (src/plan/model.c) stacks with this too. */
static inline int64_t ember_stack_offset(int64_t end, int32_t k, ember_placement placement, int32_t S)
{
    if (placement != EMBER_PLACE_ROW || S <= 1)
        return end;
    return end + (((int64_t)k - end) % S + S) % S;
}

/* Groups tables, creates one store per physical table, fills offsets, the
 * features' output columns and pooled_width.  Sets the create message. */
int ember_layout_build(struct ember_collection *coll);

#endif
