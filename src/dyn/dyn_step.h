/*
 * dyn_step.h: dynamic tables in the collection (dyn_step.c, dyn_api.c).
 */
#ifndef EMBER_DYN_DYN_STEP_H
#define EMBER_DYN_DYN_STEP_H

#include <stdint.h>

#include "dyn/dyn.h"
#include "ember.h"

/* The id a key with no row becomes before routing: the route gives it a
 * zero row that counts in mean/sqrtn divisors and gets no update. */
#define EMBER_ID_UNSEEN INT64_MIN

typedef struct ember_dyn_table { /* one dynamic physical table on this rank */
    ember_dyn d;
    uint32_t *slots;             /* the resolved (received) keys' slots      */
    int64_t n, cap;
    float *undo_rows;            /* rows + state overwritten by resets       */
    int64_t undo_cap, undo_done;
} ember_dyn_table;

struct ember_collection;
struct ember_batch;

/* The owner of a key in a world of W: mix64(key) mod W (splitmix64's
 * finaliser: raw ids are often multiples of W). */
uint32_t ember_dyn_owner(int64_t key, int32_t world);

/* Capacity (rows per rank) and sketch width of a dynamic table config:
 * from capacity, or the most rows capacity_bytes holds.  0 if none fits. */
int64_t ember_dyn_capacity(const ember_table_config *t);
int64_t ember_dyn_sketch_width(const ember_table_config *t);
/* Bytes per rank of a dynamic table of this config and capacity. */
int64_t ember_dyn_table_bytes(const ember_table_config *t, int64_t capacity);

/* Checks a table config's kind and dynamic fields (message in err). */
int ember_dyn_check_config(const ember_table_config *t, int32_t world, char *err, size_t len);

int ember_dyn_tables_create(struct ember_collection *c);
void ember_dyn_tables_destroy(struct ember_collection *c);

/* Forward, after validation: resolves every dynamic table's keys
 * (collective) and makes *out the batch with keys replaced by row ids
 * (ids in the collection's scratch; *out = *b without dynamic tables).
 * On error every table is as before. */
int ember_dyn_forward_begin(struct ember_collection *c, const struct ember_batch *b, struct ember_batch *out);
/* ember_partition_counts for dynamic tables: their cells of ids/unique
 * recounted from the batch (c->bag_off filled by validation): per-sample
 * dedup of keys within each bag, shard = ember_dyn_owner(key, num_shards),
 * unique = distinct keys per (table, shard). */
int ember_dyn_partition_counts(struct ember_collection *c, const struct ember_batch *b, int64_t *ids,
                               int64_t *unique);
/* End of forward: commit (status OK) or roll back the resolves. */
void ember_dyn_forward_end(struct ember_collection *c, int status);

#endif
