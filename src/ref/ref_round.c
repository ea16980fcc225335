/*
 * ref_round.c: naive restatement of the rounding of half-precision training
 * rows (docs/precision.md, quant/round.h).  Shares nothing with the fast
 * code but the counter-based generator: a half's value is ldexp of its
 * fields in double; t, the largest half not above |x|, is found by binary
 * search over the ordered positive halves; the fraction and both rules are
 * written out in double.
 */
#include <math.h>

#include "core/rng.h"
#include "ref/ref.h"

double ref_bf16_value(uint16_t h)
{
    int e = (h >> 7) & 0xff, m = h & 0x7f;
    double s = h & 0x8000 ? -1.0 : 1.0;
    if (e == 0xff)
        return m ? NAN : s * INFINITY;
    return e ? s * ldexp(128 + m, e - 134) : s * ldexp(m, -133);
}

/* Value of a positive code; the infinity code stands for the next power of
 * two (65536, 2^128), as the rounding rule takes it. */
static double code_value(int precision, int h)
{
    if (precision == EMBER_PRECISION_FP16)
        return h == 0x7c00 ? 65536.0 : ref_half_value((uint16_t)h);
    return h == 0x7f80 ? ldexp(1.0, 128) : ref_bf16_value((uint16_t)h);
}

uint16_t ref_round_half(int precision, int stochastic, float x, uint32_t r)
{
    int inf = precision == EMBER_PRECISION_FP16 ? 0x7c00 : 0x7f80;
    if (isnan(x))
        return (uint16_t)(inf | 0x40);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= code_value(precision, inf))
        return sign | (uint16_t)inf;
    int lo = 0, hi = inf; /* the largest code with value <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (code_value(precision, mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    double t = code_value(precision, lo), u = code_value(precision, lo + 1);
    double frac = (a - t) / (u - t);
    int up = stochastic ? (double)r < frac * 65536.0 : frac > 0.5 || (frac == 0.5 && (lo & 1));
    return (uint16_t)(sign | (lo + up));
}

double ref_round_value(int precision, uint16_t h)
{
    return precision == EMBER_PRECISION_FP16 ? ref_half_value(h) : ref_bf16_value(h);
}

uint32_t ref_round_bits(uint64_t h, uint32_t k)
{
    uint32_t x = (uint32_t)h + k * 0x9e3779b9u; /* murmur3's fmix32 */
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return (x ^ (uint32_t)(h >> 32)) >> 16;
}

uint64_t ref_round_row_bits(uint64_t table_key, int64_t row, int64_t step)
{
    return ember_rng_bits(table_key, (uint64_t)row, (uint64_t)step, 3);
}

uint64_t ref_round_state_bits(uint64_t table_key, int64_t row, int64_t step, int32_t j)
{
    return ember_rng_bits(table_key, (uint64_t)row, (uint64_t)step, 4 + (uint64_t)j);
}
