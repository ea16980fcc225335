/*
 * interact.c: the dot interaction alone (src/dense/interact.c), forward and
 * backward, on one thread, against the documented sums as the plain loop
 * (src/ref/ref_dot_order.c: one sample, one pair, one k at a time) in the
 * same run.
 *
 * A batch of 2048 samples goes through in chunks of 256, as dlrm.c hands
 * them to a thread.  Before timing, both give the same bits (each product
 * rounded, then added).  JSON lines, one per shape: median ns per sample
 * over the repetitions, forward and backward, kernel and plain loop.
 *
 *   bench_interact [reps (default 200)]
 *
 * Shapes: the built-in task's (F = 8, d = 16), Criteo's (F = 26, d = 16),
 * and F = 8 at d = 32 and d = 5.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "dense/layers.h"
#include "ref/ref.h"

enum { BATCH = 2048, CHUNK = 256, MAX_REPS = 10000 };

typedef void (*pass_fn)(int32_t B, int32_t F, int32_t d, const float *in, const float *dz, float *out);

static void kernel_fwd(int32_t B, int32_t F, int32_t d, const float *v, const float *dz, float *z)
{
    (void)dz;
    dense_interact_forward(DENSE_INTERACT_DOT, B, F, d, v, z);
}
static void kernel_bwd(int32_t B, int32_t F, int32_t d, const float *v, const float *dz, float *dv)
{
    dense_interact_backward(DENSE_INTERACT_DOT, B, F, d, v, dz, dv);
}
static void plain_fwd(int32_t B, int32_t F, int32_t d, const float *v, const float *dz, float *z)
{
    (void)dz;
    ref_dot_order_forward(B, F, d, v, z);
}
static void plain_bwd(int32_t B, int32_t F, int32_t d, const float *v, const float *dz, float *dv)
{
    ref_dot_order_backward(B, F, d, v, dz, dv);
}

/* Median ns per sample of fn over the batch in chunks. */
static double time_pass(pass_fn fn, int reps, int32_t F, int32_t d, const float *v, const float *dz, float *out,
                        int64_t vw, int64_t zw, int64_t ow)
{
    static double t[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (int32_t lo = 0; lo < BATCH; lo += CHUNK)
            fn(CHUNK, F, d, v + lo * vw, dz + lo * zw, out + lo * ow);
        t[r] = (bench_now() - t0) * 1e9 / BATCH;
    }
    return bench_median(t, reps);
}

int main(int argc, char **argv)
{
    static const int32_t SHAPES[][2] = {{8, 16}, {26, 16}, {8, 32}, {8, 5}};
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: bench_interact [reps 1..%d]\n", MAX_REPS);
        return 2;
    }
    for (size_t c = 0; c < sizeof SHAPES / sizeof SHAPES[0]; c++) {
        const int32_t F = SHAPES[c][0], d = SHAPES[c][1];
        const int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(DENSE_INTERACT_DOT, F, d);
        float *v = malloc(sizeof(float) * BATCH * vw), *dz = malloc(sizeof(float) * BATCH * zw);
        float *z = malloc(sizeof(float) * BATCH * zw), *z2 = malloc(sizeof(float) * BATCH * zw);
        float *dv = malloc(sizeof(float) * BATCH * vw), *dv2 = malloc(sizeof(float) * BATCH * vw);
        if (!v || !dz || !z || !z2 || !dv || !dv2)
            return fprintf(stderr, "bench_interact: out of memory\n"), 1;
        uint64_t x = 88172645463325252ULL; /* xorshift64: values in [-1, 1) */
        for (int64_t i = 0; i < BATCH * vw + BATCH * zw; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            float e = (float)((double)(x >> 11) * 0x1.0p-52 - 1.0);
            if (i < BATCH * vw)
                v[i] = e;
            else
                dz[i - BATCH * vw] = e;
        }
        kernel_fwd(BATCH, F, d, v, dz, z), plain_fwd(BATCH, F, d, v, dz, z2);
        kernel_bwd(BATCH, F, d, v, dz, dv), plain_bwd(BATCH, F, d, v, dz, dv2);
        int same = !memcmp(z, z2, sizeof(float) * BATCH * zw) && !memcmp(dv, dv2, sizeof(float) * BATCH * vw);
        double kf = time_pass(kernel_fwd, reps, F, d, v, dz, z, vw, zw, zw);
        double kb = time_pass(kernel_bwd, reps, F, d, v, dz, dv, vw, zw, vw);
        double pf = time_pass(plain_fwd, reps, F, d, v, dz, z2, vw, zw, zw);
        double pb = time_pass(plain_bwd, reps, F, d, v, dz, dv2, vw, zw, vw);
        printf("{\"bench\":\"interact\",\"F\":%d,\"d\":%d,\"batch\":%d,\"chunk\":%d,\"reps\":%d,"
               "\"fwd_ns\":%.2f,\"bwd_ns\":%.2f,\"plain_fwd_ns\":%.2f,\"plain_bwd_ns\":%.2f,"
               "\"speedup_vs_plain\":%.2f,\"same_bits\":%s}\n",
               F, d, BATCH, CHUNK, reps, kf, kb, pf, pb, (pf + pb) / (kf + kb), same ? "true" : "false");
        free(v), free(dz), free(z), free(z2), free(dv), free(dv2);
        if (!same)
            return fprintf(stderr, "bench_interact: F %d d %d: kernel and plain loop differ\n", F, d), 1;
    }
    return 0;
}
