/*
 * reserve.c: grow-only buffers (reserve.h).
 */
#include <stdlib.h>

#include "core/reserve.h"
#include "ember.h"

int ember_reserve(void **p, int64_t *cap, int64_t n, size_t sz)
{
    if (n <= *cap && *p)
        return EMBER_OK;
    int64_t want = n > *cap * 3 / 2 ? n : *cap * 3 / 2;
    if (want < 16)
        want = 16;
    void *q = realloc(*p, (size_t)want * sz);
    if (!q)
        return EMBER_ENOMEM;
    *p = q;
    *cap = want;
    return EMBER_OK;
}
