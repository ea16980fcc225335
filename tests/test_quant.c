/*
 * test_quant.c: row-wise encodings and simulated quantization (src/quant,
 * docs/inference.md) against the naive reference of src/ref/ref_quant.c.
 *
 *   - half precision: every one of the 65536 halves decodes to the
 *     reference's value (fast and portable paths); floats of every class
 *     (normal, subnormal, ties between halves, the overflow boundary, NaN,
 *     random bit patterns) round to the reference's half;
 *   - rows: fp32, fp16, int8 and int4 on random rows of dims 1..67 (odd for
 *     the nibble packing), constant rows, rows whose minimum is not a half
 *     (the rounded bias clips codes at 0), rows built so that every code is
 *     an exact tie (half to even), and rows that cannot be stored (not
 *     finite, beyond fp16): bytes and decoded values equal the reference's,
 *     and the decode is within scale of the input;
 *   - simulated quantization: random values, clipping and exact ties;
 *   - the fused pooling kernel (qpool.h) against decoding every row and
 *     pooling in entry order: bit-identical, weights and divisors (0 too),
 *     empty bags, 1 and 2 threads, every encoding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/qpool.h"
#include "quant/quant.h"
#include "ref/ref.h"
#include "util.h"

static int same_value(float a, double b) { return (isnan(a) && isnan(b)) || (double)a == b; }

static void halves(test_rng *r)
{
    int bad_fast = 0, bad_soft = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = ref_half_value((uint16_t)h);
        bad_fast += !same_value(ember_half_to_float((uint16_t)h), want);
        bad_soft += !same_value(ember_half_to_float_soft((uint16_t)h), want);
    }
    CHECK_MSG(!bad_fast && !bad_soft, "half -> float: %d (fast) and %d (portable) of 65536 differ", bad_fast, bad_soft);
    float edge[] = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e9f, -65520.0f,
                    0x1p-24f, 0x1p-25f, 0x1.8p-24f, 0x1p-14f, 0x1.ffcp-15f, 1e-30f, INFINITY, -INFINITY, NAN};
    int bad = 0;
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
        uint16_t want = ref_half_round(edge[i]);
        uint16_t f = ember_half_from_float(edge[i]), s = ember_half_from_float_soft(edge[i]);
        int ok = isnan(edge[i]) ? (f & 0x7c00) == 0x7c00 && (f & 0x3ff) && (s & 0x7c00) == 0x7c00 && (s & 0x3ff)
                                : f == want && s == want;
        CHECK_MSG(ok, "float %a -> half: fast %04x portable %04x, reference %04x", edge[i], f, s, want);
        bad += !ok;
    }
    for (int i = 0; i < 200000; i++) {
        float x;
        int kind = (int)test_range(r, 0, 3);
        if (kind == 0) { /* any bit pattern that is not NaN */
            uint32_t u = (uint32_t)test_next(r);
            memcpy(&x, &u, 4);
            if (isnan(x))
                continue;
        } else if (kind == 1) { /* a tie: halfway between two adjacent halves */
            uint16_t h = (uint16_t)test_range(r, 0, 0x7bff);
            x = (float)((ref_half_value(h) + ref_half_value((uint16_t)(h + 1))) / 2);
            if (test_range(r, 0, 2))
                x = -x;
        } else { /* the range embeddings live in */
            x = (float)((test_uniform(r) * 2 - 1) * pow(10.0, (double)test_range(r, -9, 5)));
        }
        uint16_t want = ref_half_round(x);
        if (ember_half_from_float(x) != want || ember_half_from_float_soft(x) != want) {
            if (bad++ < 5)
                CHECK_MSG(0, "float %a -> half: fast %04x portable %04x, reference %04x", x, ember_half_from_float(x),
                          ember_half_from_float_soft(x), want);
        }
    }
    CHECK_MSG(!bad, "float -> half: %d inputs round differently from the reference", bad);
}

/* Encodes x with the fast code and the reference; compares bytes, decode. */
static int compare_row(int enc, int32_t dim, const float *x, const char *what)
{
    int64_t nb = ember_quant_row_bytes((ember_encoding)enc, dim);
    uint8_t *a = malloc((size_t)nb), *b = malloc((size_t)nb);
    float *da = malloc(sizeof(float) * (size_t)dim), *db = malloc(sizeof(float) * (size_t)dim);
    memset(a, 0xa5, (size_t)nb);
    memset(b, 0xa5, (size_t)nb);
    int ra = ember_quant_row((ember_encoding)enc, dim, x, a), rb = ref_quant_row(enc, dim, x, b);
    int ok = ra == rb && !memcmp(a, b, (size_t)nb);
    if (ok && ra == 0) {
        ember_dequant_row((ember_encoding)enc, dim, a, da);
        ref_dequant_row(enc, dim, b, db);
        ok = !memcmp(da, db, sizeof(float) * (size_t)dim);
        float lo = x[0], hi = x[0];
        for (int32_t i = 0; i < dim; i++)
            lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
        /* within a code step plus the bias' and scale's rounding to fp16 */
        float tol = enc <= 1 ? fmaxf(fabsf(lo), fabsf(hi)) * 0x1p-11f + 0x1p-24f
                             : (hi - lo) / (enc == 2 ? 255.0f : 15.0f) * 1.01f + fabsf(lo) * 0x1p-10f + 0x1p-24f;
        for (int32_t i = 0; i < dim && ok; i++)
            ok = enc == 0 ? da[i] == x[i] : fabsf(da[i] - x[i]) <= tol;
    }
    if (ra != 0) /* a refused row leaves the output as it was */
        for (int64_t i = 0; i < nb && ok; i++)
            ok = a[i] == 0xa5;
    CHECK_MSG(ok, "%s, %s, dim %d: fast %d, reference %d, or bytes/decode differ", ember_encoding_name(enc), what, dim,
              ra, rb);
    free(a), free(b), free(da), free(db);
    return ok;
}

static void rows(test_rng *r)
{
    float x[67];
    for (int enc = 0; enc < 4; enc++) {
        for (int trial = 0; trial < 400; trial++) {
            int32_t dim = (int32_t)test_range(r, 1, 68);
            float c = (float)((test_uniform(r) * 2 - 1) * pow(10.0, (double)test_range(r, -3, 2)));
            for (int32_t i = 0; i < dim; i++)
                x[i] = c + (float)((test_uniform(r) * 2 - 1) * pow(10.0, (double)test_range(r, -4, 1)));
            if (!compare_row(enc, dim, x, "random"))
                break;
        }
        for (int32_t i = 0; i < 67; i++)
            x[i] = -0.3125f;
        compare_row(enc, 67, x, "constant");
        for (int32_t i = 0; i < 67; i++) /* 1.0001 is not a half: bias rounds to 1.0, below the minimum */
            x[i] = 1.0001f + 0.01f * (float)(i % 7);
        compare_row(enc, 67, x, "minimum not a half");
        x[3] = NAN;
        compare_row(enc, 67, x, "NaN");
        x[3] = INFINITY;
        compare_row(enc, 67, x, "inf");
        x[3] = 70000.0f;
        compare_row(enc, 67, x, "beyond fp16");
    }
    /* exact ties: bias 0 and scale 2^-4 exactly (max = levels * 2^-4), values
     * at code + 1/2: every code rounds to the even one */
    for (int enc = 2; enc < 4; enc++) {
        int levels = enc == 2 ? 255 : 15;
        int32_t dim = 33;
        x[0] = 0.0f;
        x[1] = (float)levels * 0x1p-4f;
        for (int32_t i = 2; i < dim; i++)
            x[i] = ((float)test_range(r, 0, levels) + 0.5f) * 0x1p-4f;
        uint8_t q[40];
        int ok = compare_row(enc, dim, x, "ties") && ember_quant_row((ember_encoding)enc, dim, x, q) == 0;
        for (int32_t i = 2; i < dim && ok; i++) {
            int code = enc == 2 ? q[4 + i] : (q[4 + i / 2] >> (4 * (i & 1))) & 15, t = (int)(x[i] * 16.0f - 0.5f);
            ok = code == (t % 2 ? t + 1 : t);
        }
        CHECK_MSG(ok, "%s: exact ties do not round to the even code", ember_encoding_name(enc));
    }
}

static void fake_quant(test_rng *r)
{
    int bad = 0;
    for (int i = 0; i < 100000; i++) {
        int32_t buckets = (int32_t)test_range(r, 2, 300);
        float low = -(float)test_uniform(r), high = low + 0.01f + (float)test_uniform(r);
        float step = (high - low) / (float)(buckets - 1);
        float x = test_range(r, 0, 4) ? low + (high - low) * (float)(test_uniform(r) * 1.4 - 0.2)
                                      : fmaf(step, (float)test_range(r, 0, buckets) + 0.5f, low); /* near a tie */
        float got = ember_fake_quant(x, low, high, step), want = ref_fake_quant(x, low, high, buckets);
        if (memcmp(&got, &want, 4) && bad++ < 5)
            CHECK_MSG(0, "fake quant x %a low %a high %a buckets %d: %a, reference %a", x, low, high, buckets, got, want);
        if (got < low - 1e-6f || got > high + 1e-6f)
            bad++;
    }
    CHECK_MSG(!bad, "simulated quantization: %d values differ from the reference or leave [low, high]", bad);
    float step = 1.0f / 255; /* clipping: beyond the range reads as its ends */
    CHECK(ember_fake_quant(5.0f, -0.5f, 0.5f, step) == ember_fake_quant(0.5f, -0.5f, 0.5f, step) &&
          fabsf(ember_fake_quant(5.0f, -0.5f, 0.5f, step) - 0.5f) < 1e-6f &&
          ember_fake_quant(-5.0f, -0.5f, 0.5f, step) == -0.5f);
}

/* The fused pooling kernel against decoding every row (the reference's
 * decode) and pooling in entry order: bit-identical, at 1 and 2 threads. */
static void pooling(test_rng *r)
{
    for (int trial = 0; trial < 60; trial++) {
        ember_encoding e = (ember_encoding)(trial % 4);
        int32_t dim = trial % 5 == 0 ? (int32_t)test_range(r, 1, 9) : (int32_t)test_dims[test_range(r, 0, 6)];
        int64_t rows = test_range(r, 1, 300), bags = test_range(r, 0, 200);
        int64_t rb = ember_quant_row_bytes(e, dim);
        uint8_t *tab = malloc((size_t)(rows * rb));
        float *x = malloc(sizeof(float) * (size_t)dim), *dec = malloc(sizeof(float) * (size_t)(rows * dim));
        for (int64_t i = 0; i < rows; i++) {
            test_fill(r, x, dim, -1, 1);
            ember_quant_row(e, dim, x, tab + i * rb);
            ref_dequant_row((int)e, dim, tab + i * rb, dec + i * dim);
        }
        int64_t *off = malloc(sizeof(int64_t) * (size_t)(bags + 1));
        off[0] = 0;
        for (int64_t b = 0; b < bags; b++)
            off[b + 1] = off[b] + (test_range(r, 0, 5) ? test_range(r, 0, 30) : 0);
        int64_t n = off[bags];
        uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)(n + 1));
        float *w = malloc(sizeof(float) * (size_t)(n + 1)), *div = malloc(sizeof(float) * (size_t)(bags + 1));
        for (int64_t i = 0; i < n; i++)
            ids[i] = (uint32_t)test_range(r, 0, rows), w[i] = test_float(r, 0.1f, 2.0f);
        for (int64_t b = 0; b < bags; b++)
            div[b] = test_range(r, 0, 4) ? test_float(r, 0.5f, 8.0f) : (test_range(r, 0, 2) ? 0.0f : 1.0f);
        int weighted = trial % 3 != 0, divided = trial % 2;
        float *want = malloc(sizeof(float) * (size_t)(bags * dim + 1)), *got = malloc(sizeof(float) * (size_t)(bags * dim + 1));
        for (int64_t b = 0; b < bags; b++) {
            float *o = want + b * dim;
            for (int32_t k = 0; k < dim; k++) {
                float acc = 0.0f;
                for (int64_t i = off[b]; i < off[b + 1]; i++)
                    acc = fmaf(weighted ? w[i] : 1.0f, dec[(int64_t)ids[i] * dim + k], acc);
                float dv = divided ? div[b] : 1.0f;
                o[k] = dv == 1.0f ? acc : dv == 0.0f ? 0.0f : acc / dv;
            }
        }
        ember_qpool_args a = {e, dim, tab, rb, bags, off, ids, weighted ? w : NULL, divided ? div : NULL, got, NULL, NULL};
        for (int threads = 1; threads <= 2; threads++) {
            for (int64_t i = 0; i < bags * dim; i++)
                got[i] = NAN;
            ember_qpool(&a, threads);
            CHECK_MSG(!memcmp(got, want, sizeof(float) * (size_t)(bags * dim)),
                      "qpool %s dim %d bags %lld weighted %d divided %d threads %d: differs from decode-then-pool",
                      ember_encoding_name(e), dim, (long long)bags, weighted, divided, threads);
        }
        free(tab), free(x), free(dec), free(off), free(ids), free(w), free(div), free(want), free(got);
    }
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    CHECK(ember_encoding_parse("int4") == EMBER_ENC_INT4 && ember_encoding_parse("int3") < 0);
    CHECK(ember_quant_row_bytes(EMBER_ENC_INT8, 64) == 68 && ember_quant_row_bytes(EMBER_ENC_INT4, 65) == 37 &&
          ember_quant_row_bytes(EMBER_ENC_FP16, 64) == 128);
    halves(&r);
    rows(&r);
    fake_quant(&r);
    pooling(&r);
    return check_report("test_quant");
}
