/*
 * ref_dot_order.c: the DOT interaction's documented float sums
 * (docs/training.md, src/dense/interact_dot.h), written as plain loops:
 * each pair's dot over k in order from 0, every product rounded to float
 * before it is added (through a volatile, so no build of this file fuses
 * them), and dv_i = (dz's bottom part for i = 0, else 0) + g_(i,j) v_j over
 * j != i ascending.  The kernels must give these bits exactly
 * (test_interact, test_dense, bench_interact); the double reference of
 * ref_dense.c checks the formulas, this one the order.
 */
#include <string.h>

#include "ref/ref.h"

void ref_dot_order_forward(int32_t B, int32_t F, int32_t d, const float *v, float *z)
{
    const int32_t n = F + 1;
    const int64_t vw = (int64_t)n * d, zw = d + (int64_t)n * F / 2;
    for (int32_t s = 0; s < B; s++) {
        const float *vs = v + s * vw;
        float *zs = z + s * zw;
        memcpy(zs, vs, (size_t)d * sizeof *zs);
        int64_t p = d;
        for (int32_t i = 0; i < n; i++)
            for (int32_t j = i + 1; j < n; j++) {
                float sum = 0.0f;
                for (int32_t k = 0; k < d; k++) {
                    volatile float prod = vs[i * d + k] * vs[j * d + k];
                    sum = sum + prod;
                }
                zs[p++] = sum;
            }
    }
}

void ref_dot_order_backward(int32_t B, int32_t F, int32_t d, const float *v, const float *dz, float *dv)
{
    const int32_t n = F + 1;
    const int64_t vw = (int64_t)n * d, zw = d + (int64_t)n * F / 2;
    for (int32_t s = 0; s < B; s++) {
        const float *vs = v + s * vw, *dzs = dz + s * zw;
        for (int32_t i = 0; i < n; i++)
            for (int32_t k = 0; k < d; k++) {
                float acc = i == 0 ? dzs[k] : 0.0f;
                for (int32_t j = 0; j < n; j++) {
                    if (j == i)
                        continue;
                    int32_t a = j < i ? j : i, b = j < i ? i : j;
                    volatile float prod = dzs[d + (int64_t)a * (2 * n - a - 1) / 2 + (b - a - 1)] * vs[j * d + k];
                    acc = acc + prod;
                }
                dv[s * vw + i * d + k] = acc;
            }
    }
}
