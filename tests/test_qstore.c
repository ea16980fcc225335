/*
 * test_qstore.c: tables of encoded rows (ember_table_config.rows_encoding,
 * src/tier/store_quant.c) against fp32 tables holding the same rows
 * decoded, on random configs, batches, weights, combiners, stacking,
 * dedup, dropped entries (partition limits) and thread counts:
 *   - values written to an encoded table read back as the naive reference
 *     encoding of each row decoded (ref_quant_row / ref_dequant_row),
 *     bit for bit;
 *   - the forward of an encoded collection equals, bit for bit, the
 *     forward of an fp32 collection holding those decoded rows;
 *   - ember_load of an fp32 checkpoint encodes as a row write does;
 *   - ember_backward refuses an encoded collection and changes nothing;
 *     encodings that do not go with SSD, COLUMN or simulated quantization
 *     are refused by name;
 *   - a dynamic table of encoded rows is read-only too: a training forward
 *     admits no key (every key reads zeros) and the backward is refused
 *     (its keys come from a bundle: test_dynbundle).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ref/ref.h"
#include "util.h"
#include "ckpt_util.h" /* after util.h, which it needs */

/* Bit for bit; weighted sums only where the training kernel's acc += w * v
 * is a fused multiply-add, as the fused kernel's is (the default build,
 * -march=native on a CPU with FMA); else within 1e-6 relative. */
static int same_outputs(const float *a, const float *b, int64_t n, int weighted)
{
#ifdef __FMA__
    (void)weighted;
#else
    if (weighted) {
        for (int64_t i = 0; i < n; i++)
            if (fabsf(a[i] - b[i]) > 1e-6f * (fabsf(a[i]) + 1e-6f))
                return 0;
        return 1;
    }
#endif
    return !memcmp(a, b, sizeof(float) * (size_t)n);
}

/* Random rows for every table, with a constant row and a wide row now and then. */
static float *random_rows(test_rng *r, const ember_table_config *t)
{
    float *v = malloc(sizeof(float) * (size_t)(t->rows * t->dim));
    test_fill(r, v, t->rows * t->dim, -0.5f, 0.5f);
    for (int64_t i = 0; i < t->rows; i++) {
        int64_t kind = test_range(r, 0, 10);
        for (int32_t k = 0; k < t->dim; k++) {
            if (kind == 0)
                v[i * t->dim + k] = v[i * t->dim];
            else if (kind == 1)
                v[i * t->dim + k] *= 300.0f;
        }
    }
    return v;
}

/* What an encoded table holds for rows v: the reference's encode, decoded. */
static float *reference_decoded(const ember_table_config *t, const float *v)
{
    float *d = malloc(sizeof(float) * (size_t)(t->rows * t->dim));
    uint8_t *row = malloc(sizeof(float) * (size_t)t->dim + 4); /* the largest encoded row */
    for (int64_t i = 0; i < t->rows; i++) {
        if (t->rows_encoding == EMBER_ROWS_FP32) {
            memcpy(d + i * t->dim, v + i * t->dim, sizeof(float) * (size_t)t->dim);
            continue;
        }
        CHECK(ref_quant_row((int)t->rows_encoding, t->dim, v + i * t->dim, row) == 0);
        ref_dequant_row((int)t->rows_encoding, t->dim, row, d + i * t->dim);
    }
    free(row);
    return d;
}

static void random_case(test_rng *r, int trial)
{
    test_config *tc = test_config_random(r, 4, 6, 1, 2000);
    test_config *plain = NULL;
    char what[200];
    int n = snprintf(what, sizeof what, "trial %d: dedup %d stack %d encodings", trial, tc->cfg.dedup,
                     tc->cfg.stack_tables);
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        tc->tables[t].quant_buckets = 0; /* encoded rows refuse simulated quantization */
        tc->tables[t].rows_encoding = (ember_row_encoding)test_range(r, 0, 4);
        if (test_range(r, 0, 3) == 0) { /* dropped entries: their rows add nothing */
            tc->tables[t].limit_policy = EMBER_LIMIT_DROP;
            tc->tables[t].max_unique_ids_per_partition = test_range(r, 1, 6);
        }
        n += snprintf(what + n, sizeof what - (size_t)n, " %d:%d", tc->tables[t].dim, tc->tables[t].rows_encoding);
    }
    tc->cfg.threads = (int32_t)test_range(r, 1, 3);
    plain = test_config_copy(tc);
    for (int32_t t = 0; t < plain->cfg.num_tables; t++)
        plain->tables[t].rows_encoding = EMBER_ROWS_FP32;
    ember_collection *enc = NULL, *fp = NULL, *orig = NULL;
    CHECK_MSG(ember_collection_create(&tc->cfg, &enc) == EMBER_OK, "%s: create: %s", what, ember_errmsg(NULL));
    CHECK_MSG(ember_collection_create(&plain->cfg, &fp) == EMBER_OK, "%s: create fp32: %s", what, ember_errmsg(NULL));
    CHECK(ember_collection_create(&plain->cfg, &orig) == EMBER_OK);
    if (!enc || !fp || !orig)
        goto done;
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        const ember_table_config *tb = &tc->tables[t];
        float *v = random_rows(r, tb), *want = reference_decoded(tb, v);
        float *got = malloc(sizeof(float) * (size_t)(tb->rows * tb->dim));
        CHECK_MSG(ember_table_write(enc, t, 0, tb->rows, v) == EMBER_OK, "%s: write: %s", what, ember_errmsg(enc));
        CHECK(ember_table_write(fp, t, 0, tb->rows, want) == EMBER_OK);
        CHECK(ember_table_write(orig, t, 0, tb->rows, v) == EMBER_OK);
        CHECK(ember_table_read(enc, t, 0, tb->rows, got) == EMBER_OK);
        CHECK_MSG(!memcmp(got, want, sizeof(float) * (size_t)(tb->rows * tb->dim)),
                  "%s: table %d reads back as the reference encoding", what, (int)t);
        free(v), free(want), free(got);
    }
    /* the forward, on both, bit for bit */
    int64_t width = ember_pooled_width(enc);
    for (int rep = 0; rep < 3; rep++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = (int32_t)test_range(r, 1, 300);
        o.max_len = (int32_t)test_range(r, 0, 12);
        o.empty_frac = 0.2;
        o.weighted = (int)test_range(r, 0, 2);
        o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.1 : 0.0;
        test_batch tb;
        test_batch_make(r, &tc->cfg, &o, &tb);
        int64_t seq = ember_sequence_size(enc, &tb.b);
        float *p1 = calloc((size_t)(o.batch_size * width + 1), 4), *p2 = calloc((size_t)(o.batch_size * width + 1), 4);
        float *s1 = calloc((size_t)seq + 1, 4), *s2 = calloc((size_t)seq + 1, 4);
        int st1 = ember_forward(enc, &tb.b, p1, s1), st2 = ember_forward(fp, &tb.b, p2, s2);
        CHECK_MSG(st1 == EMBER_OK && st2 == EMBER_OK, "%s: forward %d %d: %s", what, st1, st2, ember_errmsg(enc));
        CHECK_MSG(same_outputs(p1, p2, o.batch_size * width, o.weighted) && same_outputs(s1, s2, seq, o.weighted),
                  "%s: rep %d (batch %d, weighted %d): the encoded forward differs from the decoded rows'", what,
                  rep, (int)o.batch_size, o.weighted);
        int any = 0, named = 0;
        for (int32_t t = 0; t < tc->cfg.num_tables; t++)
            any |= tc->tables[t].rows_encoding != EMBER_ROWS_FP32;
        if (rep == 2 && any) { /* read-only: the backward is refused (and the load below sees no change) */
            CHECK_MSG(ember_backward(enc, p1, s1) == EMBER_EINVAL, "%s: backward on encoded rows", what);
            for (int32_t t = 0; t < tc->cfg.num_tables; t++)
                named |= tc->tables[t].rows_encoding && strstr(ember_errmsg(enc), tc->tables[t].name) != NULL;
            CHECK_MSG(named, "%s: the refusal names an encoded table: %s", what, ember_errmsg(enc));
        }
        free(p1), free(p2), free(s1), free(s2);
        test_batch_free(&tb);
    }
    /* a checkpoint of the fp32 rows loads into encoded tables as a write does */
    char dir[256];
    ckpt_tmpdir(dir, "qstore");
    ember_save_options so = {1, 0, NULL, 0, NULL, 0};
    CHECK_MSG(ember_save(orig, dir, &so) == EMBER_OK, "%s: save: %s", what, ember_errmsg(orig));
    ember_checkpoint *ck = NULL;
    ember_collection *loaded = NULL;
    CHECK(ember_checkpoint_open(dir, &ck) == EMBER_OK);
    CHECK(ember_collection_create(&tc->cfg, &loaded) == EMBER_OK);
    if (ck && loaded) {
        CHECK_MSG(ember_load(loaded, ck) == EMBER_OK, "%s: load: %s", what, ember_errmsg(loaded));
        CHECK_MSG(test_tables_identical(loaded, enc, &tc->cfg), "%s: tables loaded as written", what);
    }
    ember_checkpoint_close(ck);
    ember_collection_destroy(loaded);
    ckpt_rm_tree(dir);
done:
    ember_collection_destroy(enc);
    ember_collection_destroy(fp);
    ember_collection_destroy(orig);
    test_config_free(tc);
    test_config_free(plain);
}

/* Settings encoded rows do not go with are named; a row fp16 cannot hold is named. */
static void refusals(void)
{
    static const char *const why[] = {"the SSD tier", "COLUMN placement", "simulated quantization"};
    for (int k = 0; k < 3; k++) {
        test_config *tc = test_config_new(1, 1);
        ember_table_config *t = &tc->tables[0];
        t->rows_encoding = EMBER_ROWS_INT8;
        if (k == 0)
            t->storage = EMBER_STORAGE_SSD;
        if (k == 1)
            t->placement = EMBER_PLACE_COLUMN;
        if (k == 2)
            t->quant_buckets = 16, t->quant_low = -1, t->quant_high = 1;
        ember_collection *c = NULL;
        CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_EINVAL);
        CHECK_MSG(strstr(ember_errmsg(NULL), why[k]) && strstr(ember_errmsg(NULL), "table0"),
                  "refusal %d: %s", k, ember_errmsg(NULL));
        ember_collection_destroy(c);
        test_config_free(tc);
    }
    test_config *tc = test_config_new(1, 1);
    tc->tables[0].rows_encoding = EMBER_ROWS_FP16;
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    float row[8] = {0, 1, 2, 3, 4, 5, 6, 1e6f}, back[8];
    CHECK(ember_table_read(c, 0, 5, 1, back) == EMBER_OK);
    CHECK(ember_table_write(c, 0, 5, 1, row) == EMBER_EINPUT);
    CHECK_MSG(strstr(ember_errmsg(c), "fp16") != NULL, "a row fp16 cannot hold: %s", ember_errmsg(c));
    float after[8];
    CHECK(ember_table_read(c, 0, 5, 1, after) == EMBER_OK);
    CHECK_MSG(!memcmp(back, after, sizeof back), "a refused write leaves the row as it was");
    ember_collection_destroy(c);
    test_config_free(tc);
}

/* A dynamic table of int8 rows admits no key, even in a training forward:
 * every key reads zeros (a mean bag still counts it), nothing is resident
 * after, and the backward is refused. */
static void encoded_dynamic(test_rng *r)
{
    test_config *tc = test_config_new(1, 1);
    ember_table_config *t = &tc->tables[0];
    t->kind = EMBER_TABLE_DYNAMIC, t->rows = 0, t->capacity = 64, t->admit_after = 1;
    t->rows_encoding = EMBER_ROWS_INT8;
    tc->features[0].combiner = EMBER_COMBINER_MEAN;
    ember_collection *c = NULL;
    CHECK_MSG(ember_collection_create(&tc->cfg, &c) == EMBER_OK, "%s", ember_errmsg(NULL));
    if (c) {
        int32_t len[4] = {1, 3, 0, 2};
        int64_t ids[6];
        for (int i = 0; i < 6; i++)
            ids[i] = (int64_t)test_next(r);
        ember_batch b = {4, 1, len, ids, NULL, 6};
        float pooled[4 * 8], zeros[4 * 8] = {0};
        memset(pooled, 0x7f, sizeof pooled);
        CHECK_MSG(ember_forward(c, &b, pooled, NULL) == EMBER_OK, "%s", ember_errmsg(c));
        CHECK_MSG(!memcmp(pooled, zeros, sizeof pooled), "an encoded dynamic table reads zeros for keys it lacks");
        ember_dynamic_stats ds;
        CHECK(ember_table_dynamic_stats(c, 0, &ds) == EMBER_OK && ds.resident == 0 && ds.admitted == 0);
        CHECK(ember_backward(c, zeros, NULL) == EMBER_EINVAL);
        CHECK(ember_table_dynamic_stats(c, 0, &ds) == EMBER_OK && ds.resident == 0);
    }
    ember_collection_destroy(c);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    test_rng r = {seed};
    refusals();
    encoded_dynamic(&r);
    for (int trial = 0; trial < 40; trial++)
        random_case(&r, trial);
    return check_report("test_qstore");
}
