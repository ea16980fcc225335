/*
 * mpi_equivalence.c: a distributed collection gives the results of one
 * process (docs/distributed.md).  Run under mpirun -np 1..4.
 *
 * Every rank draws the same random config and GLOBAL batch, takes its
 * contiguous slice of samples (even, random, one rank with 0 samples, all on
 * one rank; world 3 is uneven by construction), and runs forward + backward
 * with random upstream gradients (the same global arrays, sliced) on the
 * distributed collection; every rank also runs a world-of-one collection of
 * the same config over the whole global batch.  Three steps per config.
 * Checked after each step:
 *   forward   the local pooled and sequence outputs equal the reference's
 *             rows of those samples: bit-identical (memcmp) for tables
 *             placed ROW or TABLE with exchange ROWS and for REPLICATED;
 *             for POOLED and COLUMN |got - want| <= 1e-6 max(|got|,|want|)
 *             + 1e-6 mag (mpi_util.h, mpi_close_out).  Outputs are
 *             pre-filled with NaN.  Second oracle: the naive reference
 *             (src/ref, synced to the reference collection's tables) within
 *             test_forward's tolerance, 1e-5 |want| + 1e-5 mag.
 *   tables    every table's values and optimizer state (ember_table_read /
 *             _read_state, collective) equal the reference's: bit-identical
 *             for ROW, TABLE (both exchanges: backward is the same) and
 *             REPLICATED; COLUMN within 1e-6 relative (mpi_close_table).
 *             Also before the first step (initialisation, collective read).
 *   writes    at step 1 of some trials a random row range is written with
 *             ember_table_write (collective) on both collections and read
 *             back (the range alone, then every table).
 *   stats     steps, minibatches == 1; bytes sent/received are 0 in a world
 *             of one; dropped_bounds is this rank's (or the global) count.
 * Configs cycle through seven placement modes (ROW/ROWS, ROW/POOLED,
 * TABLE/ROWS, TABLE/POOLED, COLUMN, REPLICATED, mixed placements with random
 * exchanges and owners) x the six optimizers of table 0 x the dims 1, 2,
 * 3, 4, 5, 8, 17, 64 of table 0 (56 trials cover every mode with every
 * optimizer at least once and with every dim), with
 * random combiners (feature 0 cycles through all four), weights, dedup,
 * stacking (half the configs share dim and optimizer so tables stack),
 * global batches of 0..40 samples (0..300, bags up to 24 ids, every 8th),
 * thread counts 1 and 2,
 * bounds = drop with out-of-range ids, debug_checks, TABLE owners on
 * different ranks, tables with 1..3 rows (fewer than ranks), dims 1..64
 * (not divisible by W, and below W: column-wise padding).
 * A third of the tables that may (all but COLUMN) train with fp16 or bf16
 * rows, nearest or stochastic: their tables must be bit-identical too.
 * Fixed cases: bytes sent > 0 on every rank for W > 1 with a ROW table whose
 * rows the rank must fetch from another rank (0 for W = 1), and a global
 * batch of 0 samples.
 */
#include "mpi_util.h"
#include "quant/round.h"

#define TRIALS 56
#define STEPS 3

/* Half-precision rows (docs/precision.md) on a third of the tables (two
 * thirds of the COLUMN ones, whose row-wise Adagrad takes a path of its
 * own), nearest or stochastic: the rounding's bits come from logical
 * coordinates (a COLUMN slice's columns keep their numbers), so the world
 * gives the bits of one process (COLUMN's row-wise sums aside: see
 * mpi_util.h, mpi_close_half).  Half optimizer state on half the Adagrad
 * and Adam tables, with rows of any precision.  Drawn from the config's
 * seed, not r, so the other draws stay as they were. */
static void half_rows(test_config *tc)
{
    test_rng h = {tc->cfg.seed ^ 0x5bd1e995u};
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        ember_table_config *tb = &tc->tables[t];
        int pick = tb->placement == EMBER_PLACE_COLUMN ? test_range(&h, 0, 3) != 0 : test_range(&h, 0, 3) == 0;
        if (!tb->quant_buckets && pick) {
            tb->precision = test_range(&h, 0, 2) ? EMBER_PRECISION_FP16 : EMBER_PRECISION_BF16;
            tb->rounding = test_range(&h, 0, 3) ? EMBER_ROUND_STOCHASTIC : EMBER_ROUND_NEAREST;
        }
        if (!tb->quant_buckets && test_element_state(tb->optimizer.kind) && test_range(&h, 0, 2))
            tb->state_precision = test_range(&h, 0, 2) ? EMBER_PRECISION_FP16 : EMBER_PRECISION_BF16; /* any rows */
    }
}

/* x as a table of that precision holds it (nearest). */
static float held(ember_row_precision p, float x)
{
    return p == EMBER_PRECISION_FP16   ? ember_half_to_float(ember_half_from_float(x))
           : p == EMBER_PRECISION_BF16 ? ember_bf16_to_float(ember_bf16_from_float(x))
                                       : x;
}

static void random_trial(test_rng *r, int trial, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    test_config *tc = mpi_random_config(r, trial, world);
    half_rows(tc);
    test_config *rc = mpi_ref_config(tc);
    const ember_collection_config *cfg = &tc->cfg;
    char desc[400];
    mpi_describe(desc, sizeof desc, trial, tc);
    mpi_context("%s", desc);

    ember_collection *dc = mpi_create(&tc->cfg, "distributed");
    ember_collection *refc = mpi_create(&rc->cfg, "reference (world of one)");
    if (!mpi_all(dc && refc))
        goto done;
    MCHECK(ember_world_size(ember_collection_world(dc)) == W, "collection world size %d",
           ember_world_size(ember_collection_world(dc)));
    mpi_compare_tables(dc, refc, cfg, 0, "initial tables");

    int64_t dropped_local = 0, dropped_global = 0;
    for (int step = 0; step < STEPS; step++) {
        test_batch_opts o = test_batch_opts_default();
        int big = trial % 8 == 7; /* now and then a larger batch with longer bags */
        o.batch_size = (int32_t)test_range(r, 0, big ? 301 : 41);
        o.max_len = (int32_t)test_range(r, 0, big ? 25 : 7);
        o.empty_frac = 0.2;
        o.dup_heavy = test_range(r, 0, 4) == 0;
        o.weighted = (int)test_range(r, 0, 2);
        o.invalid_frac = cfg->bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch gb;
        test_batch_make(r, cfg, &o, &gb);
        int32_t B = gb.b.batch_size, *start = mpi_starts();
        mpi_split_kind kind = (mpi_split_kind)((trial + step) % 4);
        mpi_split(r, B, W, kind, start);
        int32_t lo = start[rank], hi = start[rank + 1];
        char what[160];
        snprintf(what, sizeof what, "step %d (global B %d, %s split, local samples [%d, %d))",
                 step, B, mpi_split_names[kind], lo, hi);
        /* out-of-range ids of this rank's samples (bounds = drop) */
        int64_t k = 0;
        for (int32_t f = 0; f < cfg->num_features; f++)
            for (int32_t s = 0; s < B; s++)
                for (int32_t p = 0; p < gb.lengths[(int64_t)f * B + s]; p++, k++) {
                    int64_t id = gb.ids[k];
                    int bad = id < 0 || id >= cfg->tables[cfg->features[f].table].rows;
                    dropped_local += bad && s >= lo && s < hi;
                }
        dropped_global += gb.invalid;
        mpi_grads g;
        mpi_grads_make(r, cfg, &gb.b, o.dup_heavy ? 0.0f : -1.0f, &g);

        /* a collective write of random rows and state into both, now and then */
        if (step == 1 && trial % 3 == 0) {
            int32_t t = (int32_t)test_range(r, 0, cfg->num_tables);
            int64_t rows = cfg->tables[t].rows, first = test_range(r, 0, rows);
            int64_t count = test_range(r, 1, rows - first + 1);
            float *x = malloc((size_t)(count * cfg->tables[t].dim) * sizeof(float));
            test_fill(r, x, count * cfg->tables[t].dim, -0.5f, 0.5f);
            for (int64_t i = 0; i < count * cfg->tables[t].dim; i++) /* read back exactly */
                x[i] = held(cfg->tables[t].precision, x[i]);
            int a = ember_table_write(dc, t, first, count, x);
            int b = ember_table_write(refc, t, first, count, x);
            MCHECK(a == EMBER_OK && b == EMBER_OK, "%s: table_write %s rows [%lld, +%lld): %s",
                   what, cfg->tables[t].name, (long long)first, (long long)count,
                   ember_errmsg(dc));
            /* the same range read back (collective) */
            float *y = mpi_nan_buffer(count * cfg->tables[t].dim);
            a = ember_table_read(dc, t, first, count, y);
            MCHECK(a == EMBER_OK && !memcmp(x, y, (size_t)(count * cfg->tables[t].dim) * 4),
                   "%s: table_read of the rows just written to %s [%lld, +%lld): %s", what,
                   cfg->tables[t].name, (long long)first, (long long)count,
                   a == EMBER_OK ? "values differ" : ember_errmsg(dc));
            free(x), free(y);
            /* and their state (values >= 0 fit every kind's; a COLUMN table's row
             * floats must reach every rank's copy), read back exactly too */
            int32_t sf = ember_state_floats(cfg->tables[t].optimizer.kind, cfg->tables[t].dim);
            if (sf > 0) {
                float *s = malloc((size_t)(count * sf) * sizeof(float));
                test_fill(r, s, count * sf, 0.0f, 0.5f);
                for (int64_t i = 0; i < count * sf; i++)
                    s[i] = held(cfg->tables[t].state_precision, s[i]);
                a = ember_table_write_state(dc, t, first, count, s);
                b = ember_table_write_state(refc, t, first, count, s);
                MCHECK(a == EMBER_OK && b == EMBER_OK, "%s: table_write_state %s rows [%lld, +%lld): %s", what,
                       cfg->tables[t].name, (long long)first, (long long)count, ember_errmsg(dc));
                free(s);
            }
            mpi_compare_tables(dc, refc, cfg, 0, "after ember_table_write");
        }

        int ok = mpi_step(dc, refc, cfg, &gb.b, start, &g, 1, what);
        if (ok) {
            ember_stats ds, rs;
            ember_collection_stats(dc, &ds);
            ember_collection_stats(refc, &rs);
            MCHECK(ds.steps == step + 1, "%s: stats.steps %lld", what, (long long)ds.steps);
            MCHECK(ds.minibatches == 1, "%s: stats.minibatches %lld", what,
                   (long long)ds.minibatches);
            MCHECK(rs.last_bytes_sent == 0 && rs.last_bytes_received == 0,
                   "%s: world of one sent %lld received %lld bytes", what,
                   (long long)rs.last_bytes_sent, (long long)rs.last_bytes_received);
            if (W == 1)
                MCHECK(ds.last_bytes_sent == 0 && ds.last_bytes_received == 0,
                       "%s: np 1 sent %lld received %lld bytes", what,
                       (long long)ds.last_bytes_sent, (long long)ds.last_bytes_received);
            /* the API does not say whether a rank's count is its own or the world's */
            MCHECK(ds.dropped_bounds == dropped_local || ds.dropped_bounds == dropped_global,
                   "%s: stats.dropped_bounds %lld, this rank dropped %lld, all ranks %lld", what,
                   (long long)ds.dropped_bounds, (long long)dropped_local,
                   (long long)dropped_global);
        }
        mpi_grads_free(&g);
        test_batch_free(&gb);
        free(start);
        if (!ok)
            break;
    }
done:
    ember_collection_destroy(dc);
    ember_collection_destroy(refc);
    test_config_free(tc);
    test_config_free(rc);
}

/* One ROW table of 4W + 3 rows; rank q's two samples read rows q and
 * (q + 1) % W (owned by ranks q and q + 1): for W > 1 every rank must fetch
 * a row from another rank and send it its gradient, so bytes sent and
 * received are > 0 on every rank after forward + backward; for W = 1 they
 * are 0.  Also a global batch of 0 samples: every rank passes B = 0, and
 * forward and backward succeed and leave the tables as the reference's. */
static void fixed_cases(ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    mpi_context("fixed: bytes sent (ROW table, rows fetched from other ranks)");
    test_config *tc = test_config_new(1, 1);
    tc->tables[0].rows = 4 * W + 3;
    tc->tables[0].dim = 4;
    tc->tables[0].optimizer = ember_optimizer_default(EMBER_OPT_ADAM);
    tc->cfg.threads = 1;
    tc->cfg.world = world;
    test_config *rc = mpi_ref_config(tc);
    ember_collection *dc = mpi_create(&tc->cfg, "distributed");
    ember_collection *refc = mpi_create(&rc->cfg, "reference");
    if (mpi_all(dc && refc)) {
        int32_t len[2] = {1, 1};
        int64_t ids[2] = {rank, (rank + 1) % W};
        ember_batch b = {2, 1, len, ids, NULL, 2};
        float out[8], d[8] = {0.5f, -0.25f, 1, 2, -1, 0.125f, 3, -2};
        int a = ember_forward(dc, &b, out, NULL);
        MCHECK(a == EMBER_OK, "forward: %s", ember_errmsg(dc));
        if (mpi_all(a == EMBER_OK)) {
            a = ember_backward(dc, d, NULL);
            MCHECK(a == EMBER_OK, "backward: %s", ember_errmsg(dc));
            ember_stats st;
            ember_collection_stats(dc, &st);
            if (W > 1)
                MCHECK(st.last_bytes_sent > 0 && st.last_bytes_received > 0,
                       "W %d: sent %lld received %lld bytes", W, (long long)st.last_bytes_sent,
                       (long long)st.last_bytes_received);
            else
                MCHECK(st.last_bytes_sent == 0 && st.last_bytes_received == 0,
                       "W 1: sent %lld received %lld bytes", (long long)st.last_bytes_sent,
                       (long long)st.last_bytes_received);
        }
        /* the reference ran the global batch: ranks 0..W-1, two samples each */
        int32_t *glen = malloc(sizeof(int32_t) * 2 * (size_t)W);
        int64_t *gids = malloc(sizeof(int64_t) * 2 * (size_t)W);
        float *gout = malloc(sizeof(float) * 8 * (size_t)W), *gd = malloc(sizeof(float) * 8 * (size_t)W);
        for (int32_t q = 0; q < W; q++) {
            glen[2 * q] = glen[2 * q + 1] = 1;
            gids[2 * q] = q;
            gids[2 * q + 1] = (q + 1) % W;
            memcpy(gd + 8 * q, d, sizeof d);
        }
        ember_batch g = {2 * W, 1, glen, gids, NULL, 2 * W};
        MCHECK(ember_forward(refc, &g, gout, NULL) == EMBER_OK, "reference forward");
        MCHECK(memcmp(gout + 8 * rank, out, sizeof out) == 0, "forward output differs");
        MCHECK(ember_backward(refc, gd, NULL) == EMBER_OK, "reference backward");
        mpi_compare_tables(dc, refc, &tc->cfg, 0, "bytes case");

        /* every rank 0 samples */
        mpi_context("fixed: a global batch of 0 samples");
        int32_t none_len[1] = {0};
        int64_t none_ids[1] = {0};
        ember_batch empty = {0, 1, none_len, none_ids, NULL, 0};
        a = ember_forward(dc, &empty, out, NULL);
        int bref = ember_forward(refc, &empty, out, NULL);
        MCHECK(a == EMBER_OK && bref == EMBER_OK, "forward of 0 samples: %s", ember_errmsg(dc));
        if (mpi_all(a == EMBER_OK && bref == EMBER_OK)) {
            a = ember_backward(dc, d, NULL);
            bref = ember_backward(refc, d, NULL);
            MCHECK(a == EMBER_OK && bref == EMBER_OK, "backward of 0 samples: %s",
                   ember_errmsg(dc));
            mpi_compare_tables(dc, refc, &tc->cfg, 0, "after a step of 0 samples");
        }
        free(glen), free(gids), free(gout), free(gd);
    }
    ember_collection_destroy(dc);
    ember_collection_destroy(refc);
    test_config_free(tc);
    test_config_free(rc);
}

int main(int argc, char **argv)
{
    test_rng r = {mpi_test_init(&argc, &argv)};
    ember_world *world = mpi_world();
    fixed_cases(world);
    for (int trial = 0; trial < TRIALS; trial++)
        random_trial(&r, trial, world);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_equivalence");
}
