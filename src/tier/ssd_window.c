/*
 * ssd_window.c: lookahead's window of announced batches (ssd_impl.h): each
 * batch's distinct rows, and which batches use a row, as one hash from row
 * to a 64-bit mask (bit s % 64: batch s).  A batch's rows set their bit
 * when it is announced and clear it when it leaves the window, so the next
 * uses of a row that is being loaded cost one lookup, not a search in every
 * announced batch.  Entries whose mask is empty are removed (backward-shift
 * deletion, as the row -> slot map does).
 */
#include <stdlib.h>
#include <string.h>

#include "tier/ssd_impl.h"

static inline uint64_t home(int64_t size, uint32_t row)
{
    return (uint64_t)(((unsigned __int128)((uint64_t)row * 0x9E3779B97F4A7C15ull) * (uint64_t)size) >> 64);
}

static inline uint64_t next_entry(int64_t size, uint64_t i) { return i + 1 == (uint64_t)size ? 0 : i + 1; }

/* Asks for the entry (row and mask) where row's search starts. */
static inline void prefetch_home(const ssd_store *s, uint32_t row)
{
    uint64_t h = home(s->wh_size, row);
    __builtin_prefetch(&s->wh_row[h], 1, 1);
    __builtin_prefetch(&s->wh_mask[h], 1, 1);
}

/* The entry of row, or of the empty place where it would go. */
static uint64_t find(const ssd_store *s, uint32_t row)
{
    uint64_t i = home(s->wh_size, row);
    while (s->wh_row[i] != SSD_NONE && s->wh_row[i] != row)
        i = next_entry(s->wh_size, i);
    return i;
}

/* Room for n more rows at load <= 1/2.  0, or -1 out of memory. */
static int grow(ssd_store *s, int64_t n)
{
    if (2 * (s->wh_n + n) <= s->wh_size)
        return 0;
    int64_t size = s->wh_size ? s->wh_size : 1024;
    while (2 * (s->wh_n + n) > size)
        size *= 2;
    uint32_t *rows = malloc((size_t)size * sizeof *rows);
    uint64_t *masks = malloc((size_t)size * sizeof *masks);
    if (!rows || !masks) {
        free(rows);
        free(masks);
        return -1;
    }
    memset(rows, 0xff, (size_t)size * sizeof *rows);
    for (int64_t j = 0; j < s->wh_size; j++) {
        if (s->wh_row[j] == SSD_NONE)
            continue;
        uint64_t i = home(size, s->wh_row[j]);
        while (rows[i] != SSD_NONE)
            i = next_entry(size, i);
        rows[i] = s->wh_row[j];
        masks[i] = s->wh_mask[j];
    }
    free(s->wh_row);
    free(s->wh_mask);
    s->wh_row = rows;
    s->wh_mask = masks;
    s->wh_size = size;
    return 0;
}

int ssd_window_add(ssd_store *s, int e)
{
    if (grow(s, s->wn[e]) != 0)
        return -1;
    for (int64_t k = 0; k < s->wn[e]; k++) {
        if (k + SSD_AHEAD < s->wn[e])
            prefetch_home(s, s->wrows[e][k + SSD_AHEAD]);
        uint32_t row = s->wrows[e][k];
        uint64_t i = find(s, row);
        if (s->wh_row[i] == SSD_NONE) {
            s->wh_row[i] = row;
            s->wh_mask[i] = 0;
            s->wh_n++;
        }
        s->wh_mask[i] |= 1ull << e;
    }
    return 0;
}

uint64_t ssd_window_mask(const ssd_store *s, uint32_t row)
{
    if (s->wh_n == 0)
        return 0;
    uint64_t i = find(s, row);
    return s->wh_row[i] == SSD_NONE ? 0 : s->wh_mask[i];
}

/* Clears bit e of row; the entry goes when no bit is left. */
static void clear_bit(ssd_store *s, uint32_t row, int e)
{
    uint64_t i = find(s, row);
    if (s->wh_row[i] == SSD_NONE || (s->wh_mask[i] &= ~(1ull << e)) != 0)
        return;
    uint64_t hole = i;
    for (uint64_t j = next_entry(s->wh_size, i); s->wh_row[j] != SSD_NONE; j = next_entry(s->wh_size, j)) {
        if (ssd_may_shift(hole, j, home(s->wh_size, s->wh_row[j]))) {
            s->wh_row[hole] = s->wh_row[j];
            s->wh_mask[hole] = s->wh_mask[j];
            hole = j;
        }
    }
    s->wh_row[hole] = SSD_NONE;
    s->wh_n--;
}

/* Drops the head batch: its rows lose that use and move to the list of
 * their next one. */
static void window_pop(ssd_store *s)
{
    int e = (int)(s->seq_cur % SSD_WINDOW);
    s->seq_cur++;
    s->wlen--;
    const uint32_t *rows = s->wrows[e];
    int64_t n = s->wn[e];
    /* passes that each ask ahead for what the next rows need: the
     * hash's entries, the map's, then the slots' bookkeeping */
    for (int64_t i = 0; i < n; i++) {
        if (i + SSD_AHEAD < n)
            prefetch_home(s, rows[i + SSD_AHEAD]);
        clear_bit(s, rows[i], e);
    }
    ssd_map_find_all(s, rows, n, s->look);
    for (int64_t i = 0; i < n; i++) {
        ssd_slots_ahead(s, s->look, i, n);
        uint32_t x = s->look[i];
        if (x == SSD_NONE)
            continue;
        s->mask[x] &= ~(1ull << e);
        if (!(s->flags[x] & (F_PINNED | F_LOADING)))
            ssd_policy_place(s, (int32_t)x);
    }
    s->wn[e] = 0;
}

void ssd_window_to(ssd_store *s, int64_t step)
{
    while (s->wlen > 0 && s->seq_cur < step)
        window_pop(s);
    if (s->wlen == 0 && s->seq_cur < step)
        s->seq_cur = step;
}
