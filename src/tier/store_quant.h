/*
 * store_quant.h: the store of encoded rows (store_quant.c; docs/inference.md,
 * "Quantized tables").
 */
#ifndef EMBER_TIER_STORE_QUANT_H
#define EMBER_TIER_STORE_QUANT_H

#include <stdint.h>

#include "table/store.h"

/* Encoded rows: rows of `encoding` (> 0); train = 0: no optimizer state
 * (reads as zeros, writes dropped), train = 1: fp32 state beside the rows
 * (store.h's state, zeroed); threads: the most OpenMP threads that acquire
 * single rows at once. */
int ember_store_quant_create(int64_t rows, int32_t dim, int32_t state_floats, int encoding, int train,
                             int32_t threads, ember_store **out);

#endif
