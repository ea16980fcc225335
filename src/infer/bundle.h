/*
 * bundle.h: inference bundles (docs/inference.md, "Bundles"), written from
 * a checkpoint with quantized rows (bundle_write.c: ember_bundle_write,
 * public in ember.h) and read by the predictor (bundle.c: the rest).  A
 * bundle is a folder of
 *
 *   manifest.json   {"format": "ember-bundle", "version": 2 or 3,
 *                    "model": the model description (description.h),
 *                    "tables": [{"name", "kind" (version 3), "encoding",
 *                                "rows", "dim", "row_bytes", "file",
 *                                "bytes", "xxh3",
 *                                "keys": {"file", "bytes", "xxh3"}
 *                                        (dynamic tables)}],
 *                    "dense": {"file", "bytes", "xxh3"},
 *                    "manifest_xxh3": XXH3-64 of every byte before it}
 *   <table>.rows    rows x row_bytes: each row encoded by quant.h
 *   <table>.keys    a dynamic table's keys: rows x int64, little-endian,
 *                   ascending; key i's row is row i of <table>.rows
 *   dense.params    the dense model's parameters, float32
 *
 * Version 3 is written when a dynamic table is bundled ("kind": "dynamic",
 * "rows" its keys), version 2 otherwise, so a bundle of fixed tables still
 * opens with an ember that knows version 2 only.  Both are read.
 */
#ifndef EMBER_INFER_BUNDLE_H
#define EMBER_INFER_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#define BUNDLE_VERSION 3          /* dynamic tables ("kind", "keys")             */
#define BUNDLE_VERSION_FIXED 2    /* fixed tables only; 1: the manifest had no
                                     checksum of its own (refused)              */
#define BUNDLE_CHUNK_ROWS 4096    /* rows decoded per collective ember_table_write */

typedef struct ember_bundle ember_bundle;

/* 1 when dir holds a bundle's manifest. */
int bundle_is(const char *dir);
/* Reads the manifest and maps and verifies every file (sizes, XXH3-64).
 * Local.  EMBER_EIO, EMBER_EFORMAT, EMBER_ECORRUPT with err naming the file. */
int bundle_open(const char *dir, ember_bundle **out, char *err, size_t len);
void bundle_close(ember_bundle *b);
/* The verified manifest (a jansson json_t *, valid until bundle_close). */
const void *bundle_manifest(const ember_bundle *b);
/* The model description (NUL-terminated JSON) and the dense parameters. */
const char *bundle_model_json(const ember_bundle *b);
const float *bundle_dense(const ember_bundle *b, int64_t *bytes);
/* The table files fit the collection the description makes.  Local. */
int bundle_check(const ember_bundle *b, const ember_collection_config *cc, char *err, size_t len);
/* How table t's rows are encoded in the bundle (quant.h's ember_encoding). */
int bundle_encoding(const ember_bundle *b, int32_t t);
/* A dynamic table t: the most keys one rank of a world of `world` owns
 * (mix64(key) mod world), at least 1: the capacity that holds every key
 * and no more.  0 for a fixed table, -1 out of memory.  Local. */
int64_t bundle_dynamic_capacity(const ember_bundle *b, int32_t t, int32_t world);
/* Loads every table into coll: a table of encoded rows (rows_encoding, as
 * the predictor sets it) gets the bundle's rows copied as they are; any
 * other is decoded with collective ember_table_write calls.  A dynamic
 * table (its capacity from bundle_dynamic_capacity) gets on each rank the
 * keys it owns, in slots 0, 1, ... in key order, without messages.
 * scratch holds BUNDLE_CHUNK_ROWS rows of the widest table. */
int bundle_load_tables(const ember_bundle *b, ember_collection *coll, const ember_collection_config *cc,
                       float *scratch);

#endif
