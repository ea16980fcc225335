/*
 * test_threads.c: the same sequence of steps under 1, 2, 3 and 4 threads
 * gives bit-identical pooled and sequence outputs, tables, optimizer state
 * and stats (memcmp, no tolerance: the header promises results that do not
 * depend on the thread count, and kernels split work statically).
 *
 * Threads are set through cfg.threads (1, 2) and through
 * ember_collection_set_threads after create (3, 4).  Each config has four
 * tables, one per optimizer, and batches of 2048 samples that alternate
 * between uniform and duplicate-heavy ids, weighted, with dedup, bounds
 * and stacking as drawn; bounds = drop batches carry invalid ids.
 */
#include "util.h"

#define STEPS 4

typedef struct run {
    ember_collection *c;
    float *out[STEPS][2]; /* pooled, sequence per step */
    ember_stats stats;
} run;

static void run_steps(run *rn, const test_config *tc, int32_t threads, test_batch *tb,
                      float *dp[STEPS], float *ds[STEPS])
{
    test_config *cc = test_config_copy(tc);
    cc->cfg.threads = threads <= 2 ? threads : 1;
    memset(rn, 0, sizeof *rn);
    int rc = ember_collection_create(&cc->cfg, &rn->c);
    CHECK_MSG(rc == EMBER_OK, "create (threads %d): %s", threads, ember_errmsg(NULL));
    test_config_free(cc);
    if (rc != EMBER_OK)
        return;
    if (threads > 2)
        CHECK(ember_collection_set_threads(rn->c, threads) == EMBER_OK);
    for (int s = 0; s < STEPS; s++) {
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &tb[s].b);
        rn->out[s][0] = calloc((size_t)(tb[s].b.batch_size * W + 1), sizeof(float));
        rn->out[s][1] = calloc((size_t)(S + 1), sizeof(float));
        rc = ember_forward(rn->c, &tb[s].b, rn->out[s][0], rn->out[s][1]);
        CHECK_MSG(rc == EMBER_OK, "forward (threads %d step %d): %s", threads, s,
                  ember_errmsg(rn->c));
        rc = ember_backward(rn->c, dp[s], ds[s]);
        CHECK_MSG(rc == EMBER_OK, "backward (threads %d step %d): %s", threads, s,
                  ember_errmsg(rn->c));
    }
    ember_collection_stats(rn->c, &rn->stats);
}

static void run_free(run *rn)
{
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < 2; k++)
            free(rn->out[s][k]);
    ember_collection_destroy(rn->c);
}

static void one_config(test_rng *r, int cfg_ix)
{
    test_config *tc = test_config_random(r, 4, 6, 500, 4000);
    tc->cfg.num_tables = 4;
    for (int32_t t = 0; t < 4; t++) {
        tc->tables[t].rows = test_range(r, 500, 4000);
        tc->tables[t].dim = test_pick_dim(r);
        tc->tables[t].optimizer = test_optimizer_random(r, (ember_optimizer_kind)((t + 4 * cfg_ix) % TEST_NUM_OPT));
    }
    tc->tables[cfg_ix % 4].dim = 300;
    for (int32_t f = 0; f < tc->cfg.num_features; f++)
        tc->features[f].table = (int32_t)test_range(r, 0, 4);
    tc->cfg.dedup = cfg_ix & 1;
    printf("config %d: %d features, dedup %d, bounds %d, stack %d\n", cfg_ix,
           tc->cfg.num_features, tc->cfg.dedup, tc->cfg.bounds, tc->cfg.stack_tables);

    test_batch tb[STEPS];
    float *dp[STEPS], *ds[STEPS];
    int64_t dims = 0;
    for (int32_t f = 0; f < tc->cfg.num_features; f++)
        dims += tc->tables[tc->features[f].table].dim;
    for (int s = 0; s < STEPS; s++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = s == 2 ? 3 : 2048;
        o.max_len = (int32_t)(3000000 / (o.batch_size * dims)) + 1;
        if (o.max_len > 20)
            o.max_len = 20;
        o.empty_frac = 0.1;
        o.dup_heavy = s & 1;
        o.weighted = 1;
        o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch_make(r, &tc->cfg, &o, &tb[s]);
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &tb[s].b);
        dp[s] = malloc((size_t)(o.batch_size * W + 1) * sizeof(float));
        ds[s] = malloc((size_t)(S + 1) * sizeof(float));
        test_fill(r, dp[s], o.batch_size * W, -1, 1);
        test_fill(r, ds[s], S, -1, 1);
    }

    run base;
    run_steps(&base, tc, 1, tb, dp, ds);
    for (int32_t threads = 2; threads <= 4 && base.c; threads++) {
        run other;
        run_steps(&other, tc, threads, tb, dp, ds);
        if (!other.c)
            continue;
        for (int s = 0; s < STEPS; s++) {
            int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &tb[s].b);
            CHECK_MSG(memcmp(base.out[s][0], other.out[s][0],
                             (size_t)(tb[s].b.batch_size * W) * sizeof(float)) == 0,
                      "config %d step %d: pooled differs between 1 and %d threads", cfg_ix, s,
                      threads);
            CHECK_MSG(memcmp(base.out[s][1], other.out[s][1], (size_t)S * sizeof(float)) == 0,
                      "config %d step %d: sequence differs between 1 and %d threads", cfg_ix, s,
                      threads);
        }
        CHECK_MSG(test_tables_identical(base.c, other.c, &tc->cfg),
                  "config %d: tables differ between 1 and %d threads", cfg_ix, threads);
        CHECK_MSG(memcmp(&base.stats, &other.stats, sizeof base.stats) == 0,
                  "config %d: stats differ between 1 and %d threads", cfg_ix, threads);
        run_free(&other);
    }
    run_free(&base);
    for (int s = 0; s < STEPS; s++) {
        test_batch_free(&tb[s]);
        free(dp[s]);
        free(ds[s]);
    }
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    for (int i = 0; i < 4; i++)
        one_config(&r, i);
    return check_report("test_threads");
}
