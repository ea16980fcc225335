/*
 * limits.c: the per-batch maxima of `ember limits` and their summary
 * (limits.h): the maximum, the p50, p99 and p99.9 over batches, and the
 * suggested limits ceil(p99.9).
 */
#include <math.h>
#include <stdlib.h>

#include "plan/limits.h"

int limits_series_reserve(limits_series *s, int64_t n)
{
    if (n <= s->cap)
        return EMBER_OK;
    int64_t cap = s->cap ? 2 * s->cap : 64;
    cap = cap < n ? n : cap;
    int64_t *a = realloc(s->max_ids, (size_t)cap * sizeof *a);
    if (a)
        s->max_ids = a;
    int64_t *b = a ? realloc(s->max_unique, (size_t)cap * sizeof *b) : NULL;
    if (!b)
        return EMBER_ENOMEM;
    s->max_unique = b;
    s->cap = cap;
    return EMBER_OK;
}

void limits_series_add(limits_series *s, int64_t max_ids, int64_t max_unique)
{
    s->max_ids[s->n] = max_ids;
    s->max_unique[s->n] = max_unique;
    s->n++;
}

void limits_series_free(limits_series *s)
{
    free(s->max_ids);
    free(s->max_unique);
    *s = (limits_series){0};
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

double limits_percentile(const int64_t *sorted, int64_t n, double p)
{
    if (n == 0)
        return 0;
    double h = (double)(n - 1) * p;
    int64_t lo = (int64_t)floor(h);
    if (lo >= n - 1)
        return (double)sorted[n - 1];
    return (double)sorted[lo] + (h - (double)lo) * (double)(sorted[lo + 1] - sorted[lo]);
}

void limits_series_summarise(limits_series *s, ember_limits_table *r)
{
    int64_t n = s->n;
    if (n > 0) {
        qsort(s->max_ids, (size_t)n, sizeof(int64_t), cmp_i64);
        qsort(s->max_unique, (size_t)n, sizeof(int64_t), cmp_i64);
    }
    r->max_ids = n ? s->max_ids[n - 1] : 0;
    r->max_unique_ids = n ? s->max_unique[n - 1] : 0;
    r->p50_ids = limits_percentile(s->max_ids, n, 0.5);
    r->p99_ids = limits_percentile(s->max_ids, n, 0.99);
    r->p999_ids = limits_percentile(s->max_ids, n, 0.999);
    r->p50_unique_ids = limits_percentile(s->max_unique, n, 0.5);
    r->p99_unique_ids = limits_percentile(s->max_unique, n, 0.99);
    r->p999_unique_ids = limits_percentile(s->max_unique, n, 0.999);
    /* ceil, but an interpolation a rounding error above an integer stays it */
    r->suggested_max_ids_per_partition = (int64_t)ceil(r->p999_ids - 1e-9);
    r->suggested_max_unique_ids_per_partition = (int64_t)ceil(r->p999_unique_ids - 1e-9);
}
