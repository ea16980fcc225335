/*
 * store_quant.h: the store of encoded rows or half state (store_quant.c;
 * docs/inference.md, "Quantized tables"; docs/precision.md).
 */
#ifndef EMBER_TIER_STORE_QUANT_H
#define EMBER_TIER_STORE_QUANT_H

#include <stdint.h>

#include "table/store.h"

/* Encoded rows or state: rows of `encoding` (> 0; 0: fp32 rows, addressed
 * directly as store.h's values, which needs train = 1); train = 0: no
 * optimizer state (reads as zeros, writes dropped), train = 1: state beside
 * the rows, zeroed, in fp32 (state_enc 0: store.h's state) or in halves of
 * state_enc (fp16 or bf16: store.h's qstate); threads: the most OpenMP
 * threads that acquire single rows at once. */
int ember_store_quant_create(int64_t rows, int32_t dim, int32_t state_floats, int encoding, int train,
                             int state_enc, int32_t threads, ember_store **out);

#endif
