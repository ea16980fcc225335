/*
 * test_edge.c: edge cases found in review, each against the reference or a
 * value worked out by hand:
 *   - long bags (thousands of ids, many repeats) with dedup and with limits,
 *     which take the sort-based path of the router instead of the linear scan;
 *   - mean / sqrtn bags whose divisor's reciprocal overflows float;
 *   - more than 255 physical tables under a minibatch limit;
 *   - ember_partition_counts cancels a pending forward (documented).
 * Tolerances: forward rtol 1e-5, atol 1e-6 against the reference (the same
 * sums in the same order up to vectorised rounding); counts exact.
 */
#include <string.h>

#include "util.h"

static void long_bags(test_rng *r)
{
    for (int trial = 0; trial < 8; trial++) {
        test_config *tc = test_config_new(2, 3);
        for (int t = 0; t < 2; t++) {
            tc->tables[t].rows = 3000;
            tc->tables[t].dim = 8;
        }
        tc->features[0].combiner = EMBER_COMBINER_SUM;
        tc->features[1].combiner = EMBER_COMBINER_MEAN;
        tc->features[2].combiner = EMBER_COMBINER_NONE;
        tc->features[2].table = 1;
        tc->cfg.dedup = trial % 2;
        tc->cfg.num_shards = 3;
        if (trial >= 4) { /* limits: unit leaders through the long-bag path, drop policy */
            tc->tables[0].max_unique_ids_per_partition = 150;
            tc->tables[0].limit_policy = EMBER_LIMIT_DROP;
        }
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = 3;
        o.max_len = 5000;
        o.id_range = 400; /* long bags with many repeats */
        o.weighted = 1;
        test_batch tb;
        test_batch_make(r, &tc->cfg, &o, &tb);
        ember_collection *c;
        ref_model m;
        CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
        CHECK(ref_model_init(&m, &tc->cfg) == 0);
        int64_t w = test_pooled_width(&tc->cfg), sn = test_sequence_size(&tc->cfg, &tb.b);
        float *got = calloc((size_t)(3 * w + sn + 1), sizeof(float));
        float *want = calloc((size_t)(3 * w + sn + 1), sizeof(float));
        uint8_t *keep = calloc((size_t)tb.b.num_ids + 1, 1);
        int32_t nmb, mb[8];
        CHECK(ref_limits_apply(&tc->cfg, &tb.b, keep, &nmb, mb) == EMBER_OK);
        CHECK(ember_forward(c, &tb.b, got, got + 3 * w) == EMBER_OK);
        ref_forward(&m, &tb.b, keep, want, want + 3 * w);
        char what[64];
        snprintf(what, sizeof what, "long bags trial %d forward", trial);
        CHECK_CLOSE(got, want, 3 * w + sn, 1e-5, 1e-6, what);
        int64_t ids[6], uniq[6], rids[6], runiq[6];
        CHECK(ember_partition_counts(c, &tb.b, ids, uniq) == EMBER_OK);
        ref_partition_counts(&tc->cfg, &tb.b, rids, runiq);
        CHECK(!memcmp(ids, rids, sizeof ids) && !memcmp(uniq, runiq, sizeof uniq));
        free(got);
        free(want);
        free(keep);
        ref_model_free(&m);
        ember_collection_destroy(c);
        test_batch_free(&tb);
        test_config_free(tc);
    }
}

static void tiny_divisors(void)
{
    test_config *tc = test_config_new(1, 2);
    tc->tables[0].rows = 4;
    tc->tables[0].dim = 3;
    tc->tables[0].init = EMBER_INIT_CONSTANT;
    tc->tables[0].init_value = 1.0f;
    tc->features[0].combiner = EMBER_COMBINER_MEAN;
    tc->features[1].combiner = EMBER_COMBINER_SQRTN;
    ember_collection *c;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    int32_t lengths[] = {1, 1};
    int64_t ids[] = {2, 3};
    float weights[] = {1e-39f, 1e-39f}; /* 1/w overflows float */
    ember_batch b = {1, 2, lengths, ids, weights, 2};
    float out[6];
    CHECK(ember_forward(c, &b, out, NULL) == EMBER_OK);
    /* mean: w*1 / w = 1;  sqrtn: w*1 / sqrt(w^2) = 1 */
    for (int k = 0; k < 6; k++)
        CHECK_MSG(fabsf(out[k] - 1.0f) < 1e-6f, "tiny divisor element %d = %g, want 1", k, out[k]);
    float d[6] = {1, 1, 1, 1, 1, 1};
    CHECK(ember_backward(c, d, NULL) == EMBER_OK);
    float row[3];
    CHECK(ember_table_read(c, 0, 2, 1, row) == EMBER_OK);
    /* gradient w/w * 1 = 1, SGD lr 0.01: 1 - 0.01 */
    CHECK_MSG(fabsf(row[0] - 0.99f) < 1e-6f, "row after step %g, want 0.99", row[0]);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void many_physical_tables(void)
{
    int32_t n = 300;
    test_config *tc = test_config_new(n, n);
    tc->cfg.stack_tables = 0;
    for (int32_t t = 0; t < n; t++) {
        tc->tables[t].rows = 10;
        tc->tables[t].dim = 2;
        tc->tables[t].max_ids_per_partition = 3;
        tc->tables[t].limit_policy = EMBER_LIMIT_MINIBATCH;
        tc->features[t].table = t;
    }
    ember_collection *c;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    int32_t B = 4;
    test_batch tb;
    test_batch_alloc(&tb, B, n, (int64_t)n * B * 2, 0);
    for (int64_t i = 0; i < (int64_t)n * B; i++)
        tb.lengths[i] = 2;
    for (int64_t i = 0; i < (int64_t)n * B * 2; i++)
        tb.ids[i] = i % 10;
    float *out = calloc((size_t)B * n * 2, sizeof(float));
    int rc = ember_forward(c, &tb.b, out, NULL);
    CHECK_MSG(rc == EMBER_OK, "300 physical tables, minibatch: %s", ember_errmsg(c));
    ember_stats st;
    ember_collection_stats(c, &st);
    /* 2 distinct ids per sample and table, at most 3 per partition: one sample each */
    CHECK_MSG(st.minibatches == B, "minibatches %lld, want %d", (long long)st.minibatches, B);
    free(out);
    test_batch_free(&tb);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void counts_cancel_forward(test_rng *r)
{
    test_config *tc = test_config_new(1, 1);
    ember_collection *c;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    test_batch_opts o = test_batch_opts_default();
    test_batch tb;
    test_batch_make(r, &tc->cfg, &o, &tb);
    float *out = calloc((size_t)o.batch_size * 8, sizeof(float));
    int64_t ids[1], uniq[1];
    CHECK(ember_forward(c, &tb.b, out, NULL) == EMBER_OK);
    CHECK(ember_partition_counts(c, &tb.b, ids, uniq) == EMBER_OK);
    CHECK(ember_backward(c, out, NULL) == EMBER_ESTATE);
    free(out);
    test_batch_free(&tb);
    ember_collection_destroy(c);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    long_bags(&r);
    tiny_divisors();
    many_physical_tables();
    counts_cancel_forward(&r);
    return check_report("test_edge");
}
