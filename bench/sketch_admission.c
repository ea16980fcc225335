/*
 * sketch_admission.c: how often a dynamic table's admission sketch admits
 * a key before its admit_after-th occurrence (docs/dynamic.md,
 * "Admission").  A count-min sketch never counts a key too low, so it
 * never admits late; it may count too high when other keys share all four
 * of a key's counters, and then admits early.  This program runs ember's
 * own resolve and commit (src/dyn) on one rank and compares every
 * admission with the key's true count.
 *
 *   sketch_admission [--capacity C] [--sketch-bytes B (0: the default)]
 *                    [--admit-after N] [--keys V (0: 20 x C)]
 *                    [--draws D (0: 100 x C)] [--batch K (0: C / 2, at most 256)] [--alpha A]
 *                    [--singletons S] [--seed X]
 *
 * Two workloads, one JSON line each:
 *   zipf:       D draws of Zipf(A) over V keys in batches of K (the
 *               synthetic task of configs/dynamic.cfg draws from 20 times
 *               more keys than a table holds); early = admissions of keys
 *               whose true count was below N, as a share of admissions;
 *   singletons: S keys each seen once, in batches of K, into an empty
 *               table: the share admitted at once (with N >= 2 each one is
 *               early), overall and over the last tenth.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "core/rng.h"
#include "dyn/dyn.h"

typedef struct run {
    ember_dyn d;
    uint32_t *counts; /* true occurrences by key index (keys are 1 + index) */
    uint64_t *keys;
    uint32_t *slots;
    int64_t admitted, early, step;
} run;

static int run_init(run *r, int64_t capacity, int32_t admit_after, int64_t width, int64_t V, int64_t K)
{
    memset(r, 0, sizeof *r);
    ember_dyn_params p = {capacity, admit_after, EMBER_EVICT_LRU, 0, width, 0x1234567887654321ULL};
    r->counts = calloc((size_t)V + 1, sizeof *r->counts);
    r->keys = malloc(sizeof *r->keys * (size_t)K);
    r->slots = malloc(sizeof *r->slots * (size_t)K);
    return r->counts && r->keys && r->slots ? ember_dyn_init(&r->d, &p) : EMBER_ENOMEM;
}

/* One step of n keys: resolve, compare the admissions, commit. */
static int run_step(run *r, int64_t n)
{
    char err[256];
    r->step++;
    int st = ember_dyn_resolve(&r->d, r->keys, n, (uint32_t)r->step, 1, 1, r->slots, err, sizeof err);
    if (st != EMBER_OK) {
        fprintf(stderr, "sketch_admission: step %lld: %s\n", (long long)r->step, err);
        return st;
    }
    for (int64_t i = 0; i < n; i++)
        r->counts[r->keys[i] - 1]++;
    for (int64_t a = 0; a < r->d.resets_n; a++) { /* the keys this step admitted */
        r->admitted++;
        r->early += r->counts[r->d.reset_key[a] - 1] < (uint32_t)r->d.p.admit_after;
    }
    ember_dyn_commit(&r->d, r->slots, n, (uint32_t)r->step, 1);
    return EMBER_OK;
}

static void run_free(run *r)
{
    ember_dyn_free(&r->d);
    free(r->counts);
    free(r->keys);
    free(r->slots);
}

int main(int argc, char **argv)
{
    int64_t C = 57, B = 0, V = 0, D = 0, K = 0, S = 0;
    int32_t N = 2;
    double alpha = 1.1;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "--capacity"))
            C = atoll(v);
        else if (!strcmp(o, "--sketch-bytes"))
            B = atoll(v);
        else if (!strcmp(o, "--admit-after"))
            N = atoi(v);
        else if (!strcmp(o, "--keys"))
            V = atoll(v);
        else if (!strcmp(o, "--draws"))
            D = atoll(v);
        else if (!strcmp(o, "--batch"))
            K = atoll(v);
        else if (!strcmp(o, "--alpha"))
            alpha = atof(v);
        else if (!strcmp(o, "--singletons"))
            S = atoll(v);
        else if (!strcmp(o, "--seed"))
            seed = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "sketch_admission: unknown option %s\n", o);
            return 2;
        }
    }
    V = V ? V : 20 * C;
    D = D ? D : 100 * C;
    K = K ? K : C / 2 < 256 ? (C / 2 > 0 ? C / 2 : 1) : 256; /* a batch never needs more rows than C */
    ember_table_config t = ember_table_config_default();
    t.name = "t";
    t.kind = EMBER_TABLE_DYNAMIC;
    t.dim = 4;
    t.capacity = C;
    t.admit_after = N;
    t.sketch_bytes = B;
    int64_t width = ember_dyn_sketch_width(&t);
    if (N < 2 || width == 0) {
        fprintf(stderr, "sketch_admission: needs --admit-after >= 2 and a valid table\n");
        return 2;
    }
    /* Zipf(alpha) over V keys by its inverse CDF */
    double *cdf = malloc(sizeof *cdf * (size_t)V);
    if (!cdf)
        return 1;
    double sum = 0;
    for (int64_t k = 0; k < V; k++)
        cdf[k] = sum += pow((double)(k + 1), -alpha);
    run r;
    if (run_init(&r, C, N, width, V, K) != EMBER_OK)
        return 1;
    uint64_t s = seed;
    for (int64_t done = 0; done < D;) {
        int64_t n = D - done < K ? D - done : K;
        for (int64_t i = 0; i < n; i++) {
            double u = (double)(ember_mix64(s++) >> 11) * 0x1.0p-53 * sum;
            int64_t lo = 0, hi = V - 1;
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (cdf[mid] < u)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            /* scatter the ranks over the key space */
            r.keys[i] = 1 + (uint64_t)((ember_mix64((uint64_t)lo ^ seed << 32) % (uint64_t)V));
        }
        if (run_step(&r, n) != EMBER_OK)
            return 1;
        done += n;
    }
    int64_t distinct = 0;
    for (int64_t k = 0; k < V; k++)
        distinct += r.counts[k] > 0;
    printf("{\"workload\": \"zipf\", \"capacity\": %lld, \"sketch_bytes\": %lld, \"admit_after\": %d, "
           "\"keys\": %lld, \"draws\": %lld, \"distinct_seen\": %lld, \"admitted\": %lld, \"early\": %lld, "
           "\"early_share\": %.5f}\n",
           (long long)C, (long long)ember_dyn_sketch_bytes(width), N, (long long)V, (long long)D,
           (long long)distinct, (long long)r.admitted, (long long)r.early,
           r.admitted ? (double)r.early / (double)r.admitted : 0.0);
    run_free(&r);
    free(cdf);
    if (S > 0) {
        if (run_init(&r, C, N, width, S, K) != EMBER_OK)
            return 1;
        int64_t last_admitted = 0, tail = S - S / 10;
        for (int64_t done = 0; done < S;) {
            int64_t n = S - done < K ? S - done : K;
            for (int64_t i = 0; i < n; i++)
                r.keys[i] = 1 + (uint64_t)(done + i);
            int64_t before = r.admitted;
            if (run_step(&r, n) != EMBER_OK)
                return 1;
            if (done >= tail)
                last_admitted += r.admitted - before;
            done += n;
        }
        printf("{\"workload\": \"singletons\", \"capacity\": %lld, \"sketch_bytes\": %lld, \"admit_after\": %d, "
               "\"keys\": %lld, \"admitted_at_once\": %.5f, \"last_tenth\": %.5f}\n",
               (long long)C, (long long)ember_dyn_sketch_bytes(width), N, (long long)S,
               (double)r.admitted / (double)S, (double)last_admitted / (double)(S - tail));
        run_free(&r);
    }
    return 0;
}
