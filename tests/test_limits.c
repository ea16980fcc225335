/*
 * test_limits.c: per-partition counts and limit policies (ember.h on
 * ember_table_config limits and ember_partition_counts) against
 * the naive reference in src/ref/ref_limits.c, on fresh random inputs.
 *
 *   counts     ember_partition_counts == ref_partition_counts exactly, shards
 *              1, 2, 3, 5, 8, stacking on and off, duplicate-heavy batches;
 *              an invalid id is EMBER_EINPUT under either bounds policy.
 *   error      a limit one below the observed maximum is EMBER_ELIMIT whose
 *              message names the table, an overflowing shard with its count,
 *              and the allowed count; tables unchanged; the observed maximum
 *              itself passes.
 *   drop       ember_forward == ref_forward with ref_limits_apply's keep mask
 *              (rtol 1e-5, atol 1e-6, as test_forward), stats.dropped_limit ==
 *              ids with keep 0; then backward against ref_backward (rtol 1e-5,
 *              atol 5e-6; 1e-4 for duplicate-heavy, as test_backward).  A third
 *              of the trials add out-of-range ids under bounds = drop: they are
 *              not routed, so no limit counts them; stats.dropped_bounds checked.
 *   minibatch  outputs and every table and state after backward are
 *              bit-identical (memcmp) to the same collection without limits;
 *              stats.minibatches == the reference's count; the reference's
 *              split is checked to be greedy-maximal with ref_partition_counts.
 *   mixed      minibatch + drop + error tables: error tables are checked per
 *              mini-batch (a limit the whole batch breaks but every mini-batch
 *              meets passes), drop per mini-batch (against the reference).
 *   single     a sample that alone overflows a minibatch table: EMBER_ELIMIT
 *              naming that sample.
 *   dedup      cfg.dedup = 1 vs 0: outputs within rtol 1e-5 / atol 1e-6,
 *              tables within rtol 1e-4 / atol 5e-6 after two steps.
 * Seed: argv[1] or EMBER_TEST_SEED, else the clock; printed.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define RTOL 1e-5
#define ATOL 1e-6

/* ------------------------------------------------------------- helpers */

typedef struct counts {
    int64_t *ids, *unique; /* [T * S] */
} counts;

static void ref_counts(const ember_collection_config *cfg, const ember_batch *b, counts *c)
{
    size_t cells = (size_t)cfg->num_tables * (size_t)cfg->num_shards;
    c->ids = calloc(cells + 1, sizeof *c->ids);
    c->unique = calloc(cells + 1, sizeof *c->unique);
    ref_partition_counts(cfg, b, c->ids, c->unique);
}

static void ref_counts_range(const ember_collection_config *cfg, const ember_batch *b,
                             int32_t lo, int32_t hi, counts *c)
{
    test_batch sb;
    test_sub_batch(b, lo, hi, &sb);
    ref_counts(cfg, &sb.b, c);
    test_batch_free(&sb);
}

static void counts_free(counts *c)
{
    free(c->ids);
    free(c->unique);
}

static int64_t max_over_shards(const ember_collection_config *cfg, const int64_t *x, int32_t t)
{
    int64_t m = 0;
    for (int32_t s = 0; s < cfg->num_shards; s++)
        if (x[(int64_t)t * cfg->num_shards + s] > m)
            m = x[(int64_t)t * cfg->num_shards + s];
    return m;
}

/* Does table t meet its own limits in every shard of c? */
static int table_fits(const ember_collection_config *cfg, const counts *c, int32_t t)
{
    const ember_table_config *tc = &cfg->tables[t];
    for (int32_t s = 0; s < cfg->num_shards; s++) {
        int64_t k = (int64_t)t * cfg->num_shards + s;
        if (tc->max_ids_per_partition && c->ids[k] > tc->max_ids_per_partition)
            return 0;
        if (tc->max_unique_ids_per_partition && c->unique[k] > tc->max_unique_ids_per_partition)
            return 0;
    }
    return 1;
}

/* For a failure report: the config and (small) batch, to rebuild a case. */
static void dump_case(const ember_collection_config *cfg, const ember_batch *b)
{
    fprintf(stderr, "  case: shards %d stack %d dedup %d; tables:", (int)cfg->num_shards,
            cfg->stack_tables, cfg->dedup);
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        fprintf(stderr, " [%s rows %lld dim %d opt %d lim %lld/%lld pol %d]", tc->name,
                (long long)tc->rows, tc->dim, tc->optimizer.kind,
                (long long)tc->max_ids_per_partition, (long long)tc->max_unique_ids_per_partition,
                tc->limit_policy);
    }
    fprintf(stderr, "\n  features:");
    for (int32_t f = 0; f < cfg->num_features; f++)
        fprintf(stderr, " [t%d c%d]", cfg->features[f].table, cfg->features[f].combiner);
    fprintf(stderr, "\n  batch B %d ids %lld%s", b->batch_size, (long long)b->num_ids,
            b->weights ? " weighted" : "");
    if (b->num_ids <= 200) {
        int64_t k = 0;
        for (int32_t f = 0; f < b->num_features; f++) {
            fprintf(stderr, "\n   f%d:", f);
            for (int32_t s = 0; s < b->batch_size; s++) {
                fprintf(stderr, " [");
                for (int32_t i = 0; i < b->lengths[(int64_t)f * b->batch_size + s]; i++, k++)
                    fprintf(stderr, "%s%lld", i ? " " : "", (long long)b->ids[k]);
                fprintf(stderr, "]");
            }
        }
    }
    fprintf(stderr, "\n");
}

static void dump_counts(const char *what, const int64_t *x, int64_t n)
{
    fprintf(stderr, "  %s:", what);
    for (int64_t i = 0; i < n; i++)
        fprintf(stderr, " %lld", (long long)x[i]);
    fprintf(stderr, "\n");
}

/* All integers written in msg (digits runs), at most cap. */
static int msg_ints(const char *msg, int64_t *out, int cap)
{
    int n = 0;
    for (const char *p = msg; *p && n < cap;) {
        if (isdigit((unsigned char)*p)) {
            out[n++] = strtoll(p, (char **)&p, 10);
        } else {
            p++;
        }
    }
    return n;
}

static int has_int(const int64_t *v, int n, int64_t x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* Table names are "table<i>": the name must appear as a whole word. */
static int msg_names_table(const char *msg, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = strstr(msg, name); p; p = strstr(p + 1, name))
        if (!isdigit((unsigned char)p[len]))
            return 1;
    return 0;
}

/* A config whose tables often stack: all tables share dim and optimizer
 * half the time, rows not multiples of the shard counts. */
static test_config *random_config(test_rng *r, int max_tables, int max_features, int64_t min_rows,
                                  int64_t max_rows)
{
    test_config *tc = test_config_random(r, max_tables, max_features, min_rows, max_rows);
    if (test_range(r, 0, 2)) {
        for (int32_t t = 1; t < tc->cfg.num_tables; t++) {
            tc->tables[t].dim = tc->tables[0].dim;
            tc->tables[t].optimizer = tc->tables[0].optimizer;
            test_init_for_optimizer(&tc->tables[t]);
        }
    }
    for (int32_t t = 0; t < tc->cfg.num_tables; t++)
        if (tc->tables[t].dim > 64)
            tc->tables[t].dim = 17; /* keep the tests fast */
    tc->cfg.bounds = EMBER_BOUNDS_ERROR;
    return tc;
}

static test_batch_opts random_opts(test_rng *r, int32_t max_b, int32_t max_len)
{
    test_batch_opts o = test_batch_opts_default();
    o.batch_size = (int32_t)test_range(r, 1, max_b + 1);
    o.max_len = (int32_t)test_range(r, 0, max_len + 1);
    o.empty_frac = test_range(r, 0, 3) ? 0.0 : 0.3;
    int kind = (int)test_range(r, 0, 3);
    o.dup_heavy = kind == 0;
    o.id_range = kind == 1 ? test_range(r, 2, 40) : 0;
    o.weighted = (int)test_range(r, 0, 2);
    return o;
}

static ember_collection *create(const ember_collection_config *cfg)
{
    ember_collection *c = NULL;
    int rc = ember_collection_create(cfg, &c);
    CHECK_MSG(rc == EMBER_OK, "create: %s: %s", ember_status_str(rc), ember_errmsg(NULL));
    return c;
}

/* Outputs of one forward; sizes from the config. */
typedef struct outputs {
    float *pooled, *seq;
    int64_t np, ns;
} outputs;

static void outputs_alloc(const ember_collection_config *cfg, const ember_batch *b, outputs *o)
{
    o->np = (int64_t)b->batch_size * test_pooled_width(cfg);
    o->ns = test_sequence_size(cfg, b);
    o->pooled = calloc((size_t)o->np + 1, sizeof *o->pooled);
    o->seq = calloc((size_t)o->ns + 1, sizeof *o->seq);
}

static void outputs_free(outputs *o)
{
    free(o->pooled);
    free(o->seq);
}

/* ---------------------------------------------------------------- tests */

static void test_counts(test_rng *r)
{
    static const int32_t shards[] = {1, 2, 3, 5, 8};
    for (int trial = 0; trial < 40; trial++) {
        test_config *tc = random_config(r, 4, 6, 1, 300);
        test_batch_opts bo = random_opts(r, 24, 8);
        test_batch tb;
        test_batch_make(r, &tc->cfg, &bo, &tb);
        int dumped = 0;
        for (int si = 0; si < 5; si++)
            for (int stack = 0; stack < 2; stack++) {
                tc->cfg.num_shards = shards[si];
                tc->cfg.stack_tables = stack;
                ember_collection *c = create(&tc->cfg);
                if (!c)
                    continue;
                size_t cells = (size_t)tc->cfg.num_tables * (size_t)shards[si];
                int64_t *ids = calloc(cells, sizeof *ids), *uq = calloc(cells, sizeof *uq);
                counts want;
                ref_counts(&tc->cfg, &tb.b, &want);
                int rc = ember_partition_counts(c, &tb.b, ids, uq);
                CHECK_MSG(rc == EMBER_OK && !memcmp(ids, want.ids, cells * sizeof *ids) &&
                              !memcmp(uq, want.unique, cells * sizeof *uq),
                          "trial %d shards %d stack %d: rc %d (%s)", trial, shards[si], stack, rc,
                          rc ? ember_errmsg(c) : "counts differ");
                if (rc == EMBER_OK && !dumped && (memcmp(ids, want.ids, cells * sizeof *ids) ||
                                                  memcmp(uq, want.unique, cells * sizeof *uq))) {
                    dumped = 1; /* once per batch */
                    dump_case(&tc->cfg, &tb.b);
                    dump_counts("ids    got ", ids, (int64_t)cells);
                    dump_counts("ids    want", want.ids, (int64_t)cells);
                    dump_counts("unique got ", uq, (int64_t)cells);
                    dump_counts("unique want", want.unique, (int64_t)cells);
                }
                /* an invalid id is an error whatever the bounds policy */
                if (trial % 4 == 0 && tb.b.num_ids > 0) {
                    int64_t k = test_range(r, 0, tb.b.num_ids), saved = tb.ids[k];
                    tb.ids[k] = test_range(r, 0, 2) ? -1 : 1000000;
                    rc = ember_partition_counts(c, &tb.b, ids, uq);
                    CHECK_MSG(rc == EMBER_EINPUT, "invalid id: rc %d", rc);
                    tb.ids[k] = saved;
                }
                counts_free(&want);
                free(ids);
                free(uq);
                ember_collection_destroy(c);
            }
        /* the same under bounds = drop */
        if (tb.b.num_ids > 0) {
            tc->cfg.bounds = EMBER_BOUNDS_DROP;
            ember_collection *c = create(&tc->cfg);
            if (c) {
                size_t cells = (size_t)tc->cfg.num_tables * (size_t)tc->cfg.num_shards;
                int64_t *ids = calloc(cells, sizeof *ids), *uq = calloc(cells, sizeof *uq);
                tb.ids[0] = -5;
                CHECK(ember_partition_counts(c, &tb.b, ids, uq) == EMBER_EINPUT);
                free(ids);
                free(uq);
                ember_collection_destroy(c);
            }
        }
        test_batch_free(&tb);
        test_config_free(tc);
    }
}

static void test_error(test_rng *r)
{
    for (int trial = 0; trial < 40; trial++) {
        test_config *tc = random_config(r, 3, 5, 1, 200);
        test_batch_opts bo = random_opts(r, 24, 8);
        test_batch tb;
        test_batch_make(r, &tc->cfg, &bo, &tb);
        counts obs;
        ref_counts(&tc->cfg, &tb.b, &obs);
        int32_t t = (int32_t)test_range(r, 0, tc->cfg.num_tables);
        int unique_kind = (int)test_range(r, 0, 2);
        int64_t observed = max_over_shards(&tc->cfg, unique_kind ? obs.unique : obs.ids, t);
        if (observed < 1) { /* nothing to overflow */
            counts_free(&obs);
            test_batch_free(&tb);
            test_config_free(tc);
            continue;
        }
        int64_t allowed = observed - 1 > 0 ? observed - 1 : 0;
        if (allowed == 0) { /* 0 means unlimited: use the other kind of limit */
            counts_free(&obs);
            test_batch_free(&tb);
            test_config_free(tc);
            continue;
        }
        tc->tables[t].limit_policy = EMBER_LIMIT_ERROR;
        if (unique_kind)
            tc->tables[t].max_unique_ids_per_partition = allowed;
        else
            tc->tables[t].max_ids_per_partition = allowed;
        ember_collection *c = create(&tc->cfg);
        if (c) {
            outputs out;
            outputs_alloc(&tc->cfg, &tb.b, &out);
            float *before[TEST_MAX_TABLES];
            for (int32_t k = 0; k < tc->cfg.num_tables; k++)
                before[k] = test_read_table(c, &tc->cfg, k, 0);
            int rc = ember_forward(c, &tb.b, out.pooled, out.seq);
            const char *msg = ember_errmsg(c);
            int64_t ints[64];
            int ni = msg_ints(msg, ints, 64);
            int names_cell = 0;
            for (int32_t s = 0; s < tc->cfg.num_shards; s++) {
                int64_t v = (unique_kind ? obs.unique : obs.ids)[(int64_t)t * tc->cfg.num_shards +
                                                               s];
                if (v > allowed && has_int(ints, ni, s) && has_int(ints, ni, v))
                    names_cell = 1;
            }
            CHECK_MSG(rc == EMBER_ELIMIT && msg_names_table(msg, tc->tables[t].name) &&
                          strstr(msg, "shard") && names_cell && has_int(ints, ni, allowed),
                      "trial %d: %s limit %lld on %s (observed %lld): rc %d, message: %s", trial,
                      unique_kind ? "unique" : "ids", (long long)allowed, tc->tables[t].name,
                      (long long)observed, rc, msg);
            for (int32_t k = 0; k < tc->cfg.num_tables; k++) {
                float *after = test_read_table(c, &tc->cfg, k, 0);
                CHECK(before[k] && after &&
                      !memcmp(before[k], after,
                              (size_t)(tc->tables[k].rows * tc->tables[k].dim) * sizeof(float)));
                free(before[k]);
                free(after);
            }
            ember_stats st;
            ember_collection_stats(c, &st);
            CHECK(st.steps == 0);
            outputs_free(&out);
            ember_collection_destroy(c);
        }
        /* the observed maximum itself is allowed */
        if (unique_kind)
            tc->tables[t].max_unique_ids_per_partition = observed;
        else
            tc->tables[t].max_ids_per_partition = observed;
        c = create(&tc->cfg);
        if (c) {
            outputs out;
            outputs_alloc(&tc->cfg, &tb.b, &out);
            int rc = ember_forward(c, &tb.b, out.pooled, out.seq);
            CHECK_MSG(rc == EMBER_OK, "trial %d: limit = observed %lld: rc %d %s", trial,
                      (long long)observed, rc, ember_errmsg(c));
            outputs_free(&out);
            ember_collection_destroy(c);
        }
        counts_free(&obs);
        test_batch_free(&tb);
        test_config_free(tc);
    }
}

/* Random limits in [1, observed] for table t under policy p; 0 = unlimited
 * sometimes.  Returns 1 when some limit was set. */
static int random_limits(test_rng *r, test_config *tc, const counts *obs, int32_t t,
                         ember_limit_policy p, int64_t min_ids, int64_t min_unique)
{
    int64_t mi = max_over_shards(&tc->cfg, obs->ids, t);
    int64_t mu = max_over_shards(&tc->cfg, obs->unique, t);
    ember_table_config *tb = &tc->tables[t];
    tb->limit_policy = p;
    tb->max_ids_per_partition = 0;
    tb->max_unique_ids_per_partition = 0;
    int which = (int)test_range(r, 0, 3); /* ids, unique, both */
    if (which != 1 && mi >= 1 && mi >= min_ids)
        tb->max_ids_per_partition = test_range(r, min_ids > 1 ? min_ids : 1, mi + 1);
    if (which != 0 && mu >= 1 && mu >= min_unique)
        tb->max_unique_ids_per_partition = test_range(r, min_unique > 1 ? min_unique : 1, mu + 1);
    return tb->max_ids_per_partition || tb->max_unique_ids_per_partition;
}

static void test_drop(test_rng *r)
{
    for (int trial = 0; trial < 40; trial++) {
        test_config *tc = random_config(r, 3, 5, 1, 200);
        test_batch_opts bo = random_opts(r, 24, 8);
        /* a third of the time with out-of-range ids skipped by bounds = drop:
         * they are not routed, so they count in no limit (ref ignores them) */
        int bounds_drop = trial % 3 == 2;
        if (bounds_drop) {
            tc->cfg.bounds = EMBER_BOUNDS_DROP;
            bo.invalid_frac = 0.1;
        }
        test_batch tb;
        test_batch_make(r, &tc->cfg, &bo, &tb);
        counts obs;
        ref_counts(&tc->cfg, &tb.b, &obs);
        for (int32_t t = 0; t < tc->cfg.num_tables; t++)
            if (test_range(r, 0, 3))
                random_limits(r, tc, &obs, t, EMBER_LIMIT_DROP, 0, 0);
        int32_t B = tb.b.batch_size, nmb = 0;
        int32_t *mb = calloc((size_t)B + 2, sizeof *mb);
        uint8_t *keep = calloc((size_t)tb.b.num_ids + 1, 1);
        int rrc = ref_limits_apply(&tc->cfg, &tb.b, keep, &nmb, mb);
        CHECK(rrc == EMBER_OK && nmb == 1);
        int64_t dropped = 0;
        for (int64_t i = 0; i < tb.b.num_ids; i++)
            dropped += !keep[i];

        int fails_before = check_failed_;
        ember_collection *c = create(&tc->cfg);
        ref_model m;
        int have_ref = ref_model_init(&m, &tc->cfg) == 0;
        CHECK(have_ref);
        if (c && have_ref) {
            outputs got, want;
            outputs_alloc(&tc->cfg, &tb.b, &got);
            outputs_alloc(&tc->cfg, &tb.b, &want);
            int rc = ember_forward(c, &tb.b, got.pooled, got.seq);
            CHECK_MSG(rc == EMBER_OK, "trial %d: forward: %d %s", trial, rc, ember_errmsg(c));
            ref_forward(&m, &tb.b, keep, want.pooled, want.seq);
            char what[96];
            snprintf(what, sizeof what, "drop trial %d pooled (%lld dropped)", trial,
                     (long long)dropped);
            CHECK_CLOSE(got.pooled, want.pooled, got.np, RTOL, ATOL, what);
            snprintf(what, sizeof what, "drop trial %d sequence", trial);
            CHECK_CLOSE(got.seq, want.seq, got.ns, RTOL, ATOL, what);
            ember_stats st;
            ember_collection_stats(c, &st);
            CHECK_MSG(st.dropped_limit == dropped, "trial %d: dropped_limit %lld, reference %lld",
                      trial, (long long)st.dropped_limit, (long long)dropped);
            if (st.dropped_limit != dropped || check_failed_ > fails_before)
                dump_case(&tc->cfg, &tb.b);
            CHECK(st.minibatches == 1);
            CHECK_MSG(st.dropped_bounds == (bounds_drop ? tb.invalid : 0),
                      "trial %d: dropped_bounds %lld, batch has %lld invalid ids", trial,
                      (long long)st.dropped_bounds, (long long)tb.invalid);
            if (rc == EMBER_OK) {
                float *dp = malloc((size_t)got.np * sizeof(float) + 4);
                float *ds = malloc((size_t)got.ns * sizeof(float) + 4);
                test_fill(r, dp, got.np, -1.0f, 1.0f);
                test_fill(r, ds, got.ns, -1.0f, 1.0f);
                rc = ember_backward(c, dp, ds);
                CHECK_MSG(rc == EMBER_OK, "trial %d: backward: %d %s", trial, rc,
                          ember_errmsg(c));
                ref_backward(&m, &tb.b, keep, dp, ds);
                snprintf(what, sizeof what, "drop trial %d after backward", trial);
                test_compare_ref(c, &m, bo.dup_heavy ? 1e-4 : 1e-5, 5e-6, what);
                free(dp);
                free(ds);
            }
            outputs_free(&got);
            outputs_free(&want);
        }
        if (have_ref)
            ref_model_free(&m);
        ember_collection_destroy(c);
        free(mb);
        free(keep);
        counts_free(&obs);
        test_batch_free(&tb);
        test_config_free(tc);
    }
}

/* The reference's split must be the greedy one: every range fits the
 * minibatch tables, and no range could take its next sample. */
static void check_split_greedy(const ember_collection_config *cfg, const ember_batch *b,
                               int32_t nmb, const int32_t *mb)
{
    int ok = mb[0] == 0 && mb[nmb] == b->batch_size;
    for (int32_t k = 0; k < nmb && ok; k++) {
        counts c;
        ref_counts_range(cfg, b, mb[k], mb[k + 1], &c);
        for (int32_t t = 0; t < cfg->num_tables; t++)
            if (cfg->tables[t].limit_policy == EMBER_LIMIT_MINIBATCH && !table_fits(cfg, &c, t))
                ok = 0;
        counts_free(&c);
        if (mb[k + 1] < b->batch_size) {
            int grows = 1;
            ref_counts_range(cfg, b, mb[k], mb[k + 1] + 1, &c);
            for (int32_t t = 0; t < cfg->num_tables; t++)
                if (cfg->tables[t].limit_policy == EMBER_LIMIT_MINIBATCH &&
                    !table_fits(cfg, &c, t))
                    grows = 0;
            counts_free(&c);
            if (grows)
                ok = 0;
        }
    }
    CHECK_MSG(ok, "reference split into %d mini-batches is not greedy", (int)nmb);
}

/* Largest single-sample count of table t (ids or unique). */
static int64_t single_sample_max(const ember_collection_config *cfg, const ember_batch *b,
                                 int32_t t, int unique)
{
    int64_t m = 0;
    for (int32_t s = 0; s < b->batch_size; s++) {
        counts c;
        ref_counts_range(cfg, b, s, s + 1, &c);
        int64_t v = max_over_shards(cfg, unique ? c.unique : c.ids, t);
        if (v > m)
            m = v;
        counts_free(&c);
    }
    return m;
}

/* Random limits on a few tables (policies: minibatch always on one table;
 * with mixed, drop and error too), then the checks of the header. */
static void run_minibatch_case(test_rng *r, int trial, int mixed)
{
    test_config *tc = random_config(r, 3, 5, 1, 200);
    test_batch_opts bo = random_opts(r, 32, 8);
    if (bo.batch_size < 4)
        bo.batch_size = 4;
    test_batch tb;
    test_batch_make(r, &tc->cfg, &bo, &tb);
    const ember_collection_config *cfg = &tc->cfg;
    counts obs;
    ref_counts(cfg, &tb.b, &obs);
    int32_t T = cfg->num_tables, B = tb.b.batch_size;
    int any_mb = 0;
    int32_t error_table = -1;
    for (int32_t t = 0; t < T; t++) {
        int pick = (int)test_range(r, 0, mixed ? 4 : 2);
        if (t == 0 || pick == 1) {
            int64_t smi = single_sample_max(cfg, &tb.b, t, 0);
            int64_t smu = single_sample_max(cfg, &tb.b, t, 1);
            any_mb |= random_limits(r, tc, &obs, t, EMBER_LIMIT_MINIBATCH, smi, smu);
        } else if (pick == 2) {
            random_limits(r, tc, &obs, t, EMBER_LIMIT_DROP, 0, 0);
        } else if (pick == 3) {
            error_table = t; /* its limit is set after the split is known */
        }
    }
    int fails_before = check_failed_;
    int32_t nmb = 0;
    int32_t *mb = calloc((size_t)B + 2, sizeof *mb);
    uint8_t *keep = calloc((size_t)tb.b.num_ids + 1, 1);
    int rrc = ref_limits_apply(cfg, &tb.b, keep, &nmb, mb);
    CHECK_MSG(rrc == EMBER_OK, "trial %d: reference: %d", trial, rrc);
    if (rrc != EMBER_OK)
        goto done;
    check_split_greedy(cfg, &tb.b, nmb, mb);
    if (error_table >= 0) {
        /* the largest count over the mini-batches: met per mini-batch, and
         * usually broken by the whole batch */
        int64_t per_mb = 0;
        for (int32_t k = 0; k < nmb; k++) {
            counts c;
            ref_counts_range(cfg, &tb.b, mb[k], mb[k + 1], &c);
            int64_t v = max_over_shards(cfg, c.ids, error_table);
            if (v > per_mb)
                per_mb = v;
            counts_free(&c);
        }
        if (per_mb > 0) {
            tc->tables[error_table].limit_policy = EMBER_LIMIT_ERROR;
            tc->tables[error_table].max_ids_per_partition = per_mb;
        }
    }

    ember_collection *c = create(cfg);
    test_config *plain = test_config_copy(tc);
    for (int32_t t = 0; t < T; t++) {
        plain->tables[t].max_ids_per_partition = 0;
        plain->tables[t].max_unique_ids_per_partition = 0;
    }
    ember_collection *p = mixed ? NULL : create(&plain->cfg);
    ref_model m;
    int have_ref = mixed && ref_model_init(&m, cfg) == 0;
    if (!c || (!mixed && !p) || (mixed && !have_ref))
        goto done2;

    outputs got, want;
    outputs_alloc(cfg, &tb.b, &got);
    outputs_alloc(cfg, &tb.b, &want);
    int rc = ember_forward(c, &tb.b, got.pooled, got.seq);
    CHECK_MSG(rc == EMBER_OK, "trial %d: forward: %d %s", trial, rc, ember_errmsg(c));
    ember_stats st;
    ember_collection_stats(c, &st);
    CHECK_MSG(st.minibatches == nmb, "trial %d: %lld mini-batches, reference %d", trial,
              (long long)st.minibatches, (int)nmb);
    float *dp = malloc((size_t)got.np * sizeof(float) + 4);
    float *ds = malloc((size_t)got.ns * sizeof(float) + 4);
    test_fill(r, dp, got.np, -1.0f, 1.0f);
    test_fill(r, ds, got.ns, -1.0f, 1.0f);
    char what[96];
    if (!mixed) {
        int prc = ember_forward(p, &tb.b, want.pooled, want.seq);
        CHECK(prc == EMBER_OK);
        CHECK_MSG(!memcmp(got.pooled, want.pooled, (size_t)got.np * sizeof(float)) &&
                      !memcmp(got.seq, want.seq, (size_t)got.ns * sizeof(float)),
                  "trial %d: minibatch outputs (%d mini-batches) differ from unsplit", trial,
                  (int)nmb);
        if (rc == EMBER_OK && prc == EMBER_OK) {
            CHECK(ember_backward(c, dp, ds) == EMBER_OK);
            CHECK(ember_backward(p, dp, ds) == EMBER_OK);
            CHECK_MSG(test_tables_identical(c, p, cfg),
                      "trial %d: tables after a %d-mini-batch step differ from unsplit", trial,
                      (int)nmb);
        }
    } else {
        int64_t dropped = 0;
        for (int64_t i = 0; i < tb.b.num_ids; i++)
            dropped += !keep[i];
        ref_forward(&m, &tb.b, keep, want.pooled, want.seq);
        snprintf(what, sizeof what, "mixed trial %d pooled", trial);
        CHECK_CLOSE(got.pooled, want.pooled, got.np, RTOL, ATOL, what);
        snprintf(what, sizeof what, "mixed trial %d sequence", trial);
        CHECK_CLOSE(got.seq, want.seq, got.ns, RTOL, ATOL, what);
        CHECK_MSG(st.dropped_limit == dropped, "mixed trial %d: dropped_limit %lld, ref %lld",
                  trial, (long long)st.dropped_limit, (long long)dropped);
        if (rc == EMBER_OK) {
            CHECK(ember_backward(c, dp, ds) == EMBER_OK);
            ref_backward(&m, &tb.b, keep, dp, ds);
            snprintf(what, sizeof what, "mixed trial %d after backward", trial);
            test_compare_ref(c, &m, bo.dup_heavy ? 1e-4 : 1e-5, 5e-6, what);
        }
        /* one below the per-mini-batch maximum must fail */
        if (error_table >= 0 && tc->tables[error_table].max_ids_per_partition > 1) {
            tc->tables[error_table].max_ids_per_partition -= 1;
            ember_collection *e = create(cfg);
            int32_t n2 = 0;
            int erc = ref_limits_apply(cfg, &tb.b, keep, &n2, mb);
            CHECK(erc == EMBER_ELIMIT);
            if (e) {
                int frc = ember_forward(e, &tb.b, got.pooled, got.seq);
                CHECK_MSG(frc == EMBER_ELIMIT, "mixed trial %d: error table below its "
                                               "per-mini-batch max: rc %d",
                          trial, frc);
                ember_collection_destroy(e);
            }
        }
    }
    free(dp);
    free(ds);
    outputs_free(&got);
    outputs_free(&want);
done2:
    if (have_ref)
        ref_model_free(&m);
    ember_collection_destroy(c);
    ember_collection_destroy(p);
    test_config_free(plain);
done:
    if (check_failed_ > fails_before) {
        fprintf(stderr, "  %s trial %d: reference split:", mixed ? "mixed" : "minibatch", trial);
        for (int32_t k = 0; k <= nmb; k++)
            fprintf(stderr, " %d", (int)mb[k]);
        fprintf(stderr, "\n");
        dump_case(cfg, &tb.b);
    }
    (void)any_mb;
    free(mb);
    free(keep);
    counts_free(&obs);
    test_batch_free(&tb);
    test_config_free(tc);
}

static void test_minibatch(test_rng *r)
{
    for (int trial = 0; trial < 40; trial++)
        run_minibatch_case(r, trial, 0);
    for (int trial = 0; trial < 40; trial++)
        run_minibatch_case(r, trial, 1);
}

static void test_single_sample(test_rng *r)
{
    int tried = 0;
    for (int trial = 0; trial < 200 && tried < 25; trial++) {
        test_config *tc = random_config(r, 3, 5, 1, 200);
        test_batch_opts bo = random_opts(r, 24, 8);
        test_batch tb;
        test_batch_make(r, &tc->cfg, &bo, &tb);
        int32_t t = (int32_t)test_range(r, 0, tc->cfg.num_tables);
        int unique = (int)test_range(r, 0, 2);
        int64_t smax = single_sample_max(&tc->cfg, &tb.b, t, unique);
        if (smax < 2) {
            test_batch_free(&tb);
            test_config_free(tc);
            continue;
        }
        tried++;
        int64_t limit = test_range(r, 1, smax);
        tc->tables[t].limit_policy = EMBER_LIMIT_MINIBATCH;
        if (unique)
            tc->tables[t].max_unique_ids_per_partition = limit;
        else
            tc->tables[t].max_ids_per_partition = limit;
        /* the first sample that alone overflows is where the greedy split fails */
        int32_t first = -1;
        for (int32_t s = 0; s < tb.b.batch_size && first < 0; s++) {
            counts c;
            ref_counts_range(&tc->cfg, &tb.b, s, s + 1, &c);
            if (!table_fits(&tc->cfg, &c, t))
                first = s;
            counts_free(&c);
        }
        int32_t nmb = 0;
        int32_t *mb = calloc((size_t)tb.b.batch_size + 2, sizeof *mb);
        uint8_t *keep = calloc((size_t)tb.b.num_ids + 1, 1);
        CHECK(ref_limits_apply(&tc->cfg, &tb.b, keep, &nmb, mb) == EMBER_ELIMIT);
        ember_collection *c = create(&tc->cfg);
        if (c) {
            outputs out;
            outputs_alloc(&tc->cfg, &tb.b, &out);
            int rc = ember_forward(c, &tb.b, out.pooled, out.seq);
            const char *msg = ember_errmsg(c);
            int64_t ints[64];
            int ni = msg_ints(msg, ints, 64);
            const char *sp = strstr(msg, "sample");
            int64_t named = -1;
            if (sp)
                msg_ints(sp, &named, 1);
            CHECK_MSG(rc == EMBER_ELIMIT && sp && named == first &&
                          msg_names_table(msg, tc->tables[t].name) && has_int(ints, ni, limit),
                      "trial %d: sample %d alone overflows %s limit %lld of %s: rc %d, message: "
                      "%s",
                      trial, (int)first, unique ? "unique" : "ids", (long long)limit,
                      tc->tables[t].name, rc, msg);
            if (rc != EMBER_ELIMIT || named != first)
                dump_case(&tc->cfg, &tb.b);
            outputs_free(&out);
            ember_collection_destroy(c);
        }
        free(mb);
        free(keep);
        test_batch_free(&tb);
        test_config_free(tc);
    }
    CHECK(tried >= 10);
}

static void test_dedup(test_rng *r)
{
    for (int trial = 0; trial < 30; trial++) {
        test_config *tc = random_config(r, 3, 5, 1, 200);
        test_batch_opts bo = random_opts(r, 24, 10);
        if (trial % 2 == 0)
            bo.dup_heavy = 1;
        test_batch tb;
        test_batch_make(r, &tc->cfg, &bo, &tb);
        tc->cfg.dedup = 0;
        ember_collection *a = create(&tc->cfg);
        tc->cfg.dedup = 1;
        ember_collection *d = create(&tc->cfg);
        if (a && d) {
            outputs oa, od;
            outputs_alloc(&tc->cfg, &tb.b, &oa);
            outputs_alloc(&tc->cfg, &tb.b, &od);
            float *dp = malloc((size_t)oa.np * sizeof(float) + 4);
            float *ds = malloc((size_t)oa.ns * sizeof(float) + 4);
            char what[96];
            for (int step = 0; step < 2; step++) {
                int ra = ember_forward(a, &tb.b, oa.pooled, oa.seq);
                int rd = ember_forward(d, &tb.b, od.pooled, od.seq);
                CHECK_MSG(ra == EMBER_OK && rd == EMBER_OK, "dedup trial %d: %d %d", trial, ra,
                          rd);
                snprintf(what, sizeof what, "dedup trial %d step %d pooled", trial, step);
                CHECK_CLOSE(od.pooled, oa.pooled, oa.np, RTOL, ATOL, what);
                snprintf(what, sizeof what, "dedup trial %d step %d sequence", trial, step);
                CHECK_CLOSE(od.seq, oa.seq, oa.ns, RTOL, ATOL, what);
                test_fill(r, dp, oa.np, -1.0f, 1.0f);
                test_fill(r, ds, oa.ns, -1.0f, 1.0f);
                CHECK(ember_backward(a, dp, ds) == EMBER_OK);
                CHECK(ember_backward(d, dp, ds) == EMBER_OK);
                if (step == 0) /* the tables now differ by rounding (checked below, with its
                                  tolerance); start the next forward from equal values so it
                                  measures dedup alone, not an optimizer step's amplification */
                    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
                        float *wa = test_read_table(a, &tc->cfg, t, 0);
                        if (wa)
                            CHECK(ember_table_write(d, t, 0, tc->tables[t].rows, wa) == EMBER_OK);
                        free(wa);
                    }
            }
            for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
                float *wa = test_read_table(a, &tc->cfg, t, 0);
                float *wd = test_read_table(d, &tc->cfg, t, 0);
                snprintf(what, sizeof what, "dedup trial %d table %d after 2 steps", trial, t);
                if (wa && wd)
                    CHECK_CLOSE(wd, wa, tc->tables[t].rows * tc->tables[t].dim, 1e-4, 5e-6,
                                what);
                free(wa);
                free(wd);
            }
            free(dp);
            free(ds);
            outputs_free(&oa);
            outputs_free(&od);
        }
        ember_collection_destroy(a);
        ember_collection_destroy(d);
        test_batch_free(&tb);
        test_config_free(tc);
    }
}

/* The reference itself on a hand-made case (SparseCore's documented example), so a
 * wrong reference cannot agree with a wrong library. */
static void test_reference_by_hand(void)
{
    /* one table of 8 rows, two features on it, 3 samples, 2 shards:
     * f0: [0] [0 1 2] [1 1 3];  f1: [] [2 2] [5] */
    test_config *tc = test_config_new(1, 2);
    tc->tables[0].rows = 8;
    tc->tables[0].dim = 2;
    tc->features[1].table = 0;
    tc->cfg.num_shards = 2;
    int32_t lengths[6] = {1, 3, 3, 0, 2, 1};
    int64_t ids[10] = {0, 0, 1, 2, 1, 1, 3, 2, 2, 5};
    ember_batch b = {3, 2, lengths, ids, NULL, 10};
    int64_t c_ids[2], c_uq[2];
    ref_partition_counts(&tc->cfg, &b, c_ids, c_uq);
    /* units: f0 s0 {0}; f0 s1 {0,1,2}; f0 s2 {1,3}; f1 s1 {2}; f1 s2 {5}
     * shard 0 (even): 0,0,2,2 -> 4 units, distinct {0,2} = 2
     * shard 1 (odd):  1,1,3,5 -> 4 units, distinct {1,3,5} = 3 */
    CHECK(c_ids[0] == 4 && c_ids[1] == 4 && c_uq[0] == 2 && c_uq[1] == 3);

    /* drop with max_unique 1 and max_ids 3: shard 0 walk (id, sample, feature):
     * (0,s0,f0) u1 keep; (0,s1,f0) keep; (2,s1,f0) u2 drop; (2,s1,f1) drop
     * shard 1: (1,s1,f0) u1 keep; (1,s2,f0) keep; (3,s2,f0) u2 drop; (5,s2,f1) drop */
    tc->tables[0].limit_policy = EMBER_LIMIT_DROP;
    tc->tables[0].max_unique_ids_per_partition = 1;
    tc->tables[0].max_ids_per_partition = 3;
    uint8_t keep[10];
    int32_t nmb, mb[4];
    CHECK(ref_limits_apply(&tc->cfg, &b, keep, &nmb, mb) == EMBER_OK && nmb == 1);
    static const uint8_t want_keep[10] = {1, 1, 1, 0, 1, 1, 0, 0, 0, 0};
    CHECK(!memcmp(keep, want_keep, 10));
    /* max_ids 1 alone: shard 0 keeps (0,s0,f0) only; shard 1 keeps (1,s1,f0) */
    tc->tables[0].max_unique_ids_per_partition = 0;
    tc->tables[0].max_ids_per_partition = 1;
    CHECK(ref_limits_apply(&tc->cfg, &b, keep, &nmb, mb) == EMBER_OK);
    static const uint8_t want_keep2[10] = {1, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    CHECK(!memcmp(keep, want_keep2, 10));

    /* minibatch with max_ids 3: sample 0 = {0}: 1+0; +sample 1: shard 0 has
     * 0,0,2,2 = 4 > 3 -> cut; sample 1 alone: shard 0: 0,2,2 = 3, shard 1: 1;
     * +sample 2: shard 1: 1,1,3,5 = 4 -> cut; so [0,1) [1,2) [2,3) */
    tc->tables[0].limit_policy = EMBER_LIMIT_MINIBATCH;
    tc->tables[0].max_ids_per_partition = 3;
    CHECK(ref_limits_apply(&tc->cfg, &b, keep, &nmb, mb) == EMBER_OK);
    CHECK(nmb == 3 && mb[0] == 0 && mb[1] == 1 && mb[2] == 2 && mb[3] == 3);
    tc->tables[0].max_ids_per_partition = 2; /* sample 1 alone has 3 in shard 0 */
    CHECK(ref_limits_apply(&tc->cfg, &b, keep, &nmb, mb) == EMBER_ELIMIT);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    test_reference_by_hand();
    test_counts(&r);
    test_error(&r);
    test_drop(&r);
    test_minibatch(&r);
    test_single_sample(&r);
    test_dedup(&r);
    return check_report("test_limits");
}
