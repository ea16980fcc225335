/*
 * interact.c: DLRM's feature interaction between the bottom MLP's output
 * and the F pooled embeddings.
 *
 * Input per sample: v = [v_0 = bottom, v_1..v_F = emb_1..emb_F], each d wide.
 *   DOT: z = [v_0, v_i . v_j for 0 <= i < j <= F in row-major order
 *        (0,1), (0,2) .. (0,F), (1,2) .. (F-1,F)]    width d + (F+1)F/2
 *   CAT: z = v                                        width (F+1) d
 * DOT's forward goes 16 samples at a time: the block's rows move into
 * vector lanes (lanes.h: lane r = sample r), interact_dot.c sums every pair
 * for all 16 at once, and the dots move back; a last block of fewer samples
 * pads its lanes with 0 and keeps only its own.  F+1 is small (9 vectors in
 * the built-in task, 27 for Criteo), so one sample's dots filled a vector
 * poorly; 16 samples fill every lane.  The backward's sums run along k, so
 * when d is a multiple of 16 a sample's own elements fill the lanes and it
 * needs no moving (dense_dot_rows_backward); other d go through lanes as the
 * forward does (measured: docs/PERFORMANCE.md, "The dot interaction with
 * samples in the lanes").  Each sum keeps its order and its rounding
 * (interact_dot.h), so a sample's bits depend neither on its neighbours nor
 * on the thread count (dlrm.c hands each thread whole chunks of samples).
 */
#include <stdlib.h>
#include <string.h>

#include "dense/interact_dot.h"
#include "dense/lanes.h"
#include "dense/layers.h"

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

#define SCRATCH 8192 /* floats of per-call scratch kept on the stack (32 KiB): the
                        built-in task's shape allocates nothing per call;
                        wide ones (26 features of dim 128: ~240 KiB) take
                        the heap once per call                             */

/* n floats: stack (SCRATCH of them) when they fit, else the heap (NULL when
 * out of memory); scratch_free gives heap memory back. */
static float *scratch_get(float *stack, int64_t n)
{
    return n <= SCRATCH ? stack : malloc((size_t)n * sizeof *stack);
}

static void scratch_free(float *p, const float *stack)
{
    if (p != stack)
        free(p);
}

void dense_interact_forward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                            float *z)
{
    const int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(kind, F, d);
    if (kind != DENSE_INTERACT_DOT) { /* CAT (and DCN's concat) */
        if (z != v)
            memcpy(z, v, (size_t)(B * vw) * sizeof *z);
        return;
    }
    const int32_t n = F + 1;
    const int64_t P = zw - d;
    float stack[SCRATCH];
    float *vt = scratch_get(stack, (vw + P) * DENSE_LANES), *zt = vt ? vt + vw * DENSE_LANES : NULL;
    for (int32_t s0 = 0; s0 < B; s0 += DENSE_LANES) {
        const int32_t m = B - s0 < DENSE_LANES ? B - s0 : DENSE_LANES;
        for (int32_t s = s0; s < s0 + m; s++) /* z starts with v_0 */
            memcpy(z + s * zw, v + s * vw, (size_t)d * sizeof *z);
        if (!vt) { /* out of memory: the same sums, a sample at a time */
            for (int32_t s = s0; s < s0 + m; s++)
                dense_dot_sample_forward(n, d, v + s * vw, z + s * zw);
            continue;
        }
        dense_lanes_in(v + s0 * vw, vw, m, vw, vt);
        dense_dot_lanes_forward(n, d, vt, zt);
        dense_lanes_out(zt, m, P, z + s0 * zw + d, zw);
    }
    scratch_free(vt, stack);
}

void dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d, const float *v,
                             const float *dz, float *dv)
{
    const int64_t vw = (int64_t)(F + 1) * d, zw = dense_interact_width(kind, F, d);
    if (kind != DENSE_INTERACT_DOT) { /* CAT (and DCN's concat) */
        if (dv != dz)
            memcpy(dv, dz, (size_t)(B * vw) * sizeof *dv);
        return;
    }
    const int32_t n = F + 1;
    if (d % DENSE_LANES == 0) { /* k fills the lanes: no transposes (dense_dot_rows_backward) */
        for (int32_t s = 0; s < B; s++)
            dense_dot_rows_backward(n, d, v + s * vw, dz + s * zw, dv + s * vw);
        return;
    }
    float stack[SCRATCH];
    float *vt = scratch_get(stack, (2 * vw + zw) * DENSE_LANES);
    float *dzt = vt ? vt + vw * DENSE_LANES : NULL, *dvt = vt ? dzt + zw * DENSE_LANES : NULL;
    for (int32_t s0 = 0; s0 < B; s0 += DENSE_LANES) {
        const int32_t m = B - s0 < DENSE_LANES ? B - s0 : DENSE_LANES;
        if (!vt) { /* out of memory: the same sums, a sample at a time */
            for (int32_t s = s0; s < s0 + m; s++)
                dense_dot_sample_backward(n, d, v + s * vw, dz + s * zw, dv + s * vw);
            continue;
        }
        dense_lanes_in(v + s0 * vw, vw, m, vw, vt);
        dense_lanes_in(dz + s0 * zw, zw, m, zw, dzt);
        dense_dot_lanes_backward(n, d, vt, dzt, dvt);
        dense_lanes_out(dvt, m, vw, dv + s0 * vw, vw);
    }
    scratch_free(vt, stack);
}
