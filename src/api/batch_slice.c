/*
 * batch_slice.c: a rank's contiguous share of a global batch (batch_slice.h).
 * Two passes over the lengths: the first finds, per feature, where the
 * slice's ids start and how many there are; the second copies.
 */
#include <stdlib.h>
#include <string.h>

#include "api/batch_slice.h"

void batch_slice_range(int32_t batch_size, int32_t rank, int32_t world, int32_t *first,
                       int32_t *count)
{
    int64_t lo = (int64_t)batch_size * rank / world;
    int64_t hi = (int64_t)batch_size * (rank + 1) / world;
    *first = (int32_t)lo;
    *count = (int32_t)(hi - lo);
}

/* Walks b's lengths: per feature, calls visit(start of the slice's ids in
 * b.ids, their count).  -1 for a malformed batch. */
static int walk(const ember_batch *b, int32_t first, int32_t count,
                void (*visit)(void *arg, int32_t f, int64_t at, int64_t n), void *arg)
{
    if (first < 0 || count < 0 || (int64_t)first + count > b->batch_size || b->num_features < 0)
        return EMBER_EINVAL;
    int64_t at = 0; /* ids before the current bag */
    for (int32_t f = 0; f < b->num_features; f++) {
        const int32_t *len = b->lengths + (int64_t)f * b->batch_size;
        int64_t start = 0, n = 0;
        for (int32_t i = 0; i < b->batch_size; i++) {
            if (len[i] < 0)
                return EMBER_EINVAL;
            if (i == first)
                start = at;
            if (i >= first && i < first + count)
                n += len[i];
            at += len[i];
            if (at > b->num_ids)
                return EMBER_EINVAL;
        }
        if (first == b->batch_size)
            start = at;
        if (visit)
            visit(arg, f, start, n);
    }
    return at == b->num_ids ? 0 : -1;
}

static void add_count(void *arg, int32_t f, int64_t at, int64_t n)
{
    (void)f, (void)at;
    *(int64_t *)arg += n;
}

int batch_slice_count(const ember_batch *b, int32_t first, int32_t count, int64_t *num_ids)
{
    *num_ids = 0;
    return walk(b, first, count, add_count, num_ids);
}

typedef struct copy_arg {
    const ember_batch *b;
    int64_t *ids;
    float *weights;
    int64_t done;
} copy_arg;

static void copy_ids(void *arg, int32_t f, int64_t at, int64_t n)
{
    copy_arg *a = arg;
    (void)f;
    if (n > 0) {
        memcpy(a->ids + a->done, a->b->ids + at, (size_t)n * sizeof *a->ids);
        if (a->b->weights)
            memcpy(a->weights + a->done, a->b->weights + at, (size_t)n * sizeof *a->weights);
    }
    a->done += n;
}

int batch_slice_copy(const ember_batch *b, int32_t first, int32_t count, int32_t *lengths,
                     int64_t *ids, float *weights, ember_batch *out)
{
    copy_arg a = {b, ids, weights, 0};
    if (walk(b, first, count, copy_ids, &a))
        return EMBER_EINVAL;
    for (int32_t f = 0; f < b->num_features; f++)
        if (count > 0)
            memcpy(lengths + (int64_t)f * count, b->lengths + (int64_t)f * b->batch_size + first,
                   (size_t)count * sizeof *lengths);
    out->batch_size = count;
    out->num_features = b->num_features;
    out->lengths = lengths;
    out->ids = ids;
    out->weights = b->weights ? weights : NULL;
    out->num_ids = a.done;
    return 0;
}

/* Grows *p to hold n elements of size bytes (never NULL after, so an empty
 * slice of a weighted batch is still weighted); 0 or EMBER_ENOMEM. */
static int grow(void **p, int64_t *cap, int64_t n, size_t size)
{
    if (*p && n <= *cap)
        return 0;
    void *q = realloc(*p, (size_t)(n > 0 ? n : 1) * size);
    if (!q)
        return EMBER_ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

int batch_slice_take(batch_slice *s, const ember_batch *b, int32_t rank, int32_t world)
{
    int32_t first, count;
    int64_t n;
    batch_slice_range(b->batch_size, rank, world, &first, &count);
    if (batch_slice_count(b, first, count, &n))
        return EMBER_EINVAL;
    int64_t nl = (int64_t)b->num_features * count;
    if (grow((void **)&s->lengths, &s->cap_lengths, nl, sizeof *s->lengths) ||
        grow((void **)&s->ids, &s->cap_ids, n, sizeof *s->ids) ||
        (b->weights && grow((void **)&s->weights, &s->cap_weights, n, sizeof *s->weights)))
        return EMBER_ENOMEM;
    return batch_slice_copy(b, first, count, s->lengths, s->ids, s->weights, &s->batch);
}

void batch_slice_free(batch_slice *s)
{
    free(s->lengths);
    free(s->ids);
    free(s->weights);
    memset(s, 0, sizeof *s);
}
