/*
 * model_predict.c: a CTR model's prediction (model.h): the embedding
 * forward on the whole batch, then the dense model in chunks of the
 * micro-batch, as the training step runs it, so that the trainer's
 * evaluation and the predictor score alike, bit for bit.
 *
 * With pipeline stages the embedding forward runs on the interaction's
 * stage and the dense model as a forward-only pipeline (pipe_forward): every
 * stage of a replica group gets the same probabilities, those of the
 * unpipelined model bit for bit.
 *
 * Prediction admits and evicts no dynamic key (the collection is out of
 * training mode for the forward).  A batch larger than the step's grows
 * the pooled buffers once; when that fails the forward still runs, on an
 * empty batch, so that every rank makes the same collective call.
 */
#include "comm/collect.h"
#include "model/model_impl.h"

int model_predict(ctr_model *m, const ctr_batch *batch, float *prob, char *err, size_t errlen)
{
    const int32_t n = batch->batch_size, b = m->cfg.micro_batch;
    int st = model_check_batch(m, batch, err, errlen);
    if (st != EMBER_OK)
        return st;
    if (m->ready_rows >= 0) /* the same on every rank */
        return model_fail(err, errlen, EMBER_ESTATE, "trainer: predict while the next step's batch is looked up "
                          "ahead (the last step was given a next batch)");
    int grown = model_grow_rows(m, n);
    ember_batch empty = {0, batch->sparse.num_features, NULL, NULL, NULL, 0};
    ember_collection_set_training(m->coll, 0);
    st = ember_forward(m->coll, grown || !m->embeds ? &empty : &batch->sparse, m->pooled, NULL);
    ember_collection_set_training(m->coll, 1);
    int64_t any = grown || st != EMBER_OK; /* a stage that cannot go on stops its group: pipe_forward is collective */
    if (m->pipe && ember_comm_reduce_i64(m->stage_world, &any, 1, EMBER_REDUCE_MAX) != EMBER_OK)
        any = 1;
    if (grown)
        return model_fail(err, errlen, EMBER_ENOMEM, "trainer: out of memory (predict on %d samples)", n);
    if (st != EMBER_OK)
        return model_fail(err, errlen, st, "%s", ember_errmsg(m->coll));
    if (any)
        return model_fail(err, errlen, EMBER_ENOMEM, "trainer: another pipeline stage could not predict on %d "
                          "samples", n);
    const int32_t nd = batch->num_dense;
    if (m->pipe) {
        if ((st = pipe_forward(m->pipe, n, b, batch->dense, m->pooled, prob, err, errlen)) != EMBER_OK)
            return st;
        for (int32_t s = 0; s < n; s++)
            prob[s] = dense_sigmoid(prob[s]);
        return EMBER_OK;
    }
    for (int32_t lo = 0; lo < n; lo += b) {
        int32_t rows = n - lo < b ? n - lo : b;
        if (dlrm_forward(m->dense, rows, batch->dense + (int64_t)lo * nd, m->pooled + (int64_t)lo * m->width,
                         m->logit) != 0)
            return model_fail(err, errlen, EMBER_ENOMEM, "trainer: the dense model ran out of memory");
        for (int32_t s = 0; s < rows; s++)
            prob[lo + s] = dense_sigmoid(m->logit[s]);
    }
    return EMBER_OK;
}
