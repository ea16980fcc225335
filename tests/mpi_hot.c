/*
 * mpi_hot.c: hot-row replication changes no result (docs/distributed.md,
 * "Hot rows").  Run under mpirun -np 1..4.
 *
 * Every rank draws the same random config of row-wise tables with the rows
 * exchange (1 to 4 tables, some stacked, random dims, optimizers and row
 * precisions: fp32, or fp16/bf16 rounded stochastically or to nearest, and
 * state precisions for Adagrad and Adam; some with hot_rows and some
 * without, weights, dedup, bounds = drop now and then; every fourth trial
 * a 2-row table, all hot, with bf16 state, so that ranks holding none of
 * its rows round copies too) and STEPS global batches (repeated ids often,
 * so hot rows are hit by several ranks), and takes its slice of each.  Two collections train
 * on them side by side: PLAIN (no hot rows) and HOT (the same config with
 * hot_rows), both with upstream gradients d = g + 0.5 * (own outputs), and
 * both under one schedule per trial: blocking ember_forward, or the split
 * forward pipelined under OVERLAP or STALE.  HOT's hot rows are set before
 * the first step to random ids (ember_set_hot_rows), and in blocking
 * trials refreshed from the counts after step 1 (ember_refresh_hot_rows)
 * and set again after step 3.  A random row range is written into both
 * (ember_table_write, values and state) after step 2.
 * Checked every step: HOT's outputs are PLAIN's, bit for bit (memcmp), and
 * after every backward its tables and optimizer state are PLAIN's bit for
 * bit (collective reads: the owners' rows), whatever the world size, the
 * schedule and the hot rows.  In a world of one, half the trials run
 * through the exchange code (the internal flag exchange_always), where the
 * hot rows are used, the other half the local path, where they are not.
 * Fixed cases: hot rows refused for a column-wise table, the pooled
 * exchange and the SSD tier (naming the table); ember_set_hot_rows with
 * too many ids, an id out of range, a table without hot rows (EINVAL), and
 * between a forward and its backward (ESTATE).
 */
#include "collection/collection.h" /* exchange_always: a world of one through the exchange code */
#include "mpi_util.h"

#define TRIALS 24
#define STEPS 5

enum { PLAIN, HOT, NCOLL };

static test_config *hot_config(test_rng *r, ember_world *world)
{
    int32_t nt = (int32_t)test_range(r, 1, 5), nf = (int32_t)test_range(r, 1, 6);
    test_config *tc = test_config_new(nt, nf);
    static const int32_t dims[] = {1, 3, 4, 8, 17};
    for (int32_t t = 0; t < nt; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->rows = test_range(r, 1, 6) == 1 ? test_range(r, 1, 4) : test_range(r, 4, 200);
        tb->dim = dims[test_range(r, 0, 5)];
        tb->optimizer = test_optimizer_random(r, (ember_optimizer_kind)test_range(r, 0, TEST_NUM_OPT));
        test_init_for_optimizer(tb);
        tb->placement = EMBER_PLACE_ROW;
        tb->exchange = EMBER_EXCHANGE_ROWS;
        tb->hot_rows = test_range(r, 0, 3) ? test_range(r, 1, tb->rows + 1) : 0;
        /* half rows (docs/precision.md) on half the tables: copies rounded as their owner's row */
        tb->precision = test_range(r, 0, 2) ? EMBER_PRECISION_FP32 : (ember_row_precision)test_range(r, 1, 3);
        tb->rounding = (ember_rounding)test_range(r, 0, 2);
        if (test_element_state(tb->optimizer.kind)) /* half state: copies' state rounded alike */
            tb->state_precision = (ember_row_precision)test_range(r, 0, 3);
    }
    if (test_range(r, 0, 2)) /* stacked: hot and plain tables in one physical table */
        for (int32_t t = 1; t < nt; t++) {
            tc->tables[t].dim = tc->tables[0].dim;
            tc->tables[t].optimizer = tc->tables[0].optimizer;
            tc->tables[t].precision = tc->tables[0].precision;
            tc->tables[t].rounding = tc->tables[0].rounding;
            tc->tables[t].state_precision = tc->tables[0].state_precision;
            test_init_for_optimizer(&tc->tables[t]);
        }
    for (int32_t f = 0; f < nf; f++) {
        tc->features[f].table = (int32_t)test_range(r, 0, nt);
        tc->features[f].combiner = (ember_combiner)test_range(r, 0, 4);
    }
    tc->cfg.seed = test_next(r);
    tc->cfg.dedup = (int)test_range(r, 0, 2);
    tc->cfg.bounds = test_range(r, 0, 4) == 0 ? EMBER_BOUNDS_DROP : EMBER_BOUNDS_ERROR;
    tc->cfg.debug_checks = test_range(r, 0, 4) == 0;
    tc->cfg.threads = (int32_t)test_range(r, 1, 3);
    tc->cfg.world = world;
    return tc;
}

/* Random hot ids for every table with hot rows (the same on every rank). */
static int set_random_hot(test_rng *r, ember_collection *c, const ember_collection_config *cfg)
{
    int ok = 1;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tb = &cfg->tables[t];
        if (tb->hot_rows == 0)
            continue;
        int64_t n = test_range(r, 0, tb->hot_rows + 1), ids[256];
        n = n > 256 ? 256 : n;
        for (int64_t i = 0; i < n; i++) /* low ids are the likely ones; duplicates allowed */
            ids[i] = test_range(r, 0, 2) ? test_range(r, 0, tb->rows < 8 ? tb->rows : 8) : test_range(r, 0, tb->rows);
        int st = ember_set_hot_rows(c, t, ids, n);
        MCHECK(st == EMBER_OK, "ember_set_hot_rows(%s, %lld ids): %s", tb->name, (long long)n, ember_errmsg(c));
        ok &= st == EMBER_OK;
    }
    return ok;
}

static void trial_run(test_rng *r, int trial, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    test_config *tc = hot_config(r, world);
    if (trial % 4 == 3) { /* a table of 2 rows, both hot, half state: ranks that hold none of its
                             rows round their copies' state as the owners do */
        ember_table_config *tb = &tc->tables[0];
        tb->rows = 2;
        tb->hot_rows = 2;
        tb->optimizer = test_optimizer_random(r, trial % 8 == 3 ? EMBER_OPT_ADAGRAD : EMBER_OPT_ADAM);
        tb->state_precision = EMBER_PRECISION_BF16;
        tb->rounding = EMBER_ROUND_STOCHASTIC;
        for (int32_t t = 1; t < tc->cfg.num_tables; t++) /* unstacked from it: its own optimizer */
            tc->tables[t].dim = tb->dim + 1;
        tc->features[0].table = 0;
    }
    const ember_collection_config *cfg = &tc->cfg;
    ember_schedule sched = (ember_schedule)(trial % 3);
    int pipelined = sched != EMBER_SCHEDULE_BLOCKING;
    mpi_context("trial %d schedule %d, %d tables (hot_rows %lld %lld ...), %d features, dedup %d bounds %d debug %d",
                trial, (int)sched, cfg->num_tables, (long long)cfg->tables[0].hot_rows,
                (long long)(cfg->num_tables > 1 ? cfg->tables[1].hot_rows : -1), cfg->num_features, cfg->dedup,
                (int)cfg->bounds, cfg->debug_checks);
    int64_t Wp = test_pooled_width(cfg);
    test_batch gb[STEPS], lb[STEPS];
    mpi_grads g[STEPS];
    float *lds[STEPS], *out_p[NCOLL][STEPS], *out_s[NCOLL][STEPS];
    int32_t *start[STEPS];
    for (int i = 0; i < STEPS; i++) {
        start[i] = mpi_starts();
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = (int32_t)test_range(r, 0, 41);
        o.max_len = (int32_t)test_range(r, 0, 7);
        o.empty_frac = 0.2;
        o.dup_heavy = test_range(r, 0, 2) == 0;
        o.weighted = (int)test_range(r, 0, 2);
        o.invalid_frac = cfg->bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch_make(r, cfg, &o, &gb[i]);
        mpi_split(r, gb[i].b.batch_size, W, (mpi_split_kind)((trial + i) % 4), start[i]);
        test_sub_batch(&gb[i].b, start[i][rank], start[i][rank + 1], &lb[i]);
        mpi_grads_make(r, cfg, &gb[i].b, -1.0f, &g[i]);
        int64_t lS = test_sequence_size(cfg, &lb[i].b);
        lds[i] = mpi_nan_buffer(lS);
        mpi_local_sequence(cfg, &gb[i].b, start[i][rank], start[i][rank + 1], g[i].ds, lds[i]);
        for (int k = 0; k < NCOLL; k++) {
            out_p[k][i] = mpi_nan_buffer((int64_t)lb[i].b.batch_size * Wp);
            out_s[k][i] = mpi_nan_buffer(lS);
        }
    }
    ember_collection *c[NCOLL] = {NULL, NULL};
    tc->cfg.schedule = sched;
    c[HOT] = mpi_create(&tc->cfg, "hot");
    int64_t hot_rows[TEST_MAX_TABLES];
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        hot_rows[t] = tc->tables[t].hot_rows;
        tc->tables[t].hot_rows = 0;
    }
    c[PLAIN] = mpi_create(&tc->cfg, "plain");
    for (int32_t t = 0; t < cfg->num_tables; t++)
        tc->tables[t].hot_rows = hot_rows[t];
    if (!mpi_all(c[PLAIN] && c[HOT]))
        goto done;
    if (W == 1 && trial % 2)
        c[PLAIN]->exchange_always = c[HOT]->exchange_always = 1;
    if (!mpi_all(set_random_hot(r, c[HOT], cfg)))
        goto done;

    int rc = EMBER_OK;
    for (int k = 0; k < NCOLL; k++) /* batch 0 */
        rc |= pipelined ? ember_forward_begin(c[k], &lb[0].b, out_p[k][0], out_s[k][0]) | ember_forward_end(c[k])
                        : ember_forward(c[k], &lb[0].b, out_p[k][0], out_s[k][0]);
    MCHECK(rc == EMBER_OK, "forward of batch 0: %s / %s", ember_errmsg(c[PLAIN]), ember_errmsg(c[HOT]));
    for (int i = 0; i < STEPS && mpi_all(rc == EMBER_OK); i++) {
        char what[160];
        snprintf(what, sizeof what, "step %d (global B %d, local [%d, %d))", i, gb[i].b.batch_size, start[i][rank],
                 start[i][rank + 1]);
        int64_t lP = (int64_t)lb[i].b.batch_size * Wp, lS = test_sequence_size(cfg, &lb[i].b);
        int64_t dp = mpi_first_diff(out_p[HOT][i], out_p[PLAIN][i], lP);
        int64_t ds = mpi_first_diff(out_s[HOT][i], out_s[PLAIN][i], lS);
        MCHECK(dp < 0 && ds < 0, "%s: outputs with hot rows differ: pooled float %lld (%.9g vs %.9g), sequence %lld",
               what, (long long)dp, dp >= 0 ? out_p[HOT][i][dp] : 0.0, dp >= 0 ? out_p[PLAIN][i][dp] : 0.0,
               (long long)ds);
        int nxt = pipelined && i + 1 < STEPS;
        for (int k = 0; k < NCOLL && nxt; k++)
            rc |= ember_forward_begin(c[k], &lb[i + 1].b, out_p[k][i + 1], out_s[k][i + 1]);
        if (i == 1 && !pipelined) /* between a forward and its backward: refused */
            MCHECK(ember_refresh_hot_rows(c[HOT]) == EMBER_ESTATE, "%s: refresh between forward and backward: %s",
                   what, ember_errmsg(c[HOT]));
        for (int k = 0; k < NCOLL; k++) {
            float *d1 = mpi_grads_of(g[i].dp + (int64_t)start[i][rank] * Wp, out_p[k][i], lP);
            float *d2 = mpi_grads_of(lds[i], out_s[k][i], lS);
            int a = ember_backward(c[k], d1, d2);
            MCHECK(a == EMBER_OK, "%s: backward (%s): %s", what, k == HOT ? "hot" : "plain", ember_errmsg(c[k]));
            rc |= a;
            free(d1), free(d2);
        }
        if (!mpi_all(rc == EMBER_OK))
            break;
        char when[220];
        snprintf(when, sizeof when, "%s, tables after backward against no hot rows", what);
        mpi_snapshot s;
        mpi_snap(c[PLAIN], cfg, &s);
        mpi_snap_same(c[HOT], cfg, &s, when);
        if (i == 2) { /* a written row range reaches the copies */
            int32_t t = (int32_t)test_range(r, 0, cfg->num_tables);
            int64_t rows = cfg->tables[t].rows, first = test_range(r, 0, rows);
            int64_t count = test_range(r, 1, rows - first + 1), dim = cfg->tables[t].dim;
            int64_t sfl = ember_state_floats(cfg->tables[t].optimizer.kind, cfg->tables[t].dim);
            float *x = malloc(sizeof(float) * (size_t)(count * (dim + sfl) + 1));
            test_fill(r, x, count * (dim + sfl), 0.0f, 0.5f);
            for (int k = 0; k < NCOLL; k++) {
                rc |= ember_table_write(c[k], t, first, count, x);
                if (sfl)
                    rc |= ember_table_write_state(c[k], t, first, count, x + count * dim);
            }
            MCHECK(rc == EMBER_OK, "%s: table writes: %s", what, ember_errmsg(c[HOT]));
            free(x);
        }
        if (!pipelined && i == 1)
            MCHECK(ember_refresh_hot_rows(c[HOT]) == EMBER_OK, "%s: refresh: %s", what, ember_errmsg(c[HOT]));
        if (!pipelined && i == 3)
            set_random_hot(r, c[HOT], cfg);
        if (i + 1 == STEPS)
            break;
        for (int k = 0; k < NCOLL; k++)
            rc |= pipelined ? ember_forward_end(c[k]) : ember_forward(c[k], &lb[i + 1].b, out_p[k][i + 1], out_s[k][i + 1]);
        MCHECK(rc == EMBER_OK, "%s: forward of batch %d: %s / %s", what, i + 1, ember_errmsg(c[PLAIN]),
               ember_errmsg(c[HOT]));
    }
done:
    for (int k = 0; k < NCOLL; k++)
        ember_collection_destroy(c[k]);
    for (int i = 0; i < STEPS; i++) {
        test_batch_free(&gb[i]);
        test_batch_free(&lb[i]);
        mpi_grads_free(&g[i]);
        free(lds[i]);
        free(start[i]);
        for (int k = 0; k < NCOLL; k++)
            free(out_p[k][i]), free(out_s[k][i]);
    }
    test_config_free(tc);
}

static int refused(test_config *tc, const char *what, const char *needle)
{
    ember_collection *c = NULL;
    int st = ember_collection_create(&tc->cfg, &c);
    MCHECK(st == EMBER_EINVAL && strstr(ember_errmsg(NULL), "table0") && strstr(ember_errmsg(NULL), needle),
           "%s: %s: %s", what, ember_status_str(st), ember_errmsg(NULL));
    ember_collection_destroy(c);
    return st == EMBER_EINVAL;
}

static void fixed_cases(ember_world *world)
{
    int32_t W = ember_world_size(world);
    mpi_context("fixed: refused configs and calls");
    test_config *tc = test_config_new(2, 2);
    tc->tables[0].rows = tc->tables[1].rows = 4 * W + 3;
    tc->tables[0].dim = tc->tables[1].dim = 4;
    tc->tables[0].hot_rows = 2;
    tc->cfg.world = world;
    tc->tables[0].placement = EMBER_PLACE_COLUMN;
    refused(tc, "a column-wise table", "row placement");
    tc->tables[0].placement = EMBER_PLACE_ROW;
    tc->tables[0].exchange = EMBER_EXCHANGE_POOLED;
    refused(tc, "the pooled exchange", "rows exchange");
    tc->tables[0].exchange = EMBER_EXCHANGE_ROWS;
    tc->tables[0].storage = EMBER_STORAGE_SSD;
    refused(tc, "the SSD tier", "memory");
    tc->tables[0].storage = EMBER_STORAGE_MEMORY;
    ember_collection *c = mpi_create(&tc->cfg, "hot");
    if (mpi_all(c != NULL)) {
        int64_t ids[3] = {0, 1, 2}, bad[1] = {4 * W + 3};
        MCHECK(ember_set_hot_rows(c, 0, ids, 3) == EMBER_EINVAL && strstr(ember_errmsg(c), "at most 2"),
               "three ids for hot_rows 2: %s", ember_errmsg(c));
        MCHECK(ember_set_hot_rows(c, 0, bad, 1) == EMBER_EINVAL && mpi_has_number(ember_errmsg(c), 4 * W + 3),
               "id %d out of range: %s", 4 * W + 3, ember_errmsg(c));
        MCHECK(ember_set_hot_rows(c, 1, ids, 1) == EMBER_EINVAL && strstr(ember_errmsg(c), "table1"),
               "a table without hot rows: %s", ember_errmsg(c));
        MCHECK(ember_set_hot_rows(c, 0, ids, 2) == EMBER_OK, "two hot ids: %s", ember_errmsg(c));
        int32_t len[2] = {1, 1};
        int64_t bid[2] = {0, 1};
        ember_batch b = {1, 2, len, bid, NULL, 2};
        float out[8], d[8] = {0};
        MCHECK(ember_forward(c, &b, out, NULL) == EMBER_OK, "forward: %s", ember_errmsg(c));
        MCHECK(ember_set_hot_rows(c, 0, ids, 2) == EMBER_ESTATE, "set between forward and backward: %s",
               ember_errmsg(c));
        MCHECK(ember_backward(c, d, NULL) == EMBER_OK, "backward: %s", ember_errmsg(c));
        MCHECK(ember_refresh_hot_rows(c) == EMBER_OK, "refresh: %s", ember_errmsg(c));
    }
    ember_collection_destroy(c);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {mpi_test_init(&argc, &argv)};
    ember_world *world = mpi_world();
    fixed_cases(world);
    for (int trial = 0; trial < TRIALS; trial++)
        trial_run(&r, trial, world);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_hot");
}
