/*
 * model_step.c: one training step of a CTR model (model.h,
 * docs/training.md), as a sequence of phases, each timed apart:
 *
 *   check        the batch, the batch begun ahead (agreed over the ranks)
 *   emb_forward  the embedding forward (unless the last step looked this
 *                batch up ahead), the announced batches, the next batch
 *                begun
 *   dense        the dense model forward and backward, micro-batch by
 *                micro-batch (or the pipeline's schedule)
 *   emb_backward the sparse gradients and the fused optimizers
 *   reduce       the dense gradients summed over the ranks; the update;
 *                the sharded parameters gathered
 *   emb_forward  the next batch's outputs, after this step's update
 *
 * Time inside the embedding's exchanges is counted apart (times.exchange),
 * whichever phase it falls in.  A dense failure (which cannot happen after
 * create's warm-up) still runs every collective, so the ranks stay in step;
 * the step fails after them.
 */
#include <string.h>

#include "comm/comm.h"
#include "collection/collection.h"
#include "model/model_impl.h"

/* Where the current phase began: wall time and exchange seconds. */
typedef struct phase_clock {
    double mark, comm;
} phase_clock;

/* Seconds inside the embedding's exchanges so far: the world's, and the
 * begun batches' own world's (step/schedule.c). */
static double comm_seconds(const ctr_model *m)
{
    return m->world->seconds + (m->coll->sched_world ? m->coll->sched_world->seconds : 0);
}

/* The wall time since the phase began, less the exchange time in it, goes
 * to *phase, the exchange time to times.exchange; the next phase begins. */
static void phase_end(ctr_model *m, phase_clock *c, double *phase)
{
    double now = ember_now(), comm = comm_seconds(m);
    *phase += (now - c->mark) - (comm - c->comm);
    m->times.exchange += comm - c->comm;
    c->mark = now;
    c->comm = comm;
}

/* The dense model's hook: the begun batch's exchanges move on. */
static void drive_exchanges(void *coll) { ember_forward_progress(coll); }

/* The step's batch and the batch begun ahead.  Checks one rank alone may
 * fail are agreed before any collective: every rank returns the same. */
static int check_step(ctr_model *m, const ctr_batch *batch, const ember_batch *next, int64_t global, char *err,
                      size_t errlen)
{
    const int32_t n = batch->batch_size, b = m->cfg.micro_batch;
    int st = model_check_batch(m, batch, err, errlen);
    if (st != EMBER_OK)
        return st; /* the same on every rank for a source's batches */
    if (n > (int64_t)b * m->cfg.accumulate)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: %d samples in a step of at most %d x %d", n,
                          m->cfg.accumulate, b);
    if (global < 1)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: global batch %lld", (long long)global);
    if (next && m->pipe) /* the same on every rank: the pipeline's settings are */
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: train.pipeline needs the blocking schedule (no batch "
                          "begun ahead)");
    if (!next && m->ready_rows < 0)
        return EMBER_OK;
    int64_t bad = 0, *all = m->agree;
    if (next && next->batch_size > (int64_t)b * m->cfg.accumulate)
        bad = model_fail(err, errlen, EMBER_EINVAL, "trainer: %d samples ahead in a step of at most %d x %d",
                         next->batch_size, m->cfg.accumulate, b);
    else if (m->ready_rows >= 0 && m->ready_rows != n)
        bad = model_fail(err, errlen, EMBER_ESTATE, "trainer: the step's batch has %d samples, the batch begun "
                         "ahead %d", n, m->ready_rows);
    if (ember_comm_allgather(m->world, &bad, sizeof bad, all) != EMBER_OK)
        return model_fail(err, errlen, EMBER_ECOMM, "trainer: %s", m->world->errmsg);
    for (int32_t r = 0; r < m->size; r++)
        if (all[r] != 0) {
            if (!bad)
                model_fail(err, errlen, (int)all[r], "trainer: rank %d's batch does not match the one begun ahead",
                           r);
            m->ready_rows = -1;
            return (int)all[r];
        }
    return EMBER_OK;
}

/* The batch's pooled embeddings (unless looked up ahead), the announced
 * batches read ahead, the next batch routed and its exchanges begun. */
static int embedding_forward(ctr_model *m, const ctr_batch *batch, const ember_batch *next, char *err, size_t errlen)
{
    /* a pipeline's other stages give the embedding step no samples */
    const ember_batch none = {0, batch->sparse.num_features, NULL, NULL, NULL, 0};
    const ember_batch *sparse = m->embeds ? &batch->sparse : &none;
    int st;
    if (m->ready_rows < 0 && (st = ember_forward(m->coll, sparse, m->pooled, NULL)) != EMBER_OK)
        return model_fail(err, errlen, st, "%s", ember_errmsg(m->coll));
    m->ready_rows = -1;
    for (int32_t i = 0; i < m->num_announce; i++) /* read ahead while the dense model runs */
        if ((st = ember_prefetch(m->coll, m->announce[i])) != EMBER_OK)
            return model_fail(err, errlen, st, "%s", ember_errmsg(m->coll));
    m->num_announce = 0;
    if (next && (st = ember_forward_begin(m->coll, next, m->pooled_next, NULL)) != EMBER_OK)
        return model_fail(err, errlen, st, "%s", ember_errmsg(m->coll));
    return EMBER_OK;
}

/* The dense model forward and backward on the step's samples: *loss the
 * summed BCE, d_pooled the pooled embeddings' gradients, the dense grads
 * summed.  1, or 0 when the dense model failed (d_pooled then zero where
 * it did, so the collectives after stay in step). */
static int dense_forward_backward(ctr_model *m, const ctr_batch *batch, int driving, int64_t global, double *loss,
                                  char *err, size_t errlen)
{
    const int32_t n = batch->batch_size, b = m->cfg.micro_batch, nd = batch->num_dense;
    const float scale = (float)(1.0 / (double)global);
    int ok = 1;
    dlrm_set_progress(m->dense, driving ? drive_exchanges : NULL, m->coll);
    dlrm_zero_grads(m->dense);
    *loss = 0;
    if (m->pipe && pipe_step(m->pipe, n, b, batch->dense, m->pooled, batch->label, scale, loss, m->d_pooled, err,
                             errlen) != EMBER_OK) {
        ok = 0;
        memset(m->d_pooled, 0, (size_t)((int64_t)n * m->width) * sizeof(float));
    }
    for (int32_t lo = 0; !m->pipe && lo < n; lo += b) {
        int32_t rows = n - lo < b ? n - lo : b;
        if (dlrm_forward(m->dense, rows, batch->dense + (int64_t)lo * nd, m->pooled + (int64_t)lo * m->width,
                         m->logit) != 0) {
            ok = 0;
            memset(m->d_pooled + (int64_t)lo * m->width, 0, (size_t)((int64_t)rows * m->width) * sizeof(float));
            continue;
        }
        *loss += dense_bce_logits(m->logit, batch->label + lo, rows, scale, m->dlogit);
        dlrm_backward(m->dense, m->dlogit, m->d_pooled + (int64_t)lo * m->width);
    }
    dlrm_set_progress(m->dense, NULL, NULL);
    return ok;
}

/* The dense gradients summed over the ranks, the optimizer step, the
 * parameters gathered (sharded state): the same bits on every rank.  The
 * update runs even after a dense failure: the gather is collective. */
static int dense_update(ctr_model *m, phase_clock *c, char *err, size_t errlen)
{
    int st = dense_sync_reduce(m->sync, dlrm_grads(m->dense), err, errlen);
    phase_end(m, c, &m->times.reduce);
    if (st != EMBER_OK)
        return st;
    dense_sync_apply(m->sync, dlrm_params(m->dense), dlrm_grads(m->dense));
    phase_end(m, c, &m->times.dense);
    st = dense_sync_gather(m->sync, dlrm_params(m->dense), err, errlen);
    phase_end(m, c, &m->times.reduce);
    return st;
}

/* The next batch's outputs, after this step's update (unless stale): they
 * become the next step's pooled embeddings. */
static int end_ahead(ctr_model *m, const ember_batch *next, char *err, size_t errlen)
{
    int st = ember_forward_end(m->coll);
    if (st != EMBER_OK)
        return model_fail(err, errlen, st, "%s", ember_errmsg(m->coll));
    float *p = m->pooled;
    m->pooled = m->pooled_next;
    m->pooled_next = p;
    m->ready_rows = next->batch_size;
    return EMBER_OK;
}

int model_step(ctr_model *m, const ctr_batch *batch, int64_t global, double *loss_sum, char *err, size_t errlen)
{
    const ember_batch *next = m->next;
    m->next = NULL;
    *loss_sum = 0;
    int st = check_step(m, batch, next, global, err, errlen);
    if (st != EMBER_OK)
        return st;
    phase_clock c = {ember_now(), comm_seconds(m)};
    if ((st = embedding_forward(m, batch, next, err, errlen)) != EMBER_OK)
        return st;
    phase_end(m, &c, &m->times.emb_forward);
    double loss = 0;
    int dense_ok = dense_forward_backward(m, batch, next != NULL, global, &loss, err, errlen);
    phase_end(m, &c, &m->times.dense);
    if ((st = ember_backward(m->coll, m->d_pooled, NULL)) != EMBER_OK)
        return model_fail(err, errlen, st, "%s", ember_errmsg(m->coll));
    phase_end(m, &c, &m->times.emb_backward);
    if ((st = dense_update(m, &c, err, errlen)) != EMBER_OK)
        return st;
    if (next) {
        if ((st = end_ahead(m, next, err, errlen)) != EMBER_OK)
            return st;
        phase_end(m, &c, &m->times.emb_forward);
    }
    if (!dense_ok)
        return m->pipe ? EMBER_ECOMM
                       : model_fail(err, errlen, EMBER_ENOMEM, "trainer: the dense model ran out of memory");
    *loss_sum = loss;
    return EMBER_OK;
}
