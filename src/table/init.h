/*
 * init.h: deterministic initial values of a table's rows: a pure function
 * of the table's config, its rng key (seed and name), the row and the
 * column, whatever the sharding, stacking, thread count or tier.
 */
#ifndef EMBER_TABLE_INIT_H
#define EMBER_TABLE_INIT_H

#include <stdint.h>

#include "ember.h"

/* Columns [k0, k0 + width) of row `row` of a table of config tc and rng key
 * `key` (ember_rng_table_key of the collection's seed and the table's
 * name); columns at or past dim (the padding of a COLUMN slice) are zero. */
void ember_init_row(const ember_table_config *tc, uint64_t key, int64_t row, int32_t k0, int32_t width,
                    float *out);

/* Row `row`'s initial values (dim floats) of a table with this init kind
 * and value and rng key (ember_rng_table_key of the collection's seed and
 * the table's name): what create writes, for `ember inspect`'s count of
 * rows never touched. */
void ember_init_row_values(int init_kind, float init_value, int32_t dim, uint64_t rng_key, int64_t row, float *out);

/* The same for n rows at once: out[i] gets row rows[i]'s dim values, bit
 * for bit what ember_init_row_values writes, the uniform kind computed in
 * vectorised blocks (a dynamic table's admitted keys, on the step). */
void ember_init_rows(int init_kind, float init_value, int32_t dim, uint64_t rng_key, const uint64_t *rows, int64_t n,
                     float *const *out);

#endif
