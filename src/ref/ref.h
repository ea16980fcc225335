/*
 * ref.h: naive reference implementations, obviously correct and slow.
 *
 * They follow the pseudocode in include/ember.h literally: one logical table
 * per config table (no stacking), one loop per formula, double accumulation
 * nowhere (float, in the documented order) so that sum order questions are
 * answered by the spec, not by the reference.  Tests and benchmarks compare
 * the fast paths against these on fresh random inputs.
 */
#ifndef EMBER_REF_H
#define EMBER_REF_H

#include <stdint.h>

#include "dense/dense.h"
#include "ember.h"

typedef struct ref_table {
    int64_t rows;
    int32_t dim;
    float *w;     /* rows * dim                                   */
    float *state; /* rows * ember_state_floats(kind, dim), zeroed */
} ref_table;

typedef struct ref_model {
    ember_collection_config cfg; /* shallow copy; arrays owned by the caller */
    ref_table *tables;           /* cfg.num_tables                           */
    int64_t step;                /* completed ref_backward calls             */
} ref_model;

/* Builds every table with the documented initializer formula. 0 or -1. */
int ref_model_init(ref_model *m, const ember_collection_config *cfg);
void ref_model_free(ref_model *m);

/* Physical row offset of table t under cfg's stacking rule (0 when off). */
int64_t ref_stack_offset(const ember_collection_config *cfg, int32_t t);

/*
 * Forward as documented for ember_forward.  keep: one byte per id of the
 * batch (batch order); 0 = dropped by a limit (zero contribution, still in
 * mean/sqrtn divisors).  NULL keeps all.  Ids outside [0, rows) are skipped
 * entirely (bounds=drop semantics); callers test bounds=error separately.
 */
void ref_forward(const ref_model *m, const ember_batch *b, const uint8_t *keep, float *pooled,
                 float *sequence);

/* Backward + optimizer as documented for ember_backward; increments step. */
void ref_backward(ref_model *m, const ember_batch *b, const uint8_t *keep, const float *d_pooled,
                  const float *d_sequence);

/* One optimizer update of one row w[dim] with state, gradient g, global step
 * t (already counting this update). */
void ref_optimizer_apply(const ember_optimizer *o, int64_t t, int32_t dim, float *w, float *state,
                         const float *g);

/* ember_partition_counts, naively. */
void ref_partition_counts(const ember_collection_config *cfg, const ember_batch *b, int64_t *ids,
                          int64_t *unique);

/*
 * The limit policies of ember_table_config, naively: fills keep[num_ids]
 * (0 for ids dropped under policy drop), *num_minibatches and
 * minibatch_start[0..num_minibatches] (sample index where each starts, plus B
 * at the end; room for batch_size + 1).  Returns EMBER_OK, or EMBER_ELIMIT
 * for an overflow under policy error or a single-sample minibatch overflow.
 */
int ref_limits_apply(const ember_collection_config *cfg, const ember_batch *b, uint8_t *keep,
                     int32_t *num_minibatches, int32_t *minibatch_start);

/* Element (r, c) of table t by the initializer formula, with its rng key
 * ref_table_key(seed, name); a dynamic table's row for key k is r = k. */
float ref_init_value(const ember_table_config *t, uint64_t key, int64_t r, int32_t c);
uint64_t ref_table_key(uint64_t seed, const char *name);
/* The dim initial values of row `row` of table t under seed. */
void ref_init_row(const ember_table_config *t, uint64_t seed, int64_t row, float *out);

/* ---------------------------------------------------------- dynamic tables
 * The key -> slot rules of one owner rank (ref_dyn.c), naively. */
typedef struct ref_dyn {
    int64_t capacity;
    int32_t admit_after, ttl;
    ember_evict_policy evict;
    int64_t width;              /* sketch counters per row                    */
    uint64_t seed;              /* the table's rng key                        */
    int8_t *resident;
    uint64_t *key;
    uint32_t *last, *count;
    uint16_t *sketch;           /* [4 * width]                                */
    int64_t admitted, evicted, expired, not_admitted, count_sum;
    uint64_t *ev_keys;          /* freed by the last step                     */
    uint32_t *ev_counts;
    int64_t ev_n;
} ref_dyn;
int ref_dyn_init(ref_dyn *r, int64_t capacity, int32_t admit_after, ember_evict_policy evict, int32_t ttl,
                 int64_t sketch_width, uint64_t seed);
void ref_dyn_free(ref_dyn *r);
/* One training step's keys (the owner's order): slots[i] = the key's slot or
 * -1; the rows to reset (slot, new key) in reset_slots/reset_keys (room for
 * n).  EMBER_ELIMIT (nothing changed) when a new key finds no slot. */
int ref_dyn_step(ref_dyn *r, const uint64_t *keys, int64_t n, uint32_t step, int64_t *slots, int64_t *reset_slots,
                 uint64_t *reset_keys, int64_t *nresets);

/* ------------------------------------------------------------ dense model
 * src/dense (dense.h) written out in double, one loop per formula, from the
 * formulas in docs/training.md "Dense model".  Row-major; backward functions
 * accumulate parameter gradients (+=) and overwrite input gradients.  Two
 * exceptions keep float: init (the documented float formula) and the
 * optimizer step (float, as the header states it). */

void ref_dense_linear(int32_t B, int32_t in, int32_t out, const double *x, const double *W,
                      const double *b, double *y);
void ref_dense_linear_backward(int32_t B, int32_t in, int32_t out, const double *x, const double *W,
                               const double *dy, double *dW, double *db, double *dx);
/* y = max(x, 0); dx = x > 0 ? dy : 0 (x the pre-activation). */
void ref_dense_relu(int64_t n, const double *x, double *y);
void ref_dense_relu_backward(int64_t n, const double *x, const double *dy, double *dx);
int64_t ref_dense_interact_width(dense_interaction kind, int32_t F, int32_t d);
/* z [B][width] from bottom [B][d] and pooled [B][F d]. */
void ref_dense_interact(dense_interaction kind, int32_t B, int32_t F, int32_t d, const double *bottom,
                        const double *pooled, double *z);
void ref_dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d,
                                 const double *bottom, const double *pooled, const double *dz,
                                 double *d_bottom, double *d_pooled);
/* DOT's documented float sums, in their order (ref_dot_order.c): z [B][d +
 * (F+1)F/2] from v [B][(F+1) d], and dv [B][(F+1) d] from v and dz. */
void ref_dot_order_forward(int32_t B, int32_t F, int32_t d, const float *v, float *z);
void ref_dot_order_backward(int32_t B, int32_t F, int32_t d, const float *v, const float *dz, float *dv);
/* The activations of dense.h: y = f(x); dx = f'(x) dy (x the input). */
void ref_dense_act(dense_activation kind, int64_t n, const double *x, double *y);
void ref_dense_act_backward(dense_activation kind, int64_t n, const double *x, const double *dy, double *dx);
/* DCNv2's cross layer (docs/pipeline.md): params p = W [w][w], b [w]
 * (rank 0) or V [r][w], U [w][r], b [w]; y = x0 ⊙ u + x, u = W x + b or
 * U (V x) + b.  Backward: dp +=, dx0 +=, dx overwritten. */
int64_t ref_dense_cross_params(int32_t w, int32_t rank);
void ref_dense_cross(int32_t B, int32_t w, int32_t rank, const double *p, const double *x0, const double *x,
                     double *y);
void ref_dense_cross_backward(int32_t B, int32_t w, int32_t rank, const double *p, const double *x0,
                              const double *x, const double *dy, double *dp, double *dx0, double *dx);
/* sum_s bce(z_s, y_s); dlogit[s] = sigmoid(z_s) - y_s when not NULL. */
double ref_dense_bce(const double *logit, const double *label, int32_t B, double *dlogit);

/* The whole model of cfg with parameters params [ref_dlrm_num_params] in
 * the documented layout.  Backward recomputes the forward; grads +=,
 * d_pooled and d_dense (either may be NULL) overwritten. */
int64_t ref_dlrm_num_params(const dlrm_config *cfg);
void ref_dlrm_init(const dlrm_config *cfg, float *params);
void ref_dlrm_forward(const dlrm_config *cfg, const double *params, int32_t B, const double *dense,
                      const double *pooled, double *logit);
void ref_dlrm_backward(const dlrm_config *cfg, const double *params, int32_t B, const double *dense,
                       const double *pooled, const double *dlogit, double *grads, double *d_pooled,
                       double *d_dense);
/* min over every ReLU unit of |pre-activation| / (the same model on absolute
 * values): how near the input is to a kink, relative to the rounding error
 * of any summation order.  A float model and this reference may disagree on
 * the side of a kink only when this is ~1e-6 or less. */
double ref_dlrm_kink_margin(const dlrm_config *cfg, const double *params, int32_t B,
                            const double *dense, const double *pooled);

/* One dense optimizer step at step t (counting this one) on n elements;
 * m and v are Adam's moments (unused by SGD). */
void ref_dense_optim_step(const dense_optim_config *c, int64_t t, int64_t n, float *params, float *m,
                          float *v, const float *grads);

/* Half-precision training rows (ref_round.c, docs/precision.md); precision
 * is EMBER_PRECISION_FP16 or _BF16.  ref_round_half: x to that format, to
 * nearest (stochastic 0) or stochastically with the 16 random bits r; a NaN
 * gives the format's quiet NaN 0x7e40 / 0x7fc0 (any NaN is right).
 * ref_round_bits: column k's r from the row's 64 bits h, which
 * ref_round_row_bits derives from (table key, logical row, step), and
 * ref_round_state_bits for the row's state vector j (Adagrad's sum; Adam's
 * m, then v). */
double ref_bf16_value(uint16_t h);
double ref_round_value(int precision, uint16_t h);
uint16_t ref_round_half(int precision, int stochastic, float x, uint32_t r);
uint32_t ref_round_bits(uint64_t h, uint32_t k);
uint64_t ref_round_row_bits(uint64_t table_key, int64_t row, int64_t step);
uint64_t ref_round_state_bits(uint64_t table_key, int64_t row, int64_t step, int32_t j);

/* Row-wise encodings (src/quant/quant.h): enc 0 fp32, 1 fp16, 2 int8, 3
 * int4; the rules of docs/inference.md with half precision done in double. */
double ref_half_value(uint16_t h);
uint16_t ref_half_round(float x); /* nearest even; NaN -> 0x7e00 */
int ref_quant_row(int enc, int32_t dim, const float *x, uint8_t *out);
void ref_dequant_row(int enc, int32_t dim, const uint8_t *row, float *out);
/* Simulated quantization: the value x reads as (quant.h's rule). */
float ref_fake_quant(float x, float low, float high, int32_t buckets);

/* An ember binary CTR file (docs/ctr-format.md) read whole, sample by
 * sample, from the format's description alone (no checks: for files the
 * library wrote).  Sample i: label[i], dense[i*D ..], and for each feature
 * f its bag: len[i*S + f] ids from ids[first[i*S + f]], with weights (1
 * where the feature has none) in w at the same places. */
typedef struct ref_ctr_file {
    int64_t N, D, S;
    float *label, *dense, *w;
    int32_t *len;
    int64_t *first, *ids;
} ref_ctr_file;

int ref_ctr_file_read(const char *path, ref_ctr_file *out); /* 0, or -1 */
void ref_ctr_file_free(ref_ctr_file *f);

#endif
