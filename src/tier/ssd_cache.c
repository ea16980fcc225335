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

static void list_push_back(ssd_store *s, int l, int32_t x)
{
    s->prev[x] = s->tail[l];
    s->next[x] = -1;
    if (s->tail[l] >= 0)
        s->next[s->tail[l]] = x;
    else
        s->head[l] = x;
    s->tail[l] = x;
    s->where[x] = (int8_t)l;
}

static void list_unlink(ssd_store *s, int32_t x)
{
    int l = s->where[x];
    if (s->prev[x] >= 0)
        s->next[s->prev[x]] = s->next[x];
    else
        s->head[l] = s->next[x];
    if (s->next[x] >= 0)
        s->prev[s->next[x]] = s->prev[x];
    else
        s->tail[l] = s->prev[x];
    s->where[x] = -1;
}

/* ----------------------------------------------------------- LFU heap */

static inline int heap_less(const ssd_store *s, int32_t a, int32_t b)
{
    return s->freq[a] != s->freq[b] ? s->freq[a] < s->freq[b] : s->last[a] < s->last[b];
}

static void heap_set(ssd_store *s, int64_t i, int32_t x)
{
    s->heap[i] = x;
    s->heap_pos[x] = (int32_t)i;
}

static void heap_up(ssd_store *s, int64_t i)
{
    int32_t x = s->heap[i];
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!heap_less(s, x, s->heap[p]))
            break;
        heap_set(s, i, s->heap[p]);
        i = p;
    }
    heap_set(s, i, x);
}

static void heap_down(ssd_store *s, int64_t i)
{
    int32_t x = s->heap[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= s->heap_n)
            break;
        if (c + 1 < s->heap_n && heap_less(s, s->heap[c + 1], s->heap[c]))
            c++;
        if (!heap_less(s, s->heap[c], x))
            break;
        heap_set(s, i, s->heap[c]);
        i = c;
    }
    heap_set(s, i, x);
}

static void heap_remove(ssd_store *s, int32_t x)
{
    int64_t i = s->heap_pos[x];
    s->heap_pos[x] = -1;
    int32_t y = s->heap[--s->heap_n];
    if (y == x)
        return;
    heap_set(s, i, y);
    heap_up(s, i);
    heap_down(s, s->heap_pos[y]);
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
    if (s->heap_pos && s->heap_pos[x] >= 0)
        heap_remove(s, x);
    else if (s->where[x] >= 0)
        list_unlink(s, x);
}

void ssd_policy_place(ssd_store *s, int32_t x)
{
    ssd_policy_remove(s, x);
    int l = s->policy == EMBER_CACHE_LOOKAHEAD ? next_use_list(s, s->mask[x]) : 0;
    if (s->policy == EMBER_CACHE_LFU || (s->policy == EMBER_CACHE_LOOKAHEAD && l == 0)) {
        heap_set(s, s->heap_n, x); /* LFU; lookahead's rows no announced batch uses */
        heap_up(s, s->heap_n++);
    } else {
        list_push_back(s, l, x);
    }
}

int ssd_policy_cold(const ssd_store *s, int32_t x)
{
    return s->policy == EMBER_CACHE_LOOKAHEAD ? s->heap_pos[x] >= 0 : s->where[x] == 0;
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
    } else if (s->heap_n > 0) { /* LFU; lookahead's cold rows, least used first */
        x = s->heap[0];
        heap_remove(s, x);
    }
    /* lookahead: then the row whose next use is farthest (Belady) */
    for (int32_t k = s->wlen - 1;
         x < 0 && s->policy == EMBER_CACHE_LOOKAHEAD && k >= 0 && s->seq_cur + k > keep_through; k--)
        x = pop_list(s, 1 + (int)((s->seq_cur + k) % SSD_WINDOW));
    if (x >= 0) {
        *victim_row = s->slot_row[x];
        s->st.prefetch_wasted += (s->flags[x] & F_PREFETCHED) != 0;
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
