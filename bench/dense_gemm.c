/*
 * dense_gemm.c: the GEMMs of one forward + backward of ember's default DLRM
 * (src/dense: bottom 13-64-16, dot interaction to 52, top 52-64-1, ReLU after
 * every layer but the logit) under OpenBLAS, oneDNN and libxsmm, fp32 and
 * bf16, at ember's chunk of 256 samples and at a whole micro-batch of 2048.
 *
 * The calls are the ones src/dense/linear.c makes (row-major, W is [out][in]):
 *   fwd  Y  = X Wᵀ      n x out x in   bias written into Y first, sgemm beta 1,
 *                                      then a ReLU pass (every layer but the logit)
 *   dW  dW += dYᵀ X     out x in x n   beta 1 (dlrm.c accumulates a chunk's grads)
 *   dX  dX  = dY W      n x in x out   beta 0 (every layer but the first)
 * 4 fwd + 4 dW + 3 dX = 11 calls per chunk; a 2048-sample micro-batch is 8
 * chunks of 256 or 1 of 2048.
 *
 * Variants ("lib" in the output):
 *   openblas       cblas_sgemm, bias prefill + ReLU pass, as ember does
 *   dnnl_sgemm     dnnl_sgemm, the same calls and the same bias/ReLU passes
 *   dnnl_matmul    fwd only: matmul primitive without bias, then one bias+ReLU pass
 *   dnnl_matmul_fused  fwd only: matmul primitive with bias and a ReLU post-op
 *   libxsmm        JIT kernels from libxsmm_smmdispatch (column-major; dispatched
 *                  before timing). Its JIT has no transposed A, so fwd transposes
 *                  W (at most 64 x 64) into Wᵀ inside the timed call and runs NN;
 *                  dW uses its transposed-B kernel. One thread (its kernels are
 *                  single-threaded; libxsmmext's OpenMP driver is not tried).
 *   bf16           dnnl_gemm_bf16bf16f32 (bf16 inputs, fp32 accumulation and
 *                  output), both operands converted from fp32 (round to nearest
 *                  even) inside every timed call; bias/ReLU passes in fp32.
 *
 * Each repetition runs every variant's 22 calls (11 shapes x 2 chunk sizes),
 * the variants in an order rotated per repetition; phase 1 runs with 1 thread,
 * phase 2 with 2 (openblas_set_num_threads and omp_set_num_threads, which
 * oneDNN's OpenMP build follows; matmul primitives are created per phase).
 * Before timing, each call is checked against a naive triple loop in double
 * on the same random inputs (max_abs_diff; rel_err = max |diff| / max |ref|).
 *
 * Usage: bench_dense_gemm [reps (default 300)] [max threads (default 2)]
 * Output: one JSON line per (lib, threads, chunk, layer, op), then one summary
 * line per (lib, threads, chunk) with the microseconds of a 2048-sample batch.
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <dnnl.h>
#include <libxsmm.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

/* Exported by libdnnl 2.6 (row-major, like dnnl_sgemm) but not declared in its public header. */
extern dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                           dnnl_dim_t K, float alpha, const uint16_t *A,
                                           dnnl_dim_t lda, const uint16_t *B, dnnl_dim_t ldb,
                                           float beta, float *C, dnnl_dim_t ldc);

#define NL 4
#define NC 2
#define BATCH 2048
static const int LIN[NL] = {13, 64, 52, 64}, LOUT[NL] = {64, 16, 64, 1}, RELU[NL] = {1, 1, 1, 0};
static const int CHUNK[NC] = {256, 2048};

enum { FWD, DW, DX };
static const char *OPN[] = {"fwd", "dW", "dX"};
typedef struct { int L, op; } call_t;
/* ember's order: forward bottom to top, then each layer's dW before its dX, top to bottom */
static const call_t CALLS[] = {{0, FWD}, {1, FWD}, {2, FWD}, {3, FWD}, {3, DW}, {3, DX},
                               {2, DW},  {2, DX},  {1, DW},  {1, DX},  {0, DW}};
#define NCALL ((int)(sizeof CALLS / sizeof CALLS[0]))

enum { OPENBLAS, DNNL_SGEMM, DNNL_MATMUL, DNNL_MATMUL_FUSED, XSMM, BF16, NLIB };
static const char *LIBN[] = {"openblas", "dnnl_sgemm", "dnnl_matmul", "dnnl_matmul_fused", "libxsmm",
                             "bf16_dnnl_gemm_bf16bf16f32"};

/* inputs, outputs and references per chunk size and layer */
static float *W[NL], *WT[NL], *bias[NL], *dW[NL];
static float *X[NC][NL], *Y[NC][NL], *dY[NC][NL], *dX[NC][NL];
static float *refY[NC][NL], *refdX[NC][NL], *refdW[NC][NL];
static uint16_t *xb[NC][NL], *wb[NL], *dyb[NC][NL];
static libxsmm_smmfunction kx[NC][NL][3];

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static dnnl_primitive_t mm[2][NC][NL]; /* [fused][c][L] */
static dnnl_memory_t mX[NC][NL], mW[NL], mB[NL], mY[NC][NL];
static char mm_impl[2][NC][NL][64];

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}
static float *falloc(size_t n) { return xalloc(n * sizeof(float)); }

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#define DNNL_OK(x)                                                                    \
    do {                                                                              \
        dnnl_status_t s_ = (x);                                                       \
        if (s_ != dnnl_success) {                                                     \
            fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* fp32 to bf16, round to nearest even (no NaNs here) */
static void to_bf16(int64_t n, const float *restrict x, uint16_t *restrict y)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        u += 0x7FFFu + ((u >> 16) & 1u);
        y[i] = (uint16_t)(u >> 16);
    }
}

static void prefill_bias(int n, int out, const float *b, float *y)
{
    for (int s = 0; s < n; s++)
        memcpy(y + (int64_t)s * out, b, (size_t)out * sizeof *y);
}
static void relu(int64_t n, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = y[i] < 0.0f ? 0.0f : y[i];
}
static void bias_relu(int n, int out, const float *b, int r, float *y)
{
    for (int s = 0; s < n; s++) {
        float *row = y + (int64_t)s * out;
        for (int o = 0; o < out; o++) {
            float v = row[o] + b[o];
            row[o] = r && v < 0.0f ? 0.0f : v;
        }
    }
}

static int supports(int lib, int op) { return !(lib == DNNL_MATMUL || lib == DNNL_MATMUL_FUSED) || op == FWD; }

/* One call of variant lib on chunk size c, layer L, op. */
static void run(int lib, int c, int L, int op)
{
    const int n = CHUNK[c], in = LIN[L], out = LOUT[L];
    float *x = X[c][L], *w = W[L], *y = Y[c][L], *dy = dY[c][L], *dx = dX[c][L], *dw = dW[L];
    switch (lib) {
    case OPENBLAS:
        if (op == FWD) {
            prefill_bias(n, out, bias[L], y);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 1.0f, y, out);
            if (RELU[L])
                relu((int64_t)n * out, y);
        } else if (op == DW) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
        }
        break;
    case DNNL_SGEMM:
        if (op == FWD) {
            prefill_bias(n, out, bias[L], y);
            DNNL_OK(dnnl_sgemm('N', 'T', n, out, in, 1.0f, x, in, w, in, 1.0f, y, out));
            if (RELU[L])
                relu((int64_t)n * out, y);
        } else if (op == DW) {
            DNNL_OK(dnnl_sgemm('T', 'N', out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in));
        } else {
            DNNL_OK(dnnl_sgemm('N', 'N', n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in));
        }
        break;
    case DNNL_MATMUL:
    case DNNL_MATMUL_FUSED: {
        const int fused = lib == DNNL_MATMUL_FUSED;
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mX[c][L]}, {DNNL_ARG_WEIGHTS, mW[L]},
                                   {DNNL_ARG_DST, mY[c][L]}, {DNNL_ARG_BIAS, mB[L]}};
        DNNL_OK(dnnl_primitive_execute(mm[fused][c][L], stream, fused ? 4 : 3, args));
        DNNL_OK(dnnl_stream_wait(stream));
        if (!fused)
            bias_relu(n, out, bias[L], RELU[L], y);
        break;
    }
    case XSMM:
        /* column-major views: row-major [r][k] is a k x r matrix with ld k */
        if (op == FWD) {
            float *wt = WT[L]; /* [in][out]: column-major out x in */
            for (int o = 0; o < out; o++)
                for (int k = 0; k < in; k++)
                    wt[(int64_t)k * out + o] = w[(int64_t)o * in + k];
            prefill_bias(n, out, bias[L], y);
            kx[c][L][FWD](wt, x, y); /* Yᵀ(out x n) += Wᵀ(out x in) Xᵀ(in x n) */
            if (RELU[L])
                relu((int64_t)n * out, y);
        } else if (op == DW) {
            kx[c][L][DW](x, dy, dw); /* dWᵀ(in x out) += Xᵀ(in x n) (dYᵀ(out x n))ᵀ */
        } else {
            kx[c][L][DX](w, dy, dx); /* dXᵀ(in x n) = Wᵀ(in x out) dYᵀ(out x n) */
        }
        break;
    case BF16:
        if (op == FWD) {
            to_bf16((int64_t)n * in, x, xb[c][L]);
            to_bf16((int64_t)out * in, w, wb[L]);
            prefill_bias(n, out, bias[L], y);
            DNNL_OK(dnnl_gemm_bf16bf16f32('N', 'T', n, out, in, 1.0f, xb[c][L], in, wb[L], in, 1.0f, y, out));
            if (RELU[L])
                relu((int64_t)n * out, y);
        } else if (op == DW) {
            to_bf16((int64_t)n * out, dy, dyb[c][L]);
            to_bf16((int64_t)n * in, x, xb[c][L]);
            DNNL_OK(dnnl_gemm_bf16bf16f32('T', 'N', out, in, n, 1.0f, dyb[c][L], out, xb[c][L], in, 1.0f, dw, in));
        } else {
            to_bf16((int64_t)n * out, dy, dyb[c][L]);
            to_bf16((int64_t)out * in, w, wb[L]);
            DNNL_OK(dnnl_gemm_bf16bf16f32('N', 'N', n, in, out, 1.0f, dyb[c][L], out, wb[L], in, 0.0f, dx, in));
        }
        break;
    }
}

static void make_data(void)
{
    for (int L = 0; L < NL; L++) {
        const int in = LIN[L], out = LOUT[L];
        W[L] = falloc((size_t)out * in);
        WT[L] = falloc((size_t)out * in);
        dW[L] = falloc((size_t)out * in);
        bias[L] = falloc((size_t)out);
        wb[L] = xalloc((size_t)out * in * 2);
        float lim = sqrtf(6.0f / (float)(in + out));
        for (int i = 0; i < out * in; i++)
            W[L][i] = urand() * lim;
        for (int o = 0; o < out; o++)
            bias[L][o] = 0.1f * urand();
        for (int c = 0; c < NC; c++) {
            const int64_t n = CHUNK[c];
            X[c][L] = falloc(n * in);
            dX[c][L] = falloc(n * in);
            Y[c][L] = falloc(n * out);
            dY[c][L] = falloc(n * out);
            xb[c][L] = xalloc(n * in * 2);
            dyb[c][L] = xalloc(n * out * 2);
            refY[c][L] = falloc(n * out);
            refdX[c][L] = falloc(n * in);
            refdW[c][L] = falloc((int64_t)out * in);
            for (int64_t i = 0; i < n * in; i++)
                X[c][L][i] = L > 0 ? 0.5f * (urand() + 1.0f) : urand(); /* post-ReLU inputs are >= 0 */
            for (int64_t i = 0; i < n * out; i++)
                dY[c][L][i] = 0.01f * urand();
            /* the naive references, in double */
            for (int64_t s = 0; s < n; s++)
                for (int o = 0; o < out; o++) {
                    double a = bias[L][o];
                    for (int k = 0; k < in; k++)
                        a += (double)X[c][L][s * in + k] * W[L][(int64_t)o * in + k];
                    refY[c][L][s * out + o] = (float)(RELU[L] && a < 0 ? 0 : a);
                }
            for (int64_t s = 0; s < n; s++)
                for (int k = 0; k < in; k++) {
                    double a = 0;
                    for (int o = 0; o < out; o++)
                        a += (double)dY[c][L][s * out + o] * W[L][(int64_t)o * in + k];
                    refdX[c][L][s * in + k] = (float)a;
                }
            for (int o = 0; o < out; o++)
                for (int k = 0; k < in; k++) {
                    double a = 0;
                    for (int64_t s = 0; s < n; s++)
                        a += (double)dY[c][L][s * out + o] * X[c][L][s * in + k];
                    refdW[c][L][(int64_t)o * in + k] = (float)a;
                }
        }
    }
}

static void make_xsmm(void)
{
    const float one = 1.0f, zero = 0.0f;
    for (int c = 0; c < NC; c++)
        for (int L = 0; L < NL; L++) {
            const libxsmm_blasint n = CHUNK[c], in = LIN[L], out = LOUT[L];
            int f0 = LIBXSMM_GEMM_FLAG_NONE, ftb = LIBXSMM_GEMM_FLAG_TRANS_B;
            kx[c][L][FWD] = libxsmm_smmdispatch(out, n, in, &out, &in, &out, &one, &one, &f0, NULL);
            kx[c][L][DW] = libxsmm_smmdispatch(in, out, n, &in, &out, &in, &one, &one, &ftb, NULL);
            kx[c][L][DX] = libxsmm_smmdispatch(in, n, out, &in, &out, &in, &one, &zero, &f0, NULL);
            for (int op = 0; op < 3; op++)
                if (!kx[c][L][op] && !(op == DX && L == 0)) {
                    fprintf(stderr, "libxsmm: no kernel for chunk %d layer %d %s\n", CHUNK[c], L, OPN[op]);
                    exit(1);
                }
        }
}

/* matmul primitives for the current thread count (oneDNN sizes its work at creation) */
static void make_matmul(void)
{
    for (int L = 0; L < NL; L++) {
        dnnl_memory_desc_t wmd, bmd;
        dnnl_dims_t wd = {LIN[L], LOUT[L]}, ws = {1, LIN[L]}, bd = {1, LOUT[L]};
        DNNL_OK(dnnl_memory_desc_init_by_strides(&wmd, 2, wd, dnnl_f32, ws));
        DNNL_OK(dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_f32, dnnl_ab));
        if (!mW[L]) {
            DNNL_OK(dnnl_memory_create(&mW[L], &wmd, engine, W[L]));
            DNNL_OK(dnnl_memory_create(&mB[L], &bmd, engine, bias[L]));
        }
        for (int c = 0; c < NC; c++) {
            dnnl_memory_desc_t xmd, ymd;
            dnnl_dims_t xd = {CHUNK[c], LIN[L]}, yd = {CHUNK[c], LOUT[L]};
            DNNL_OK(dnnl_memory_desc_init_by_tag(&xmd, 2, xd, dnnl_f32, dnnl_ab));
            DNNL_OK(dnnl_memory_desc_init_by_tag(&ymd, 2, yd, dnnl_f32, dnnl_ab));
            if (!mX[c][L]) {
                DNNL_OK(dnnl_memory_create(&mX[c][L], &xmd, engine, X[c][L]));
                DNNL_OK(dnnl_memory_create(&mY[c][L], &ymd, engine, Y[c][L]));
            }
            for (int fused = 0; fused < 2; fused++) {
                dnnl_matmul_desc_t md;
                DNNL_OK(dnnl_matmul_desc_init(&md, &xmd, &wmd, fused ? &bmd : NULL, &ymd));
                dnnl_primitive_attr_t attr;
                DNNL_OK(dnnl_primitive_attr_create(&attr));
                dnnl_post_ops_t po = NULL;
                if (fused && RELU[L]) {
                    DNNL_OK(dnnl_post_ops_create(&po));
                    DNNL_OK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
                    DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
                }
                dnnl_primitive_desc_t pd;
                DNNL_OK(dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL));
                const char *impl = "?";
                dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
                snprintf(mm_impl[fused][c][L], sizeof mm_impl[0][0][0], "%s", impl);
                if (mm[fused][c][L])
                    dnnl_primitive_destroy(mm[fused][c][L]);
                DNNL_OK(dnnl_primitive_create(&mm[fused][c][L], pd));
                dnnl_primitive_desc_destroy(pd);
                if (po)
                    dnnl_post_ops_destroy(po);
                dnnl_primitive_attr_destroy(attr);
            }
        }
    }
}

/* max |a - ref|, max |ref|, ||a - ref|| / ||ref|| over n */
static void diff(int64_t n, const float *a, const float *ref, double *maxd, double *maxr, double *fro)
{
    double d = 0, r = 0, sd = 0, sr = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        d = e > d ? e : d;
        r = fabs(ref[i]) > r ? fabs(ref[i]) : r;
        sd += e * e;
        sr += (double)ref[i] * ref[i];
    }
    *maxd = d;
    *maxr = r;
    *fro = sr > 0 ? sqrt(sd / sr) : 0;
}

static void check(int lib, int c, int L, int op, double *maxd, double *rel, double *fro)
{
    const int64_t n = CHUNK[c], in = LIN[L], out = LOUT[L];
    double maxr;
    if (op == FWD) {
        memset(Y[c][L], 0xff, n * out * sizeof(float)); /* NaN: a call that writes nothing shows */
        run(lib, c, L, op);
        diff(n * out, Y[c][L], refY[c][L], maxd, &maxr, fro);
    } else if (op == DW) {
        memset(dW[L], 0, out * in * sizeof(float));
        run(lib, c, L, op);
        diff(out * in, dW[L], refdW[c][L], maxd, &maxr, fro);
    } else {
        memset(dX[c][L], 0xff, n * in * sizeof(float));
        run(lib, c, L, op);
        diff(n * in, dX[c][L], refdX[c][L], maxd, &maxr, fro);
    }
    if (isnan(*maxd) || isnan(*fro))
        *maxd = *fro = INFINITY;
    *rel = maxr > 0 ? *maxd / maxr : 0;
}

static const char *isa_name(dnnl_cpu_isa_t i)
{
    switch (i) {
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

static int cmpd(const void *a, const void *b) { return bench_cmp_double(a, b); }

#define ROUNDS 3
#define T(r, l, c, k) t[(((size_t)(r) * NLIB + (l)) * NC + (c)) * NCALL + (k)]
#define TOT(r, l, c, a) tot[(((size_t)(r) * NLIB + (l)) * NC + (c)) * 2 + (a)]

/* One repetition of variant l: its calls at both chunk sizes, each timed (r < 0: warm-up, not kept). */
static void time_rep(int l, int r, double *t, double *tot)
{
    for (int c = 0; c < NC; c++) {
        double fwd = 0, all = 0;
        for (int k = 0; k < NCALL; k++) {
            if (!supports(l, CALLS[k].op))
                continue;
            double t0 = bench_now();
            run(l, c, CALLS[k].L, CALLS[k].op);
            double dt = bench_now() - t0;
            if (r >= 0)
                T(r, l, c, k) = dt;
            all += dt;
            fwd += CALLS[k].op == FWD ? dt : 0;
        }
        if (r >= 0)
            TOT(r, l, c, 0) = fwd, TOT(r, l, c, 1) = all;
    }
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 300, maxthreads = argc > 2 ? atoi(argv[2]) : 2;
    const int warm = 30;
    if (reps < 1 || maxthreads < 1) {
        fprintf(stderr, "usage: %s [reps] [max threads]\n", argv[0]);
        return 2;
    }
    libxsmm_init();
    DNNL_OK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    DNNL_OK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    make_data();
    make_xsmm();

    char ver[NLIB][160], isa[NLIB][96];
    const dnnl_version_t *dv = dnnl_version();
    const char *disa = isa_name(dnnl_get_effective_cpu_isa());
    snprintf(ver[OPENBLAS], sizeof ver[0], "%s", openblas_get_config());
    snprintf(isa[OPENBLAS], sizeof isa[0], "core %s", openblas_get_corename());
    for (int l = DNNL_SGEMM; l <= BF16; l++) {
        snprintf(ver[l], sizeof ver[0], "oneDNN %d.%d.%d", dv->major, dv->minor, dv->patch);
        snprintf(isa[l], sizeof isa[0], "%s", disa);
    }
    snprintf(ver[XSMM], sizeof ver[0], "libxsmm %s", LIBXSMM_VERSION);
    snprintf(isa[XSMM], sizeof isa[0], "%s", libxsmm_get_target_arch());

    double *t = malloc(sizeof(double) * (size_t)reps * NLIB * NC * NCALL);
    double *tot = malloc(sizeof(double) * (size_t)reps * NLIB * NC * 2); /* [rep][lib][c][fwd only, all] */
    double *tmp = malloc(sizeof(double) * (size_t)reps);
    for (int threads = 1; threads <= maxthreads; threads++) {
        openblas_set_num_threads(threads);
        omp_set_num_threads(threads);
        make_matmul();
        int use[NLIB];
        for (int l = 0; l < NLIB; l++)
            use[l] = !(l == XSMM && threads > 1);

        double err[NLIB][NC][NCALL][3];
        for (int l = 0; l < NLIB; l++)
            for (int c = 0; c < NC; c++)
                for (int k = 0; k < NCALL; k++)
                    if (use[l] && supports(l, CALLS[k].op))
                        check(l, c, CALLS[k].L, CALLS[k].op, &err[l][c][k][0], &err[l][c][k][1], &err[l][c][k][2]);

        if (threads == 1) { /* every repetition runs every variant, the order rotated */
            for (int r = -warm; r < reps; r++)
                for (int j = 0; j < NLIB; j++) {
                    const int l = (j + (r < 0 ? 0 : r)) % NLIB;
                    if (use[l])
                        time_rep(l, r, t, tot);
                }
        } else { /* blocks of reps / ROUNDS per variant, rotated per round, idle pools between */
            for (int round = 0; round < ROUNDS; round++)
                for (int j = 0; j < NLIB; j++) {
                    const int l = (j + round) % NLIB;
                    if (!use[l])
                        continue;
                    for (int r = -warm; r < 0; r++)
                        time_rep(l, r, t, tot);
                    for (int r = round * reps / ROUNDS; r < (round + 1) * reps / ROUNDS; r++)
                        time_rep(l, r, t, tot);
                    nanosleep(&(struct timespec){0, 200000000}, NULL);
                }
        }

        for (int l = 0; l < NLIB; l++) {
            if (!use[l])
                continue;
            for (int c = 0; c < NC; c++) {
                for (int k = 0; k < NCALL; k++) {
                    const int L = CALLS[k].L, op = CALLS[k].op;
                    if (!supports(l, op))
                        continue;
                    for (int r = 0; r < reps; r++)
                        tmp[r] = T(r, l, c, k);
                    qsort(tmp, (size_t)reps, sizeof *tmp, cmpd);
                    const double med = tmp[reps / 2], mn = tmp[0];
                    const int64_t m = op == FWD ? CHUNK[c] : op == DW ? LOUT[L] : CHUNK[c];
                    const int64_t nn = op == FWD ? LOUT[L] : LIN[L];
                    const int64_t kk = op == FWD ? LIN[L] : op == DW ? CHUNK[c] : LOUT[L];
                    const char *kern = l == DNNL_MATMUL || l == DNNL_MATMUL_FUSED
                                           ? mm_impl[l == DNNL_MATMUL_FUSED][c][L] : isa[l];
                    printf("{\"lib\":\"%s\",\"threads\":%d,\"chunk\":%d,\"layer\":%d,\"op\":\"%s\","
                           "\"m\":%lld,\"n\":%lld,\"k\":%lld,\"median_us\":%.3f,\"min_us\":%.3f,"
                           "\"gflops\":%.2f,\"max_abs_diff\":%.3g,\"rel_err\":%.3g,\"rel_fro_err\":%.3g,"
                           "\"reps\":%d,\"schedule\":\"%s\",\"version\":\"%s\",\"isa\":\"%s\"}\n",
                           LIBN[l], threads, CHUNK[c], L, OPN[op], (long long)m, (long long)nn, (long long)kk,
                           med * 1e6, mn * 1e6, 2.0 * m * nn * kk / med * 1e-9, err[l][c][k][0], err[l][c][k][1],
                           err[l][c][k][2], reps, threads == 1 ? "alternating" : "blocks", ver[l], kern);
                }
                /* a 2048-sample micro-batch: BATCH / chunk calls of each shape */
                double s[2][2], maxd = 0, maxrel = 0;
                for (int a = 0; a < 2; a++) {
                    for (int r = 0; r < reps; r++)
                        tmp[r] = TOT(r, l, c, a) * (BATCH / CHUNK[c]);
                    qsort(tmp, (size_t)reps, sizeof *tmp, cmpd);
                    s[a][0] = tmp[reps / 2], s[a][1] = tmp[0];
                }
                for (int k = 0; k < NCALL; k++)
                    if (supports(l, CALLS[k].op)) {
                        maxd = err[l][c][k][0] > maxd ? err[l][c][k][0] : maxd;
                        maxrel = err[l][c][k][1] > maxrel ? err[l][c][k][1] : maxrel;
                    }
                printf("{\"summary\":true,\"lib\":\"%s\",\"threads\":%d,\"chunk\":%d,\"batch\":%d,"
                       "\"fwd_us_median\":%.1f,\"fwd_us_min\":%.1f,",
                       LIBN[l], threads, CHUNK[c], BATCH, s[0][0] * 1e6, s[0][1] * 1e6);
                if (supports(l, DW))
                    printf("\"fwd_bwd_us_median\":%.1f,\"fwd_bwd_us_min\":%.1f,\"ns_per_sample\":%.1f,",
                           s[1][0] * 1e6, s[1][1] * 1e6, s[1][0] * 1e9 / BATCH);
                printf("\"max_abs_diff\":%.3g,\"max_rel_err\":%.3g,\"version\":\"%s\",\"isa\":\"%s\"}\n",
                       maxd, maxrel, ver[l], isa[l]);
            }
        }
        fflush(stdout);
    }
    free(t);
    free(tot);
    free(tmp);
    libxsmm_finalize();
    return 0;
}
