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
 * instead of updating two rows per pair in memory.  Forward keeps 8 rows i
 * in flight and backward 4, each in its own accumulator: one row's adds form a chain that
 * waits on itself (4 cycles each), so a row at a time ran at a quarter of
 * the adder's rate; the interaction was a fifth of the default training
 * step (docs/PERFORMANCE.md).  The order of every sum is unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "dense/layers.h"

#define IB 16 /* pairs (forward) or elements (backward) computed together */
#define IG 8  /* rows i computed together in forward                       */
#define IGB 4 /* and in backward                                            */
#define SCRATCH 8192 /* floats of per-call scratch kept on the stack (32 KiB): the
                        usual shapes allocate nothing per step             */

/* n zeroed floats: stack (SCRATCH of them) when they fit, else the heap
 * (NULL when out of memory); scratch_free gives heap memory back. */
static float *scratch_zeroed(float *stack, int64_t n)
{
    if (n <= SCRATCH) {
        memset(stack, 0, (size_t)n * sizeof *stack);
        return stack;
    }
    return calloc((size_t)n, sizeof *stack);
}

static void scratch_free(float *p, const float *stack)
{
    if (p != stack)
        free(p);
}

const char *dense_interaction_name(dense_interaction kind)
{
    static const char *const NAMES[] = {"dot", "cat", "dcn"};
    return (unsigned)kind <= DENSE_INTERACT_DCN ? NAMES[kind] : NULL;
}

int64_t dense_interact_width(dense_interaction kind, int32_t F, int32_t d)
{
    if (kind != DENSE_INTERACT_DOT)
        return (int64_t)(F + 1) * d;
    return d + (int64_t)(F + 1) * F / 2;
}

/* The index in z of pair (a, b), a < b < n: rows of pairs in order. */
static inline int64_t pair_at(int32_t d, int32_t n, int32_t a, int32_t b)
{
    return d + (int64_t)a * (2 * n - a - 1) / 2 + (b - a - 1);
}

/* IB floats in one vector (GCC's vector extension: one AVX-512 register,
 * or two or four narrower ones); arithmetic on it is lane by lane, a scalar
 * operand standing for itself in every lane. */
typedef float lanes __attribute__((vector_size(IB * sizeof(float))));

static inline lanes load_lanes(const float *p)
{
    lanes x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* Dot products of one sample: vt is the sample's v transposed, [d][wp],
 * so lane jj of a block holds v_i . v_(j0+jj).  IG rows i advance together
 * over k, each in its own accumulator (independent chains, so the adds
 * overlap instead of waiting on each other); each pair is still summed over
 * k in order. */
static void dots_blocked(int32_t n, int32_t d, int64_t wp, const float *vs, const float *vt, float *zs)
{
    for (int32_t j0 = 0; j0 < n; j0 += IB) {
        const int32_t i_end = n - 1 < j0 + IB - 1 ? n - 1 : j0 + IB - 1; /* rows with a pair here */
        for (int32_t i0 = 0; i0 < i_end; i0 += IG) {
            const float *row[IG];
            for (int32_t ii = 0; ii < IG; ii++) /* rows past the end read the last, unused */
                row[ii] = vs + (int64_t)(i0 + ii < n ? i0 + ii : n - 1) * d;
            lanes acc[IG] = {{0}};
            for (int32_t k = 0; k < d; k++) {
                const lanes t = load_lanes(vt + (int64_t)k * wp + j0);
#pragma GCC unroll 8
                for (int32_t ii = 0; ii < IG; ii++)
                    acc[ii] = acc[ii] + row[ii][k] * t;
            }
            for (int32_t ii = 0; ii < IG && i0 + ii < i_end; ii++) {
                const int32_t i = i0 + ii;
                for (int32_t j = j0 > i + 1 ? j0 : i + 1; j < j0 + IB && j < n; j++)
                    zs[pair_at(d, n, i, j)] = acc[ii][j - j0];
            }
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
    if (kind != DENSE_INTERACT_DOT) { /* CAT (and DCN's concat) */
        if (z != v)
            memcpy(z, v, (size_t)(B * vw) * sizeof *z);
        return;
    }
    const int32_t n = F + 1;
    const int64_t wp = (int64_t)(n + IB - 1) / IB * IB;
    float stack[SCRATCH];
    float *vt = scratch_zeroed(stack, (int64_t)d * wp); /* the padding lanes stay 0 */
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
    scratch_free(vt, stack);
}

/* dv_i = (dz's bottom part for i = 0, else 0) + sum over j != i, ascending,
 * of g_(i,j) v_j: the order in which the former pair-by-pair loop added
 * them (pairs in row-major order).  k in blocks of IB kept in registers when
 * d is a multiple of IB. */
void dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                             const float *dz, float *dv)
{
    int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(kind, F, d);
    if (kind != DENSE_INTERACT_DOT) { /* CAT (and DCN's concat) */
        if (dv != dz)
            memcpy(dv, dz, (size_t)(B * vw) * sizeof *dv);
        return;
    }
    const int32_t n = F + 1;
    float stack[SCRATCH];
    float *gm = scratch_zeroed(stack, (int64_t)n * n); /* NULL: the plain loop below */
    for (int32_t s = 0; s < B; s++) {
        const float *vs = v + s * vw, *dzs = dz + s * zw;
        float *dvs = dv + s * vw;
        if (gm && d % IB == 0) { /* IGB rows i together, each its own chain over j */
            for (int32_t i = 0; i < n; i++) /* g as a full matrix: gm[i][j] = g_(min, max) */
                for (int32_t j = i + 1; j < n; j++)
                    gm[(int64_t)i * n + j] = gm[(int64_t)j * n + i] = dzs[pair_at(d, n, i, j)];
            for (int32_t k0 = 0; k0 < d; k0 += IB)
                for (int32_t i0 = 0; i0 < n; i0 += IGB) {
                    const float *grow[IGB];
                    for (int32_t ii = 0; ii < IGB; ii++) /* rows past the end read the last, unused */
                        grow[ii] = gm + (int64_t)(i0 + ii < n ? i0 + ii : n - 1) * n;
                    lanes acc[IGB] = {{0}};
                    if (i0 == 0)
                        acc[0] = load_lanes(dzs + k0);
                    for (int32_t j = 0; j < n; j++) {
                        const lanes vj = load_lanes(vs + (int64_t)j * d + k0);
#pragma GCC unroll 4
                        for (int32_t ii = 0; ii < IGB; ii++)
                            if (j != i0 + ii)
                                acc[ii] = acc[ii] + grow[ii][j] * vj;
                    }
                    for (int32_t ii = 0; ii < IGB && i0 + ii < n; ii++)
                        memcpy(dvs + (int64_t)(i0 + ii) * d + k0, &acc[ii], sizeof acc[ii]);
                }
            continue;
        }
        for (int32_t i = 0; i < n; i++) {
            float *dvi = dvs + (int64_t)i * d;
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
    scratch_free(gm, stack);
}
