/*
 * key_count.h: exact distinct counts of 64-bit keys, up to a cap
 * (key_count.c), for `ember convert`'s report of distinct keys per
 * feature.
 *
 * Keys are XXH64 values (uniform), so a key's own bits place it in an
 * open-addressing table; a batch of keys is inserted with the slots of
 * the next few prefetched, as the inserts are cache misses once the set
 * outgrows the cache.  Past `cap` distinct keys the set frees its table
 * and only says "more than cap".
 */
#ifndef EMBER_DATA_KEY_COUNT_H
#define EMBER_DATA_KEY_COUNT_H

#include <stdint.h>

typedef struct key_count {
    uint64_t *slot;   /* 0: empty (key 0 is counted by `zero`)    */
    int64_t cap, n, limit;
    int zero, over;
} key_count;

/* An empty count that stops at limit distinct keys. */
void key_count_init(key_count *k, int64_t limit);
/* Adds n keys.  0, or EMBER_ENOMEM. */
int key_count_add(key_count *k, const int64_t *keys, int64_t n);
/* Distinct keys so far; limit + 1 when there were more than limit. */
int64_t key_count_get(const key_count *k);
void key_count_free(key_count *k);

#endif
