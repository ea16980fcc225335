/*
 * keymap.h: ember's 64-bit key -> 32-bit slot hash map, the index of a
 * dynamic table (docs/dynamic.md).
 *
 * Bucketed cuckoo hashing: a key lives in one of two cache lines of four
 * 16-byte buckets (key, slot), chosen by two functions of its hash, in 2^s
 * sub-maps chosen by the hash's top bits.  A lookup reads at most those two
 * lines (plus a tiny stash, empty in practice), so at load 0.9 it costs what
 * it costs at 0.5: there is no run to walk.  Lookups are batched: the hashes
 * of a window of keys are computed and both lines prefetched ahead of the
 * probes, so a lookup costs two overlapped cache misses however large the
 * map is and however full.  An insert that finds both lines full moves
 * residents to their other line (a deterministic walk); deletion just
 * empties the bucket.
 *
 * Thread safety: any number of threads may find concurrently while nobody
 * inserts or erases.  Inserts and erases of different sub-maps may run
 * concurrently (ember_keymap_sub gives a key's sub-map), which is how the
 * parallel insert of the benchmark splits its work; the dynamic table's own
 * inserts are serial, in batch order, so its contents never depend on the
 * thread count.
 */
#ifndef EMBER_DYN_KEYMAP_H
#define EMBER_DYN_KEYMAP_H

#include <stdint.h>

#define EMBER_KEYMAP_NONE UINT32_MAX /* "no slot": an empty bucket, a missing key */
#define EMBER_KEYMAP_FULL (UINT32_MAX - 1) /* an insert refused: out of memory */

typedef struct ember_keymap_bucket {
    uint64_t key;
    uint32_t slot;   /* EMBER_KEYMAP_NONE: empty */
    uint32_t unused; /* keeps buckets 16 bytes, four to a cache line */
} ember_keymap_bucket;

#define EMBER_KEYMAP_STASH 8 /* keys a sub-map holds outside its lines */

typedef struct ember_keymap_sub {
    ember_keymap_bucket *b; /* lines of 4 buckets, 64-byte aligned */
    uint64_t mask;          /* buckets - 1 */
    int64_t count;          /* keys, stash included */
    uint64_t kicks;         /* moves so far: picks the next victim, deterministically */
    int32_t stash_n;
    ember_keymap_bucket stash[EMBER_KEYMAP_STASH]; /* a walk's homeless keys */
} ember_keymap_sub;

typedef struct ember_keymap {
    ember_keymap_sub *subs;
    int32_t sub_bits;  /* 2^sub_bits sub-maps */
    uint64_t seed;     /* mixed into every hash */
    int64_t buckets;   /* over all sub-maps */
    int64_t capacity;  /* keys it may hold (buckets * max load) */
} ember_keymap;

/* The hash of a key: splitmix64's finaliser of key ^ seed (a bijection, so
 * distinct keys never share a full hash). */
static inline uint64_t ember_keymap_hash(uint64_t seed, uint64_t key)
{
    uint64_t z = key ^ seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Makes a map for `capacity` keys at most, with buckets >= capacity /
 * max_load (max_load in (0, 1); rounded up to powers of two per sub-map).
 * sub_bits 0..12.  Returns EMBER_OK, EMBER_EINVAL or EMBER_ENOMEM. */
int ember_keymap_init(ember_keymap *m, int64_t capacity, double max_load, int32_t sub_bits, uint64_t seed);
void ember_keymap_free(ember_keymap *m);
/* Buckets of each sub-map that ember_keymap_init makes for these arguments. */
int64_t ember_keymap_sub_buckets(int64_t capacity, double max_load, int32_t sub_bits);
/* Bytes of its bucket arrays. */
int64_t ember_keymap_bytes(const ember_keymap *m);
int64_t ember_keymap_count(const ember_keymap *m);
void ember_keymap_clear(ember_keymap *m);

static inline int32_t ember_keymap_sub_of(const ember_keymap *m, uint64_t h)
{
    return m->sub_bits ? (int32_t)(h >> (64 - m->sub_bits)) : 0;
}

/* The slot of one key, or EMBER_KEYMAP_NONE. */
uint32_t ember_keymap_find(const ember_keymap *m, uint64_t key);
/* Batched find: slots[i] = find(keys[i]) for i < n, with prefetching.
 * Read-only: call from any number of threads on disjoint outputs. */
void ember_keymap_find_batch(const ember_keymap *m, const uint64_t *keys, int64_t n, uint32_t *slots);
/* Inserts key -> slot (slot below FULL); the key must be absent.  A
 * sub-map that would pass 31/32 load, or whose stash is full, doubles
 * first (sub-maps share keys unevenly); a map of one sub-map at load 0.9 or
 * less has never been seen to fill its stash, so a dynamic table's inserts
 * do not allocate. */
void ember_keymap_insert(ember_keymap *m, uint64_t key, uint32_t slot);
/* The key's slot if present, else inserts key -> slot and returns NONE
 * (EMBER_KEYMAP_FULL: refused, out of memory to grow). */
uint32_t ember_keymap_find_or_insert(ember_keymap *m, uint64_t key, uint32_t slot);
/* Batched insert-or-find: out[i] = the slot of keys[i], inserting
 * slots[i] for a key not present (out[i] = slots[i] then).  Only keys of
 * sub-maps [sub_lo, sub_hi) are processed (out of others untouched): two
 * threads with disjoint ranges may run at once. */
void ember_keymap_upsert_batch(ember_keymap *m, const uint64_t *keys, const uint32_t *slots, int64_t n,
                               int32_t sub_lo, int32_t sub_hi, uint32_t *out);
/* Removes a key; returns its slot or NONE if absent. */
uint32_t ember_keymap_erase(ember_keymap *m, uint64_t key);
/* Serial batches with prefetching, in order: erases keys[0..n) (absent
 * ones are ignored); inserts (key, slot) pairs (keys absent, as insert). */
void ember_keymap_erase_batch(ember_keymap *m, const uint64_t *keys, int64_t n);
void ember_keymap_insert_batch(ember_keymap *m, const uint64_t *keys, const uint32_t *slots, int64_t n);

/* The two lines of hash h in a sub-map of lines lmask + 1 (>= 4): the
 * first from its low bits, the second from a remix of all of them (never
 * the first).  Returns the first line's index; *second gets the other. */
static inline uint64_t ember_keymap_lines(uint64_t h, uint64_t lmask, uint64_t *second)
{
    uint64_t l1 = h & lmask;
    uint64_t l2 = (((h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ULL) >> 23) & lmask;
    *second = l2 == l1 ? l1 ^ 1 : l2;
    return l1;
}

/* Starts loading both lines of key, for writing: a hint, no effect on
 * contents.  Always inlined: GCC finds a function whose only effect is a
 * prefetch free of side effects and deletes the calls it did not inline. */
static inline __attribute__((always_inline)) void ember_keymap_prefetch(const ember_keymap *m, uint64_t key)
{
    uint64_t h = ember_keymap_hash(m->seed, key), l2;
    const ember_keymap_sub *s = &m->subs[ember_keymap_sub_of(m, h)];
    uint64_t l1 = ember_keymap_lines(h, s->mask >> 2, &l2);
    __builtin_prefetch(&s->b[4 * l1], 1);
    __builtin_prefetch(&s->b[4 * l2], 1);
}

/* Calls fn for every (key, slot), sub-map by sub-map in bucket order, each
 * sub-map's stash last. */
void ember_keymap_each(const ember_keymap *m, void *ctx, void (*fn)(void *ctx, uint64_t key, uint32_t slot));

#endif
