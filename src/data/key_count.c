/*
 * key_count.c: exact distinct counts of 64-bit keys up to a limit
 * (key_count.h).  Linear probing in a power-of-two table kept at most half
 * full; slot = the key's top bits (keys are hashes already).  Inserts go
 * in groups of KC_AHEAD, each group's slots prefetched before any is
 * probed.
 */
#include <stdlib.h>
#include <string.h>

#include "data/key_count.h"
#include "ember.h"

#define KC_AHEAD 16

void key_count_init(key_count *k, int64_t limit)
{
    memset(k, 0, sizeof *k);
    k->limit = limit;
}

static int64_t home(uint64_t key, int64_t cap)
{
    return (int64_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1);
}

static int grow(key_count *k)
{
    int64_t cap = k->cap ? 2 * k->cap : 4096;
    uint64_t *s = calloc((size_t)cap, sizeof *s);
    if (!s)
        return EMBER_ENOMEM;
    for (int64_t i = 0; i < k->cap; i++)
        if (k->slot[i]) {
            int64_t j = home(k->slot[i], cap);
            while (s[j])
                j = (j + 1) & (cap - 1);
            s[j] = k->slot[i];
        }
    free(k->slot);
    k->slot = s;
    k->cap = cap;
    return 0;
}

int key_count_add(key_count *k, const int64_t *keys, int64_t n)
{
    for (int64_t g = 0; g < n && !k->over; g += KC_AHEAD) {
        int64_t m = n - g < KC_AHEAD ? n - g : KC_AHEAD;
        {
            if (k->n + m > k->limit) { /* near the limit: one by one, stop past it, keep no table */
                for (int64_t i = 0; i < m && !k->over; i++) {
                    uint64_t key = (uint64_t)keys[g + i];
                    if (2 * (k->n + 1) > k->cap && grow(k))
                        return EMBER_ENOMEM;
                    int64_t j = home(key, k->cap);
                    while (key && k->slot[j] && k->slot[j] != key)
                        j = (j + 1) & (k->cap - 1);
                    if (key ? k->slot[j] == key : k->zero)
                        continue; /* seen */
                    if (k->n >= k->limit) { /* a new key past the limit */
                        k->over = 1;
                        break;
                    }
                    k->n++;
                    if (key)
                        k->slot[j] = key;
                    else
                        k->zero = 1;
                }
                if (k->over) {
                    free(k->slot);
                    k->slot = NULL;
                    k->cap = 0;
                }
                continue;
            }
            while (2 * (k->n + m) > k->cap)
                if (grow(k))
                    return EMBER_ENOMEM;
        }
        int64_t at[KC_AHEAD];
        for (int64_t i = 0; i < m; i++) {
            at[i] = home((uint64_t)keys[g + i], k->cap);
            __builtin_prefetch(&k->slot[at[i]], 1);
        }
        for (int64_t i = 0; i < m; i++) {
            uint64_t key = (uint64_t)keys[g + i];
            if (!key) {
                k->n += !k->zero;
                k->zero = 1;
                continue;
            }
            int64_t j = at[i];
            while (k->slot[j] && k->slot[j] != key)
                j = (j + 1) & (k->cap - 1);
            if (!k->slot[j]) {
                k->slot[j] = key;
                k->n++;
            }
        }
    }
    return 0;
}

int64_t key_count_get(const key_count *k)
{
    return k->over ? k->limit + 1 : k->n;
}

void key_count_free(key_count *k)
{
    free(k->slot);
    memset(k, 0, sizeof *k);
}
