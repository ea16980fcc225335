/*
 * loss.c: binary cross-entropy on logits and the sigmoid, both written so
 * that no exp overflows: exp is only ever taken of -|z|.
 *
 *   loss = max(z, 0) - z y + log1p(exp(-|z|))      (= -y log p - (1-y) log(1-p))
 *   sigmoid(z) = 1 / (1 + exp(-z)) for z >= 0, exp(z) / (1 + exp(z)) below
 * The loss is taken in double and summed in sample order (deterministic).
 */
#include <math.h>

#include "dense/layers.h"

float dense_sigmoid(float z)
{
    if (z >= 0.0f)
        return 1.0f / (1.0f + expf(-z));
    float e = expf(z);
    return e / (1.0f + e);
}

double dense_bce_logits(const float *logit, const float *label, int32_t B, float scale, float *dlogit)
{
    double sum = 0.0;
    for (int32_t s = 0; s < B; s++) {
        double z = logit[s], y = label[s];
        sum += fmax(z, 0.0) - z * y + log1p(exp(-fabs(z)));
        if (dlogit)
            dlogit[s] = scale * (dense_sigmoid(logit[s]) - label[s]);
    }
    return sum;
}
