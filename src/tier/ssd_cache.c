/*
 * ssd_cache.c: the SSD tier's bookkeeping: which row is in which slot (an
 * open-addressing map with linear probing, exactly twice the slots, so a
 * lookup is about one cache miss and the map costs 16 bytes a cached row,
 * as ember_ssd_slot_bytes (ssd_size.c) counts), and which unpinned slot to
 * evict next
 * (ssd_impl.h lists the structure of each policy).
 *
 * None of this touches row contents: policies decide only where a row
 * lives, never what the kernels compute, so results are the same under
 * every policy (tests/test_tier.c compares them bit for bit).
 */
#include <stdlib.h>
#include <string.h>

#include "tier/ssd_impl.h"

#define EMPTY UINT64_MAX

/* ------------------------------------------------------------------ map */

static inline uint64_t home(const ssd_store *s, uint32_t row) { return ssd_map_home(s, row); }

/* The entry after i, wrapping around. */
static inline uint64_t next_entry(const ssd_store *s, uint64_t i)
{
    return i + 1 == (uint64_t)s->map_size ? 0 : i + 1;
}

int64_t ssd_map_find(const ssd_store *s, uint32_t row)
{
    for (uint64_t i = home(s, row);; i = next_entry(s, i)) {
        uint64_t e = s->map[i];
        if (e == EMPTY)
            return -1;
        if ((uint32_t)(e >> 32) == row)
            return (int64_t)(uint32_t)e;
    }
}

void ssd_map_find_all(const ssd_store *s, const uint32_t *rows, int64_t n, uint32_t *slots)
{
    for (int64_t i = 0; i < n; i++) {
        if (i + SSD_AHEAD < n)
            ssd_map_prefetch(s, rows[i + SSD_AHEAD]);
        int64_t x = ssd_map_find(s, rows[i]);
        slots[i] = x < 0 ? SSD_NONE : (uint32_t)x;
    }
}

void ssd_map_insert(ssd_store *s, uint32_t row, uint32_t slot)
{
    uint64_t i = home(s, row);
    while (s->map[i] != EMPTY)
        i = next_entry(s, i);
    s->map[i] = (uint64_t)row << 32 | slot;
}

/* Deletion without tombstones: later entries of the probe run move back
 * into the hole when their home position allows it. */
void ssd_map_erase(ssd_store *s, uint32_t row)
{
    uint64_t i = home(s, row);
    while (s->map[i] != EMPTY && (uint32_t)(s->map[i] >> 32) != row)
        i = next_entry(s, i);
    if (s->map[i] == EMPTY)
        return;
    uint64_t hole = i;
    for (uint64_t j = next_entry(s, i); s->map[j] != EMPTY; j = next_entry(s, j)) {
        if (ssd_may_shift(hole, j, home(s, (uint32_t)(s->map[j] >> 32)))) {
            s->map[hole] = s->map[j];
            hole = j;
        }
    }
    s->map[hole] = EMPTY;
}

/* ---------------------------------------------------------------- lists */

/* Links x after `after` (-1: at the front) in the list (head, tail). */
static void link_after(ssd_store *s, int32_t *head, int32_t *tail, int32_t after, int32_t x)
{
    int32_t nx = after >= 0 ? s->next[after] : *head;
    s->prev[x] = after;
    s->next[x] = nx;
    if (after >= 0)
        s->next[after] = x;
    else
        *head = x;
    if (nx >= 0)
        s->prev[nx] = x;
    else
        *tail = x;
}

static void unlink_from(ssd_store *s, int32_t *head, int32_t *tail, int32_t x)
{
    if (s->prev[x] >= 0)
        s->next[s->prev[x]] = s->next[x];
    else
        *head = s->next[x];
    if (s->next[x] >= 0)
        s->prev[s->next[x]] = s->prev[x];
    else
        *tail = s->prev[x];
    s->where[x] = -1;
}

static void list_push_back(ssd_store *s, int l, int32_t x)
{
    link_after(s, &s->head[l], &s->tail[l], s->tail[l], x);
    s->where[x] = (int8_t)l;
}

static void list_unlink(ssd_store *s, int32_t x)
{
    int l = s->where[x];
    unlink_from(s, &s->head[l], &s->tail[l], x);
}

/* ---------------------------------------------------------- cold levels */

/* LFU's order, (uses, last step used), without a heap: one list per use
 * count ("level"), each in order of last use, and a bitmap of the levels
 * that hold a row.  A row almost always joins when the step that used it
 * ends, so its last use is the newest and it goes to the tail in O(1); a row
 * that joins otherwise (an announced batch left the window unused, a claim
 * undone) walks back from the tail to its place.  The victim is the head of
 * the lowest level: O(1) but for a scan of the bitmap from the lowest level
 * that was ever emptied. */
static inline int64_t level_of(const ssd_store *s, int32_t x)
{
    return s->freq[x] < SSD_LEVELS ? (int64_t)s->freq[x] : SSD_LEVELS - 1;
}

static void cold_push(ssd_store *s, int32_t x)
{
    int64_t b = level_of(s, x);
    int32_t t = s->ctail[b];
    while (t >= 0 && s->last[t] > s->last[x])
        t = s->prev[t];
    link_after(s, &s->chead[b], &s->ctail[b], t, x);
    s->where[x] = SSD_COLD;
    s->ncold++;
    s->cbits[b >> 6] |= 1ull << (b & 63);
    if (b < s->cmin)
        s->cmin = b;
}

static void cold_unlink(ssd_store *s, int32_t x)
{
    int64_t b = level_of(s, x);
    unlink_from(s, &s->chead[b], &s->ctail[b], x);
    s->ncold--;
    if (s->chead[b] < 0)
        s->cbits[b >> 6] &= ~(1ull << (b & 63));
}

/* The least used cold row, least recently used among equals, unlinked; -1
 * when there is none. */
static int32_t cold_pop(ssd_store *s)
{
    int64_t nw = (s->clevels + 63) >> 6;
    for (int64_t w = s->cmin >> 6; w < nw; w++) {
        uint64_t bits = s->cbits[w];
        if (w == s->cmin >> 6)
            bits &= ~0ull << (s->cmin & 63);
        if (!bits)
            continue;
        int64_t b = (w << 6) + __builtin_ctzll(bits);
        s->cmin = b;
        int32_t x = s->chead[b];
        cold_unlink(s, x);
        return x;
    }
    s->cmin = s->clevels;
    return -1;
}

int ssd_cold_reserve(ssd_store *s)
{
    if (!s->freq)
        return 0;
    /* a use count is at most the steps begun + 1; a level more for the
     * step that is staging */
    int64_t need = (int64_t)s->step + 2;
    if (need > SSD_LEVELS)
        need = SSD_LEVELS;
    if (need <= s->clevels)
        return 0;
    int64_t n = s->clevels ? s->clevels : 64;
    while (n < need)
        n *= 2;
    if (n > SSD_LEVELS)
        n = SSD_LEVELS;
    int32_t *h = realloc(s->chead, (size_t)n * sizeof *h);
    if (!h)
        return -1;
    s->chead = h;
    int32_t *t = realloc(s->ctail, (size_t)n * sizeof *t);
    if (!t)
        return -1;
    s->ctail = t;
    uint64_t *bits = realloc(s->cbits, (size_t)((n + 63) >> 6) * sizeof *bits);
    if (!bits)
        return -1;
    s->cbits = bits;
    for (int64_t b = s->clevels; b < n; b++)
        h[b] = t[b] = -1;
    for (int64_t w = (s->clevels + 63) >> 6; w < (n + 63) >> 6; w++)
        bits[w] = 0;
    s->clevels = n;
    return 0;
}

/* -------------------------------------------------------------- policy */

/* The announced batch that uses a slot next, as its list (lookahead). */
static int next_use_list(const ssd_store *s, uint64_t mask)
{
    if (!mask)
        return 0;
    unsigned r = (unsigned)(s->seq_cur % SSD_WINDOW);
    uint64_t rot = r ? (mask >> r) | (mask << (SSD_WINDOW - r)) : mask;
    return 1 + (int)((s->seq_cur + __builtin_ctzll(rot)) % SSD_WINDOW);
}

void ssd_policy_remove(ssd_store *s, int32_t x)
{
    if (s->where[x] == SSD_COLD)
        cold_unlink(s, x);
    else if (s->where[x] >= 0)
        list_unlink(s, x);
}

void ssd_policy_place(ssd_store *s, int32_t x)
{
    ssd_policy_remove(s, x);
    int l = s->policy == EMBER_CACHE_LOOKAHEAD ? next_use_list(s, s->mask[x]) : 0;
    if (s->policy == EMBER_CACHE_LFU || (s->policy == EMBER_CACHE_LOOKAHEAD && l == 0)) {
        cold_push(s, x); /* LFU; lookahead's rows no announced batch uses */
    } else {
        list_push_back(s, l, x);
    }
}

int ssd_policy_cold(const ssd_store *s, int32_t x)
{
    return s->policy == EMBER_CACHE_LOOKAHEAD ? s->where[x] == SSD_COLD : s->where[x] == 0;
}

void ssd_pin(ssd_store *s, int32_t x)
{
    ssd_policy_remove(s, x);
    if (s->flags[x] & F_PREFETCHED)
        s->st.prefetch_used++;
    s->flags[x] = (uint8_t)((s->flags[x] & ~F_PREFETCHED) | F_PINNED);
    s->pinned[s->npinned++] = x;
    s->st.accesses++;
    if (s->freq) {
        s->freq[x]++;
        s->last[x] = s->step;
    }
}


static int32_t pop_list(ssd_store *s, int l)
{
    int32_t x = s->head[l];
    if (x >= 0)
        list_unlink(s, x);
    return x;
}

int32_t ssd_take_slot(ssd_store *s, int64_t keep_through, uint32_t *victim_row)
{
    *victim_row = SSD_NONE;
    if (s->nfree > 0)
        return s->free_slots[--s->nfree];
    if (s->used < s->cap)
        return (int32_t)s->used++;
    int32_t x = -1;
    if (s->policy == EMBER_CACHE_LRU) {
        x = pop_list(s, 0);
    } else { /* LFU; lookahead's cold rows, least used first */
        x = cold_pop(s);
    }
    const int cold = x >= 0;
    /* lookahead: then the row whose next use is farthest (Belady) */
    for (int32_t k = s->wlen - 1;
         x < 0 && s->policy == EMBER_CACHE_LOOKAHEAD && k >= 0 && s->seq_cur + k > keep_through; k--)
        x = pop_list(s, 1 + (int)((s->seq_cur + k) % SSD_WINDOW));
    if (x >= 0) {
        *victim_row = s->slot_row[x];
        s->st.prefetch_wasted += (s->flags[x] & F_PREFETCHED) != 0;
        uint32_t home; /* a sampled row remembered: a load of it soon after is a cold reload */
        if (cold && ssd_cold_sampled(s, *victim_row, &home))
            s->cold_seen[home] = (uint64_t)(uint32_t)s->step_now << 32 | *victim_row;
    }
    return x;
}

void ssd_release_slot(ssd_store *s, int32_t x)
{
    s->slot_row[x] = SSD_NONE;
    s->flags[x] = 0;
    if (s->mask)
        s->mask[x] = 0;
    if (s->freq)
        s->freq[x] = 0;
    s->free_slots[s->nfree++] = x;
}
