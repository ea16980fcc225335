/*
 * test_dynbundle.c: dynamic tables in inference bundles (src/infer/bundle.c,
 * bundle_write.c, step/dynamic_load.c; docs/inference.md, "Bundles").  A
 * model with two dynamic tables (LRU with admission on first use; LFU with
 * admit_after 2 and simulated quantization, which the predictor holds
 * decoded to fp32; both full, so keys were evicted) and a fixed table is
 * trained a few steps and exported at every encoding.  Then, on fresh random
 * batches (known keys, unknown keys of all 64 bits, empty bags, weights or
 * none, sum/mean/sqrtn):
 *
 *   files     every key the checkpoint holds is in the bundle, ascending,
 *             and its row is the checkpoint's row of that key encoded by the
 *             naive reference (ref_quant_row), byte for byte
 *   fp32      the bundle scores exactly as the checkpoint (memcmp), at 1 and
 *             2 threads: the trainer's own evaluation, whose unknown keys
 *             read zeros
 *   encoded   fp16/int8/int4 (and int4 for the dynamic tables alone): the
 *             pooled embeddings equal, bit for bit, a naive dequantize-and-
 *             pool of the bundle's files (ref_dequant_row; an unknown key a
 *             zero row that counts in the mean and sqrtn divisors; a
 *             simulated table's values read through ref_fake_quant), and the
 *             scores are within 1e-5 of ref_dlrm_forward (double) on that
 *             pooled input: float rounding of the dense model only
 *   default   a bag of unknown keys pools to zeros; a mean bag of a known and
 *             an unknown key is half the known row
 *   no growth scoring admits nothing: the resident keys are the bundle's
 *   memory    the predictor holds the encoded rows (row bytes = keys x the
 *             encoding's row size), not fp32 copies (but for the simulated
 *             table: 4 x dim a key)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ember-train.h"
#include "infer/predictor.h"
#include "util.h"
#include "bundle_util.h" /* after util.h, which it needs */

#define B 96
#define MAX_KEYS 4096

static const char *const ENC[] = {"fp32", "fp16", "int8", "int4"};

/* A batch of the model's features: a dynamic feature's ids are the
 * checkpoint's keys or fresh 64-bit keys (half unknown), a fixed one's rows. */
static void make_batch(test_rng *r, const ember_collection_config *cc, int64_t *const *keys, const int64_t *nkeys,
                       int weighted, test_batch *tb, float *dense, int32_t num_dense)
{
    int32_t F = cc->num_features;
    int32_t len[B * 8];
    int64_t n = 0;
    for (int64_t i = 0; i < (int64_t)F * B; i++)
        n += len[i] = (int32_t)test_range(r, 0, 5);
    test_batch_alloc(tb, B, F, n, weighted);
    memcpy(tb->lengths, len, sizeof(int32_t) * (size_t)(F * B));
    for (int64_t k = 0, f = 0; f < F; f++) {
        int32_t t = cc->features[f].table;
        for (int64_t i = 0; i < B; i++)
            for (int32_t j = 0; j < len[f * B + i]; j++, k++) {
                if (cc->tables[t].kind != EMBER_TABLE_DYNAMIC)
                    tb->ids[k] = test_range(r, 0, cc->tables[t].rows);
                else if (test_range(r, 0, 2) && nkeys[t] > 0)
                    tb->ids[k] = keys[t][test_range(r, 0, nkeys[t])];
                else
                    tb->ids[k] = (int64_t)test_next(r); /* a key the table has never seen, almost surely */
                if (weighted)
                    tb->weights[k] = test_float(r, 0.25f, 1.75f);
            }
    }
    test_fill(r, dense, (int64_t)B * num_dense, -1.0f, 1.0f);
}

static float *scores_of(ember_predictor *p, const float *dense, const ember_batch *b)
{
    float *s = malloc(sizeof(float) * B);
    CHECK_MSG(ember_predictor_score(p, B, dense, b, s) == EMBER_OK, "%s", ember_errmsg(p));
    return s;
}

/* The predictor's pooled embeddings of b (evaluation: no admission). */
static float *pooled_of(ember_predictor *p, const ember_batch *b, int64_t width)
{
    ember_collection *c = predictor_collection(p);
    float *out = malloc(sizeof(float) * (size_t)(b->batch_size * width));
    ember_collection_set_training(c, 0);
    CHECK_MSG(ember_forward(c, b, out, NULL) == EMBER_OK, "%s", ember_errmsg(c));
    ember_collection_set_training(c, 1);
    return out;
}

/* Scores of the reference: ref_dlrm_forward in double, then the sigmoid. */
static void ref_scores(ember_predictor *p, const float *dense, const float *pooled, int64_t width, double *out)
{
    const dlrm_config *dc = &predictor_description(p)->dense;
    int64_t np = 0;
    const float *params = predictor_dense_params(p, &np);
    double *pd = malloc(sizeof(double) * (size_t)np), *xd = malloc(sizeof(double) * (size_t)(B * dc->num_dense + 1));
    double *ed = malloc(sizeof(double) * (size_t)(B * width)), logit[B];
    for (int64_t i = 0; i < np; i++)
        pd[i] = params[i];
    for (int64_t i = 0; i < (int64_t)B * dc->num_dense; i++)
        xd[i] = dense[i];
    for (int64_t i = 0; i < B * width; i++)
        ed[i] = pooled[i];
    ref_dlrm_forward(dc, pd, B, xd, ed, logit);
    for (int32_t s = 0; s < B; s++)
        out[s] = 1.0 / (1.0 + exp(-logit[s]));
    free(pd), free(xd), free(ed);
}

/* Pooled outputs bit for bit; with weights only where the kernels' sums are
 * fused multiply-adds on both sides (as test_qstore), else 1e-6 relative. */
static int same_pooled(const float *a, const float *b, int64_t n, int weighted)
{
#ifndef __FMA__
    if (weighted) {
        for (int64_t i = 0; i < n; i++)
            if (fabsf(a[i] - b[i]) > 1e-6f * (fabsf(a[i]) + 1e-6f))
                return 0;
        return 1;
    }
#else
    (void)weighted;
#endif
    return !memcmp(a, b, sizeof(float) * (size_t)n);
}

/* The bundle's files hold the checkpoint's keys, ascending, each with the
 * checkpoint's row of that key encoded by the reference. */
static void check_files(ember_predictor *ckp, const bundle_table *bt, int64_t *const *keys, const int64_t *nkeys,
                        const char *name)
{
    const ember_collection_config *cc = ember_predictor_config(ckp);
    ember_collection *c = predictor_collection(ckp);
    for (int32_t t = 0; t < cc->num_tables; t++) {
        const bundle_table *b = &bt[t];
        int dyn = cc->tables[t].kind == EMBER_TABLE_DYNAMIC;
        CHECK_MSG(b->dynamic == dyn, "%s: table %d's kind", name, (int)t);
        int64_t n = dyn ? nkeys[t] : cc->tables[t].rows;
        CHECK_MSG(b->rows == n, "%s: table %d: %lld rows, the checkpoint %lld", name, (int)t, (long long)b->rows,
                  (long long)n);
        if (b->rows != n)
            continue;
        if (dyn)
            CHECK_MSG(!memcmp(b->keys, keys[t], sizeof(int64_t) * (size_t)n), "%s: table %d's keys", name, (int)t);
        float *v = malloc(sizeof(float) * (size_t)(n * b->dim + 1));
        unsigned char *row = malloc((size_t)b->row_bytes);
        CHECK(dyn ? ember_dynamic_read(c, t, keys[t], n, v, NULL, NULL) == EMBER_OK
                  : ember_table_read(c, t, 0, n, v) == EMBER_OK);
        int64_t same = 0;
        for (int64_t i = 0; i < n; i++) {
            CHECK(ref_quant_row(b->enc, b->dim, v + i * b->dim, row) == 0);
            same += !memcmp(row, b->data + i * b->row_bytes, (size_t)b->row_bytes);
        }
        CHECK_MSG(same == n, "%s: table %d: %lld of %lld rows are the checkpoint's, encoded", name, (int)t,
                  (long long)same, (long long)n);
        free(v);
        free(row);
    }
}

/* Unknown keys read zeros; a mean bag [known, unknown] is half the known row. */
static void check_default(ember_predictor *p, const bundle_table *bt, test_rng *r, int64_t width, const char *name)
{
    const ember_collection_config *cc = ember_predictor_config(p);
    int32_t F = cc->num_features, lengths[2 * 8] = {0};
    int64_t ids[64], n = 0, fu = -1;
    for (int32_t f = 0; f < F; f++) {
        const bundle_table *t = &bt[cc->features[f].table];
        if (!t->dynamic || t->rows == 0)
            continue;
        for (int s = 0; s < 2; s++) { /* sample 0: two unknown keys; sample 1: mean [known, unknown], else one */
            int known = s == 1 && cc->features[f].combiner == EMBER_COMBINER_MEAN && fu < 0;
            if (known) {
                fu = f;
                ids[n++] = t->keys[test_range(r, 0, t->rows)];
            }
            for (int i = 0; i < (s == 0 ? 2 : 1); i++) {
                int64_t u;
                do
                    u = (int64_t)test_next(r);
                while (bundle_row(t, u));
                ids[n++] = u;
            }
            lengths[f * 2 + s] = known + (s == 0 ? 2 : 1);
        }
    }
    /* the features are in order: rebuild ids feature-major as the batch wants (done above: f outer) */
    ember_batch b = {2, F, lengths, ids, NULL, n};
    float *pooled = pooled_of(p, &b, width);
    int zeros = 1;
    for (int32_t f = 0, col = 0; f < F; col += cc->tables[cc->features[f].table].dim, f++)
        for (int s = 0; s < 2; s++)
            for (int32_t j = 0; bt[cc->features[f].table].dynamic && j < cc->tables[cc->features[f].table].dim; j++)
                if (!(s == 1 && f == fu))
                    zeros &= pooled[s * width + col + j] == 0.0f;
    CHECK_MSG(zeros, "%s: unknown keys pool to zeros", name);
    CHECK_MSG(fu >= 0, "%s: the model has a mean feature on a dynamic table", name);
    if (fu >= 0) {
        int64_t col = 0, first = 0;
        for (int32_t f = 0; f < fu; f++)
            col += cc->tables[cc->features[f].table].dim, first += lengths[f * 2] + lengths[f * 2 + 1];
        const bundle_table *t = &bt[cc->features[fu].table];
        float v[64];
        ref_dequant_row(t->enc, t->dim, bundle_row(t, ids[first + lengths[fu * 2]]), v); /* (no simulated quantization) */
        int half = 1;
        for (int32_t j = 0; j < t->dim; j++)
            half &= pooled[width + col + j] == v[j] / 2;
        CHECK_MSG(half, "%s: a mean bag of a known and an unknown key is half the known row", name);
    }
    free(pooled);
}

/* One bundle against the checkpoint and the reference. */
static void check_bundle(const char *dir, const char *name, ember_predictor *ckp, int64_t *const *keys,
                         const int64_t *nkeys, test_rng *r)
{
    const ember_collection_config *cc = ember_predictor_config(ckp);
    int32_t T = cc->num_tables, nd = ember_predictor_num_dense(ckp);
    int64_t width = 0, encoded_bytes = 0;
    for (int32_t f = 0; f < cc->num_features; f++)
        width += cc->tables[cc->features[f].table].dim;
    bundle_table bt[8];
    read_bundle(dir, bt, T);
    check_files(ckp, bt, keys, nkeys, name);
    ember_predictor *p = NULL, *p2 = NULL;
    ember_predictor_options o1 = {NULL, 1}, o2 = {NULL, 2};
    CHECK_MSG(ember_predictor_open(dir, &o1, &p) == EMBER_OK, "%s: %s", name, ember_errmsg(NULL));
    CHECK_MSG(ember_predictor_open(dir, &o2, &p2) == EMBER_OK, "%s: %s", name, ember_errmsg(NULL));
    if (!p || !p2) {
        ember_predictor_close(p);
        free_bundle(bt, T);
        return;
    }
    ember_memory mem;
    ember_collection_memory(predictor_collection(p), &mem);
    for (int32_t t = 0; t < T; t++) /* a table trained with simulated quantization is held decoded */
        encoded_bytes += bt[t].rows * (cc->tables[t].quant_buckets ? 4 * bt[t].dim : bt[t].row_bytes);
    CHECK_MSG(mem.row_bytes == encoded_bytes, "%s: the predictor holds %lld bytes of rows, the bundle %lld", name,
              (long long)mem.row_bytes, (long long)encoded_bytes);
    int fp32 = !strcmp(name, "fp32");
    float *dense = malloc(sizeof(float) * (size_t)(B * nd + 1));
    for (int round = 0; round < 4; round++) {
        int weighted = round & 1;
        test_batch tb;
        make_batch(r, cc, keys, nkeys, weighted, &tb, dense, nd);
        float *s = scores_of(p, dense, &tb.b), *s2 = scores_of(p2, dense, &tb.b);
        CHECK_MSG(!memcmp(s, s2, sizeof(float) * B), "%s: 1 and 2 threads score alike", name);
        if (fp32) {
            float *sck = scores_of(ckp, dense, &tb.b);
            CHECK_MSG(!memcmp(s, sck, sizeof(float) * B), "%s: the bundle scores as its checkpoint (round %d)", name,
                      round);
            free(sck);
        }
        float *pooled = pooled_of(p, &tb.b, width), *want = malloc(sizeof(float) * (size_t)(B * width));
        ref_pool(cc, bt, &tb.b, want);
        CHECK_MSG(same_pooled(pooled, want, B * width, weighted), "%s: pooled = the naive dequantize-and-pool (round %d)",
                  name, round);
        double ref[B];
        ref_scores(p, dense, want, width, ref);
        float ref_f[B];
        for (int32_t i = 0; i < B; i++)
            ref_f[i] = (float)ref[i];
        CHECK_CLOSE(s, ref_f, B, 0, 1e-5, name);
        free(s), free(s2), free(pooled), free(want);
        test_batch_free(&tb);
    }
    check_default(p, bt, r, width, name);
    for (int32_t t = 0; t < T; t++) { /* scoring admitted nothing */
        ember_dynamic_stats ds;
        if (!bt[t].dynamic)
            continue;
        CHECK(ember_table_dynamic_stats(predictor_collection(p), t, &ds) == EMBER_OK);
        CHECK_MSG(ds.resident == bt[t].rows && ds.admitted == 0, "%s: table %d holds %lld keys (admitted %lld), the "
                  "bundle %lld", name, (int)t, (long long)ds.resident, (long long)ds.admitted, (long long)bt[t].rows);
    }
    free(dense);
    ember_predictor_close(p);
    ember_predictor_close(p2);
    free_bundle(bt, T);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    test_rng r = {seed};
    char root[] = "/tmp/ember-dynbundle-XXXXXX", cfg[200], ck[200], dir[200];
    if (!mkdtemp(root))
        return perror("mkdtemp"), 1;
    snprintf(cfg, sizeof cfg, "%s/dyn.cfg", root);
    snprintf(ck, sizeof ck, "%s/ck", root);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "seed = 3;\n"
               "tables = (\n"
               "  { name = \"user\"; kind = \"dynamic\"; keys = 5000; capacity = 300; admit_after = 1; evict = \"lru\";"
               " dim = 8; optimizer = \"adagrad\"; },\n"
               "  { name = \"query\"; kind = \"dynamic\"; keys = 2000; capacity = 200; admit_after = 2; evict = \"lfu\";"
               " dim = 8; optimizer = \"sgd\";\n"
               "    quantization = { num_buckets = 16; low = -0.1; high = 0.1; }; },\n"
               "  { name = \"item\"; rows = 60; dim = 8; } );\n"
               "features = (\n"
               "  { name = \"fu\"; table = \"user\"; pooling = 2; combiner = \"mean\"; },\n"
               "  { name = \"fq\"; table = \"query\"; pooling = 3; combiner = \"sqrtn\"; },\n"
               "  { name = \"fq2\"; table = \"query\"; pooling = 1; },\n"
               "  { name = \"fi\"; table = \"item\"; pooling = 1; } );\n"
               "data = { dist = \"zipf\"; alpha = 1.1; seed = 1; };\n"
               "train = { steps = 8; micro_batch = 64; eval_samples = 256; metrics = \"\"; plot = \"\"; };\n"
               "model = { bottom = [8]; top = [8]; };\n");
    fclose(f);
    test_train_config(cfg, ck);
    ember_predictor *ckp = NULL;
    CHECK_MSG(ember_predictor_open(ck, NULL, &ckp) == EMBER_OK, "%s", ember_errmsg(NULL));
    if (!ckp)
        return check_report("test_dynbundle");
    const ember_collection_config *cc = ember_predictor_config(ckp);
    int64_t *keys[8] = {0}, nkeys[8] = {0};
    for (int32_t t = 0; t < cc->num_tables; t++)
        if (cc->tables[t].kind == EMBER_TABLE_DYNAMIC) {
            keys[t] = malloc(sizeof(int64_t) * MAX_KEYS);
            CHECK(ember_dynamic_keys(predictor_collection(ckp), t, MAX_KEYS, keys[t], &nkeys[t]) == EMBER_OK);
            CHECK_MSG(nkeys[t] == cc->tables[t].capacity / 1 && nkeys[t] <= MAX_KEYS,
                      "table '%s' full (keys were evicted): %lld keys", cc->tables[t].name, (long long)nkeys[t]);
        }
    for (int e = 0; e < 5; e++) {
        const char *name = e < 4 ? ENC[e] : "mixed";
        const char *per[] = {"user=int4", "query=int8"};
        snprintf(dir, sizeof dir, "%s/b-%s", root, name);
        CHECK_MSG(ember_bundle_write(ck, dir, e < 4 ? ENC[e] : "fp32", e < 4 ? NULL : per, e < 4 ? 0 : 2) == EMBER_OK,
                  "export %s: %s", name, ember_errmsg(NULL));
        check_bundle(dir, name, ckp, keys, nkeys, &r);
    }
    for (int32_t t = 0; t < 8; t++)
        free(keys[t]);
    ember_predictor_close(ckp);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_report("test_dynbundle");
}
