/*
 * shard.h: where a physical row lives under each placement
 * (docs/distributed.md), as arithmetic on the placement's numbers only.
 *
 * ROW: rank row % W, local row row / W.  TABLE: rank `owner`, local = row.
 * COLUMN and REPLICATED: every rank, local = row.  In a world of one every
 * placement answers "here, the same row".  collection/shard.h asks the
 * same questions of a physical table.
 */
#ifndef EMBER_TABLE_SHARD_H
#define EMBER_TABLE_SHARD_H

#include <stdint.h>

#include "ember.h"

/*
 * row / W and row % W run once or more per id on the exchange path, and a
 * hardware division by a run-time W costs ~10 cycles.  With M = ceil(2^64 / W)
 * (ember_shard_magic, kept on the physical table), for every 32-bit row and
 * 1 < W < 2^32:
 *   row / W = (M * row) >> 64            (128-bit product)
 *   row % W = ((M * row mod 2^64) * W) >> 64
 * (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019).
 * W = 1 has no 64-bit M and is answered directly.  tests/test_shard.c checks
 * both against / and %.
 */
__extension__ typedef unsigned __int128 ember_u128;

static inline uint64_t ember_shard_magic(int32_t W) { return W > 1 ? UINT64_MAX / (uint64_t)W + 1 : 0; }

static inline uint32_t ember_shard_div(uint64_t magic, int32_t W, uint32_t row)
{
    return W == 1 ? row : (uint32_t)(((ember_u128)magic * row) >> 64);
}

static inline uint32_t ember_shard_mod(uint64_t magic, int32_t W, uint32_t row)
{
    return W == 1 ? 0 : (uint32_t)(((ember_u128)(magic * row) * (uint32_t)W) >> 64);
}

/* The rank that owns row (ROW: row % W, TABLE: owner); -1 for every rank. */
static inline int32_t ember_row_owner(ember_placement placement, int32_t owner, uint64_t magic, int32_t W,
                                      uint32_t row)
{
    switch (placement) {
    case EMBER_PLACE_ROW: return (int32_t)ember_shard_mod(magic, W, row);
    case EMBER_PLACE_TABLE: return owner;
    default: return -1;
    }
}

/* The row's place in its owner's store. */
static inline uint32_t ember_row_local(ember_placement placement, uint64_t magic, int32_t W, uint32_t row)
{
    return placement == EMBER_PLACE_ROW ? ember_shard_div(magic, W, row) : row;
}

/* Rows of a physical table of `rows` rows stored on `rank`. */
static inline int64_t ember_rows_held(ember_placement placement, int32_t owner, int64_t rows, int32_t W,
                                      int32_t rank)
{
    switch (placement) {
    case EMBER_PLACE_ROW: return rows / W + (rank < rows % W ? 1 : 0);
    case EMBER_PLACE_TABLE: return rank == owner ? rows : 0;
    default: return rows;
    }
}

/* COLUMN slice width: ceil(dim / W). */
static inline int32_t ember_shard_cols(int32_t dim, int32_t W) { return (dim + W - 1) / W; }

#endif
