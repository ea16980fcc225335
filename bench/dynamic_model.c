/*
 * dynamic_model.c: a model of the memory traffic of a dynamic-table step's
 * dynamic part (the keys becoming rows, not the lookup and update that a
 * fixed table does too), timed alone, for `ember bench --table-kind
 * dynamic` (docs/PERFORMANCE.md, "Dynamic tables").  A model, not a bound:
 * see "What it is not" below.
 *
 *   dynamic_model [--tables T --capacity C --dim D --batch B --pooling P
 *                  --key-bits K --alpha S --admits A --reps R]
 *                 (default: W1 at 2^40 keys, as ember bench draws them)
 *
 * The keys are the ones `ember bench` trains on: ember_synth's batches
 * (T tables, B x P ids each, Zipf(S) over 2^K ranks), each id scattered over
 * 64 bits by splitmix64; every rep takes its own batch.  Per step, a
 * minimal serial implementation, on arrays of ember's sizes (index 2x the
 * rows in 16-byte buckets, huge pages, pages placed), with ember's 16-ahead
 * prefetch:
 *   - every id: read its key's index line and write its key's metadata
 *     (last use).  A key repeated in the batch reads the same lines again,
 *     so the batch's distinct keys (counted and printed) set the misses;
 *   - every admitted key (A per step, as the ember run measured): its index
 *     entry written into the line its lookup just read, a victim's entry
 *     cleared (a random line), and a fresh row and its state (D + 1 floats,
 *     a random slot) written.  The admitted keys are taken among the batch's
 *     keys that occur once in it (under Zipf, the keys new to a table are
 *     tail keys), so admissions overlap their own lookups as they must.
 * No eviction order, no rollback copy, no batch bookkeeping, one thread.
 *
 * What it is not: a lower bound.  docs/PERFORMANCE.md adds it to the fixed
 * step's time ("modelled speed" = fixed / (fixed + model)), which assumes
 * none of this traffic overlaps the fixed part's work; a step that overlapped
 * them, or ran them on more threads, could beat the model.  One JSON line:
 * the median ms of a step's worth, ids, distinct keys and keys occurring once
 * per step (means over the reps).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "core/huge.h"
#include "core/rng.h"
#include "ember.h"

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

typedef struct access { /* one id's index bucket and metadata word */
    uint32_t table;
    uint32_t meta;
    uint64_t line;
    uint64_t key;
} access;

typedef struct admission {
    uint32_t table, slot;
    uint64_t line, victim, key;
} admission;

/* Occurrences of each key of one table's ids in a batch (an open-addressing
 * count, outside the clock): distinct and once counts. */
static void count_keys(const uint64_t *keys, int64_t n, uint64_t *set, uint32_t *cnt, uint64_t mask,
                       int64_t *distinct, int64_t *once, uint8_t *single)
{
    memset(set, 0, sizeof *set * (size_t)(mask + 1));
    memset(cnt, 0, sizeof *cnt * (size_t)(mask + 1));
    int64_t *where = malloc(sizeof *where * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = ember_mix64(keys[i] ^ 0x2545f4914f6cdd1dULL) & mask;
        while (cnt[h] && set[h] != keys[i])
            h = (h + 1) & mask;
        set[h] = keys[i];
        *distinct += cnt[h]++ == 0;
        where[i] = (int64_t)h;
    }
    for (int64_t i = 0; i < n; i++) {
        single[i] = cnt[where[i]] == 1;
        *once += single[i];
    }
    free(where);
}

int main(int argc, char **argv)
{
    int64_t T = 8, C = 1000000, B = 4096, P = 20, K = 40, A = 266338, reps = 15;
    double alpha = 1.05;
    int32_t D = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i];
        int64_t v = atoll(argv[i + 1]);
        if (!strcmp(a, "--tables"))
            T = v;
        else if (!strcmp(a, "--capacity"))
            C = v;
        else if (!strcmp(a, "--dim"))
            D = (int32_t)v;
        else if (!strcmp(a, "--batch"))
            B = v;
        else if (!strcmp(a, "--pooling"))
            P = v;
        else if (!strcmp(a, "--key-bits"))
            K = v;
        else if (!strcmp(a, "--alpha"))
            alpha = atof(argv[i + 1]);
        else if (!strcmp(a, "--admits"))
            A = v;
        else if (!strcmp(a, "--reps"))
            reps = v;
        else {
            fprintf(stderr, "usage: dynamic_model [--tables T --capacity C --dim D --batch B --pooling P "
                            "--key-bits K --alpha S --admits A --reps R]\n");
            return 2;
        }
    }
    if (T < 1 || C < 1 || D < 1 || B < 1 || P < 1 || K < 1 || K > 62 || A < 0 || reps < 1 || (argc - 1) % 2 ||
        !(alpha > 0)) {
        fprintf(stderr, "dynamic_model: bad arguments\n");
        return 2;
    }
    uint64_t buckets = 1;
    while (buckets < (uint64_t)(2 * C))
        buckets <<= 1;
    int64_t per = D + 1, N = T * B * P;
    table *t = calloc((size_t)T, sizeof *t);
    for (int64_t k = 0; k < T; k++) {
        t[k].index = ember_huge_alloc((int64_t)(buckets * sizeof(bucket)));
        t[k].mask = buckets - 1;
        t[k].meta = ember_huge_alloc(C * 8);
        t[k].rows = ember_huge_alloc(C * per * 4);
        if (!t[k].index || !t[k].meta || !t[k].rows) {
            fprintf(stderr, "dynamic_model: out of memory\n");
            return 1;
        }
        memset(t[k].index, 0, buckets * sizeof(bucket)); /* place the pages */
        memset(t[k].meta, 0, (size_t)C * 8);
        memset(t[k].rows, 0, (size_t)(C * per * 4));
    }
    /* every rep's batch, its accesses and admissions, before the clock runs */
    ember_synth_config sc = ember_synth_config_default();
    sc.tables = (int32_t)T;
    sc.rows = INT64_C(1) << K;
    sc.batch_size = (int32_t)B;
    sc.pooling = (int32_t)P;
    sc.zipf = 1;
    sc.alpha = alpha;
    ember_synth *syn = NULL;
    if (ember_synth_create(&sc, &syn) != EMBER_OK) {
        fprintf(stderr, "dynamic_model: %s\n", ember_errmsg(NULL));
        return 1;
    }
    int64_t per_table = B * P;
    uint64_t smask = 1;
    while (smask < (uint64_t)(2 * per_table))
        smask <<= 1;
    uint64_t *set = malloc(sizeof *set * smask), *keys = malloc(sizeof *keys * (size_t)N);
    uint32_t *cnt = malloc(sizeof *cnt * smask);
    uint8_t *single = malloc((size_t)N);
    access *acc = malloc(sizeof *acc * (size_t)(reps * N + PF));
    admission *adm = malloc(sizeof *adm * (size_t)(reps * A + PF));
    int64_t distinct = 0, once = 0, admitted = 0, z = 1;
    for (int64_t r = 0; r < reps; r++) {
        ember_batch b;
        if (ember_synth_next(syn, &b) != EMBER_OK || b.num_ids != N) {
            fprintf(stderr, "dynamic_model: ember_synth_next failed\n");
            return 1;
        }
        for (int64_t i = 0; i < N; i++) /* as ember bench: ids scattered over 64 bits */
            keys[i] = ember_mix64((uint64_t)b.ids[i]);
        for (int64_t k = 0; k < T; k++)
            count_keys(keys + k * per_table, per_table, set, cnt, smask - 1, &distinct, &once,
                       single + k * per_table);
        access *ar = acc + r * N;
        int64_t na = 0, quota = A; /* admissions: keys occurring once, spread over the batch */
        for (int64_t i = 0; i < N; i++) {
            uint64_t h = ember_mix64(keys[i] ^ 0x632be59bd9b4e019ULL);
            ar[i].table = (uint32_t)(i / per_table);
            ar[i].key = keys[i];
            ar[i].line = h & (buckets - 1);
            ar[i].meta = (uint32_t)((h >> 32) % (uint64_t)C);
        }
        int64_t singles = 0;
        for (int64_t i = 0; i < N; i++)
            singles += single[i];
        for (int64_t i = 0, seen = 0; i < N && na < quota; i++) {
            if (!single[i])
                continue;
            /* the admitted ones evenly among the singles: seen * quota / singles crosses na */
            if ((seen++ + 1) * quota / (singles ? singles : 1) <= na)
                continue;
            admission *a = &adm[r * A + na++];
            a->table = ar[i].table;
            a->key = keys[i];
            a->line = ar[i].line;
            a->victim = ember_mix64((uint64_t)z++) & (buckets - 1);
            a->slot = (uint32_t)(ember_mix64((uint64_t)z++) % (uint64_t)C);
        }
        for (int64_t i = na; i < A; i++) { /* fewer singles than admissions: random keys */
            admission *a = &adm[r * A + i];
            a->table = (uint32_t)(ember_mix64((uint64_t)z++) % (uint64_t)T);
            a->key = ember_mix64((uint64_t)z++);
            a->line = a->key & (buckets - 1);
            a->victim = ember_mix64((uint64_t)z++) & (buckets - 1);
            a->slot = (uint32_t)(ember_mix64((uint64_t)z++) % (uint64_t)C);
        }
        admitted += na;
    }
    memset(acc + reps * N, 0, sizeof *acc * PF);
    memset(adm + reps * A, 0, sizeof *adm * PF);
    ember_synth_destroy(syn);
    double *ms = malloc(sizeof *ms * (size_t)reps);
    uint64_t sink = 0;
    for (int64_t r = 0; r < reps; r++) {
        const access *ar = acc + r * N;
        const admission *ad = adm + r * A;
        double t0 = bench_now();
        for (int64_t i = 0; i < N; i++) { /* find and note every id */
            const access *n = &ar[i + PF];
            const table *tn = &t[n->table];
            __builtin_prefetch(&tn->index[n->line]);
            __builtin_prefetch(&tn->meta[n->meta], 1);
            const access *a = &ar[i];
            table *tb = &t[a->table];
            sink += tb->index[a->line].key == a->key;
            tb->meta[a->meta] = (uint64_t)r + 1;
        }
        for (int64_t i = 0; i < A; i++) { /* admit: two index entries, a fresh row */
            const admission *an = &ad[i + PF];
            const table *tn = &t[an->table];
            __builtin_prefetch(&tn->index[an->line], 1);
            __builtin_prefetch(&tn->index[an->victim], 1);
            const float *rn = tn->rows + (int64_t)an->slot * per;
            for (int64_t k = 0; k < per; k += 16)
                __builtin_prefetch(rn + k, 1);
            const admission *a = &ad[i];
            table *tb = &t[a->table];
            bucket *in = &tb->index[a->line], *out = &tb->index[a->victim];
            in->key = a->key;
            in->slot = a->slot;
            out->slot = UINT32_MAX;
            float *row = tb->rows + (int64_t)a->slot * per;
            uint64_t zr = ember_rng_row(a->key, 7);
            for (int32_t j = 0; j < D; j++)
                row[j] = (float)(ember_rng_col(zr, (uint64_t)j, 0) >> 40) * 0x1.0p-24f;
            row[D] = 0.0f;
        }
        ms[r] = (bench_now() - t0) * 1e3;
    }
    qsort(ms, (size_t)reps, sizeof *ms, bench_cmp_double);
    printf("{\"bench\":\"dynamic_model\",\"tables\":%lld,\"capacity\":%lld,\"dim\":%d,\"key_bits\":%lld,\"alpha\":%g,"
           "\"ids_per_step\":%lld,\"distinct_keys_per_step\":%lld,\"once_keys_per_step\":%lld,\"admits\":%lld,"
           "\"admits_among_once_keys\":%lld,\"reps\":%lld,\"threads\":1,\"overlap\":\"none (serial, added to the "
           "fixed step)\",\"ms_median\":%.3f,\"ms_min\":%.3f,\"sink\":%llu}\n",
           (long long)T, (long long)C, D, (long long)K, alpha, (long long)N, (long long)(distinct / reps),
           (long long)(once / reps), (long long)A, (long long)(admitted / reps), (long long)reps, ms[reps / 2], ms[0],
           (unsigned long long)(sink & 1));
    return 0;
}
