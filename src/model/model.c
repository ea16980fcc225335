/*
 * model.c: a CTR model made and unmade (model.h, docs/training.md): the
 * checks of its parts, its buffers, the dense update over the ranks, the
 * pipeline stages when there are any, and a warm-up that sizes everything
 * a step needs; and its settings between steps.  The step itself is
 * model_step.c, prediction model_predict.c.
 *
 * Replication.  dense_sync.c sums the dense gradients of the R ranks in
 * rank order and applies the optimizer, its state replicated on every rank
 * or sharded over groups of ranks (model_config.optim_group); either way
 * every rank ends the step with the same parameter bits, and the sum does
 * not depend on timing.  It moves 2 (R-1)/R of the vector per rank, as a
 * ring all-reduce does, through the collection's communicator
 * (src/comm/comm.h), outside the embedding's byte counters.  With pipeline
 * stages each rank holds its stage's pieces (model_plan_dense decides which,
 * before the dense model is made), and the sum runs over the stage's
 * replicas (replica_world) instead: the same bits, a vector 1/S as long.
 *
 * Memory.  Every buffer is sized at create (k*b rows of pooled outputs and
 * their gradients, one micro-batch of logits, dense_sync's chunks), and the
 * dense model is run once on a zero micro-batch so that its activations are
 * sized too: a step of at most k*b samples allocates nothing.  A larger
 * batch (predict on a bigger evaluation batch) grows the buffers once.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "collection/collection.h"
#include "model/model_impl.h"

int model_fail(char *err, size_t errlen, int status, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

int model_grow_rows(ctr_model *m, int64_t rows)
{
    if (rows <= m->cap_rows)
        return 0;
    size_t n = (size_t)(rows * m->width + 1);
    float *p = realloc(m->pooled, n * sizeof *p);
    if (p)
        m->pooled = p;
    float *d = realloc(m->d_pooled, n * sizeof *d);
    if (d)
        m->d_pooled = d;
    float *q = realloc(m->pooled_next, n * sizeof *q);
    if (q)
        m->pooled_next = q;
    if (!p || !d || !q)
        return EMBER_ENOMEM;
    m->cap_rows = rows;
    return 0;
}

int model_check_batch(const ctr_model *m, const ctr_batch *batch, char *err, size_t errlen)
{
    if (batch->batch_size < 0)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: negative batch size %d", batch->batch_size);
    if (batch->batch_size > 0 && batch->num_sparse != m->num_sparse)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: the batch has %d sparse features, the model %d",
                          batch->num_sparse, m->num_sparse);
    if (batch->batch_size > 0 && batch->num_dense != dlrm_get_config(m->dense)->num_dense)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: the batch has %d dense features, the model %d",
                          batch->num_dense, dlrm_get_config(m->dense)->num_dense);
    return EMBER_OK;
}

/* The settings, and the collection against the dense model: one pooled
 * embedding of the model's emb_dim per sparse input. */
static int check_parts(const model_config *cfg, const ember_collection *coll, const dlrm *dense, char *err,
                       size_t errlen)
{
    if (!cfg || !coll || !dense)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer_create: NULL argument");
    if (cfg->micro_batch < 1 || cfg->accumulate < 1 || (int64_t)cfg->micro_batch * cfg->accumulate > INT32_MAX)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: micro_batch %d and accumulate %d must be >= 1 (and "
                          "their product below 2^31)", cfg->micro_batch, cfg->accumulate);
    if (cfg->threads < 0)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: threads must be >= 0, got %d", cfg->threads);
    const dlrm_config *mc = dlrm_get_config(dense);
    if (coll->cfg.num_features != mc->num_sparse)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: the collection has %d features, the model %d sparse "
                          "inputs", coll->cfg.num_features, mc->num_sparse);
    for (int32_t f = 0; f < coll->cfg.num_features; f++) {
        const ember_lfeature *fe = &coll->features[f];
        if (fe->combiner == EMBER_COMBINER_NONE)
            return model_fail(err, errlen, EMBER_EINVAL, "trainer: feature '%s' has combiner none (the model needs "
                              "one pooled embedding per feature)", fe->name);
        if (fe->dim != mc->emb_dim)
            return model_fail(err, errlen, EMBER_EINVAL, "trainer: feature '%s' has dim %d, the model's emb_dim is "
                              "%d", fe->name, fe->dim, mc->emb_dim);
    }
    return EMBER_OK;
}

/* The agreement slots, k*b rows of pooled buffers, a micro-batch of logits. */
static int alloc_buffers(ctr_model *m, char *err, size_t errlen)
{
    if (!(m->agree = calloc((size_t)m->size, sizeof *m->agree)))
        return model_fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory");
    int64_t b = m->cfg.micro_batch;
    if (model_grow_rows(m, b * m->cfg.accumulate) || !(m->logit = calloc((size_t)b, sizeof *m->logit)) ||
        !(m->dlogit = calloc((size_t)b, sizeof *m->dlogit)))
        return model_fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory (micro_batch %d, accumulate %d)",
                          m->cfg.micro_batch, m->cfg.accumulate);
    return EMBER_OK;
}

/* The thread counts of the settings (threads > 0) given to the handles
 * that run the step: the collection (the embedding step), the dense model
 * (its OpenMP team and BLAS threads: blas_threads, or threads when 0) and
 * the dense optimizer.  Nothing process-wide changes. */
static int apply_threads(ctr_model *m, char *err, size_t errlen)
{
    const model_config *cfg = &m->cfg;
    if (cfg->threads <= 0)
        return EMBER_OK;
    int st = ember_collection_set_threads(m->coll, cfg->threads);
    if (st != EMBER_OK)
        return model_fail(err, errlen, st, "trainer: %s", ember_errmsg(m->coll));
    dlrm_set_threads(m->dense, cfg->threads, cfg->blas_threads > 0 ? cfg->blas_threads : cfg->threads);
    dense_sync_set_threads(m->sync, cfg->threads);
    return EMBER_OK;
}

void model_set_threads(ctr_model *m, int32_t threads)
{
    int32_t t, blas;
    dlrm_get_threads(m->dense, &t, &blas);
    ember_collection_set_threads(m->coll, threads);
    dlrm_set_threads(m->dense, threads, blas);
    dense_sync_set_threads(m->sync, threads);
}

/* A whole pipelined step on zeros: the models a step keeps in flight are
 * made here, not mid-run. */
static int pipeline_warm_up(ctr_model *m, char *err, size_t errlen)
{
    const int32_t nd = dlrm_get_config(m->dense)->num_dense;
    const int64_t b = m->cfg.micro_batch, rows = b * m->cfg.accumulate;
    float *zd = calloc((size_t)(rows * (nd + 1)), sizeof *zd);
    double zl;
    char perr[400] = "";
    if (zd)
        memset(m->pooled, 0, (size_t)(rows * m->width) * sizeof *m->pooled);
    int st = EMBER_OK;
    if (!zd || pipe_step(m->pipe, (int32_t)rows, (int32_t)b, zd, m->pooled, zd + rows * nd, 1.0f, &zl, m->d_pooled,
                         perr, sizeof perr) != EMBER_OK)
        st = model_fail(err, errlen, EMBER_ENOMEM, "train.pipeline: %s", zd ? perr : "out of memory");
    free(zd);
    if (st == EMBER_OK) { /* a whole step's activations: what every step keeps at most */
        pipe_stats ps;
        pipe_get_stats(m->pipe, &ps);
        m->kept_bytes = ps.peak_activation_bytes;
        pipe_reset_stats(m->pipe);
    }
    return st;
}

/* The dense model cut into the replica group's stages (ranks g S .. g S +
 * S - 1), the cuts given or balanced, then warmed up; the stage's replicas
 * (the ranks r with the same r mod S, holding the same pieces) sum its
 * gradients. */
static int create_pipeline(ctr_model *m, char *err, size_t errlen)
{
    model_config *cfg = &m->cfg;
    int st = model_balance(cfg, dlrm_get_config(m->dense), m->world, err, errlen);
    if (st != EMBER_OK)
        return st;
    pipe_config pc = model_pipe_config(cfg);
    char perr[400] = "";
    if (pipe_create(&pc, m->dense, m->stage_world, &m->pipe, perr, sizeof perr))
        return model_fail(err, errlen, EMBER_EINVAL, "train.pipeline: %s", perr);
    m->embeds = pipe_runs(m->pipe, dlrm_get_config(m->dense)->num_bottom);
    return pipeline_warm_up(m, err, errlen);
}

/* The stage world (this rank's replica group, in rank order) and the
 * replica world (this rank's stage over the groups). */
static int split_worlds(ctr_model *m, char *err, size_t errlen)
{
    const int32_t S = m->cfg.pipe_stages;
    if (m->size % S)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: train.pipeline.stages %d does not divide the world "
                          "of %d", S, m->size);
    int st = ember_world_split(m->world, m->rank / S, m->rank, &m->stage_world);
    if (st == EMBER_OK)
        st = ember_world_split(m->world, m->rank % S, m->rank, &m->replica_world);
    if (st != EMBER_OK)
        return model_fail(err, errlen, st, "trainer: %s", m->world->errmsg);
    return EMBER_OK;
}

/* The dense model's activations sized for a whole micro-batch now. */
static int dense_warm_up(ctr_model *m, char *err, size_t errlen)
{
    const int64_t b = m->cfg.micro_batch;
    float *zeros = calloc((size_t)(b * (dlrm_get_config(m->dense)->num_dense + 1)), sizeof *zeros);
    if (!zeros)
        return model_fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory");
    memset(m->pooled, 0, (size_t)(b * m->width) * sizeof *m->pooled);
    int rc = dlrm_forward(m->dense, (int32_t)b, zeros, m->pooled, m->logit);
    if (rc == 0)
        dlrm_backward(m->dense, zeros, m->d_pooled);
    dlrm_zero_grads(m->dense);
    free(zeros);
    if (rc != 0)
        return model_fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory (the dense model's activations for "
                          "%d samples)", m->cfg.micro_batch);
    return EMBER_OK;
}

int model_create(const model_config *cfg, ember_collection *coll, dlrm *dense, ctr_model **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    int st = check_parts(cfg, coll, dense, err, errlen);
    if (st != EMBER_OK)
        return st;
    ctr_model *m = calloc(1, sizeof *m);
    if (!m)
        return model_fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory");
    m->cfg = *cfg;
    m->coll = coll;
    m->dense = dense;
    m->world = ember_collection_world(coll);
    m->rank = ember_world_rank(m->world);
    m->size = ember_world_size(m->world);
    m->num_sparse = dlrm_get_config(dense)->num_sparse;
    m->emb_dim = dlrm_get_config(dense)->emb_dim;
    m->width = ember_pooled_width(coll);
    m->nparams = dlrm_num_params(dense);
    m->ready_rows = -1;
    m->embeds = 1;
    const int piped = cfg->pipe_stages > 1;
    if ((st = alloc_buffers(m, err, errlen)) == EMBER_OK && (!piped || (st = split_worlds(m, err, errlen)) == 0) &&
        (st = dense_sync_create(piped ? m->replica_world : m->world, m->nparams, cfg->optim_group,
                                &cfg->dense_optim, &m->sync, err, errlen)) == EMBER_OK &&
        (st = apply_threads(m, err, errlen)) == EMBER_OK)
        st = piped ? create_pipeline(m, err, errlen) : dense_warm_up(m, err, errlen);
    if (st != EMBER_OK) {
        model_destroy(m);
        return st;
    }
    *out = m;
    return EMBER_OK;
}

void model_destroy(ctr_model *m)
{
    if (!m)
        return;
    dense_sync_destroy(m->sync);
    pipe_destroy(m->pipe);
    ember_world_destroy(m->stage_world);
    ember_world_destroy(m->replica_world);
    free(m->agree);
    free(m->pooled);
    free(m->pooled_next);
    free(m->d_pooled);
    free(m->logit);
    free(m->dlogit);
    free(m);
}

void model_announce(ctr_model *m, const ember_batch *const *batches, int32_t n)
{
    m->announce = batches;
    m->num_announce = n;
}

void model_set_next(ctr_model *m, const ember_batch *next) { m->next = next; }

void model_set_collection(ctr_model *m, ember_collection *coll)
{
    m->coll = coll;
    m->ready_rows = -1; /* nothing computed ahead belongs to it */
    ember_collection_set_threads(coll, m->cfg.threads);
}

void model_get_times(const ctr_model *m, model_times *out) { *out = m->times; }

int model_pipeline_stats(const ctr_model *m, double *busy_share, int64_t *peak_activation_bytes)
{
    pipe_stats ps = {0};
    if (m->pipe)
        pipe_get_stats(m->pipe, &ps);
    *busy_share = ps.step_s > 0 ? ps.busy_s / ps.step_s : 0;
    *peak_activation_bytes = ps.peak_activation_bytes;
    return m->pipe != NULL;
}

void model_get_memory(const ctr_model *m, model_memory *out)
{
    out->params = out->grads = dlrm_num_params(m->dense) * (int64_t)sizeof(float);
    out->state = dense_sync_state_bytes(m->sync);
    out->activations = m->kept_bytes;
    if (!m->pipe) /* one micro-batch's at a time */
        out->activations = dlrm_blocks_kept_floats(m->dense, 0, dlrm_num_blocks(m->dense)) * m->cfg.micro_batch *
                           (int64_t)sizeof(float);
}

int model_set_lr_scale(ctr_model *m, float scale)
{
    int st = ember_set_lr_scale(m->coll, scale);
    if (st == EMBER_OK)
        dense_sync_set_lr_scale(m->sync, scale);
    return st;
}

dense_sync *model_dense_sync(ctr_model *m) { return m->sync; }

ember_world *model_replica_world(ctr_model *m) { return m->replica_world ? m->replica_world : m->world; }
