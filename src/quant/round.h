/*
 * round.h: fp32 to half precision (IEEE fp16, bfloat16) for tables that
 * train with half rows (ember_table_config.precision; docs/precision.md):
 * round to nearest even, and stochastic rounding with the random bits
 * handed in, so that the caller decides where they come from.
 *
 * Stochastic rounding of a finite x: t = x rounded toward zero to the
 * format, u = the next value of the format away from zero (t's bits + 1;
 * past the largest finite value that is infinity), frac = (|x| - |t|) /
 * (|u| - |t|) in [0, 1), the spacing at t taken as a power of two even
 * where u is infinity.  With r uniform in 0..65535 the result is u when
 * r < frac * 65536, else t: probability frac up to 2^-16, so the expected
 * value is x (within 2^-16 of the spacing).  Every quantity is exact in
 * fp32, so the rule has one answer.  Infinities stay; NaN rounds to nearest
 * (a quiet NaN).  For bfloat16, frac * 65536 is the low 16 bits of x, and
 * the rule is the usual (bits + r') >> 16 with r' = 65535 - r.
 *
 * The random bits of column k of a row come from 64 bits h of that row and
 * step (the caller's counter-based generator, core/rng.h):
 *     r_k = (fmix32(lo32(h) + k * 0x9e3779b9) ^ hi32(h)) >> 16
 * with murmur3's 32-bit finaliser: cheap, vectorisable, and a bijection of
 * its input, so no two columns of a row share bits by construction.
 *
 * Everything is scalar-defined here; vector kernels must give the same bits
 * (tests/test_precision.c checks them against src/ref's restatement).
 */
#ifndef EMBER_QUANT_ROUND_H
#define EMBER_QUANT_ROUND_H

#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

static inline uint32_t ember_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float ember_f32_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* 1 for the encodings of half-precision training rows (fp16, bf16): a
 * store's qrows of such rows train, with fp32 state beside them. */
static inline int ember_enc_half(int enc) { return enc == EMBER_ENC_FP16 || enc == EMBER_ENC_BF16; }

static inline float ember_bf16_to_float(uint16_t h) { return ember_f32_of((uint32_t)h << 16); }

/* Nearest even; NaN stays a (quiet) NaN; overflow rounds to infinity. */
static inline uint16_t ember_bf16_from_float(float x)
{
    uint32_t u = ember_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(u >> 16 | 0x40);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
}

static inline uint32_t ember_fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* r_k of the rule above: 16 random bits of column k. */
static inline uint32_t ember_round_bits(uint64_t h, uint32_t k)
{
    return (ember_fmix32((uint32_t)h + k * 0x9e3779b9u) ^ (uint32_t)(h >> 32)) >> 16;
}

static inline uint16_t ember_bf16_round_sr(float x, uint32_t r)
{
    uint32_t u = ember_f32_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) /* inf, NaN */
        return ember_bf16_from_float(x);
    return (uint16_t)((u + (65535u - r)) >> 16);
}

/* fp16, rounded toward zero (the t of the rule). */
static inline uint16_t ember_half_toward_zero(float x)
{
    uint32_t u = ember_f32_bits(x), sign = (u >> 16) & 0x8000, e = (u >> 23) & 0xff, m = u & 0x7fffff;
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31)
        return (uint16_t)(sign | 0x7bff); /* the largest finite half */
    if (he <= 0) {
        if (he < -10)
            return (uint16_t)sign;
        return (uint16_t)(sign | (m | 0x800000) >> (14 - he));
    }
    return (uint16_t)(sign | (uint32_t)he << 10 | m >> 13);
}

static inline uint16_t ember_half_round_sr(float x, uint32_t r)
{
    uint32_t u = ember_f32_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return ember_half_from_float(x);
    uint16_t t = ember_half_toward_zero(x);
    uint32_t e = (uint32_t)(t >> 10) & 0x1f;
    /* 65536 / spacing at t = 2^(16 - (max(e, 1) - 25)), as float bits */
    float scale = ember_f32_of((uint32_t)(127 + 41 - (e ? e : 1)) << 23);
    float diff = ember_f32_of(u & 0x7fffffffu) - ember_half_to_float_soft((uint16_t)(t & 0x7fff));
    return (uint16_t)(t + ((float)r < diff * scale));
}

/* ------------------------------------------------------------ whole rows
 * A row of dim halves of encoding enc (EMBER_ENC_FP16 or EMBER_ENC_BF16)
 * to fp32 and back: to nearest, or stochastically with the row's 64 bits h
 * (column k of the row draws ember_round_bits(h, col0 + k): col0 is the
 * first column a COLUMN slice holds, else 0).  With AVX-512, 16 columns at a
 * time and the same bits as the scalar rule. */
#ifdef __AVX512F__
#include <immintrin.h>

/* The rule's bits for 16 columns, before the last shift: x holds lo32(h) +
 * k * 0x9e3779b9 for the 16 columns k (the caller steps it by 16 columns
 * with one add), hi holds hi32(h); r_k is the result's lane >> 16.  The
 * finaliser's last step (x ^= x >> 16) leaves the top 16 bits as they are,
 * so it is left out. */
static inline __m512i ember_round_mix16(__m512i x, __m512i hi)
{
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x85ebca6bu));
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 13));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0xc2b2ae35u));
    return _mm512_xor_si512(x, hi);
}

/* 16 floats to 16 bfloat16s, to nearest (m = NULL) or stochastically with
 * the bits m of ember_round_mix16. */
static inline __m256i ember_bf16_round16(__m512 x, const __m512i *m)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __m512i bias = m ? _mm512_xor_si512(_mm512_srli_epi32(*m, 16), _mm512_set1_epi32(0xffff)) /* 65535 - r */
                     : _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                        _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
    __m512i y = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    __mmask16 special = _mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
    if (special) { /* infinities stay; NaN: quiet, to nearest */
        __m512i keep = _mm512_srli_epi32(u, 16);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
        y = _mm512_mask_mov_epi32(y, special, _mm512_mask_or_epi32(keep, nan, keep, _mm512_set1_epi32(0x40)));
    }
    return _mm512_cvtepi32_epi16(y);
}

/* 16 floats to 16 fp16s, to nearest or stochastically with the bits m.
 * Where every lane is zero or an fp16 normal no larger than 65504, the
 * rule is an add: t's 13 dropped bits L round up exactly when r >> 3 < L,
 * that is when L + (8191 - (r >> 3)) carries into t's last bit, and the
 * carry is t + 1 in fp16's bits too; the conversion toward zero then gives
 * the answer (a zero stays a zero).  Other lanes (fp16 subnormals, beyond
 * 65504, infinities, NaN) take the rule's general form. */
static inline __m256i ember_half_round16(__m512 x, const __m512i *m)
{
    if (!m)
        return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i u = _mm512_castps_si512(x), absm = _mm512_set1_epi32(0x7fffffff);
    __m512i mag = _mm512_and_si512(u, absm);
    __mmask16 easy = _mm512_cmp_epu32_mask(_mm512_sub_epi32(mag, _mm512_set1_epi32(0x38800000)),
                                           _mm512_set1_epi32(0x477fe000 - 0x38800000), _MM_CMPINT_LE);
    if (easy != 0xffff) /* zeros are easy too; rare enough to look for them only here */
        easy |= _mm512_cmpeq_epi32_mask(mag, _mm512_setzero_si512());
    if (easy == 0xffff) {
        __m512i add = _mm512_xor_si512(_mm512_srli_epi32(*m, 19), _mm512_set1_epi32(0x1fff));
        return _mm512_cvtps_ph(_mm512_castsi512_ps(_mm512_add_epi32(u, add)), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    }
    __m512i r = _mm512_srli_epi32(*m, 16);
    __m256i t16 = _mm512_cvtps_ph(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512i t = _mm512_cvtepu16_epi32(t16);
    __m512 diff = _mm512_sub_ps(_mm512_castsi512_ps(mag),
                                _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(_mm512_cvtph_ps(t16)), absm)));
    __m512i e = _mm512_max_epu32(_mm512_and_si512(_mm512_srli_epi32(t, 10), _mm512_set1_epi32(0x1f)),
                                 _mm512_set1_epi32(1));
    __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(168), e), 23));
    __mmask16 up = _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(r), _mm512_mul_ps(diff, scale), _CMP_LT_OQ);
    __m512i sr = _mm512_mask_add_epi32(t, up, t, _mm512_set1_epi32(1));
    __mmask16 special = _mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
    __m512i rn = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(sr, special, rn));
}
#endif

static inline void ember_half_decode_row(int enc, int32_t dim, const uint16_t *in, float *out)
{
    int32_t k = 0;
#ifdef __AVX512F__
    for (; k + 16 <= dim; k += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(in + k));
        _mm512_storeu_ps(out + k, enc == EMBER_ENC_FP16
                                      ? _mm512_cvtph_ps(h)
                                      : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
#endif
    for (; k < dim; k++)
        out[k] = enc == EMBER_ENC_FP16 ? ember_half_to_float(in[k]) : ember_bf16_to_float(in[k]);
}

static inline void ember_half_encode_row(int enc, int stochastic, uint64_t h, int32_t col0, int32_t dim,
                                         const float *in, uint16_t *out)
{
    int32_t k = 0;
#ifdef __AVX512F__
    __m512i x = _mm512_add_epi32(
        _mm512_set1_epi32((int)((uint32_t)h + (uint32_t)col0 * 0x9e3779b9u)),
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int)0x9e3779b9u)));
    const __m512i step = _mm512_set1_epi32((int)(16u * 0x9e3779b9u)), hi = _mm512_set1_epi32((int)(uint32_t)(h >> 32));
    for (; k + 16 <= dim; k += 16, x = _mm512_add_epi32(x, step)) {
        __m512i m = stochastic ? ember_round_mix16(x, hi) : _mm512_setzero_si512();
        __m512 v = _mm512_loadu_ps(in + k);
        _mm256_storeu_si256((__m256i *)(out + k), enc == EMBER_ENC_FP16 ? ember_half_round16(v, stochastic ? &m : NULL)
                                                                          : ember_bf16_round16(v, stochastic ? &m : NULL));
    }
#endif
    for (; k < dim; k++) {
        uint32_t r = stochastic ? ember_round_bits(h, (uint32_t)(col0 + k)) : 0;
        out[k] = enc == EMBER_ENC_FP16 ? (stochastic ? ember_half_round_sr(in[k], r) : ember_half_from_float(in[k]))
                                       : (stochastic ? ember_bf16_round_sr(in[k], r) : ember_bf16_from_float(in[k]));
    }
}

/* A row's optimizer state in half precision: sf = n x dim elements, n
 * vectors of dim columns (Adagrad's sum; Adam's m then v), vector j encoded
 * as a row with its own bits h[j] (h may be NULL when rounding to nearest). */
static inline void ember_half_encode_state(int enc, int stochastic, const uint64_t *h, int32_t col0, int32_t dim,
                                           int32_t sf, const float *in, uint16_t *out)
{
    for (int32_t j = 0; (int64_t)j * dim < sf; j++)
        ember_half_encode_row(enc, stochastic, stochastic ? h[j] : 0, col0, dim, in + (int64_t)j * dim,
                              out + (int64_t)j * dim);
}

#endif
