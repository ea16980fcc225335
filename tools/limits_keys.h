/*
 * limits_keys.h: `ember limits`'s count of dynamic tables' keys by owner
 * (limits_keys.c).  Per global batch, the distinct keys each owner
 * (mix64(key) mod owners) receives, and over all batches the distinct keys
 * each owner has seen, against the table's capacity per rank: the working
 * set the planner predicts (docs/planner.md, "Dynamic tables").
 */
#ifndef EMBER_TOOLS_LIMITS_KEYS_H
#define EMBER_TOOLS_LIMITS_KEYS_H

#include <stdint.h>

#include <jansson.h>

#include "ember.h"

typedef struct limits_keys limits_keys;

/* For the dynamic tables among tables[0..info->num_tables) (kind DYNAMIC;
 * capacity[t] their rows per rank), counted over `owners` owners.  *out is
 * NULL when there is none.  0, or -1 (out of memory). */
int limits_keys_create(const ember_batch_file_info *info, const ember_table_config *tables,
                       const int64_t *capacity, int64_t owners, limits_keys **out);
/* Counts one global batch.  0, or -1 (out of memory). */
int limits_keys_add(limits_keys *k, const ember_batch *global);
/* The text section after the limits table, with a warning per table whose
 * keys outgrow its capacity. */
void limits_keys_print(const limits_keys *k, char (*names)[32]);
/* Adds table t's key counts to its JSON record (nothing for a fixed table). */
void limits_keys_json(const limits_keys *k, int32_t t, json_t *record);
void limits_keys_destroy(limits_keys *k);

#endif
