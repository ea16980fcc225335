/*
 * train_util.h: helpers shared by test_train.c and mpi_train.c: a small
 * CTR setup (collection config, dense model config) drawn at random, CTR
 * batches built by hand (so the trainer is tested apart from src/data), the
 * slice of a global batch a rank takes, and the reads that compare two runs.
 *
 * Header-only (static functions); include after util.h or mpi_util.h.
 */
#ifndef EMBER_TESTS_TRAIN_UTIL_H
#define EMBER_TESTS_TRAIN_UTIL_H

#include "model/lr_schedule.h"
#include "model/metrics.h"
#include "model/model.h"
#include "util.h"

/* A CTR batch that owns its arrays; b points into them. */
typedef struct tctr {
    ctr_batch b;
    float *label, *dense;
    test_batch sp;
} tctr;

/* B samples: labels 0/1 (about a third 1), dense in [-1, 1), bags of 0..3
 * ids (empty ones included) over the config's features. */
static inline void tctr_make(test_rng *r, const ember_collection_config *cfg, int32_t B, int32_t nd, tctr *out)
{
    memset(out, 0, sizeof *out);
    test_batch_opts o = test_batch_opts_default();
    o.batch_size = B;
    o.max_len = 3;
    test_batch_make(r, cfg, &o, &out->sp);
    out->label = malloc((size_t)B * sizeof(float) + 4);
    out->dense = malloc((size_t)B * (size_t)nd * sizeof(float) + 4);
    if (!out->label || !out->dense)
        abort();
    for (int32_t s = 0; s < B; s++)
        out->label[s] = test_uniform(r) < 0.35 ? 1.0f : 0.0f;
    test_fill(r, out->dense, (int64_t)B * nd, -1.0f, 1.0f);
    out->b.batch_size = B;
    out->b.num_dense = nd;
    out->b.num_sparse = cfg->num_features;
    out->b.label = out->label;
    out->b.dense = out->dense;
    out->b.sparse = out->sp.b;
}

/* Samples [lo, hi) of g. */
static inline void tctr_slice(const tctr *g, int32_t lo, int32_t hi, tctr *out)
{
    memset(out, 0, sizeof *out);
    int32_t n = hi - lo, nd = g->b.num_dense;
    test_sub_batch(&g->sp.b, lo, hi, &out->sp);
    out->label = malloc((size_t)n * sizeof(float) + 4);
    out->dense = malloc((size_t)n * (size_t)nd * sizeof(float) + 4);
    if (!out->label || !out->dense)
        abort();
    memcpy(out->label, g->label + lo, (size_t)n * sizeof(float));
    memcpy(out->dense, g->dense + (int64_t)lo * nd, (size_t)n * (size_t)nd * sizeof(float));
    out->b = g->b;
    out->b.batch_size = n;
    out->b.label = out->label;
    out->b.dense = out->dense;
    out->b.sparse = out->sp.b;
}

static inline void tctr_free(tctr *t)
{
    test_batch_free(&t->sp);
    free(t->label);
    free(t->dense);
}

/* F features over F tables of dim d (rows 20..200, Adagrad, row-wise
 * Adagrad or SGD in turn, eps 1e-2, uniform init), SUM or MEAN; and a model of num_dense
 * dense inputs, bottom [8, d], top [8] (or none), DOT or CAT. */
static inline test_config *ttrain_config(test_rng *r, int32_t F, int32_t d, int32_t nd, dlrm_config *mc)
{
    test_config *tc = test_config_new(F, F);
    static const ember_optimizer_kind kinds[] = {EMBER_OPT_ADAGRAD, EMBER_OPT_ROWWISE_ADAGRAD, EMBER_OPT_SGD};
    for (int32_t t = 0; t < F; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->rows = test_range(r, 20, 201);
        tb->dim = d;
        tb->init_value = 0.3f;
        tb->optimizer = ember_optimizer_default(kinds[t % 3]);
        tb->optimizer.lr = 0.1f;
        tb->optimizer.eps = 1e-2f; /* as util.h's: near g = 0 Adagrad turns a rounding
                                      difference dg into lr * dg / eps */
        tc->features[t].table = t;
        tc->features[t].combiner = test_range(r, 0, 2) ? EMBER_COMBINER_SUM : EMBER_COMBINER_MEAN;
    }
    tc->cfg.seed = test_next(r);
    memset(mc, 0, sizeof *mc);
    mc->num_dense = nd;
    mc->num_sparse = F;
    mc->emb_dim = d;
    mc->num_bottom = 2;
    mc->bottom[0] = 8;
    mc->bottom[1] = d;
    mc->num_top = (int32_t)test_range(r, 0, 2);
    mc->top[0] = 8;
    mc->interaction = test_range(r, 0, 2) ? DENSE_INTERACT_DOT : DENSE_INTERACT_CAT;
    mc->seed = test_next(r);
    return tc;
}

/* Every table's values, concatenated (collective in a world of W). */
static inline float *ttrain_tables(const ember_collection *c, const ember_collection_config *cfg, int64_t *n)
{
    int64_t total = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++)
        total += cfg->tables[t].rows * cfg->tables[t].dim;
    float *all = malloc((size_t)total * sizeof(float) + 4);
    if (!all)
        abort();
    int64_t at = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        CHECK(ember_table_read(c, t, 0, cfg->tables[t].rows, all + at) == EMBER_OK);
        at += cfg->tables[t].rows * cfg->tables[t].dim;
    }
    *n = total;
    return all;
}

#endif
