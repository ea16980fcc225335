/*
 * peer_plain_map.h: a PEER, not part of ember: the plain C open-addressing
 * map a C programmer writes first (linear probing over 16-byte buckets, the
 * same hash as ember's map, one key at a time, no prefetching), for
 * bench/keymap.c.  ember's map was this layout, batched and prefetched,
 * before it became bucketed cuckoo: the difference is the probe scheme
 * and the batching.
 */
#ifndef EMBER_BENCH_PEER_PLAIN_MAP_H
#define EMBER_BENCH_PEER_PLAIN_MAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct plain_bucket {
    uint64_t key;
    uint32_t val, used;
} plain_bucket;

typedef struct plain_map {
    plain_bucket *b;
    uint64_t mask;
} plain_map;

static inline uint64_t plain_hash(uint64_t k)
{
    k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ULL;
    k = (k ^ (k >> 27)) * 0x94d049bb133111ebULL;
    return k ^ (k >> 31);
}

static inline int plain_init(plain_map *m, uint64_t buckets)
{
    m->b = calloc(buckets, sizeof *m->b);
    m->mask = buckets - 1;
    return m->b ? 0 : -1;
}

static inline void plain_free(plain_map *m) { free(m->b); }

/* The value of key, or UINT32_MAX. */
static inline uint32_t plain_find(const plain_map *m, uint64_t key)
{
    for (uint64_t j = plain_hash(key) & m->mask;; j = (j + 1) & m->mask) {
        if (!m->b[j].used)
            return UINT32_MAX;
        if (m->b[j].key == key)
            return m->b[j].val;
    }
}

/* The value of key if present, else inserts val and returns it. */
static inline uint32_t plain_upsert(plain_map *m, uint64_t key, uint32_t val)
{
    for (uint64_t j = plain_hash(key) & m->mask;; j = (j + 1) & m->mask) {
        if (!m->b[j].used) {
            m->b[j].key = key;
            m->b[j].val = val;
            m->b[j].used = 1;
            return val;
        }
        if (m->b[j].key == key)
            return m->b[j].val;
    }
}

#endif
