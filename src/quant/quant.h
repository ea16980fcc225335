/*
 * quant.h: row-wise quantization of embedding rows for inference bundles,
 * and the simulated quantization of training (docs/inference.md).
 *
 * A quantized row is self-contained: fp16 (bf16) rows are dim halves
 * (bfloat16s, rounded to nearest even like fp16); int8 and
 * int4 rows are an fp16 scale, an fp16 bias, then the codes (FBGEMM's
 * IntNBitTableBatchedEmbeddingBagsCodegen layout; int4: element 2k in the
 * low nibble of byte k).  bias = fp16(min) (nearest), scale = the smallest
 * fp16 >= max(0, max - bias) / (2^bits - 1) (rounded up, so the top codes never
 * clip), both rounded *before* the codes are computed from them, so a row
 * reads back as exactly fmaf(scale, q, bias): what the exporter measured is
 * what the server reads.
 *
 * Every function here is scalar-defined: the vector kernels that pool
 * quantized rows must produce the same bits (tests/test_quant.c checks them
 * against src/ref's naive restatement of these rules).
 */
#ifndef EMBER_QUANT_H
#define EMBER_QUANT_H

#include <stdint.h>

typedef enum ember_encoding {
    EMBER_ENC_FP32 = 0,
    EMBER_ENC_FP16 = 1,
    EMBER_ENC_INT8 = 2,
    EMBER_ENC_INT4 = 3,
    EMBER_ENC_BF16 = 4, /* training rows only (round.h): bundles never hold it */
} ember_encoding;

/* "fp32", "fp16", "int8", "int4", "bf16"; NULL for anything else. */
const char *ember_encoding_name(ember_encoding e);
/* The bundle encoding named s (fp32, fp16, int8, int4), or -1. */
int ember_encoding_parse(const char *s);

/* Bytes of one row of dim elements (dim >= 1); -1 for an unknown encoding. */
int64_t ember_quant_row_bytes(ember_encoding e, int32_t dim);

/* IEEE half conversions, round to nearest even (overflow -> inf, NaN kept):
 * F16C instructions where the build targets them, else the portable _soft
 * versions (always built, so the tests check both against each other). */
uint16_t ember_half_from_float(float x);
float ember_half_to_float(uint16_t h);
uint16_t ember_half_from_float_soft(float x);
float ember_half_to_float_soft(uint16_t h);

/* Encodes x[0..dim) into out (ember_quant_row_bytes bytes).  Returns 0, or
 * EMBER_EINVAL (out untouched) when an element is not finite or, for the fp16-based
 * encodings, outside fp16's finite range (|x| > 65504), or for bf16 rounds
 * to infinity: such a row cannot be stored and the caller names it. */
int ember_quant_row(ember_encoding e, int32_t dim, const float *x, uint8_t *out);
/* Why ember_quant_row refused a row of encoding e, for a message:
 * "a value that is not finite or is outside fp16's range (|x| > 65504)
 * cannot be stored as int8". */
const char *ember_quant_refusal(ember_encoding e);
/* Decodes a row: out[i] = the value element i reads as. */
void ember_dequant_row(ember_encoding e, int32_t dim, const uint8_t *row, float *out);

/* Simulated quantization of training: the value x reads as with buckets
 * buckets over [low, high] (buckets >= 2, low < high):
 *   step = (high - low) / (buckets - 1)                      (float)
 *   q(x) = fmaf(step, rint((min(max(x, low), high) - low) / step), low)
 * rint rounds half to even (the default rounding mode); one fused
 * multiply-add, so no compiler contraction can change the bits. */
static inline float ember_fake_quant(float x, float low, float high, float step)
{
    float c = x < low ? low : x > high ? high : x;
    return __builtin_fmaf(step, __builtin_rintf((c - low) / step), low);
}

#endif
