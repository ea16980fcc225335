/*
 * mpi_limits.c: per-partition limits in a world of W ranks (ember.h on
 * ember_table_config limits; docs/distributed.md "Limits across ranks"):
 * counts are per rank over its local batch, for partitions physical_row %
 * num_shards (num_shards = W, or 0 meaning W, here).  Run under mpirun -np
 * 1..4, every placement mode (ROW/ROWS, ROW/POOLED, TABLE/ROWS, TABLE/POOLED, COLUMN,
 * REPLICATED; all tables of a config placed alike, so they stack as the
 * reference's ref_stack_offset says).
 *
 *   error      policy error, a limit that only rank k's local batch breaks
 *              (one of its bags holds limit + 1 distinct ids of shard 0; the
 *              other ranks' bags hold <= 1 id and they have <= limit
 *              samples): every rank's forward returns EMBER_ELIMIT, every
 *              message names rank k, the table and the allowed count; tables
 *              unchanged; then a good step equals the world-of-one reference
 *              (without limits) as in mpi_equivalence.
 *   minibatch  policy minibatch with a limit that every other rank's whole
 *              local batch meets and each of rank k's samples meets alone,
 *              rank k holding most samples: k needs several rounds, the
 *              others one.  Outputs and tables equal the reference without
 *              limits (mpi_step: outputs bit-identical for the ROWS
 *              exchange and REPLICATED, tables for all but COLUMN, the rest
 *              within 1e-6; plus src/ref's forward); rank k's
 *              stats.minibatches equals the rounds src/ref's
 *              ref_limits_apply finds for its local batch.  At least half
 *              the cases must really need several rounds.
 *   drop       policy drop with random limits on random configs.  What a
 *              rank drops depends only on its local batch, so:
 *              (0) ember_partition_counts on one rank alone (it is not
 *                  collective) equals src/ref's counts of its local batch;
 *              (1) forward: this rank's outputs equal a world-of-one
 *                  collection with the same limits run on this rank's
 *                  local batch alone (bit-identical / 1e-6 by placement),
 *                  and stats.dropped_limit equals that collection's (or
 *                  the sum over ranks: the API does not say which);
 *              (2) tables after backward: the naive reference over the
 *                  global batch with keep = the concatenation of each
 *                  rank's ref_limits_apply mask (src/ref), within
 *                  test_limits' tolerance (rtol 1e-5, 1e-4 for
 *                  duplicate-heavy batches, and at least 4 n ulps when a
 *                  row occurs n times in the batch: its gradient is summed
 *                  in another order; atol 5e-6);
 *              Half the trials also put the last table under policy
 *              minibatch (a limit every sample meets alone), so ranks run
 *              different numbers of rounds and drop per round; the masks
 *              and rounds are still ref_limits_apply's of each local batch.
 *              (3) for configs whose features are all SUM, exactly: a
 *                  world-of-one collection without limits over the global
 *                  batch with the dropped units removed (a dropped unit
 *                  contributes nothing to a SUM bag or to backward), tables
 *                  bit-identical (COLUMN: 1e-6).
 */
#include "mpi_util.h"

enum { MODE_ROW_ROWS, MODE_ROW_POOLED, MODE_TABLE_ROWS, MODE_TABLE_POOLED, MODE_COLUMN,
       MODE_REPLICATED, NUM_MODES };
static const char *const mode_names[] = {"row/rows", "row/pooled", "table/rows",
                                         "table/pooled", "column", "replicated"};

static void place_all(test_config *tc, int mode, int32_t owner)
{
    static const ember_placement by_mode[] = {EMBER_PLACE_ROW,    EMBER_PLACE_ROW,
                                              EMBER_PLACE_TABLE,  EMBER_PLACE_TABLE,
                                              EMBER_PLACE_COLUMN, EMBER_PLACE_REPLICATED};
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        tc->tables[t].placement = by_mode[mode];
        tc->tables[t].exchange = mode == MODE_ROW_POOLED || mode == MODE_TABLE_POOLED
                                     ? EMBER_EXCHANGE_POOLED
                                     : EMBER_EXCHANGE_ROWS;
        tc->tables[t].owner = owner; /* one owner: tables stack as in the reference */
    }
}

/* A copy of tc without limits (the reference of error and minibatch). */
static test_config *unlimited(const test_config *tc)
{
    test_config *u = mpi_ref_config(tc);
    for (int32_t t = 0; t < u->cfg.num_tables; t++) {
        u->tables[t].max_ids_per_partition = 0;
        u->tables[t].max_unique_ids_per_partition = 0;
        u->tables[t].limit_policy = EMBER_LIMIT_ERROR;
    }
    return u;
}

static int64_t max_shard(const ember_collection_config *cfg, const int64_t *x, int32_t t)
{
    int64_t m = 0;
    for (int32_t s = 0; s < cfg->num_shards; s++)
        if (x[(int64_t)t * cfg->num_shards + s] > m)
            m = x[(int64_t)t * cfg->num_shards + s];
    return m;
}

/* Max over shards of table t's ids (or unique) count in samples [lo, hi). */
static int64_t range_count(const ember_collection_config *cfg, const ember_batch *b, int32_t lo,
                           int32_t hi, int32_t t, int unique)
{
    test_batch sb;
    test_sub_batch(b, lo, hi, &sb);
    size_t cells = (size_t)cfg->num_tables * (size_t)cfg->num_shards;
    int64_t *ids = calloc(cells + 1, sizeof *ids), *uq = calloc(cells + 1, sizeof *uq);
    ref_partition_counts(cfg, &sb.b, ids, uq);
    int64_t m = max_shard(cfg, unique ? uq : ids, t);
    free(ids);
    free(uq);
    test_batch_free(&sb);
    return m;
}

/* ------------------------------------------------------------ error */

#define LIMIT 6

/* tables t0 (64 x 4, the limited one; LIMIT W + 1 rows when more, so that
 * the heavy bag's ids 0, W, .., LIMIT W exist) and t1 (5 x 3, Adam);
 * features f0 (SUM on t0), f1 (MEAN on t1), f2 (NONE on t1). */
static test_config *error_config(int mode, int32_t k, ember_world *world, int unique)
{
    int32_t W = ember_world_size(world);
    test_config *tc = test_config_new(2, 3);
    tc->tables[0].rows = (int64_t)LIMIT * W + 1 > 64 ? (int64_t)LIMIT * W + 1 : 64;
    tc->tables[0].dim = 4;
    tc->tables[0].limit_policy = EMBER_LIMIT_ERROR;
    if (unique)
        tc->tables[0].max_unique_ids_per_partition = LIMIT;
    else
        tc->tables[0].max_ids_per_partition = LIMIT;
    tc->tables[1].rows = 5;
    tc->tables[1].dim = 3;
    tc->tables[1].optimizer = ember_optimizer_default(EMBER_OPT_ADAM);
    tc->features[1].table = 1;
    tc->features[1].combiner = EMBER_COMBINER_MEAN;
    tc->features[2].table = 1;
    tc->features[2].combiner = EMBER_COMBINER_NONE;
    place_all(tc, mode, (k + 1) % W);
    tc->cfg.stack_tables = 0;
    tc->cfg.num_shards = W;
    tc->cfg.threads = 1;
    tc->cfg.world = world;
    return tc;
}

/* Every rank <= LIMIT samples, bags of 0..1 ids: fits any rank.  With
 * heavy_rank >= 0, that rank's first sample has a f0 bag of LIMIT + 1
 * distinct ids of shard 0 (0, W, 2W, ...). */
static void error_batch(test_rng *r, const test_config *tc, int32_t heavy_rank, int32_t *start,
                        test_batch *gb)
{
    int32_t W = mpi_size_;
    mpi_split(r, (int32_t)test_range(r, 0, (int64_t)LIMIT * W + 1), W, MPI_SPLIT_EVEN, start);
    if (heavy_rank >= 0 && start[heavy_rank + 1] == start[heavy_rank]) {
        int32_t B = W; /* one sample each */
        for (int32_t q = 0; q <= W; q++)
            start[q] = q < B ? q : B;
    }
    int32_t B = start[W], F = 3, heavy = heavy_rank >= 0 ? start[heavy_rank] : -1;
    int32_t *len = malloc(sizeof(int32_t) * (size_t)(F * B + 1));
    int64_t n = 0;
    for (int32_t i = 0; i < F * B; i++)
        n += len[i] = i == heavy ? LIMIT + 1 : (int32_t)test_range(r, 0, 2);
    test_batch_alloc(gb, B, F, n, 1);
    memcpy(gb->lengths, len, sizeof(int32_t) * (size_t)(F * B));
    free(len);
    int64_t k = 0;
    for (int32_t i = 0; i < F * B; i++)
        for (int32_t p = 0; p < gb->lengths[i]; p++, k++) {
            gb->ids[k] = i == heavy ? (int64_t)p * W
                                    : test_range(r, 0, tc->tables[tc->features[i / B].table].rows);
            gb->weights[k] = test_float(r, 0.5f, 1.5f);
        }
}

static void error_case(test_rng *r, int mode, int unique, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    int32_t k = (mode * 2 + unique) % W;
    mpi_context("error policy, %s, %s limit %d broken on rank %d only", mode_names[mode],
                unique ? "unique" : "ids", LIMIT, k);
    test_config *tc = error_config(mode, k, world, unique), *rc = unlimited(tc);
    ember_collection *dc = mpi_create(&tc->cfg, "distributed");
    ember_collection *refc = mpi_create(&rc->cfg, "reference");
    int32_t *start = mpi_starts();
    if (mpi_all(dc && refc)) {
        test_batch gb, lb;
        error_batch(r, tc, k, start, &gb);
        test_sub_batch(&gb.b, start[rank], start[rank + 1], &lb);
        /* rank k's count in shard 0, the only partition over the limit */
        int64_t observed = range_count(&tc->cfg, &gb.b, start[k], start[k + 1], 0, unique);
        mpi_snapshot snap;
        mpi_snap(dc, &tc->cfg, &snap);
        int64_t Wp = test_pooled_width(&tc->cfg), lS = test_sequence_size(&tc->cfg, &lb.b);
        float *lp = mpi_nan_buffer(lb.b.batch_size * Wp), *ls = mpi_nan_buffer(lS);
        int fwd = ember_forward(dc, &lb.b, lp, ls);
        const char *msg = ember_errmsg(dc);
        MCHECK(fwd == EMBER_ELIMIT, "forward: %s (%s)", ember_status_str(fwd), msg);
        if (W > 1)
            MCHECK(mpi_names_rank(msg, k), "message does not name rank %d: %s", k, msg);
        MCHECK(strstr(msg, "table0") && mpi_has_number(msg, LIMIT) &&
                   mpi_has_number(msg, observed),
               "message does not name table0, the limit %d and the count %lld: %s", LIMIT,
               (long long)observed, msg);
        ember_stats st;
        ember_collection_stats(dc, &st);
        MCHECK(st.steps == 0, "stats.steps %lld", (long long)st.steps);
        mpi_snap_same(dc, &tc->cfg, &snap, "after EMBER_ELIMIT");
        free(lp), free(ls);
        test_batch_free(&gb);
        test_batch_free(&lb);

        /* a good step (every rank fits) equals the reference */
        error_batch(r, tc, -1, start, &gb);
        mpi_grads g;
        mpi_grads_make(r, &tc->cfg, &gb.b, -1.0f, &g);
        mpi_step(dc, refc, &tc->cfg, &gb.b, start, &g, 0, "good step after EMBER_ELIMIT");
        mpi_grads_free(&g);
        test_batch_free(&gb);
    }
    free(start);
    ember_collection_destroy(dc);
    ember_collection_destroy(refc);
    test_config_free(tc);
    test_config_free(rc);
}

/* ------------------------------------------------------- random configs */

static const int32_t small_dims[] = {1, 2, 3, 5, 8};

/* The most occurrences of one row of one table in batch b (over every
 * feature on that table). */
static int64_t max_repeats(const ember_collection_config *cfg, const ember_batch *b)
{
    int64_t most = 0, B = b->batch_size;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        int64_t rows = cfg->tables[t].rows, k = 0;
        int64_t *count = calloc((size_t)rows + 1, sizeof *count);
        for (int32_t f = 0; f < cfg->num_features && count; f++) {
            int64_t n = 0;
            for (int64_t s = 0; s < B; s++)
                n += b->lengths[(int64_t)f * B + s];
            for (int64_t i = k; i < k + n && cfg->features[f].table == t; i++)
                if (b->ids[i] >= 0 && b->ids[i] < rows && ++count[b->ids[i]] > most)
                    most = count[b->ids[i]];
            k += n;
        }
        free(count);
    }
    return most;
}

/* 1..3 tables (rows 1..150, half the time equal dim and optimizer so they
 * stack), 1..4 features; all SUM when all_sum. */
static test_config *random_config(test_rng *r, int mode, ember_world *world, int all_sum)
{
    int32_t W = ember_world_size(world);
    int32_t nt = (int32_t)test_range(r, 1, 4), nf = (int32_t)test_range(r, 1, 5);
    test_config *tc = test_config_new(nt, nf);
    for (int32_t t = 0; t < nt; t++) {
        tc->tables[t].rows = test_range(r, 0, 4) == 0 ? test_range(r, 1, 4) : test_range(r, 4, 150);
        tc->tables[t].dim = small_dims[test_range(r, 0, 5)];
        tc->tables[t].init_value = test_float(r, 0.05f, 1.0f);
        tc->tables[t].optimizer = test_optimizer_random(r, (ember_optimizer_kind)test_range(r, 0, TEST_NUM_OPT));
        test_init_for_optimizer(&tc->tables[t]);
    }
    if (test_range(r, 0, 2))
        for (int32_t t = 1; t < nt; t++) {
            tc->tables[t].dim = tc->tables[0].dim;
            tc->tables[t].optimizer = tc->tables[0].optimizer;
            test_init_for_optimizer(&tc->tables[t]);
        }
    for (int32_t f = 0; f < nf; f++) {
        tc->features[f].table = (int32_t)test_range(r, 0, nt);
        tc->features[f].combiner = all_sum ? EMBER_COMBINER_SUM
                                           : (ember_combiner)test_range(r, 0, 4);
    }
    place_all(tc, mode, (int32_t)test_range(r, 0, W));
    tc->cfg.seed = test_next(r);
    tc->cfg.dedup = (int)test_range(r, 0, 2);
    tc->cfg.stack_tables = (int)test_range(r, 0, 2);
    tc->cfg.num_shards = W;
    tc->cfg.threads = 1;
    tc->cfg.world = world;
    return tc;
}

static test_batch_opts random_opts(test_rng *r, int32_t B)
{
    test_batch_opts o = test_batch_opts_default();
    o.batch_size = B;
    o.max_len = (int32_t)test_range(r, 1, 9);
    o.empty_frac = 0.1;
    o.dup_heavy = test_range(r, 0, 5) == 0;
    o.id_range = test_range(r, 0, 2) ? test_range(r, 2, 30) : 0;
    o.weighted = (int)test_range(r, 0, 2);
    return o;
}

/* -------------------------------------------------------- minibatch */

static int minibatch_case(test_rng *r, int mode, int trial, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    int32_t k = (mode + trial) % W;
    test_config *tc = random_config(r, mode, world, 0);
    const ember_collection_config *cfg = &tc->cfg;
    if (tc->tables[0].rows < 40) /* room for distinct ids, so a batch outgrows a sample */
        tc->tables[0].rows = 40;
    tc->features[0].table = 0; /* someone reads the limited table */
    /* the other ranks hold 0..2 samples each, rank k the rest (at least 2):
     * B >= 2 W (8..32 up to W = 4, as many draws above) */
    int32_t lo_b = 2 * W > 8 ? 2 * W : 8;
    int32_t B = (int32_t)test_range(r, lo_b, lo_b + 25), *start = mpi_starts();
    test_batch gb;
    test_batch_opts o = random_opts(r, B);
    o.dup_heavy = 0;
    o.id_range = 0;
    o.max_len = o.max_len < 3 ? 3 : o.max_len;
    test_batch_make(r, cfg, &o, &gb);
    int32_t *size = mpi_alloc((size_t)W, sizeof *size), nk = B;
    for (int32_t q = 0; q < W; q++)
        if (q != k)
            nk -= size[q] = (int32_t)test_range(r, 0, 3);
    size[k] = nk;
    start[0] = 0;
    for (int32_t q = 0; q < W; q++)
        start[q + 1] = start[q] + size[q];
    free(size);
    /* the limit on table 0: each of k's samples fits alone, every other rank's batch fits */
    int unique = (int)test_range(r, 0, 2);
    int64_t limit = 1;
    for (int32_t s = start[k]; s < start[k + 1]; s++) {
        int64_t c = range_count(cfg, &gb.b, s, s + 1, 0, unique);
        limit = c > limit ? c : limit;
    }
    for (int32_t q = 0; q < W; q++)
        if (q != k) {
            int64_t c = range_count(cfg, &gb.b, start[q], start[q + 1], 0, unique);
            limit = c > limit ? c : limit;
        }
    tc->tables[0].limit_policy = EMBER_LIMIT_MINIBATCH;
    if (unique)
        tc->tables[0].max_unique_ids_per_partition = limit;
    else
        tc->tables[0].max_ids_per_partition = limit;
    /* the rounds of rank k by the naive reference */
    test_batch kb;
    test_sub_batch(&gb.b, start[k], start[k + 1], &kb);
    uint8_t *keep = malloc((size_t)kb.b.num_ids + 1);
    int32_t *mb = malloc(sizeof(int32_t) * (size_t)(kb.b.batch_size + 2)), rounds = 0;
    int lrc = ref_limits_apply(cfg, &kb.b, keep, &rounds, mb);
    free(keep), free(mb);
    test_batch_free(&kb);
    mpi_context("minibatch policy, %s trial %d: %s limit %lld on table0, rank %d has samples "
                "[%d, %d) of %d needing %d rounds (tables %d, features %d, stack %d, dedup %d)",
                mode_names[mode], trial, unique ? "unique" : "ids", (long long)limit, k, start[k],
                start[k + 1], B, rounds, cfg->num_tables, cfg->num_features, cfg->stack_tables,
                cfg->dedup);
    MCHECK(lrc == EMBER_OK, "ref_limits_apply: %d", lrc);
    MCHECK(nk >= 2, "rank %d holds %d samples, want at least 2", k, nk);

    if (trial % 2) /* the default, 0 = the world size: the same partitions */
        tc->cfg.num_shards = 0;
    test_config *rc = unlimited(tc);
    ember_collection *dc = mpi_create(&tc->cfg, "distributed");
    ember_collection *refc = mpi_create(&rc->cfg, "reference");
    if (mpi_all(dc && refc)) {
        mpi_grads g;
        mpi_grads_make(r, cfg, &gb.b, o.dup_heavy ? 0.0f : -1.0f, &g);
        if (mpi_step(dc, refc, cfg, &gb.b, start, &g, 1, "step")) {
            ember_stats st;
            ember_collection_stats(dc, &st);
            if (rank == k)
                MCHECK(st.minibatches == rounds, "rank %d: stats.minibatches %lld, reference %d",
                       k, (long long)st.minibatches, rounds);
            else
                MCHECK(st.minibatches >= 1 && st.minibatches <= rounds,
                       "stats.minibatches %lld, rank %d needs %d", (long long)st.minibatches, k,
                       rounds);
        }
        mpi_grads_free(&g);
    }
    ember_collection_destroy(dc);
    ember_collection_destroy(refc);
    test_config_free(tc);
    test_config_free(rc);
    test_batch_free(&gb);
    free(start);
    return rounds;
}

/* ------------------------------------------------------------- drop */

/* keep[] of the global batch: rank q's ids get the mask ref_limits_apply
 * gives q's local batch.  Returns the ids dropped in each rank's slice and
 * the mini-batches of each rank. */
static void global_keep(const ember_collection_config *cfg, const ember_batch *gb,
                        const int32_t *start, int32_t W, uint8_t *keep, int64_t *dropped,
                        int32_t *rounds)
{
    int32_t B = gb->batch_size, F = gb->num_features;
    for (int32_t q = 0; q < W; q++) {
        test_batch lb;
        test_sub_batch(gb, start[q], start[q + 1], &lb);
        uint8_t *lk = malloc((size_t)lb.b.num_ids + 1);
        int32_t *mb = malloc(sizeof(int32_t) * (size_t)(lb.b.batch_size + 2)), n = 0;
        int rc = ref_limits_apply(cfg, &lb.b, lk, &n, mb);
        MCHECK(rc == EMBER_OK, "ref_limits_apply of rank %d: %d", q, rc);
        rounds[q] = n;
        /* walk the global ids; q's come in its local order */
        int64_t g = 0, l = 0;
        dropped[q] = 0;
        for (int32_t f = 0; f < F; f++)
            for (int32_t s = 0; s < B; s++)
                for (int32_t p = 0; p < gb->lengths[(int64_t)f * B + s]; p++, g++)
                    if (s >= start[q] && s < start[q + 1]) {
                        keep[g] = lk[l++];
                        dropped[q] += !keep[g];
                    }
        free(lk), free(mb);
        test_batch_free(&lb);
    }
}

/* gb without the ids whose keep is 0. */
static void pruned(const ember_batch *gb, const uint8_t *keep, test_batch *out)
{
    int64_t n = 0;
    for (int64_t i = 0; i < gb->num_ids; i++)
        n += keep[i];
    int64_t nbags = (int64_t)gb->batch_size * gb->num_features;
    test_batch_alloc(out, gb->batch_size, gb->num_features, n, gb->weights != NULL);
    int64_t g = 0, o = 0;
    for (int64_t b = 0; b < nbags; b++) {
        out->lengths[b] = 0;
        for (int32_t p = 0; p < gb->lengths[b]; p++, g++)
            if (keep[g]) {
                out->ids[o] = gb->ids[g];
                if (gb->weights)
                    out->weights[o] = gb->weights[g];
                out->lengths[b]++;
                o++;
            }
    }
}

static void drop_case(test_rng *r, int mode, int trial, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    int all_sum = trial % 2 == 0;
    test_config *tc = random_config(r, mode, world, all_sum);
    ember_collection_config *cfg = &tc->cfg;
    test_batch_opts o = random_opts(r, (int32_t)test_range(r, 1, 33));
    test_batch gb;
    test_batch_make(r, cfg, &o, &gb);
    int32_t B = gb.b.batch_size, *start = mpi_starts();
    mpi_split_kind kind = (mpi_split_kind)((mode + trial) % 4);
    mpi_split(r, B, W, kind, start);
    /* half the trials: the last table under policy minibatch, with an ids
     * limit that every single sample meets, so ranks cut their batches into
     * different numbers of rounds and the other tables drop per round */
    int32_t tm = trial >= 2 && cfg->num_tables > 1 ? cfg->num_tables - 1 : -1;
    if (tm >= 0) {
        int64_t single = 1, most = 1;
        for (int32_t s = 0; s < B; s++) {
            int64_t c = range_count(cfg, &gb.b, s, s + 1, tm, 0);
            single = c > single ? c : single;
        }
        for (int32_t q = 0; q < W; q++) {
            int64_t c = range_count(cfg, &gb.b, start[q], start[q + 1], tm, 0);
            most = c > most ? c : most;
        }
        tc->tables[tm].limit_policy = EMBER_LIMIT_MINIBATCH;
        tc->tables[tm].max_ids_per_partition = test_range(r, single, most + 1);
    }
    /* random drop limits between 1 and the largest rank's observed count */
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        if ((test_range(r, 0, 4) == 0 && t > 0) || t == tm)
            continue;
        int64_t mi = 1, mu = 1;
        for (int32_t q = 0; q < W; q++) {
            int64_t a = range_count(cfg, &gb.b, start[q], start[q + 1], t, 0);
            int64_t b = range_count(cfg, &gb.b, start[q], start[q + 1], t, 1);
            mi = a > mi ? a : mi;
            mu = b > mu ? b : mu;
        }
        tc->tables[t].limit_policy = EMBER_LIMIT_DROP;
        int which = (int)test_range(r, 0, 3);
        if (which != 1)
            tc->tables[t].max_ids_per_partition = test_range(r, 1, mi + 1);
        if (which != 0)
            tc->tables[t].max_unique_ids_per_partition = test_range(r, 1, mu + 1);
    }
    uint8_t *keep = malloc((size_t)gb.b.num_ids + 1);
    int64_t *dropped = mpi_alloc((size_t)W, sizeof *dropped), total = 0;
    int32_t *rounds = mpi_alloc((size_t)W, sizeof *rounds), max_rounds = 1;
    global_keep(cfg, &gb.b, start, W, keep, dropped, rounds);
    for (int32_t q = 0; q < W; q++) {
        total += dropped[q];
        max_rounds = rounds[q] > max_rounds ? rounds[q] : max_rounds;
    }
    int32_t lo = start[rank], hi = start[rank + 1];
    if (trial / 2 % 2) /* the default, 0 = the world size: the same partitions */
        cfg->num_shards = 0;
    mpi_context("drop policy, %s trial %d (%s): global B %d, %s split, local [%d, %d), dropped "
                "here %lld of %lld, %d rounds here, %d at most (minibatch table %d; tables %d, "
                "features %d, stack %d, dedup %d, shards %d)",
                mode_names[mode], trial, all_sum ? "all SUM" : "any combiner", B,
                mpi_split_names[kind], lo, hi, (long long)dropped[rank], (long long)total,
                rounds[rank], max_rounds, tm, cfg->num_tables, cfg->num_features,
                cfg->stack_tables, cfg->dedup, cfg->num_shards);
    if (tm < 0)
        MCHECK(max_rounds == 1, "drop limits alone made %d mini-batches", max_rounds);

    test_config *lc = mpi_ref_config(tc); /* this rank's batch alone, same limits */
    test_config *pc = unlimited(tc);      /* the pruned global batch, no limits */
    ember_collection *dc = mpi_create(&tc->cfg, "distributed");
    ember_collection *local = mpi_create(&lc->cfg, "local world of one");
    ember_collection *prunedc = mpi_create(&pc->cfg, "pruned reference");
    ref_model m;
    int have_m = ref_model_init(&m, &lc->cfg) == 0;
    if (mpi_all(dc && local && prunedc && have_m)) {
        test_batch lb, pb;
        test_sub_batch(&gb.b, lo, hi, &lb);
        pruned(&gb.b, keep, &pb);
        int64_t Wp = test_pooled_width(cfg), lS = test_sequence_size(cfg, &lb.b);
        mpi_grads g;
        mpi_grads_make(r, cfg, &gb.b, o.dup_heavy ? 0.0f : -1.0f, &g);
        float *lds = mpi_nan_buffer(lS);
        mpi_local_sequence(cfg, &gb.b, lo, hi, g.ds, lds);
        int a = EMBER_OK;

        /* ember_partition_counts counts this rank's batch and is not
         * collective: only one rank calls it (a collective would hang);
         * over the modes and trials every rank of up to 24 takes a turn */
        if (rank == (mode * 4 + trial) % W) {
            size_t cells = (size_t)cfg->num_tables * (size_t)W;
            int64_t *ids = calloc(cells, sizeof *ids), *uq = calloc(cells, sizeof *uq);
            int64_t *wid = calloc(cells, sizeof *wid), *wuq = calloc(cells, sizeof *wuq);
            ref_partition_counts(&lc->cfg, &lb.b, wid, wuq);
            a = ember_partition_counts(dc, &lb.b, ids, uq);
            MCHECK(a == EMBER_OK && !memcmp(ids, wid, cells * sizeof *ids) &&
                       !memcmp(uq, wuq, cells * sizeof *uq),
                   "ember_partition_counts on rank %d alone: %s, counts %s src/ref's", rank,
                   ember_status_str(a),
                   a == EMBER_OK && !memcmp(ids, wid, cells * sizeof *ids) ? "equal" : "differ from");
            free(ids), free(uq), free(wid), free(wuq);
        }

        /* (1) forward against this rank's batch alone, same limits */
        test_sync_ref(local, &m);
        float *got_p = mpi_nan_buffer((hi - lo) * Wp), *got_s = mpi_nan_buffer(lS);
        float *want_p = mpi_nan_buffer((hi - lo) * Wp), *want_s = mpi_nan_buffer(lS);
        float *mag_p = mpi_nan_buffer((hi - lo) * Wp), *mag_s = mpi_nan_buffer(lS);
        test_ref_magnitude(&m, &lb.b, NULL, mag_p, mag_s);
        a = ember_forward(dc, &lb.b, got_p, got_s);
        int b = ember_forward(local, &lb.b, want_p, want_s);
        MCHECK(a == EMBER_OK && b == EMBER_OK, "forward: %s / local %s: %s", ember_status_str(a),
               ember_status_str(b), ember_errmsg(dc));
        if (mpi_all(a == EMBER_OK && b == EMBER_OK)) {
            mpi_compare_outputs(cfg, &lb.b, lo, got_p, want_p, mag_p, got_s, want_s, mag_s,
                                "forward vs this rank's batch alone");
            ember_stats ds, ls;
            ember_collection_stats(dc, &ds);
            ember_collection_stats(local, &ls);
            MCHECK(ls.dropped_limit == dropped[rank], "local world of one dropped %lld, src/ref %lld",
                   (long long)ls.dropped_limit, (long long)dropped[rank]);
            MCHECK(ds.dropped_limit == dropped[rank] || ds.dropped_limit == total,
                   "stats.dropped_limit %lld: this rank dropped %lld, all ranks %lld",
                   (long long)ds.dropped_limit, (long long)dropped[rank], (long long)total);
            MCHECK(ls.minibatches == rounds[rank], "local world of one: %lld mini-batches, "
                   "src/ref %d", (long long)ls.minibatches, rounds[rank]);
            MCHECK(ds.minibatches == rounds[rank] || ds.minibatches == max_rounds,
                   "stats.minibatches %lld: this rank needs %d, the world %d",
                   (long long)ds.minibatches, rounds[rank], max_rounds);

            /* (2) tables against src/ref with the global keep mask */
            a = ember_backward(dc, g.dp + (int64_t)lo * Wp, lds);
            MCHECK(a == EMBER_OK, "backward: %s: %s", ember_status_str(a), ember_errmsg(dc));
            if (mpi_all(a == EMBER_OK)) {
                ref_backward(&m, &gb.b, keep, g.dp, g.ds);
                /* a row's gradient sums its occurrences in another order than the
                 * reference's (merged, sorted): ~n ulps for n occurrences, twice
                 * that in a squared state (Adagrad); tiny tables see one id over
                 * and over, so the bound follows the most repeated row */
                double rtol = o.dup_heavy ? 1e-4 : 1e-5;
                rtol = fmax(rtol, 4.0 * (double)max_repeats(cfg, &gb.b) * 0x1p-24);
                for (int32_t t = 0; t < cfg->num_tables; t++) {
                    const ember_table_config *tb = &cfg->tables[t];
                    int64_t sf = ember_state_floats(tb->optimizer.kind, tb->dim);
                    float *w = test_read_table(dc, cfg, t, 0), *s = test_read_table(dc, cfg, t, 1);
                    char what[sizeof mpi_ctx_ + 200];
                    snprintf(what, sizeof what, "[rank %d seed %llu] %s: table %s (%s) values vs "
                             "src/ref", rank, (unsigned long long)mpi_seed_, mpi_ctx_, tb->name,
                             mpi_placement_name(tb));
                    if (w)
                        CHECK_CLOSE(w, m.tables[t].w, tb->rows * tb->dim, rtol, 5e-6, what);
                    snprintf(what, sizeof what, "[rank %d seed %llu] %s: table %s state vs src/ref",
                             rank, (unsigned long long)mpi_seed_, mpi_ctx_, tb->name);
                    if (s && sf)
                        CHECK_CLOSE(s, m.tables[t].state, tb->rows * sf, rtol, 5e-6, what);
                    free(w), free(s);
                }
                /* (3) all SUM: exactly the pruned global batch without limits */
                if (all_sum) {
                    float *pp = mpi_nan_buffer(B * Wp + 1), *ps = mpi_nan_buffer(1);
                    b = ember_forward(prunedc, &pb.b, pp, ps);
                    MCHECK(b == EMBER_OK, "pruned forward: %s", ember_errmsg(prunedc));
                    if (b == EMBER_OK) {
                        b = ember_backward(prunedc, g.dp, NULL);
                        MCHECK(b == EMBER_OK, "pruned backward: %s", ember_errmsg(prunedc));
                    }
                    mpi_compare_tables(dc, prunedc, cfg, 0, "tables vs the pruned global batch");
                    free(pp), free(ps);
                }
            }
        }
        free(got_p), free(got_s), free(want_p), free(want_s), free(mag_p), free(mag_s), free(lds);
        mpi_grads_free(&g);
        test_batch_free(&lb);
        test_batch_free(&pb);
    }
    if (have_m)
        ref_model_free(&m);
    ember_collection_destroy(dc);
    ember_collection_destroy(local);
    ember_collection_destroy(prunedc);
    test_config_free(tc);
    test_config_free(lc);
    test_config_free(pc);
    test_batch_free(&gb);
    free(keep);
    free(start), free(dropped), free(rounds);
}

int main(int argc, char **argv)
{
    test_rng r = {mpi_test_init(&argc, &argv)};
    ember_world *world = mpi_world();
    int several = 0, cases = 0;
    for (int mode = 0; mode < NUM_MODES; mode++) {
        for (int unique = 0; unique < 2; unique++)
            error_case(&r, mode, unique, world);
        for (int trial = 0; trial < 3; trial++, cases++)
            several += minibatch_case(&r, mode, trial, world) >= 2;
        for (int trial = 0; trial < 4; trial++)
            drop_case(&r, mode, trial, world);
    }
    if (mpi_rank_ == 0)
        printf("mpi_limits: %d of %d minibatch cases needed several rounds on one rank\n",
               several, cases);
    mpi_context("minibatch cases");
    MCHECK(2 * several >= cases, "only %d of %d minibatch cases needed several rounds", several,
           cases);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_limits");
}
