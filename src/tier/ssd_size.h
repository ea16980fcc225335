/*
 * ssd_size.h: the SSD tier's sizes (ssd_size.c): a row's place in the store
 * file, a cached row's DRAM, and the cache's rule, which create and the
 * planner both follow (docs/tiers.md, "The cache").
 */
#ifndef EMBER_TIER_SSD_SIZE_H
#define EMBER_TIER_SSD_SIZE_H

#include <stdint.h>

#include "ember.h"

/* Bytes of one row's record, in the store file and in a cache slot: its
 * values and optimizer state as the table holds them, 2 bytes an element
 * for half rows (half_rows) or half state (half_state), else 4.  Every size
 * below takes a row by these bytes. */
static inline int64_t ember_ssd_record_bytes(int32_t dim, int32_t state_floats, int half_rows, int half_state)
{
    return (int64_t)dim * (half_rows ? 2 : 4) + (int64_t)state_floats * (half_state ? 2 : 4);
}

/* Bytes of one row in a store file under O_DIRECT (the default): the
 * record, padded to 512. */
static inline int64_t ember_ssd_stride(int64_t rec_bytes) { return (rec_bytes + 511) / 512 * 512; }

/* DRAM bytes per cached row: its record and bookkeeping. */
int64_t ember_ssd_slot_bytes(int64_t rec_bytes, ember_cache_policy policy);

/* DRAM bytes of a store's written-row bitmap: one bit per row of the store
 * (the table's rows on this rank; a stacked store's summed), in 8-byte
 * words. */
static inline int64_t ember_ssd_bitmap_bytes(int64_t rows) { return 8 * ((rows + 63) / 64); }

/* The cache's rule (docs/tiers.md, "The cache"): cache_bytes pays for the
 * bitmap of the store's rows and, per cached row, ember_ssd_slot_bytes; the
 * cache holds the most rows that fit, at most the store's rows:
 *     min(rows, (cache_bytes - bitmap) / slot_bytes), 0 when none fits.
 * What collection create gives a store and what the planner assumes. */
int64_t ember_ssd_cache_rows(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy);
/* The cache_bytes that hold exactly k rows of a store of `rows` rows (one
 * byte less holds k - 1): k x slot bytes + the bitmap. */
static inline int64_t ember_ssd_cache_bytes_for(int64_t k, int64_t rows, int64_t rec_bytes, ember_cache_policy policy)
{
    return k * ember_ssd_slot_bytes(rec_bytes, policy) + ember_ssd_bitmap_bytes(rows);
}
/* The DRAM such a cache takes (ember_collection_memory's row, state and
 * cache_meta bytes): cache rows x slot bytes + the bitmap; cache_bytes when
 * it holds no row (create refuses it). */
int64_t ember_ssd_cache_dram(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy);

#define EMBER_SSD_CACHE_DEFAULT ((int64_t)256 << 20)

#endif
