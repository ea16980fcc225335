/*
 * dyn.c: resolve, commit and rollback of a dynamic table's keys (dyn.h);
 * the admission sketch.
 *
 * The sketch is a blocked count-min sketch of depth 4 (a key's counters
 * in one cache line) with saturating 16-bit counters and conservative update (a key's counters only rise to its new
 * estimate), so an estimate is never below the key's true count and is
 * exact while no other key shares all four of its counters.  Only keys
 * without a row are counted; a key keeps its count when its row is freed,
 * so an evicted key that returns is admitted again at once.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/huge.h"
#include "core/reserve.h"
#include "core/rng.h"
#include "dyn/dyn.h"
#include "dyn/dyn_age.h"
#include "dyn/dyn_evict.h"

#define SKETCH_DEPTH 4
#define MAP_LOAD 0.9
#define FIND_MIN_PARALLEL 16384 /* keys below which resolve finds on one thread */
#define PREFETCH_AHEAD 16       /* keys whose map bucket is requested ahead    */

int64_t ember_dyn_index_bytes(int64_t capacity, ember_evict_policy evict)
{
    int64_t per = ember_keymap_sub_buckets(capacity, MAP_LOAD, 0);
    int64_t words = (capacity + 63) / 64, victims = 0;
    if (evict == EMBER_EVICT_LFU)
        victims = (2 * capacity + 20) * (int64_t)sizeof(ember_dyn_heap_entry); /* + 4: the line alignment */
    else if (evict != EMBER_EVICT_NONE)
        victims = ember_dyn_age_cap(capacity) * (int64_t)sizeof(ember_dyn_age_entry) + words * 8;
    return per * (int64_t)sizeof(ember_keymap_bucket) +
           capacity * (int64_t)(sizeof(uint64_t) + sizeof(ember_dyn_meta) + 2 * sizeof(uint32_t)) + words * 8 +
           victims;
}

uint32_t ember_dyn_owner(int64_t key, int32_t world)
{
    return world == 1 ? 0 : (uint32_t)(ember_mix64((uint64_t)key) % (uint64_t)world);
}

static int64_t heap_bytes(const ember_dyn *d)
{
    return (int64_t)sizeof *d->heap * (d->heap_cap + 4);
}

int ember_dyn_init(ember_dyn *d, const ember_dyn_params *p)
{
    memset(d, 0, sizeof *d);
    d->p = *p;
    int64_t cap = p->capacity;
    if (cap < 1 || cap >= (int64_t)UINT32_MAX)
        return EMBER_EINVAL;
    int st = ember_keymap_init(&d->map, cap, MAP_LOAD, 0, p->seed);
    if (st != EMBER_OK)
        return st;
    /* the per-slot arrays are read at random: huge pages, zero-filled */
    d->slot_key = ember_huge_alloc(cap * (int64_t)sizeof *d->slot_key);
    d->meta = ember_huge_alloc(cap * (int64_t)sizeof *d->meta);
    d->gen = ember_huge_alloc(cap * (int64_t)sizeof *d->gen);
    d->pin = ember_huge_alloc(cap * (int64_t)sizeof *d->pin);
    d->free_bits = calloc((size_t)(cap + 63) / 64, sizeof *d->free_bits);
    d->heap_cap = ember_dyn_uses_heap(d) ? 2 * cap + 16 : 0;
    if (ember_dyn_uses_age(d)) {
        d->age_cap = ember_dyn_age_cap(cap);
        d->age = ember_huge_alloc(d->age_cap * (int64_t)sizeof *d->age);
        d->used_bits = calloc((size_t)(cap + 63) / 64, sizeof *d->used_bits);
    }
    if (d->heap_cap) { /* children 4i+1..4i+4 on one line: entry 0 sits 3 entries into a page */
        d->heap_mem = ember_huge_alloc(heap_bytes(d));
        d->heap = d->heap_mem ? (ember_dyn_heap_entry *)d->heap_mem + 3 : NULL;
    }
    d->sketch = p->sketch_width ? calloc((size_t)(SKETCH_DEPTH * p->sketch_width), sizeof *d->sketch) : NULL;
    if (!d->slot_key || !d->meta || !d->gen || !d->pin || !d->free_bits || (d->heap_cap && !d->heap) ||
        (d->age_cap && (!d->age || !d->used_bits)) ||
        (p->sketch_width && !d->sketch)) {
        ember_dyn_free(d);
        return EMBER_ENOMEM;
    }
    /* zeros written now place the pages (as the rows' are at creation): a
     * step never faults one in, and the age queue, which fills over the
     * first 2 x capacity used rows, never pays for its growth in a step */
    memset(d->slot_key, 0, sizeof *d->slot_key * (size_t)cap);
    memset(d->meta, 0, sizeof *d->meta * (size_t)cap);
    memset(d->gen, 0, sizeof *d->gen * (size_t)cap);
    memset(d->pin, 0, sizeof *d->pin * (size_t)cap);
    if (d->age)
        memset(d->age, 0, sizeof *d->age * (size_t)d->age_cap);
    if (d->heap_mem)
        memset(d->heap_mem, 0, (size_t)heap_bytes(d));
    for (int64_t s = 0; s < cap; s++)
        d->free_bits[s >> 6] |= (uint64_t)1 << (s & 63);
    d->free_count = cap;
    return EMBER_OK;
}

void ember_dyn_free(ember_dyn *d)
{
    int64_t cap = d->p.capacity;
    ember_keymap_free(&d->map);
    ember_keymap_free(&d->batch);
    ember_huge_free(d->slot_key, cap * (int64_t)sizeof *d->slot_key);
    ember_huge_free(d->meta, cap * (int64_t)sizeof *d->meta);
    ember_huge_free(d->gen, cap * (int64_t)sizeof *d->gen);
    ember_huge_free(d->pin, cap * (int64_t)sizeof *d->pin);
    free(d->free_bits);
    ember_huge_free(d->heap_mem, heap_bytes(d));
    ember_huge_free(d->age, d->age_cap * (int64_t)sizeof *d->age);
    free(d->used_bits);
    free(d->sketch);
    free(d->undo);
    free(d->sketch_old_idx);
    free(d->sketch_old_val);
    free(d->reset_slot);
    free(d->reset_key);
    free(d->gone);
    free(d->evicted_keys);
    free(d->evicted_counts);
    free(d->pend_keys);
    free(d->pend_counts);
    free(d->dkey);
    free(d->dcount);
    free(d->dslot);
    free(d->miss);
    free(d->aside);
    memset(d, 0, sizeof *d);
}

int64_t ember_dyn_bytes(const ember_dyn *d)
{
    return ember_dyn_index_bytes(d->p.capacity, d->p.evict) + ember_dyn_sketch_bytes(d->p.sketch_width);
}

/* ---------------------------------------------------------------- sketch */

/* The sketch is width / 8 lines of 32 counters (64 bytes); row i of the
 * count-min is counters 8i..8i+7 of a line, so a key's four counters share
 * one line: one memory access a key, prefetched ahead in the admission
 * loop.  Counter i of a key: line h mod lines, then bits 40+3i.. of h. */
static inline uint64_t sketch_hash(const ember_dyn *d, uint64_t key)
{
    return ember_mix64(key ^ ember_mix64(d->p.seed + 0x9e3779b97f4a7c15ULL));
}

static inline uint64_t sketch_index(const ember_dyn *d, uint64_t h, int row)
{
    uint64_t line = h & (uint64_t)(d->p.sketch_width / 8 - 1);
    return line * 32 + 8 * (uint64_t)row + (h >> (40 + 3 * row) & 7);
}

static inline void sketch_prefetch(const ember_dyn *d, uint64_t key)
{
    if (d->sketch)
        __builtin_prefetch(&d->sketch[sketch_index(d, sketch_hash(d, key), 0)], 1);
}

static uint32_t sketch_estimate(const ember_dyn *d, uint64_t key)
{
    if (!d->sketch)
        return 0;
    uint64_t h = sketch_hash(d, key);
    uint32_t est = UINT16_MAX;
    for (int r = 0; r < SKETCH_DEPTH; r++) {
        uint16_t v = d->sketch[sketch_index(d, h, r)];
        if (v < est)
            est = v;
    }
    return est;
}

/* Conservative update to `value` (saturated), logging old counters. */
static void sketch_raise(ember_dyn *d, uint64_t key, uint32_t value)
{
    if (!d->sketch)
        return;
    uint64_t h = sketch_hash(d, key);
    uint16_t v = value > UINT16_MAX ? UINT16_MAX : (uint16_t)value;
    for (int r = 0; r < SKETCH_DEPTH; r++) { /* (room for the undo records: reserve_admissions) */
        uint64_t i = sketch_index(d, h, r);
        if (d->sketch[i] >= v)
            continue;
        d->sketch_old_idx[d->sketch_n] = i;
        d->sketch_old_val[d->sketch_n++] = d->sketch[i];
        d->sketch[i] = v;
    }
}

/* --------------------------------------------------------------- resolve */

/* Finds every key; pin: marks the slots found as used by this resolve. */
static void find_keys(const ember_dyn *d, const uint64_t *keys, int64_t n, int threads, uint32_t *slots, int pin)
{
    if (n < FIND_MIN_PARALLEL)
        threads = 1;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        ember_keymap_find_batch(&d->map, keys + lo, hi - lo, slots + lo);
        for (int64_t i = lo; i < hi && pin; i++)
            if (slots[i] != EMBER_KEYMAP_NONE)
                d->pin[slots[i]] = d->serial; /* the same value from every thread */
    }
}

void ember_dyn_find(const ember_dyn *d, const uint64_t *keys, int64_t n, int threads, uint32_t *slots)
{
    find_keys(d, keys, n, threads, slots, 0);
}

/* Distinct missing keys in first-occurrence order: dkey, dcount; slots[i]
 * of a missing key temporarily holds its distinct index.  Returns the
 * number of distinct keys, or EMBER_ENOMEM. */
static int64_t distinct_misses(ember_dyn *d, const uint64_t *keys, int64_t n, uint32_t *slots)
{
    int64_t nm = 0;
    for (int64_t i = 0; i < n; i++)
        nm += slots[i] == EMBER_KEYMAP_NONE;
    d->miss_n = 0;
    if (nm == 0)
        return 0;
    if (ember_reserve((void **)&d->miss, &d->miss_cap, nm, sizeof *d->miss))
        return EMBER_ENOMEM;
    for (int64_t i = 0, k = 0; i < n; i++)
        if (slots[i] == EMBER_KEYMAP_NONE)
            d->miss[k++] = i;
    d->miss_n = nm;
    if (d->batch.capacity < nm) {
        ember_keymap_free(&d->batch);
        if (ember_keymap_init(&d->batch, nm, 0.5, 0, d->p.seed ^ 0x5bd1e995u) != EMBER_OK)
            return EMBER_ENOMEM;
    } else {
        ember_keymap_clear(&d->batch);
    }
    int64_t cap = d->d_cap;
    if (ember_reserve((void **)&d->dkey, &cap, nm, sizeof *d->dkey))
        return EMBER_ENOMEM;
    cap = d->d_cap;
    if (ember_reserve((void **)&d->dcount, &cap, nm, sizeof *d->dcount))
        return EMBER_ENOMEM;
    cap = d->d_cap;
    if (ember_reserve((void **)&d->dslot, &cap, nm, sizeof *d->dslot))
        return EMBER_ENOMEM;
    d->d_cap = cap;
    int64_t nd = 0;
    for (int64_t k = 0; k < nm; k++) {
        int64_t i = d->miss[k];
        if (k + PREFETCH_AHEAD < nm)
            ember_keymap_prefetch(&d->batch, keys[d->miss[k + PREFETCH_AHEAD]]);
        uint32_t idx = ember_keymap_find_or_insert(&d->batch, keys[i], (uint32_t)nd);
        if (idx == EMBER_KEYMAP_NONE) {
            idx = (uint32_t)nd;
            d->dkey[nd] = keys[i];
            d->dcount[nd++] = 0;
        }
        if (d->dcount[idx] < UINT32_MAX)
            d->dcount[idx]++;
        slots[i] = idx;
    }
    return nd;
}

/* Gives distinct missing key j a slot if its count reaches admit_after. */
static int admit(ember_dyn *d, int64_t j, uint32_t step, char *err, size_t errlen)
{
    uint64_t key = d->dkey[j];
    uint32_t est = sketch_estimate(d, key);
    uint64_t now = (uint64_t)est + d->dcount[j];
    d->dslot[j] = EMBER_DYN_NONE;
    if (d->p.admit_after > 1)
        sketch_raise(d, key, now > UINT32_MAX ? UINT32_MAX : (uint32_t)now);
    if (now < (uint64_t)d->p.admit_after)
        return EMBER_OK;
    uint32_t slot; /* (room for the undo entries, reset and freed key: reserve_admissions) */
    int evicted;
    int st = ember_dyn_take_slot(d, &slot, &evicted);
    if (st == EMBER_ELIMIT) {
        if (d->p.evict == EMBER_EVICT_NONE)
            snprintf(err, errlen, "is full: all %lld rows of this rank hold keys and eviction is none",
                     (long long)d->p.capacity);
        else
            snprintf(err, errlen, "cannot admit key %lld: all %lld rows of this rank hold keys this batch uses",
                     (long long)key, (long long)d->p.capacity);
        return st;
    }
    if (st != EMBER_OK)
        return st;
    ember_dyn_log(d, EMBER_DYN_UNDO_ADMIT, slot);
    d->slot_key[slot] = key; /* into the map with the others: insert_admitted */
    d->meta[slot].last_step = step;
    d->meta[slot].count = est;
    d->gen[slot]++;
    d->pin[slot] = d->serial;
    ember_dyn_heap_push(d, slot);
    d->reset_slot[d->resets_n] = slot;
    d->reset_key[d->resets_n++] = key;
    d->dslot[j] = slot;
    d->step.admitted++;
    return EMBER_OK;
}

/* Room for nd admissions: an eviction and an admission undo entry, a
 * reset, a freed key and four sketch undo records each, so nothing fails
 * once the first count or slot is taken. */
static int reserve_admissions(ember_dyn *d, int64_t nd)
{
    int64_t cap = d->sketch_cap, raised = d->sketch ? SKETCH_DEPTH * nd : 0;
    if (ember_reserve((void **)&d->sketch_old_idx, &cap, raised, sizeof *d->sketch_old_idx))
        return EMBER_ENOMEM;
    cap = d->sketch_cap;
    if (ember_reserve((void **)&d->sketch_old_val, &cap, raised, sizeof *d->sketch_old_val))
        return EMBER_ENOMEM;
    d->sketch_cap = cap;
    cap = d->resets_cap;
    if (ember_reserve((void **)&d->undo, &d->undo_cap, d->undo_n + 2 * nd, sizeof *d->undo) ||
        ember_reserve((void **)&d->reset_slot, &cap, nd, sizeof *d->reset_slot))
        return EMBER_ENOMEM;
    cap = d->resets_cap;
    if (ember_reserve((void **)&d->reset_key, &cap, nd, sizeof *d->reset_key))
        return EMBER_ENOMEM;
    d->resets_cap = cap;
    return ember_reserve((void **)&d->gone, &d->gone_cap, nd, sizeof *d->gone) ? EMBER_ENOMEM : EMBER_OK;
}

/* The map changes of the admissions, as two prefetched batches: the freed
 * keys out, then the admitted keys in.  The sets are disjoint (a victim
 * was resident and unused by the batch, an admitted key was absent), so
 * the order of the changes does not matter; the slots were decided in
 * batch order already. */
static void apply_map_changes(ember_dyn *d)
{
    ember_keymap_erase_batch(&d->map, d->gone, d->gone_n);
    ember_keymap_insert_batch(&d->map, d->reset_key, d->reset_slot, d->resets_n);
    d->gone_n = 0;
}

int ember_dyn_resolve(ember_dyn *d, const uint64_t *keys, int64_t n, uint32_t step, int training,
                      int threads, uint32_t *slots, char *err, size_t errlen)
{
    d->serial++;
    if (!training) {
        find_keys(d, keys, n, threads, slots, 1);
        return EMBER_OK;
    }
    d->pending = 1;
    d->undo_n = d->sketch_n = d->resets_n = 0;
    memset(&d->step, 0, sizeof d->step);
    d->pend_n = 0;
    find_keys(d, keys, n, threads, slots, 1);
    ember_dyn_expire(d, step); /* after the find: rows this batch uses are pinned, never expired */
    int64_t nd = distinct_misses(d, keys, n, slots);
    int st = nd < 0 ? EMBER_ENOMEM : reserve_admissions(d, nd);
    d->defer_erase = 1;
    for (int64_t j = 0; j < nd && st == EMBER_OK; j++) {
        if (j + PREFETCH_AHEAD < nd)
            sketch_prefetch(d, d->dkey[j + PREFETCH_AHEAD]);
        st = admit(d, j, step, err, errlen);
    }
    d->defer_erase = 0;
    apply_map_changes(d);
    ember_dyn_unpin_aside(d);
    if (st != EMBER_OK) {
        if (st == EMBER_ENOMEM)
            snprintf(err, errlen, "out of memory resolving %lld keys", (long long)n);
        ember_dyn_rollback(d);
        return st;
    }
    for (int64_t k = 0; k < d->miss_n; k++) { /* distinct index -> slot */
        int64_t i = d->miss[k];
        slots[i] = d->dslot[slots[i]];
        d->step.not_admitted += slots[i] == EMBER_DYN_NONE;
    }
    return EMBER_OK;
}

void ember_dyn_commit(ember_dyn *d, const uint32_t *slots, int64_t n, uint32_t step, int threads)
{
    if (!d->pending)
        return;
    int64_t cap = d->p.capacity;
    if (n < FIND_MIN_PARALLEL)
        threads = 1;
    /* each thread touches the slots of its own range (whole words of the
     * used bits): no two threads write one slot or word, and every count
     * is the same sum for any thread count */
    int64_t words = (cap + 63) / 64, used = 0;
    uint64_t *ub = d->used_bits;
#pragma omp parallel num_threads(threads) reduction(+ : used)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = words * t / nt * 64, hi = words * (t + 1) / nt * 64;
        for (int64_t i = 0; i < n; i++) {
            if (i + PREFETCH_AHEAD < n) {
                uint32_t p = slots[i + PREFETCH_AHEAD];
                if (p != EMBER_DYN_NONE && p >= lo && p < hi)
                    __builtin_prefetch(&d->meta[p], 1);
            }
            uint32_t s = slots[i];
            if (s == EMBER_DYN_NONE || s < lo || s >= hi)
                continue;
            d->meta[s].last_step = step;
            if (d->meta[s].count < UINT32_MAX)
                d->meta[s].count++;
            if (ub && !(ub[s >> 6] >> (s & 63) & 1)) {
                ub[s >> 6] |= (uint64_t)1 << (s & 63);
                used++;
            }
        }
    }
    if (ub)
        ember_dyn_age_commit(d, step, used);
    d->total.admitted += d->step.admitted;
    d->total.evicted += d->step.evicted;
    d->total.expired += d->step.expired;
    d->total.evicted_count_sum += d->step.evicted_count_sum;
    d->total.not_admitted += d->step.not_admitted;
    d->undo_n = d->sketch_n = 0;
    /* the pending list of freed keys becomes the published one */
    uint64_t *k = d->evicted_keys;
    uint32_t *c = d->evicted_counts;
    int64_t kc = d->evicted_cap;
    d->evicted_keys = d->pend_keys, d->evicted_counts = d->pend_counts, d->evicted_cap = d->pend_cap;
    d->evicted_n = d->pend_n;
    d->pend_keys = k, d->pend_counts = c, d->pend_cap = kc, d->pend_n = 0;
    d->pending = 0;
}

void ember_dyn_rollback(ember_dyn *d)
{
    if (!d->pending)
        return;
    for (int64_t i = d->undo_n - 1; i >= 0; i--) {
        const ember_dyn_undo *u = &d->undo[i];
        uint32_t s = u->slot;
        if (u->kind == EMBER_DYN_UNDO_ADMIT) { /* the slot is free again */
            ember_keymap_erase(&d->map, d->slot_key[s]);
            d->free_bits[s >> 6] |= (uint64_t)1 << (s & 63);
            d->free_count++;
            d->resident--;
            if ((int64_t)(s >> 6) < d->free_hint)
                d->free_hint = s >> 6;
        } else { /* the freed key is back */
            d->free_bits[s >> 6] &= ~((uint64_t)1 << (s & 63));
            d->free_count--;
            d->resident++;
            ember_keymap_insert(&d->map, u->key, s);
        }
        d->slot_key[s] = u->key;
        d->meta[s] = u->meta;
        d->gen[s] = u->gen;
    }
    for (int64_t i = d->sketch_n - 1; i >= 0; i--)
        d->sketch[d->sketch_old_idx[i]] = d->sketch_old_val[i];
    if (ember_dyn_uses_age(d))
        ember_dyn_age_rollback(d);
    else
        ember_dyn_heap_rebuild(d);
    d->undo_n = d->sketch_n = d->resets_n = 0;
    d->pend_n = 0;
    memset(&d->step, 0, sizeof d->step);
    d->pending = 0;
}

void ember_dyn_clear(ember_dyn *d)
{
    ember_keymap_clear(&d->map);
    int64_t cap = d->p.capacity;
    memset(d->meta, 0, sizeof *d->meta * (size_t)cap);
    memset(d->gen, 0, sizeof *d->gen * (size_t)cap);
    memset(d->pin, 0, sizeof *d->pin * (size_t)cap);
    memset(d->slot_key, 0, sizeof *d->slot_key * (size_t)cap);
    for (int64_t s = 0; s < cap; s++)
        d->free_bits[s >> 6] |= (uint64_t)1 << (s & 63);
    d->free_count = cap;
    d->free_hint = 0;
    d->resident = 0;
    d->heap_n = d->aside_n = 0;
    d->age_n = d->age_head = d->age_cursor = 0;
    d->age_step = 0;
    if (d->sketch)
        memset(d->sketch, 0, sizeof *d->sketch * (size_t)(SKETCH_DEPTH * d->p.sketch_width));
    memset(&d->total, 0, sizeof d->total);
    d->evicted_n = d->pend_n = 0;
    d->serial = 0;
    d->pending = 0;
}

void ember_dyn_put(ember_dyn *d, uint32_t slot, uint64_t key, uint32_t last_step, uint32_t count)
{
    ember_keymap_insert(&d->map, key, slot);
    d->slot_key[slot] = key;
    d->meta[slot].last_step = last_step;
    d->meta[slot].count = count;
    d->free_bits[slot >> 6] &= ~((uint64_t)1 << (slot & 63));
    d->free_count--;
    d->resident++;
}

void ember_dyn_loaded(ember_dyn *d) { ember_dyn_victims_rebuild(d); }
