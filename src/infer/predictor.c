/*
 * predictor.c: scoring with a trained model (ember.h, "Prediction";
 * docs/inference.md).
 *
 * The predictor is the trainer's evaluation path and nothing else: a
 * collection built from the checkpoint's model description, loaded with
 * ember_load (any world size), the dense model with the saved parameters,
 * and model_predict, which scores a batch with the dense model in chunks
 * of the trainer's micro-batch.  That is what makes its scores the
 * trainer's own, bit for bit.  A bundle's fp16/int8/int4 tables are held
 * as encoded rows (rows_encoding) and pooled by the fused kernel, which
 * sums exactly as pooling their decoded rows would; a table that cannot
 * be (COLUMN placement, simulated quantization) is decoded to fp32.  A
 * dynamic table only looks keys up (model_predict scores as evaluation:
 * an unknown key reads zeros); from a bundle each rank holds exactly the
 * keys it owns (place_tables, bundle.h).  Every
 * step that can fail on one rank alone (opening the checkpoint, reading
 * the description) is agreed before the collective ones, so no rank waits
 * on a rank that gave up.
 *
 * Threads.  The predictor's thread count goes to its handles at open: the
 * collection's, and the dense model's (its OpenMP team, and one BLAS
 * thread, as the trainer's default, for the trainer's bits whatever the
 * count).  Scoring sets nothing; the process's OpenMP and OpenBLAS settings
 * stay the caller's (OpenBLAS's count is process-wide, so the dense model
 * applies its one thread around its own GEMMs when the caller's differs:
 * dense.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_dense.h"
#include "collection/config.h"
#include "comm/comm.h"
#include "data/data_error.h"
#include "infer/bundle.h"
#include "infer/predictor.h"
#include "model/model.h"

struct ember_predictor {
    ember_handle_msg head;  /* first: ember_errmsg's, over err             */
    model_description desc; /* what the checkpoint or bundle says the model is */
    ember_collection_config cc;
    ember_table_config tables[DESCRIPTION_MAX]; /* cc's: desc's, as this world holds them */
    ember_world *own_world; /* a world of one made here, or NULL */
    ember_collection *coll;
    dlrm *dense;
    ctr_model *model;       /* coll and dense joined: model_predict        */
    char err[768];
};

/* 1 on every rank when any rank failed (ok = 0 there). */
static int any_failed(ember_world *w, int failed)
{
    int32_t n = ember_world_size(w);
    int64_t mine = failed, *all = malloc(sizeof(int64_t) * (size_t)n);
    int bad = !all || ember_comm_allgather(w, &mine, sizeof mine, all) != EMBER_OK;
    for (int32_t r = 0; r < n && !bad; r++)
        bad = all[r] != 0;
    free(all);
    return bad;
}

/* Fails open: the message (which may be p->err itself) goes to
 * ember_errmsg(NULL), p is freed. */
static int open_fail(ember_predictor *p, int st, const char *fmt, ...)
{
    char msg[sizeof p->err];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ember_predictor_close(p);
    ember_data_set_error("%s", msg);
    return st;
}

/* Local: the model description and its dense model, parameters not yet
 * set (where names the source in messages). */
static int describe_model(ember_predictor *p, const char *json, int64_t n, const char *where)
{
    if (description_from_json(json, (size_t)n, &p->desc, p->err, sizeof p->err) != 0)
        return EMBER_EFORMAT;
    char derr[256];
    if (dlrm_create(&p->desc.dense, &p->dense, derr, sizeof derr) != 0) {
        snprintf(p->err, sizeof p->err, "%s: the dense model: %s", where, derr);
        return EMBER_EFORMAT;
    }
    return EMBER_OK;
}

/* Local: the model description and the dense parameters of a bundle. */
static int describe(ember_predictor *p, const char *json, int64_t n, const float *params, int64_t bytes,
                    const char *where)
{
    int st = describe_model(p, json, n, where);
    if (st != EMBER_OK)
        return st;
    int64_t want = dlrm_num_params(p->dense) * (int64_t)sizeof(float);
    if (!params || bytes != want) {
        snprintf(p->err, sizeof p->err, "%s: dense.params: %lld bytes, the model needs %lld", where,
                 (long long)(params ? bytes : 0), (long long)want);
        return EMBER_EFORMAT;
    }
    memcpy(dlrm_params(p->dense), params, (size_t)want);
    return EMBER_OK;
}

/* Local part of opening a checkpoint: *ck, the description, the dense
 * parameters. */
static int open_checkpoint(ember_predictor *p, const char *path, ember_checkpoint **ck)
{
    int st = ember_checkpoint_open(path, ck);
    if (st != EMBER_OK) {
        snprintf(p->err, sizeof p->err, "%s", ember_errmsg(NULL));
        return st;
    }
    int64_t n = 0;
    const char *json = ember_checkpoint_blob(*ck, -1, DESCRIPTION_BLOB, &n);
    if (!json) {
        snprintf(p->err, sizeof p->err, "%s: no model description (blob %s): written by `ember train` before "
                 "predictions existed, or by a program of its own; its tables can still be loaded with "
                 "ember_load", ember_checkpoint_path(*ck), DESCRIPTION_BLOB);
        return EMBER_EFORMAT;
    }
    if ((st = describe_model(p, json, n, ember_checkpoint_path(*ck))) != EMBER_OK)
        return st;
    /* whole, or assembled from the pieces pipeline stages saved */
    const int64_t full = dlrm_num_params(p->dense), range[2] = {0, full};
    return ckpt_dense_read(*ck, full, 0, range, 1, dlrm_params(p->dense), NULL, p->err, sizeof p->err);
}

/* Local part of opening a bundle: *b (files verified), the description,
 * the dense parameters, the tables against the description. */
static int open_bundle(ember_predictor *p, const char *path, ember_bundle **b)
{
    int st = bundle_open(path, b, p->err, sizeof p->err);
    if (st != EMBER_OK)
        return st;
    int64_t bytes = 0;
    const float *params = bundle_dense(*b, &bytes);
    const char *json = bundle_model_json(*b);
    if ((st = describe(p, json, (int64_t)strlen(json), params, bytes, path)) != EMBER_OK)
        return st;
    ember_collection_config cc = description_collection(&p->desc);
    return bundle_check(*b, &cc, p->err, sizeof p->err);
}

/* Local: p->cc, the collection this world builds from the description,
 * its tables a copy (the description stays as saved).  TABLE owners wrap
 * into a smaller world (scores do not change); a bundle's quantized rows
 * stay quantized in memory where the table allows it, the others are
 * decoded to fp32 (the same scores).  Dynamic tables admit no key in a
 * predictor: from a checkpoint, each rank gets room for every key saved
 * (keys go to ranks by hash, unevenly); from a bundle, room for exactly
 * the keys it owns, with no sketch, no victims and no optimizer state to
 * keep (a dynamic table is never stacked, so its optimizer decides nothing
 * else). */
static int place_tables(ember_predictor *p, const ember_checkpoint *ck, const ember_bundle *b, int32_t W)
{
    p->cc = description_collection(&p->desc);
    memcpy(p->tables, p->desc.tables, sizeof(ember_table_config) * (size_t)p->desc.num_tables);
    p->cc.tables = p->tables;
    for (int32_t t = 0; t < p->desc.num_tables; t++) {
        ember_table_config *tb = &p->tables[t];
        if (ck && tb->kind == EMBER_TABLE_DYNAMIC && tb->capacity > 0)
            tb->capacity *= ember_checkpoint_world(ck);
        if (b && tb->kind == EMBER_TABLE_DYNAMIC) {
            int64_t cap = bundle_dynamic_capacity(b, t, W);
            if (cap < 0) {
                snprintf(p->err, sizeof p->err, "table '%s': out of memory counting its keys", tb->name);
                return EMBER_ENOMEM;
            }
            tb->capacity = cap;
            tb->capacity_bytes = tb->sketch_bytes = 0;
            tb->admit_after = 1;
            tb->evict = EMBER_EVICT_NONE;
            tb->ttl_steps = 0;
            tb->optimizer.kind = EMBER_OPT_SGD;
        }
        if (tb->placement == EMBER_PLACE_TABLE)
            tb->owner %= W;
        if (b && !ember_encoding_refusal(tb))
            tb->rows_encoding = (ember_row_encoding)bundle_encoding(b, t);
    }
    return EMBER_OK;
}

int ember_predictor_open(const char *path, const ember_predictor_options *o, ember_predictor **out)
{
    *out = NULL;
    ember_predictor *p = calloc(1, sizeof *p);
    if (!p)
        return ember_data_set_error("predictor: out of memory"), EMBER_ENOMEM;
    ember_handle_begin(&p->head, p->err, sizeof p->err);
    ember_world *w = o ? o->world : NULL;
    if (!w && ember_world_self(&p->own_world) != EMBER_OK)
        return open_fail(p, EMBER_ENOMEM, "predictor: out of memory");
    w = w ? w : p->own_world;
    int32_t threads = o && o->threads > 0 ? o->threads : 1;
    /* local: the source, its model description, the dense parameters */
    ember_checkpoint *ck = NULL;
    ember_bundle *b = NULL;
    int st = bundle_is(path) ? open_bundle(p, path, &b) : open_checkpoint(p, path, &ck);
    int32_t max_dim = 1;
    for (int32_t t = 0; t < p->desc.num_tables; t++)
        max_dim = p->desc.tables[t].dim > max_dim ? p->desc.tables[t].dim : max_dim;
    float *scratch = b && st == EMBER_OK ? malloc(sizeof(float) * BUNDLE_CHUNK_ROWS * (size_t)max_dim) : NULL;
    if (b && st == EMBER_OK && !scratch) {
        st = EMBER_ENOMEM;
        snprintf(p->err, sizeof p->err, "%s: out of memory decoding rows", path);
    }
    if (any_failed(w, st != EMBER_OK)) {
        ember_checkpoint_close(ck);
        bundle_close(b);
        free(scratch);
        return open_fail(p, st != EMBER_OK ? st : EMBER_ECOMM, "%s",
                         st != EMBER_OK ? p->err : "predictor: another rank could not open the model");
    }
    /* collective: the collection, its tables, the scoring path */
    int32_t W = ember_world_size(w);
    st = place_tables(p, ck, b, W);
    if (any_failed(w, st != EMBER_OK)) {
        ember_checkpoint_close(ck);
        bundle_close(b);
        free(scratch);
        return open_fail(p, st != EMBER_OK ? st : EMBER_ECOMM, "%s",
                         st != EMBER_OK ? p->err : "predictor: another rank could not size the tables");
    }
    p->cc.world = w;
    p->cc.threads = threads;
    st = ember_collection_create(&p->cc, &p->coll);
    char msg[sizeof p->err];
    snprintf(msg, sizeof msg, "%s", st == EMBER_OK ? "" : ember_errmsg(NULL));
    if (any_failed(w, st != EMBER_OK)) { /* before the collective loads */
        ember_checkpoint_close(ck);
        bundle_close(b);
        free(scratch);
        return open_fail(p, st != EMBER_OK ? st : EMBER_ECOMM, "%s",
                         st != EMBER_OK ? msg : "predictor: another rank could not create the tables");
    }
    st = ck ? ember_load(p->coll, ck) : bundle_load_tables(b, p->coll, &p->cc, scratch);
    snprintf(msg, sizeof msg, "%s", st == EMBER_OK ? "" : ember_errmsg(p->coll));
    ember_checkpoint_close(ck);
    bundle_close(b);
    free(scratch);
    if (any_failed(w, st != EMBER_OK)) /* a dynamic table loads without messages: agreed here */
        return open_fail(p, st != EMBER_OK ? st : EMBER_ECOMM, "%s",
                         st != EMBER_OK ? msg : "predictor: another rank could not load the tables");
    /* the threads are the handles': the process's settings stay the caller's */
    model_config tc = {.micro_batch = p->desc.chunk, .accumulate = 1,
                       .dense_optim = dense_optim_config_default(DENSE_SGD), .threads = threads, .blas_threads = 1};
    char terr[512];
    st = model_create(&tc, p->coll, p->dense, &p->model, terr, sizeof terr);
    if (any_failed(w, st != EMBER_OK))
        return open_fail(p, st != EMBER_OK ? st : EMBER_ECOMM, "%s", st != EMBER_OK ? terr : "another rank failed");
    *out = p;
    return EMBER_OK;
}

void ember_predictor_close(ember_predictor *p)
{
    if (!p)
        return;
    model_destroy(p->model);
    dlrm_destroy(p->dense);
    ember_collection_destroy(p->coll);
    ember_world_destroy(p->own_world);
    description_free(&p->desc);
    ember_handle_end(&p->head);
    free(p);
}

int32_t ember_predictor_num_dense(const ember_predictor *p) { return p->desc.dense.num_dense; }
const model_description *predictor_description(const ember_predictor *p) { return &p->desc; }
ember_collection *predictor_collection(const ember_predictor *p) { return p->coll; }

const float *predictor_dense_params(const ember_predictor *p, int64_t *count)
{
    *count = dlrm_num_params(p->dense);
    return dlrm_params(p->dense);
}

int32_t predictor_blas_threads(const ember_predictor *p)
{
    int32_t threads, blas;
    dlrm_get_threads(p->dense, &threads, &blas);
    return blas;
}
const ember_collection_config *ember_predictor_config(const ember_predictor *p) { return &p->cc; }

int ember_predictor_score(ember_predictor *p, int32_t batch_size, const float *dense, const ember_batch *sparse,
                          float *scores)
{
    /* a bad call still takes part in the collective forward (with no samples),
     * so the other ranks do not wait for it; it fails on its own rank */
    int bad = !sparse || batch_size < 0 || batch_size != sparse->batch_size ||
              sparse->num_features != p->desc.num_features ||
              (batch_size > 0 && ((!dense && p->desc.dense.num_dense > 0) || !scores));
    ember_batch none = {0, p->desc.num_features, NULL, NULL, NULL, 0};
    ctr_batch b = {bad ? 0 : batch_size, p->desc.dense.num_dense, p->desc.num_features, NULL, dense, bad ? none : *sparse, 0};
    int st = model_predict(p->model, &b, scores, p->err, sizeof p->err);
    if (bad) {
        snprintf(p->err, sizeof p->err, "score: batch_size %d, sparse batch of %d samples and %d features (the "
                 "model has %d), dense %s, scores %s", (int)batch_size, sparse ? (int)sparse->batch_size : -1,
                 sparse ? (int)sparse->num_features : -1, (int)p->desc.num_features, dense ? "given" : "NULL",
                 scores ? "given" : "NULL");
        return EMBER_EINVAL;
    }
    return st;
}
