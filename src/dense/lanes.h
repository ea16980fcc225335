/*
 * lanes.h: 16 samples side by side in one vector, for kernels whose work per
 * sample is too narrow to fill a vector (the dot interaction's 36 dots of 16
 * elements: interact_dot.c).  Lane r of every vector is sample r of a block.
 *
 * dense_lanes_in turns a block of m <= 16 sample rows, w floats each, into w
 * vectors t[c] (t[c][r] = row r's element c; lanes r >= m hold 0), and
 * dense_lanes_out turns them back, by 16 x 16 tile transposes in registers
 * (lanes.c).  Only data moves: no arithmetic, so no rounding.
 */
#ifndef EMBER_DENSE_LANES_H
#define EMBER_DENSE_LANES_H

#include <stdint.h>
#include <string.h>

#define DENSE_LANES 16

/* Built without AVX-512, GCC warns that a 64-byte vector passed or returned
 * by value would cross calls differently than with it; only static inline
 * functions here and in lanes.c, interact_dot.c take or return one, so no
 * such call crosses between files. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* DENSE_LANES floats in one vector (GCC's vector extension: one AVX-512
 * register, or two or four narrower ones); arithmetic on it is lane by
 * lane, as if each lane were a float of its own. */
typedef float dense_lanes __attribute__((vector_size(DENSE_LANES * sizeof(float))));

static inline dense_lanes dense_lanes_load(const float *p)
{
    dense_lanes x;
    memcpy(&x, p, sizeof x);
    return x;
}

static inline void dense_lanes_store(float *p, dense_lanes x) { memcpy(p, &x, sizeof x); }

/* t[c * 16 + r] = x[r * xs + c] for c < w, r < 16 (0 for r >= m). */
void dense_lanes_in(const float *x, int64_t xs, int32_t m, int64_t w, float *t);
/* x[r * xs + c] = t[c * 16 + r] for r < m, c < w. */
void dense_lanes_out(const float *t, int32_t m, int64_t w, float *x, int64_t xs);

#endif
