/*
 * rows.h: row access over the world (rows.c): the rows of a logical table,
 * values or optimizer state, between a caller's buffer and the stores of
 * every rank that holds a piece of them.
 */
#ifndef EMBER_STEP_ROWS_H
#define EMBER_STEP_ROWS_H

#include <stdint.h>

#include "collection/collection.h"

/* A piece of a row one rank holds: floats at `src` of the stored row, at
 * `dst` of the whole row (values, or the state's ember_state_floats), `len`
 * of them. */
typedef struct ember_row_piece {
    int32_t src, dst, len;
} ember_row_piece;

/* The pieces of one row that rank r provides on a read (write 0: a
 * replicated table's from rank 0, a column table's row-wise floats from
 * rank 0) or stores on a write (write 1), given that r holds the row;
 * returns how many (at most 3). */
int ember_row_pieces(const ember_ptable *pt, int32_t r, int state, int write, ember_row_piece out[3]);

/* Row access (include/ember.h): copies rows [first, first+count) of table t
 * between buf and the store (to_table) or from the world into buf, values or
 * state.  Collective when the world has more than one rank. */
int ember_dist_rows(ember_collection *c, int32_t t, int64_t first, int64_t count, float *buf, int to_table,
                    int state);
/* Stores rows [first, first + count) of table t, already encoded as its
 * store holds them (rows_encoding; row first + i at rows + i * row_bytes):
 * each rank copies the rows it holds, with no messages.  EMBER_EINVAL when
 * the table is not encoded that way. */
/* Moves every fixed table's rows and optimizer state from `from` to `to`:
 * two collections of the same tables over the same world, placed alike or
 * not (move.c).  Each piece of a row goes once, from a rank that holds it
 * in `from` straight to each rank that stores it in `to`, in one
 * all-to-all per chunk of rows; then `to` takes `from`'s step count,
 * statistics and learning-rate factor, so its next step is the one `from`
 * would have taken.  Collective.  EMBER_EINVAL (message on `to`) for
 * collections of other tables or with dynamic tables, EMBER_ENOMEM, EMBER_EIO
 * (the SSD tier), EMBER_ECOMM; `from` is unchanged whatever happens. */
int ember_move_rows(ember_collection *from, ember_collection *to);

int ember_dist_write_encoded(ember_collection *c, int32_t t, int64_t first, int64_t count, const uint8_t *rows,
                             int64_t row_bytes);

#endif
