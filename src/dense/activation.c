/*
 * activation.c: the dense model's activations (dense.h, dense_activation),
 * element by element, so any split of the rows gives the same bits.
 *
 * ReLU and none need only the output, and ReLU runs in place over the
 * linear layer's output as it always has; GELU and SiLU need the
 * pre-activation in backward (dlrm.c keeps it for them), tanh its output.
 * GELU is the exact form over erff, not the tanh approximation.
 */
#include <math.h>

#include "dense/layers.h"

const char *dense_activation_name(dense_activation kind)
{
    static const char *const NAMES[] = {"relu", "gelu", "silu", "tanh", "none"};
    return (unsigned)kind <= DENSE_ACT_NONE ? NAMES[kind] : NULL;
}

int dense_act_keeps_pre(dense_activation kind)
{
    return kind == DENSE_ACT_GELU || kind == DENSE_ACT_SILU;
}

static inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

void dense_act_forward(dense_activation kind, int64_t n, const float *pre, float *y)
{
    switch (kind) {
    case DENSE_ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = pre[i] < 0.0f ? 0.0f : pre[i];
        break;
    case DENSE_ACT_GELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = 0.5f * pre[i] * (1.0f + erff(pre[i] * 0.70710678118654752f));
        break;
    case DENSE_ACT_SILU:
        for (int64_t i = 0; i < n; i++)
            y[i] = pre[i] * sigmoidf_(pre[i]);
        break;
    case DENSE_ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = tanhf(pre[i]);
        break;
    case DENSE_ACT_NONE:
        for (int64_t i = 0; y != pre && i < n; i++)
            y[i] = pre[i];
        break;
    }
}

void dense_act_backward(dense_activation kind, int64_t n, const float *pre, const float *y, float *dy)
{
    switch (kind) {
    case DENSE_ACT_RELU:
        dense_relu_backward(n, y, dy);
        break;
    case DENSE_ACT_GELU:
        for (int64_t i = 0; i < n; i++) {
            const float x = pre[i];
            const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
            const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
            dy[i] = dy[i] * (cdf + x * pdf);
        }
        break;
    case DENSE_ACT_SILU:
        for (int64_t i = 0; i < n; i++) {
            const float s = sigmoidf_(pre[i]);
            dy[i] = dy[i] * (s * (1.0f + pre[i] * (1.0f - s)));
        }
        break;
    case DENSE_ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            dy[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case DENSE_ACT_NONE:
        break;
    }
}
