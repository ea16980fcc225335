/*
 * test_tier_policy.c: which rows the SSD tier keeps, against a naive
 * reference (docs/tiers.md, "Policies").
 *
 * A store of R rows with a cache of C slots runs random steps under LRU and
 * LFU: each step stages a random set of distinct rows (skewed, in random
 * order).  The reference keeps every resident row with its use count, last
 * step used and the order in which it was released, and evicts by scanning
 * them all: LRU the one released first (a step's misses are released before
 * its hits), LFU the least used, then least recently used, then released
 * first.  After every step the resident rows and the step's hits must be
 * the same.  The tier's structures (lists, the cold levels of LFU) are the
 * fast path; the scan is the rule written out.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier/ssd.h"
#include "tier/ssd_impl.h"
#include "util.h"

static char root[256];

static void zero_row(void *ctx, uint32_t row, float *values)
{
    (void)ctx;
    values[0] = (float)row;
    values[1] = 0.0f;
}

typedef struct naive {
    int64_t R, C, used, released, step;
    uint8_t *resident, *pinned, *missed;
    uint32_t *freq, *last;
    int64_t *order;               /* when it was last released */
    int64_t *pins, npins;
} naive;

/* The row the rule evicts: unpinned residents only. */
static int64_t naive_victim(const naive *n, ember_cache_policy pol)
{
    int64_t best = -1;
    for (int64_t r = 0; r < n->R; r++) {
        if (!n->resident[r] || n->pinned[r])
            continue;
        if (best < 0) {
            best = r;
            continue;
        }
        int less = pol == EMBER_CACHE_LRU ? n->order[r] < n->order[best]
                   : n->freq[r] != n->freq[best] ? n->freq[r] < n->freq[best]
                   : n->last[r] != n->last[best] ? n->last[r] < n->last[best]
                                                 : n->order[r] < n->order[best];
        if (less)
            best = r;
    }
    return best;
}

static void naive_pin(naive *n, int64_t r)
{
    n->pinned[r] = 1;
    n->freq[r]++;
    n->last[r] = (uint32_t)n->step;
    n->pins[n->npins++] = r;
}

static void naive_begin(naive *n, ember_cache_policy pol)
{
    for (int pass = pol == EMBER_CACHE_LRU ? 0 : 1; pass < 2; pass++)
        for (int64_t i = 0; i < n->npins; i++) {
            int64_t r = n->pins[i];
            if (!n->pinned[r] || (pass == 0 && !n->missed[r]))
                continue;
            n->pinned[r] = n->missed[r] = 0;
            n->order[r] = n->released++;
        }
    n->npins = 0;
    n->step++;
}

/* Hits of the step. */
static int64_t naive_stage(naive *n, ember_cache_policy pol, const uint32_t *rows, int64_t m)
{
    int64_t hits = 0;
    for (int64_t i = 0; i < m; i++)
        if (n->resident[rows[i]]) {
            hits++;
            naive_pin(n, rows[i]);
        }
    for (int64_t i = 0; i < m; i++) {
        int64_t r = rows[i];
        if (n->resident[r])
            continue;
        if (n->used < n->C) {
            n->used++;
        } else {
            int64_t v = naive_victim(n, pol);
            n->resident[v] = 0;
        }
        n->resident[r] = 1;
        n->freq[r] = 0;
        naive_pin(n, r);
        n->missed[r] = 1;
    }
    return hits;
}

static const char *name_of(ember_cache_policy pol) { return pol == EMBER_CACHE_LRU ? "LRU" : "LFU"; }

static void one_run(test_rng *rng, ember_cache_policy pol, int run)
{
    int64_t R = test_range(rng, 50, 400), C = test_range(rng, 8, R / 2);
    int steps = 300;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/p%d", root, run);
    mkdir(dir, 0700);
    ember_ssd_params p = {.dir = dir, .name = "p", .label = "table 'p'", .rows = R, .dim = 2,
                          .policy = pol, .lookahead = 1, .io_threads = 1, .buffered = 1, .init = zero_row};
    p.cache_bytes = ember_ssd_cache_bytes_for(C, R, 8, pol);
    ember_store *st = NULL;
    char err[512] = "";
    CHECK_MSG(ember_store_ssd_create(&p, &st, err, sizeof err) == EMBER_OK, "create: %s", err);
    if (!st)
        return;
    ssd_store *s = (ssd_store *)st;
    CHECK_MSG(s->cap == C, "cache of %lld slots, want %lld", (long long)s->cap, (long long)C);
    naive n = {.R = R, .C = C};
    n.resident = calloc((size_t)R, 1);
    n.pinned = calloc((size_t)R, 1);
    n.missed = calloc((size_t)R, 1);
    n.freq = calloc((size_t)R, sizeof *n.freq);
    n.last = calloc((size_t)R, sizeof *n.last);
    n.order = calloc((size_t)R, sizeof *n.order);
    n.pins = malloc((size_t)R * sizeof *n.pins);
    uint32_t *rows = malloc((size_t)R * sizeof *rows), *slots = malloc((size_t)R * sizeof *slots);
    uint8_t *taken = calloc((size_t)R, 1);
    double skew = 1.0 + 3.0 * test_uniform(rng);
    int64_t bad = 0, hits_seen = 0;
    for (int step = 0; step < steps && bad == 0; step++) {
        st->ops->begin(st, step);
        naive_begin(&n, pol);
        int64_t m = test_range(rng, 1, C + 1);
        memset(taken, 0, (size_t)R);
        for (int64_t k = 0; k < m;) { /* distinct, skewed, in drawing order */
            uint32_t r = (uint32_t)((double)R * pow(test_uniform(rng), skew));
            if (!taken[r]) {
                taken[r] = 1;
                rows[k++] = r;
            }
        }
        ember_tier_stats before, after;
        ember_store_tier_stats(st, &before);
        int rc = st->ops->stage(st, rows, slots, m);
        CHECK_MSG(rc == EMBER_OK, "%s step %d: stage: %s", name_of(pol), step, ember_errmsg(NULL));
        ember_store_tier_stats(st, &after);
        int64_t hits = (after.accesses - before.accesses) - (after.demand_loads - before.demand_loads);
        int64_t want = naive_stage(&n, pol, rows, m);
        hits_seen += want;
        if (hits != want) {
            CHECK_MSG(0, "%s (R %lld, C %lld) step %d: %lld hits, the rule gives %lld", name_of(pol),
                      (long long)R, (long long)C, step, (long long)hits, (long long)want);
            bad++;
        }
        for (int64_t r = 0; r < R && bad == 0; r++)
            if ((ssd_map_find(s, (uint32_t)r) >= 0) != n.resident[r]) {
                CHECK_MSG(0, "%s (R %lld, C %lld) step %d: row %lld %s, the rule says %s", name_of(pol),
                          (long long)R, (long long)C, step, (long long)r,
                          n.resident[r] ? "evicted" : "cached", n.resident[r] ? "cached" : "evicted");
                bad++;
            }
        for (int64_t i = 0; i < m && bad == 0; i++)
            if (slots[i] >= (uint32_t)C || s->slot_row[slots[i]] != rows[i]) {
                CHECK_MSG(0, "%s step %d: row %u staged in slot %u", name_of(pol), step, rows[i], slots[i]);
                bad++;
            }
    }
    CHECK_MSG(hits_seen > 0 && hits_seen < (int64_t)steps * C, "%s: %lld hits in %d steps: no choice tested",
              name_of(pol), (long long)hits_seen, steps);
    st->ops->destroy(st);
    rmdir(dir);
    free(n.resident);
    free(n.pinned);
    free(n.missed);
    free(n.freq);
    free(n.last);
    free(n.order);
    free(n.pins);
    free(rows);
    free(slots);
    free(taken);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    test_rng r = {seed};
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/ember-test-policy-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    for (int run = 0; run < 20; run++)
        one_run(&r, run % 2 ? EMBER_CACHE_LFU : EMBER_CACHE_LRU, run);
    rmdir(root);
    return check_report("test_tier_policy");
}
