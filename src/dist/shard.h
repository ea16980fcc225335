/*
 * shard.h: where a physical row lives under each placement (docs/distributed.md).
 *
 * ROW: rank row % W, local row row / W.  TABLE: rank `owner`, local = row.
 * COLUMN and REPLICATED: every rank, local = row.  In a world of one every
 * placement answers "here, the same row".
 */
#ifndef EMBER_DIST_SHARD_H
#define EMBER_DIST_SHARD_H

#include "core/collection.h"

/* The rank that owns row (ROW and TABLE); -1 for every rank. */
static inline int32_t ember_shard_owner(const ember_ptable *pt, int32_t W, uint32_t row)
{
    switch (pt->placement) {
    case EMBER_PLACE_ROW: return (int32_t)(row % (uint32_t)W);
    case EMBER_PLACE_TABLE: return pt->owner;
    default: return -1;
    }
}

static inline uint32_t ember_shard_local(const ember_ptable *pt, int32_t W, uint32_t row)
{
    return pt->placement == EMBER_PLACE_ROW ? row / (uint32_t)W : row;
}

static inline int ember_shard_holds(const ember_ptable *pt, int32_t W, int32_t rank, uint32_t row)
{
    int32_t o = ember_shard_owner(pt, W, row);
    return o < 0 || o == rank;
}

/* Rows of the physical table stored on `rank`. */
static inline int64_t ember_shard_local_rows(const ember_ptable *pt, int32_t W, int32_t rank)
{
    switch (pt->placement) {
    case EMBER_PLACE_ROW: return pt->rows / W + (rank < pt->rows % W ? 1 : 0);
    case EMBER_PLACE_TABLE: return rank == pt->owner ? pt->rows : 0;
    default: return pt->rows;
    }
}

/* COLUMN slice width: ceil(dim / W). */
static inline int32_t ember_shard_cols(int32_t dim, int32_t W) { return (dim + W - 1) / W; }

#endif
