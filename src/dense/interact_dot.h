/*
 * interact_dot.h: the dot interaction's sums on a block of 16 samples held in
 * vector lanes (lanes.h), for interact.c; and the same sums one sample at a
 * time, for when the block's scratch cannot be had.
 *
 * n = F + 1 vectors of d per sample; P = n (n - 1) / 2 pairs (i, j), i < j,
 * in row-major order.  In lanes, row c of a [rows][16] array holds element c
 * of the 16 samples' rows: vt is v's [n d] (vector j's element k at row
 * j d + k), zt the P dots, dzt dz's [d + P] (the bottom part, then the pairs'
 * gradients g), dvt dv's [n d].
 *
 * The sums, each product rounded and then added (interact_dot.c compiles
 * with -ffp-contract=off), in the order every earlier version of the
 * interaction used (tests/test_interact.c and test_dense.c check the bits):
 *   z_(i,j)  = 0 + v_i[0] v_j[0] + v_i[1] v_j[1] + ... + v_i[d-1] v_j[d-1]
 *   dv_i[k]  = (i == 0 ? dz[k] : 0) + g_(i,j) v_j[k] over j != i ascending
 *              (g_(i,j) = g_(j,i) = the gradient of pair (min, max))
 */
#ifndef EMBER_DENSE_INTERACT_DOT_H
#define EMBER_DENSE_INTERACT_DOT_H

#include <stdint.h>

/* zt [P][16] from vt [n d][16]. */
void dense_dot_lanes_forward(int32_t n, int32_t d, const float *vt, float *zt);
/* dvt [n d][16] from vt [n d][16] and dzt [d + P][16]. */
void dense_dot_lanes_backward(int32_t n, int32_t d, const float *vt, const float *dzt, float *dvt);

/* dvs as dense_dot_sample_backward's, with 16 elements k in the lanes:
 * d a multiple of 16. */
void dense_dot_rows_backward(int32_t n, int32_t d, const float *vs, const float *dzs, float *dvs);

/* The same sums for one sample: zs's P dots (after its d bottom floats) from
 * vs [n d]; dvs [n d] from vs and dzs [d + P]. */
void dense_dot_sample_forward(int32_t n, int32_t d, const float *vs, float *zs);
void dense_dot_sample_backward(int32_t n, int32_t d, const float *vs, const float *dzs, float *dvs);

#endif
