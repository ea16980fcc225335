/*
 * util.h: helpers shared by the tests: a reproducible seed, a small counter
 * RNG, collection configs that own their tables/features/names, random
 * batches (empty bags, duplicate-heavy, weighted, out-of-range ids), and
 * reading, comparing and copying tables between the library and ref_model.
 *
 * Header-only (static functions) because every test is one translation unit;
 * include check.h first or not, it is included here.  Every random test
 * prints its seed; `test_x SEED` (or EMBER_TEST_SEED=SEED) reruns it.
 */
#ifndef EMBER_TESTS_UTIL_H
#define EMBER_TESTS_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ember-train.h"
#include "ember.h"
#include "ref/ref.h"
#include "tier/ssd_size.h"

/* ------------------------------------------------------------- seed, rng */

typedef struct test_rng {
    uint64_t s;
} test_rng;

static inline uint64_t test_next(test_rng *r) /* splitmix64 */
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline double test_uniform(test_rng *r) { return (double)(test_next(r) >> 11) * 0x1.0p-53; }
/* Uniform integer in [lo, hi), hi > lo. */
static inline int64_t test_range(test_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(test_next(r) % (uint64_t)(hi - lo));
}
static inline float test_float(test_rng *r, float lo, float hi)
{
    return lo + (float)test_uniform(r) * (hi - lo);
}
static inline void test_fill(test_rng *r, float *x, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = test_float(r, lo, hi);
}

/* argv[1], else $EMBER_TEST_SEED, else time and pid; printed for reruns. */
static inline uint64_t test_seed(int argc, char **argv)
{
    uint64_t seed;
    const char *env = getenv("EMBER_TEST_SEED");
    if (argc > 1)
        seed = strtoull(argv[1], NULL, 0);
    else if (env && *env)
        seed = strtoull(env, NULL, 0);
    else
        seed = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid() * 7919u ^ (uint64_t)clock();
    printf("%s: seed %llu (rerun: %s %llu)\n", argv[0], (unsigned long long)seed, argv[0],
           (unsigned long long)seed);
    fflush(stdout);
    return seed;
}

/* ---------------------------------------------------------------- config */

#define TEST_MAX_TABLES 320
#define TEST_MAX_FEATURES 320

/* A collection config that owns its arrays and names; cfg points into it,
 * so never copy the struct by value (use test_config_copy). */
typedef struct test_config {
    ember_collection_config cfg;
    ember_table_config tables[TEST_MAX_TABLES];
    ember_feature_config features[TEST_MAX_FEATURES];
    char table_names[TEST_MAX_TABLES][32];
    char feature_names[TEST_MAX_FEATURES][32];
} test_config;

static inline void test_config_repoint(test_config *tc)
{
    tc->cfg.tables = tc->tables;
    tc->cfg.features = tc->features;
    for (int i = 0; i < TEST_MAX_TABLES; i++)
        tc->tables[i].name = tc->table_names[i];
    for (int i = 0; i < TEST_MAX_FEATURES; i++)
        tc->features[i].name = tc->feature_names[i];
}

/* Defaults everywhere; tables "table<i>" of 100 rows, dim 8; features
 * "feature<i>" reading table i % num_tables with SUM. */
static inline test_config *test_config_new(int32_t num_tables, int32_t num_features)
{
    test_config *tc = calloc(1, sizeof *tc);
    if (!tc || num_tables > TEST_MAX_TABLES || num_features > TEST_MAX_FEATURES)
        abort();
    tc->cfg = ember_collection_config_default();
    tc->cfg.num_tables = num_tables;
    tc->cfg.num_features = num_features;
    for (int i = 0; i < TEST_MAX_TABLES; i++) {
        tc->tables[i] = ember_table_config_default();
        tc->tables[i].rows = 100;
        tc->tables[i].dim = 8;
        snprintf(tc->table_names[i], sizeof tc->table_names[i], "table%d", i);
    }
    for (int i = 0; i < TEST_MAX_FEATURES; i++) {
        tc->features[i].table = num_tables ? i % num_tables : 0;
        tc->features[i].combiner = EMBER_COMBINER_SUM;
        snprintf(tc->feature_names[i], sizeof tc->feature_names[i], "feature%d", i);
    }
    test_config_repoint(tc);
    return tc;
}

static inline test_config *test_config_copy(const test_config *src)
{
    test_config *tc = malloc(sizeof *tc);
    if (!tc)
        abort();
    memcpy(tc, src, sizeof *tc);
    test_config_repoint(tc);
    return tc;
}

static inline void test_config_free(test_config *tc) { free(tc); }

static const int32_t test_dims[] = {1, 3, 8, 17, 64, 300};
static inline int32_t test_pick_dim(test_rng *r) { return test_dims[test_range(r, 0, 6)]; }

/* An optimizer of the kind with random lr, eps and weight decay.  eps is
 * kept >= 1e-2: near g = 0 an Adagrad/Adam step lr*g/(|g| + eps) changes by
 * up to lr*dg/eps for a rounding difference dg in g, so a tiny eps would turn
 * two correct summation orders into a spurious mismatch (test_optim checks
 * eps = 1e-8 on hand-computed values). */
static inline ember_optimizer test_optimizer_random(test_rng *r, ember_optimizer_kind kind)
{
    ember_optimizer o = ember_optimizer_default(kind);
    o.lr = test_float(r, 0.005f, 0.2f);
    o.eps = test_float(r, 1e-2f, 1e-1f);
    o.weight_decay = test_range(r, 0, 3) == 0 ? 0.0f : test_float(r, 0.0f, 0.1f);
    if (kind == EMBER_OPT_ADAM || kind == EMBER_OPT_ROWWISE_ADAM || kind == EMBER_OPT_LAMB) {
        o.beta1 = test_float(r, 0.5f, 0.95f);
        o.beta2 = test_float(r, 0.9f, 0.9999f);
    }
    if (o.weight_decay != 0.0f && test_range(r, 0, 3) == 0)
        o.weight_decay_mode = EMBER_DECAY_DECOUPLED;
    if (test_range(r, 0, 4) == 0) /* gradient clipping, now and then, tight enough to act */
        o.clip_value = test_float(r, 0.05f, 1.0f);
    if (test_range(r, 0, 4) == 0)
        o.clip_norm = test_float(r, 0.1f, 2.0f);
    if (kind == EMBER_OPT_FTRL) {
        o.beta = test_float(r, 0.1f, 2.0f);
        o.l1 = test_range(r, 0, 2) ? test_float(r, 0.0f, 0.05f) : 0.0f;
        o.l2 = test_range(r, 0, 2) ? test_float(r, 0.0f, 0.5f) : 0.0f;
        /* -p >= 1/2: n'^-p - n^-p then moves by a bounded amount per unit of
         * g, so the tests' tolerance for a different summation order holds */
        o.lr_power = test_range(r, 0, 2) ? -0.5f : test_float(r, -1.0f, -0.5f);
    }
    if (kind == EMBER_OPT_MOMENTUM) {
        o.momentum = test_float(r, 0.0f, 0.95f);
        o.nesterov = (int32_t)test_range(r, 0, 2);
    }
    if (kind == EMBER_OPT_LARS) { /* eta large enough that a step moves a row */
        o.momentum = test_float(r, 0.0f, 0.95f);
        o.eta = test_float(r, 0.01f, 0.5f);
    }
    return o;
}

/* Optimizer kinds a random config draws from: test_range(r, 0, TEST_NUM_OPT). */
#define TEST_NUM_OPT (EMBER_OPT_LARS + 1)

/* 1 when the kind's state is only per-element vectors (and so may be half
 * precision): not SGD's none, nor a row-wise kind's float per row. */
static inline int test_element_state(ember_optimizer_kind kind)
{
    int32_t two = ember_state_floats(kind, 2);
    return two >= 2 && two % 2 == 0;
}

/* What a table with optimizer o starts from: FTRL's from zeros, as it is
 * used (its first step subtracts sigma * w, which for a random start would
 * turn the summation order's rounding in g into a large change of z). */
static inline void test_init_for_optimizer(ember_table_config *tb)
{
    if (tb->optimizer.kind == EMBER_OPT_FTRL)
        tb->init = EMBER_INIT_ZEROS;
}

/* One table in four gets simulated quantization (a range narrower than
 * the rows' values now and then, so clipping happens too). */
static inline void test_quant_random(test_rng *r, ember_table_config *tb)
{
    if (test_range(r, 0, 4))
        return;
    tb->quant_buckets = (int32_t)test_range(r, 2, 300);
    tb->quant_low = -test_float(r, 0.01f, 1.0f);
    tb->quant_high = test_float(r, 0.01f, 1.0f);
}

/* A random config: 1..max_tables tables (rows in [min_rows, max_rows], dims
 * from test_dims, uniform/normal/constant init, a random optimizer of any
 * kind, simulated quantization by test_quant_random), 1..max_features
 * features (random table and combiner, NONE included), random dedup,
 * stacking, shards and bounds.  seed is random. */
static inline test_config *test_config_random(test_rng *r, int max_tables, int max_features,
                                              int64_t min_rows, int64_t max_rows)
{
    int32_t nt = (int32_t)test_range(r, 1, max_tables + 1);
    int32_t nf = (int32_t)test_range(r, 1, max_features + 1);
    test_config *tc = test_config_new(nt, nf);
    for (int32_t t = 0; t < nt; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->rows = test_range(r, min_rows, max_rows + 1);
        tb->dim = test_pick_dim(r);
        tb->init = (ember_init_kind)test_range(r, 0, 2);
        if (test_range(r, 0, 8) == 0)
            tb->init = EMBER_INIT_CONSTANT;
        tb->init_value = test_float(r, 0.01f, 1.0f);
        tb->optimizer = test_optimizer_random(r, (ember_optimizer_kind)test_range(r, 0, TEST_NUM_OPT));
        test_init_for_optimizer(tb);
        test_quant_random(r, tb);
    }
    for (int32_t f = 0; f < nf; f++) {
        tc->features[f].table = (int32_t)test_range(r, 0, nt);
        tc->features[f].combiner = (ember_combiner)test_range(r, 0, 4);
    }
    tc->cfg.seed = test_next(r);
    tc->cfg.dedup = (int)test_range(r, 0, 2);
    tc->cfg.stack_tables = (int)test_range(r, 0, 2);
    tc->cfg.num_shards = (int32_t)test_range(r, 1, 5);
    tc->cfg.bounds = (ember_bounds_policy)test_range(r, 0, 2);
    return tc;
}

static inline int test_quantized(const test_config *tc)
{
    int n = 0;
    for (int32_t t = 0; t < tc->cfg.num_tables; t++)
        n += tc->tables[t].quant_buckets != 0;
    return n;
}

/* One line that names a random case, for failure messages. */
static inline void test_describe(char *buf, size_t n, int trial, int32_t B, int32_t max_len,
                                 const test_config *tc, int heavy)
{
    snprintf(buf, n,
             "trial %d (B=%d max_len %d tables %d features %d dedup %d bounds %s stack %d heavy %d quantized %d)",
             trial, B, max_len, tc->cfg.num_tables, tc->cfg.num_features, tc->cfg.dedup,
             tc->cfg.bounds == EMBER_BOUNDS_DROP ? "drop" : "error", tc->cfg.stack_tables, heavy, test_quantized(tc));
}

/* ----------------------------------------------------------------- batch */

typedef struct test_batch_opts {
    int32_t batch_size;
    int32_t max_len;      /* bag length uniform in [0, max_len]                */
    double empty_frac;    /* extra chance that a bag is empty                  */
    int dup_heavy;        /* ids drawn from rows [0, min(rows, 4)): duplicates  */
    int64_t id_range;     /* >0: ids drawn from [0, min(rows, id_range))        */
    int weighted;         /* weights in [weight_lo, weight_hi)                 */
    float weight_lo, weight_hi;
    double invalid_frac;  /* chance an id is out of range (< 0 or >= rows)     */
} test_batch_opts;

static inline test_batch_opts test_batch_opts_default(void)
{
    test_batch_opts o = {0};
    o.batch_size = 16;
    o.max_len = 8;
    o.weight_lo = 0.25f;
    o.weight_hi = 1.75f;
    return o;
}

/* A batch that owns its arrays; b points into them. */
typedef struct test_batch {
    ember_batch b;
    int32_t *lengths;
    int64_t *ids;
    float *weights;
    int64_t invalid; /* ids out of range */
} test_batch;

static inline void test_batch_alloc(test_batch *tb, int32_t batch_size, int32_t num_features,
                                    int64_t num_ids, int weighted)
{
    memset(tb, 0, sizeof *tb);
    tb->lengths = calloc((size_t)batch_size * (size_t)num_features + 1, sizeof *tb->lengths);
    tb->ids = calloc((size_t)num_ids + 1, sizeof *tb->ids);
    tb->weights = weighted ? calloc((size_t)num_ids + 1, sizeof *tb->weights) : NULL;
    if (!tb->lengths || !tb->ids || (weighted && !tb->weights))
        abort();
    tb->b.batch_size = batch_size;
    tb->b.num_features = num_features;
    tb->b.lengths = tb->lengths;
    tb->b.ids = tb->ids;
    tb->b.weights = tb->weights;
    tb->b.num_ids = num_ids;
}

static inline void test_batch_make(test_rng *r, const ember_collection_config *cfg,
                                   const test_batch_opts *o, test_batch *tb)
{
    int32_t B = o->batch_size, F = cfg->num_features;
    int64_t nb = (int64_t)B * F, n = 0;
    int32_t *len = malloc((size_t)nb * sizeof *len + 1);
    for (int64_t i = 0; i < nb; i++) {
        len[i] = (int32_t)test_range(r, 0, o->max_len + 1);
        if (o->empty_frac > 0 && test_uniform(r) < o->empty_frac)
            len[i] = 0;
        n += len[i];
    }
    test_batch_alloc(tb, B, F, n, o->weighted);
    memcpy(tb->lengths, len, (size_t)nb * sizeof *len);
    free(len);
    int64_t k = 0;
    for (int32_t f = 0; f < F; f++) {
        int64_t rows = cfg->tables[cfg->features[f].table].rows, hi = rows;
        if (o->id_range > 0 && o->id_range < hi)
            hi = o->id_range;
        if (o->dup_heavy && hi > 4)
            hi = 4;
        for (int32_t s = 0; s < B; s++) {
            for (int32_t p = 0; p < tb->lengths[(int64_t)f * B + s]; p++, k++) {
                tb->ids[k] = test_range(r, 0, hi);
                if (o->invalid_frac > 0 && test_uniform(r) < o->invalid_frac) {
                    tb->ids[k] = test_range(r, 0, 2) ? -test_range(r, 1, 1000)
                                                     : rows + test_range(r, 0, 1000);
                    tb->invalid++;
                }
                if (tb->weights)
                    tb->weights[k] = test_float(r, o->weight_lo, o->weight_hi);
            }
        }
    }
}

/* Samples [lo, hi) of b as a new batch (same features, same id order). */
static inline void test_sub_batch(const ember_batch *b, int32_t lo, int32_t hi, test_batch *out)
{
    int32_t B = b->batch_size, F = b->num_features, n = hi - lo;
    int64_t nids = 0;
    for (int32_t f = 0; f < F; f++)
        for (int32_t s = lo; s < hi; s++)
            nids += b->lengths[(int64_t)f * B + s];
    test_batch_alloc(out, n, F, nids, b->weights != NULL);
    int64_t src = 0, dst = 0;
    for (int32_t f = 0; f < F; f++)
        for (int32_t s = 0; s < B; s++) {
            int32_t len = b->lengths[(int64_t)f * B + s];
            if (s >= lo && s < hi) {
                out->lengths[(int64_t)f * n + (s - lo)] = len;
                memcpy(out->ids + dst, b->ids + src, (size_t)len * sizeof *out->ids);
                if (b->weights)
                    memcpy(out->weights + dst, b->weights + src,
                           (size_t)len * sizeof *out->weights);
                dst += len;
            }
            src += len;
        }
}

static inline void test_batch_free(test_batch *tb)
{
    free(tb->lengths);
    free(tb->ids);
    free(tb->weights);
    memset(tb, 0, sizeof *tb);
}

/* W of ember_pooled_width and the sequence size, from the config alone. */
static inline int64_t test_pooled_width(const ember_collection_config *cfg)
{
    int64_t w = 0;
    for (int32_t f = 0; f < cfg->num_features; f++)
        if (cfg->features[f].combiner != EMBER_COMBINER_NONE)
            w += cfg->tables[cfg->features[f].table].dim;
    return w;
}

static inline int64_t test_sequence_size(const ember_collection_config *cfg, const ember_batch *b)
{
    int64_t n = 0, k = 0;
    for (int32_t f = 0; f < cfg->num_features; f++) {
        int64_t ids = 0;
        for (int32_t s = 0; s < b->batch_size; s++)
            ids += b->lengths[k++];
        if (cfg->features[f].combiner == EMBER_COMBINER_NONE)
            n += ids * cfg->tables[cfg->features[f].table].dim;
    }
    return n;
}

/* Occurrences of every row of every table in the batch (valid ids):
 * count[t] is calloc'd, rows of table t long; the caller frees each. */
static inline void test_count_rows(const ember_collection_config *cfg, const ember_batch *b, int64_t **count)
{
    for (int32_t t = 0; t < cfg->num_tables; t++)
        count[t] = calloc((size_t)cfg->tables[t].rows, sizeof *count[t]);
    int64_t k = 0;
    for (int32_t f = 0; f < b->num_features; f++) {
        int32_t t = cfg->features[f].table;
        for (int32_t s = 0; s < b->batch_size; s++)
            for (int32_t p = 0; p < b->lengths[(int64_t)f * b->batch_size + s]; p++, k++)
                if (b->ids[k] >= 0 && b->ids[k] < cfg->tables[t].rows)
                    count[t][b->ids[k]]++;
    }
}

/* ---------------------------------------------------------------- tables */

/* All rows (or optimizer state) of table t, malloc'd; NULL on error. */
static inline float *test_read_table(const ember_collection *c, const ember_collection_config *cfg,
                                     int32_t t, int state)
{
    const ember_table_config *tc = &cfg->tables[t];
    int64_t per = state ? ember_state_floats(tc->optimizer.kind, tc->dim) : tc->dim;
    float *x = malloc((size_t)(tc->rows * per) * sizeof *x + 1);
    if (per == 0)
        return x; /* SGD has no state: nothing to read */
    int rc = state ? ember_table_read_state(c, t, 0, tc->rows, x)
                   : ember_table_read(c, t, 0, tc->rows, x);
    if (rc != EMBER_OK) {
        fprintf(stderr, "read %s of table %d: %s\n", state ? "state" : "rows", t, ember_errmsg(c));
        free(x);
        return NULL;
    }
    return x;
}

/* CHECK_CLOSE of every table (and state) of c against m; returns failures. */
static inline int test_compare_ref(const ember_collection *c, const ref_model *m, double rtol,
                                   double atol, const char *when)
{
    int bad = 0;
    char what[600];
    for (int32_t t = 0; t < m->cfg.num_tables; t++) {
        const ember_table_config *tc = &m->cfg.tables[t];
        int64_t sf = ember_state_floats(tc->optimizer.kind, tc->dim);
        float *w = test_read_table(c, &m->cfg, t, 0);
        float *s = test_read_table(c, &m->cfg, t, 1);
        CHECK(w && s);
        if (w && s) {
            snprintf(what, sizeof what, "%s: table %s (rows %lld dim %d) values", when, tc->name,
                     (long long)tc->rows, tc->dim);
            bad += !CHECK_CLOSE(w, m->tables[t].w, tc->rows * tc->dim, rtol, atol, what);
            snprintf(what, sizeof what, "%s: table %s state", when, tc->name);
            if (sf)
                bad += !CHECK_CLOSE(s, m->tables[t].state, tc->rows * sf, rtol, atol, what);
        }
        free(w);
        free(s);
    }
    return bad;
}

/* Copies the library's tables and state into m, so that the next step is
 * compared from identical starting points (errors do not accumulate). */
static inline void test_sync_ref(const ember_collection *c, ref_model *m)
{
    for (int32_t t = 0; t < m->cfg.num_tables; t++) {
        const ember_table_config *tc = &m->cfg.tables[t];
        int64_t sf = ember_state_floats(tc->optimizer.kind, tc->dim);
        float *w = test_read_table(c, &m->cfg, t, 0);
        float *s = test_read_table(c, &m->cfg, t, 1);
        if (w)
            memcpy(m->tables[t].w, w, (size_t)(tc->rows * tc->dim) * sizeof *w);
        if (s && sf)
            memcpy(m->tables[t].state, s, (size_t)(tc->rows * sf) * sizeof *s);
        free(w);
        free(s);
    }
}

/* The magnitude of each forward output: ref_forward on |values| and
 * |weights|, i.e. sum_i |w_i| |row(id_i)| (over the divisor for MEAN and
 * SQRTN).  Rounding error of any summation order is bounded by ~n ulps of
 * this, not of the result, which may cancel to ~0; tolerances use it. */
static inline void test_ref_magnitude(const ref_model *m, const ember_batch *b,
                                      const uint8_t *keep, float *pooled, float *sequence)
{
    ref_model a = *m;
    ref_table *t = malloc((size_t)m->cfg.num_tables * sizeof *t);
    ember_table_config *tc = malloc((size_t)m->cfg.num_tables * sizeof *tc);
    float *w = malloc((size_t)b->num_ids * sizeof *w + sizeof *w);
    if (!t || !tc || !w)
        abort();
    for (int32_t i = 0; i < m->cfg.num_tables; i++) {
        const ember_table_config *q = &m->cfg.tables[i]; /* |value as read|: after simulated quantization */
        int64_t n = m->tables[i].rows * m->tables[i].dim;
        t[i] = m->tables[i];
        t[i].w = malloc((size_t)n * sizeof(float) + 1);
        for (int64_t k = 0; k < n; k++)
            t[i].w[k] = fabsf(q->quant_buckets ? ref_fake_quant(m->tables[i].w[k], q->quant_low, q->quant_high,
                                                                q->quant_buckets)
                                               : m->tables[i].w[k]);
        tc[i] = *q;
        tc[i].quant_buckets = 0;
    }
    a.cfg.tables = tc;
    for (int64_t k = 0; k < b->num_ids; k++)
        w[k] = b->weights ? fabsf(b->weights[k]) : 1.0f;
    ember_batch ab = *b;
    ab.weights = w;
    a.tables = t;
    ref_forward(&a, &ab, keep, pooled, sequence);
    for (int32_t i = 0; i < m->cfg.num_tables; i++)
        free(t[i].w);
    free(t);
    free(tc);
    free(w);
}

/* |a - b| <= rtol |b| + mtol mag for every element; reports the first miss. */
static inline int test_check_close_mag_(const float *a, const float *b, const float *mag, int64_t n,
                                        double rtol, double mtol, const char *what,
                                        const char *file, int line)
{
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= rtol * fabs((double)b[i]) + mtol * (double)mag[i])) {
            fprintf(stderr, "%s:%d: %s: element %lld: got %.9g want %.9g magnitude %.9g"
                    " (rtol %g mtol %g)\n", file, line, what, (long long)i, a[i], b[i], mag[i],
                    rtol, mtol);
            check_failed_++;
            return 0;
        }
    }
    check_passed_++;
    return 1;
}
#define TEST_CHECK_CLOSE_MAG(a, b, mag, n, rtol, mtol, what) \
    test_check_close_mag_((a), (b), (mag), (int64_t)(n), (rtol), (mtol), (what), __FILE__, __LINE__)

/* Bytes of one row's record on the SSD tier (tier/ssd_size.h): its values and
 * state as table t holds them (halves for half rows or state). */
static inline int64_t test_ssd_record_bytes(const ember_table_config *t)
{
    return ember_ssd_record_bytes(t->dim, ember_state_floats(t->optimizer.kind, t->dim),
                                  t->precision != EMBER_PRECISION_FP32, t->state_precision != EMBER_PRECISION_FP32);
}

/* 1 when every table and state of a and b is bitwise equal (same cfg). */
static inline int test_tables_identical(const ember_collection *a, const ember_collection *b,
                                        const ember_collection_config *cfg)
{
    int same = 1;
    for (int32_t t = 0; t < cfg->num_tables && same; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        for (int state = 0; state < 2 && same; state++) {
            int64_t per = state ? ember_state_floats(tc->optimizer.kind, tc->dim) : tc->dim;
            float *x = test_read_table(a, cfg, t, state), *y = test_read_table(b, cfg, t, state);
            same = x && y && memcmp(x, y, (size_t)(tc->rows * per) * sizeof *x) == 0;
            if (!same)
                fprintf(stderr, "table %s %s differ\n", tc->name, state ? "state" : "values");
            free(x);
            free(y);
        }
    }
    return same;
}

/* The whole file at path (malloc'd, one spare byte) and its size in *n;
 * NULL when it cannot be opened or read. */
static inline unsigned char *test_read_file(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = *n >= 0 ? malloc((size_t)*n + 1) : NULL;
    if (p && fread(p, 1, (size_t)*n, f) != (size_t)*n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    return p;
}

/* Writes n bytes to path; aborts when it cannot (a broken test machine). */
static inline void test_write_file(const char *path, const unsigned char *p, long n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
    fclose(f);
}

/* Trains the config file cfg into the checkpoint root ck on one thread
 * in a world of one: EMBER_OK, or the status (a failed check names the
 * trainer's message). */
static inline int test_train_config(const char *cfg, const char *ck)
{
    ember_train_overrides o;
    ember_train_overrides_init(&o);
    o.checkpoint_dir = ck;
    o.threads = 1;
    ember_trainer *t = NULL;
    int st = ember_trainer_open(cfg, &o, NULL, NULL, NULL, &t);
    if (st == EMBER_OK)
        st = ember_trainer_run(t);
    CHECK_MSG(st == EMBER_OK, "train %s: %s", cfg, ember_errmsg(t));
    ember_trainer_close(t);
    return st;
}

#endif
