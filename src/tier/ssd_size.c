/*
 * ssd_size.c: the SSD tier's sizes (ssd_size.h): the DRAM of a cached row,
 * and how many rows a cache of so many bytes holds.
 */
#include "tier/ssd_size.h"

int64_t ember_ssd_slot_bytes(int32_t dim, int32_t state_floats, ember_cache_policy policy)
{
    /* values + state; slot_row, flags, where, pinned, free_slots,
     * prev/next; map at load 1/2: 16; LFU: freq, last, heap, heap_pos;
     * lookahead: mask.  Every array of ember_store_ssd_create sized by the
     * slots, so the cache's DRAM is what cache_bytes grants. */
    int64_t meta = 4 + 1 + 1 + 4 + 4 + 8 + 16;
    if (policy == EMBER_CACHE_LFU || policy == EMBER_CACHE_LOOKAHEAD)
        meta += 16;
    if (policy == EMBER_CACHE_LOOKAHEAD)
        meta += 8;
    return (int64_t)sizeof(float) * (dim + state_floats) + meta;
}

int64_t ember_ssd_cache_rows(int64_t cache_bytes, int64_t rows, int32_t dim, int32_t state_floats,
                             ember_cache_policy policy)
{
    int64_t left = cache_bytes - ember_ssd_bitmap_bytes(rows);
    int64_t k = left > 0 ? left / ember_ssd_slot_bytes(dim, state_floats, policy) : 0;
    return k < rows ? k : rows;
}

int64_t ember_ssd_cache_dram(int64_t cache_bytes, int64_t rows, int32_t dim, int32_t state_floats,
                             ember_cache_policy policy)
{
    int64_t k = ember_ssd_cache_rows(cache_bytes, rows, dim, state_floats, policy);
    return k > 0 ? k * ember_ssd_slot_bytes(dim, state_floats, policy) + ember_ssd_bitmap_bytes(rows) : cache_bytes;
}
