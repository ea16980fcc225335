/*
 * synth.c: synthetic batches with the benchmark workloads' id distribution.
 *
 * Every bag holds exactly `pooling` ids.  zipf: a rank k in 1..rows is drawn
 * from the bounded Zipf(alpha) law P(k) ~ k^-alpha by rejection-inversion
 * (Hörmann & Derflinger 1996, "Rejection-inversion to generate variates from
 * monotone discrete distributions"), then mapped to row ((k-1)*2654435761) %
 * rows so that the hot rows are scattered over the table; uniform: every row
 * equally likely (Lemire's multiply-and-reject, no modulo bias).
 *
 * Design choice: the random numbers are counter-based.  The ids of one bag
 * (table t, batch number n, sample b) come from a splitmix64 stream whose
 * start is a hash of (seed, t, n*batch_size + b), and weights from a second,
 * independent key.  So tables are independent streams, a batch is a pure
 * function of (config, n), asking for weights never changes the ids, and the
 * bags can be drawn in parallel without the thread count changing a bit.
 * The arrays are allocated once by create and rewritten by every next.
 * A drift (ember_drift) changes only the drifting tables' law from batch
 * to batch: their ranks come from the epoch's law and move as zipf.h says.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/rng.h"
#include "core/status.h"
#include "data/data_error.h"
#include "data/zipf.h"
#include "ember.h"

#define SYNTH_WEIGHT_SALT 0x5851f42d4c957f2dULL /* weight key from table key */

struct ember_synth {
    ember_handle_msg head; /* first: ember_errmsg's (next fails only on NULL) */
    char msg[128];
    ember_synth_config cfg;
    zipf_law zipf;
    uint64_t *id_key;     /* [tables]                                 */
    uint64_t *weight_key; /* [tables]                                 */
    int64_t batches;      /* batches made so far: n of the next batch */
    int64_t num_ids;
    int32_t *lengths;     /* [tables * batch_size], all = pooling     */
    int64_t *ids;         /* [num_ids]                                */
    float *weights;       /* [num_ids] or NULL                        */
};

ember_synth_config ember_synth_config_default(void)
{
    ember_synth_config c = {
        .tables = 8,
        .rows = 1000000,
        .batch_size = 4096,
        .pooling = 20,
        .zipf = 1,
        .alpha = 1.05,
        .weighted = 0,
        .seed = 0,
        .drift = EMBER_DRIFT_NONE,
        .drift_every = 0,
        .drift_rows = 0,
        .drift_tables = 0,
        .drift_start = 0,
    };
    return c;
}

static int synth_check_config(const ember_synth_config *c, int64_t *num_ids)
{
    int64_t bags;
    if (c->tables < 1) {
        ember_data_set_error("ember_synth_create: tables = %d, must be >= 1", c->tables);
        return EMBER_EINVAL;
    }
    if (c->rows < 1 || c->rows > (INT64_C(1) << 53)) {
        ember_data_set_error("ember_synth_create: rows = %lld, must be in [1, 2^53]",
                             (long long)c->rows);
        return EMBER_EINVAL;
    }
    if (c->batch_size < 1) {
        ember_data_set_error("ember_synth_create: batch_size = %d, must be >= 1", c->batch_size);
        return EMBER_EINVAL;
    }
    if (c->pooling < 1) {
        ember_data_set_error("ember_synth_create: pooling = %d, must be >= 1", c->pooling);
        return EMBER_EINVAL;
    }
    if (c->zipf && !(c->alpha > 0.0 && isfinite(c->alpha))) {
        ember_data_set_error("ember_synth_create: alpha = %g, zipf needs a finite alpha > 0",
                             c->alpha);
        return EMBER_EINVAL;
    }
    if (c->drift != EMBER_DRIFT_NONE && c->drift != EMBER_DRIFT_ROTATE && c->drift != EMBER_DRIFT_GROW) {
        ember_data_set_error("ember_synth_create: drift = %d, must be none, rotate or grow", (int)c->drift);
        return EMBER_EINVAL;
    }
    if (c->drift != EMBER_DRIFT_NONE &&
        (c->drift_every < 1 || c->drift_rows < 1 || c->drift_rows > c->rows || c->drift_tables < 0 ||
         c->drift_start < 0 || c->drift_start > c->rows)) {
        ember_data_set_error("ember_synth_create: drift %s needs drift_every >= 1 (it is %lld), drift_rows in "
                             "[1, rows = %lld] (it is %lld), drift_tables >= 0 (it is %d) and drift_start in [0, rows] (it is "
                             "%lld)",
                             c->drift == EMBER_DRIFT_ROTATE ? "rotate" : "grow", (long long)c->drift_every,
                             (long long)c->rows, (long long)c->drift_rows, (int)c->drift_tables,
                             (long long)c->drift_start);
        return EMBER_EINVAL;
    }
    if (__builtin_mul_overflow((int64_t)c->tables, (int64_t)c->batch_size, &bags) ||
        bags > INT32_MAX || __builtin_mul_overflow(bags, (int64_t)c->pooling, num_ids) ||
        *num_ids > (INT64_C(1) << 40)) {
        ember_data_set_error("ember_synth_create: tables %d x batch_size %d x pooling %d ids "
                             "is too many",
                             c->tables, c->batch_size, c->pooling);
        return EMBER_EINVAL;
    }
    return EMBER_OK;
}

int ember_synth_create(const ember_synth_config *cfg, ember_synth **out)
{
    ember_synth *s = NULL;
    int64_t num_ids = 0, bags;
    int rc;

    if (out)
        *out = NULL;
    if (!cfg || !out) {
        ember_data_set_error("ember_synth_create: %s is NULL", cfg ? "out" : "cfg");
        return EMBER_EINVAL;
    }
    rc = synth_check_config(cfg, &num_ids);
    if (rc)
        return rc;
    bags = (int64_t)cfg->tables * cfg->batch_size;

    s = calloc(1, sizeof *s);
    if (!s)
        goto fail;
    ember_handle_begin(&s->head, s->msg, sizeof s->msg);
    s->cfg = *cfg;
    s->num_ids = num_ids;
    s->id_key = malloc((size_t)cfg->tables * sizeof *s->id_key);
    s->weight_key = malloc((size_t)cfg->tables * sizeof *s->weight_key);
    s->lengths = malloc((size_t)bags * sizeof *s->lengths);
    s->ids = malloc((size_t)num_ids * sizeof *s->ids);
    if (!s->id_key || !s->weight_key || !s->lengths || !s->ids)
        goto fail;
    if (cfg->weighted) {
        s->weights = malloc((size_t)num_ids * sizeof *s->weights);
        if (!s->weights)
            goto fail;
    }
    if (cfg->zipf)
        zipf_law_init(&s->zipf, cfg->rows, cfg->alpha);
    for (int32_t t = 0; t < cfg->tables; t++) {
        s->id_key[t] = ember_mix64(cfg->seed ^ ember_mix64((uint64_t)t * SYNTH_BAG_MUL + SYNTH_GAMMA));
        s->weight_key[t] = ember_mix64(s->id_key[t] ^ SYNTH_WEIGHT_SALT);
    }
    for (int64_t i = 0; i < bags; i++)
        s->lengths[i] = cfg->pooling;
    *out = s;
    return EMBER_OK;

fail:
    ember_synth_destroy(s);
    ember_data_set_error("ember_synth_create: out of memory for %lld ids", (long long)num_ids);
    return EMBER_ENOMEM;
}

int ember_synth_next(ember_synth *s, ember_batch *batch)
{
    if (!s || !batch)
        return ember_handle_fail(s ? &s->head : NULL, EMBER_EINVAL, "ember_synth_next: %s is NULL",
                                 s ? "batch" : "synth");
    const ember_synth_config *c = &s->cfg;
    const int64_t bags = (int64_t)c->tables * c->batch_size;
    const int64_t first_bag = s->batches * c->batch_size; /* counter of sample 0 */
    const int32_t P = c->pooling;
    const uint64_t rows = (uint64_t)c->rows;
    /* the drift's epoch of this batch, and its law (grow: over fewer ranks) */
    const int64_t epoch = c->drift != EMBER_DRIFT_NONE ? s->batches / c->drift_every : 0;
    const int32_t drifting = c->drift == EMBER_DRIFT_NONE ? 0 : c->drift_tables > 0 ? c->drift_tables : c->tables;
    const int64_t support = drift_support(c->drift, c->rows, c->drift_rows, c->drift_start, epoch);
    zipf_law law = s->zipf;
    if (c->zipf && support != c->rows)
        zipf_law_init(&law, support, c->alpha);

    /* bag g = t * batch_size + b: feature-major, then sample */
#pragma omp parallel for schedule(static) if (s->num_ids >= 65536)
    for (int64_t g = 0; g < bags; g++) {
        int32_t t = (int32_t)(g / c->batch_size);
        uint64_t counter = (uint64_t)(first_bag + g % c->batch_size) * SYNTH_BAG_MUL;
        uint64_t st = ember_mix64(s->id_key[t] ^ counter);
        int64_t *ids = s->ids + g * P;
        if (t < drifting) {
            for (int32_t i = 0; i < P; i++) {
                int64_t k = c->zipf ? zipf_rank(&law, &st) : uniform_row((uint64_t)support, &st) + 1;
                ids[i] = drift_row(c->drift, k, c->drift_rows, epoch, rows);
            }
        } else if (c->zipf) {
            for (int32_t i = 0; i < P; i++)
                ids[i] = rank_to_row(zipf_rank(&s->zipf, &st), rows);
        } else {
            for (int32_t i = 0; i < P; i++)
                ids[i] = uniform_row(rows, &st);
        }
        if (s->weights) {
            uint64_t wst = ember_mix64(s->weight_key[t] ^ counter);
            float *w = s->weights + g * P;
            for (int32_t i = 0; i < P; i++) /* 24 bits: exact in float, < 1.5 */
                w[i] = 0.5f + (float)(stream_next(&wst) >> 40) * 0x1.0p-24f;
        }
    }
    s->batches++;

    batch->batch_size = c->batch_size;
    batch->num_features = c->tables;
    batch->lengths = s->lengths;
    batch->ids = s->ids;
    batch->weights = s->weights;
    batch->num_ids = s->num_ids;
    return EMBER_OK;
}

void ember_synth_destroy(ember_synth *s)
{
    if (!s)
        return;
    free(s->id_key);
    free(s->weight_key);
    free(s->lengths);
    free(s->ids);
    free(s->weights);
    ember_handle_end(&s->head);
    free(s);
}
