/*
 * layers.h: the dense layers one at a time, for dlrm.c and the tests
 * (library-internal, not part of dense.h's contract).
 *
 * Each layer is a pair of functions over B rows, row-major: forward writes
 * its output, backward *accumulates* parameter gradients (+=) and
 * *overwrites* the input gradient, so that micro-batches add up while
 * activation gradients need no zeroing.  The interaction takes its F + 1
 * input vectors already side by side, v [B][(F+1) d] = [bottom, emb_1..F],
 * which is pooled's own layout with the bottom output in front.
 */
#ifndef EMBER_DENSE_LAYERS_H
#define EMBER_DENSE_LAYERS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/assert.h"
#include "dense/dense.h"

/* y[s][o] = b[o] + sum_i x[s][i] * W[o][i]            (x [B][in], W [out][in];
 * b NULL: no bias) */
void dense_linear_forward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                          const float *b, float *y);
/* dW[o][i] += sum_s dy[s][o] x[s][i];  db[o] += sum_s dy[s][o] (s in order;
 * db NULL: no bias); dx[s][i] = sum_o dy[s][o] W[o][i] when dx is not NULL. */
void dense_linear_backward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                           const float *dy, float *dW, float *db, float *dx);

/* y = max(y, 0) in place (NaN stays NaN). */
void dense_relu_forward(int64_t n, float *y);
/* dy = y > 0 ? dy : 0 in place, y the forward's output. */
void dense_relu_backward(int64_t n, const float *y, float *dy);

/* DCNv2's cross layer over rows of w (cross.c; docs/pipeline.md): rank 0
 * full (params W [w][w], b [w]), rank r > 0 low rank (V [r][w], U [w][r],
 * b [w]).  Forward: y = x0 ⊙ u + x with u = x Wᵀ + b (or h = x Vᵀ,
 * u = h Uᵀ + b); keeps h [B][r] (low rank only) and u [B][w] for backward.
 * Backward from dy: grads (same layout as params) +=, dx0 += its share,
 * dx overwritten; du [B][w] and dh [B][r] are scratch.  No aliasing. */
int64_t dense_cross_params(int32_t w, int32_t rank);
void dense_cross_forward(int32_t B, int32_t w, int32_t rank, const float *params, const float *x0,
                         const float *x, float *h, float *u, float *y);
void dense_cross_backward(int32_t B, int32_t w, int32_t rank, const float *params, const float *x0,
                          const float *x, const float *h, const float *u, const float *dy, float *grads,
                          float *dx0, float *du, float *dh, float *dx);

/* The activations (activation.c): y = f(pre), in place when y == pre;
 * backward dy *= f'(pre) in place, from y (ReLU, tanh) or pre (GELU, SiLU:
 * dense_act_keeps_pre says the caller must keep pre for them). */
int dense_act_keeps_pre(dense_activation kind);
void dense_act_forward(dense_activation kind, int64_t n, const float *pre, float *y);
void dense_act_backward(dense_activation kind, int64_t n, const float *pre, const float *y, float *dy);

/* DOT: d + (F+1)F/2;  CAT and DCN: (F+1) d. */
int64_t dense_interact_width(dense_interaction kind, int32_t F, int32_t d);
/* z [B][width] from v [B][(F+1) d]; CAT with z == v is a no-op. */
void dense_interact_forward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                            float *z);
/* dv [B][(F+1) d] = d(z . dz)/dv (overwritten); CAT with dv == dz is a no-op. */
void dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                             const float *dz, float *dv);

#endif
