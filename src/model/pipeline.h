/*
 * pipeline.h: the dense model cut into pipeline stages over the ranks of a
 * world, one step of k micro-batches at a time (docs/pipeline.md).
 *
 * The model's chain of blocks (dense.h, dlrm_forward_blocks) is cut into
 * P = S * v consecutive pieces; piece j runs on rank j mod S of the stage
 * world (S ranks), so v > 1 (the interleaved schedule) gives each rank v
 * pieces.  Activations go forward and their gradients back point to point.
 * Every rank holds the whole model's parameters but computes, and adds
 * gradients to, only its own pieces' (dlrm_block_params).
 *
 * Schedules (per rank, F m / B m the forward / backward of micro-batch m):
 *   fill-drain  every forward, then every backward
 *   1f1b        S - s - 1 forwards, then one forward and one backward in
 *               turn, then the remaining backwards
 *   interleaved 1f1b over the rank's v pieces (Narayanan et al. 2021):
 *               2 (S - s - 1) + (v - 1) S piece-forwards first, over a
 *               multiple of S micro-batches
 * Backwards always take a piece's micro-batches in order 0 .. k-1, so each
 * parameter's gradient is the same sum, in the same order, as the
 * unpipelined model's over the same micro-batches: the bits are the same
 * for every schedule and cut, with or without recomputation (which keeps
 * a piece's input only and runs its forward again before the backward).
 */
#ifndef EMBER_MODEL_PIPELINE_H
#define EMBER_MODEL_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "dense/dense.h"
#include "ember.h"

#define PIPE_MAX_PIECES 64

typedef enum pipe_schedule { PIPE_FILL_DRAIN = 0, PIPE_1F1B = 1, PIPE_INTERLEAVED = 2 } pipe_schedule;

typedef struct pipe_config {
    pipe_schedule schedule;
    int32_t virtual_stages;          /* v: pieces per rank; > 1 only for interleaved */
    int recompute;                   /* 1: keep pieces' inputs only                 */
    int32_t num_cuts;                /* 0: the blocks split as evenly as they go     */
    int32_t cuts[PIPE_MAX_PIECES];   /* else S v - 1 increasing first blocks of
                                        pieces 1 .. P-1                              */
} pipe_config;

/* schedule with no cuts (pipe_create then splits the blocks evenly), no
 * recomputation, and 2 pieces per rank for the interleaved schedule, 1 for
 * the others. */
pipe_config pipe_config_default(pipe_schedule schedule);
/* "fill-drain", "1f1b", "interleaved" (the config's names); NULL if unknown. */
const char *pipe_schedule_name(pipe_schedule schedule);

/* Since create, on this rank. */
typedef struct pipe_stats {
    double busy_s;                   /* inside forward, backward and the loss       */
    double step_s;                   /* inside pipe_step                            */
    int64_t peak_activation_bytes;   /* activations kept at once for backwards: the
                                        pieces' kept floats (dlrm_block_kept_floats)
                                        per micro-batch in flight, or with
                                        recomputation the stashed inputs and one
                                        piece's recomputed activations             */
    int32_t peak_in_flight;          /* micro-batch pieces kept at once              */
} pipe_stats;

typedef struct pipeline pipeline;

/* model: this rank's full model (same config and parameters on every rank;
 * stays the caller's and must outlive the pipe).  stages: the S ranks, in
 * stage order (the caller's).  Collective over stages.  0, or -1 with err. */
int pipe_create(const pipe_config *cfg, dlrm *model, ember_world *stages, pipeline **out, char *err, size_t errlen);
void pipe_destroy(pipeline *p);

/* The rank of the stage world that runs block b. */
int32_t pipe_owner(const pipeline *p, int32_t block);
/* Whether this rank runs block b. */
int pipe_runs(const pipeline *p, int32_t block);

/* One step of n samples (>= 0, the same on every rank of the stage world)
 * in micro-batches of b, the last one short (the interleaved schedule adds
 * empty ones up to a multiple of S): dense [n][num_dense] on the rank of
 * block 0, pooled [n][F d] on the interaction's, labels [n] on the last
 * block's (NULL elsewhere).  Grads of this rank's pieces += the
 * step's (micro-batch by micro-batch, in order); *loss_sum = the BCE sum
 * with dlogit = scale (sigmoid - y) on the last block's rank (0
 * elsewhere); d_pooled [n][F d] on the interaction's rank.  Collective
 * over the stage world.  0, or an ember status with err. */
int pipe_step(pipeline *p, int32_t n, int32_t b, const float *dense, const float *pooled, const float *labels,
              float scale, double *loss_sum, float *d_pooled, char *err, size_t errlen);

void pipe_get_stats(const pipeline *p, pipe_stats *out);
void pipe_reset_stats(pipeline *p);

/* The balance rule: rank 0 of w times every block's forward and backward
 * on b samples (after a warm-up pass, the median of 7, on a model of
 * model's config, so model is untouched), then picks the P - 1 cuts that make the slowest of P
 * consecutive pieces as fast as it can be (the linear-partition dynamic
 * programme), and sends them to every rank: cuts[P - 1], and each block's
 * seconds in cost[num_blocks] when cost is not NULL.  Collective over w.
 * 0, or -1 with err. */
int pipe_balance(const dlrm *model, int32_t b, int32_t P, ember_world *w, int32_t *cuts, double *cost, char *err,
                 size_t errlen);

#endif
