/*
 * rows.h: row access over the world (rows.c): the rows of a logical table,
 * values or optimizer state, between a caller's buffer and the stores of
 * every rank that holds a piece of them.
 */
#ifndef EMBER_STEP_ROWS_H
#define EMBER_STEP_ROWS_H

#include <stdint.h>

#include "collection/collection.h"

/* Row access (include/ember.h): copies rows [first, first+count) of table t
 * between buf and the store (to_table) or from the world into buf, values or
 * state.  Collective when the world has more than one rank. */
int ember_dist_rows(ember_collection *c, int32_t t, int64_t first, int64_t count, float *buf, int to_table,
                    int state);
/* Stores rows [first, first + count) of table t, already encoded as its
 * store holds them (rows_encoding; row first + i at rows + i * row_bytes):
 * each rank copies the rows it holds, with no messages.  EMBER_EINVAL when
 * the table is not encoded that way. */
int ember_dist_write_encoded(ember_collection *c, int32_t t, int64_t first, int64_t count, const uint8_t *rows,
                             int64_t row_bytes);

#endif
