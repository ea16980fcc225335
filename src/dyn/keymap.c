/*
 * keymap.c: the dynamic table's key -> slot map (keymap.h).
 *
 * Why cuckoo and not linear probing (which this map was first): at load 0.9
 * a linear-probing hit walks 5.5 buckets on average with a long tail (14 %
 * of keys end 3 or more lines from home), so a lookup is one or two
 * prefetched lines plus, often, dependent misses; here it is always the two
 * prefetched lines.  The batched find hides those misses by prefetching
 * PREFETCH_DISTANCE keys ahead.
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
    return aligned_alloc(64, sizeof(ember_keymap_bucket) * (size_t)n); /* whole lines */
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
        s->stash_n = 0;
        s->kicks = 0;
    }
}

/* Prefetches both lines of hash h. */
static inline __attribute__((always_inline)) void prefetch_lines(const ember_keymap_sub *s, uint64_t h)
{
    uint64_t l2, l1 = ember_keymap_lines(h, s->mask >> 2, &l2);
    __builtin_prefetch(&s->b[4 * l1]);
    __builtin_prefetch(&s->b[4 * l2]);
}

/* The bucket of key (hash h) in sub-map s, or NULL.  An empty bucket keeps
 * its old key, so a match must also hold a slot. */
static inline ember_keymap_bucket *locate(const ember_keymap_sub *s, uint64_t h, uint64_t key)
{
    uint64_t l2, l1 = ember_keymap_lines(h, s->mask >> 2, &l2);
    ember_keymap_bucket *a = &s->b[4 * l1], *c = &s->b[4 * l2];
    for (int k = 0; k < 4; k++)
        if (a[k].key == key && a[k].slot != EMBER_KEYMAP_NONE)
            return &a[k];
    for (int k = 0; k < 4; k++)
        if (c[k].key == key && c[k].slot != EMBER_KEYMAP_NONE)
            return &c[k];
    for (int32_t k = 0; k < s->stash_n; k++)
        if (s->stash[k].key == key)
            return (ember_keymap_bucket *)&s->stash[k];
    return NULL;
}

static inline uint32_t probe(const ember_keymap_sub *s, uint64_t h, uint64_t key)
{
    const ember_keymap_bucket *b = locate(s, h, key);
    return b ? b->slot : EMBER_KEYMAP_NONE;
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
        prefetch_lines(&m->subs[ember_keymap_sub_of(m, hs[i])], hs[i]);
    }
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = hs[i % PREFETCH_DISTANCE];
        int64_t next = i + PREFETCH_DISTANCE;
        if (next < n) {
            uint64_t hn = ember_keymap_hash(m->seed, keys[next]);
            prefetch_lines(&m->subs[ember_keymap_sub_of(m, hn)], hn);
            hs[i % PREFETCH_DISTANCE] = hn;
        }
        slots[i] = probe(&m->subs[ember_keymap_sub_of(m, h)], h, keys[i]);
    }
}

/* An empty bucket of a line, or NULL. */
static inline ember_keymap_bucket *empty_in(ember_keymap_bucket *line)
{
    for (int k = 0; k < 4; k++)
        if (line[k].slot == EMBER_KEYMAP_NONE)
            return &line[k];
    return NULL;
}

static inline int empties(const ember_keymap_bucket *line)
{
    int n = 0;
    for (int k = 0; k < 4; k++)
        n += line[k].slot == EMBER_KEYMAP_NONE;
    return n;
}

#define BFS_LINES 682 /* lines a search for a free bucket visits: depth 5 from the two */
#define MAX_KICKS 512 /* moves of the fallback walk before its homeless key goes to the stash */

/* The other line of a resident of line l. */
static inline uint64_t other_line(const ember_keymap *m, uint64_t lmask, uint64_t key, uint64_t l)
{
    uint64_t a2, a1 = ember_keymap_lines(ember_keymap_hash(m->seed, key), lmask, &a2);
    return l == a1 ? a2 : a1;
}

/* Both lines of a new key are full: a breadth-first search from them for
 * the shortest chain of residents, each moving to its other line, that ends
 * in a free bucket (each level's lines are prefetched as they are queued,
 * so a level costs about one memory latency).  Moves the chain and returns
 * the bucket it freed in line l1 or l2, or NULL if none within BFS_LINES. */
static ember_keymap_bucket *make_room(const ember_keymap *m, ember_keymap_sub *s, uint64_t l1, uint64_t l2)
{
    uint64_t lmask = s->mask >> 2, line[BFS_LINES];
    int16_t parent[BFS_LINES];
    int8_t from[BFS_LINES]; /* bucket of the parent line whose resident moves here */
    int n = 2;
    line[0] = l1, line[1] = l2;
    parent[0] = parent[1] = -1;
    for (int q = 0; q < n; q++) {
        ember_keymap_bucket *e = q >= 2 ? empty_in(&s->b[4 * line[q]]) : NULL;
        if (e) { /* move the chain, last link first */
            for (int at = q; parent[at] >= 0; at = parent[at]) {
                ember_keymap_bucket *src = &s->b[4 * line[parent[at]] + from[at]];
                *e = *src;
                e = src;
            }
            return e;
        }
        for (int k = 0; k < 4 && n < BFS_LINES; k++) {
            uint64_t alt = other_line(m, lmask, s->b[4 * line[q] + k].key, line[q]);
            int seen = 0; /* a chain never revisits a line */
            for (int at = q; at >= 0 && !seen; at = parent[at])
                seen = line[at] == alt;
            if (seen)
                continue;
            __builtin_prefetch(&s->b[4 * alt], 1);
            line[n] = alt, parent[n] = (int16_t)q, from[n] = (int8_t)k;
            n++;
        }
    }
    return NULL;
}

/* Puts an absent key in s: in a free bucket of the emptier of its two lines
 * (the first on a tie: even lines leave fewer keys with both full), else
 * where the shortest chain of moves (make_room) frees one.  Failing that
 * (not seen at load 0.9; a few times in 10^5 inserts near 0.96), a walk: the key takes a
 * resident's bucket (chosen by the kick counter), the resident goes to its
 * other line, and so on; after MAX_KICKS moves the key left homeless goes to
 * the stash, which the caller has checked has room.  The same calls give
 * the same layout. */
static void place(const ember_keymap *m, ember_keymap_sub *s, uint64_t h, uint64_t key, uint32_t slot)
{
    uint64_t lmask = s->mask >> 2, l2, l1 = ember_keymap_lines(h, lmask, &l2);
    ember_keymap_bucket *e = empty_in(&s->b[4 * (empties(&s->b[4 * l2]) > empties(&s->b[4 * l1]) ? l2 : l1)]);
    if (!e)
        e = make_room(m, s, l1, l2);
    s->count++;
    if (e) {
        e->key = key;
        e->slot = slot;
        return;
    }
    ember_keymap_bucket cur = {key, slot, 0};
    uint64_t line = s->kicks & 4 ? l2 : l1;
    for (int kick = 0; kick < MAX_KICKS; kick++) {
        ember_keymap_bucket *victim = &s->b[4 * line + (s->kicks++ & 3)], out = *victim;
        *victim = cur;
        cur = out;
        line = other_line(m, lmask, cur.key, line);
        if ((e = empty_in(&s->b[4 * line]))) {
            *e = cur;
            return;
        }
    }
    s->stash[s->stash_n++] = cur;
}

/* Doubles sub-map s (a sub-map may get more than its share of keys); on
 * failure (no memory, or the bigger map's stash overflowing) it stays as
 * it is. */
static void grow(const ember_keymap *m, ember_keymap_sub *s)
{
    ember_keymap_sub *g = calloc(1, sizeof *g);
    uint64_t buckets = (s->mask + 1) * 2;
    if (!g || !(g->b = buckets_alloc(buckets))) {
        free(g);
        return;
    }
    g->mask = buckets - 1;
    for (uint64_t j = 0; j < buckets; j++)
        g->b[j].slot = EMBER_KEYMAP_NONE;
    int ok = 1;
    for (uint64_t i = 0; i <= s->mask + (uint64_t)s->stash_n && ok; i++) {
        const ember_keymap_bucket *b = i <= s->mask ? &s->b[i] : &s->stash[i - s->mask - 1];
        if (b->slot == EMBER_KEYMAP_NONE)
            continue;
        ok = g->stash_n < EMBER_KEYMAP_STASH;
        if (ok)
            place(m, g, ember_keymap_hash(m->seed, b->key), b->key, b->slot);
    }
    if (!ok) {
        buckets_free(g->b, buckets);
        free(g);
        return;
    }
    /* sub-maps of one map may grow on two threads at once (upsert_batch) */
    __atomic_fetch_add(&((ember_keymap *)m)->buckets, (int64_t)(s->mask + 1), __ATOMIC_RELAXED);
    buckets_free(s->b, s->mask + 1);
    *s = *g;
    free(g);
}

/* Full: another key would pass 31/32 load, or the stash has no room for a
 * walk's homeless key. */
static inline int crowded(const ember_keymap_sub *s)
{
    uint64_t buckets = s->mask + 1;
    return (uint64_t)s->count + 1 > buckets - buckets / 32 || s->stash_n == EMBER_KEYMAP_STASH;
}

/* Finds key in s, or places key -> slot (returning NONE).  A crowded
 * sub-map doubles first; one that cannot (no memory) refuses the key
 * (EMBER_KEYMAP_FULL) and is unchanged. */
static inline uint32_t upsert(const ember_keymap *m, ember_keymap_sub *s, uint64_t h, uint64_t key, uint32_t slot)
{
    uint32_t got = probe(s, h, key);
    if (got != EMBER_KEYMAP_NONE)
        return got;
    if (crowded(s)) {
        grow(m, s);
        if (crowded(s))
            return EMBER_KEYMAP_FULL;
    }
    place(m, s, h, key, slot);
    return EMBER_KEYMAP_NONE;
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
                prefetch_lines(&m->subs[sn], hn);
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
    ember_keymap_bucket *b = locate(s, h, key);
    if (!b)
        return EMBER_KEYMAP_NONE;
    uint32_t slot = b->slot;
    if (b >= s->stash && b < s->stash + EMBER_KEYMAP_STASH)
        *b = s->stash[--s->stash_n];
    else
        b->slot = EMBER_KEYMAP_NONE;
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
        for (int32_t k = 0; k < s->stash_n; k++)
            fn(ctx, s->stash[k].key, s->stash[k].slot);
    }
}
