/*
 * input_schema.c: the "input_schema" member of the model description
 * (description.h; docs/inference.md, "The model description";
 * docs/design-model-input.md): how the training data's rows became samples,
 * so that a model can read the same rows itself.
 *
 *   {"version": 1, "source": "text" | "criteo_tsv" | "synthetic" | "binary",
 *    and for text and criteo_tsv:
 *    "format": "csv" | "tsv", "header": bool, "max_line": bytes,
 *    "hash": "xxh64-seed-feature",
 *    "columns": [{"name", "type": "ignore" | "label" | "int" | "float" |
 *                 "categorical" | "multi_hot",
 *                 label: "label": "binary" | "float",
 *                 int, float: "transform": "none" | "log1p" | "clip" |
 *                   "standardize", clip: "min", "max", standardize: "mean", "std",
 *                 categorical, multi_hot: "encoding": "string" | "int" | "hex",
 *                   "rows", multi_hot: "separator", "weights": bool}]}
 *
 * The columns are the schema's, in its order (with a header they are bound
 * to the header's fields by name, as in training).  Every standardize
 * column carries the mean and std training used, computed on the training
 * file or given, so an evaluation, a prediction and a served row are scaled
 * alike.  Doubles are written with 17 significant digits and read back bit
 * for bit.  The reader is strict: an unknown key at any level, a value out
 * of range or a schema that disagrees with the model's "input" is refused
 * by its path.  The version is the member's own: a model without the
 * member (written before it existed) still opens.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "data/text_parse.h"
#include "infer/description.h"

#define INPUT_SCHEMA_VERSION 1
#define HASH_RULE "xxh64-seed-feature" /* key = XXH64(field bytes, seed = sparse feature index) */

static const char *const source_names[] = {"none", "text", "criteo_tsv", "synthetic", "binary"};
static const char *const type_names[] = {"ignore", "label", "int", "float", "categorical", "multi_hot"};
static const char *const transform_names[] = {"none", "log1p", "clip", "standardize"};
static const char *const encoding_names[] = {"string", "int", "hex"};

static int is_sparse(ctr_col_type t) { return t == CTR_COL_CATEGORICAL || t == CTR_COL_MULTI_HOT; }
static int is_dense(ctr_col_type t) { return t == CTR_COL_INT || t == CTR_COL_FLOAT; }

/* Whether JSON holds every header field as the reader takes it back
 * (UTF-8, at most 255 bytes; an empty name, a pandas index column's, is
 * one): else none is recorded, rather than a list whose positions shift. */
static int fields_fit(const ctr_text_schema *sc)
{
    for (int32_t k = 0; k < sc->num_file_fields; k++) {
        json_t *nm = json_string(sc->file_fields[k]);
        int ok = nm != NULL && strlen(sc->file_fields[k]) <= 255;
        json_decref(nm);
        if (!ok)
            return 0;
    }
    return 1;
}

/* A copy of the training file's n header fields, in->schema pointing at
 * it: 0, or EMBER_ENOMEM (nothing kept). */
static int keep_fields(description_input *in, const char *const *names, int32_t n)
{
    size_t bytes = 1;
    for (int32_t k = 0; k < n; k++)
        bytes += strlen(names[k]) + 1;
    char *blob = malloc(bytes);
    in->fields = malloc(sizeof(char *) * ((size_t)n + 1));
    if (!blob || !in->fields) {
        free(blob);
        free(in->fields);
        in->fields = NULL;
        return EMBER_ENOMEM;
    }
    in->fields[0] = blob;
    for (int32_t k = 0; k < n; k++) {
        size_t l = strlen(names[k]);
        memcpy(blob, names[k], l + 1);
        in->fields[k] = blob;
        blob += l + 1;
    }
    in->schema.file_fields = (const char *const *)in->fields;
    in->schema.num_file_fields = n;
    return 0;
}

int description_input_set(description_input *in, description_source source, const ctr_text_schema *sc, char *err,
                          size_t errlen)
{
    description_input_free(in);
    in->source = source;
    if ((source == DESC_INPUT_TEXT || source == DESC_INPUT_CRITEO_TSV) && (!sc || sc->num_columns < 1))
        in->source = DESC_INPUT_NONE; /* nothing to record: not a source without columns */
    if (in->source != DESC_INPUT_TEXT && in->source != DESC_INPUT_CRITEO_TSV)
        return EMBER_OK;
    for (int32_t c = 0; c < sc->num_columns; c++) { /* JSON holds UTF-8 names and an ASCII separator only */
        json_t *nm = json_string(sc->columns[c].name);
        int ok = nm != NULL && (unsigned char)sc->columns[c].separator < 0x80;
        json_decref(nm);
        if (!ok) {
            in->source = DESC_INPUT_NONE; /* not recorded, rather than recorded wrong */
            return EMBER_OK;
        }
    }
    in->cols = malloc(sizeof(ctr_column) * ((size_t)sc->num_columns + 1));
    if (!in->cols) {
        snprintf(err, errlen, "model: out of memory for the input schema's %d columns", (int)sc->num_columns);
        return EMBER_ENOMEM;
    }
    memcpy(in->cols, sc->columns, sizeof(ctr_column) * (size_t)sc->num_columns);
    in->schema = *sc;
    in->schema.columns = in->cols;
    in->schema.expect = NULL;
    in->schema.label_optional = in->schema.header_optional = 0;
    in->schema.file_fields = NULL;
    in->schema.num_file_fields = 0;
    if (sc->header && sc->num_file_fields > 0 && fields_fit(sc) && keep_fields(in, sc->file_fields,
                                                                                 sc->num_file_fields) != 0) {
        snprintf(err, errlen, "model: out of memory for the training file's %d fields", (int)sc->num_file_fields);
        return EMBER_ENOMEM;
    }
    return EMBER_OK;
}

void description_input_free(description_input *in)
{
    free(in->cols);
    if (in->fields)
        free(in->fields[0]);
    free(in->fields);
    memset(in, 0, sizeof *in);
}

/* ---------------------------------------------------------------- write */

static json_t *column_json(const ctr_column *k)
{
    json_t *o = json_pack("{s:s, s:s}", "name", k->name, "type", type_names[k->type]);
    if (k->type == CTR_COL_LABEL)
        json_object_set_new(o, "label", json_string(k->float_label ? "float" : "binary"));
    if (is_dense(k->type)) {
        json_object_set_new(o, "transform", json_string(transform_names[k->transform]));
        if (k->transform == CTR_TF_CLIP) {
            json_object_set_new(o, "min", json_real(k->min));
            json_object_set_new(o, "max", json_real(k->max));
        } else if (k->transform == CTR_TF_STANDARDIZE) {
            json_object_set_new(o, "mean", json_real(k->mean));
            json_object_set_new(o, "std", json_real(k->std));
        }
    }
    if (is_sparse(k->type)) {
        json_object_set_new(o, "encoding", json_string(encoding_names[k->encoding]));
        json_object_set_new(o, "rows", json_integer(k->rows));
    }
    if (k->type == CTR_COL_MULTI_HOT) {
        char sep[2] = {k->separator, 0};
        json_object_set_new(o, "separator", json_string(sep));
        json_object_set_new(o, "weights", json_boolean(k->weighted));
    }
    return o;
}

json_t *description_input_json(const description_input *in)
{
    json_t *o = json_pack("{s:i, s:s}", "version", INPUT_SCHEMA_VERSION, "source", source_names[in->source]);
    if (in->source != DESC_INPUT_TEXT && in->source != DESC_INPUT_CRITEO_TSV)
        return o;
    const ctr_text_schema *sc = &in->schema;
    json_t *cols = json_array();
    for (int32_t c = 0; c < sc->num_columns; c++)
        json_array_append_new(cols, column_json(&sc->columns[c]));
    json_object_set_new(o, "format", json_string(sc->delimiter == '\t' ? "tsv" : "csv"));
    json_object_set_new(o, "header", json_boolean(sc->header));
    json_object_set_new(o, "max_line", json_integer(sc->max_line));
    json_object_set_new(o, "hash", json_string(HASH_RULE));
    json_object_set_new(o, "columns", cols);
    if (sc->num_file_fields > 0) { /* a headerless file to score holds these, in order */
        json_t *f = json_array();
        for (int32_t k = 0; k < sc->num_file_fields; k++)
            json_array_append_new(f, json_string(sc->file_fields[k]));
        json_object_set_new(o, "file_fields", f);
    }
    return o;
}

/* ----------------------------------------------------------------- read */

typedef struct rd {
    char *err;
    size_t len;
    int failed;
} rd;

static void fail(rd *r, const char *where, const char *key, const char *why)
{
    if (!r->failed)
        snprintf(r->err, r->len, "model.json: %s%s%s: %s", where, key ? "." : "", key ? key : "", why);
    r->failed = 1;
}

/* Refuses a key of o that is not in allowed (NULL-terminated). */
static void only_keys(rd *r, json_t *o, const char *where, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++)
            known = !strcmp(*a, key);
        if (!known)
            fail(r, where, key, "unknown field (written by a newer ember?)");
    }
}

static json_t *need(rd *r, json_t *o, const char *where, const char *key, json_type type)
{
    json_t *v = json_object_get(o, key);
    int ok = v && (json_typeof(v) == type || (type == JSON_REAL && json_is_integer(v)) ||
                   (type == JSON_TRUE && json_is_boolean(v)));
    if (!ok)
        fail(r, where, key, v ? "wrong type" : "missing");
    return r->failed ? NULL : v;
}

/* The index of v's string among names[0..n), or -1 after the message. */
static int name_of(rd *r, json_t *o, const char *where, const char *key, const char *const *names, int n)
{
    json_t *v = need(r, o, where, key, JSON_STRING);
    for (int i = 0; v && i < n; i++)
        if (!strcmp(json_string_value(v), names[i]))
            return i;
    if (v) {
        char why[160];
        snprintf(why, sizeof why, "\"%.40s\" is not one of the names this ember knows", json_string_value(v));
        fail(r, where, key, why);
    }
    return -1;
}

static double finite_real(rd *r, json_t *o, const char *where, const char *key)
{
    json_t *v = need(r, o, where, key, JSON_REAL);
    double x = v ? json_number_value(v) : 0;
    if (v && !isfinite(x))
        fail(r, where, key, "not finite");
    return x;
}

static void read_column(rd *r, json_t *o, int32_t c, ctr_column *k)
{
    static const char *const keys[] = {"name", "type", "label", "transform", "min", "max", "mean", "std",
                                       "encoding", "rows", "separator", "weights", NULL};
    char where[48];
    snprintf(where, sizeof where, "input_schema.columns[%d]", (int)c);
    memset(k, 0, sizeof *k);
    only_keys(r, o, where, keys);
    json_t *nm = need(r, o, where, "name", JSON_STRING);
    if (nm && strlen(json_string_value(nm)) >= sizeof k->name)
        fail(r, where, "name", "longer than 31 bytes");
    if (nm)
        snprintf(k->name, sizeof k->name, "%s", json_string_value(nm));
    int t = name_of(r, o, where, "type", type_names, 6);
    k->type = t < 0 ? CTR_COL_IGNORE : (ctr_col_type)t;
    if (k->type == CTR_COL_LABEL)
        k->float_label = name_of(r, o, where, "label", (const char *const[]){"binary", "float"}, 2) == 1;
    if (is_dense(k->type)) {
        int tf = name_of(r, o, where, "transform", transform_names, 4);
        k->transform = tf < 0 ? CTR_TF_NONE : (ctr_transform)tf;
        if (k->transform == CTR_TF_CLIP) {
            k->min = finite_real(r, o, where, "min");
            k->max = finite_real(r, o, where, "max");
            if (!r->failed && !(k->min <= k->max))
                fail(r, where, "min", "above max");
        } else if (k->transform == CTR_TF_STANDARDIZE) {
            k->mean = finite_real(r, o, where, "mean");
            k->std = finite_real(r, o, where, "std");
            k->has_stats = 1;
            if (!r->failed && !(k->std > 0))
                fail(r, where, "std", "must be above 0");
        }
    }
    if (is_sparse(k->type)) {
        int e = name_of(r, o, where, "encoding", encoding_names, 3);
        k->encoding = e < 0 ? CTR_ENC_STRING : (ctr_encoding)e;
        json_t *rows = need(r, o, where, "rows", JSON_INTEGER);
        k->rows = rows ? (int64_t)json_integer_value(rows) : 0;
        if (rows && k->rows < 0)
            fail(r, where, "rows", "negative");
    }
    if (k->type == CTR_COL_MULTI_HOT) {
        json_t *s = need(r, o, where, "separator", JSON_STRING);
        if (s && strlen(json_string_value(s)) != 1)
            fail(r, where, "separator", "must be one byte");
        k->separator = s ? json_string_value(s)[0] : 0;
        json_t *w = need(r, o, where, "weights", JSON_TRUE);
        k->weighted = w && json_is_true(w);
    }
}

/* The columns against the model's "input": as many dense and sparse
 * columns, and each sparse one with that feature's rows and name. */
static void check_input(rd *r, const description_input *in, const ctr_schema *input)
{
    int32_t d = 0, f = 0;
    for (int32_t c = 0; c < in->schema.num_columns && !r->failed; c++) {
        const ctr_column *k = &in->cols[c];
        d += is_dense(k->type);
        if (!is_sparse(k->type))
            continue;
        char where[48], why[200];
        snprintf(where, sizeof where, "input_schema.columns[%d]", (int)c);
        if (f < input->num_sparse && k->rows != input->rows[f]) {
            snprintf(why, sizeof why, "%lld, but input.rows[%d] is %lld", (long long)k->rows, (int)f,
                     (long long)input->rows[f]);
            fail(r, where, "rows", why);
        } else if (f < input->num_sparse && strcmp(k->name, input->names[f])) {
            snprintf(why, sizeof why, "\"%s\", but input.names[%d] is \"%s\"", k->name, (int)f, input->names[f]);
            fail(r, where, "name", why);
        }
        f++;
    }
    char why[160];
    if (!r->failed && (d != input->num_dense || f != input->num_sparse)) {
        snprintf(why, sizeof why, "%d dense and %d sparse columns, but input has %d and %d", (int)d, (int)f,
                 (int)input->num_dense, (int)input->num_sparse);
        fail(r, "input_schema", "columns", why);
    }
}

/* "file_fields": the training file's header, each a name of 1 to 255
 * bytes; with header only; every column the schema reads among them. */
static void read_fields(rd *r, json_t *o, description_input *in)
{
    json_t *f = json_object_get(o, "file_fields");
    if (!f)
        return;
    size_t n = json_array_size(f);
    if (!json_is_array(f) || n < 1 || n > 4 * CTR_MAX_COLUMNS || !in->schema.header) {
        fail(r, "input_schema", "file_fields", !in->schema.header ? "given without a header"
                                                                  : "must be an array of 1 to 32768 names");
        return;
    }
    const char **names = malloc(sizeof(char *) * n);
    for (size_t k = 0; names && k < n && !r->failed; k++) {
        json_t *v = json_array_get(f, k);
        size_t l = json_is_string(v) ? json_string_length(v) : 0;
        names[k] = json_string_value(v);
        if (!names[k] || l > 255 || strlen(names[k]) != l)
            fail(r, "input_schema", "file_fields", "each field is a name of at most 255 bytes");
    }
    for (int32_t c = 0; names && !r->failed && c < in->schema.num_columns; c++) {
        const ctr_column *k = &in->schema.columns[c];
        size_t i = 0;
        while (k->type != CTR_COL_IGNORE && i < n && strcmp(names[i], k->name))
            i++;
        if (k->type != CTR_COL_IGNORE && i == n)
            fail(r, "input_schema", "file_fields", "a column the schema reads is not among them");
    }
    if (!names)
        fail(r, "input_schema", "file_fields", "out of memory");
    else if (!r->failed && keep_fields(in, names, (int32_t)n) != 0)
        fail(r, "input_schema", "file_fields", "out of memory");
    free(names);
}

int description_input_read(json_t *o, const ctr_schema *input, description_input *in, char *err, size_t errlen)
{
    static const char *const keys[] = {"version", "source", "format", "header", "max_line", "hash", "columns",
                                       "file_fields", NULL};
    rd r = {err, errlen, 0};
    memset(in, 0, sizeof *in);
    if (!json_is_object(o)) {
        fail(&r, "input_schema", NULL, "not an object");
        return EMBER_EINVAL;
    }
    json_t *v = need(&r, o, "input_schema", "version", JSON_INTEGER);
    if (v && json_integer_value(v) != INPUT_SCHEMA_VERSION) {
        char why[96];
        snprintf(why, sizeof why, "%lld: this ember reads %d", (long long)json_integer_value(v), INPUT_SCHEMA_VERSION);
        fail(&r, "input_schema", "version", why);
    }
    only_keys(&r, o, "input_schema", keys);
    int s = name_of(&r, o, "input_schema", "source", source_names + 1, 4);
    if (r.failed)
        return EMBER_EINVAL;
    in->source = (description_source)(s + 1);
    if (in->source != DESC_INPUT_TEXT && in->source != DESC_INPUT_CRITEO_TSV)
        return EMBER_OK;
    int fmt = name_of(&r, o, "input_schema", "format", (const char *const[]){"csv", "tsv"}, 2);
    json_t *h = need(&r, o, "input_schema", "header", JSON_TRUE);
    json_t *ml = need(&r, o, "input_schema", "max_line", JSON_INTEGER);
    if (ml && (json_integer_value(ml) < 1 || json_integer_value(ml) > CTR_TEXT_MAX_LINE_LIMIT))
        fail(&r, "input_schema", "max_line", "outside [1, 64 MiB]");
    json_t *hash = need(&r, o, "input_schema", "hash", JSON_STRING);
    if (hash && strcmp(json_string_value(hash), HASH_RULE))
        fail(&r, "input_schema", "hash", "a rule this ember does not know");
    json_t *cols = need(&r, o, "input_schema", "columns", JSON_ARRAY);
    int32_t n = cols ? (int32_t)json_array_size(cols) : 0;
    if (cols && (n < 1 || n > CTR_MAX_COLUMNS))
        fail(&r, "input_schema", "columns", "must hold 1 to 8192 columns");
    if (r.failed)
        return EMBER_EINVAL;
    if (!(in->cols = calloc((size_t)n, sizeof *in->cols))) {
        snprintf(err, errlen, "model.json: input_schema: out of memory for %d columns", (int)n);
        return EMBER_ENOMEM;
    }
    for (int32_t c = 0; c < n && !r.failed; c++)
        read_column(&r, json_array_get(cols, (size_t)c), c, &in->cols[c]);
    in->schema = (ctr_text_schema){fmt == 1 ? '\t' : ',', json_is_true(h), (int32_t)json_integer_value(ml), n,
                                   in->cols, NULL, 0, 0, NULL, 0};
    if (!r.failed)
        check_input(&r, in, input);
    if (!r.failed)
        read_fields(&r, o, in);
    text_plan p; /* and what a config's schema must be: one label, a feature, names once */
    char why[400];
    if (!r.failed && text_plan_init(&p, &in->schema, "model.json: input_schema", why, sizeof why) != 0)
        snprintf(err, errlen, "%s", why), r.failed = 1;
    else if (!r.failed)
        text_plan_free(&p);
    if (r.failed) {
        description_input_free(in);
        return EMBER_EINVAL;
    }
    return EMBER_OK;
}
