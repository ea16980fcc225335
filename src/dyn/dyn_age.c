/*
 * dyn_age.c: the victims of LRU and TTL tables, an age queue (dyn_age.h).
 *
 * Both policies evict the resident row with the least (last step, slot)
 * that the running batch does not use.  Every committed step appends the
 * slots it used, in slot order, to one array; steps only grow, so the
 * array is sorted by (step, slot).  An entry (slot, step) is current while
 * the slot is resident and its last step is still `step`; a row used again
 * later has a newer entry further on, and its old one is skipped.  So the
 * first current entry from the front is exactly the naive rule's victim,
 * and finding it reads the array in order: one cache line per eight
 * entries, prefetched, instead of a heap's sift through random lines.
 *
 * A resolve reads from a cursor and never writes the array: commit moves
 * the front to the cursor (every entry before it is now stale: evicted,
 * expired, or used by the batch and appended again), rollback leaves the
 * front where it was, so the rows it brings back are found at their
 * entries.  The array holds 2 x capacity + 16 entries; when an append would
 * not fit, the stale entries are squeezed out first (at most capacity stay).
 */
#include <stdlib.h>
#include <string.h>

#include "dyn/dyn_age.h"

#define AGE_PREFETCH 8 /* entries whose slot metadata is requested ahead */

int64_t ember_dyn_age_cap(int64_t capacity) { return 2 * capacity + 16; }

static int current(const ember_dyn *d, ember_dyn_age_entry e)
{
    return !(d->free_bits[e.slot >> 6] >> (e.slot & 63) & 1) && d->meta[e.slot].last_step == e.step;
}

static inline __attribute__((always_inline)) void prefetch_entry(const ember_dyn *d, int64_t i)
{
    if (i < d->age_n) {
        uint32_t s = d->age[i].slot;
        __builtin_prefetch(&d->meta[s]);
        __builtin_prefetch(&d->slot_key[s]);
    }
}

/* The first current entry at or after the cursor, unpinned if unpinned is
 * set; moves the cursor onto it.  Returns its slot or EMBER_DYN_NONE. */
static uint32_t first_current(ember_dyn *d, int unpinned)
{
    for (; d->age_cursor < d->age_n; d->age_cursor++) {
        prefetch_entry(d, d->age_cursor + AGE_PREFETCH);
        ember_dyn_age_entry e = d->age[d->age_cursor];
        if (current(d, e) && !(unpinned && d->pin[e.slot] == d->serial))
            return e.slot;
    }
    return EMBER_DYN_NONE;
}

uint32_t ember_dyn_age_victim(ember_dyn *d)
{
    uint32_t s = first_current(d, 1);
    if (s != EMBER_DYN_NONE)
        d->age_cursor++; /* the row is freed now */
    return s;
}

uint32_t ember_dyn_age_oldest_unpinned(ember_dyn *d) { return first_current(d, 1); }

static int entry_cmp(const void *a, const void *b)
{
    const ember_dyn_age_entry *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

void ember_dyn_age_rebuild(ember_dyn *d)
{
    int64_t n = 0;
    for (int64_t s = 0; s < d->p.capacity; s++)
        if (!(d->free_bits[s >> 6] >> (s & 63) & 1))
            d->age[n++] = (ember_dyn_age_entry){(uint32_t)s, d->meta[s].last_step};
    qsort(d->age, (size_t)n, sizeof *d->age, entry_cmp);
    d->age_n = n;
    d->age_head = d->age_cursor = 0;
    d->age_step = n > 0 ? d->age[n - 1].step : 0;
}

/* Keeps the current entries from the front on, in order, at the start. */
static void squeeze(ember_dyn *d)
{
    int64_t k = 0;
    for (int64_t i = d->age_head; i < d->age_n; i++) {
        prefetch_entry(d, i + AGE_PREFETCH);
        if (current(d, d->age[i]))
            d->age[k++] = d->age[i];
    }
    d->age_n = k;
    d->age_head = d->age_cursor = 0;
}

void ember_dyn_age_commit(ember_dyn *d, uint32_t step, int64_t used)
{
    d->age_head = d->age_cursor;
    if (step <= d->age_step && d->age_n > d->age_head) {
        /* a second training forward of one step: its rows join the step's
         * (sorted) run, so take the run's entries into the used bits first */
        while (d->age_n > d->age_head && d->age[d->age_n - 1].step == step) {
            uint32_t s = d->age[--d->age_n].slot;
            if (current(d, d->age[d->age_n]) && !(d->used_bits[s >> 6] >> (s & 63) & 1)) {
                d->used_bits[s >> 6] |= (uint64_t)1 << (s & 63);
                used++;
            }
        }
        if (d->age_n > d->age_head && d->age[d->age_n - 1].step > step) { /* steps went back (not */
            int64_t words = (d->p.capacity + 63) / 64;                    /* made by ember): sort */
            memset(d->used_bits, 0, sizeof *d->used_bits * (size_t)words);
            ember_dyn_age_rebuild(d);
            return;
        }
    }
    if (d->age_n + used > d->age_cap)
        squeeze(d);
    int64_t words = (d->p.capacity + 63) / 64;
    for (int64_t w = 0; w < words; w++) {
        uint64_t bits = d->used_bits[w];
        d->used_bits[w] = 0;
        while (bits) {
            uint32_t s = (uint32_t)(w * 64 + __builtin_ctzll(bits));
            bits &= bits - 1;
            d->age[d->age_n++] = (ember_dyn_age_entry){s, step};
        }
    }
    d->age_step = step;
}

void ember_dyn_age_rollback(ember_dyn *d)
{
    d->age_cursor = d->age_head;
    memset(d->used_bits, 0, sizeof *d->used_bits * (size_t)((d->p.capacity + 63) / 64));
}
