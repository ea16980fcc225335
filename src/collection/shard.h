/*
 * shard.h: where a row of a physical table lives over the world: the
 * arithmetic of table/shard.h asked of an ember_ptable (its placement,
 * owner, magic and rows).  What the exchanges, row access, checkpoints and
 * create ask per row.
 */
#ifndef EMBER_COLLECTION_SHARD_H
#define EMBER_COLLECTION_SHARD_H

#include "collection/collection.h"
#include "table/shard.h"

/* The rank that owns row (ROW and TABLE); -1 for every rank. */
static inline int32_t ember_shard_owner(const ember_ptable *pt, int32_t W, uint32_t row)
{
    return ember_row_owner(pt->placement, pt->owner, pt->row_magic, W, row);
}

static inline uint32_t ember_shard_local(const ember_ptable *pt, int32_t W, uint32_t row)
{
    return ember_row_local(pt->placement, pt->row_magic, W, row);
}

static inline int ember_shard_holds(const ember_ptable *pt, int32_t W, int32_t rank, uint32_t row)
{
    int32_t o = ember_shard_owner(pt, W, row);
    return o < 0 || o == rank;
}

/* Rows of the physical table stored on `rank`. */
static inline int64_t ember_shard_local_rows(const ember_ptable *pt, int32_t W, int32_t rank)
{
    return ember_rows_held(pt->placement, pt->owner, pt->rows, W, rank);
}

#endif
