/*
 * request.h: the body of a scoring request decoded into a batch of the
 * model's shape (docs/inference.md, "Serving").  Two bodies:
 *
 *   JSON    {"dense": [[f, ...], ...], "sparse": {"NAME": [[id, ...], ...], ...},
 *            "weights": {"NAME": [[w, ...], ...]}}       (weights optional)
 *           one row of dense per sample, one bag per sample under every
 *           feature's name (a bare integer is a bag of one id);
 *   binary  "EMBQ" then little-endian counts, dense, lengths, ids and
 *           optionally weights (the layout in serve_decode_binary below).
 *
 * Raw rows (request_rows.c), when the model carries its input schema:
 *   JSON    {"rows": [{"COLUMN": value, ...}, ...]}  values as the training
 *           file holds them (a multi_hot column may take an array of items)
 *   text    lines in the training file's format (CSV or TSV), a header
 *           line optional, the label column optional and not read.
 *
 * Decoding checks everything a forward would refuse, and names the sample,
 * the feature and the value at fault: a client's mistake is that client's
 * 400, never a failed micro-batch that other clients' samples share.  Ids
 * must lie in [0, rows) of their feature's table (any 64-bit key for a
 * dynamic table), dense values and weights must be finite.  Pure functions
 * of the body: no I/O, no global state (a libFuzzer target runs them).
 */
#ifndef EMBER_SERVE_REQUEST_H
#define EMBER_SERVE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "data/text_parse.h"
#include "ember.h"
#include "infer/description.h"

#define SERVE_BINARY_MAGIC "EMBQ"
#define SERVE_BINARY_HEADER 32

/* What a body must fit. */
typedef struct serve_shape {
    int32_t num_dense, num_features;
    const int64_t *rows;        /* per feature: ids in [0, rows); 0: any 64-bit key */
    const char *const *names;   /* per feature                                      */
    int32_t max_samples;        /* per request                                      */
    const text_plan *plan;      /* the model's input schema, columns in the training
                                   file's order (positional); NULL: raw rows are
                                   refused, with no_plan saying why              */
    const char *no_plan;
    const char *const *file_fields; /* the training file's header fields (a CSV
                                   body without a header holds them), or NULL */
    int32_t num_file_fields;
} serve_shape;

/* One request's samples, in ember_batch's layout; malloc'd arrays. */
typedef struct serve_batch {
    int32_t n;
    float *dense;      /* [n][num_dense]                               */
    int32_t *lengths;  /* [num_features][n]                            */
    int64_t *ids;      /* feature-major, num_ids                       */
    float *weights;    /* NULL, or one per id                          */
    int64_t num_ids;
} serve_batch;

/* The shape of a predictor's model; names and rows are kept in *store
 * (valid while p is open). */
typedef struct serve_shape_store {
    int64_t rows[DESCRIPTION_MAX];
    const char *names[DESCRIPTION_MAX];
    text_plan plan;
    int has_plan;
    char no_plan[480];
} serve_shape_store;
/* 0, or EMBER_ENOMEM; the store is freed with serve_shape_store_free. */
int serve_shape_of(const ember_predictor *p, int32_t max_samples, serve_shape_store *store, serve_shape *out);
void serve_shape_store_free(serve_shape_store *store);

/* Each returns 0, or EMBER_EINPUT with err naming what is wrong with the
 * body, or EMBER_ENOMEM when out of memory (out is then empty); out is freed with
 * serve_batch_free either way. */
int serve_decode_json(const serve_shape *s, const char *body, size_t n, serve_batch *out, char *err, size_t errlen);
/* The rows of a JSON body ({"rows": rows}; serve_decode_json calls it),
 * and a CSV or TSV body (delimiter ',' or '\t', which must be the
 * model's).  Errors name the row ("row 2", from 0) or the body's line
 * ("line 3", from 1) and the column. */
int serve_decode_rows(const serve_shape *s, json_t *rows, serve_batch *out, char *err, size_t errlen);
int serve_decode_text(const serve_shape *s, const char *body, size_t n, char delimiter, serve_batch *out, char *err,
                      size_t errlen);
/* Binary body, little-endian, no padding:
 *   0  char[4] "EMBQ"        4  u32 version = 1      8  u32 n (samples)
 *   12 u32 num_dense         16 u32 num_features     20 u32 flags (bit 0: weights)
 *   24 u64 num_ids           32 f32 dense[n*num_dense]
 *   .. i32 lengths[num_features*n] (feature-major)   .. i64 ids[num_ids]
 *   .. f32 weights[num_ids] (flag bit 0)             and nothing after. */
int serve_decode_binary(const serve_shape *s, const void *body, size_t n, serve_batch *out, char *err,
                        size_t errlen);
void serve_batch_free(serve_batch *b);

#endif
