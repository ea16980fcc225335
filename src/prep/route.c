/*
 * route.c: a route's grow-only buffers (route.h): reserve, size, free, and
 * the segment of an entry.  Routing a batch into routes is routing.c's.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "prep/route.h"

/* The route's grow-only arrays: per entry, per segment, per sample. */
typedef struct route_array {
    size_t offset; /* of the pointer in ember_route */
    size_t elem;
    int kind;      /* 0 entries, 1 segments, 2 samples */
} route_array;

#define RA(field, type, kind) {offsetof(ember_route, field), sizeof(type), kind}
static const route_array ROUTE_ARRAYS[] = {
    RA(row, uint32_t, 0),        RA(weight, float, 0),       RA(leader, int32_t, 0),
    RA(mult, int32_t, 0),        RA(keys, uint64_t, 0),      RA(keys_tmp, uint64_t, 0),
    RA(src_off, int64_t, 0),     RA(src_scale, float, 0),    RA(sorted_off, int64_t, 0),
    RA(sorted_scale, float, 0),  RA(seg_start, int64_t, 1),  RA(seg_out, int64_t, 1),
    RA(seg_div, float, 1),     RA(seg_feature, int32_t, 1), RA(seg_sample, int32_t, 1),
    RA(sample_seg, int64_t, 2),
};
#define NUM_ROUTE_ARRAYS (sizeof ROUTE_ARRAYS / sizeof ROUTE_ARRAYS[0])

static void **route_ptr(ember_route *r, const route_array *a) { return (void **)((char *)r + a->offset); }

/* Grows every array of a kind to hold `need` elements (x 1.5 steps). */
static int reserve_kind(ember_route *r, int kind, int64_t need, int64_t *cap)
{
    if (need <= *cap)
        return EMBER_OK;
    int64_t want = need > *cap * 3 / 2 ? need : *cap * 3 / 2;
    for (size_t i = 0; i < NUM_ROUTE_ARRAYS; i++) {
        if (ROUTE_ARRAYS[i].kind != kind)
            continue;
        void **p = route_ptr(r, &ROUTE_ARRAYS[i]);
        void *q = realloc(*p, ROUTE_ARRAYS[i].elem * (size_t)want);
        if (!q)
            return EMBER_ENOMEM; /* arrays grown so far stay valid */
        *p = q;
    }
    *cap = want;
    return EMBER_OK;
}

int ember_route_reserve(ember_route *r, int64_t n, int64_t nseg, int32_t B)
{
    if (reserve_kind(r, 0, n + EMBER_ROUTE_PAD, &r->cap_n) != EMBER_OK ||
        reserve_kind(r, 1, nseg + 1, &r->cap_seg) != EMBER_OK ||
        reserve_kind(r, 2, (int64_t)B + 1, &r->cap_b) != EMBER_OK)
        return EMBER_ENOMEM;
    return EMBER_OK;
}

int64_t ember_route_bytes(const ember_route *r)
{
    int64_t bytes = 0;
    for (size_t i = 0; i < NUM_ROUTE_ARRAYS; i++) {
        const route_array *a = &ROUTE_ARRAYS[i];
        int64_t cap = a->kind == 0 ? r->cap_n : a->kind == 1 ? r->cap_seg : r->cap_b;
        bytes += cap * (int64_t)a->elem;
    }
    return bytes;
}

int64_t ember_route_segment_of(const ember_route *r, int64_t e)
{
    int64_t lo = 0, hi = r->nseg; /* seg_start[lo] <= e < seg_start[hi] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (r->seg_start[mid] <= e)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void ember_route_free(ember_route *r)
{
    for (size_t i = 0; i < NUM_ROUTE_ARRAYS; i++)
        free(*route_ptr(r, &ROUTE_ARRAYS[i]));
    memset(r, 0, sizeof *r);
}
