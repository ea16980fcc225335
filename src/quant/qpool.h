/*
 * qpool.h: pooled lookup over row-wise encoded rows (quant.h), the
 * inference kernel for quantized tables (docs/inference.md).
 *
 *   for bag b: out[b][:] = (sum over entries e of bag b, in order:
 *                              w_e * decode(rows + ids[e] * row_bytes)) / div_b
 *   w_e = weights ? weights[e] : 1;  div_b = divisors ? divisors[b] : 1
 *   (entries whose id is EMBER_QPOOL_SKIP add nothing)
 *   (0: the bag's output is zeros)
 *   decode: quant.h's value of each element; the sum is fmaf(w, v, acc)
 *
 * Bit-identical to decoding every row and pooling the fp32 copy, for any
 * thread count.
 */
#ifndef EMBER_QUANT_QPOOL_H
#define EMBER_QUANT_QPOOL_H

#include <stdint.h>

#include "quant/quant.h"

#define EMBER_QPOOL_MAX_DIM 1024

typedef struct ember_qpool_args {
    ember_encoding encoding;
    int32_t dim;             /* 1 .. EMBER_QPOOL_MAX_DIM              */
    const uint8_t *rows;     /* row r at rows + r * row_bytes          */
    int64_t row_bytes;       /* ember_quant_row_bytes(encoding, dim)   */
    int64_t bags;
    const int64_t *offsets;  /* [bags + 1]: bag b's entries            */
    const uint32_t *ids;     /* [offsets[bags]] row numbers            */
    const float *weights;    /* [offsets[bags]] or NULL                */
    const float *divisors;   /* [bags] or NULL                         */
    float *out;              /* [bags][dim]                            */
    /* The training forward's output placement (optional): bag b goes to
     * out + out_off[b] when out_off[b] >= 0, else to out_seq + (-1 -
     * out_off[b]); NULL: out + b * dim. */
    const int64_t *out_off;
    float *out_seq;
} ember_qpool_args;

#define EMBER_QPOOL_SKIP UINT32_MAX /* an id that adds nothing (a dropped entry) */

void ember_qpool(const ember_qpool_args *a, int threads);

#endif
