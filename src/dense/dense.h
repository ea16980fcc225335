/*
 * dense.h: the dense half of a CTR model (docs/training.md): DLRM's bottom
 * MLP, feature interaction and top MLP over BLAS (cblas_sgemm), binary
 * cross-entropy on logits, and the dense optimizers.
 *
 * The model keeps every parameter in one flat float vector and every
 * gradient in another of the same layout, so that replication (all-reduce)
 * and the optimizers see one array.  Activations for backward are kept in
 * the model, sized for the largest batch seen; forward then backward on
 * the same batch.  Nothing here talks to MPI: src/model/ reduces grads.
 *
 * Layouts are row-major.  A linear layer with in -> out holds W [out][in]
 * then b [out]; y[s][o] = b[o] + sum_i x[s][i] * W[o][i].
 * Determinism: for a fixed BLAS thread count results are bit-identical run
 * to run; gradients are *accumulated* (+=) so that micro-batches add up.
 * OpenBLAS's sgemm is NOT bit-identical between thread counts (measured
 * with 0.3.21: 1 vs 2 threads differ in the last bits for most of our
 * shapes), so forward/backward depend on the model's BLAS thread count
 * (dlrm_set_threads); the optimizers, ReLU, interaction and loss do not.  Formulas, parameter layout and init:
 * docs/training.md, "Dense model".
 */
#ifndef EMBER_DENSE_H
#define EMBER_DENSE_H

#include <stddef.h>
#include <stdint.h>

#define DENSE_MAX_LAYERS 64 /* per tower                                            */
#define DENSE_MAX_CROSS 16  /* DCN cross layers                                     */
#define DENSE_MAX_BLOCKS (2 * DENSE_MAX_LAYERS + 2 + DENSE_MAX_CROSS) /* dlrm_num_blocks at most */
/* Stands in for a table name's hash in the init key ("dlrm" in ASCII). */
#define DENSE_RNG_NAME 0x646c726dULL

typedef enum dense_interaction {
    DENSE_INTERACT_DOT = 0, /* v = [bottom, emb_1..emb_F]: z = (bottom, v_i.v_j for i < j in
                               row-major order (0,1),(0,2)..(0,F),(1,2)..); d + (F+1)F/2 wide */
    DENSE_INTERACT_CAT = 1, /* z = concat(bottom, emb_1..emb_F); d (F+1) wide                   */
    DENSE_INTERACT_DCN = 2, /* x0 = concat as CAT, then num_cross DCNv2 cross layers (layers.h,
                               docs/pipeline.md): z = x_num_cross, d (F+1) wide                 */
} dense_interaction;

/* The function after every bottom layer and every top hidden layer. */
typedef enum dense_activation {
    DENSE_ACT_RELU = 0, /* max(x, 0)                                                   */
    DENSE_ACT_GELU = 1, /* x (1 + erf(x / sqrt 2)) / 2                                  */
    DENSE_ACT_SILU = 2, /* x sigmoid(x)                                                 */
    DENSE_ACT_TANH = 3, /* tanh(x)                                                      */
    DENSE_ACT_NONE = 4, /* x                                                            */
} dense_activation;

typedef struct dlrm_config {
    int32_t num_dense;                 /* dense input features (13 for Criteo)               */
    int32_t num_sparse;                /* F pooled embeddings per sample                     */
    int32_t emb_dim;                   /* d: every pooled embedding's width                  */
    int32_t num_bottom;                /* bottom MLP widths; the last must equal emb_dim     */
    int32_t bottom[DENSE_MAX_LAYERS];
    int32_t num_top;                   /* top MLP hidden widths; a final width-1 layer       */
    int32_t top[DENSE_MAX_LAYERS];     /* (the logit) is appended, no ReLU after it          */
    dense_interaction interaction;
    int32_t num_cross;                 /* DCN: cross layers, 1..16 (0 otherwise)             */
    int32_t cross_rank;                /* DCN: 0 full W [w][w]; r >= 1 low rank V [r][w],
                                          U [w][r] (w = (F+1) d)                             */
    dense_activation activation;       /* DENSE_ACT_RELU (0) unless set                      */
    uint64_t seed;                     /* init: a function of (seed, layer, index) only      */
} dlrm_config;

typedef struct dlrm dlrm;

/* Validates cfg (message in err on failure: -1) and allocates; 0 on success.
 * Init: W uniform in +-sqrt(6 / (in + out)) (Glorot), b = 0.  Layer L counts
 * bottom layers then top layers (the logit layer last); element k = o*in + i
 * of its W is (2u - 1) * sqrt(6 / (in + out)) with
 * u = ember_rng_uniform(ember_rng_table_key(seed, DENSE_RNG_NAME), L, k, 0).
 * Cross layer l's matrices (DCN) take layer numbers 1000 + 2l (W, or V)
 * and 1001 + 2l (U), each Glorot over its own (in, out); they sit after
 * the bottom layers and before the top ones in the parameter vector.
 * A part model (dlrm_create_part) gives its elements the same values.
 * Limits: 1 <= num_bottom <= 64, 0 <= num_top <= 64, num_dense, num_sparse
 * >= 1, widths in [1, 65536], num_sparse <= 4096; DCN: 1 <= num_cross <=
 * 16, 0 <= cross_rank <= 65536. */
int dlrm_create(const dlrm_config *cfg, dlrm **out, char *err, size_t errlen);
/* dlrm_create's checks alone: 0, or -1 with the message in err. */
int dlrm_validate(const dlrm_config *cfg, char *err, size_t errlen);
/* A part of the model, for a pipeline stage: the parameters (and gradients)
 * of the blocks with held[b] != 0 only (held [dlrm_num_blocks]; NULL: all,
 * as dlrm_create), one vector of them in block order, each element
 * initialised as in the whole model.  Only chains of held blocks run. */
int dlrm_create_part(const dlrm_config *cfg, const uint8_t *held, dlrm **out, char *err, size_t errlen);
void dlrm_destroy(dlrm *m);

const dlrm_config *dlrm_get_config(const dlrm *m); /* the config it was made with */
int64_t dlrm_num_params(const dlrm *m); /* parameters held (all, unless a part)        */
int64_t dlrm_full_params(const dlrm *m); /* the whole model's                          */
float *dlrm_params(dlrm *m);          /* [num_params]                                  */
float *dlrm_grads(dlrm *m);           /* [num_params], same layout                     */
void dlrm_zero_grads(dlrm *m);
int32_t dlrm_interaction_width(const dlrm *m); /* top MLP input width                  */

/* "dot", "cat", "dcn"; "relu", "gelu", "silu", "tanh", "none" (the config's
 * names; NULL for an unknown value). */
const char *dense_interaction_name(dense_interaction kind);
const char *dense_activation_name(dense_activation kind);

/* logit[s] for s < B.  dense [B][num_dense], pooled [B][num_sparse * emb_dim]
 * (ember_forward's layout: sample-major, features in config order).  Inputs
 * are copied into the model; the buffers need not outlive the call.
 * Activations grow to the largest B seen (no allocation after that).
 * Returns 0, or -1 when out of memory or B < 0 (B = 0 does nothing). */
int dlrm_forward(dlrm *m, int32_t B, const float *dense, const float *pooled, float *logit);

/* With the activations of the last forward: grads += d(loss)/d(params) for
 * dlogit [B]; d_pooled [B][num_sparse * emb_dim] = d(loss)/d(pooled)
 * (overwritten, not accumulated).  d_pooled may be NULL. */
void dlrm_backward(dlrm *m, const float *dlogit, float *d_pooled);
/* The model as a chain of blocks, for pipeline stages (docs/pipeline.md):
 * blocks 0 .. nb-1 are the bottom layers, block nb the interaction, then
 * DCN's cross layers one block each (nb+1 .. nb+C), then the top layers,
 * the last the logit layer; dlrm_num_blocks = nb + 1 + C + num_top + 1.  A
 * block's input and output are [B][width] carries (block 0's input the
 * dense features, the last block's output the logit); between two cross
 * layers the carry is [x_l | x0], B rows of x_l then B rows of x0 (2 w
 * wide), on the way back their gradients.  dlrm_block_params gives the
 * range of the whole model's parameter vector a block owns (the
 * interaction's is empty); dlrm_block_local where it sits in this model's
 * vector (-1: not held). */
int32_t dlrm_num_blocks(const dlrm *m);
int32_t dlrm_config_blocks(const dlrm_config *cfg); /* the same, before a model is made */
int32_t dlrm_block_in_width(const dlrm *m, int32_t b);
int32_t dlrm_block_out_width(const dlrm *m, int32_t b);
void dlrm_block_params(const dlrm *m, int32_t b, int64_t *off, int64_t *len);
int64_t dlrm_block_local(const dlrm *m, int32_t b);
int32_t dlrm_widest_carry(const dlrm *m); /* the widest block input or output */
int dlrm_holds(const dlrm *m, int32_t b);
/* Another model over src's very parameters and gradients (not copied: the
 * two see each other's updates, and both backward passes add into the
 * same gradients) with activations of its own: one per micro-batch a
 * pipeline stage keeps in flight.  src must outlive it.  0, or EMBER_ENOMEM.
 */
int dlrm_create_shared(dlrm *src, dlrm **out);
/* Floats per sample block b keeps from its forward for its backward (its
 * output and what its backward reads: pre-activations, the interaction's
 * inputs, DCN's u and h; block 0 also its input): a stage's activation
 * stash is the sum over its blocks, per micro-batch in flight. */
int64_t dlrm_block_kept_floats(const dlrm *m, int32_t b);
/* The sum over blocks b0 .. b1-1: a piece's stash for one micro-batch. */
int64_t dlrm_blocks_kept_floats(const dlrm *m, int32_t b0, int32_t b1);
/* Blocks b0 .. b1-1 forward on B rows of `in` (block b0's input) into out
 * (block b1-1's output); pooled is read only when the interaction is among
 * them.  Bits: each block computes exactly what dlrm_forward does, so
 * running the chain piece by piece gives its very results.  0, or -1 as
 * dlrm_forward (also for a bad block range). */
int dlrm_forward_blocks(dlrm *m, int32_t B, int32_t b0, int32_t b1, const float *in, const float *pooled,
                        float *out);
/* Backward over the same blocks with the activations of the last
 * dlrm_forward_blocks: dout the gradient of block b1-1's output, din (NULL:
 * not wanted; never for b0 = 0) that of block b0's input, d_pooled when the
 * interaction is among them; grads of these blocks +=. */
void dlrm_backward_blocks(dlrm *m, int32_t b0, int32_t b1, const float *dout, float *din, float *d_pooled);

/* Bytes a model of cfg holding the blocks held (NULL: all) keeps for
 * micro-batches of `batch` samples: parameters, gradients, state_floats
 * optimizer floats per parameter (Adam: 2), the activations and each
 * chunk's gradients; -1 for an invalid config.  For a check before
 * creating one. */
int64_t dlrm_memory_bytes(const dlrm_config *cfg, const uint8_t *held, int32_t batch, int32_t state_floats);
/* fn(arg) after every layer's forward and backward (NULL: none): the
 * trainer drives the next batch's exchanges from there. */
void dlrm_set_progress(dlrm *m, void (*fn)(void *), void *arg);
typedef struct dlrm_progress_hook {
    void (*fn)(void *);
    void *arg;
} dlrm_progress_hook;
/* The hook set now (to put back after borrowing it). */
void dlrm_get_progress(const dlrm *m, dlrm_progress_hook *out);

/* Binary cross-entropy on logits, numerically stable:
 *   loss_s = max(z, 0) - z * y + log1p(exp(-|z|))
 * Returns sum_s loss_s (double); dlogit[s] = scale * (sigmoid(z_s) - y_s)
 * when dlogit is not NULL (scale = 1 / global batch for a mean loss). */
double dense_bce_logits(const float *logit, const float *label, int32_t B, float scale, float *dlogit);

/* sigmoid(z), stable for large |z|. */
float dense_sigmoid(float z);

/* The model's thread counts, carried by the handle (none is kept by the
 * module): threads for its OpenMP loops, and with one BLAS thread the
 * chunks of a fixed 256 samples (dlrm.c; the loss runs on the calling
 * thread), >= 1, or 0 for omp_get_max_threads() at each call; and the
 * OpenBLAS threads its GEMMs run with, >= 1, or 0 for OpenBLAS's setting as
 * the process has it.  OpenBLAS's count is process-wide: a forward or
 * backward applies the model's for its own span when the process's
 * differs, and puts the caller's back.  With one BLAS thread, forward and
 * backward no longer depend on `threads` (the chunks then run over the
 * model's threads, each GEMM on one); `ember train` uses 1 by default: its
 * GEMMs are small, and OpenBLAS's pthread pool spins against OpenMP's
 * workers (docs/PERFORMANCE.md, "Training").  Until set: 0 and 0.  A model
 * made by dlrm_create_shared takes its source's. */
void dlrm_set_threads(dlrm *m, int32_t threads, int32_t blas_threads);
void dlrm_get_threads(const dlrm *m, int32_t *threads, int32_t *blas_threads);

/* OpenBLAS's own thread count, process-wide: what a handle applies while it
 * runs (the trainer's open and run) and puts back after (blas.c). */
int32_t dense_blas_threads(void);
void dense_set_blas_threads(int32_t threads); /* >= 1 (less is 1) */
/* The OpenBLAS kernel family the dense GEMMs run ("Cooperlake", "Haswell",
 * ...: openblas_get_corename).  A DYNAMIC_ARCH OpenBLAS picks it at load
 * from the CPU, or from OPENBLAS_CORETYPE when that is set; the choice can
 * halve the GEMMs' speed (docs/PERFORMANCE.md), so runs record it. */
const char *dense_blas_core(void);

/* ------------------------------------------------------------- optimizers */

typedef enum dense_optim_kind { DENSE_SGD = 0, DENSE_ADAM = 1, DENSE_MOMENTUM = 2, DENSE_ADAMW = 3 } dense_optim_kind;
#define DENSE_OPTIM_KINDS 4

typedef struct dense_optim_config {
    dense_optim_kind kind;
    float lr;
    float beta1, beta2, eps; /* Adam, AdamW                                */
    float weight_decay;      /* L2 added to the gradient: g + wd * p; AdamW:
                                decoupled, p *= 1 - lr * wd               */
    float momentum;          /* MOMENTUM: in [0, 1)                        */
    int nesterov;            /* MOMENTUM: 1 Nesterov's form                */
} dense_optim_config;

/* SGD: lr 0.01; Adam: lr 0.001, beta1 0.9, beta2 0.999, eps 1e-8; wd 0;
 * momentum: lr 0.01, momentum 0.9; AdamW: Adam's, wd 0.01. */
dense_optim_config dense_optim_config_default(dense_optim_kind kind);
/* "sgd", "adam", "momentum", "adamw"; "?" out of range. */
const char *dense_optim_name(dense_optim_kind kind);
/* Floats of state per parameter: 0 SGD, 1 momentum, 2 Adam and AdamW. */
int dense_optim_state_floats(dense_optim_kind kind);

typedef struct dense_optim dense_optim;
/* 0, EMBER_EINVAL when n < 0 or the kind is unknown, EMBER_ENOMEM when out
 * of memory. */
int dense_optim_create(const dense_optim_config *cfg, int64_t n, dense_optim **out);
void dense_optim_destroy(dense_optim *o);

/* One step over params[i], i < n, with grads (already reduced and scaled):
 *   g = grads[i] + weight_decay * p                  (p = params[i])
 *   SGD:  p -= lr * g
 *   Adam: m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
 *         p -= lr * sqrt(1-beta2^t) / (1-beta1^t) * m / (sqrt(v) + eps)
 *   momentum: b = momentum*b + g;  p -= lr * (nesterov ? g + momentum*b : b)
 *         (torch.optim.SGD, dampening 0)
 *   AdamW: g = grads[i] (no L2), p *= 1 - lr * weight_decay, then Adam's
 *         update
 * (the form of ember.h's sparse Adam; the factor is taken in double), with
 * t = number of steps so far + 1.  Elementwise, so any thread count gives
 * the same bits. */
void dense_optim_step(dense_optim *o, float *params, const float *grads);
/* The learning rate of the next steps times scale (1: as configured). */
void dense_optim_set_lr_scale(dense_optim *o, float scale);
/* Threads of the step's OpenMP loop (>= 1; 0, the default:
 * omp_get_max_threads() at each step).  The same bits for any count. */
void dense_optim_set_threads(dense_optim *o, int32_t threads);
/* The state for checkpoints: floats per parameter (0 SGD, 1 momentum: b[n],
 * 2 Adam and AdamW: m[n] then v[n]) and the step; NULL for SGD.  Valid until destroy; writable. */
float *dense_optim_state(dense_optim *o, int64_t *floats, int64_t *step);
/* Sets the number of steps taken (checkpoint restore). */
void dense_optim_set_step(dense_optim *o, int64_t step);

#endif
