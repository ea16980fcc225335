/*
 * quant.c: row-wise encodings of embedding rows (quant.h).
 *
 * The half conversions use F16C where the compiler targets it (one
 * instruction each way, round to nearest even like the portable code
 * below, which the tests compare against on every class of input).
 */
#include <math.h>
#include <string.h>

#include "ember.h"
#include "quant/quant.h"
#include "quant/round.h"

#ifdef __F16C__
#include <immintrin.h>
#endif

static const char *const names[] = {"fp32", "fp16", "int8", "int4", "bf16"};

const char *ember_encoding_name(ember_encoding e) { return (unsigned)e < 5 ? names[e] : NULL; }

int ember_encoding_parse(const char *s)
{
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

int64_t ember_quant_row_bytes(ember_encoding e, int32_t dim)
{
    switch (e) {
    case EMBER_ENC_FP32: return 4 * (int64_t)dim;
    case EMBER_ENC_FP16:
    case EMBER_ENC_BF16: return 2 * (int64_t)dim;
    case EMBER_ENC_INT8: return 4 + (int64_t)dim;
    case EMBER_ENC_INT4: return 4 + ((int64_t)dim + 1) / 2;
    }
    return -1;
}

uint16_t ember_half_from_float_soft(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000, e = (u >> 23) & 0xff, m = u & 0x7fffff;
    if (e == 0xff) /* inf, NaN (quiet, payload's top bits kept) */
        return (uint16_t)(sign | 0x7c00 | (m ? 0x200 | (m >> 13) : 0));
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31) /* overflow */
        return (uint16_t)(sign | 0x7c00);
    if (he <= 0) { /* subnormal half, or zero */
        if (he < -10)
            return (uint16_t)sign;
        m |= 0x800000; /* the implicit bit */
        int shift = 14 - he;
        uint32_t half = m >> shift, rest = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
        half += rest > mid || (rest == mid && (half & 1));
        return (uint16_t)(sign | half);
    }
    uint32_t half = (uint32_t)he << 10 | m >> 13, rest = m & 0x1fff;
    half += rest > 0x1000 || (rest == 0x1000 && (half & 1)); /* a carry into the exponent is right */
    return (uint16_t)(sign | half);
}

float ember_half_to_float_soft(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    if (e == 0x1f)
        u = sign | 0x7f800000 | m << 13;
    else if (e)
        u = sign | (e - 15 + 127) << 23 | m << 13;
    else if (m) { /* subnormal: normalise */
        int k = 0;
        while (!(m & 0x400))
            m <<= 1, k++;
        u = sign | (uint32_t)(127 - 15 + 1 - k) << 23 | (m & 0x3ff) << 13;
    } else
        u = sign;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t ember_half_from_float(float x)
{
#ifdef __F16C__
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
#else
    return ember_half_from_float_soft(x);
#endif
}

float ember_half_to_float(uint16_t h)
{
#ifdef __F16C__
    return _cvtsh_ss(h);
#else
    return ember_half_to_float_soft(h);
#endif
}

static void put_half(uint8_t *p, float x)
{
    uint16_t h = ember_half_from_float(x);
    memcpy(p, &h, 2);
}

static float get_half(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return ember_half_to_float(h);
}

int ember_quant_row(ember_encoding e, int32_t dim, const float *x, uint8_t *out)
{
    float lo = x[0], hi = x[0];
    for (int32_t i = 0; i < dim; i++) {
        if (!isfinite(x[i]) || (e == EMBER_ENC_BF16 ? (ember_bf16_from_float(x[i]) & 0x7fff) == 0x7f80
                                                    : e != EMBER_ENC_FP32 && fabsf(x[i]) > 65504.0f))
            return EMBER_EINVAL;
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    if (e == EMBER_ENC_FP32) {
        memcpy(out, x, 4 * (size_t)dim);
        return 0;
    }
    if (e == EMBER_ENC_FP16 || e == EMBER_ENC_BF16) {
        for (int32_t i = 0; i < dim; i++) {
            uint16_t h = e == EMBER_ENC_FP16 ? ember_half_from_float(x[i]) : ember_bf16_from_float(x[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        return 0;
    }
    float top = e == EMBER_ENC_INT8 ? 255.0f : 15.0f;
    float bias = ember_half_to_float(ember_half_from_float(lo));
    /* the scale rounds up, so bias + top * scale reaches the maximum: a scale
     * rounded down (much, where it is an fp16 subnormal) would clip the top
     * codes by several steps */
    float want = hi > bias ? (hi - bias) / top : 0.0f; /* bias may round above every value */
    uint16_t hs = ember_half_from_float(want);
    if (ember_half_to_float(hs) < want)
        hs++; /* the next half up (want >= 0 and finite) */
    float scale = ember_half_to_float(hs);
    put_half(out, scale);
    put_half(out + 2, bias);
    uint8_t *q = out + 4;
    if (e == EMBER_ENC_INT4)
        memset(q, 0, (size_t)(dim + 1) / 2);
    for (int32_t i = 0; i < dim; i++) {
        float c = scale > 0 ? rintf((x[i] - bias) / scale) : 0.0f;
        c = c < 0 ? 0 : c > top ? top : c;
        if (e == EMBER_ENC_INT8)
            q[i] = (uint8_t)c;
        else
            q[i / 2] |= (uint8_t)((uint32_t)c << (4 * (i & 1)));
    }
    return 0;
}

const char *ember_quant_refusal(ember_encoding e)
{
    switch (e) {
    case EMBER_ENC_FP32: return "a value that is not finite cannot be stored";
    case EMBER_ENC_FP16: return "a value that is not finite or is outside fp16's range (|x| > 65504) cannot be "
                                "stored as fp16";
    case EMBER_ENC_INT8: return "a value that is not finite or is outside fp16's range (|x| > 65504) cannot be "
                                "stored as int8";
    case EMBER_ENC_INT4: return "a value that is not finite or is outside fp16's range (|x| > 65504) cannot be "
                                "stored as int4";
    case EMBER_ENC_BF16: return "a value that is not finite or rounds to infinity cannot be stored as bf16";
    }
    return "unknown encoding";
}

void ember_dequant_row(ember_encoding e, int32_t dim, const uint8_t *row, float *out)
{
    if (e == EMBER_ENC_FP32) {
        memcpy(out, row, 4 * (size_t)dim);
        return;
    }
    if (e == EMBER_ENC_FP16) {
        for (int32_t i = 0; i < dim; i++)
            out[i] = get_half(row + 2 * i);
        return;
    }
    if (e == EMBER_ENC_BF16) {
        for (int32_t i = 0; i < dim; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            out[i] = ember_bf16_to_float(h);
        }
        return;
    }
    float scale = get_half(row), bias = get_half(row + 2);
    const uint8_t *q = row + 4;
    for (int32_t i = 0; i < dim; i++) {
        uint32_t c = e == EMBER_ENC_INT8 ? q[i] : (uint32_t)(q[i / 2] >> (4 * (i & 1))) & 15;
        out[i] = fmaf(scale, (float)c, bias);
    }
}
