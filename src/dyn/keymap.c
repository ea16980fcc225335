/*
 * keymap.c: the dynamic table's key -> slot map (keymap.h).
 *
 * Linear probing keeps a key's run in one or two cache lines at loads up to
 * 0.9 (expected probes for a hit: (1 + 1/(1-a))/2 = 5.5 buckets at 0.9, 88
 * bytes), so the cost of a lookup is the miss on its home line; the batched
 * find hides that miss by prefetching PREFETCH_DISTANCE keys ahead.
 */
#include <stdlib.h>
#include <string.h>

#include "core/huge.h"
#include "dyn/keymap.h"
#include "ember.h"

#define PREFETCH_DISTANCE 16 /* keys hashed and prefetched ahead of the probe */
#define HUGE_MIN_BUCKETS (1 << 17) /* 2 MiB: arrays this large ask for huge pages */

/* Bucket arrays: large ones in huge pages (a probe then rarely misses the
 * TLB as well as the cache), small ones from malloc. */
static ember_keymap_bucket *buckets_alloc(uint64_t n)
{
    if (n >= HUGE_MIN_BUCKETS)
        return ember_huge_alloc((int64_t)(n * sizeof(ember_keymap_bucket)));
    return malloc(sizeof(ember_keymap_bucket) * (size_t)n);
}

static void buckets_free(ember_keymap_bucket *b, uint64_t n)
{
    if (n >= HUGE_MIN_BUCKETS)
        ember_huge_free(b, (int64_t)(n * sizeof(ember_keymap_bucket)));
    else
        free(b);
}

static int64_t pow2_at_least(int64_t n)
{
    int64_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

int64_t ember_keymap_sub_buckets(int64_t capacity, double max_load, int32_t sub_bits)
{
    int64_t per = pow2_at_least((int64_t)((double)capacity / max_load / (1 << sub_bits)) + 1);
    return per < 16 ? 16 : per;
}

int ember_keymap_init(ember_keymap *m, int64_t capacity, double max_load, int32_t sub_bits, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    if (capacity < 1 || !(max_load > 0 && max_load < 1) || sub_bits < 0 || sub_bits > 12)
        return EMBER_EINVAL;
    int32_t nsub = 1 << sub_bits;
    int64_t per = ember_keymap_sub_buckets(capacity, max_load, sub_bits);
    m->subs = calloc((size_t)nsub, sizeof *m->subs);
    if (!m->subs)
        return EMBER_ENOMEM;
    m->sub_bits = sub_bits;
    m->seed = seed;
    for (int32_t i = 0; i < nsub; i++) {
        ember_keymap_sub *s = &m->subs[i];
        s->b = buckets_alloc((uint64_t)per);
        if (!s->b) {
            ember_keymap_free(m);
            return EMBER_ENOMEM;
        }
        s->mask = (uint64_t)per - 1;
    }
    m->buckets = per * nsub;
    m->capacity = capacity;
    ember_keymap_clear(m);
    return EMBER_OK;
}

void ember_keymap_free(ember_keymap *m)
{
    if (m->subs)
        for (int32_t i = 0; i < 1 << m->sub_bits; i++)
            if (m->subs[i].b)
                buckets_free(m->subs[i].b, m->subs[i].mask + 1);
    free(m->subs);
    memset(m, 0, sizeof *m);
}

int64_t ember_keymap_bytes(const ember_keymap *m)
{
    return m->buckets * (int64_t)sizeof(ember_keymap_bucket);
}

int64_t ember_keymap_count(const ember_keymap *m)
{
    int64_t n = 0;
    for (int32_t i = 0; m->subs && i < 1 << m->sub_bits; i++)
        n += m->subs[i].count;
    return n;
}

void ember_keymap_clear(ember_keymap *m)
{
    for (int32_t i = 0; m->subs && i < 1 << m->sub_bits; i++) {
        ember_keymap_sub *s = &m->subs[i];
        for (uint64_t j = 0; j <= s->mask; j++)
            s->b[j].slot = EMBER_KEYMAP_NONE;
        s->count = 0;
    }
}

/* Prefetches the home bucket's cache line and the next one: at load 0.9 a
 * key's run is 5.5 buckets long on average, so it often crosses a line. */
static inline __attribute__((always_inline)) void prefetch_run(const ember_keymap_sub *s, uint64_t h)
{
    uint64_t j = h & s->mask;
    __builtin_prefetch(&s->b[j]);
    __builtin_prefetch(&s->b[(j + 4) & s->mask]);
}

/* Probes sub-map s from the home bucket of hash h. */
static inline uint32_t probe(const ember_keymap_sub *s, uint64_t h, uint64_t key)
{
    for (uint64_t j = h & s->mask;; j = (j + 1) & s->mask) {
        const ember_keymap_bucket *b = &s->b[j];
        if (b->slot == EMBER_KEYMAP_NONE)
            return EMBER_KEYMAP_NONE;
        if (b->key == key)
            return b->slot;
    }
}

uint32_t ember_keymap_find(const ember_keymap *m, uint64_t key)
{
    uint64_t h = ember_keymap_hash(m->seed, key);
    return probe(&m->subs[ember_keymap_sub_of(m, h)], h, key);
}

void ember_keymap_find_batch(const ember_keymap *m, const uint64_t *keys, int64_t n, uint32_t *slots)
{
    uint64_t hs[PREFETCH_DISTANCE];
    int64_t ahead = n < PREFETCH_DISTANCE ? n : PREFETCH_DISTANCE;
    for (int64_t i = 0; i < ahead; i++) {
        hs[i] = ember_keymap_hash(m->seed, keys[i]);
        const ember_keymap_sub *s = &m->subs[ember_keymap_sub_of(m, hs[i])];
        prefetch_run(s, hs[i]);
    }
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = hs[i % PREFETCH_DISTANCE];
        int64_t next = i + PREFETCH_DISTANCE;
        if (next < n) {
            uint64_t hn = ember_keymap_hash(m->seed, keys[next]);
            const ember_keymap_sub *sn = &m->subs[ember_keymap_sub_of(m, hn)];
            prefetch_run(sn, hn);
            hs[i % PREFETCH_DISTANCE] = hn;
        }
        slots[i] = probe(&m->subs[ember_keymap_sub_of(m, h)], h, keys[i]);
    }
}

/* Doubles sub-map s (a sub-map may get more than its share of keys); on
 * failure it stays as it is. */
static void grow(const ember_keymap *m, ember_keymap_sub *s)
{
    uint64_t buckets = (s->mask + 1) * 2;
    ember_keymap_bucket *b = buckets_alloc(buckets);
    if (!b)
        return;
    for (uint64_t j = 0; j < buckets; j++)
        b[j].slot = EMBER_KEYMAP_NONE;
    for (uint64_t i = 0; i <= s->mask; i++) {
        if (s->b[i].slot == EMBER_KEYMAP_NONE)
            continue;
        uint64_t j = ember_keymap_hash(m->seed, s->b[i].key) & (buckets - 1);
        while (b[j].slot != EMBER_KEYMAP_NONE)
            j = (j + 1) & (buckets - 1);
        b[j] = s->b[i];
    }
    buckets_free(s->b, s->mask + 1);
    ((ember_keymap *)m)->buckets += (int64_t)(s->mask + 1);
    s->b = b;
    s->mask = buckets - 1;
}

/* Finds key in s, or inserts key -> slot at the end of its run.  A sub-map
 * past 63/64 full (of fewer than 64 buckets: with one empty bucket left)
 * doubles first (an overflow guard: maps are sized for their load); one
 * that cannot (no memory) and has a single empty bucket left refuses the
 * key (EMBER_KEYMAP_FULL), so probes always end. */
static inline uint32_t upsert(const ember_keymap *m, ember_keymap_sub *s, uint64_t h, uint64_t key, uint32_t slot)
{
    uint64_t buckets = s->mask + 1, spare = buckets >= 64 ? buckets / 64 : 1;
    if ((uint64_t)s->count + 1 > buckets - spare) {
        uint32_t got = probe(s, h, key);
        if (got != EMBER_KEYMAP_NONE)
            return got;
        grow(m, s);
        if ((uint64_t)s->count + 2 > s->mask + 1)
            return EMBER_KEYMAP_FULL;
    }
    for (uint64_t j = h & s->mask;; j = (j + 1) & s->mask) {
        ember_keymap_bucket *b = &s->b[j];
        if (b->slot == EMBER_KEYMAP_NONE) {
            b->key = key;
            b->slot = slot;
            s->count++;
            return EMBER_KEYMAP_NONE;
        }
        if (b->key == key)
            return b->slot;
    }
}

void ember_keymap_insert(ember_keymap *m, uint64_t key, uint32_t slot)
{
    (void)ember_keymap_find_or_insert(m, key, slot);
}

uint32_t ember_keymap_find_or_insert(ember_keymap *m, uint64_t key, uint32_t slot)
{
    uint64_t h = ember_keymap_hash(m->seed, key);
    return upsert(m, &m->subs[ember_keymap_sub_of(m, h)], h, key, slot);
}

void ember_keymap_upsert_batch(ember_keymap *m, const uint64_t *keys, const uint32_t *slots, int64_t n,
                               int32_t sub_lo, int32_t sub_hi, uint32_t *out)
{
    uint64_t hs[PREFETCH_DISTANCE];
    int64_t ahead = n < PREFETCH_DISTANCE ? n : PREFETCH_DISTANCE;
    for (int64_t i = 0; i < ahead; i++)
        hs[i] = ember_keymap_hash(m->seed, keys[i]);
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = hs[i % PREFETCH_DISTANCE];
        int64_t next = i + PREFETCH_DISTANCE;
        if (next < n) {
            uint64_t hn = ember_keymap_hash(m->seed, keys[next]);
            int32_t sn = ember_keymap_sub_of(m, hn);
            if (sn >= sub_lo && sn < sub_hi)
                __builtin_prefetch(&m->subs[sn].b[hn & m->subs[sn].mask], 1);
            hs[i % PREFETCH_DISTANCE] = hn;
        }
        int32_t sub = ember_keymap_sub_of(m, h);
        if (sub < sub_lo || sub >= sub_hi)
            continue;
        uint32_t got = upsert(m, &m->subs[sub], h, keys[i], slots[i]);
        out[i] = got == EMBER_KEYMAP_NONE ? slots[i] : got;
    }
}

uint32_t ember_keymap_erase(ember_keymap *m, uint64_t key)
{
    uint64_t h = ember_keymap_hash(m->seed, key);
    ember_keymap_sub *s = &m->subs[ember_keymap_sub_of(m, h)];
    uint64_t j = h & s->mask;
    while (s->b[j].slot != EMBER_KEYMAP_NONE && s->b[j].key != key)
        j = (j + 1) & s->mask;
    if (s->b[j].slot == EMBER_KEYMAP_NONE)
        return EMBER_KEYMAP_NONE;
    uint32_t slot = s->b[j].slot;
    /* Backward shift: move each later bucket of the run whose home is not in
     * (hole, its position] into the hole, until an empty bucket. */
    uint64_t hole = j;
    for (uint64_t k = (j + 1) & s->mask; s->b[k].slot != EMBER_KEYMAP_NONE; k = (k + 1) & s->mask) {
        uint64_t home = ember_keymap_hash(m->seed, s->b[k].key) & s->mask;
        /* the bucket at k may move to hole iff home is not cyclically in (hole, k] */
        int stays = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
        if (stays)
            continue;
        s->b[hole] = s->b[k];
        hole = k;
    }
    s->b[hole].slot = EMBER_KEYMAP_NONE;
    s->count--;
    return slot;
}

void ember_keymap_erase_batch(ember_keymap *m, const uint64_t *keys, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (i + PREFETCH_DISTANCE < n)
            ember_keymap_prefetch(m, keys[i + PREFETCH_DISTANCE]);
        (void)ember_keymap_erase(m, keys[i]);
    }
}

void ember_keymap_insert_batch(ember_keymap *m, const uint64_t *keys, const uint32_t *slots, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (i + PREFETCH_DISTANCE < n)
            ember_keymap_prefetch(m, keys[i + PREFETCH_DISTANCE]);
        ember_keymap_insert(m, keys[i], slots[i]);
    }
}

void ember_keymap_each(const ember_keymap *m, void *ctx, void (*fn)(void *ctx, uint64_t key, uint32_t slot))
{
    for (int32_t i = 0; i < 1 << m->sub_bits; i++) {
        const ember_keymap_sub *s = &m->subs[i];
        for (uint64_t j = 0; j <= s->mask; j++)
            if (s->b[j].slot != EMBER_KEYMAP_NONE)
                fn(ctx, s->b[j].key, s->b[j].slot);
    }
}
