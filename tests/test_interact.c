/*
 * test_interact.c: the dot interaction's kernels (src/dense/interact.c,
 * interact_dot.c, lanes.c) against the documented sums as plain scalar loops
 * (src/ref/ref_dot_order.c), bit for bit (memcmp), forward and backward.
 *
 * The documented sums (docs/training.md, interact_dot.h): each dot over k in
 * order from 0, each product rounded before it is added (the reference's
 * products go through a volatile, so no build can fuse them); dv_i =
 * (dz's bottom part for i = 0, else 0) + g_(i,j) v_j over j != i ascending.
 *
 * Shapes: batches 1, 15, 16, 17 (a block of 16 samples in the lanes, short
 * or one over), 2048 and random ones; d 1, 5, 8, 16, 32 and others (d a
 * multiple of 16 takes the backward without lanes); F 1..27 and a wide
 * case whose scratch is on the heap.  Inputs hold exact zeros of both signs
 * (0 + -0 is +0: a sum must start from 0 and add, as documented), subnormals
 * and large values; the buffers sit one float off the vector alignment, and
 * a guard row after the batch must stay untouched.  Every sample's bits must
 * not depend on its neighbours: the batch cut at a random place gives the
 * same bits (dlrm.c hands threads whole chunks).  Also the lane transposes
 * round trip, and the one-sample and lanes kernels called directly.
 */
#include <string.h>

#include "dense/interact_dot.h"
#include "dense/lanes.h"
#include "dense/layers.h"
#include "util.h"

/* Mostly uniform in [-1, 1), with exact zeros of both signs, subnormals and
 * large values mixed in. */
static void fill_mixed(test_rng *r, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t kind = test_range(r, 0, 40);
        x[i] = kind == 0   ? 0.0f
               : kind == 1 ? -0.0f
               : kind == 2 ? test_float(r, -1, 1) * 1e-39f
               : kind == 3 ? test_float(r, -1, 1) * 1e18f
                           : test_float(r, -1, 1);
    }
}

/* One float past a 64-byte boundary, n floats then a guard row of g floats
 * of a known pattern. */
static float *alloc_off(int64_t n, int64_t g)
{
    float *base = aligned_alloc(64, (size_t)(n + g + 32 + 15) / 16 * 64); /* whole 64-byte lines */
    CHECK(base != NULL);
    if (!base)
        exit(1);
    float *p = base + 1;
    for (int64_t i = 0; i < n + g; i++)
        p[i] = (float)(i % 97) - 1000.0f;
    return p;
}

static void free_off(float *p) { free(p - 1); }

static int guard_intact(const float *p, int64_t n, int64_t g)
{
    for (int64_t i = n; i < n + g; i++)
        if (p[i] != (float)(i % 97) - 1000.0f)
            return 0;
    return 1;
}

/* The kernels against the plain loops on fresh inputs of one shape. */
static void check_shape(test_rng *r, int32_t B, int32_t F, int32_t d)
{
    const int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(DENSE_INTERACT_DOT, F, d);
    CHECK(zw == d + (int64_t)(F + 1) * F / 2);
    float *v = alloc_off(B * vw, 0), *dz = alloc_off(B * zw, 0);
    float *z = alloc_off(B * zw, zw), *dv = alloc_off(B * vw, vw);
    float *zr = malloc(sizeof(float) * (size_t)(B * zw)), *dvr = malloc(sizeof(float) * (size_t)(B * vw));
    fill_mixed(r, v, B * vw), fill_mixed(r, dz, B * zw);
    char what[96];
    snprintf(what, sizeof what, "B %d F %d d %d", B, F, d);

    dense_interact_forward(DENSE_INTERACT_DOT, B, F, d, v, z);
    ref_dot_order_forward(B, F, d, v, zr);
    CHECK_MSG(!memcmp(z, zr, sizeof(float) * (size_t)(B * zw)), "forward %s: bits differ", what);
    CHECK_MSG(guard_intact(z, B * zw, zw), "forward %s: wrote past the batch", what);
    dense_interact_backward(DENSE_INTERACT_DOT, B, F, d, v, dz, dv);
    ref_dot_order_backward(B, F, d, v, dz, dvr);
    CHECK_MSG(!memcmp(dv, dvr, sizeof(float) * (size_t)(B * vw)), "backward %s: bits differ", what);
    CHECK_MSG(guard_intact(dv, B * vw, vw), "backward %s: wrote past the batch", what);

    if (B > 1) { /* cut in two: the same bits, whatever the neighbours */
        const int32_t cut = (int32_t)test_range(r, 1, B);
        dense_interact_forward(DENSE_INTERACT_DOT, cut, F, d, v, z);
        dense_interact_forward(DENSE_INTERACT_DOT, B - cut, F, d, v + cut * vw, z + cut * zw);
        CHECK_MSG(!memcmp(z, zr, sizeof(float) * (size_t)(B * zw)), "forward %s cut at %d: bits differ", what, cut);
        dense_interact_backward(DENSE_INTERACT_DOT, cut, F, d, v, dz, dv);
        dense_interact_backward(DENSE_INTERACT_DOT, B - cut, F, d, v + cut * vw, dz + cut * zw, dv + cut * vw);
        CHECK_MSG(!memcmp(dv, dvr, sizeof(float) * (size_t)(B * vw)), "backward %s cut at %d: bits differ", what,
                  cut);
    }
    free_off(v), free_off(dz), free_off(z), free_off(dv), free(zr), free(dvr);
}

/* The one-sample kernels, and the lanes kernels called on one block, against
 * the plain loops (the driver reaches the former only when out of memory). */
static void check_kernels(test_rng *r, int32_t m, int32_t F, int32_t d)
{
    const int32_t n = F + 1, L = DENSE_LANES;
    const int64_t vw = (int64_t)n * d, zw = d + (int64_t)n * F / 2, P = zw - d;
    float *v = malloc(sizeof(float) * (size_t)(m * vw)), *dz = malloc(sizeof(float) * (size_t)(m * zw));
    float *z = malloc(sizeof(float) * (size_t)(m * zw)), *dv = malloc(sizeof(float) * (size_t)(m * vw));
    float *zr = malloc(sizeof(float) * (size_t)(m * zw)), *dvr = malloc(sizeof(float) * (size_t)(m * vw));
    float *vt = malloc(sizeof(float) * (size_t)(vw * L)), *dzt = malloc(sizeof(float) * (size_t)(zw * L));
    float *zt = malloc(sizeof(float) * (size_t)((P + 1) * L)), *dvt = malloc(sizeof(float) * (size_t)(vw * L));
    fill_mixed(r, v, m * vw), fill_mixed(r, dz, m * zw);
    ref_dot_order_forward(m, F, d, v, zr), ref_dot_order_backward(m, F, d, v, dz, dvr);
    char what[64];
    snprintf(what, sizeof what, "m %d F %d d %d", m, F, d);

    memcpy(z, zr, sizeof(float) * (size_t)(m * zw)); /* the bottom parts: the driver's */
    for (int32_t s = 0; s < m; s++) {
        memset(z + s * zw + d, 0xff, sizeof(float) * (size_t)P);
        dense_dot_sample_forward(n, d, v + s * vw, z + s * zw);
        dense_dot_sample_backward(n, d, v + s * vw, dz + s * zw, dv + s * vw);
    }
    CHECK_MSG(!memcmp(z, zr, sizeof(float) * (size_t)(m * zw)), "sample forward %s", what);
    CHECK_MSG(!memcmp(dv, dvr, sizeof(float) * (size_t)(m * vw)), "sample backward %s", what);
    if (d % L == 0) {
        memset(dv, 0xff, sizeof(float) * (size_t)(m * vw));
        for (int32_t s = 0; s < m; s++)
            dense_dot_rows_backward(n, d, v + s * vw, dz + s * zw, dv + s * vw);
        CHECK_MSG(!memcmp(dv, dvr, sizeof(float) * (size_t)(m * vw)), "rows backward %s", what);
    }

    dense_lanes_in(v, vw, m, vw, vt);
    dense_lanes_in(dz, zw, m, zw, dzt);
    for (int64_t c = 0; c < vw; c++) /* lanes past the block's samples hold 0 */
        for (int32_t s = m; s < L; s++)
            CHECK_MSG(vt[c * L + s] == 0.0f && !signbit(vt[c * L + s]), "lanes_in %s: lane %d not +0", what, s);
    zt[P * L] = 7.0f; /* a sentinel just past the pairs */
    dense_dot_lanes_forward(n, d, vt, zt);
    CHECK(zt[P * L] == 7.0f);
    dense_dot_lanes_backward(n, d, vt, dzt, dvt);
    memset(z, 0xff, sizeof(float) * (size_t)(m * zw)), memset(dv, 0xff, sizeof(float) * (size_t)(m * vw));
    dense_lanes_out(zt, m, P, z + d, zw);
    dense_lanes_out(dvt, m, vw, dv, vw);
    for (int32_t s = 0; s < m; s++)
        memcpy(z + s * zw, zr + s * zw, sizeof(float) * (size_t)d);
    CHECK_MSG(!memcmp(z, zr, sizeof(float) * (size_t)(m * zw)), "lanes forward %s", what);
    CHECK_MSG(!memcmp(dv, dvr, sizeof(float) * (size_t)(m * vw)), "lanes backward %s", what);
    free(v), free(dz), free(z), free(dv), free(zr), free(dvr), free(vt), free(dzt), free(zt), free(dvt);
}

/* dense_lanes_in then dense_lanes_out gives the rows back, and in puts
 * element c of row r at t[c][r]; only m rows of w floats are written. */
static void check_transposes(test_rng *r)
{
    for (int rep = 0; rep < 200; rep++) {
        const int32_t m = (int32_t)test_range(r, 1, DENSE_LANES + 1);
        const int64_t w = test_range(r, 1, 70), xs = w + test_range(r, 0, 3);
        float *x = alloc_off(m * xs, xs), *y = alloc_off(m * xs, xs);
        float *t = malloc(sizeof(float) * (size_t)(w * DENSE_LANES));
        test_fill(r, x, m * xs, -1, 1);
        memcpy(y, x, sizeof(float) * (size_t)(m * xs)); /* the gaps between rows stay as they are */
        dense_lanes_in(x, xs, m, w, t);
        int ok = 1;
        for (int32_t s = 0; s < DENSE_LANES; s++)
            for (int64_t c = 0; c < w; c++)
                ok &= !memcmp(&t[c * DENSE_LANES + s], s < m ? &x[s * xs + c] : &(float){0.0f}, sizeof(float));
        CHECK_MSG(ok, "lanes_in m %d w %lld", m, (long long)w);
        for (int32_t s = 0; s < m; s++)
            for (int64_t c = 0; c < w; c++)
                y[s * xs + c] = -5.0f;
        dense_lanes_out(t, m, w, y, xs);
        CHECK_MSG(!memcmp(x, y, sizeof(float) * (size_t)(m * xs)) && guard_intact(y, m * xs, xs),
                  "lanes round trip m %d w %lld xs %lld", m, (long long)w, (long long)xs);
        free_off(x), free_off(y), free(t);
    }
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    static const int32_t BATCHES[] = {1, 15, 16, 17, 2048};
    static const int32_t DIMS[] = {1, 5, 8, 16, 32, 3, 13, 48};
    check_transposes(&r);
    for (size_t b = 0; b < sizeof BATCHES / sizeof BATCHES[0]; b++)
        for (size_t k = 0; k < sizeof DIMS / sizeof DIMS[0]; k++) { /* F 8 (the built-in task's), F 1..27 */
            check_shape(&r, BATCHES[b], 8, DIMS[k]);
            if (BATCHES[b] < 2048)
                check_shape(&r, BATCHES[b], (int32_t)test_range(&r, 1, 28), DIMS[k]);
        }
    for (int32_t F = 1; F <= 27; F++) /* every F at a random batch and d */
        check_shape(&r, (int32_t)test_range(&r, 1, 70), F, (int32_t)test_range(&r, 1, 40));
    check_shape(&r, 2048, 26, 16); /* Criteo's shape */
    check_shape(&r, 19, 100, 128); /* scratch past the stack's: the heap */
    check_shape(&r, 18, 60, 13);
    for (int rep = 0; rep < 40; rep++)
        check_kernels(&r, (int32_t)test_range(&r, 1, DENSE_LANES + 1), (int32_t)test_range(&r, 1, 28),
                      rep % 4 == 0 ? 16 * (int32_t)test_range(&r, 1, 3) : (int32_t)test_range(&r, 1, 40));
    return check_report("test_interact");
}
