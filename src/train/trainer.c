/*
 * trainer.c: one CTR training step (train.h, docs/training.md): the
 * embedding step once on the rank's k*b samples, the dense model micro-batch
 * by micro-batch, and the dense gradients made identical on every rank.
 *
 * Replication.  dense_sync.c sums the dense gradients of the R ranks in
 * rank order and applies the optimizer, its state replicated on every rank
 * or sharded over groups of ranks (trainer_config.optim_group); either way
 * every rank ends the step with the same parameter bits, and the sum does
 * not depend on timing.  It moves 2 (R-1)/R of the vector per rank, as a
 * ring all-reduce does, through the collection's communicator
 * (src/comm/comm.h), outside the embedding's byte counters.
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

#include "collection/collection.h"
#include "comm/comm.h"
#include "train/dense_sync.h"
#include "train/pipeline.h"
#include "train/train.h"

struct trainer {
    trainer_config cfg;
    ember_collection *coll;
    dlrm *model;
    dense_sync *sync;
    ember_world *world;
    int32_t rank, size;
    int32_t num_sparse, emb_dim;
    int64_t width;     /* pooled floats per sample (F * d)            */
    int64_t nparams;

    float *pooled, *d_pooled; /* [cap_rows][width]                    */
    float *pooled_next;       /* the begun batch's outputs (pipelined) */
    int64_t cap_rows;
    float *logit, *dlogit;    /* [micro_batch]                        */
    const ember_batch *const *announce; /* for the next step's ember_prefetch */
    int32_t num_announce;
    const ember_batch *next;  /* the batch the next step begins ahead    */
    int64_t *agree;           /* [size] statuses of the ranks           */
    int32_t ready_rows;       /* >= 0: pooled holds the outputs of the next
                                 step's batch (of that many samples), from
                                 the last step's ember_forward_end; -1: none */
    ember_world *stage_world; /* pipeline: this rank's replica group        */
    pipeline *pipe;           /* NULL: the model runs whole here            */
    int embeds;               /* 1: this rank runs the embedding step        */

    trainer_times times;
};

static int fail(char *err, size_t errlen, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int status, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

static int grow_rows(trainer *t, int64_t rows)
{
    if (rows <= t->cap_rows)
        return 0;
    size_t n = (size_t)(rows * t->width + 1);
    float *p = realloc(t->pooled, n * sizeof *p);
    if (p)
        t->pooled = p;
    float *d = realloc(t->d_pooled, n * sizeof *d);
    if (d)
        t->d_pooled = d;
    float *q = realloc(t->pooled_next, n * sizeof *q);
    if (q)
        t->pooled_next = q;
    if (!p || !d || !q)
        return -1;
    t->cap_rows = rows;
    return 0;
}

int trainer_create(const trainer_config *cfg, ember_collection *coll, dlrm *model, trainer **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    if (!cfg || !coll || !model)
        return fail(err, errlen, EMBER_EINVAL, "trainer_create: NULL argument");
    if (cfg->micro_batch < 1 || cfg->accumulate < 1 || (int64_t)cfg->micro_batch * cfg->accumulate > INT32_MAX)
        return fail(err, errlen, EMBER_EINVAL, "trainer: micro_batch %d and accumulate %d must be >= 1 (and their "
                    "product below 2^31)", cfg->micro_batch, cfg->accumulate);
    if (cfg->threads < 0)
        return fail(err, errlen, EMBER_EINVAL, "trainer: threads must be >= 0, got %d", cfg->threads);
    const dlrm_config *mc = dlrm_get_config(model);
    if (coll->cfg.num_features != mc->num_sparse)
        return fail(err, errlen, EMBER_EINVAL, "trainer: the collection has %d features, the model %d sparse inputs",
                    coll->cfg.num_features, mc->num_sparse);
    for (int32_t f = 0; f < coll->cfg.num_features; f++) {
        const ember_lfeature *fe = &coll->features[f];
        if (fe->combiner == EMBER_COMBINER_NONE)
            return fail(err, errlen, EMBER_EINVAL, "trainer: feature '%s' has combiner none (the model needs one "
                        "pooled embedding per feature)", fe->name);
        if (fe->dim != mc->emb_dim)
            return fail(err, errlen, EMBER_EINVAL, "trainer: feature '%s' has dim %d, the model's emb_dim is %d",
                        fe->name, fe->dim, mc->emb_dim);
    }

    trainer *t = calloc(1, sizeof *t);
    if (!t)
        return fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory");
    t->cfg = *cfg;
    t->coll = coll;
    t->model = model;
    t->world = ember_collection_world(coll);
    t->rank = ember_world_rank(t->world);
    t->size = ember_world_size(t->world);
    t->num_sparse = mc->num_sparse;
    t->emb_dim = mc->emb_dim;
    t->width = ember_pooled_width(coll);
    t->nparams = dlrm_num_params(model);
    t->ready_rows = -1;
    int st = EMBER_ENOMEM;
    if (!(t->agree = calloc((size_t)t->size, sizeof *t->agree))) {
        fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory");
        goto fail;
    }
    int64_t b = cfg->micro_batch;
    if (grow_rows(t, b * cfg->accumulate) || !(t->logit = calloc((size_t)b, sizeof *t->logit)) ||
        !(t->dlogit = calloc((size_t)b, sizeof *t->dlogit))) {
        fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory (micro_batch %d, accumulate %d)", cfg->micro_batch,
             cfg->accumulate);
        goto fail;
    }
    if ((st = dense_sync_create(t->world, t->nparams, cfg->optim_group, &cfg->dense_optim, &t->sync, err,
                                errlen)) != EMBER_OK)
        goto fail;
    if (cfg->threads > 0) {
        if ((st = ember_collection_set_threads(coll, cfg->threads)) != EMBER_OK) {
            fail(err, errlen, st, "trainer: %s", ember_errmsg(coll));
            goto fail;
        }
        dense_set_threads(cfg->threads);
        if (cfg->blas_threads > 0)
            dense_set_blas_threads(cfg->blas_threads);
    }
    t->embeds = 1;
    if (cfg->pipe_stages > 1) { /* the replica group's stages, in rank order */
        if (t->size % cfg->pipe_stages) {
            st = EMBER_EINVAL;
            fail(err, errlen, st, "trainer: train.pipeline.stages %d does not divide the world of %d",
                 cfg->pipe_stages, t->size);
            goto fail;
        }
        pipe_config pc;
        memset(&pc, 0, sizeof pc);
        pc.schedule = (pipe_schedule)cfg->pipe_schedule;
        pc.virtual_stages = cfg->pipe_virtual;
        pc.recompute = cfg->pipe_recompute;
        pc.num_cuts = cfg->pipe_num_cuts;
        memcpy(pc.cuts, cfg->pipe_cuts, sizeof pc.cuts);
        const int32_t P = cfg->pipe_stages * (cfg->pipe_virtual > 0 ? cfg->pipe_virtual : 1);
        if ((st = ember_world_split(t->world, t->rank / cfg->pipe_stages, t->rank, &t->stage_world)) != EMBER_OK) {
            fail(err, errlen, st, "trainer: %s", t->world->errmsg);
            goto fail;
        }
        if (!pc.num_cuts && P > 1 && P <= dlrm_num_blocks(model)) {
            if (pipe_balance(model, cfg->micro_batch, P, t->stage_world, pc.cuts, NULL, err, errlen)) {
                st = EMBER_EINVAL;
                goto fail;
            }
            pc.num_cuts = P - 1;
        }
        char perr[400] = "";
        if (pipe_create(&pc, model, t->stage_world, &t->pipe, perr, sizeof perr)) {
            st = EMBER_EINVAL;
            fail(err, errlen, st, "train.pipeline: %s", perr);
            goto fail;
        }
        t->embeds = pipe_runs(t->pipe, mc->num_bottom);
        /* a whole step on zeros now: the models a step keeps in flight are made here, not mid-run */
        int64_t rows = b * cfg->accumulate;
        float *zd = calloc((size_t)(rows * (mc->num_dense + 1)), sizeof *zd);
        double zl;
        if (zd)
            memset(t->pooled, 0, (size_t)(rows * t->width) * sizeof *t->pooled);
        if (!zd || pipe_step(t->pipe, (int32_t)rows, (int32_t)b, zd, t->pooled, zd + rows * mc->num_dense, 1.0f,
                             &zl, t->d_pooled, perr, sizeof perr) != EMBER_OK) {
            free(zd);
            st = EMBER_ENOMEM;
            fail(err, errlen, st, "train.pipeline: %s", zd ? perr : "out of memory");
            goto fail;
        }
        free(zd);
        pipe_reset_stats(t->pipe);
    }
    /* size the model's activations for a whole micro-batch now */
    float *zeros = calloc((size_t)(b * (mc->num_dense + 1)), sizeof *zeros);
    if (!zeros) {
        fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory");
        goto fail;
    }
    memset(t->pooled, 0, (size_t)(b * t->width) * sizeof *t->pooled);
    int mrc = dlrm_forward(model, (int32_t)b, zeros, t->pooled, t->logit);
    if (mrc == 0)
        dlrm_backward(model, zeros, t->d_pooled);
    dlrm_zero_grads(model);
    free(zeros);
    if (mrc != 0) {
        fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory (the dense model's activations for %d samples)",
             cfg->micro_batch);
        goto fail;
    }
    *out = t;
    return EMBER_OK;
fail:
    trainer_destroy(t);
    return st == EMBER_OK ? EMBER_ENOMEM : st;
}

void trainer_destroy(trainer *t)
{
    if (!t)
        return;
    dense_sync_destroy(t->sync);
    pipe_destroy(t->pipe);
    ember_world_destroy(t->stage_world);
    free(t->agree);
    free(t->pooled);
    free(t->pooled_next);
    free(t->d_pooled);
    free(t->logit);
    free(t->dlogit);
    free(t);
}

static int check_batch(const trainer *t, const ctr_batch *batch, char *err, size_t errlen)
{
    if (batch->batch_size < 0)
        return fail(err, errlen, EMBER_EINVAL, "trainer: negative batch size %d", batch->batch_size);
    if (batch->batch_size > 0 && batch->num_sparse != t->num_sparse)
        return fail(err, errlen, EMBER_EINVAL, "trainer: the batch has %d sparse features, the model %d",
                    batch->num_sparse, t->num_sparse);
    if (batch->batch_size > 0 && batch->num_dense != dlrm_get_config(t->model)->num_dense)
        return fail(err, errlen, EMBER_EINVAL, "trainer: the batch has %d dense features, the model %d",
                    batch->num_dense, dlrm_get_config(t->model)->num_dense);
    return EMBER_OK;
}

void trainer_announce(trainer *t, const ember_batch *const *batches, int32_t n)
{
    t->announce = batches;
    t->num_announce = n;
}

void trainer_set_next(trainer *t, const ember_batch *next) { t->next = next; }

/* The dense model's hook: the begun batch's exchanges move on. */
static void drive_exchanges(void *coll) { ember_forward_progress(coll); }

/* Wall time since *mark minus the exchange time counted since *comm goes to
 * *phase, the exchange time to t->times.exchange; both marks move on. */
/* Seconds inside the embedding's exchanges so far: the world's, and the
 * begun batches' own world's (step/schedule.c). */
static double comm_seconds(const trainer *t)
{
    return t->world->seconds + (t->coll->sched_world ? t->coll->sched_world->seconds : 0);
}

static void phase_end(trainer *t, double *mark, double *comm, double *phase)
{
    double now = ember_now(), c = comm_seconds(t);
    *phase += (now - *mark) - (c - *comm);
    t->times.exchange += c - *comm;
    *mark = now;
    *comm = c;
}

int trainer_step(trainer *t, const ctr_batch *batch, int64_t global, double *loss_sum, char *err, size_t errlen)
{
    int st;
    const int32_t n = batch->batch_size, b = t->cfg.micro_batch;
    const ember_batch *next = t->next;
    t->next = NULL;
    *loss_sum = 0;
    if ((st = check_batch(t, batch, err, errlen)) != EMBER_OK)
        return st; /* the same on every rank for a source's batches */
    if (n > (int64_t)b * t->cfg.accumulate)
        return fail(err, errlen, EMBER_EINVAL, "trainer: %d samples in a step of at most %d x %d", n,
                    t->cfg.accumulate, b);
    if (global < 1)
        return fail(err, errlen, EMBER_EINVAL, "trainer: global batch %lld", (long long)global);
    if (next && t->pipe) /* the same on every rank: the pipeline's settings are */
        return fail(err, errlen, EMBER_EINVAL, "trainer: train.pipeline needs the blocking schedule (no batch "
                    "begun ahead)");
    if (next || t->ready_rows >= 0) { /* checks one rank alone may fail: agreed before any collective */
        int64_t bad = 0, *all = t->agree;
        if (next && next->batch_size > (int64_t)b * t->cfg.accumulate)
            bad = fail(err, errlen, EMBER_EINVAL, "trainer: %d samples ahead in a step of at most %d x %d",
                       next->batch_size, t->cfg.accumulate, b);
        else if (t->ready_rows >= 0 && t->ready_rows != n)
            bad = fail(err, errlen, EMBER_ESTATE, "trainer: the step's batch has %d samples, the batch begun "
                       "ahead %d", n, t->ready_rows);
        if (ember_comm_allgather(t->world, &bad, sizeof bad, all) != EMBER_OK)
            return fail(err, errlen, EMBER_ECOMM, "trainer: %s", t->world->errmsg);
        for (int32_t r = 0; r < t->size; r++)
            if (all[r] != 0) {
                if (!bad)
                    fail(err, errlen, (int)all[r], "trainer: rank %d's batch does not match the one begun ahead", r);
                t->ready_rows = -1;
                return (int)all[r];
            }
    }

    /* a pipeline's other stages give the embedding step no samples */
    const ember_batch none = {0, batch->sparse.num_features, NULL, NULL, NULL, 0};
    const ember_batch *sparse = t->embeds ? &batch->sparse : &none;
    double mark = ember_now(), comm = comm_seconds(t);
    if (t->ready_rows < 0 && (st = ember_forward(t->coll, sparse, t->pooled, NULL)) != EMBER_OK)
        return fail(err, errlen, st, "%s", ember_errmsg(t->coll));
    t->ready_rows = -1;
    for (int32_t i = 0; i < t->num_announce; i++) /* read ahead while the dense model runs */
        if ((st = ember_prefetch(t->coll, t->announce[i])) != EMBER_OK)
            return fail(err, errlen, st, "%s", ember_errmsg(t->coll));
    t->num_announce = 0;
    /* the next batch: routed, its exchanges begun (ember_schedule) */
    if (next && (st = ember_forward_begin(t->coll, next, t->pooled_next, NULL)) != EMBER_OK)
        return fail(err, errlen, st, "%s", ember_errmsg(t->coll));
    phase_end(t, &mark, &comm, &t->times.emb_forward);

    dlrm_set_progress(t->model, next ? drive_exchanges : NULL, t->coll);
    dlrm_zero_grads(t->model);
    const float scale = (float)(1.0 / (double)global);
    const int32_t nd = batch->num_dense;
    double loss = 0;
    int dense_ok = 1;
    if (t->pipe && pipe_step(t->pipe, n, b, batch->dense, t->pooled, batch->label, scale, &loss, t->d_pooled,
                             err, errlen) != EMBER_OK) {
        /* keep the embedding and dense collectives in step; the step fails after them */
        dense_ok = 0;
        memset(t->d_pooled, 0, (size_t)((int64_t)n * t->width) * sizeof(float));
    }
    for (int32_t lo = 0; !t->pipe && lo < n; lo += b) {
        int32_t m = n - lo < b ? n - lo : b;
        if (dlrm_forward(t->model, m, batch->dense + (int64_t)lo * nd, t->pooled + (int64_t)lo * t->width,
                         t->logit) != 0) {
            /* cannot happen after create's warm-up; keep the collectives in step */
            dense_ok = 0;
            memset(t->d_pooled + (int64_t)lo * t->width, 0, (size_t)((int64_t)m * t->width) * sizeof(float));
            continue;
        }
        loss += dense_bce_logits(t->logit, batch->label + lo, m, scale, t->dlogit);
        dlrm_backward(t->model, t->dlogit, t->d_pooled + (int64_t)lo * t->width);
    }
    dlrm_set_progress(t->model, NULL, NULL);
    phase_end(t, &mark, &comm, &t->times.dense);

    if ((st = ember_backward(t->coll, t->d_pooled, NULL)) != EMBER_OK)
        return fail(err, errlen, st, "%s", ember_errmsg(t->coll));
    phase_end(t, &mark, &comm, &t->times.emb_backward);

    st = dense_sync_reduce(t->sync, dlrm_grads(t->model), err, errlen);
    phase_end(t, &mark, &comm, &t->times.reduce);
    if (st != EMBER_OK)
        return st;
    /* the update runs even after a dense failure, which cannot happen after
     * create's warm-up: the gather is collective */
    dense_sync_apply(t->sync, dlrm_params(t->model), dlrm_grads(t->model));
    phase_end(t, &mark, &comm, &t->times.dense);
    st = dense_sync_gather(t->sync, dlrm_params(t->model), err, errlen);
    phase_end(t, &mark, &comm, &t->times.reduce);
    if (st != EMBER_OK)
        return st;
    if (next) { /* the next batch's outputs, after this step's update (unless stale) */
        if ((st = ember_forward_end(t->coll)) != EMBER_OK)
            return fail(err, errlen, st, "%s", ember_errmsg(t->coll));
        float *p = t->pooled;
        t->pooled = t->pooled_next;
        t->pooled_next = p;
        t->ready_rows = next->batch_size;
        phase_end(t, &mark, &comm, &t->times.emb_forward);
    }
    if (!dense_ok)
        return t->pipe ? EMBER_ECOMM : fail(err, errlen, EMBER_ENOMEM, "trainer: the dense model ran out of memory");
    *loss_sum = loss;
    return EMBER_OK;
}

int trainer_predict(trainer *t, const ctr_batch *batch, float *prob, char *err, size_t errlen)
{
    int st;
    const int32_t n = batch->batch_size, b = t->cfg.micro_batch;
    if ((st = check_batch(t, batch, err, errlen)) != EMBER_OK)
        return st;
    if (t->ready_rows >= 0) /* the same on every rank */
        return fail(err, errlen, EMBER_ESTATE, "trainer: predict while the next step's batch is looked up ahead "
                    "(the last step was given a next batch)");
    int grown = grow_rows(t, n);
    /* every rank must make the same collective call: a failed growth
     * still runs the forward, on an empty batch */
    ember_batch empty = {0, batch->sparse.num_features, NULL, NULL, NULL, 0};
    ember_collection_set_training(t->coll, 0); /* predictions admit and evict no dynamic key */
    st = ember_forward(t->coll, grown ? &empty : &batch->sparse, t->pooled, NULL);
    ember_collection_set_training(t->coll, 1);
    if (grown)
        return fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory (predict on %d samples)", n);
    if (st != EMBER_OK)
        return fail(err, errlen, st, "%s", ember_errmsg(t->coll));
    const int32_t nd = batch->num_dense;
    for (int32_t lo = 0; lo < n; lo += b) {
        int32_t m = n - lo < b ? n - lo : b;
        if (dlrm_forward(t->model, m, batch->dense + (int64_t)lo * nd, t->pooled + (int64_t)lo * t->width,
                         t->logit) != 0)
            return fail(err, errlen, EMBER_ENOMEM, "trainer: the dense model ran out of memory");
        for (int32_t s = 0; s < m; s++)
            prob[lo + s] = dense_sigmoid(t->logit[s]);
    }
    return EMBER_OK;
}

void trainer_get_times(const trainer *t, trainer_times *out) { *out = t->times; }

int trainer_pipeline_stats(const trainer *t, double *busy_share, int64_t *peak_activation_bytes)
{
    pipe_stats ps = {0};
    if (t->pipe)
        pipe_get_stats(t->pipe, &ps);
    *busy_share = ps.step_s > 0 ? ps.busy_s / ps.step_s : 0;
    *peak_activation_bytes = ps.peak_activation_bytes;
    return t->pipe != NULL;
}

int trainer_set_lr_scale(trainer *t, float scale)
{
    int st = ember_set_lr_scale(t->coll, scale);
    if (st == EMBER_OK)
        dense_sync_set_lr_scale(t->sync, scale);
    return st;
}

dense_sync *trainer_dense_sync(trainer *t) { return t->sync; }
