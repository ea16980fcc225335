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
 * products.  Each dot is summed over k in order, each product rounded then
 * added (the file is compiled with -ffp-contract=off, so every build gives
 * the same bits), one sample at a time on the calling thread (dlrm.c hands
 * each thread whole chunks of samples), so nothing here depends on a thread
 * count.  Forward transposes the sample's v so that 16 dots advance
 * together in vector lanes; backward sums each dv_i over j in registers
 * instead of updating two rows per pair in memory.
 */
#include <stdlib.h>
#include <string.h>

#include "dense/layers.h"

#define IB 16 /* pairs (forward) or elements (backward) computed together */

int64_t dense_interact_width(dense_interaction kind, int32_t F, int32_t d)
{
    if (kind == DENSE_INTERACT_CAT)
        return (int64_t)(F + 1) * d;
    return d + (int64_t)(F + 1) * F / 2;
}

/* The index in z of pair (a, b), a < b < n: rows of pairs in order. */
static inline int64_t pair_at(int32_t d, int32_t n, int32_t a, int32_t b)
{
    return d + (int64_t)a * (2 * n - a - 1) / 2 + (b - a - 1);
}

/* Dot products of one sample, IB pairs at a time: vt is the sample's v
 * transposed, [d][wp], so lane jj of a block holds v_i . v_(j0+jj). */
static void dots_blocked(int32_t n, int32_t d, int64_t wp, const float *vs, const float *vt, float *zs)
{
    int64_t p = d;
    for (int32_t i = 0; i + 1 < n; i++) {
        const float *vi = vs + (int64_t)i * d;
        for (int32_t j0 = (i + 1) / IB * IB; j0 < n; j0 += IB) {
            float acc[IB] = {0};
            for (int32_t k = 0; k < d; k++) {
                const float a = vi[k], *t = vt + (int64_t)k * wp + j0;
                for (int32_t jj = 0; jj < IB; jj++)
                    acc[jj] = acc[jj] + a * t[jj];
            }
            for (int32_t j = j0 > i + 1 ? j0 : i + 1; j < j0 + IB && j < n; j++)
                zs[p++] = acc[j - j0];
        }
    }
}

/* The same sums one pair at a time (no scratch). */
static void dots_plain(int32_t n, int32_t d, const float *vs, float *zs)
{
    int64_t p = d;
    for (int32_t i = 0; i + 1 < n; i++)
        for (int32_t j = i + 1; j < n; j++) {
            const float *a = vs + (int64_t)i * d, *b = vs + (int64_t)j * d;
            float sum = 0.0f;
            for (int32_t k = 0; k < d; k++)
                sum = sum + a[k] * b[k];
            zs[p++] = sum;
        }
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
    const int32_t n = F + 1;
    const int64_t wp = (int64_t)(n + IB - 1) / IB * IB;
    float *vt = calloc((size_t)(d * wp), sizeof *vt); /* the padding lanes stay 0 */
    for (int32_t s = 0; s < B; s++) {
        const float *vs = v + s * vw;
        float *zs = z + s * zw;
        memcpy(zs, vs, (size_t)d * sizeof *zs);
        if (!vt) { /* out of memory: the same sums, slower */
            dots_plain(n, d, vs, zs);
            continue;
        }
        for (int32_t j = 0; j < n; j++)
            for (int32_t k = 0; k < d; k++)
                vt[(int64_t)k * wp + j] = vs[(int64_t)j * d + k];
        dots_blocked(n, d, wp, vs, vt, zs);
    }
    free(vt);
}

/* dv_i = (dz's bottom part for i = 0, else 0) + sum over j != i, ascending,
 * of g_(i,j) v_j: the order in which the former pair-by-pair loop added
 * them (pairs in row-major order).  k in blocks of IB kept in registers when
 * d is a multiple of IB. */
void dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                             const float *dz, float *dv)
{
    int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(kind, F, d);
    if (kind == DENSE_INTERACT_CAT) {
        if (dv != dz)
            memcpy(dv, dz, (size_t)(B * vw) * sizeof *dv);
        return;
    }
    const int32_t n = F + 1;
    for (int32_t s = 0; s < B; s++) {
        const float *vs = v + s * vw, *dzs = dz + s * zw;
        float *dvs = dv + s * vw;
        for (int32_t i = 0; i < n; i++) {
            float *dvi = dvs + (int64_t)i * d;
            if (d % IB == 0) {
                for (int32_t k0 = 0; k0 < d; k0 += IB) {
                    float acc[IB] = {0};
                    if (i == 0)
                        memcpy(acc, dzs + k0, sizeof acc);
                    for (int32_t j = 0; j < i; j++) {
                        const float g = dzs[pair_at(d, n, j, i)], *vj = vs + (int64_t)j * d + k0;
                        for (int32_t kk = 0; kk < IB; kk++)
                            acc[kk] = acc[kk] + g * vj[kk];
                    }
                    for (int32_t j = i + 1; j < n; j++) {
                        const float g = dzs[pair_at(d, n, i, j)], *vj = vs + (int64_t)j * d + k0;
                        for (int32_t kk = 0; kk < IB; kk++)
                            acc[kk] = acc[kk] + g * vj[kk];
                    }
                    memcpy(dvi + k0, acc, sizeof acc);
                }
                continue;
            }
            for (int32_t k = 0; k < d; k++)
                dvi[k] = i == 0 ? dzs[k] : 0.0f;
            for (int32_t j = 0; j < n; j++) {
                if (j == i)
                    continue;
                const float g = dzs[j < i ? pair_at(d, n, j, i) : pair_at(d, n, i, j)];
                const float *vj = vs + (int64_t)j * d;
                for (int32_t k = 0; k < d; k++)
                    dvi[k] = dvi[k] + g * vj[k];
            }
        }
    }
}
