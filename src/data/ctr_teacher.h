/*
 * ctr_teacher.h: the synthetic CTR task's teacher MLP, one sample's hidden
 * layer and output (ctr_teacher.c), for ctr_synth.c.
 */
#ifndef EMBER_DATA_CTR_TEACHER_H
#define EMBER_DATA_CTR_TEACHER_H

#include <stdint.h>

#define CTR_TEACHER_BLOCK 16 /* hidden units computed together */

/* The row length of the transposed W1: H rounded up to whole blocks. */
static inline int32_t ctr_teacher_stride(int32_t H)
{
    return (H + CTR_TEACHER_BLOCK - 1) / CTR_TEACHER_BLOCK * CTR_TEACHER_BLOCK;
}

/* z = sum over h in order of w2[h] * relu(a_h), a_h = b1[h] + sum over k in
 * order of W1[h][k] x[k], with W1 given transposed and padded with zeros:
 * w1t [in][ctr_teacher_stride(H)].  The exact rounding of every step is
 * ctr_teacher.c's. */
double ctr_teacher_output(const double *w1t, const double *b1, const double *w2, int32_t in, int32_t H,
                          const double *x);

#endif
