/*
 * mpi_errors.c: an error on one rank fails the collective call on every
 * rank, before any table changes, and nobody hangs (ember.h, the world
 * section; docs/distributed.md "Errors").  Run under mpirun -np 1..4.
 *
 * For each placement mode (ROW/ROWS, ROW/POOLED, TABLE/ROWS, TABLE/POOLED,
 * COLUMN, REPLICATED) x each kind of error, one rank k (cycling over the
 * ranks) gets the bad input; the other ranks' inputs are good and some of
 * them may have 0 samples:
 *   id >= rows, id < 0, NaN weight (bounds = error): every rank's forward
 *       returns EMBER_EINPUT, and every rank's message names "rank k", the
 *       feature, the sample (k's local index or the global one: the API
 *       does not say) and the id (or "weight");
 *   NaN upstream gradient (debug_checks): rank k's d_pooled or d_sequence
 *       holds a NaN in a bag of a feature on the table under test; every
 *       rank's backward returns EMBER_ENUMERIC and stats.steps stays;
 *   NaN row (debug_checks): a row set to NaN (collective ember_table_write)
 *       that only rank k looks up; every rank's forward returns
 *       EMBER_ENUMERIC naming the table; the row is then written back.
 * After each failure: a backward returns what a world of one returns after
 * a failed forward (EMBER_ESTATE), every table and its state are bitwise as
 * before (collective reads), and the next good step equals the world-of-one
 * reference (mpi_step: bit-identical or within 1e-6 by placement), which
 * also shows the failed call left no state behind (Adam's step count).
 * Also: table row calls with a bad range or table are EMBER_EINVAL on every
 * rank (no rank waits for the others), and the collection still works.
 * A hang would trip the watchdog (mpi_util.h) or CTest's TIMEOUT.
 */
#include "mpi_util.h"

enum { MODE_ROW_ROWS, MODE_ROW_POOLED, MODE_TABLE_ROWS, MODE_TABLE_POOLED, MODE_COLUMN,
       MODE_REPLICATED, NUM_MODES };
static const char *const mode_names[] = {"row/rows", "row/pooled", "table/rows",
                                         "table/pooled", "column", "replicated"};
enum { BAD_ID_HIGH, BAD_ID_NEGATIVE, BAD_WEIGHT, BAD_GRADIENT, BAD_ROW, NUM_KINDS };
static const char *const kind_names[] = {"id >= rows", "id < 0", "NaN weight",
                                         "NaN upstream gradient", "NaN row"};

/* tables "users" (37 x 5, Adagrad) and "items" (3 x 3, Adam: fewer rows
 * than ranks); features user_id (SUM on users), item_hist (MEAN on items),
 * item_seq (NONE on items).  Both tables placed by mode; TABLE owners k+1
 * and k. */
static test_config *config(int mode, int32_t k, ember_world *world, int debug)
{
    int32_t W = ember_world_size(world);
    test_config *tc = test_config_new(2, 3);
    snprintf(tc->table_names[0], 32, "users");
    snprintf(tc->table_names[1], 32, "items");
    tc->tables[0].rows = 37;
    tc->tables[0].dim = 5;
    tc->tables[0].optimizer = ember_optimizer_default(EMBER_OPT_ADAGRAD);
    tc->tables[0].optimizer.lr = 0.1f;
    tc->tables[1].rows = 3;
    tc->tables[1].dim = 3;
    tc->tables[1].optimizer = ember_optimizer_default(EMBER_OPT_ADAM);
    snprintf(tc->feature_names[0], 32, "user_id");
    snprintf(tc->feature_names[1], 32, "item_hist");
    snprintf(tc->feature_names[2], 32, "item_seq");
    tc->features[1].table = 1;
    tc->features[1].combiner = EMBER_COMBINER_MEAN;
    tc->features[2].table = 1;
    tc->features[2].combiner = EMBER_COMBINER_NONE;
    static const ember_placement by_mode[] = {EMBER_PLACE_ROW,    EMBER_PLACE_ROW,
                                              EMBER_PLACE_TABLE,  EMBER_PLACE_TABLE,
                                              EMBER_PLACE_COLUMN, EMBER_PLACE_REPLICATED};
    for (int t = 0; t < 2; t++) {
        tc->tables[t].placement = by_mode[mode];
        tc->tables[t].exchange = mode == MODE_ROW_POOLED || mode == MODE_TABLE_POOLED
                                     ? EMBER_EXCHANGE_POOLED
                                     : EMBER_EXCHANGE_ROWS;
        tc->tables[t].owner = (k + 1 - t) % W;
    }
    tc->cfg.seed = 7;
    tc->cfg.debug_checks = debug;
    tc->cfg.threads = 1;
    tc->cfg.world = world;
    return tc;
}

/* A good global batch of B samples: every bag 1..3 valid ids, weights. */
static void good_batch(test_rng *r, const test_config *tc, int32_t B, test_batch *tb)
{
    int32_t *len = malloc(sizeof(int32_t) * 3 * (size_t)B + 1);
    int64_t n = 0;
    for (int32_t i = 0; i < 3 * B; i++)
        n += len[i] = (int32_t)test_range(r, 1, 4);
    test_batch_alloc(tb, B, 3, n, 1);
    memcpy(tb->lengths, len, sizeof(int32_t) * 3 * (size_t)B);
    free(len);
    for (int64_t k = 0, i = 0; i < 3 * B; i++)
        for (int p = 0; p < tb->lengths[i]; p++, k++) {
            tb->ids[k] = test_range(r, 0, tc->tables[tc->features[i / B].table].rows);
            tb->weights[k] = test_float(r, 0.5f, 1.5f);
        }
}

/* A split where rank k has at least one sample (B >= W). */
static void split_with(test_rng *r, int32_t B, int32_t W, int32_t k, int variant, int32_t *start)
{
    mpi_split(r, B, W, variant % 2 ? MPI_SPLIT_RANDOM : MPI_SPLIT_ZERO, start);
    if (start[k + 1] == start[k])
        mpi_split(r, B, W, MPI_SPLIT_EVEN, start);
}

/* One good step on both collections (new batch and gradients). */
static int good_step(test_rng *r, ember_collection *dc, ember_collection *refc,
                     const test_config *tc, int32_t k, int variant, const char *what)
{
    int32_t W = mpi_size_, *start = mpi_starts();
    test_batch gb;
    good_batch(r, tc, (int32_t)test_range(r, W, 4 * W + 5), &gb);
    split_with(r, gb.b.batch_size, W, k, variant, start);
    mpi_grads g;
    mpi_grads_make(r, &tc->cfg, &gb.b, -1.0f, &g);
    int ok = mpi_step(dc, refc, &tc->cfg, &gb.b, start, &g, 0, what);
    mpi_grads_free(&g);
    test_batch_free(&gb);
    free(start);
    return ok;
}

static void error_case(test_rng *r, int mode, int kind, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    int32_t k = (mode + kind) % W;
    int debug = kind == BAD_GRADIENT || kind == BAD_ROW;
    mpi_context("%s, %s on rank %d", mode_names[mode], kind_names[kind], k);
    test_config *tc = config(mode, k, world, debug);
    test_config *rc = mpi_ref_config(tc);
    const ember_collection_config *cfg = &tc->cfg;
    ember_collection *dc = mpi_create(&tc->cfg, "distributed");
    ember_collection *refc = mpi_create(&rc->cfg, "reference");
    if (!mpi_all(dc && refc) || !good_step(r, dc, refc, tc, k, kind, "good step before")) {
        ember_collection_destroy(dc);
        ember_collection_destroy(refc);
        test_config_free(tc);
        test_config_free(rc);
        return;
    }
    ember_stats before_stats;
    ember_collection_stats(dc, &before_stats);

    /* the bad global batch: only rank k's samples are touched */
    int32_t *start = mpi_starts();
    test_batch gb, lb;
    good_batch(r, tc, (int32_t)test_range(r, W, 4 * W + 5), &gb);
    int32_t B = gb.b.batch_size;
    split_with(r, B, W, k, kind + mode, start);
    int32_t lo = start[rank], hi = start[rank + 1];
    int32_t s = (int32_t)test_range(r, start[k], start[k + 1]); /* the bad sample (global) */
    int32_t f = (int32_t)((mode + kind) % 3);                     /* the bad feature */
    int64_t at = mpi_bag_start(&gb.b, f, s) + test_range(r, 0, gb.lengths[(int64_t)f * B + s]);
    int64_t bad_id = 0;
    if (kind == BAD_ID_HIGH)
        gb.ids[at] = bad_id = cfg->tables[cfg->features[f].table].rows + test_range(r, 0, 5);
    else if (kind == BAD_ID_NEGATIVE)
        gb.ids[at] = bad_id = -test_range(r, 1, 1000);
    else if (kind == BAD_WEIGHT)
        gb.weights[at] = NAN;
    else if (kind == BAD_ROW) { /* row 0 of users: only rank k's sample s reads it */
        for (int32_t q = 0; q < B; q++) {
            int64_t b0 = mpi_bag_start(&gb.b, 0, q);
            for (int32_t p = 0; p < gb.lengths[q]; p++)
                if (gb.ids[b0 + p] == 0)
                    gb.ids[b0 + p] = 1;
        }
        gb.ids[mpi_bag_start(&gb.b, 0, s)] = 0;
    }
    test_sub_batch(&gb.b, lo, hi, &lb);
    char what[200];
    snprintf(what, sizeof what, "bad sample %d (rank %d's local %d) feature %s, local samples "
             "[%d, %d) of %d", s, k, s - start[k], cfg->features[f].name, lo, hi, B);

    mpi_snapshot snap;
    mpi_snap(dc, cfg, &snap);
    float *saved_row = NULL;
    if (kind == BAD_ROW) {
        float nan_row[5] = {NAN, NAN, NAN, NAN, NAN};
        saved_row = malloc(5 * sizeof(float));
        ember_table_read(dc, 0, 0, 1, saved_row);
        int rc0 = ember_table_write(dc, 0, 0, 1, nan_row);
        MCHECK(rc0 == EMBER_OK, "%s: writing a NaN row: %s", what, ember_errmsg(dc));
    }

    /* upstream gradients: global arrays (the same on every rank), sliced */
    int64_t Wp = test_pooled_width(cfg), lS = test_sequence_size(cfg, &lb.b);
    mpi_grads g;
    mpi_grads_make(r, cfg, &gb.b, -1.0f, &g);
    if (kind == BAD_GRADIENT) { /* the NaN: global sample s, feature f */
        if (cfg->features[f].combiner != EMBER_COMBINER_NONE) {
            int64_t col = f == 0 ? 0 : 5; /* user_id (5 wide), then item_hist (3) */
            g.dp[(int64_t)s * Wp + col + test_range(r, 0, f == 0 ? 5 : 3)] = NAN;
        } else { /* item_seq: its ids of the samples before s, then s's first */
            int64_t before = 0;
            for (int32_t q = 0; q < s; q++)
                before += gb.lengths[2 * B + q];
            g.ds[before * 3 + test_range(r, 0, 3)] = NAN;
        }
    }
    float *lp = mpi_nan_buffer((hi - lo) * Wp), *ls = mpi_nan_buffer(lS);
    float *dp = g.dp + (int64_t)lo * Wp, *ds = mpi_nan_buffer(lS);
    mpi_local_sequence(cfg, &gb.b, lo, hi, g.ds, ds);
    int fwd = ember_forward(dc, &lb.b, lp, ls);
    const char *msg = ember_errmsg(dc);
    if (kind == BAD_GRADIENT) {
        MCHECK(fwd == EMBER_OK, "%s: forward of a good batch: %s", what, msg);
        int bwd = mpi_all(fwd == EMBER_OK) ? ember_backward(dc, dp, ds) : EMBER_ENUMERIC;
        msg = ember_errmsg(dc);
        MCHECK(bwd == EMBER_ENUMERIC, "%s: backward with a NaN gradient on rank %d: %s (%s)",
               what, k, ember_status_str(bwd), msg);
        ember_stats st;
        ember_collection_stats(dc, &st);
        MCHECK(st.steps == before_stats.steps, "%s: stats.steps %lld after a failed backward, "
               "%lld before", what, (long long)st.steps, (long long)before_stats.steps);
    } else {
        int want = kind == BAD_ROW ? EMBER_ENUMERIC : EMBER_EINPUT;
        MCHECK(fwd == want, "%s: forward: %s, want %s (%s)", what, ember_status_str(fwd),
               ember_status_str(want), msg);
        /* the first failing rank's message; a NaN row may be found by any
         * rank that pools it (every rank, for COLUMN) */
        if (W > 1 && kind != BAD_ROW)
            MCHECK(mpi_names_rank(msg, k), "%s: message does not name rank %d: %s", what, k, msg);
        if (W > 1 && kind == BAD_ROW)
            MCHECK(strstr(msg, "rank ") != NULL, "%s: message names no rank: %s", what, msg);
        if (kind == BAD_ROW) {
            MCHECK(strstr(msg, "users") != NULL, "%s: message does not name table users: %s",
                   what, msg);
        } else {
            MCHECK(strstr(msg, cfg->features[f].name) != NULL,
                   "%s: message does not name feature %s: %s", what, cfg->features[f].name, msg);
            MCHECK(mpi_has_number(msg, s - start[k]) || mpi_has_number(msg, s),
                   "%s: message names neither sample %d nor %d: %s", what, s - start[k], s, msg);
            if (kind == BAD_WEIGHT)
                MCHECK(strstr(msg, "weight") != NULL, "%s: message lacks 'weight': %s", what, msg);
            else
                MCHECK(mpi_has_number(msg, bad_id), "%s: message lacks id %lld: %s", what,
                       (long long)bad_id, msg);
        }
        /* as in a world of one, no forward is pending after a failed one */
        int bwd = mpi_all(fwd == want) ? ember_backward(dc, dp, ds) : EMBER_ESTATE;
        MCHECK(bwd == EMBER_ESTATE, "%s: backward after the failed forward: %s, want ESTATE",
               what, ember_status_str(bwd));
    }
    if (kind == BAD_ROW) {
        int rc0 = ember_table_write(dc, 0, 0, 1, saved_row);
        MCHECK(rc0 == EMBER_OK, "%s: restoring the row: %s", what, ember_errmsg(dc));
    }
    mpi_snap_same(dc, cfg, &snap, what);
    good_step(r, dc, refc, tc, k, kind + 1, "good step after the failure");

    free(saved_row), free(lp), free(ls), free(ds), free(start);
    mpi_grads_free(&g);
    test_batch_free(&gb);
    test_batch_free(&lb);
    ember_collection_destroy(dc);
    ember_collection_destroy(refc);
    test_config_free(tc);
    test_config_free(rc);
}

/* Row calls with bad arguments (the same on every rank) fail on every rank
 * with EMBER_EINVAL, and the collection still works. */
static void bad_row_calls(test_rng *r, ember_world *world)
{
    for (int mode = 0; mode < NUM_MODES; mode++) {
        mpi_context("%s, row calls with bad arguments", mode_names[mode]);
        test_config *tc = config(mode, 0, world, 0), *rc = mpi_ref_config(tc);
        ember_collection *dc = mpi_create(&tc->cfg, "distributed");
        ember_collection *refc = mpi_create(&rc->cfg, "reference");
        if (mpi_all(dc && refc)) {
            float buf[5 * 40];
            int a = ember_table_read(dc, 0, 35, 5, buf);  /* past the 37 rows */
            int b = ember_table_read(dc, 2, 0, 1, buf);   /* no table 2 */
            int c = ember_table_write(dc, 1, -1, 2, buf); /* negative first */
            int d = ember_table_read_state(dc, 0, 0, 38, buf);
            MCHECK(a == EMBER_EINVAL && b == EMBER_EINVAL && c == EMBER_EINVAL &&
                       d == EMBER_EINVAL,
                   "statuses %d %d %d %d, want EMBER_EINVAL", a, b, c, d);
            good_step(r, dc, refc, tc, 0, mode, "good step after bad row calls");
        }
        ember_collection_destroy(dc);
        ember_collection_destroy(refc);
        test_config_free(tc);
        test_config_free(rc);
    }
}

int main(int argc, char **argv)
{
    test_rng r = {mpi_test_init(&argc, &argv)};
    ember_world *world = mpi_world();
    for (int mode = 0; mode < NUM_MODES; mode++)
        for (int kind = 0; kind < NUM_KINDS; kind++)
            error_case(&r, mode, kind, world);
    bad_row_calls(&r, world);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_errors");
}
