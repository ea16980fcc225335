/*
 * request.c: scoring request bodies to batches (request.h).
 *
 * JSON goes through jansson (duplicate keys refused, so a feature cannot
 * be given twice); the body is columnar by feature, as ember_batch is, so
 * decoding is two passes over each feature's bags: count the ids, then
 * copy them.  The binary body is checked field by field against the bytes
 * there are before anything is allocated, so a lying count is named as
 * such and never allocates more than the body could hold.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/predictor.h"
#include "serve/request.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "binary bodies are copied as they are: little-endian hosts");

static int fail(serve_batch *out, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(serve_batch *out, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    serve_batch_free(out);
    return EMBER_EINPUT;
}

void serve_batch_free(serve_batch *b)
{
    free(b->dense);
    free(b->lengths);
    free(b->ids);
    free(b->weights);
    memset(b, 0, sizeof *b);
}

/* The plan raw rows are parsed by: the model's input schema read
 * positionally (its columns are in the training file's order). */
static int rows_plan(const model_description *m, serve_shape_store *store)
{
    const description_input *in = &m->in;
    if (m->in_error[0]) {
        snprintf(store->no_plan, sizeof store->no_plan, "%s", m->in_error);
        return 0;
    }
    if (in->source != DESC_INPUT_TEXT && in->source != DESC_INPUT_CRITEO_TSV) {
        snprintf(store->no_plan, sizeof store->no_plan, "this model has none (it was trained on %s): send ids",
                 in->source == DESC_INPUT_SYNTHETIC ? "the built-in synthetic task"
                 : in->source == DESC_INPUT_BINARY  ? "a binary file"
                                                             : "data of an older ember");
        return 0;
    }
    ctr_text_schema sc = in->schema;
    sc.header = 0;
    char err[300];
    int st = text_plan_init(&store->plan, &sc, "the model's input schema", err, sizeof err);
    if (st) {
        snprintf(store->no_plan, sizeof store->no_plan, "%s", err);
        return strstr(err, "out of memory") ? EMBER_ENOMEM : 0;
    }
    store->has_plan = 1;
    return 0;
}

int serve_shape_of(const ember_predictor *p, int32_t max_samples, serve_shape_store *store, serve_shape *out)
{
    const model_description *m = predictor_description(p);
    memset(store, 0, sizeof *store);
    for (int32_t f = 0; f < m->num_features; f++) {
        const ember_table_config *t = &m->tables[m->features[f].table];
        store->rows[f] = t->kind == EMBER_TABLE_DYNAMIC ? 0 : t->rows;
        store->names[f] = m->features[f].name;
    }
    int st = rows_plan(m, store);
    *out = (serve_shape){m->dense.num_dense, m->num_features, store->rows, store->names, max_samples,
                         store->has_plan ? &store->plan : NULL, store->no_plan,
                         store->has_plan ? m->in.schema.file_fields : NULL,
                         store->has_plan ? m->in.schema.num_file_fields : 0};
    return st;
}

void serve_shape_store_free(serve_shape_store *store)
{
    if (store->has_plan)
        text_plan_free(&store->plan);
    store->has_plan = 0;
}

static int check_id(const serve_shape *s, int32_t f, int32_t b, int64_t id, serve_batch *out, char *err,
                    size_t errlen)
{
    if (s->rows[f] > 0 && (id < 0 || id >= s->rows[f]))
        return fail(out, err, errlen, "sample %d, feature \"%s\": id %lld outside [0, %lld)", (int)b, s->names[f],
                    (long long)id, (long long)s->rows[f]);
    return 0;
}

/* ---------------------------------------------------------------- JSON */

/* The bags of feature f under obj (sparse or weights): an array of n. */
static int bags_of(const serve_shape *s, json_t *obj, const char *what, int32_t f, int64_t *n, json_t **bags,
                   serve_batch *out, char *err, size_t errlen)
{
    *bags = json_object_get(obj, s->names[f]);
    if (!*bags)
        return fail(out, err, errlen, "\"%s\": feature \"%s\" is missing (every feature needs a bag per sample; "
                    "[] is an empty bag)", what, s->names[f]);
    if (!json_is_array(*bags))
        return fail(out, err, errlen, "\"%s\".\"%s\": expected an array with a bag per sample", what, s->names[f]);
    int64_t k = (int64_t)json_array_size(*bags);
    if (*n >= 0 && k != *n)
        return fail(out, err, errlen, "\"%s\".\"%s\": %lld bags, but the request has %lld samples", what,
                    s->names[f], (long long)k, (long long)*n);
    *n = k;
    return 0;
}

/* Names the first key of obj that is not a feature. */
static int unknown_feature(const serve_shape *s, json_t *obj, const char *what, serve_batch *out, char *err,
                           size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int32_t f = 0;
        while (f < s->num_features && strcmp(key, s->names[f]))
            f++;
        if (f == s->num_features)
            return fail(out, err, errlen, "\"%s\": the model has no feature \"%s\"", what, key);
    }
    return 0;
}

static int json_dense(const serve_shape *s, json_t *dense, serve_batch *out, char *err, size_t errlen)
{
    for (int32_t b = 0; b < out->n; b++) {
        json_t *row = json_array_get(dense, (size_t)b);
        if (!json_is_array(row) || json_array_size(row) != (size_t)s->num_dense)
            return fail(out, err, errlen, "\"dense\", sample %d: expected an array of %d numbers", (int)b,
                        (int)s->num_dense);
        for (int32_t j = 0; j < s->num_dense; j++) {
            json_t *v = json_array_get(row, (size_t)j);
            float x = json_is_number(v) ? (float)json_number_value(v) : NAN;
            if (!isfinite(x))
                return fail(out, err, errlen, "\"dense\", sample %d, value %d: %s", (int)b, (int)j,
                            json_is_number(v) ? "does not fit a float" : "not a number");
            out->dense[(int64_t)b * s->num_dense + j] = x;
        }
    }
    return 0;
}

/* Pass 1: every bag's length, and the total. */
static int json_lengths(const serve_shape *s, json_t *sparse, serve_batch *out, char *err, size_t errlen)
{
    int64_t total = 0;
    for (int32_t f = 0; f < s->num_features; f++) {
        json_t *bags = json_object_get(sparse, s->names[f]);
        for (int32_t b = 0; b < out->n; b++) {
            json_t *bag = json_array_get(bags, (size_t)b);
            if (!json_is_integer(bag) && !json_is_array(bag))
                return fail(out, err, errlen, "sample %d, feature \"%s\": expected an id or an array of ids",
                            (int)b, s->names[f]);
            size_t k = json_is_integer(bag) ? 1 : json_array_size(bag);
            if (k > INT32_MAX)
                return fail(out, err, errlen, "sample %d, feature \"%s\": a bag of %zu ids", (int)b, s->names[f], k);
            out->lengths[(int64_t)f * out->n + b] = (int32_t)k;
            total += (int64_t)k;
        }
    }
    out->num_ids = total;
    return 0;
}

/* Pass 2: the ids (and weights) in feature-major order. */
static int json_ids(const serve_shape *s, json_t *sparse, json_t *weights, serve_batch *out, char *err,
                    size_t errlen)
{
    int64_t at = 0;
    for (int32_t f = 0; f < s->num_features; f++) {
        json_t *bags = json_object_get(sparse, s->names[f]);
        json_t *wbags = weights ? json_object_get(weights, s->names[f]) : NULL;
        for (int32_t b = 0; b < out->n; b++) {
            json_t *bag = json_array_get(bags, (size_t)b);
            json_t *wbag = wbags ? json_array_get(wbags, (size_t)b) : NULL;
            int32_t k = out->lengths[(int64_t)f * out->n + b];
            if (wbags && !(json_is_array(wbag) ? json_array_size(wbag) == (size_t)k : json_is_number(wbag) && k == 1))
                return fail(out, err, errlen, "sample %d, feature \"%s\": %d ids but not as many weights", (int)b,
                            s->names[f], (int)k);
            for (int32_t i = 0; i < k; i++, at++) {
                json_t *v = json_is_array(bag) ? json_array_get(bag, (size_t)i) : bag;
                if (!json_is_integer(v))
                    return fail(out, err, errlen, "sample %d, feature \"%s\", id %d: not an integer", (int)b,
                                s->names[f], (int)i);
                out->ids[at] = (int64_t)json_integer_value(v);
                if (check_id(s, f, b, out->ids[at], out, err, errlen))
                    return EMBER_EINPUT;
                if (!out->weights)
                    continue;
                json_t *w = !wbags ? NULL : json_is_array(wbag) ? json_array_get(wbag, (size_t)i) : wbag;
                float x = !w ? 1.0f : json_is_number(w) ? (float)json_number_value(w) : NAN;
                if (!isfinite(x))
                    return fail(out, err, errlen, "sample %d, feature \"%s\", weight %d: not a finite number",
                                (int)b, s->names[f], (int)i);
                out->weights[at] = x;
            }
        }
    }
    return 0;
}

static int decode_root(const serve_shape *s, json_t *root, serve_batch *out, char *err, size_t errlen)
{
    if (!json_is_object(root))
        return fail(out, err, errlen, "the body must be a JSON object with \"dense\" and \"sparse\", or with "
                    "\"rows\"");
    json_t *rows = json_object_get(root, "rows");
    if (rows) {
        if (json_object_size(root) != 1)
            return fail(out, err, errlen, "a body with \"rows\" holds nothing else");
        return serve_decode_rows(s, rows, out, err, errlen);
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "dense") && strcmp(key, "sparse") && strcmp(key, "weights"))
            return fail(out, err, errlen, "unknown field \"%s\" (a request has \"dense\", \"sparse\" and "
                        "optionally \"weights\")", key);
    }
    json_t *dense = json_object_get(root, "dense"), *sparse = json_object_get(root, "sparse");
    json_t *weights = json_object_get(root, "weights");
    int64_t n = -1;
    if (dense && !json_is_array(dense))
        return fail(out, err, errlen, "\"dense\": expected an array with a row of %d numbers per sample",
                    (int)s->num_dense);
    if (s->num_dense > 0 && !dense)
        return fail(out, err, errlen, "\"dense\" is missing: the model takes %d dense features per sample",
                    (int)s->num_dense);
    if (dense)
        n = (int64_t)json_array_size(dense);
    if (!json_is_object(sparse))
        return fail(out, err, errlen, "\"sparse\": expected an object with the bags of every feature by name");
    if (weights && !json_is_object(weights))
        return fail(out, err, errlen, "\"weights\": expected an object with weights by feature name");
    if (unknown_feature(s, sparse, "sparse", out, err, errlen) ||
        (weights && unknown_feature(s, weights, "weights", out, err, errlen)))
        return EMBER_EINPUT;
    json_t *bags;
    for (int32_t f = 0; f < s->num_features; f++)
        if (bags_of(s, sparse, "sparse", f, &n, &bags, out, err, errlen))
            return EMBER_EINPUT;
    for (int32_t f = 0; weights && f < s->num_features; f++)
        if (json_object_get(weights, s->names[f]) && bags_of(s, weights, "weights", f, &n, &bags, out, err, errlen))
            return EMBER_EINPUT;
    if (n > s->max_samples)
        return fail(out, err, errlen, "%lld samples, more than one request may hold (%d)", (long long)n,
                    (int)s->max_samples);
    out->n = (int32_t)(n < 0 ? 0 : n);
    out->dense = malloc(sizeof(float) * ((size_t)out->n * (size_t)s->num_dense + 1));
    out->lengths = malloc(sizeof(int32_t) * ((size_t)out->n * (size_t)s->num_features + 1));
    if (!out->dense || !out->lengths)
        return (void)fail(out, err, errlen, "out of memory decoding %d samples", (int)out->n), EMBER_ENOMEM;
    if ((dense && json_dense(s, dense, out, err, errlen)) || json_lengths(s, sparse, out, err, errlen))
        return EMBER_EINPUT;
    out->ids = malloc(sizeof(int64_t) * ((size_t)out->num_ids + 1));
    out->weights = weights ? malloc(sizeof(float) * ((size_t)out->num_ids + 1)) : NULL;
    if (!out->ids || (weights && !out->weights))
        return (void)fail(out, err, errlen, "out of memory decoding %lld ids", (long long)out->num_ids), EMBER_ENOMEM;
    return json_ids(s, sparse, weights, out, err, errlen);
}

int serve_decode_json(const serve_shape *s, const char *body, size_t n, serve_batch *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return fail(out, err, errlen, "JSON: line %d, column %d: %s", je.line, je.column, je.text);
    int st = decode_root(s, root, out, err, errlen);
    json_decref(root);
    return st;
}

/* -------------------------------------------------------------- binary */

static uint32_t u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64_at(const unsigned char *p) { return (uint64_t)u32_at(p) | (uint64_t)u32_at(p + 4) << 32; }

int serve_decode_binary(const serve_shape *s, const void *body, size_t n, serve_batch *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    const unsigned char *p = body;
    if (n < SERVE_BINARY_HEADER || memcmp(p, SERVE_BINARY_MAGIC, 4))
        return fail(out, err, errlen, "binary body: %s", n < SERVE_BINARY_HEADER ? "shorter than its 32-byte header"
                                                                                 : "does not start with \"EMBQ\"");
    uint32_t version = u32_at(p + 4), ns = u32_at(p + 8), nd = u32_at(p + 12), nf = u32_at(p + 16);
    uint32_t flags = u32_at(p + 20);
    uint64_t nids = u64_at(p + 24);
    if (version != 1)
        return fail(out, err, errlen, "binary body: version %u (this server reads 1)", version);
    if (flags > 1)
        return fail(out, err, errlen, "binary body: flags %#x (only bit 0, weights, is defined)", flags);
    if (nd != (uint32_t)s->num_dense || nf != (uint32_t)s->num_features)
        return fail(out, err, errlen, "binary body: %u dense and %u sparse features; the model has %d and %d", nd, nf,
                    (int)s->num_dense, (int)s->num_features);
    if (ns > (uint32_t)s->max_samples)
        return fail(out, err, errlen, "binary body: %u samples, more than one request may hold (%d)", ns,
                    (int)s->max_samples);
    /* every count is now small (samples <= max_samples < 2^31, features <= 1024) except num_ids */
    uint64_t fixed = SERVE_BINARY_HEADER + 4ull * ns * nd + 4ull * ns * nf;
    uint64_t per_id = 8 + (flags & 1 ? 4 : 0);
    if (n < fixed || nids > (n - fixed) / per_id || n != fixed + per_id * nids)
        return fail(out, err, errlen, "binary body: %zu bytes, but %u samples and %llu ids take %llu", n, ns,
                    (unsigned long long)nids,
                    (unsigned long long)(nids <= UINT64_MAX / 16 ? fixed + per_id * nids : UINT64_MAX));
    out->n = (int32_t)ns;
    out->num_ids = (int64_t)nids;
    out->dense = malloc(4 * ((size_t)ns * nd + 1));
    out->lengths = malloc(4 * ((size_t)ns * nf + 1));
    out->ids = malloc(8 * ((size_t)nids + 1));
    out->weights = flags & 1 ? malloc(4 * ((size_t)nids + 1)) : NULL;
    if (!out->dense || !out->lengths || !out->ids || (flags & 1 && !out->weights))
        return (void)fail(out, err, errlen, "out of memory decoding %u samples", ns), EMBER_ENOMEM;
    const unsigned char *at = p + SERVE_BINARY_HEADER;
    memcpy(out->dense, at, 4 * (size_t)ns * nd);
    at += 4 * (size_t)ns * nd;
    memcpy(out->lengths, at, 4 * (size_t)ns * nf);
    at += 4 * (size_t)ns * nf;
    memcpy(out->ids, at, 8 * (size_t)nids);
    at += 8 * (size_t)nids;
    if (out->weights)
        memcpy(out->weights, at, 4 * (size_t)nids);
    for (uint64_t i = 0; i < (uint64_t)ns * nd; i++)
        if (!isfinite(out->dense[i]))
            return fail(out, err, errlen, "binary body: sample %d, dense value %d is not finite", (int)(i / nd),
                        (int)(i % nd));
    int64_t id_at = 0;
    for (int32_t f = 0; f < (int32_t)nf; f++)
        for (int32_t b = 0; b < (int32_t)ns; b++) {
            int32_t k = out->lengths[(int64_t)f * ns + b];
            if (k < 0 || (uint64_t)k > nids - (uint64_t)id_at)
                return fail(out, err, errlen, "binary body: sample %d, feature \"%s\": bag length %d %s", (int)b,
                            s->names[f], (int)k, k < 0 ? "is negative" : "runs past num_ids");
            for (int32_t i = 0; i < k; i++, id_at++) {
                if (check_id(s, f, b, out->ids[id_at], out, err, errlen))
                    return EMBER_EINPUT;
                if (out->weights && !isfinite(out->weights[id_at]))
                    return fail(out, err, errlen, "binary body: sample %d, feature \"%s\", weight %d is not finite",
                                (int)b, s->names[f], (int)i);
            }
        }
    if ((uint64_t)id_at != nids)
        return fail(out, err, errlen, "binary body: the bag lengths add up to %lld ids, num_ids is %llu",
                    (long long)id_at, (unsigned long long)nids);
    return 0;
}
