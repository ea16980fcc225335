/*
 * cross.c: DCNv2's cross layer (Wang et al. 2021; docs/pipeline.md), full
 * or low rank, over the linear layer of linear.c:
 *
 *   full (rank 0):  u = x Wᵀ + b                 W [w][w], b [w]
 *   low rank r:     h = x Vᵀ,  u = h Uᵀ + b      V [r][w], U [w][r], b [w]
 *   then            y = x0 ⊙ u + x
 *
 * Parameters in that order (W, b or V, U, b), as one block of the model's
 * flat vector.  Forward keeps u (and h) for backward, which, with g = dy:
 *   du = g ⊙ x0;  dx0 += g ⊙ u;  dW += duᵀ x (or dU += duᵀ h, dh = du U,
 *   dV += dhᵀ x);  db += du;  dx = g + du W (or g + dh V).
 * The elementwise steps run one row at a time in a fixed order and this
 * file is built with -ffp-contract=off, so their bits do not depend on the
 * build's FMA; the GEMMs are linear.c's (one BLAS thread per call).
 */
#include <string.h>

#include "dense/layers.h"

int64_t dense_cross_params(int32_t w, int32_t rank)
{
    return rank > 0 ? 2 * (int64_t)rank * w + w : (int64_t)w * w + w;
}

void dense_cross_forward(int32_t B, int32_t w, int32_t rank, const float *params, const float *x0,
                         const float *x, float *h, float *u, float *y)
{
    if (B <= 0)
        return;
    if (rank > 0) {
        const float *V = params, *U = V + (int64_t)rank * w, *b = U + (int64_t)w * rank;
        dense_linear_forward(B, w, rank, x, V, NULL, h);
        dense_linear_forward(B, rank, w, h, U, b, u);
    } else {
        dense_linear_forward(B, w, w, x, params, params + (int64_t)w * w, u);
    }
    for (int64_t i = 0; i < (int64_t)B * w; i++)
        y[i] = x0[i] * u[i] + x[i];
}

void dense_cross_backward(int32_t B, int32_t w, int32_t rank, const float *params, const float *x0,
                          const float *x, const float *h, const float *u, const float *dy, float *grads,
                          float *dx0, float *du, float *dh, float *dx)
{
    if (B <= 0)
        return;
    const int64_t n = (int64_t)B * w;
    for (int64_t i = 0; i < n; i++) {
        du[i] = dy[i] * x0[i];
        dx0[i] = dx0[i] + dy[i] * u[i];
    }
    if (rank > 0) {
        const float *V = params, *U = V + (int64_t)rank * w;
        float *dV = grads, *dU = dV + (int64_t)rank * w, *db = dU + (int64_t)w * rank;
        dense_linear_backward(B, rank, w, h, U, du, dU, db, dh);
        dense_linear_backward(B, w, rank, x, V, dh, dV, NULL, dx);
    } else {
        dense_linear_backward(B, w, w, x, params, du, grads, grads + (int64_t)w * w, dx);
    }
    for (int64_t i = 0; i < n; i++)
        dx[i] = dx[i] + dy[i];
}
