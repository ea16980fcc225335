/*
 * interact.c: DLRM's feature interaction between the bottom MLP's output
 * and the F pooled embeddings.
 *
 * Input per sample: v = [v_0 = bottom, v_1..v_F = emb_1..emb_F], each d wide.
 *   DOT: z = [v_0, v_i . v_j for 0 <= i < j <= F in row-major order
 *        (0,1), (0,2) .. (0,F), (1,2) .. (F-1,F)]    width d + (F+1)F/2
 *   CAT: z = v                                        width (F+1) d
 * Plain loops per sample rather than a batched sgemm: F+1 is small (27 for
 * Criteo) and each sample's (F+1) x (F+1) Gram matrix is a few hundred dot
 * products.  Each dot is summed over k in order, one sample at a time on
 * the calling thread (dlrm.c hands each thread whole chunks of samples),
 * so nothing here depends on a thread count.
 */
#include <string.h>

#include "dense/layers.h"

int64_t dense_interact_width(dense_interaction kind, int32_t F, int32_t d)
{
    if (kind == DENSE_INTERACT_CAT)
        return (int64_t)(F + 1) * d;
    return d + (int64_t)(F + 1) * F / 2;
}

static float dot(const float *a, const float *b, int32_t d)
{
    float sum = 0.0f;
    for (int32_t k = 0; k < d; k++)
        sum += a[k] * b[k];
    return sum;
}

void dense_interact_forward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                            float *z)
{
    int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(kind, F, d);
    if (kind == DENSE_INTERACT_CAT) {
        if (z != v)
            memcpy(z, v, (size_t)(B * vw) * sizeof *z);
        return;
    }
    for (int32_t s = 0; s < B; s++) {
        const float *vs = v + s * vw;
        float *zs = z + s * zw;
        memcpy(zs, vs, (size_t)d * sizeof *zs);
        int64_t p = d;
        for (int32_t i = 0; i < F + 1; i++)
            for (int32_t j = i + 1; j < F + 1; j++)
                zs[p++] = dot(vs + (int64_t)i * d, vs + (int64_t)j * d, d);
    }
}

/* dv_i += dz_p v_j and dv_j += dz_p v_i for each pair p = (i, j), in order. */
void dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                             const float *dz, float *dv)
{
    int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(kind, F, d);
    if (kind == DENSE_INTERACT_CAT) {
        if (dv != dz)
            memcpy(dv, dz, (size_t)(B * vw) * sizeof *dv);
        return;
    }
    for (int32_t s = 0; s < B; s++) {
        const float *vs = v + s * vw, *dzs = dz + s * zw;
        float *dvs = dv + s * vw;
        memcpy(dvs, dzs, (size_t)d * sizeof *dvs);
        memset(dvs + d, 0, (size_t)(vw - d) * sizeof *dvs);
        int64_t p = d;
        for (int32_t i = 0; i < F + 1; i++)
            for (int32_t j = i + 1; j < F + 1; j++) {
                float g = dzs[p++];
                float *dvi = dvs + (int64_t)i * d, *dvj = dvs + (int64_t)j * d;
                const float *vi = vs + (int64_t)i * d, *vj = vs + (int64_t)j * d;
                for (int32_t k = 0; k < d; k++) {
                    dvi[k] += g * vj[k];
                    dvj[k] += g * vi[k];
                }
            }
    }
}
