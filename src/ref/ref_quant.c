/*
 * ref_quant.c: naive restatement of the row-wise encodings (quant.h,
 * docs/inference.md).  Half precision here shares nothing with the fast
 * code: a half's value is ldexp of its fields in double, and rounding is a
 * binary search over the ordered positive halves with the nearest-even rule
 * written out.
 */
#include <math.h>
#include <string.h>

#include "ref/ref.h"

double ref_half_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double s = h & 0x8000 ? -1.0 : 1.0;
    if (e == 0x1f)
        return m ? NAN : s * INFINITY;
    return e ? s * ldexp(1024 + m, e - 25) : s * ldexp(m, -24);
}

uint16_t ref_half_round(float x)
{
    if (isnan(x))
        return 0x7e00;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    /* positive halves 0x0000 .. 0x7c00 (inf, standing for 65536 when rounding)
     * are ordered by their bits: the largest h with value(h) <= a */
    int lo = 0, hi = 0x7c00;
    if (a >= 65536.0)
        return sign | 0x7c00;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        double v = mid == 0x7c00 ? 65536.0 : ref_half_value((uint16_t)mid);
        if (v <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == 0x7c00)
        return sign | 0x7c00;
    double below = ref_half_value((uint16_t)lo), above = lo + 1 == 0x7c00 ? 65536.0 : ref_half_value((uint16_t)(lo + 1));
    int up = a - below > above - a || (a - below == above - a && (lo & 1));
    return (uint16_t)(sign | (lo + up));
}

static float half_round_value(float x) { return (float)ref_half_value(ref_half_round(x)); }

int ref_quant_row(int enc, int32_t dim, const float *x, uint8_t *out)
{
    float lo = x[0], hi = x[0];
    for (int32_t i = 0; i < dim; i++) {
        if (!isfinite(x[i]) || (enc != 0 && fabsf(x[i]) > 65504.0f))
            return EMBER_EINVAL;
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
    }
    if (enc == 0) {
        memcpy(out, x, 4 * (size_t)dim);
        return 0;
    }
    if (enc == 1) {
        for (int32_t i = 0; i < dim; i++) {
            uint16_t h = ref_half_round(x[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        return 0;
    }
    int levels = enc == 2 ? 255 : 15;
    float bias = half_round_value(lo);
    float want = hi > bias ? (hi - bias) / (float)levels : 0.0f;
    uint16_t hs = ref_half_round(want), hb = ref_half_round(bias);
    while (ref_half_value(hs) < (double)want) /* the smallest half >= want */
        hs++;
    float scale = (float)ref_half_value(hs);
    memcpy(out, &hs, 2);
    memcpy(out + 2, &hb, 2);
    int64_t codes = enc == 2 ? dim : (dim + 1) / 2;
    memset(out + 4, 0, (size_t)codes);
    for (int32_t i = 0; i < dim; i++) {
        int q = 0;
        if (scale > 0) {
            float t = (x[i] - bias) / scale;
            double f = floor((double)t), frac = (double)t - f;
            q = (int)f + (frac > 0.5 || (frac == 0.5 && fmod(f, 2.0) != 0)); /* half to even */
        }
        if (q < 0)
            q = 0;
        if (q > levels)
            q = levels;
        if (enc == 2)
            out[4 + i] = (uint8_t)q;
        else
            out[4 + i / 2] |= (uint8_t)(q << (i % 2 ? 4 : 0));
    }
    return 0;
}

void ref_dequant_row(int enc, int32_t dim, const uint8_t *row, float *out)
{
    for (int32_t i = 0; i < dim; i++) {
        if (enc == 0) {
            memcpy(&out[i], row + 4 * i, 4);
        } else if (enc == 1) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            out[i] = (float)ref_half_value(h);
        } else {
            uint16_t hs, hb;
            memcpy(&hs, row, 2);
            memcpy(&hb, row + 2, 2);
            int q = enc == 2 ? row[4 + i] : (row[4 + i / 2] >> (i % 2 ? 4 : 0)) & 15;
            out[i] = fmaf((float)ref_half_value(hs), (float)q, (float)ref_half_value(hb));
        }
    }
}

float ref_fake_quant(float x, float low, float high, int32_t buckets)
{
    float step = (high - low) / (float)(buckets - 1);
    float c = x < low ? low : x > high ? high : x;
    float t = (c - low) / step;
    double f = floor((double)t), frac = (double)t - f;
    double r = f + (frac > 0.5 || (frac == 0.5 && fmod(f, 2.0) != 0));
    return fmaf(step, (float)r, low);
}
