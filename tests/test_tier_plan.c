/*
 * test_tier_plan.c: the tier rules and the planner's hit-rate estimate
 * (docs/tiers.md).
 *
 * Rules: random tables (sizes, placements, optimizers, some pinned to a
 * tier) in worlds of 1..8 with a random threshold and budget; the resolved
 * tiers must honour every pin, put every AUTO table over the threshold on
 * SSD, move only the largest AUTO tables for the budget (no AUTO table left
 * in memory is larger than one moved for the budget), fit the budget when
 * moving everything movable can, and give the caches no one sized an equal
 * share of what is left.
 *
 * Hit rate: plan_lru_hit_rate (Che's approximation from the id law) against
 * a naive LRU cache (a list, steps of n draws, every row of a step made most
 * recent) fed by ember's own synthetic ids of the same law: uniform and
 * Zipf(1.05), caches of 15 to 80 % of the rows, after a warm-up that fills
 * them, within 0.04 (the estimate is the steady state of independent draws,
 * which these are).
 */
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "plan/plan.h"
#include "util.h"

static void rules(test_rng *r, int trial)
{
    int32_t T = (int32_t)test_range(r, 1, 9), W = (int32_t)test_range(r, 1, 9);
    test_config *tc = test_config_new(T, 1);
    int64_t total = 0;
    for (int32_t t = 0; t < T; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->rows = test_range(r, 1, 1000000);
        tb->dim = (int32_t)test_range(r, 1, 129);
        tb->optimizer.kind = (ember_optimizer_kind)test_range(r, 0, TEST_NUM_OPT);
        tb->placement = (ember_placement)test_range(r, 0, 4);
        if (test_range(r, 0, 6) == 0)
            tb->storage = (ember_storage)test_range(r, 1, 3);
        if (test_range(r, 0, 5) == 0)
            tb->cache_bytes = test_range(r, 1, 1 << 20);
        total += ember_tier_rank_bytes(tb, W);
    }
    ember_collection_config *cc = &tc->cfg;
    cc->ssd_min_bytes = test_range(r, 0, 2) ? 0 : test_range(r, 1, 100000000);
    cc->memory_budget = test_range(r, 0, 4) ? test_range(r, 1, total + 1) : 0;
    ember_storage st[8];
    int64_t cache[8];
    ember_tier_resolve(cc, W, st, cache);
    int64_t need = 0, smallest_moved = INT64_MAX, largest_kept = 0, sized = 0;
    int32_t open = 0;
    for (int32_t t = 0; t < T; t++) {
        const ember_table_config *tb = &tc->tables[t];
        int64_t b = ember_tier_rank_bytes(tb, W);
        CHECK_MSG(st[t] == EMBER_STORAGE_MEMORY || st[t] == EMBER_STORAGE_SSD, "trial %d table %d: storage %d", trial,
                  t, st[t]);
        if (tb->storage != EMBER_STORAGE_AUTO)
            CHECK_MSG(st[t] == tb->storage, "trial %d table %d: pinned %d, got %d", trial, t, tb->storage, st[t]);
        int by_size = tb->storage == EMBER_STORAGE_AUTO && cc->ssd_min_bytes > 0 && b > cc->ssd_min_bytes;
        if (by_size)
            CHECK_MSG(st[t] == EMBER_STORAGE_SSD, "trial %d table %d: %lld bytes over the threshold %lld, in memory",
                      trial, t, (long long)b, (long long)cc->ssd_min_bytes);
        if (tb->storage == EMBER_STORAGE_AUTO && !by_size) {
            if (st[t] == EMBER_STORAGE_SSD && b < smallest_moved)
                smallest_moved = b;
            if (st[t] == EMBER_STORAGE_MEMORY && b > largest_kept)
                largest_kept = b;
        }
        if (st[t] == EMBER_STORAGE_SSD) {
            CHECK_MSG(cache[t] >= 1, "trial %d table %d: cache %lld", trial, t, (long long)cache[t]);
            if (tb->cache_bytes > 0)
                CHECK(cache[t] == tb->cache_bytes);
            if (tb->cache_bytes > 0)
                sized += cache[t];
            else
                open++;
        } else {
            need += b;
        }
    }
    if (smallest_moved < INT64_MAX)
        CHECK_MSG(largest_kept <= smallest_moved, "trial %d: a %lld-byte table stayed while a %lld-byte one moved",
                  trial, (long long)largest_kept, (long long)smallest_moved);
    if (cc->memory_budget > 0 && largest_kept > 0)
        CHECK_MSG(need + sized <= cc->memory_budget, "trial %d: memory %lld + caches %lld over the budget %lld "
                  "while an AUTO table stayed in memory", trial, (long long)need, (long long)sized,
                  (long long)cc->memory_budget);
    if (cc->memory_budget > 0 && open > 0 && need + sized < cc->memory_budget)
        for (int32_t t = 0; t < T; t++)
            if (st[t] == EMBER_STORAGE_SSD && tc->tables[t].cache_bytes == 0)
                CHECK_MSG(cache[t] == (cc->memory_budget - need - sized) / open,
                          "trial %d table %d: cache %lld, not an equal share", trial, t, (long long)cache[t]);
    test_config_free(tc);
}

/* A naive LRU over rows [0, R): hits of one step's distinct rows, then
 * they become the most recent; the least recent go past `cap` rows. */
typedef struct lru {
    int64_t *prev, *next, head, tail, size, cap;
    uint8_t *in;
    int64_t *stamp, now;
} lru;

static void lru_unlink(lru *c, int64_t x)
{
    if (c->prev[x] >= 0) c->next[c->prev[x]] = c->next[x]; else c->head = c->next[x];
    if (c->next[x] >= 0) c->prev[c->next[x]] = c->prev[x]; else c->tail = c->prev[x];
}

static void lru_push(lru *c, int64_t x)
{
    c->prev[x] = c->tail;
    c->next[x] = -1;
    if (c->tail >= 0) c->next[c->tail] = x; else c->head = x;
    c->tail = x;
}

static void hit_rate(test_rng *r, int zipf, int64_t R, double frac)
{
    const int32_t n = 2000, steps = 600, warm = 200;
    ember_synth_config sc = ember_synth_config_default();
    sc.tables = 1;
    sc.rows = R;
    sc.batch_size = n;
    sc.pooling = 1;
    sc.zipf = zipf;
    sc.seed = test_next(r);
    plan_id_stats st;
    CHECK(plan_stats_synth(&sc, &st) == EMBER_OK);
    lru c = {malloc(sizeof(int64_t) * R), malloc(sizeof(int64_t) * R), -1, -1, 0, (int64_t)(frac * R),
             calloc((size_t)R, 1), calloc((size_t)R, sizeof(int64_t)), 0};
    ember_synth *sy = NULL;
    CHECK(ember_synth_create(&sc, &sy) == EMBER_OK);
    int64_t acc = 0, hits = 0;
    for (int32_t s = 0; s < steps; s++) {
        ember_batch b;
        ember_synth_next(sy, &b);
        c.now++;
        for (int64_t i = 0; i < b.num_ids; i++) {
            int64_t x = b.ids[i];
            if (c.stamp[x] == c.now)
                continue; /* seen in this step */
            c.stamp[x] = c.now;
            if (s >= warm) {
                acc++;
                hits += c.in[x];
            }
            if (c.in[x])
                lru_unlink(&c, x);
            else
                c.in[x] = 1, c.size++;
            lru_push(&c, x);
        }
        while (c.size > c.cap && c.size > 0) {
            int64_t x = c.head;
            if (c.stamp[x] == c.now)
                break; /* the step's own rows stay */
            lru_unlink(&c, x);
            c.in[x] = 0;
            c.size--;
        }
    }
    double got = (double)hits / (double)acc, want = plan_lru_hit_rate(&st, n, (double)c.cap);
    printf("%s rows %lld cache %.0f%%: LRU %.4f, estimate %.4f\n", zipf ? "zipf" : "uniform", (long long)R,
           100 * frac, got, want);
    CHECK_MSG(fabs(got - want) <= 0.04, "%s rows %lld cache %.0f%%: simulated LRU %.4f, estimate %.4f",
              zipf ? "zipf" : "uniform", (long long)R, 100 * frac, got, want);
    ember_synth_destroy(sy);
    free(c.prev), free(c.next), free(c.in), free(c.stamp);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    test_rng r = {seed};
    for (int i = 0; i < 2000; i++)
        rules(&r, i);
    /* caches that hold a step (about 1900 distinct rows of 20000 when
     * uniform) and that the warm-up fills: steady state is what the
     * estimate describes */
    const double fracs[] = {0.15, 0.3, 0.5, 0.8};
    for (int k = 0; k < 4; k++) {
        hit_rate(&r, 0, 20000, fracs[k]);
        if (k < 3)
            hit_rate(&r, 1, 20000, fracs[k]);
    }
    return check_report("test_tier_plan");
}
