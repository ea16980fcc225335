/*
 * sim.c: Belady's offline optimum for the SSD tier's cache, the yardstick of
 * the lookahead policy (`ember bench --belady`, docs/tiers.md).
 *
 * The access sequence is per step: the distinct rows of step s, all needed
 * at once (a step pins its rows).  With the whole future known, the fewest
 * loads come from evicting, when a slot is needed, the resident row (not of
 * the current step) whose next use is farthest (Belady 1966, "MIN").  Next
 * uses are found by one backward pass; residents sit in a max-heap on their
 * next use with lazy deletion (a row's live entry is the one whose key
 * matches its current next use).  Rows of the current step keep the key of
 * this step (the smallest possible) until the step's evictions are done, so
 * they are never chosen.
 */
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "tier/sim.h"

typedef struct entry {
    int64_t key; /* next use (step), INT64_MAX: never again */
    uint32_t row;
} entry;

typedef struct heap {
    entry *v;
    int64_t n, cap;
} heap;

static int heap_push(heap *h, entry e)
{
    if (h->n == h->cap) {
        int64_t c = h->cap ? 2 * h->cap : 1024;
        entry *v = realloc(h->v, sizeof(entry) * (size_t)c);
        if (!v)
            return EMBER_ENOMEM;
        h->v = v;
        h->cap = c;
    }
    int64_t i = h->n++;
    while (i > 0 && h->v[(i - 1) / 2].key < e.key) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = e;
    return 0;
}

static entry heap_pop(heap *h)
{
    entry top = h->v[0], x = h->v[--h->n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1].key > h->v[c].key)
            c++;
        if (h->v[c].key <= x.key)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = x;
    return top;
}

int ember_cache_sim_belady(const uint32_t *const *rows, const int64_t *n, int64_t steps, int64_t rows_total,
                           int64_t cap, int64_t first_counted, int64_t *accesses, int64_t *loads)
{
    *accesses = *loads = 0;
    int64_t total = 0;
    for (int64_t s = 0; s < steps; s++)
        total += n[s];
    int64_t *next = malloc(sizeof(int64_t) * ((size_t)total + 1));
    int64_t *at = malloc(sizeof(int64_t) * ((size_t)rows_total + 1)); /* per row: next use, or key */
    uint8_t *res = calloc((size_t)rows_total + 1, 1);
    heap h = {0};
    int st = next && at && res ? EMBER_OK : EMBER_ENOMEM;
    if (st)
        goto done;
    /* next[k]: the step that uses access k's row next */
    for (int64_t r = 0; r < rows_total; r++)
        at[r] = INT64_MAX;
    int64_t k = total;
    for (int64_t s = steps - 1; s >= 0; s--)
        for (int64_t i = n[s] - 1; i >= 0; i--) {
            uint32_t r = rows[s][i];
            next[--k] = at[r];
            at[r] = s;
        }
    int64_t resident = 0;
    k = 0;
    for (int64_t s = 0; s < steps && !st; s++) {
        int64_t miss = 0;
        for (int64_t i = 0; i < n[s]; i++)
            miss += !res[rows[s][i]];
        if (n[s] > cap) {
            st = EMBER_ELIMIT; /* one step does not fit */
            break;
        }
        while (resident + miss > cap) { /* evict the farthest next use (lazy entries skipped) */
            entry e = heap_pop(&h);
            if (!res[e.row] || at[e.row] != e.key)
                continue;
            res[e.row] = 0;
            resident--;
        }
        for (int64_t i = 0; i < n[s]; i++, k++) {
            uint32_t r = rows[s][i];
            if (!res[r]) {
                res[r] = 1;
                resident++;
            }
            at[r] = next[k];
            if (heap_push(&h, (entry){next[k], r}))
                st = EMBER_ENOMEM;
        }
        if (s >= first_counted) {
            *accesses += n[s];
            *loads += miss;
        }
    }
done:
    free(next);
    free(at);
    free(res);
    free(h.v);
    return st;
}
