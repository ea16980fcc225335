/*
 * linear.c: the fully connected layer over cblas_sgemm, and ReLU.
 *
 * Forward fills y with the bias and lets sgemm add x Wᵀ (beta = 1), one pass
 * over y; backward lets sgemm accumulate dW += dYᵀ X (beta = 1), so that
 * micro-batches add up in place.  db is summed by a plain loop in sample
 * order.  sgemm's own summation order is OpenBLAS's: fixed for a fixed BLAS
 * thread count, but not the same for 1 and 2 threads (dense.h).
 *
 * No OpenMP here or in interact.c: dlrm.c calls these functions chunk by
 * chunk (a fixed number of rows) from its OpenMP threads, each call on one
 * thread with one BLAS thread.  With more BLAS threads it runs the chunks
 * on the calling thread instead: the pthread OpenBLAS keeps its workers
 * spinning for a while after each call, and libgomp's workers spin after
 * each parallel region, so alternating the two on 2 cores ran a step 2.3x
 * slower than BLAS alone (measured, docs/training.md).
 *
 * Built with EMBER_DENSE_BF16_ROUND (a CMake option for bench/bf16_auc.sh
 * only), every GEMM operand is first rounded to bf16, nearest even, and
 * the products are summed in fp32 as a bf16 GEMM with fp32 accumulation
 * does: the accuracy a bf16 dense model would have, on any CPU, at fp32's
 * speed.  docs/PERFORMANCE.md ("bf16") gives the AUC it costs and why
 * ember computes the dense model in fp32.
 */
#include <cblas.h>
#include <string.h>

#include "dense/layers.h"

#ifdef EMBER_DENSE_BF16_ROUND
#include <stdint.h>
#include <stdlib.h>

/* A copy of a[n] with every element rounded to bf16; the caller frees it. */
static float *bf16_copy(int64_t n, const float *a)
{
    float *c = malloc((size_t)n * sizeof *c);
    EMBER_ASSERT(c);
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &a[i], sizeof u);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&c[i], &u, sizeof u);
    }
    return c;
}
#define BF16_IN(p, n) const float *p##_r = bf16_copy((int64_t)(n), p)
#define BF16_USE(p) p##_r
#define BF16_DONE(p) free((void *)p##_r)
#else
#define BF16_IN(p, n) const float *p##_r = (p)
#define BF16_USE(p) p##_r
#define BF16_DONE(p) (void)p##_r
#endif

void dense_linear_forward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                          const float *b, float *y)
{
    if (B <= 0)
        return;
    for (int32_t s = 0; s < B; s++) {
        if (b)
            memcpy(y + (int64_t)s * out, b, (size_t)out * sizeof *y);
        else
            memset(y + (int64_t)s * out, 0, (size_t)out * sizeof *y);
    }
    BF16_IN(x, (int64_t)B * in);
    BF16_IN(W, (int64_t)out * in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, BF16_USE(x), in, BF16_USE(W),
                in, 1.0f, y, out);
    BF16_DONE(x);
    BF16_DONE(W);
}

void dense_linear_backward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                           const float *dy, float *dW, float *db, float *dx)
{
    if (B <= 0)
        return;
    BF16_IN(dy, (int64_t)B * out);
    BF16_IN(x, (int64_t)B * in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1.0f, BF16_USE(dy), out,
                BF16_USE(x), in, 1.0f, dW, in);
    for (int32_t s = 0; db && s < B; s++) {
        const float *row = dy + (int64_t)s * out;
        for (int32_t o = 0; o < out; o++)
            db[o] += row[o];
    }
    if (dx) {
        BF16_IN(W, (int64_t)out * in);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1.0f, BF16_USE(dy), out,
                    BF16_USE(W), in, 0.0f, dx, in);
        BF16_DONE(W);
    }
    BF16_DONE(dy);
    BF16_DONE(x);
}

void dense_relu_forward(int64_t n, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = y[i] < 0.0f ? 0.0f : y[i];
}

void dense_relu_backward(int64_t n, const float *y, float *dy)
{
    for (int64_t i = 0; i < n; i++)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
