/*
 * pipeline.h: the dense model cut into pipeline stages over the ranks of a
 * world, one step of k micro-batches at a time (docs/pipeline.md).
 *
 * The model's chain of blocks (dense.h, dlrm_forward_blocks) is cut into
 * P = S * v consecutive pieces; piece j runs on rank j mod S of the stage
 * world (S ranks), so v > 1 (the interleaved schedule) gives each rank v
 * pieces.  Activations go forward and their gradients back point to point.
 * A rank's model need hold only its own pieces' parameters (dlrm_create_part
 * with pipe_held's blocks); it computes, and adds gradients to, only those.
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

/* The pieces' first blocks: start[j] for piece j < P, start[P] = nblocks;
 * cfg's cuts, or split as evenly as they go.  0, or -1 with err. */
int pipe_pieces(const pipe_config *cfg, int32_t S, int32_t nblocks, int32_t *start, char *err, size_t errlen);
/* held[b] = 1 for the blocks of stage s's pieces, 0 for the others. */
int pipe_held(const pipe_config *cfg, int32_t S, int32_t s, int32_t nblocks, uint8_t *held, char *err,
              size_t errlen);

/* model: this rank's model, holding at least its pieces' blocks (the same
 * config and parameters on every rank that holds a block; stays the
 * caller's and must outlive the pipe).  stages: the S ranks, in
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

/* Forward only (evaluation, prediction) of n samples in micro-batches of b,
 * each piece's micro-batches in order, nothing kept: inputs as pipe_step's;
 * logit [n] on every rank of the stage world (sent from the last piece's),
 * the same bits as dlrm_forward.  Collective over the stage world.  0, or
 * an ember status with err. */
int pipe_forward(pipeline *p, int32_t n, int32_t b, const float *dense, const float *pooled, float *logit, char *err,
                 size_t errlen);

/* The activation bytes stage s of S keeps at most over a step of k full
 * micro-batches of b samples (the interleaved schedule's padding ones
 * empty): pipe_stats.peak_activation_bytes before the step runs, its
 * operations accounted as pipe_step does.  -1 for bad cuts or out of
 * memory. */
int64_t pipe_plan_kept_bytes(const pipe_config *cfg, const dlrm_config *mc, int32_t S, int32_t s, int32_t k,
                             int32_t b);

void pipe_get_stats(const pipeline *p, pipe_stats *out);
void pipe_reset_stats(pipeline *p);

/* The micro-batches piece j of the schedule keeps at once at most (its
 * forward run, its backward not yet) over a step of k, for j < S v:
 * per_piece[j].  The interleaved schedule's padding micro-batches count
 * for nothing.  0, or -1 when out of memory. */
int pipe_plan_in_flight(const pipe_config *cfg, int32_t S, int32_t k, int32_t *per_piece);

/* The balance rule: rank 0 of w measures every block, then picks the P - 1
 * cuts that make the costliest of P consecutive pieces as cheap as it can
 * be (the linear-partition dynamic programme), and sends them to every
 * rank: cuts[P - 1], and each block's cost in cost[num_blocks] when cost
 * is not NULL.
 *   By memory, a piece's cost is the bytes its stage holds for it: its
 *   blocks' parameters, gradients and state_floats optimizer floats each,
 *   plus the activations it keeps for the micro-batches it has in flight at
 *   most (pipe_plan_in_flight), or with recomputation its input for each of
 *   them and its own activations once: for fill-drain and 1f1b exactly what
 *   the stage then holds (pipe_plan_kept_bytes); interleaved, a stage's
 *   pieces are balanced one by one.  cost[] gets each block's bytes for one
 *   micro-batch.
 *   By time, a block's cost is its forward and backward on micro_batch
 *   samples (the median of 7 after a warm-up, on a part model holding that
 *   block alone, with the given thread counts), and the cuts are then those
 *   whose slowest piece is within PIPE_TIME_SLACK of the fastest split and
 *   whose costliest piece in bytes is the smallest among such: block times
 *   vary from run to run by a few percent, and this keeps that noise from
 *   moving parameters from stage to stage.
 * Collective over w (NULL: this process alone).  0, or -1 with err. */
#define PIPE_TIME_SLACK 0.05
typedef struct pipe_balance_config {
    int by_memory;                 /* 0: time, 1: memory                      */
    int32_t micro_batch, stages;   /* b, S                                    */
    pipe_config pipe;              /* the schedule, virtual stages and
                                      recomputation (its cuts are not read)  */
    int32_t accumulate;            /* k micro-batches per step                */
    int32_t threads, blas_threads; /* time: the model's (dlrm_set_threads)    */
    double state_floats;           /* optimizer floats per parameter on the
                                      busiest rank (Adam sharded over 4: 0.5) */
} pipe_balance_config;
int pipe_balance(const dlrm_config *cfg, const pipe_balance_config *bc, ember_world *w, int32_t *cuts, double *cost,
                 char *err, size_t errlen);

#endif
