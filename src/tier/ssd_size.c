/*
 * ssd_size.c: the SSD tier's sizes (ssd_size.h): the DRAM of a cached row,
 * and how many rows a cache of so many bytes holds.
 */
#include "tier/ssd_size.h"

int64_t ember_ssd_slot_bytes(int64_t rec_bytes, ember_cache_policy policy)
{
    /* the record (values + state, as held); slot_row, flags, where,
     * pinned, free_slots, prev/next; map at load 1/2: 16; LFU: freq, last,
     * heap, heap_pos; lookahead: mask.  Every array of ember_store_ssd_create sized by the
     * slots, so the cache's DRAM is what cache_bytes grants. */
    int64_t meta = 4 + 1 + 1 + 4 + 4 + 8 + 16;
    if (policy == EMBER_CACHE_LFU || policy == EMBER_CACHE_LOOKAHEAD)
        meta += 16;
    if (policy == EMBER_CACHE_LOOKAHEAD)
        meta += 8;
    return rec_bytes + meta;
}

int64_t ember_ssd_cache_rows(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy)
{
    int64_t left = cache_bytes - ember_ssd_bitmap_bytes(rows);
    int64_t k = left > 0 ? left / ember_ssd_slot_bytes(rec_bytes, policy) : 0;
    return k < rows ? k : rows;
}

int64_t ember_ssd_cache_dram(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy)
{
    int64_t k = ember_ssd_cache_rows(cache_bytes, rows, rec_bytes, policy);
    return k > 0 ? k * ember_ssd_slot_bytes(rec_bytes, policy) + ember_ssd_bitmap_bytes(rows) : cache_bytes;
}
