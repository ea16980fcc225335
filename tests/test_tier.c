/*
 * test_tier.c: the SSD tier against the memory tier (docs/tiers.md).
 *
 * Random configs (every optimizer, combiners, weights, dedup, stacking,
 * bounds = drop, debug checks, limits that drop ids or split the batch into
 * mini-batches, half rows and half optimizer state rounded either way) run the same steps on a memory collection and on SSD
 * collections with a random policy (LRU, LFU, lookahead with announced
 * batches), 1 or 2 threads, and a random cache from a few rows to the whole
 * table (a cache too small for one step's rows gets EMBER_ELIMIT, checked,
 * and the run starts again with twice the cache), O_DIRECT or buffered.  Outputs, tables and
 * optimizer state must be bit-identical (memcmp, no tolerance: the tier
 * moves rows, never changes the arithmetic).  Then checkpoints from one tier
 * load into the other, injected I/O failures (write-back at eviction, at
 * save, reads) fail with EMBER_EIO naming table and file and change
 * nothing, and bad folders, locked files, too-small filesystems and caches
 * that hold no row are refused with their names.  The cache's and the store
 * file's sizes follow the rule of docs/tiers.md, half rows and state at 2
 * bytes an element.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collection/collection.h"
#include "tier/ssd_impl.h"
#include "tier/tier.h"
#include "util.h"

#define STEPS 5

static char root[256];

typedef struct steps {
    test_batch tb[STEPS];
    float *dp[STEPS], *ds[STEPS];
} steps;

/* Random batches; big: 128 samples of 6 ids per feature (the fixed configs:
 * about 330 distinct rows per table and step). */
static void make_steps(test_rng *r, const test_config *tc, steps *st, int big)
{
    for (int s = 0; s < STEPS; s++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = big ? 128 : (int32_t)test_range(r, 1, 129);
        o.max_len = big ? 6 : (int32_t)test_range(r, 1, 7);
        o.empty_frac = big ? 0 : 0.1;
        o.dup_heavy = s == 3;
        o.weighted = (int)test_range(r, 0, 2);
        o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch_make(r, &tc->cfg, &o, &st->tb[s]);
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &st->tb[s].b);
        st->dp[s] = malloc((size_t)(o.batch_size * W + 1) * sizeof(float));
        st->ds[s] = malloc((size_t)(S + 1) * sizeof(float));
        test_fill(r, st->dp[s], o.batch_size * W, -1, 1);
        test_fill(r, st->ds[s], S, -1, 1);
    }
}

static void free_steps(steps *st)
{
    for (int s = 0; s < STEPS; s++) {
        test_batch_free(&st->tb[s]);
        free(st->dp[s]);
        free(st->ds[s]);
    }
}

/* Runs the steps; outputs go to out[s] (pooled then sequence).  Returns the
 * forward status that stopped it (EMBER_OK when all ran). */
static int run(ember_collection *c, const test_config *tc, steps *st, float **out, int lookahead)
{
    for (int s = 0; s < STEPS; s++) {
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &st->tb[s].b);
        int rc = ember_forward(c, &st->tb[s].b, out[s], out[s] + st->tb[s].b.batch_size * W);
        if (rc != EMBER_OK)
            return rc;
        (void)S;
        for (int k = 1; k <= lookahead && s + k < STEPS; k++) /* announce what is not yet */
            if (s == 0 || k == lookahead)
                CHECK(ember_prefetch(c, &st->tb[s + k].b) == EMBER_OK);
        rc = ember_backward(c, st->dp[s], st->ds[s]);
        CHECK_MSG(rc == EMBER_OK, "backward step %d: %s", s, ember_errmsg(c));
    }
    return EMBER_OK;
}

static float **alloc_outs(const test_config *tc, steps *st)
{
    float **out = calloc(STEPS, sizeof *out);
    for (int s = 0; s < STEPS; s++)
        out[s] = calloc((size_t)(st->tb[s].b.batch_size * test_pooled_width(&tc->cfg) +
                                 test_sequence_size(&tc->cfg, &st->tb[s].b) + 1),
                        sizeof(float));
    return out;
}

static void free_outs(float **out)
{
    for (int s = 0; s < STEPS; s++)
        free(out[s]);
    free(out);
}

static size_t out_bytes(const test_config *tc, const steps *st, int s)
{
    return (size_t)(st->tb[s].b.batch_size * test_pooled_width(&tc->cfg) +
                    test_sequence_size(&tc->cfg, &st->tb[s].b)) * sizeof(float);
}

/* The config with every table on the SSD tier under dir. */
static test_config *ssd_config(test_rng *r, const test_config *tc, const char *dir, ember_cache_policy pol,
                               int64_t rows_cached)
{
    test_config *cc = test_config_copy(tc);
    cc->cfg.ssd_dir = dir;
    cc->cfg.ssd_policy = pol;
    cc->cfg.lookahead = (int32_t)test_range(r, 1, 4);
    cc->cfg.io_threads = (int32_t)test_range(r, 1, 5);
    cc->cfg.ssd_buffered = (int)test_range(r, 0, 2); /* O_DIRECT (padded records) or the page cache */
    for (int32_t t = 0; t < cc->cfg.num_tables; t++) {
        ember_table_config *t_ = &cc->tables[t];
        t_->storage = EMBER_STORAGE_SSD;
        int64_t k = rows_cached < t_->rows ? rows_cached : t_->rows;
        t_->cache_bytes =
            ember_ssd_cache_bytes_for(k, t_->rows, test_ssd_record_bytes(t_), pol);
    }
    return cc;
}

/* Half rows (fp16 or bf16, rounded stochastically or to nearest) on about
 * a third of the tables, half state on about half the ones whose state is
 * per element, with rows of any precision (docs/precision.md). */
static void half_precisions(test_rng *r, test_config *tc)
{
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        ember_table_config *tb = &tc->tables[t];
        if (tb->quant_buckets)
            continue;
        if (test_range(r, 0, 3) == 0) {
            tb->precision = test_range(r, 0, 2) ? EMBER_PRECISION_FP16 : EMBER_PRECISION_BF16;
            tb->rounding = test_range(r, 0, 3) ? EMBER_ROUND_STOCHASTIC : EMBER_ROUND_NEAREST;
        }
        if (test_element_state(tb->optimizer.kind) && test_range(r, 0, 2))
            tb->state_precision = test_range(r, 0, 2) ? EMBER_PRECISION_FP16 : EMBER_PRECISION_BF16;
    }
}

static void one_config(test_rng *r, int ix)
{
    test_config *tc = test_config_random(r, 4, 6, 300, 3000);
    half_precisions(r, tc);
    tc->cfg.debug_checks = (int)test_range(r, 0, 2);
    for (int32_t t = 0; t < tc->cfg.num_tables; t++)
        if (test_range(r, 0, 3) == 0) { /* limits: dropped ids and mini-batches on the SSD tier too */
            tc->tables[t].limit_policy = test_range(r, 0, 2) ? EMBER_LIMIT_DROP : EMBER_LIMIT_MINIBATCH;
            tc->tables[t].max_ids_per_partition = test_range(r, 40, 400);
        }
    steps st;
    make_steps(r, tc, &st, 0);
    tc->cfg.threads = 1;
    ember_collection *mem = NULL;
    CHECK_MSG(ember_collection_create(&tc->cfg, &mem) == EMBER_OK, "create: %s", ember_errmsg(NULL));
    float **want = alloc_outs(tc, &st);
    CHECK_MSG(run(mem, tc, &st, want, 0) == EMBER_OK, "memory run: %s", ember_errmsg(mem));

    ember_cache_policy pol = (ember_cache_policy)test_range(r, 1, 4);
    int32_t threads = (int32_t)test_range(r, 1, 3);
    int64_t cached = test_range(r, 1, 3001);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/c%d", root, ix);
    mkdir(dir, 0700);
    for (int attempt = 0; attempt < 16; attempt++, cached *= 2) {
        test_config *cc = ssd_config(r, tc, dir, pol, cached);
        cc->cfg.threads = threads;
        ember_collection *ssd = NULL;
        int rc = ember_collection_create(&cc->cfg, &ssd);
        CHECK_MSG(rc == EMBER_OK, "config %d: create ssd: %s", ix, ember_errmsg(NULL));
        float **got = alloc_outs(tc, &st);
        rc = rc == EMBER_OK ? run(ssd, tc, &st, got, pol == EMBER_CACHE_LOOKAHEAD ? cc->cfg.lookahead : 0) : rc;
        if (rc == EMBER_ELIMIT) { /* the cache was smaller than one step's rows */
            CHECK_MSG(strstr(ember_errmsg(ssd), "distinct rows cached at once") != NULL, "message: %s",
                      ember_errmsg(ssd));
            ember_collection_destroy(ssd);
            free_outs(got);
            test_config_free(cc);
            continue;
        }
        CHECK_MSG(rc == EMBER_OK, "config %d: ssd run: %s", ix, ember_errmsg(ssd));
        printf("config %d: %d tables, policy %d, %lld rows cached per table, %d threads, attempt %d\n", ix,
               tc->cfg.num_tables, (int)pol, (long long)cached, threads, attempt);
        for (int s = 0; s < STEPS && rc == EMBER_OK; s++)
            CHECK_MSG(memcmp(want[s], got[s], out_bytes(tc, &st, s)) == 0, "config %d step %d: outputs differ",
                      ix, s);
        if (rc == EMBER_OK) {
            CHECK_MSG(test_tables_identical(mem, ssd, &tc->cfg), "config %d: tables differ (policy %d)", ix,
                      (int)pol);
            for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
                ember_tier_stats ts;
                CHECK(ember_table_tier_stats(ssd, t, &ts) == EMBER_OK);
                CHECK_MSG(ts.demand_loads + ts.prefetch_used <= ts.accesses && ts.resident_rows <= ts.cache_rows &&
                              ts.prefetch_used + ts.prefetch_wasted <= ts.prefetch_loads &&
                              ts.resident_rows == ts.demand_loads + ts.prefetch_loads - ts.evictions,
                          "config %d table %d: accesses %lld, loads %lld + %lld, evictions %lld, resident %lld of %lld",
                          ix, t, (long long)ts.accesses, (long long)ts.demand_loads, (long long)ts.prefetch_loads,
                          (long long)ts.evictions, (long long)ts.resident_rows, (long long)ts.cache_rows);
            }
        }
        ember_collection_destroy(ssd);
        free_outs(got);
        test_config_free(cc);
        break;
    }
    rmdir(dir);
    ember_collection_destroy(mem);
    free_outs(want);
    free_steps(&st);
    test_config_free(tc);
}

/* The store's log over many steps: a cache of a tenth of each table, so
 * dirty rows leave every step and the file fills, and compaction moves
 * live records (ssd_log.h).  After every step the outputs equal the memory
 * tier's; at the end the tables do (every row read back through the log),
 * compaction moved rows, at most two per row written back (write
 * amplification <= 3), and the file never grew past its reserved size. */
/* One run of log_compaction with a cache of 16 x `size` rows of each table:
 * EMBER_ELIMIT when a step's rows do not fit, else EMBER_OK. */
static int log_run(test_rng *r, const test_config *tc, steps *st, ember_cache_policy pol, int size, int half)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/log%d", root, half);
    mkdir(dir, 0700);
    test_config *cc = ssd_config(r, tc, dir, pol, 0);
    for (int32_t t = 0; t < cc->cfg.num_tables; t++) {
        ember_table_config *t_ = &cc->tables[t];
        int64_t k = 16 * size;
        t_->cache_bytes = ember_ssd_cache_bytes_for(k, t_->rows, test_ssd_record_bytes(t_), pol);
    }
    ember_collection *mem = NULL, *ssd = NULL;
    CHECK(ember_collection_create(&tc->cfg, &mem) == EMBER_OK);
    CHECK_MSG(ember_collection_create(&cc->cfg, &ssd) == EMBER_OK, "create: %s", ember_errmsg(NULL));
    float **o1 = alloc_outs(tc, st), **o2 = alloc_outs(tc, st);
    int64_t W = test_pooled_width(&tc->cfg), steps_run = 0, most = 0;
    int rc = mem && ssd ? EMBER_OK : EMBER_ENOMEM;
    for (int32_t t = 0; t < tc->cfg.num_tables && rc == EMBER_OK; t++) { /* every row written once: the
        records of rows the steps never use again stay live, so segments die only in part */
        int64_t n = tc->tables[t].rows * tc->tables[t].dim;
        float *x = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++)
            x[i] = test_float(r, -0.1f, 0.1f);
        CHECK(ember_table_write(mem, t, 0, tc->tables[t].rows, x) == EMBER_OK);
        CHECK_MSG(ember_table_write(ssd, t, 0, tc->tables[t].rows, x) == EMBER_OK, "write: %s", ember_errmsg(ssd));
        free(x);
    }
    for (int round = 0; round < 12 && rc == EMBER_OK; round++)
        for (int s = 0; s < STEPS && rc == EMBER_OK; s++) {
            /* a random range of rows rewritten: whole rows leave earlier segments, the rest stay live */
            int32_t t = (int32_t)test_range(r, 0, tc->cfg.num_tables);
            int64_t rows = tc->tables[t].rows, count = test_range(r, rows / 8, rows / 3);
            int64_t first = test_range(r, 0, rows - count + 1), n = count * tc->tables[t].dim;
            float *x = malloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++)
                x[i] = test_float(r, -0.1f, 0.1f);
            CHECK(ember_table_write(mem, t, first, count, x) == EMBER_OK);
            CHECK_MSG(ember_table_write(ssd, t, first, count, x) == EMBER_OK, "write: %s", ember_errmsg(ssd));
            free(x);
            CHECK(ember_forward(mem, &st->tb[s].b, o1[s], o1[s] + st->tb[s].b.batch_size * W) == EMBER_OK);
            CHECK(ember_backward(mem, st->dp[s], st->ds[s]) == EMBER_OK);
            rc = ember_forward(ssd, &st->tb[s].b, o2[s], o2[s] + st->tb[s].b.batch_size * W);
            if (rc != EMBER_OK)
                break;
            CHECK(ember_backward(ssd, st->dp[s], st->ds[s]) == EMBER_OK);
            CHECK_MSG(memcmp(o1[s], o2[s], out_bytes(tc, st, s)) == 0, "log round %d step %d: outputs differ",
                      round, s);
            for (int32_t p = 0; p < ssd->num_ptables; p++) {
                const ssd_store *store = (const ssd_store *)ssd->ptables[p].store;
                struct stat sb;
                CHECK(fstat(store->fd, &sb) == 0 && sb.st_size <= store->base.disk_bytes);
            }
            steps_run++;
        }
    if (rc == EMBER_OK) {
        CHECK_MSG(test_tables_identical(mem, ssd, &tc->cfg), "log: tables differ after %lld steps",
                  (long long)steps_run);
        for (int32_t t = 0; t < cc->cfg.num_tables; t++) {
            ember_tier_stats ts;
            CHECK(ember_table_tier_stats(ssd, t, &ts) == EMBER_OK);
            CHECK_MSG(ts.moved_rows <= 2 * ts.writes, "table %d: compaction moved %lld rows for %lld written back",
                      t, (long long)ts.moved_rows, (long long)ts.writes);
            most = ts.moved_rows > most ? ts.moved_rows : most;
        }
        CHECK_MSG(most > 0, "log: compaction never ran in %lld steps", (long long)steps_run);
        printf("log (half %d, policy %d, cache %d rows): %lld steps, up to %lld rows moved by compaction\n", half,
               (int)pol, 16 * size, (long long)steps_run, (long long)most);
    } else {
        CHECK_MSG(rc == EMBER_ELIMIT, "log: %s", ember_errmsg(ssd));
    }
    ember_collection_destroy(mem);
    ember_collection_destroy(ssd);
    rmdir(dir);
    free_outs(o1);
    free_outs(o2);
    test_config_free(cc);
    return rc;
}

/* The store's log over many steps: a small cache (16 rows, more when one
 * step's rows need it) of tables of 2000 to 3000 rows, all written once
 * first and a random range of one of them again before each step, so dirty
 * rows leave every step, the
 * file fills and compaction moves live records (ssd_log.h).  After every
 * step the outputs equal the memory tier's; at the end the tables do (every
 * row read back through the log), compaction moved rows, at most two per
 * row written back (write amplification <= 3), and the file never grew
 * past its reserved size. */
static void log_compaction(test_rng *r, int half)
{
    test_config *tc = test_config_random(r, 2, 3, 2000, 3000);
    if (half)
        half_precisions(r, tc);
    steps st;
    make_steps(r, tc, &st, 0);
    ember_cache_policy pol = (ember_cache_policy)test_range(r, 1, 4);
    int size = 1;
    while (size < 256 && log_run(r, tc, &st, pol, size, half) == EMBER_ELIMIT)
        size *= 2;
    CHECK_MSG(size < 256, "log: no cache up to 2048 rows held one step");
    free_steps(&st);
    test_config_free(tc);
}

/* A small fixed config for the checkpoint and fault tests; half: fp16
 * rows on the row-wise Adagrad table, bf16 rows and fp16 state on the Adam
 * one. */
static test_config *fixed_config(test_rng *r, int half)
{
    test_config *tc = test_config_new(2, 2);
    for (int32_t t = 0; t < 2; t++) {
        tc->tables[t].rows = 2000;
        tc->tables[t].dim = 8;
        tc->tables[t].optimizer = test_optimizer_random(r, t ? EMBER_OPT_ADAM : EMBER_OPT_ROWWISE_ADAGRAD);
        tc->features[t].table = t;
    }
    if (half) {
        tc->tables[0].precision = EMBER_PRECISION_FP16;
        tc->tables[1].precision = EMBER_PRECISION_BF16;
        tc->tables[1].state_precision = EMBER_PRECISION_FP16;
    }
    tc->cfg.seed = test_next(r);
    tc->cfg.threads = 1;
    return tc;
}

static void checkpoints(test_rng *r, int half)
{
    test_config *tc = fixed_config(r, half);
    steps st;
    make_steps(r, tc, &st, 1);
    char dir[300], ck1[300], ck2[300];
    snprintf(dir, sizeof dir, "%s/ck", root);
    snprintf(ck1, sizeof ck1, "%s/from-ssd", root);
    snprintf(ck2, sizeof ck2, "%s/from-mem", root);
    mkdir(dir, 0700);
    test_config *cc = ssd_config(r, tc, dir, EMBER_CACHE_LRU, 900);
    ember_collection *mem = NULL, *ssd = NULL, *mem2 = NULL, *ssd2 = NULL;
    CHECK(ember_collection_create(&tc->cfg, &mem) == EMBER_OK);
    CHECK_MSG(ember_collection_create(&cc->cfg, &ssd) == EMBER_OK, "%s", ember_errmsg(NULL));
    float **o1 = alloc_outs(tc, &st), **o2 = alloc_outs(tc, &st);
    CHECK(run(mem, tc, &st, o1, 0) == EMBER_OK);
    CHECK(run(ssd, tc, &st, o2, 0) == EMBER_OK);
    ember_save_options so = {0};
    so.step = 5;
    CHECK_MSG(ember_save(ssd, ck1, &so) == EMBER_OK, "save from ssd: %s", ember_errmsg(ssd));
    CHECK_MSG(ember_save(mem, ck2, &so) == EMBER_OK, "save from memory: %s", ember_errmsg(mem));
    /* SSD -> memory and memory -> SSD */
    ember_checkpoint *a = NULL, *b = NULL;
    CHECK(ember_checkpoint_open(ck1, &a) == EMBER_OK);
    CHECK(ember_checkpoint_open(ck2, &b) == EMBER_OK);
    CHECK(ember_collection_create(&tc->cfg, &mem2) == EMBER_OK);
    char dir2[300];
    snprintf(dir2, sizeof dir2, "%s/ck2", root);
    mkdir(dir2, 0700);
    test_config *cc2 = ssd_config(r, tc, dir2, EMBER_CACHE_LFU, 900);
    CHECK(ember_collection_create(&cc2->cfg, &ssd2) == EMBER_OK);
    CHECK_MSG(ember_load(mem2, a) == EMBER_OK, "load into memory: %s", ember_errmsg(mem2));
    CHECK_MSG(ember_load(ssd2, b) == EMBER_OK, "load into ssd: %s", ember_errmsg(ssd2));
    CHECK_MSG(test_tables_identical(mem, mem2, &tc->cfg), "SSD checkpoint loaded into memory differs");
    CHECK_MSG(test_tables_identical(mem, ssd2, &tc->cfg), "memory checkpoint loaded into SSD differs");
    /* both go on training identically */
    CHECK(run(mem2, tc, &st, o1, 0) == EMBER_OK);
    CHECK(run(ssd2, tc, &st, o2, 0) == EMBER_OK);
    CHECK_MSG(test_tables_identical(mem2, ssd2, &tc->cfg), "training after loading differs between tiers");
    ember_checkpoint_close(a);
    ember_checkpoint_close(b);
    ember_collection_destroy(mem);
    ember_collection_destroy(ssd);
    ember_collection_destroy(mem2);
    ember_collection_destroy(ssd2);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s' '%s'", ck1, ck2, dir, dir2);
    CHECK(system(cmd) == 0);
    free_outs(o1);
    free_outs(o2);
    free_steps(&st);
    test_config_free(cc);
    test_config_free(cc2);
    test_config_free(tc);
}

/* Injected I/O failures: the failing call names table and file; a retry
 * without the fault gives exactly the memory tier's results, and the last
 * checkpoint stays loadable. */
static void faults(test_rng *r, int half)
{
    test_config *tc = fixed_config(r, half);
    steps st;
    make_steps(r, tc, &st, 1);
    char dir[300], ck[300];
    snprintf(dir, sizeof dir, "%s/f", root);
    snprintf(ck, sizeof ck, "%s/f-ck", root);
    mkdir(dir, 0700);
    test_config *cc = ssd_config(r, tc, dir, EMBER_CACHE_LRU, 500); /* evicts dirty rows from step 1 */
    ember_collection *mem = NULL, *ssd = NULL;
    CHECK(ember_collection_create(&tc->cfg, &mem) == EMBER_OK);
    CHECK(ember_collection_create(&cc->cfg, &ssd) == EMBER_OK);
    float **o1 = alloc_outs(tc, &st), **o2 = alloc_outs(tc, &st);
    int64_t W = test_pooled_width(&tc->cfg);
    ember_store *s0 = ssd->ptables[ssd->tables[0].ptable].store;
    ember_save_options so = {0};
    int faulted = 0;
    for (int s = 0; s < STEPS; s++) {
        CHECK(ember_forward(mem, &st.tb[s].b, o1[s], o1[s] + st.tb[s].b.batch_size * W) == EMBER_OK);
        CHECK(ember_backward(mem, st.dp[s], st.ds[s]) == EMBER_OK);
        for (int fault = 0; fault < 2 && s >= 1 && s <= 3; fault++) {
            ember_store_ssd_inject_failure(s0, 1, fault ? EIO : ENOSPC, !fault);
            int rc = ember_forward(ssd, &st.tb[s].b, o2[s], o2[s] + st.tb[s].b.batch_size * W);
            if (rc != EMBER_OK) {
                faulted++;
                CHECK_MSG(rc == EMBER_EIO && strstr(ember_errmsg(ssd), ".ember-store") &&
                              strstr(ember_errmsg(ssd), "table '"),
                          "step %d fault %d: status %d, message %s", s, fault, rc, ember_errmsg(ssd));
                CHECK(ember_backward(ssd, st.dp[s], st.ds[s]) == EMBER_ESTATE);
            } else {
                CHECK(ember_backward(ssd, st.dp[s], st.ds[s]) == EMBER_OK);
                break; /* this step needed no I/O of that kind */
            }
        }
        ember_store_ssd_inject_failure(s0, 0, 0, 0);
        ember_stats before;
        ember_collection_stats(ssd, &before);
        if (before.steps == s) { /* the step did not run yet: run it cleanly */
            CHECK_MSG(ember_forward(ssd, &st.tb[s].b, o2[s], o2[s] + st.tb[s].b.batch_size * W) == EMBER_OK,
                      "step %d after the fault: %s", s, ember_errmsg(ssd));
            CHECK(ember_backward(ssd, st.dp[s], st.ds[s]) == EMBER_OK);
        }
        CHECK_MSG(memcmp(o1[s], o2[s], out_bytes(tc, &st, s)) == 0, "step %d: outputs differ after faults", s);
        CHECK_MSG(test_tables_identical(mem, ssd, &tc->cfg), "step %d: tables differ after the faults", s);
        if (s == 3) {
            so.step = 3;
            CHECK(ember_save(ssd, ck, &so) == EMBER_OK);
        }
    }
    CHECK_MSG(test_tables_identical(mem, ssd, &tc->cfg), "tables differ after injected faults");
    ember_tier_stats ts;
    ember_table_tier_stats(ssd, 0, &ts);
    CHECK_MSG(faulted >= 2, "only %d injected faults hit a step (table 0: %lld evictions, %lld writes, %lld loads)",
              faulted, (long long)ts.evictions, (long long)ts.writes, (long long)ts.demand_loads);
    /* a write-back failure at save: the save fails, the older checkpoint stays */
    ember_store_ssd_inject_failure(s0, 1, ENOSPC, 1);
    so.step = 5;
    int rc = ember_save(ssd, ck, &so);
    CHECK_MSG(rc == EMBER_EIO && strstr(ember_errmsg(ssd), "write-back"), "save with a failing flush: %d %s", rc,
              ember_errmsg(ssd));
    ember_store_ssd_inject_failure(s0, 0, 0, 0);
    ember_checkpoint *k = NULL;
    CHECK(ember_checkpoint_open(ck, &k) == EMBER_OK && ember_checkpoint_step(k) == 3);
    ember_checkpoint_close(k);
    CHECK_MSG(test_tables_identical(mem, ssd, &tc->cfg), "tables changed by a failed save");
    ember_collection_destroy(mem);
    ember_collection_destroy(ssd);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", ck, dir);
    CHECK(system(cmd) == 0);
    free_outs(o1);
    free_outs(o2);
    free_steps(&st);
    test_config_free(cc);
    test_config_free(tc);
}

/* Debug checks name the table's row, not the cache slot that holds it. */
static void nan_names_row(test_rng *r)
{
    test_config *tc = fixed_config(r, 0);
    tc->cfg.debug_checks = 1;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/nan", root);
    mkdir(dir, 0700);
    test_config *cc = ssd_config(r, tc, dir, EMBER_CACHE_LRU, 900);
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_OK);
    int64_t row = test_range(r, 1000, 2000); /* far from slot numbers of a fresh cache */
    float bad[8];
    for (int k = 0; k < 8; k++)
        bad[k] = k == 3 ? NAN : 0.5f;
    CHECK(ember_table_write(c, 0, row, 1, bad) == EMBER_OK);
    int32_t lengths[2] = {3, 0};
    int64_t ids[3] = {5, row, 7};
    ember_batch b = {1, 2, lengths, ids, NULL, 3};
    float out[16];
    int rc = ember_forward(c, &b, out, NULL);
    char want[64];
    snprintf(want, sizeof want, "row %lld holds a non-finite value", (long long)row);
    CHECK_MSG(rc == EMBER_ENUMERIC && strstr(ember_errmsg(c), want), "status %d: %s (want \"%s\")", rc,
              ember_errmsg(c), want);
    ember_collection_destroy(c);
    rmdir(dir);
    test_config_free(cc);
    test_config_free(tc);
}

static void bad_setups(test_rng *r)
{
    test_config *tc = fixed_config(r, 0);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/b", root);
    mkdir(dir, 0700);
    ember_collection *c = NULL, *d = NULL;
    test_config *cc = ssd_config(r, tc, "/nonexistent-ember-folder", EMBER_CACHE_LRU, 100);
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "/nonexistent-ember-folder does not exist"), "%s", ember_errmsg(NULL));
    test_config_free(cc);
    cc = ssd_config(r, tc, "/proc/self", EMBER_CACHE_LRU, 100);
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "cannot create the store file /proc/self/"), "%s", ember_errmsg(NULL));
    test_config_free(cc);
    cc = ssd_config(r, tc, dir, EMBER_CACHE_LRU, 100);
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_OK);
    CHECK(ember_collection_create(&cc->cfg, &d) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "is in use by another collection or process"), "%s", ember_errmsg(NULL));
    ember_collection_destroy(c);
    CHECK_MSG(ember_collection_create(&cc->cfg, &d) == EMBER_OK, "reuse after destroy: %s", ember_errmsg(NULL));
    ember_collection_destroy(d);
    cc->tables[0].cache_bytes = 10;
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_EINVAL);
    CHECK_MSG(strstr(ember_errmsg(NULL), "holds no row"), "%s", ember_errmsg(NULL));
    cc->tables[0].rows = 4000000000LL;
    cc->tables[0].dim = 1024;
    cc->tables[0].cache_bytes = (1 << 20) + ember_ssd_index_bytes(cc->tables[0].rows,
                                                                  test_ssd_record_bytes(&cc->tables[0])); /* 16 GB of it index */
    cc->cfg.stack_tables = 0;
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "bytes free; the table needs"), "%s", ember_errmsg(NULL));
    test_config_free(cc);
    /* the size rule and the budget rule choose the SSD tier */
    cc = test_config_copy(tc);
    cc->cfg.ssd_dir = dir;
    cc->cfg.ssd_min_bytes = 2000 * 8 * 4; /* table 0's rows alone: row-wise Adagrad adds state */
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_OK);
    ember_tier_stats ts;
    CHECK(ember_table_tier_stats(c, 0, &ts) == EMBER_OK && ts.cache_rows == 2000);
    ember_collection_destroy(c);
    cc->cfg.ssd_min_bytes = 0;
    cc->cfg.memory_budget = 200000; /* table 1 (Adam, 192 kB) must go */
    cc->cfg.ssd_cache_bytes = 50000;
    CHECK(ember_collection_create(&cc->cfg, &c) == EMBER_OK);
    CHECK(ember_table_tier_stats(c, 1, &ts) == EMBER_OK);
    CHECK(ember_table_tier_stats(c, 0, &ts) == EMBER_EINVAL);
    ember_collection_destroy(c);
    test_config_free(cc);
    rmdir(dir);
    test_config_free(tc);
}

/* The cache's byte rule (docs/tiers.md, "The cache"), written out here
 * from the doc: a cached row costs 4 (dim + state) + 38 bytes (2 bytes an
 * element of half rows or half state), + 8 for LFU and + 16 for lookahead, and the file's index costs 4 bytes
 * a row and 12 a segment, all out of cache_bytes.  For k = 1..4 and 7
 * rows: the smallest cache_bytes that hold k rows, one byte less (k - 1),
 * and the largest that holds k (k + 1 rows' bytes less one); the DRAM the
 * collection reports (rows, state, cache bookkeeping) is what the rule
 * charges, never more than cache_bytes.  Tables of 10, 64, 65 and 1000
 * rows (an index of 4 bytes a row and 12 a segment of the file), dims 1 and 4, SGD and Adagrad
 * (state dim), fp32, and fp16 rows with bf16 state. */
static void cache_bytes_rule(void)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/cb", root);
    mkdir(dir, 0700);
    static const int64_t rows_of[] = {10, 64, 65, 1000};
    static const ember_cache_policy pols[] = {EMBER_CACHE_LRU, EMBER_CACHE_LFU, EMBER_CACHE_LOOKAHEAD};
    static const int64_t extra[] = {0, 8, 16};
    int cases = 0;
    for (int ri = 0; ri < 4; ri++)
        for (int pi = 0; pi < 3; pi++)
            for (int32_t dim = 1; dim <= 4; dim += 3)
                for (int opt = 0; opt < 4; opt++) {
                    int64_t rows = rows_of[ri];
                    int32_t sf = opt % 2 ? dim : 0, half = opt >= 2, eb = half ? 2 : 4;
                    ember_ssd_layout lay;
                    CHECK(ember_ssd_layout_of(rows, eb * (dim + sf), &lay) == 0);
                    int64_t per = eb * (dim + sf) + 38 + extra[pi], bitmap = 4 * rows + 12 * lay.max_segs;
                    for (int64_t k = 1; k <= 7; k += k < 4 ? 1 : 3) {
                        int64_t exact = k * per + bitmap;
                        int64_t tries[3][2] = {{exact, k}, {exact - 1, k - 1}, {exact + per - 1, k}};
                        for (int j = 0; j < 3; j++) {
                            test_config *tc = test_config_new(1, 1);
                            ember_table_config *t = &tc->tables[0];
                            t->rows = rows;
                            t->dim = dim;
                            t->optimizer = ember_optimizer_default(opt % 2 ? EMBER_OPT_ADAGRAD : EMBER_OPT_SGD);
                            if (half) {
                                t->precision = EMBER_PRECISION_FP16;
                                t->state_precision = sf ? EMBER_PRECISION_BF16 : EMBER_PRECISION_FP32;
                            }
                            t->storage = EMBER_STORAGE_SSD;
                            t->cache_policy = pols[pi];
                            t->cache_bytes = tries[j][0];
                            t->path = dir;
                            tc->cfg.io_threads = 1;
                            ember_collection *c = NULL;
                            int st = ember_collection_create(&tc->cfg, &c);
                            ember_tier_stats ts = {0};
                            ember_memory mem = {0};
                            if (st == EMBER_OK) {
                                ember_table_tier_stats(c, 0, &ts);
                                ember_collection_memory(c, &mem);
                            }
                            int64_t want = tries[j][1], dram = mem.row_bytes + mem.state_bytes + mem.cache_meta_bytes;
                            int ok = want == 0 ? st == EMBER_EINVAL && strstr(ember_errmsg(NULL), "holds no row")
                                               : st == EMBER_OK && ts.cache_rows == want &&
                                                     dram == want * per + bitmap && dram <= t->cache_bytes;
                            CHECK_MSG(ok,
                                      "rows %lld dim %d %s%s policy %d: cache_bytes %lld (%lld rows of %lld bytes + "
                                      "%lld of index%s) holds %lld rows, %lld bytes of DRAM (status %d); want %lld",
                                      (long long)rows, dim, opt % 2 ? "adagrad" : "sgd", half ? " half" : "",
                                      (int)pols[pi],
                                      (long long)t->cache_bytes, (long long)k, (long long)per, (long long)bitmap,
                                      j == 1 ? ", less one" : j == 2 ? ", plus a row less one" : "",
                                      (long long)ts.cache_rows, (long long)dram, st, (long long)want);
                            cases++;
                            ember_collection_destroy(c);
                            test_config_free(tc);
                        }
                    }
                }
    printf("cache bytes rule: %d caches\n", cases);
    rmdir(dir);
}

/* A row's record holds its values and state as the table does (docs/tiers.md,
 * "The store file"): dim 128 fp16 rows with row-wise Adagrad's one float take
 * 256 + 4 bytes (fp32 rows: 516); dim 64 Adam with bf16 rows and state,
 * 128 + 256.  Records are packed in segments of about 1 MiB (whole 4 KiB
 * blocks, records then a footer of their rows), and the file has room for
 * the rows and half as many again, whatever the filesystem. */
static void record_stride(void)
{
    CHECK(ember_ssd_record_bytes(128, 1, 1, 0) == 260 && ember_ssd_record_bytes(128, 1, 0, 0) == 516);
    CHECK(ember_ssd_record_bytes(64, 128, 1, 1) == 384);
    static const int64_t sizes[][2] = {{1000, 260}, {52000000, 516}, {10, 4100}, {1 << 20, 260}, {3, 8}};
    for (int i = 0; i < 5; i++) {
        ember_ssd_layout l;
        int64_t rows = sizes[i][0], rec = sizes[i][1];
        CHECK(ember_ssd_layout_of(rows, rec, &l) == 0);
        CHECK_MSG(l.seg_bytes % 4096 == 0 && l.data_bytes % 4096 == 0 && l.data_bytes >= l.seg_recs * rec &&
                      l.seg_bytes - l.data_bytes >= 4 * l.seg_recs && l.seg_recs >= 8 &&
                      (l.seg_recs * rec <= (1 << 20) || l.seg_recs == 8) &&
                      2 * (l.max_segs - 5) * l.seg_recs >= 3 * rows &&
                      ember_ssd_file_bytes(rows, rec) == 4096 + l.max_segs * l.seg_bytes,
                  "layout of %lld rows x %lld bytes: %lld records a segment of %lld bytes, %lld segments", (long long)rows,
                  (long long)rec, (long long)l.seg_recs, (long long)l.seg_bytes, (long long)l.max_segs);
    }
    char dir[300];
    snprintf(dir, sizeof dir, "%s/stride", root);
    mkdir(dir, 0700);
    static const struct {
        ember_row_precision rows, state;
        ember_optimizer_kind opt;
        int32_t dim;
        int64_t rec;
    } cases[] = {
        {EMBER_PRECISION_FP16, EMBER_PRECISION_FP32, EMBER_OPT_ROWWISE_ADAGRAD, 128, 260},
        {EMBER_PRECISION_FP32, EMBER_PRECISION_FP32, EMBER_OPT_ROWWISE_ADAGRAD, 128, 516},
        {EMBER_PRECISION_BF16, EMBER_PRECISION_BF16, EMBER_OPT_ADAM, 64, 384},
        {EMBER_PRECISION_FP32, EMBER_PRECISION_FP16, EMBER_OPT_ADAGRAD, 100, 600},
    };
    for (int i = 0; i < 4; i++) {
        test_config *tc = test_config_new(1, 1);
        ember_table_config *t = &tc->tables[0];
        t->rows = 1000;
        t->dim = cases[i].dim;
        t->optimizer = ember_optimizer_default(cases[i].opt);
        t->precision = cases[i].rows;
        t->state_precision = cases[i].state;
        t->storage = EMBER_STORAGE_SSD;
        t->cache_bytes = 1 << 20;
        t->path = dir;
        tc->cfg.io_threads = 1;
        ember_collection *c = NULL;
        CHECK_MSG(ember_collection_create(&tc->cfg, &c) == EMBER_OK, "%s", ember_errmsg(NULL));
        if (c) {
            const ssd_store *s = (const ssd_store *)c->ptables[0].store;
            ember_memory mem;
            ember_collection_memory(c, &mem);
            int64_t want = ember_ssd_file_bytes(1000, cases[i].rec);
            CHECK_MSG(s->rec_bytes == cases[i].rec && mem.disk_bytes == want,
                      "case %d: record %lld bytes, store file %lld bytes (want %lld, O_DIRECT %d)", i,
                      (long long)s->rec_bytes, (long long)mem.disk_bytes, (long long)want, s->direct);
        }
        ember_collection_destroy(c);
        test_config_free(tc);
    }
    rmdir(dir);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    test_rng r = {seed};
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/ember-test-tier-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    for (int i = 0; i < 24; i++)
        one_config(&r, i);
    for (int half = 0; half < 2; half++) {
        checkpoints(&r, half);
        faults(&r, half);
        log_compaction(&r, half);
    }
    nan_names_row(&r);
    bad_setups(&r);
    cache_bytes_rule();
    record_stride();
    rmdir(root);
    return check_report("test_tier");
}
