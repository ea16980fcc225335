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

#endif
