/*
 * dynamic_keys.h: a dynamic table's keys become rows before the forward
 * routes a batch (dynamic_keys.c; docs/dynamic.md), and the partition
 * counts of its keys.
 */
#ifndef EMBER_STEP_DYNAMIC_KEYS_H
#define EMBER_STEP_DYNAMIC_KEYS_H

#include <stdint.h>

#include "collection/collection.h"

/* Forward, after validation: resolves every dynamic table's keys
 * (collective) and makes *out the batch with keys replaced by row ids
 * (ids in the collection's scratch; *out = *b without dynamic tables).
 * On error every table is as before. */
int ember_dyn_forward_begin(ember_collection *c, const ember_batch *b, ember_batch *out);
/* ember_partition_counts for dynamic tables: their cells of ids/unique
 * recounted from the batch (c->shape.bag_off filled by validation): per-sample
 * dedup of keys within each bag, shard = ember_dyn_owner(key, num_shards),
 * unique = distinct keys per (table, shard). */
int ember_dyn_partition_counts(ember_collection *c, const ember_batch *b, int64_t *ids, int64_t *unique);
/* End of forward: commit (status OK) or roll back the resolves. */
void ember_dyn_forward_end(ember_collection *c, int status);

#endif
