/*
 * init.h: deterministic initial values of a physical table's rows.
 */
#ifndef EMBER_TABLE_INIT_H
#define EMBER_TABLE_INIT_H

#include <stdint.h>

struct ember_collection;

/* Initialises every logical table in physical table p (values by formula,
 * optimizer state zero), touching pages with the collection's threads. */
void ember_init_ptable(struct ember_collection *coll, int32_t p);

/* The SSD tier's initializer (tier.h ember_row_init_fn): the initial values
 * of local row `local` of a physical table; ctx is its ember_tier_init_ctx. */
void ember_init_local_row(void *ctx, uint32_t local, float *out);

/* Row `row`'s initial values (dim floats) of a table with this init kind
 * and value and rng key (ember_rng_table_key of the collection's seed and
 * the table's name): what ember_init_ptable writes, for `ember inspect`'s
 * count of rows never touched. */
void ember_init_row_values(int init_kind, float init_value, int32_t dim, uint64_t rng_key, int64_t row, float *out);

#endif
