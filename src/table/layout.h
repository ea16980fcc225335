/*
 * layout.h: logical tables and features over physical tables (table
 * stacking): where each logical table sits in its physical table, where
 * each feature reads its rows and writes its output, and the rule that
 * places a stacked table.  assemble/layout.c lays a collection out at
 * create; routing (prep/) and everything above it read the layout.
 */
#ifndef EMBER_TABLE_LAYOUT_H
#define EMBER_TABLE_LAYOUT_H

#include <stdint.h>

#include "ember.h"

/* A logical table: the user's config (defaults resolved) and its place. */
typedef struct ember_ltable {
    ember_table_config cfg; /* name points into the collection's names      */
    uint64_t rng_key;       /* ember_rng_table_key(seed, XXH64(name))        */
    int32_t ptable;
    int64_t offset;         /* first physical row                            */
} ember_ltable;

/* A feature: the table it reads, and where its pooled output goes. */
typedef struct ember_lfeature {
    const char *name;       /* points into the collection's names           */
    int32_t table, ptable, dim;
    ember_combiner combiner;
    int64_t offset;         /* physical row offset of its table              */
    int64_t out_col;        /* pooled column, or -1 for NONE                 */
} ember_lfeature;

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

#endif
