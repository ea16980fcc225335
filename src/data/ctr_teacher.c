/*
 * ctr_teacher.c: the synthetic CTR task's teacher MLP for one sample
 * (ctr_teacher.h), vectorised over the hidden units.
 *
 * Every label of the synthetic task depends on these bits, so the
 * arithmetic is spelled out operation by operation and the file is
 * compiled without contraction (-ffp-contract=off, CMakeLists.txt):
 *
 *   a_h = b1[h]
 *   k <  U:  a_h = a_h + W1[h][k] * x[k]      (the product rounded, then the sum)
 *   k >= U:  a_h = fma(W1[h][k], x[k], a_h)   (one rounding)
 *   z = 0;  for h in order, when a_h > 0:  z = fma(w2[h], a_h, z)
 *   U = 8 floor(in / 8) + (4 when in mod 8 >= 4, else 0)
 *
 * That mix of rounded and fused steps is what GCC 12 (-O3 -march=native)
 * made of the former loop, one hidden unit at a time over k in order (an
 * in-order vector reduction of 8 then 4 products, the rest fused): kept so
 * that every sample of the task stays the same bits.  The former loop was
 * one long chain of dependent additions per unit (16 x 45 by default);
 * with k outside and h inside, blocks of 16 units advance together in
 * vector registers, each unit's sum still taken over k in order.  W1 is
 * stored transposed with its rows padded to whole blocks (zeros), so the
 * inner loops have a constant length.
 */
#include <math.h>

#include "data/ctr_teacher.h"

double ctr_teacher_output(const double *w1t, const double *b1, const double *w2, int32_t in, int32_t H,
                          const double *x)
{
    const int32_t U = (in / 8) * 8 + (in % 8 >= 4 ? 4 : 0), Hp = ctr_teacher_stride(H);
    double z = 0;
    for (int32_t h0 = 0; h0 < H; h0 += CTR_TEACHER_BLOCK) {
        double a[CTR_TEACHER_BLOCK]; /* a block of units, kept in registers */
        const int32_t nb = H - h0 < CTR_TEACHER_BLOCK ? H - h0 : CTR_TEACHER_BLOCK;
        for (int32_t j = 0; j < CTR_TEACHER_BLOCK; j++)
            a[j] = j < nb ? b1[h0 + j] : 0;
        const double *w = w1t + h0;
        for (int32_t k = 0; k < U; k++, w += Hp) {
            const double xk = x[k];
            for (int32_t j = 0; j < CTR_TEACHER_BLOCK; j++)
                a[j] = a[j] + w[j] * xk;
        }
        for (int32_t k = U; k < in; k++, w += Hp) {
            const double xk = x[k];
            for (int32_t j = 0; j < CTR_TEACHER_BLOCK; j++)
                a[j] = fma(w[j], xk, a[j]);
        }
        for (int32_t j = 0; j < nb; j++)
            if (a[j] > 0)
                z = fma(w2[h0 + j], a[j], z);
    }
    return z;
}
