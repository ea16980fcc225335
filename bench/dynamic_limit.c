/*
 * dynamic_limit.c: the memory a dynamic-table step cannot avoid, timed
 * alone: the floor under the dynamic part of `ember bench --table-kind
 * dynamic` (docs/PERFORMANCE.md, "Dynamic tables").
 *
 *   dynamic_limit [--tables T --capacity C --dim D --lookups N --admits A
 *                  --reps R]      (default: W1 at 2^40 keys, as measured)
 *
 * Any table that maps open-ended keys to rows in memory, whatever its
 * index, must per step (N ids, A of them keys that get a row, over T
 * tables of C rows):
 *   - find every id's key: one random index line read;
 *   - note every id's use (the step of its last use, for any eviction
 *     rule): one random metadata write;
 *   - for every admitted key: write its index entry, remove the victim's
 *     (two random index lines, read and written), write the fresh row and
 *     its optimizer state (dim + 1 floats: random lines, written whole).
 * This program does exactly that on arrays of ember's sizes (index 2x the
 * rows in 16-byte buckets, huge pages), with the same 16-ahead prefetch,
 * on one thread, and nothing else: no hashing chains, no eviction order,
 * no rollback copy, no batch bookkeeping.  One JSON line: the median ms of
 * a step's worth of that work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "core/huge.h"
#include "core/rng.h"

#define PF 16

typedef struct bucket {
    uint64_t key;
    uint32_t slot, pad;
} bucket;

typedef struct table {
    bucket *index;  /* 2 x capacity buckets, rounded to a power of two */
    uint64_t mask;
    uint64_t *meta; /* per row: last step and count */
    float *rows;    /* capacity x (dim + 1): values and one state float */
} table;

int main(int argc, char **argv)
{
    int64_t T = 8, C = 1000000, N = 655360, A = 266338, reps = 15;
    int32_t D = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        int64_t v = atoll(argv[i + 1]);
        if (!strcmp(argv[i], "--tables"))
            T = v;
        else if (!strcmp(argv[i], "--capacity"))
            C = v;
        else if (!strcmp(argv[i], "--dim"))
            D = (int32_t)v;
        else if (!strcmp(argv[i], "--lookups"))
            N = v;
        else if (!strcmp(argv[i], "--admits"))
            A = v;
        else if (!strcmp(argv[i], "--reps"))
            reps = v;
        else {
            fprintf(stderr, "usage: dynamic_limit [--tables T --capacity C --dim D --lookups N --admits A --reps R]\n");
            return 2;
        }
    }
    if (T < 1 || C < 1 || D < 1 || N < 0 || A < 0 || reps < 1 || (argc - 1) % 2) {
        fprintf(stderr, "dynamic_limit: bad arguments\n");
        return 2;
    }
    uint64_t buckets = 1;
    while (buckets < (uint64_t)(2 * C))
        buckets <<= 1;
    int64_t per = D + 1;
    table *t = calloc((size_t)T, sizeof *t);
    for (int64_t k = 0; k < T; k++) {
        t[k].index = ember_huge_alloc((int64_t)(buckets * sizeof(bucket)));
        t[k].mask = buckets - 1;
        t[k].meta = ember_huge_alloc(C * 8);
        t[k].rows = ember_huge_alloc(C * per * 4);
        if (!t[k].index || !t[k].meta || !t[k].rows) {
            fprintf(stderr, "dynamic_limit: out of memory\n");
            return 1;
        }
        memset(t[k].index, 0, buckets * sizeof(bucket)); /* place the pages */
        memset(t[k].meta, 0, (size_t)C * 8);
        memset(t[k].rows, 0, (size_t)(C * per * 4));
    }
    /* the step's random positions, drawn before the clock runs */
    uint64_t *look = malloc(sizeof *look * (size_t)(N + PF)), *adm = malloc(sizeof *adm * 3 * (size_t)(A + PF));
    uint64_t z = 1;
    for (int64_t i = 0; i < N + PF; i++)
        look[i] = ember_mix64(z++);
    for (int64_t i = 0; i < 3 * (A + PF); i++)
        adm[i] = ember_mix64(z++);
    double *ms = malloc(sizeof *ms * (size_t)reps);
    uint64_t sink = 0;
    for (int64_t r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (int64_t i = 0; i < N; i++) { /* find and note every id */
            uint64_t hn = look[i + PF];
            const table *tn = &t[hn % (uint64_t)T];
            __builtin_prefetch(&tn->index[(hn >> 8) & tn->mask]);
            __builtin_prefetch(&tn->meta[(hn >> 32) % (uint64_t)C], 1);
            uint64_t h = look[i];
            table *tb = &t[h % (uint64_t)T];
            sink += tb->index[(h >> 8) & tb->mask].key;
            tb->meta[(h >> 32) % (uint64_t)C] += (uint64_t)r + 1;
        }
        for (int64_t i = 0; i < A; i++) { /* admit: two index entries, a fresh row */
            const uint64_t *an = &adm[3 * (i + PF)];
            const table *tn = &t[an[0] % (uint64_t)T];
            __builtin_prefetch(&tn->index[(an[0] >> 8) & tn->mask], 1);
            __builtin_prefetch(&tn->index[(an[1] >> 8) & tn->mask], 1);
            const float *rn = tn->rows + (int64_t)(an[2] % (uint64_t)C) * per;
            for (int64_t b = 0; b < per; b += 16)
                __builtin_prefetch(rn + b, 1);
            const uint64_t *a = &adm[3 * i];
            table *tb = &t[a[0] % (uint64_t)T];
            bucket *in = &tb->index[(a[0] >> 8) & tb->mask], *out = &tb->index[(a[1] >> 8) & tb->mask];
            in->key = a[0];
            in->slot = (uint32_t)i;
            out->slot = UINT32_MAX;
            float *row = tb->rows + (int64_t)(a[2] % (uint64_t)C) * per;
            uint64_t zr = ember_rng_row(a[0], 7);
            for (int32_t j = 0; j < D; j++)
                row[j] = (float)(ember_rng_col(zr, (uint64_t)j, 0) >> 40) * 0x1.0p-24f;
            row[D] = 0.0f;
        }
        ms[r] = (bench_now() - t0) * 1e3;
    }
    qsort(ms, (size_t)reps, sizeof *ms, bench_cmp_double);
    printf("{\"bench\":\"dynamic_limit\",\"tables\":%lld,\"capacity\":%lld,\"dim\":%d,\"lookups\":%lld,"
           "\"admits\":%lld,\"reps\":%lld,\"threads\":1,\"ms_median\":%.3f,\"ms_min\":%.3f,\"sink\":%llu}\n",
           (long long)T, (long long)C, D, (long long)N, (long long)A, (long long)reps, ms[reps / 2], ms[0],
           (unsigned long long)(sink & 1));
    return 0;
}
