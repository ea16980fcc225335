/*
 * dyn_evict.c: free slots and victims of a dynamic table (dyn_evict.h).
 *
 * Free slots are a bitmap; a new row takes the lowest free slot, so slot
 * numbers are a pure function of the key sequence.  LRU and TTL victims
 * come from the age queue (dyn_age.c); LFU victims from a lazy 4-ary
 * min-heap of (score, slot) scored by (use count, last step); ties go to
 * the lower slot.  A row's score
 * only grows while it is resident, so an entry's score is a lower bound of
 * its row's: popping the minimum, an entry whose score is behind is pushed
 * again with the current one, an entry of a slot freed or reused since
 * (generation differs) is dropped, and an entry that is current is the
 * exact minimum over all resident rows.  Rows the running batch uses are
 * pinned: set aside and pushed back after the batch.  So victims are
 * exactly those of the naive rule "the resident row with the least
 * (score, slot) that this batch does not use", at O(log n) per touch
 * instead of a scan.
 */
#include <stdlib.h>
#include <string.h>

#include "core/reserve.h"
#include "dyn/dyn_age.h"
#include "dyn/dyn_evict.h"

uint64_t ember_dyn_score(const ember_dyn *d, uint32_t slot)
{
    const ember_dyn_meta *m = &d->meta[slot];
    if (d->p.evict == EMBER_EVICT_LFU)
        return (uint64_t)m->count << 32 | m->last_step;
    return m->last_step;
}

static int is_free(const ember_dyn *d, uint32_t slot) { return d->free_bits[slot >> 6] >> (slot & 63) & 1; }

static int entry_less(const ember_dyn_heap_entry *a, const ember_dyn_heap_entry *b)
{
    return a->score < b->score || (a->score == b->score && a->slot < b->slot);
}

/* A 4-ary heap: half the levels of a binary one, and a node's four
 * children are one 64-byte line (the array starts 3 entries before a line,
 * see ember_dyn_init), so a sift down misses the cache once a level. */
#define HEAP_ARITY 4

static void sift_up(ember_dyn_heap_entry *h, int64_t i)
{
    ember_dyn_heap_entry e = h[i];
    while (i > 0) {
        int64_t parent = (i - 1) / HEAP_ARITY;
        if (!entry_less(&e, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

static void sift_down(ember_dyn_heap_entry *h, int64_t n, int64_t i)
{
    ember_dyn_heap_entry e = h[i];
    for (;;) {
        int64_t c = HEAP_ARITY * i + 1, end = c + HEAP_ARITY < n ? c + HEAP_ARITY : n;
        if (c >= n)
            break;
        int64_t best = c;
        for (int64_t k = c + 1; k < end; k++)
            if (entry_less(&h[k], &h[best]))
                best = k;
        if (!entry_less(&h[best], &e))
            break;
        h[i] = h[best];
        i = best;
    }
    h[i] = e;
}

static void push_entry(ember_dyn *d, ember_dyn_heap_entry e)
{
    /* the heap holds at most one current entry per slot plus stale ones; it
     * was sized for 2 x capacity and stale entries are compacted away
     * (rebuild) before it could overflow */
    if (d->heap_n == d->heap_cap)
        ember_dyn_heap_rebuild(d);
    d->heap[d->heap_n] = e;
    sift_up(d->heap, d->heap_n++);
}

static ember_dyn_heap_entry pop_entry(ember_dyn *d)
{
    ember_dyn_heap_entry top = d->heap[0];
    d->heap[0] = d->heap[--d->heap_n];
    if (d->heap_n > 0)
        sift_down(d->heap, d->heap_n, 0);
    return top;
}

void ember_dyn_heap_push(ember_dyn *d, uint32_t slot)
{
    if (!ember_dyn_uses_heap(d))
        return;
    ember_dyn_heap_entry e = {ember_dyn_score(d, slot), slot, d->gen[slot]};
    push_entry(d, e);
}

void ember_dyn_victims_rebuild(ember_dyn *d)
{
    if (ember_dyn_uses_age(d))
        ember_dyn_age_rebuild(d);
    else
        ember_dyn_heap_rebuild(d);
}

int ember_dyn_heap_rebuild(ember_dyn *d)
{
    if (!ember_dyn_uses_heap(d))
        return EMBER_OK;
    int64_t n = 0;
    for (int64_t s = 0; s < d->p.capacity; s++)
        if (!is_free(d, (uint32_t)s)) {
            ember_dyn_heap_entry e = {ember_dyn_score(d, (uint32_t)s), (uint32_t)s, d->gen[s]};
            d->heap[n++] = e;
        }
    d->heap_n = n;
    d->aside_n = 0; /* the pinned entries set aside are in again */
    for (int64_t i = (n - 2) / HEAP_ARITY; i >= 0 && n > 1; i--)
        sift_down(d->heap, n, i);
    return EMBER_OK;
}

void ember_dyn_unpin_aside(ember_dyn *d)
{
    for (int64_t i = 0; i < d->aside_n; i++)
        push_entry(d, d->aside[i]);
    d->aside_n = 0;
}

/* Pops stale entries until the top is a current entry of a resident slot;
 * returns 0 when the heap is empty. */
static int settle_top(ember_dyn *d)
{
    while (d->heap_n > 0) {
        ember_dyn_heap_entry e = d->heap[0];
        if (is_free(d, e.slot) || e.gen != d->gen[e.slot]) {
            pop_entry(d);
            continue;
        }
        uint64_t now = ember_dyn_score(d, e.slot);
        if (now != e.score) {
            d->heap[0].score = now; /* grew: move it down */
            sift_down(d->heap, d->heap_n, 0);
            continue;
        }
        return 1;
    }
    return 0;
}

int ember_dyn_log(ember_dyn *d, int kind, uint32_t slot)
{
    if (ember_reserve((void **)&d->undo, &d->undo_cap, d->undo_n + 1, sizeof *d->undo))
        return EMBER_ENOMEM;
    ember_dyn_undo *u = &d->undo[d->undo_n++];
    u->kind = kind;
    u->slot = slot;
    u->key = d->slot_key[slot];
    u->meta = d->meta[slot];
    u->gen = d->gen[slot];
    return EMBER_OK;
}

int ember_dyn_note_evicted(ember_dyn *d, uint64_t key, uint32_t count)
{
    uint64_t **keys = d->pending ? &d->pend_keys : &d->evicted_keys;
    uint32_t **counts = d->pending ? &d->pend_counts : &d->evicted_counts;
    int64_t *n = d->pending ? &d->pend_n : &d->evicted_n, *cap = d->pending ? &d->pend_cap : &d->evicted_cap;
    int64_t c = *cap;
    if (ember_reserve((void **)keys, &c, *n + 1, sizeof **keys))
        return EMBER_ENOMEM;
    c = *cap;
    if (ember_reserve((void **)counts, &c, *n + 1, sizeof **counts))
        return EMBER_ENOMEM;
    *cap = c;
    (*keys)[*n] = key;
    (*counts)[(*n)++] = count;
    return EMBER_OK;
}

void ember_dyn_release_slot(ember_dyn *d, uint32_t slot, int expired)
{
    if (d->defer_erase) /* an admission's victim: erased with the others (room reserved) */
        d->gone[d->gone_n++] = d->slot_key[slot];
    else
        ember_keymap_erase(&d->map, d->slot_key[slot]);
    d->free_bits[slot >> 6] |= (uint64_t)1 << (slot & 63);
    d->free_count++;
    d->resident--;
    if ((int64_t)(slot >> 6) < d->free_hint)
        d->free_hint = slot >> 6;
    ember_dyn_counters *c = d->pending ? &d->step : &d->total;
    if (expired)
        c->expired++;
    else
        c->evicted++;
    c->evicted_count_sum += d->meta[slot].count;
}

/* Frees a resident slot inside a resolve: logged, reported. */
static int evict_logged(ember_dyn *d, uint32_t slot, int expired)
{
    if (ember_dyn_log(d, EMBER_DYN_UNDO_FREE, slot) || ember_dyn_note_evicted(d, d->slot_key[slot], d->meta[slot].count))
        return EMBER_ENOMEM;
    ember_dyn_release_slot(d, slot, expired);
    return EMBER_OK;
}

/* TTL: frees every row unused for more than ttl_steps steps, the running
 * one counted: last step s with step - s > ttl_steps, and not used by this
 * batch (pinned by the find, which runs first).  A row last used in step s
 * is so kept through step s + ttl_steps, and freed at the start of step
 * s + ttl_steps + 1 unless that step uses it. */
void ember_dyn_expire(ember_dyn *d, uint32_t step)
{
    if (d->p.evict != EMBER_EVICT_TTL)
        return;
    uint32_t slot;
    while ((slot = ember_dyn_age_oldest_unpinned(d)) != EMBER_DYN_NONE) {
        if ((int64_t)step - (int64_t)d->meta[slot].last_step <= d->p.ttl_steps)
            break;
        if (evict_logged(d, slot, 1) != EMBER_OK)
            break; /* out of memory: it stays */
    }
}

/* The lowest free slot (free_count > 0). */
static uint32_t lowest_free(ember_dyn *d)
{
    int64_t words = (d->p.capacity + 63) / 64;
    for (int64_t w = d->free_hint; w < words; w++)
        if (d->free_bits[w]) {
            d->free_hint = w;
            return (uint32_t)(w * 64 + __builtin_ctzll(d->free_bits[w]));
        }
    return EMBER_DYN_NONE; /* not reached while free_count > 0 */
}

int ember_dyn_take_slot(ember_dyn *d, uint32_t *slot, int *evicted)
{
    *evicted = 0;
    if (d->free_count == 0) {
        if (d->p.evict == EMBER_EVICT_NONE)
            return EMBER_ELIMIT;
        uint32_t victim = EMBER_DYN_NONE;
        if (ember_dyn_uses_age(d))
            victim = ember_dyn_age_victim(d);
        while (!ember_dyn_uses_age(d) && settle_top(d)) { /* pinned entries stay aside until the resolve ends */
            if (ember_reserve((void **)&d->aside, &d->aside_cap, d->aside_n + 1, sizeof *d->aside))
                return EMBER_ENOMEM;
            ember_dyn_heap_entry e = pop_entry(d);
            if (d->pin[e.slot] != d->serial) {
                victim = e.slot;
                break;
            }
            d->aside[d->aside_n++] = e;
        }
        if (victim == EMBER_DYN_NONE)
            return EMBER_ELIMIT;
        if (evict_logged(d, victim, 0) != EMBER_OK)
            return EMBER_ENOMEM;
        *evicted = 1;
    }
    uint32_t s = lowest_free(d);
    d->free_bits[s >> 6] &= ~((uint64_t)1 << (s & 63));
    d->free_count--;
    d->resident++;
    *slot = s;
    return EMBER_OK;
}

int64_t ember_dyn_evict_idle(ember_dyn *d, uint32_t step, int64_t idle_steps)
{
    d->evicted_n = 0;
    int64_t n = 0;
    for (int64_t s = 0; s < d->p.capacity; s++) {
        if (is_free(d, (uint32_t)s) || (int64_t)step - (int64_t)d->meta[s].last_step <= idle_steps)
            continue;
        ember_dyn_note_evicted(d, d->slot_key[s], d->meta[s].count);
        ember_dyn_release_slot(d, (uint32_t)s, 1);
        n++;
    }
    return n; /* their heap entries go stale and are dropped when popped */
}
