/*
 * dynamic_load.h: a dynamic table filled with given (key, row) pairs
 * (dynamic_load.c): how a predictor takes the keys and rows of a bundle's
 * dynamic table (infer/bundle.c; docs/inference.md, "Bundles").
 */
#ifndef EMBER_STEP_DYNAMIC_LOAD_H
#define EMBER_STEP_DYNAMIC_LOAD_H

#include <stdint.h>

#include "collection/collection.h"

/* Empties dynamic table t on this rank (every slot free, counters and
 * sketch zero).  EMBER_EINVAL (named) when t is not a dynamic table. */
int ember_dyn_load_begin(ember_collection *c, int32_t t);
/*
 * Adds n pairs to table t, in the order given:
 *   for i < n: if owner(keys[i]) == this rank (mix64(key) mod W):
 *       the next free slot (0, 1, ... since begin) takes keys[i], and its row
 *       is rows + i * row_bytes, encoded as `encoding` (quant.h):
 *       copied as it is into a table of that encoding, else decoded
 * Local: no messages; every rank passes the same pairs and keeps its own.
 * Errors, named (table, key): EMBER_ELIMIT when this rank would own more
 * keys than its capacity, EMBER_EINVAL for a key given twice or rows of an
 * encoding the table cannot take (an encoded table takes its own encoding
 * only).  After an error the table is to be emptied again or dropped.
 */
int ember_dyn_load_rows(ember_collection *c, int32_t t, const int64_t *keys, int64_t n, const uint8_t *rows,
                        int encoding, int64_t row_bytes);
/* The pairs are all in: the victim structures are rebuilt. */
void ember_dyn_load_end(ember_collection *c, int32_t t);

#endif
