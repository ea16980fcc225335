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

#include "dense/dense.h"

#define DENSE_ASSERT(cond)                                                          \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* Threads for the dense OpenMP loops (dense_set_threads; >= 1). */
int dense_threads(void);

/* y[s][o] = b[o] + sum_i x[s][i] * W[o][i]            (x [B][in], W [out][in]) */
void dense_linear_forward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                          const float *b, float *y);
/* dW[o][i] += sum_s dy[s][o] x[s][i];  db[o] += sum_s dy[s][o] (s in order);
 * dx[s][i] = sum_o dy[s][o] W[o][i] when dx is not NULL. */
void dense_linear_backward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                           const float *dy, float *dW, float *db, float *dx);

/* y = max(y, 0) in place (NaN stays NaN). */
void dense_relu_forward(int64_t n, float *y);
/* dy = y > 0 ? dy : 0 in place, y the forward's output. */
void dense_relu_backward(int64_t n, const float *y, float *dy);

/* DOT: d + (F+1)F/2;  CAT: (F+1) d. */
int64_t dense_interact_width(dense_interaction kind, int32_t F, int32_t d);
/* z [B][width] from v [B][(F+1) d]; CAT with z == v is a no-op. */
void dense_interact_forward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                            float *z);
/* dv [B][(F+1) d] = d(z . dz)/dv (overwritten); CAT with dv == dz is a no-op. */
void dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                             const float *dz, float *dv);

#endif
