/*
 * assemble.h: the parts of ember_collection_create (create.c), each of
 * which builds one side of the collection (docs/architecture.md,
 * assemble's floor): the layout and its stores, the initial rows, the
 * dynamic tables' key indexes.  Each sets the create message (ember_fail_create) when it fails.
 */
#ifndef EMBER_ASSEMBLE_ASSEMBLE_H
#define EMBER_ASSEMBLE_ASSEMBLE_H

#include <stdint.h>

#include "collection/collection.h"

/* ember_collection_create, with the rows left as allocated when init_rows
 * is 0: for a collection whose every row is written next (a move to a new
 * placement, step/rows.h ember_move_rows), where initialising them would
 * only be work thrown away. */
int ember_collection_create_rows(const ember_collection_config *cfg, int init_rows, ember_collection **out);

/* Every check of a collection config (validate.c), before anything is
 * allocated: EMBER_OK or EMBER_EINVAL with the create message set. */
int ember_validate_config(const ember_collection_config *cfg);

/* Groups tables into physical tables (layout.c), creates one store per
 * physical table, fills offsets, the features' output columns and
 * pooled_width. */
int ember_layout_build(ember_collection *c);

/* Initialises every logical table in physical table p (init.c; values by
 * formula, optimizer state zero), touching pages with the collection's
 * threads. */
void ember_init_ptable(ember_collection *c, int32_t p);

/* The SSD tier's initializer (tier/ssd.h ember_row_init_fn): the initial
 * values of local row `local` of a physical table; ctx is its
 * ember_tier_init_ctx. */
void ember_init_local_row(void *ctx, uint32_t local, float *out);

/* The key index of every dynamic physical table (dynamic.c); destroy
 * frees them and the step's key buffers. */
int ember_dyn_tables_create(ember_collection *c);
void ember_dyn_tables_destroy(ember_collection *c);

#endif
