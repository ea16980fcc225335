/*
 * linear.c: the fully connected layer over cblas_sgemm, ReLU, and the
 * module's thread setting.
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
 */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "dense/layers.h"

static int dense_threads_; /* 0: not set, omp_get_max_threads() */

void dense_set_threads(int32_t threads)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    dense_threads_ = threads;
    dense_blas_init();
    openblas_set_num_threads(threads);
}

void dense_set_blas_threads(int32_t threads)
{
    dense_blas_init();
    openblas_set_num_threads(threads < 1 ? 1 : threads);
}

void dense_threads_save(dense_thread_state *out)
{
    out->dense = dense_threads_;
    out->blas = openblas_get_num_threads();
}

void dense_threads_restore(const dense_thread_state *saved)
{
    dense_threads_ = saved->dense;
    openblas_set_num_threads(saved->blas < 1 ? 1 : saved->blas);
}

int dense_threads(void)
{
    return dense_threads_ > 0 ? dense_threads_ : omp_get_max_threads();
}

void dense_linear_forward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                          const float *b, float *y)
{
    if (B <= 0)
        return;
    dense_blas_init();
    for (int32_t s = 0; s < B; s++)
        memcpy(y + (int64_t)s * out, b, (size_t)out * sizeof *y);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, x, in, W, in, 1.0f, y,
                out);
}

void dense_linear_backward(int32_t B, int32_t in, int32_t out, const float *x, const float *W,
                           const float *dy, float *dW, float *db, float *dx)
{
    if (B <= 0)
        return;
    dense_blas_init();
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1.0f, dy, out, x, in, 1.0f, dW,
                in);
    for (int32_t s = 0; s < B; s++) {
        const float *row = dy + (int64_t)s * out;
        for (int32_t o = 0; o < out; o++)
            db[o] += row[o];
    }
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1.0f, dy, out, W, in,
                    0.0f, dx, in);
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
