/*
 * interact_dot.c: the dot interaction's sums (interact_dot.h) with a sample
 * in every vector lane, with a sample's 16 elements k in the lanes, and one
 * sample at a time.
 *
 * Why lanes hold samples: a sample's dots are narrow (the built-in task: 9
 * vectors of 16, 36 dots), and a dot is a sum along k, which a vector over
 * k cannot do in order; with 16 samples side by side each dot is the same
 * sequence of multiplies and adds in every lane, so a vector add is 16 of
 * the scalar adds, in the same order, and each lane gets its sample's own
 * bits.  The backward's dv_i[k] are sums along j, so for d a multiple of 16
 * a vector over k does them in order with no moving of samples into lanes
 * (dense_dot_rows_backward, the faster there: it skips three transposes).
 *
 * Throughput: one accumulator's adds form a chain that waits on itself, so
 * several advance together: forward the up to 8 pairs (i, j..j+7) that share
 * v_i's element k; backward in lanes up to 16 elements k of dv_i that share
 * g_(i,j); backward along k up to 12 rows i that share v_j (all 9 of the
 * built-in task: with groups of 4 and 5 the adds waited on each other, 42
 * against 31 ns a sample).  The count is a constant in each copy of the
 * inner loop (dispatch by switch or by runs of 16, 8, 4, 2, 1), so the
 * accumulators live in registers.
 */
#include "dense/interact_dot.h"

#include "dense/lanes.h"

#define L DENSE_LANES
#define ROWS 12 /* rows i at most in one group of the backward along k */

/* The index in [0, P) of pair (a, b), a < b < n: rows of pairs in order. */
static inline int64_t pair_index(int32_t n, int32_t a, int32_t b)
{
    return (int64_t)a * (2 * n - a - 1) / 2 + (b - a - 1);
}

/* out[q] = v_i . v_(j+q) for q < m (a constant once inlined), ti = v_i's
 * rows, tj = v_j's. */
static inline __attribute__((always_inline)) void dots_row(int32_t m, int32_t d, const float *ti,
                                                           const float *tj, float *out)
{
    dense_lanes acc[8];
    for (int32_t q = 0; q < m; q++)
        acc[q] = (dense_lanes){0};
    for (int32_t k = 0; k < d; k++) {
        const dense_lanes a = dense_lanes_load(ti + (int64_t)k * L);
#pragma GCC unroll 8
        for (int32_t q = 0; q < m; q++)
            acc[q] = acc[q] + a * dense_lanes_load(tj + ((int64_t)q * d + k) * L);
    }
    for (int32_t q = 0; q < m; q++)
        dense_lanes_store(out + (int64_t)q * L, acc[q]);
}

void dense_dot_lanes_forward(int32_t n, int32_t d, const float *vt, float *zt)
{
    const int64_t vl = (int64_t)d * L; /* floats per vector's rows */
    float *out = zt;
    for (int32_t i = 0; i + 1 < n; i++)
        for (int32_t j = i + 1; j < n; j += 8) {
            const float *ti = vt + i * vl, *tj = vt + j * vl;
            const int32_t m = n - j < 8 ? n - j : 8;
            switch (m) {
            case 8: dots_row(8, d, ti, tj, out); break;
            case 7: dots_row(7, d, ti, tj, out); break;
            case 6: dots_row(6, d, ti, tj, out); break;
            case 5: dots_row(5, d, ti, tj, out); break;
            case 4: dots_row(4, d, ti, tj, out); break;
            case 3: dots_row(3, d, ti, tj, out); break;
            case 2: dots_row(2, d, ti, tj, out); break;
            default: dots_row(1, d, ti, tj, out); break;
            }
            out += m * L;
        }
}

/* dv_i[k0 + q] for q < m (a constant once inlined): init = dz's bottom rows
 * for i = 0, else NULL (start from 0); g = the pairs' rows. */
static inline __attribute__((always_inline)) void dv_elems(int32_t m, int32_t n, int32_t d, int32_t i,
                                                           int32_t k0, const float *vt, const float *g,
                                                           const float *init, float *dvt)
{
    dense_lanes acc[16];
    for (int32_t q = 0; q < m; q++)
        acc[q] = init ? dense_lanes_load(init + (int64_t)(k0 + q) * L) : (dense_lanes){0};
    for (int32_t j = 0; j < n; j++) {
        if (j == i)
            continue;
        const dense_lanes gij = dense_lanes_load(g + (j < i ? pair_index(n, j, i) : pair_index(n, i, j)) * L);
        const float *tj = vt + ((int64_t)j * d + k0) * L;
#pragma GCC unroll 16
        for (int32_t q = 0; q < m; q++)
            acc[q] = acc[q] + gij * dense_lanes_load(tj + (int64_t)q * L);
    }
    for (int32_t q = 0; q < m; q++)
        dense_lanes_store(dvt + ((int64_t)i * d + k0 + q) * L, acc[q]);
}

void dense_dot_lanes_backward(int32_t n, int32_t d, const float *vt, const float *dzt, float *dvt)
{
    const float *g = dzt + (int64_t)d * L;
    for (int32_t i = 0; i < n; i++) {
        const float *init = i == 0 ? dzt : NULL;
        for (int32_t k0 = 0; k0 < d;) { /* elements in runs of 16, 8, 4, 2, 1 */
            const int32_t left = d - k0;
            if (left >= 16)
                dv_elems(16, n, d, i, k0, vt, g, init, dvt), k0 += 16;
            else if (left >= 8)
                dv_elems(8, n, d, i, k0, vt, g, init, dvt), k0 += 8;
            else if (left >= 4)
                dv_elems(4, n, d, i, k0, vt, g, init, dvt), k0 += 4;
            else if (left >= 2)
                dv_elems(2, n, d, i, k0, vt, g, init, dvt), k0 += 2;
            else
                dv_elems(1, n, d, i, k0, vt, g, init, dvt), k0 += 1;
        }
    }
}

/* Where row i's pairs start in the pairs' gradients g: g(i, j) = g[row_at(n, i) + j] for i < j. */
static inline int64_t row_at(int32_t n, int32_t i) { return pair_index(n, i, i + 1) - (i + 1); }

/* dv_i for rows i = i0 .. i0+m-1 of one sample (m a constant once inlined),
 * elements k0 .. k0+15 in the lanes.  j runs in three stretches so that no
 * test is left in the loops: before the rows (g(j, i)), among them (the
 * unrolled t, skipping j = i), after them (g(i, j)). */
static inline __attribute__((always_inline)) void dv_rows(int32_t m, int32_t n, int32_t d, int32_t i0,
                                                          int32_t k0, const float *vs, const float *dzs,
                                                          float *dvs)
{
    const float *g = dzs + d, *gi[ROWS];
    dense_lanes acc[ROWS];
#pragma GCC unroll 12
    for (int32_t q = 0; q < m; q++) {
        acc[q] = i0 + q == 0 ? dense_lanes_load(dzs + k0) : (dense_lanes){0};
        gi[q] = g + row_at(n, i0 + q);
    }
    for (int32_t j = 0; j < i0; j++) {
        const dense_lanes vj = dense_lanes_load(vs + (int64_t)j * d + k0);
        const float *gj = g + row_at(n, j) + i0;
#pragma GCC unroll 12
        for (int32_t q = 0; q < m; q++)
            acc[q] = acc[q] + gj[q] * vj;
    }
#pragma GCC unroll 12
    for (int32_t t = 0; t < m; t++) {
        const int32_t j = i0 + t;
        const dense_lanes vj = dense_lanes_load(vs + (int64_t)j * d + k0);
        const float *gj = g + row_at(n, j) + i0;
#pragma GCC unroll 12
        for (int32_t q = 0; q < m; q++)
            if (q < t)
                acc[q] = acc[q] + gi[q][j] * vj;
            else if (q > t)
                acc[q] = acc[q] + gj[q] * vj;
    }
    for (int32_t j = i0 + m; j < n; j++) {
        const dense_lanes vj = dense_lanes_load(vs + (int64_t)j * d + k0);
#pragma GCC unroll 12
        for (int32_t q = 0; q < m; q++)
            acc[q] = acc[q] + gi[q][j] * vj;
    }
#pragma GCC unroll 12
    for (int32_t q = 0; q < m; q++)
        dense_lanes_store(dvs + (int64_t)(i0 + q) * d + k0, acc[q]);
}

void dense_dot_rows_backward(int32_t n, int32_t d, const float *vs, const float *dzs, float *dvs)
{
    const int32_t groups = (n + ROWS - 1) / ROWS;
    for (int32_t gi = 0, i0 = 0; gi < groups; gi++) {
        const int32_t m = (n - i0) / (groups - gi); /* groups of nearly equal size, at most ROWS */
        for (int32_t k0 = 0; k0 < d; k0 += L)
            switch (m) {
            case 12: dv_rows(12, n, d, i0, k0, vs, dzs, dvs); break;
            case 11: dv_rows(11, n, d, i0, k0, vs, dzs, dvs); break;
            case 10: dv_rows(10, n, d, i0, k0, vs, dzs, dvs); break;
            case 9: dv_rows(9, n, d, i0, k0, vs, dzs, dvs); break;
            case 8: dv_rows(8, n, d, i0, k0, vs, dzs, dvs); break;
            case 7: dv_rows(7, n, d, i0, k0, vs, dzs, dvs); break;
            case 6: dv_rows(6, n, d, i0, k0, vs, dzs, dvs); break;
            case 5: dv_rows(5, n, d, i0, k0, vs, dzs, dvs); break;
            case 4: dv_rows(4, n, d, i0, k0, vs, dzs, dvs); break;
            case 3: dv_rows(3, n, d, i0, k0, vs, dzs, dvs); break;
            case 2: dv_rows(2, n, d, i0, k0, vs, dzs, dvs); break;
            default: dv_rows(1, n, d, i0, k0, vs, dzs, dvs); break;
            }
        i0 += m;
    }
}

void dense_dot_sample_forward(int32_t n, int32_t d, const float *vs, float *zs)
{
    float *out = zs + d;
    for (int32_t i = 0; i + 1 < n; i++)
        for (int32_t j = i + 1; j < n; j++) {
            const float *a = vs + (int64_t)i * d, *b = vs + (int64_t)j * d;
            float sum = 0.0f;
            for (int32_t k = 0; k < d; k++)
                sum = sum + a[k] * b[k];
            *out++ = sum;
        }
}

void dense_dot_sample_backward(int32_t n, int32_t d, const float *vs, const float *dzs, float *dvs)
{
    for (int32_t i = 0; i < n; i++) {
        float *dvi = dvs + (int64_t)i * d;
        for (int32_t k = 0; k < d; k++)
            dvi[k] = i == 0 ? dzs[k] : 0.0f;
        for (int32_t j = 0; j < n; j++) {
            if (j == i)
                continue;
            const float g = dzs[d + (j < i ? pair_index(n, j, i) : pair_index(n, i, j))];
            const float *vj = vs + (int64_t)j * d;
            for (int32_t k = 0; k < d; k++)
                dvi[k] = dvi[k] + g * vj[k];
        }
    }
}
