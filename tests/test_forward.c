/*
 * test_forward.c: ember_forward against ref_forward on fresh random configs
 * and batches: every combiner (NONE gives the sequence output), weights on
 * and off, dedup on and off, empty bags, duplicate-heavy bags, dims 1, 3, 8,
 * 17, 64 and 300, B = 1, small and 2048, bounds = drop (invalid ids skipped
 * and counted in stats) and bounds = error (valid ids only), feature stacking
 * (several features on one table), two batches per collection (buffers are
 * reused).  Plus fixed cases: an all-empty batch, divisor 0.
 *
 * Tolerance, per element: |got - want| <= 1e-5 |want| + mtol mag, where
 * mag = sum_i |w_i| |row(id_i)| (test_ref_magnitude; weights are positive).
 * The fast path may sum in another order or vector width, fuse
 * multiply-adds, or merge duplicates first: the rounding of any order is
 * bounded by ~n ulps of mag (n ids in the bag), not of the result, which may
 * cancel to ~0.  Usually mtol = 1e-5: random-sign rounding grows like
 * sqrt(n) ulps (<= 3e-6 mag even for n = 3000).  Duplicate-heavy bags add
 * the same row again and again, whose rounding errors do not cancel but
 * drift, up to n ulps: there mtol = 1e-5 + 2 max_len 2^-24 (3.7e-4 for the
 * 3000-id bags).  A missing, extra or misweighted id moves a short bag by
 * ~mag/n >= 4e-2 mag; the long bags are there for the kernels' chunking.
 * Outputs are pre-filled with NaN so an element the library forgets to
 * write cannot pass.
 */
#include "util.h"

#define RTOL 1e-5

static float *nan_buffer(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x + sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}

/* One forward of batch tb on c, checked against m. */
static void check_forward(ember_collection *c, const ref_model *m, const test_batch *tb,
                          double mtol, const char *what, int64_t *dropped)
{
    const ember_collection_config *cfg = &m->cfg;
    int64_t W = test_pooled_width(cfg), S = test_sequence_size(cfg, &tb->b);
    int32_t B = tb->b.batch_size;
    CHECK(ember_pooled_width(c) == W);
    CHECK(ember_sequence_size(c, &tb->b) == S);
    float *pooled = nan_buffer(B * W), *seq = nan_buffer(S);
    float *want_p = nan_buffer(B * W), *want_s = nan_buffer(S);
    float *mag_p = nan_buffer(B * W), *mag_s = nan_buffer(S);
    int rc = ember_forward(c, &tb->b, pooled, seq);
    CHECK_MSG(rc == EMBER_OK, "%s: forward %d: %s", what, rc, ember_errmsg(c));
    ref_forward(m, &tb->b, NULL, want_p, want_s);
    test_ref_magnitude(m, &tb->b, NULL, mag_p, mag_s);
    if (rc == EMBER_OK) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: pooled [B=%d W=%lld]", what, B, (long long)W);
        TEST_CHECK_CLOSE_MAG(pooled, want_p, mag_p, B * W, RTOL, mtol, msg);
        snprintf(msg, sizeof msg, "%s: sequence [%lld floats]", what, (long long)S);
        TEST_CHECK_CLOSE_MAG(seq, want_s, mag_s, S, RTOL, mtol, msg);
    }
    *dropped += tb->invalid;
    ember_stats st;
    ember_collection_stats(c, &st);
    CHECK_MSG(st.dropped_bounds == *dropped, "%s: dropped_bounds %lld want %lld", what,
              (long long)st.dropped_bounds, (long long)*dropped);
    free(pooled);
    free(seq);
    free(want_p);
    free(want_s);
    free(mag_p);
    free(mag_s);
}

static void random_case(test_rng *r, int trial, int32_t B, int32_t max_len)
{
    test_config *tc = test_config_random(r, 4, 6, 1, 3000);
    tc->tables[0].dim = test_dims[trial % 6]; /* every dim, every few trials */
    int heavy = test_range(r, 0, 3) == 0;
    int64_t dims = 0;
    for (int32_t f = 0; f < tc->cfg.num_features; f++)
        dims += tc->tables[tc->features[f].table].dim;
    char what[160];
    test_describe(what, sizeof what, trial, B, max_len, tc, heavy);

    ember_collection *c = NULL;
    int rc = ember_collection_create(&tc->cfg, &c);
    CHECK_MSG(rc == EMBER_OK, "%s: create: %s", what, ember_errmsg(NULL));
    ref_model m;
    CHECK(ref_model_init(&m, &tc->cfg) == 0);
    if (rc == EMBER_OK) {
        int64_t dropped = 0;
        for (int rep = 0; rep < 2; rep++) {
            test_batch_opts o = test_batch_opts_default();
            o.batch_size = rep == 0 ? B : (int32_t)test_range(r, 1, 40);
            o.max_len = (int32_t)test_range(r, 0, max_len + 1);
            if ((int64_t)o.max_len * o.batch_size * dims > 8000000) /* <= ~4M floats out */
                o.max_len = (int32_t)(8000000 / ((int64_t)o.batch_size * dims));
            o.empty_frac = 0.2;
            o.dup_heavy = heavy;
            o.weighted = (int)test_range(r, 0, 2);
            o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.1 : 0.0;
            test_batch tb;
            test_batch_make(r, &tc->cfg, &o, &tb);
            double mtol = heavy ? 1e-5 + 2.0 * o.max_len * 0x1p-24 : 1e-5;
            check_forward(c, &m, &tb, mtol, what, &dropped);
            test_batch_free(&tb);
        }
        /* forward never changes a table (init equality: rtol 1e-6, see test_init) */
        test_compare_ref(c, &m, 1e-6, 0, what);
    }
    ref_model_free(&m);
    ember_collection_destroy(c);
    test_config_free(tc);
}

/* Every bag empty; and mean/sqrtn bags whose divisor is exactly 0. */
static void fixed_cases(void)
{
    test_config *tc = test_config_new(2, 4);
    tc->tables[1].dim = 3;
    tc->features[0].combiner = EMBER_COMBINER_MEAN;
    tc->features[1].combiner = EMBER_COMBINER_SQRTN;
    tc->features[2].combiner = EMBER_COMBINER_SUM;
    tc->features[3].combiner = EMBER_COMBINER_NONE;
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    if (!c) {
        test_config_free(tc);
        return;
    }
    int64_t W = ember_pooled_width(c);
    CHECK(W == 8 + 3 + 8);
    int32_t len0[12] = {0};
    int64_t ids0[1] = {0};
    ember_batch empty = {3, 4, len0, ids0, NULL, 0};
    CHECK(ember_sequence_size(c, &empty) == 0);
    float *pooled = nan_buffer(3 * W), zeros[3 * 19] = {0};
    CHECK(ember_forward(c, &empty, pooled, NULL) == EMBER_OK);
    CHECK(memcmp(pooled, zeros, sizeof zeros) == 0);

    /* B = 1: MEAN bag {5 (w 1), 6 (w -1)} -> divisor 0; SQRTN bag {2 (w 0)};
     * SUM bag {7 (w 0.5), 7 (w -0.5)} -> exact zero too; NONE empty. */
    int32_t len1[4] = {2, 1, 2, 0};
    int64_t ids1[5] = {5, 6, 2, 7, 7};
    float w1[5] = {1, -1, 0, 0.5f, -0.5f};
    ember_batch div0 = {1, 4, len1, ids1, w1, 5};
    for (int i = 0; i < W; i++)
        pooled[i] = NAN;
    int rc = ember_forward(c, &div0, pooled, NULL);
    CHECK_MSG(rc == EMBER_OK, "divisor 0 forward: %s", ember_errmsg(c));
    for (int i = 0; i < W; i++)
        CHECK_MSG(pooled[i] == 0.0f, "divisor 0: pooled[%d] = %g, want 0", i, pooled[i]);
    free(pooled);
    ember_collection_destroy(c);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    fixed_cases();
    static const int32_t sizes[] = {1, 2048, 7, 300, 64}; /* with 6 dims: all 30 pairs */
    for (int trial = 0; trial < 36; trial++)
        random_case(&r, trial, sizes[trial % 5], 24);
    for (int trial = 36; trial < 42; trial++) /* long bags */
        random_case(&r, trial, (int32_t)test_range(&r, 1, 5), 3000);
    return check_report("test_forward");
}
