/*
 * layout.h: logical tables and features -> physical tables (table stacking).
 */
#ifndef EMBER_TABLE_LAYOUT_H
#define EMBER_TABLE_LAYOUT_H

struct ember_collection;

/* Groups tables, creates one store per physical table, fills offsets, the
 * features' output columns and pooled_width.  Sets the create message. */
int ember_layout_build(struct ember_collection *coll);

#endif
