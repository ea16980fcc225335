/*
 * bundle.h: inference bundles (docs/inference.md, "Bundles"), written from
 * a checkpoint with quantized rows (bundle_write.c: ember_bundle_write,
 * public in ember.h) and read by the predictor (bundle.c: the rest).  A
 * bundle is a folder of
 *
 *   manifest.json   {"format": "ember-bundle", "version": 2,
 *                    "model": the model description (description.h),
 *                    "tables": [{"name", "encoding", "rows", "dim",
 *                                "row_bytes", "file", "bytes", "xxh3"}],
 *                    "dense": {"file", "bytes", "xxh3"},
 *                    "manifest_xxh3": XXH3-64 of every byte before it}
 *   <table>.rows    rows x row_bytes: each row encoded by quant.h
 *   dense.params    the dense model's parameters, float32
 *
 * Dynamic tables are not bundled yet: their rows need their keys.
 */
#ifndef EMBER_INFER_BUNDLE_H
#define EMBER_INFER_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#define BUNDLE_VERSION 2          /* 1: the manifest had no checksum of its own  */
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
/* Loads every table into coll: a table of encoded rows (rows_encoding, as
 * the predictor sets it) gets the bundle's rows copied as they are; any
 * other is decoded with collective ember_table_write calls.  scratch holds
 * BUNDLE_CHUNK_ROWS rows of the widest table. */
int bundle_load_tables(const ember_bundle *b, ember_collection *coll, const ember_collection_config *cc,
                       float *scratch);

#endif
