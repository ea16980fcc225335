/*
 * ssd_size.c: the SSD tier's sizes (ssd_size.h): the store file's layout,
 * the DRAM of a cached row and of the index, and how many rows a cache of
 * so many bytes holds.
 */
#include "tier/ssd_size.h"
#include "tier/ssd_log.h"

#define SEGMENT_TARGET ((int64_t)1 << 20)

static int64_t round4k(int64_t b) { return (b + 4095) / 4096 * 4096; }

int ember_ssd_layout_of(int64_t rows, int64_t rec_bytes, ember_ssd_layout *out)
{
    int64_t per = SEGMENT_TARGET / rec_bytes, small = (rows + 31) / 32;
    int64_t recs = per < small ? per : small;
    if (recs < 8)
        recs = 8;
    out->seg_recs = recs;
    out->data_bytes = round4k(recs * rec_bytes);
    out->seg_bytes = out->data_bytes + round4k(4 * recs);
    /* rows + half again, + a segment per buffer, one to compact into and one
     * whose records are all dead but not yet reclaimed */
    int64_t segs = (3 * rows + 2 * recs - 1) / (2 * recs) + SSD_LOG_BUFS + 2;
    int64_t most = ((int64_t)SSD_LOG_NONE - 1) / recs; /* record numbers are uint32 */
    if (segs > most)
        segs = most;
    out->max_segs = segs;
    return segs * recs >= rows + (SSD_LOG_BUFS + 2) * recs ? 0 : -1;
}

int64_t ember_ssd_file_bytes(int64_t rows, int64_t rec_bytes)
{
    ember_ssd_layout l;
    ember_ssd_layout_of(rows, rec_bytes, &l);
    return SSD_LOG_MARK_BYTES + l.max_segs * l.seg_bytes;
}

int64_t ember_ssd_index_bytes(int64_t rows, int64_t rec_bytes)
{
    ember_ssd_layout l;
    ember_ssd_layout_of(rows, rec_bytes, &l);
    return 4 * rows + 12 * l.max_segs;
}

int64_t ember_ssd_slot_bytes(int64_t rec_bytes, ember_cache_policy policy)
{
    /* the record (values + state, as held); slot_row, flags, where,
     * pinned, free_slots, prev/next; map at load 1/2: 16; LFU: freq, last
     * (the cold levels' heads grow with the steps, 8 bytes a use count,
     * 512 KiB at most); lookahead: mask.  Every array of ember_store_ssd_create sized by the
     * slots, so the cache's DRAM is what cache_bytes grants. */
    int64_t meta = 4 + 1 + 1 + 4 + 4 + 8 + 16;
    if (policy == EMBER_CACHE_LFU || policy == EMBER_CACHE_LOOKAHEAD)
        meta += 8;
    if (policy == EMBER_CACHE_LOOKAHEAD)
        meta += 8;
    return rec_bytes + meta;
}

int64_t ember_ssd_cache_rows(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy)
{
    int64_t left = cache_bytes - ember_ssd_index_bytes(rows, rec_bytes);
    int64_t k = left > 0 ? left / ember_ssd_slot_bytes(rec_bytes, policy) : 0;
    return k < rows ? k : rows;
}

int64_t ember_ssd_cache_dram(int64_t cache_bytes, int64_t rows, int64_t rec_bytes, ember_cache_policy policy)
{
    int64_t k = ember_ssd_cache_rows(cache_bytes, rows, rec_bytes, policy);
    return k > 0 ? k * ember_ssd_slot_bytes(rec_bytes, policy) + ember_ssd_index_bytes(rows, rec_bytes) : cache_bytes;
}
