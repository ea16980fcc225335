/*
 * config.h: what a collection config means beyond its fields: the
 * defaults (include/ember.h's ember_*_default), the optimizer state a row
 * carries (ember_state_floats, public), which tables may hold encoded rows,
 * a dynamic table's capacity and size, and which tables go to the SSD tier.
 * Pure functions of the config, shared by create (assemble/), the planner
 * (plan/) and the predictor (infer/).
 */
#ifndef EMBER_COLLECTION_CONFIG_H
#define EMBER_COLLECTION_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

/* Why table tc cannot hold encoded rows (ember_table_config.rows_encoding:
 * "the SSD tier", "COLUMN placement", ...), or NULL when it can.  Create
 * refuses such a config; the predictor keeps such a table's rows fp32. */
const char *ember_encoding_refusal(const ember_table_config *tc);

/* Bytes of one row of `dim` columns as table tc holds it: encoded rows
 * (rows_encoding) as quant.h encodes them, half-precision training rows
 * (precision fp16, bf16) 2 per element, else 4; and the optimizer state
 * beside it (none for encoded rows): its elements, and its bytes (2 per
 * element for half state, state_precision, else 4).  The planner, the tier
 * rule and a dynamic table's capacity all count rows this way. */
int64_t ember_row_bytes(const ember_table_config *tc, int32_t dim);
/* 1 for the optimizers whose state is only per element (Adagrad, Adam,
 * momentum, FTRL, LAMB, LARS): the ones whose state may be half precision
 * (state_precision); a row float (row-wise Adagrad's, row-wise Adam's v)
 * stays fp32 and SGD keeps none. */
int ember_element_state(ember_optimizer_kind kind);
/* A row's state is ember_state_vectors(kind) vectors of dim floats, one
 * after the other (Adagrad, momentum, LARS, row-wise Adam's m: 1; Adam,
 * FTRL, LAMB: 2), then ember_state_row_floats(kind) floats for the whole
 * row (row-wise Adagrad's s, row-wise Adam's v: 1).  A COLUMN slice holds
 * each vector's columns and a copy of the row floats (equal on every rank;
 * rank 0's is the one saved). */
int ember_state_vectors(ember_optimizer_kind kind);
int ember_state_row_floats(ember_optimizer_kind kind);
/* The last optimizer kind (include/ember.h). */
#define EMBER_OPT_LAST EMBER_OPT_LARS
/* quant.h's encoding of a half precision (EMBER_ENC_FP16, _BF16); 0 for fp32. */
int ember_precision_encoding(ember_row_precision p);
int32_t ember_row_state_floats(const ember_table_config *tc, int32_t dim);
int64_t ember_row_state_bytes(const ember_table_config *tc, int32_t dim);

/* dynamic_config.c: capacity (rows per rank) and sketch width of a dynamic
 * table config: from capacity, or the most rows capacity_bytes holds.  0 if
 * none fits. */
int64_t ember_dyn_capacity(const ember_table_config *t);
int64_t ember_dyn_sketch_width(const ember_table_config *t);
/* Bytes per rank of a dynamic table of this config and capacity. */
int64_t ember_dyn_table_bytes(const ember_table_config *t, int64_t capacity);
/* Checks a table config's kind and dynamic fields (message in err). */
int ember_dyn_check_config(const ember_table_config *t, int32_t world, char *err, size_t len);

/* tier_rule.c: which tables go to the SSD tier (docs/tiers.md).  Bytes of
 * rows + optimizer state of table t on its fullest rank in the memory tier,
 * in a world of W (a dynamic table: its capacity's, on every rank; its key
 * index is not included but counts in the budget). */
int64_t ember_tier_rank_bytes(const ember_table_config *t, int32_t W);
/* Storage of every table (storage[num_tables]: MEMORY or SSD): the table's
 * choice, else the collection's rules (ember.h, ssd_min_bytes and
 * memory_budget); and the cache of each SSD table (cache[num_tables], 0 for
 * memory tables): its own cache_bytes, else the collection's
 * ssd_cache_bytes, else an equal share of what the memory budget leaves
 * (the memory tables and the sized caches counted), else 256 MiB. */
void ember_tier_resolve(const ember_collection_config *cfg, int32_t W, ember_storage *storage, int64_t *cache);

#endif
