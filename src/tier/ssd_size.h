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

/* The store file's layout (a log, src/tier/ssd_log.h): a 4 KiB marker
 * block, then at most max_segs segments of seg_bytes, each seg_recs records
 * packed (data_bytes, rounded to 4 KiB) and a footer naming their rows (4
 * bytes each, rounded to 4 KiB).  Segments hold about 1 MiB of records (a
 * small store: about a 32nd of its rows, at least 8); max_segs leaves room
 * for half the rows again (dead records between compactions) and for the
 * segment buffers.  0, or -1 when the records cannot be numbered in 32 bits. */
typedef struct ember_ssd_layout {
    int64_t seg_recs, seg_bytes, data_bytes, max_segs;
} ember_ssd_layout;
int ember_ssd_layout_of(int64_t rows, int64_t rec_bytes, ember_ssd_layout *out);
/* The largest the store file grows: what create reserves on the disk. */
int64_t ember_ssd_file_bytes(int64_t rows, int64_t rec_bytes);

/* DRAM bytes per cached row: its record and bookkeeping. */
int64_t ember_ssd_slot_bytes(int64_t rec_bytes, ember_cache_policy policy);

/* DRAM bytes of a store's index (ssd_log.h): where each row's newest record
 * is (4 bytes a row of the store: the table's rows on this rank, a stacked
 * store's summed) and each segment's live records and free list (12 bytes
 * a segment). */
int64_t ember_ssd_index_bytes(int64_t rows, int64_t rec_bytes);

/* The cache's rule (docs/tiers.md, "The cache"): cache_bytes pays for the
 * index of the store's rows and, per cached row, ember_ssd_slot_bytes; the
 * cache holds the most rows that fit, at most the store's rows:
 *     min(rows, (cache_bytes - index) / slot_bytes), 0 when none fits.
 * What collection create gives a store and what the planner assumes. */
int64_t ember_ssd_cache_rows(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy);
/* The cache_bytes that hold exactly k rows of a store of `rows` rows (one
 * byte less holds k - 1): k x slot bytes + the index. */
static inline int64_t ember_ssd_cache_bytes_for(int64_t k, int64_t rows, int64_t rec_bytes, ember_cache_policy policy)
{
    return k * ember_ssd_slot_bytes(rec_bytes, policy) + ember_ssd_index_bytes(rows, rec_bytes);
}
/* The DRAM such a cache takes (ember_collection_memory's row, state and
 * cache_meta bytes): cache rows x slot bytes + the index; cache_bytes when
 * it holds no row (create refuses it). */
int64_t ember_ssd_cache_dram(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy);

#define EMBER_SSD_CACHE_DEFAULT ((int64_t)256 << 20)

#endif
