/*
 * lanes.c: moving a block of up to 16 sample rows into vector lanes and back
 * (lanes.h), 16 columns at a time.
 *
 * Each 16 x 16 tile is transposed in registers by four rounds of the same
 * step: row 2i and row 2i+1 become the interleaving of rows i and i + 8
 * (first and second halves).  Writing an element's place as 8 bits (row,
 * column), one round rotates them left by one, so four rounds give (column,
 * row): the transpose, in 64 two-vector shuffles and no memory traffic
 * besides the tile's 16 loads and 16 stores.  A tile cut short by the
 * block's last sample or the row's last column pads with 0 and moves only
 * the elements it has (masked loads and stores with AVX-512).
 */
#include "dense/lanes.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* The interleavings of a and b's first halves and of their second halves
 * (__builtin_shufflevector: GCC 12 and clang alike). */
#define INTERLEAVE_LO(a, b) __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
#define INTERLEAVE_HI(a, b) __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)

static inline void transpose16(dense_lanes r[DENSE_LANES])
{
#pragma GCC unroll 4
    for (int round = 0; round < 4; round++) {
        dense_lanes o[DENSE_LANES];
#pragma GCC unroll 8
        for (int i = 0; i < DENSE_LANES / 2; i++) {
            o[2 * i] = INTERLEAVE_LO(r[i], r[i + DENSE_LANES / 2]);
            o[2 * i + 1] = INTERLEAVE_HI(r[i], r[i + DENSE_LANES / 2]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < DENSE_LANES; i++)
            r[i] = o[i];
    }
}

/* The first n (< 16) floats at p, the rest 0; and the first n lanes of x to
 * p.  With AVX-512, one masked load or store (which touches nothing past n). */
#if defined(__AVX512F__)
static dense_lanes load_part(const float *p, int64_t n)
{
    return (dense_lanes)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}

static void store_part(float *p, dense_lanes x, int64_t n)
{
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)x);
}
#else
static dense_lanes load_part(const float *p, int64_t n)
{
    dense_lanes x = {0};
    for (int64_t c = 0; c < n; c++)
        x[c] = p[c];
    return x;
}

static void store_part(float *p, dense_lanes x, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        p[c] = x[c];
}
#endif

void dense_lanes_in(const float *x, int64_t xs, int32_t m, int64_t w, float *t)
{
    for (int64_t c0 = 0; c0 < w; c0 += DENSE_LANES) {
        const int64_t cw = w - c0 < DENSE_LANES ? w - c0 : DENSE_LANES;
        dense_lanes r[DENSE_LANES];
#pragma GCC unroll 16
        for (int32_t s = 0; s < DENSE_LANES; s++)
            r[s] = s >= m                ? (dense_lanes){0}
                   : cw == DENSE_LANES ? dense_lanes_load(x + s * xs + c0)
                                       : load_part(x + s * xs + c0, cw);
        transpose16(r);
        if (cw == DENSE_LANES) {
#pragma GCC unroll 16
            for (int32_t c = 0; c < DENSE_LANES; c++)
                dense_lanes_store(t + (c0 + c) * DENSE_LANES, r[c]);
        } else {
            for (int64_t c = 0; c < cw; c++)
                dense_lanes_store(t + (c0 + c) * DENSE_LANES, r[c]);
        }
    }
}

void dense_lanes_out(const float *t, int32_t m, int64_t w, float *x, int64_t xs)
{
    for (int64_t c0 = 0; c0 < w; c0 += DENSE_LANES) {
        const int64_t cw = w - c0 < DENSE_LANES ? w - c0 : DENSE_LANES;
        dense_lanes r[DENSE_LANES];
#pragma GCC unroll 16
        for (int32_t c = 0; c < DENSE_LANES; c++)
            r[c] = c < cw ? dense_lanes_load(t + (c0 + c) * DENSE_LANES) : (dense_lanes){0};
        transpose16(r);
        if (m == DENSE_LANES && cw == DENSE_LANES) {
#pragma GCC unroll 16
            for (int32_t s = 0; s < DENSE_LANES; s++)
                dense_lanes_store(x + s * xs + c0, r[s]);
        } else {
            for (int32_t s = 0; s < m; s++)
                store_part(x + s * xs + c0, r[s], cw);
        }
    }
}
