/*
 * train.h: one CTR training step and the metrics around it
 * (docs/training.md).  The whole run around it (set-up, the loop,
 * evaluation, checkpoints, events) is the trainer of include/ember-train.h
 * (run.h).
 *
 * A trainer joins an ember_collection (the embedding tables, sharded over
 * the collection's world) and a dlrm (the dense model, replicated on every
 * rank).  One optimizer step over a global batch of G = R * k * b samples
 * (R ranks, k micro-batches of b samples each per rank, gradient accumulation):
 *
 *   ember_forward(this rank's k*b samples)            -> pooled [k*b][F*d]
 *   for each micro-batch j < k:
 *       dlrm_forward(micro j) ; loss, dlogit = (sigmoid - y) / G
 *       dlrm_backward -> grads += ... ; d_pooled rows of micro j
 *   ember_backward(d_pooled)                          (sparse update, once)
 *   dense grads: summed over ranks in rank order (reduce-scatter by chunks,
 *   then all-gather), so every rank holds the same bits; dense optimizer step.
 *
 * With a next batch (trainer_set_next), its forward is split around the
 * step: begun after this step's forward, ended after its dense update.
 *
 * The embedding tables see exactly one optimizer step on all k*b samples:
 * accumulation changes only how the dense activations are computed, and
 * the dense gradient sum within 1e-6 of one k-times larger batch.
 */
#ifndef EMBER_TRAIN_H
#define EMBER_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "data/ctr.h"
#include "dense/dense.h"
#include "ember.h"

typedef struct trainer trainer;

typedef struct trainer_config {
    int32_t micro_batch;    /* b: samples per micro-batch per rank           */
    int32_t accumulate;     /* k: micro-batches per optimizer step (>= 1)     */
    dense_optim_config dense_optim;
    int32_t threads;        /* OpenMP threads (embedding, dense optimizer)   */
    int32_t blas_threads;   /* OpenBLAS threads for the dense GEMMs; 0: as
                               threads.  1 keeps the whole step bit-identical
                               whatever `threads` is (dense.h)              */
    int32_t optim_group;    /* dense optimizer state: 0 replicated on every
                               rank; g >= 1 (dividing the world) sharded over
                               groups of g consecutive ranks (dense_sync.h);
                               the same parameter bits either way            */
    /* Pipeline stages (docs/training.md, "Pipeline stages"): stages S > 1
     * (dividing the world) cut the dense model over ranks g S .. g S + S - 1
     * of replica group g, which must all be given the same batch; the
     * embedding step runs on the rank of the interaction's stage, the
     * others give it none.  Steps must then be full (k b samples). */
    int32_t pipe_stages, pipe_schedule, pipe_virtual, pipe_recompute;
    int32_t pipe_num_cuts, pipe_cuts[64]; /* 0 cuts: the balance rule        */
} trainer_config;

/* Time per phase, seconds, summed since create (this rank). */
typedef struct trainer_times {
    double emb_forward, exchange, dense, emb_backward, reduce;
} trainer_times;

/* coll and model stay owned by the caller and must outlive the trainer.
 * Checks that every feature is pooled with dim = model's emb_dim. */
int trainer_create(const trainer_config *cfg, ember_collection *coll, dlrm *model, trainer **out, char *err,
                   size_t errlen);
void trainer_destroy(trainer *t);

/* One optimizer step on this rank's local samples (batch_size = k * b, or
 * fewer at the end of a file: the last micro-batch is then short).  global
 * = the step's samples over all ranks (the loss is a mean over them).
 * *loss_sum = this rank's summed BCE.  Collective.  0 or an ember status
 * with err. */
int trainer_step(trainer *t, const ctr_batch *batch, int64_t global, double *loss_sum, char *err, size_t errlen);
/* Batches the next trainer_step announces to the collection right after its
 * embedding forward (ember_prefetch: the SSD tier reads their rows while the
 * dense model runs), in order; valid until that step returns.  Collective:
 * every rank announces the same number (an empty batch where it has none). */
void trainer_announce(trainer *t, const ember_batch *const *batches, int32_t n);

/* The batch the next trainer_step begins ahead (ember_forward_begin, the
 * collection's ember_schedule) while its own dense work runs, and ends
 * after its update: the step after must be given that very batch (its
 * outputs are then already there).  NULL (the default, reset by every
 * step): none, so the step after runs its own forward.  Give none before
 * trainer_predict, a checkpoint or the last step.  Valid until that step
 * returns.  Collective: every rank gives one (an empty batch where it has
 * none) or none. */
void trainer_set_next(trainer *t, const ember_batch *next);

/* Forward only: prob[s] = sigmoid(logit) for the batch's samples. */
int trainer_predict(trainer *t, const ctr_batch *batch, float *prob, char *err, size_t errlen);

void trainer_get_times(const trainer *t, trainer_times *out);
/* With pipeline stages: this rank's busy share of the pipelined steps and
 * the most activation bytes it kept at once for its backwards; 0 (both
 * zero) without. */
int trainer_pipeline_stats(const trainer *t, double *busy_share, int64_t *peak_activation_bytes);

/* The dense update the trainer owns (its optimizer state and step for
 * checkpoints: train/dense_sync.h).  Valid until destroy. */
struct dense_sync *trainer_dense_sync(trainer *t);

/* ------------------------------------------------- learning-rate schedule */

typedef enum lr_decay { LR_DECAY_NONE = 0, LR_DECAY_LINEAR, LR_DECAY_COSINE, LR_DECAY_STEP } lr_decay;

/* A factor on every learning rate, by step (1-based) of a run of `steps`:
 *   step <= warmup:  step / warmup                       (linear warm-up)
 *   after:           p = (step - warmup - 1) / (steps - warmup - 1), in [0, 1]
 *                    (0 when that span is empty)
 *     none    1
 *     linear  1 + (final - 1) p
 *     cosine  final + (1 - final) (1 + cos(pi p)) / 2
 *     step    gamma ^ floor((step - warmup - 1) / every)
 * In double, returned as float.  The zero schedule is "none". */
typedef struct lr_schedule {
    int64_t warmup;
    lr_decay decay;
    float final;         /* linear, cosine: the factor at the last step */
    int64_t every;       /* step: steps between decays                  */
    float gamma;         /* step: the factor each time                  */
} lr_schedule;

/* 0, or -1 with err naming the bad field. */
int lr_schedule_check(const lr_schedule *s, char *err, size_t errlen);
float lr_schedule_scale(const lr_schedule *s, int64_t step, int64_t steps);

/* Every learning rate of the trainer, dense and embedding, times scale
 * from the next step on (ember_set_lr_scale, dense_sync_set_lr_scale). */
int trainer_set_lr_scale(trainer *t, float scale);

/* ------------------------------------------------------------ metrics */

/* Area under the ROC curve of scores against 0/1 labels; ties count one
 * half (the Mann-Whitney statistic).  0.5 when one class is absent. */
double metric_auc(const float *score, const float *label, int64_t n);
/* Mean log loss with p clamped to [1e-7, 1 - 1e-7]. */
double metric_logloss(const float *prob, const float *label, int64_t n);

#endif
