/*
 * model.h: a CTR model, one training step and prediction (docs/training.md).
 * The training loop (src/train/) steps it; the predictor (src/infer/)
 * predicts with it, so a trained model scores exactly as the trainer's own
 * evaluation did.
 *
 * A ctr_model joins an ember_collection (the embedding tables, sharded over
 * the collection's world) and a dlrm (the dense model, replicated on every
 * rank, or with pipeline stages a part of it per stage).  One optimizer step over a global batch of G = R * k * b samples
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
 * With a next batch (model_set_next), its forward is split around the
 * step: begun after this step's forward, ended after its dense update.
 *
 * The embedding tables see exactly one optimizer step on all k*b samples:
 * accumulation changes only how the dense activations are computed, and
 * the dense gradient sum within 1e-6 of one k-times larger batch.
 *
 * Beside it in this folder: dense_sync.h (the dense update over the ranks),
 * pipeline.h (the dense model cut into pipeline stages), lr_schedule.h (a
 * factor on the learning rates by step) and metrics.h (AUC, log loss).
 */
#ifndef EMBER_MODEL_MODEL_H
#define EMBER_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "data/ctr.h"
#include "dense/dense.h"
#include "ember.h"

typedef struct ctr_model ctr_model;

typedef struct model_config {
    int32_t micro_batch;    /* b: samples per micro-batch per rank           */
    int32_t accumulate;     /* k: micro-batches per optimizer step (>= 1)     */
    dense_optim_config dense_optim;
    int32_t threads;        /* OpenMP threads of the embedding step, the
                               dense model and its optimizer; 0: the
                               handles' own settings stay                   */
    int32_t blas_threads;   /* OpenBLAS threads for the dense GEMMs; 0: as
                               threads.  1 keeps the whole step bit-identical
                               whatever `threads` is (dense.h)              */
    int32_t optim_group;    /* dense optimizer state: 0 replicated on every
                               rank; g >= 1 (dividing the world) sharded over
                               groups of g consecutive ranks (dense_sync.h);
                               the same parameter bits either way            */
    /* Pipeline stages (docs/pipeline.md): stages S > 1 (dividing the world)
     * cut the dense model over ranks g S .. g S + S - 1 of replica group g,
     * which must all be given the same batch; the embedding step runs on
     * the rank of the interaction's stage, the others give it none.  Steps
     * must then be full (k b samples). */
    int32_t pipe_stages, pipe_schedule, pipe_virtual, pipe_recompute;
    int32_t pipe_num_cuts, pipe_cuts[64]; /* 0 cuts: the balance rule        */
    int32_t pipe_balance_memory;          /* the rule balances: 0 time, 1
                                             memory (pipeline.h)            */
} model_config;

/* Time per phase, seconds, summed since create (this rank). */
typedef struct model_times {
    double emb_forward, exchange, dense, emb_backward, reduce;
} model_times;

/* The dense blocks this rank holds (held [dlrm_config_blocks(mc)]): all
 * without pipeline stages; with them, its stage's pieces (pipe_held) for
 * the cuts given or, when there are none, the balance rule's, which it
 * runs (rank 0 of world measures, so every replica group gets the same
 * cuts) and writes into cfg.  Make the dense model with dlrm_create_part
 * from held, then give model_create this very cfg and world.  Collective
 * over world when it balances.  0 or an ember status with err. */
int model_plan_dense(model_config *cfg, const dlrm_config *mc, ember_world *world, uint8_t *held, char *err,
                     size_t errlen);

/* coll and dense stay owned by the caller and must outlive the model.
 * With pipeline stages dense may be a part (model_plan_dense): each stage
 * then holds its pieces' parameters and optimizer state only, summed and
 * stepped over the stage's replicas (model_replica_world).
 * Checks that every feature is pooled with dim = the dense model's emb_dim.
 * The thread counts go to the handles (ember_collection_set_threads,
 * dlrm_set_threads): nothing process-wide changes.  Collective with
 * pipeline stages.  0 or an ember status with err. */
int model_create(const model_config *cfg, ember_collection *coll, dlrm *dense, ctr_model **out, char *err,
                 size_t errlen);
void model_destroy(ctr_model *m);
/* The OpenMP threads of the step's handles from now on (>= 1; the BLAS
 * threads stay): with one BLAS thread the results do not change. */
void model_set_threads(ctr_model *m, int32_t threads);

/* One optimizer step on this rank's local samples (batch_size = k * b, or
 * fewer at the end of a file: the last micro-batch is then short).  global
 * = the step's samples over all ranks (the loss is a mean over them).
 * *loss_sum = this rank's summed BCE.  Collective.  0 or an ember status
 * with err. */
int model_step(ctr_model *m, const ctr_batch *batch, int64_t global, double *loss_sum, char *err, size_t errlen);
/* Batches the next model_step announces to the collection right after its
 * embedding forward (ember_prefetch: the SSD tier reads their rows while the
 * dense model runs), in order; valid until that step returns.  Collective:
 * every rank announces the same number (an empty batch where it has none). */
void model_announce(ctr_model *m, const ember_batch *const *batches, int32_t n);

/* The batch the next model_step begins ahead (ember_forward_begin, the
 * collection's ember_schedule) while its own dense work runs, and ends
 * after its update: the step after must be given that very batch (its
 * outputs are then already there).  NULL (the default, reset by every
 * step): none, so the step after runs its own forward.  Give none before
 * model_predict, a checkpoint or the last step.  Valid until that step
 * returns.  Collective: every rank gives one (an empty batch where it has
 * none) or none. */
void model_set_next(ctr_model *m, const ember_batch *next);
/* The model's embedding step takes another collection of the same tables
 * and features over the same world (a table moved to a new placement), at a
 * step boundary with no batch begun ahead.  The caller owns both. */
void model_set_collection(ctr_model *m, ember_collection *coll);

/* Forward only: prob[s] = sigmoid(logit) for the batch's samples, the
 * dense model run in chunks of the micro-batch. */
int model_predict(ctr_model *m, const ctr_batch *batch, float *prob, char *err, size_t errlen);

void model_get_times(const ctr_model *m, model_times *out);
/* With pipeline stages: this rank's busy share of the pipelined steps and
 * the most activation bytes it kept at once for its backwards; 0 (both
 * zero) without. */
int model_pipeline_stats(const ctr_model *m, double *busy_share, int64_t *peak_activation_bytes);

/* Bytes this rank's dense model holds: its parameters (a pipeline stage's
 * pieces' only), their gradients, the optimizer state (its share when
 * sharded), and the activations it keeps for backwards at most (a stage's,
 * measured on create's warm-up step; unpipelined, one micro-batch's). */
typedef struct model_memory {
    int64_t params, grads, state, activations;
} model_memory;
void model_get_memory(const ctr_model *m, model_memory *out);

/* What stage s of cfg's pipeline (s = 0 without one) will hold, before
 * anything is made, as model_get_memory will say: its pieces' parameters,
 * gradients and optimizer state (the busiest rank's share when sharded
 * over groups of cfg->optim_group of the stage's `replicas`), and the
 * activations its schedule keeps at most over a step of full micro-batches
 * (pipe_plan_kept_bytes).  The cuts are cfg's, or the balance rule's,
 * measured in this process alone and written into cfg.  0, or an ember
 * status with err. */
int model_plan_memory(model_config *cfg, const dlrm_config *mc, int32_t s, int32_t replicas, model_memory *out,
                      char *err, size_t errlen);

/* Every learning rate of the model, dense and embedding, times scale from
 * the next step on (ember_set_lr_scale, dense_sync_set_lr_scale). */
int model_set_lr_scale(ctr_model *m, float scale);

/* The dense update the model owns (its optimizer state and step for
 * checkpoints: dense_sync.h).  Valid until destroy. */
struct dense_sync *model_dense_sync(ctr_model *m);
/* The world the dense update runs over: the ranks of this rank's pipeline
 * stage, one per replica group (the whole world without stages).  Rank 0
 * of it saves the stage's pieces. */
ember_world *model_replica_world(ctr_model *m);

#endif
