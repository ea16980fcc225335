/*
 * request_rows.c: raw rows to a batch, by the model's input schema
 * (request.h; docs/inference.md, "Raw rows").
 *
 * Every value becomes the text a training file would hold and goes
 * through text_parse_fields, the function that parsed the training file:
 * the same number grammar, hashing, transforms and `key mod rows`
 * (text_id), so a row scores exactly as the same line of the file did in
 * the trainer's evaluation.  A JSON string is its bytes, an integer its
 * decimal digits, a real its %.17g digits (strtod reads them back as the
 * same double), null the empty field, an array a multi_hot column's items
 * joined by its separator.  Rows are parsed one after another into a
 * sample-major staging area, then laid out feature-major as ember_batch
 * wants them.  A request is decoded whole or refused whole.  Keys that
 * name no column are not read, as a file's unlisted header fields are
 * not: a client may send a whole record (ids, the label, extra fields); a
 * misspelt column is still caught, as the missing one.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/text_parse.h"
#include "serve/request.h"

/* The samples decoded so far, sample by sample. */
typedef struct staged {
    int32_t n, cap;
    float *dense;    /* [cap][D]                          */
    int32_t *lens;   /* [cap][S]                          */
    text_ids ids;    /* keys, sample after sample         */
    char *text;      /* one JSON row's values as text     */
    size_t tlen, tcap;
} staged;

static void staged_free(staged *g)
{
    free(g->dense);
    free(g->lens);
    free(g->text);
    text_ids_free(&g->ids);
}

static int fail_rows(staged *g, serve_batch *out, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail_rows(staged *g, serve_batch *out, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    staged_free(g);
    serve_batch_free(out);
    return EMBER_EINPUT;
}

static int no_memory(staged *g, serve_batch *out, char *err, size_t errlen)
{
    fail_rows(g, out, err, errlen, "out of memory decoding the rows");
    return EMBER_ENOMEM;
}

/* Room for one more sample; 0 or EMBER_ENOMEM. */
static int stage_grow(const text_plan *p, staged *g)
{
    if (g->n < g->cap)
        return 0;
    int32_t cap = g->cap ? g->cap * 2 : 64;
    float *d = realloc(g->dense, (size_t)cap * (size_t)(p->D ? p->D : 1) * sizeof *d);
    if (d)
        g->dense = d;
    int32_t *l = realloc(g->lens, (size_t)cap * (size_t)p->S * sizeof *l);
    if (l)
        g->lens = l;
    if (!d || !l)
        return EMBER_ENOMEM;
    g->cap = cap;
    return 0;
}

/* One row's fields (fs, fl by column: the plan is positional) staged;
 * `what` k ("row", 3: "row 3"; "line", 4) names it in a message. */
static int stage_row(const text_plan *p, staged *g, const char *const *fs, const size_t *fl, const char *what,
                     int64_t k, serve_batch *out, char *err, size_t errlen)
{
    if (stage_grow(p, g))
        return no_memory(g, out, err, errlen);
    float label;
    text_sample o = {&label, g->dense + (int64_t)g->n * p->D, NULL, g->lens + (int64_t)g->n * p->S, NULL};
    char msg[300];
    if (text_parse_fields(p, fs, fl, 1, &o, &g->ids, msg, sizeof msg)) {
        if (!strcmp(msg, "out of memory"))
            return no_memory(g, out, err, errlen);
        return fail_rows(g, out, err, errlen, "%s %lld, %s", what, (long long)k, msg);
    }
    g->n++;
    return 0;
}

/* The staged samples laid out feature-major in out, ids checked against
 * the tables' rows. */
static int stage_finish(const serve_shape *s, staged *g, serve_batch *out, char *err, size_t errlen)
{
    const text_plan *p = s->plan;
    const int32_t n = g->n, S = p->S;
    out->n = n;
    out->num_ids = g->ids.n;
    out->dense = malloc((size_t)n * (size_t)p->D * sizeof(float) + 1);
    out->lengths = malloc((size_t)n * (size_t)S * sizeof(int32_t) + 1);
    out->ids = malloc((size_t)g->ids.n * sizeof(int64_t) + 1);
    out->weights = p->any_weighted ? malloc((size_t)g->ids.n * sizeof(float) + 1) : NULL;
    int64_t *first = malloc(((size_t)S + 1) * sizeof *first);
    if (!out->dense || !out->lengths || !out->ids || (p->any_weighted && !out->weights) || !first) {
        free(first);
        return no_memory(g, out, err, errlen);
    }
    if (n)
        memcpy(out->dense, g->dense, (size_t)n * (size_t)p->D * sizeof(float));
    int64_t rows[CTR_MAX_FEATURES];
    for (int32_t c = 0; c < p->num_columns; c++)
        if (p->cols[c].type == CTR_COL_CATEGORICAL || p->cols[c].type == CTR_COL_MULTI_HOT)
            rows[p->col_out[c]] = p->cols[c].rows;
    /* feature f's ids start after every earlier feature's: first[f] */
    for (int32_t f = 0; f <= S; f++)
        first[f] = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t f = 0; f < S; f++)
            first[f + 1] += g->lens[(int64_t)i * S + f];
    for (int32_t f = 0; f < S; f++)
        first[f + 1] += first[f];
    int64_t at = 0; /* the staged keys, sample by sample, feature by feature */
    for (int32_t i = 0; i < n; i++)
        for (int32_t f = 0; f < S; f++) {
            const int32_t len = g->lens[(int64_t)i * S + f];
            out->lengths[(int64_t)f * n + i] = len;
            for (int32_t j = 0; j < len; j++, at++) {
                int64_t id = text_id(g->ids.keys[at], rows[f]), to = first[f]++;
                if (s->rows[f] > 0 && (id < 0 || id >= s->rows[f])) {
                    free(first);
                    return fail_rows(g, out, err, errlen, "row %d, feature \"%s\": id %lld outside the table's "
                                     "[0, %lld): the model's input schema and its tables disagree", (int)i,
                                     s->names[f], (long long)id, (long long)s->rows[f]);
                }
                out->ids[to] = id;
                if (out->weights)
                    out->weights[to] = g->ids.w[at];
            }
        }
    free(first);
    staged_free(g);
    return 0;
}

static int no_schema(const serve_shape *s, serve_batch *out, char *err, size_t errlen)
{
    snprintf(err, errlen, "raw rows need the model's input schema: %s", s->no_plan ? s->no_plan : "it has none");
    serve_batch_free(out);
    return EMBER_EINPUT;
}

/* ------------------------------------------------------------ JSON rows */

/* Appends n bytes to the row's text; 0 or EMBER_ENOMEM. */
static int put(staged *g, const char *s, size_t n)
{
    if (g->tlen + n + 1 > g->tcap) {
        size_t cap = g->tcap * 2 > g->tlen + n + 1 ? g->tcap * 2 : g->tlen + n + 64;
        char *t = realloc(g->text, cap);
        if (!t)
            return EMBER_ENOMEM;
        g->text = t;
        g->tcap = cap;
    }
    memcpy(g->text + g->tlen, s, n);
    g->tlen += n;
    return 0;
}

/* One scalar as the text a file would hold: 0, EMBER_ENOMEM, or
 * EMBER_EINPUT with why. */
static int scalar_text(const ctr_column *k, json_t *v, staged *g, const char **why)
{
    char num[40];
    int n;
    switch (json_typeof(v)) {
    case JSON_STRING: {
        const char *t = json_string_value(v);
        size_t len = json_string_length(v);
        if (memchr(t, '\0', len) || memchr(t, '\n', len) || memchr(t, '\r', len)) {
            *why = "holds a NUL or a line break, which no line of a file can";
            return EMBER_EINPUT;
        }
        return put(g, t, len);
    }
    case JSON_INTEGER:
        n = snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        return put(g, num, (size_t)n);
    case JSON_REAL:
        if ((k->type == CTR_COL_CATEGORICAL || k->type == CTR_COL_MULTI_HOT) && k->encoding != CTR_ENC_INT) {
            *why = "is a real number: send the id as the file writes it, as a string";
            return EMBER_EINPUT;
        }
        n = snprintf(num, sizeof num, "%.17g", json_real_value(v));
        return put(g, num, (size_t)n);
    case JSON_NULL:
        return 0;
    default:
        *why = "must be a string, a number or null";
        return EMBER_EINPUT;
    }
}

/* Column k's value v appended to the row's text. */
static int value_text(const ctr_column *k, json_t *v, staged *g, const char **why)
{
    if (!json_is_array(v))
        return scalar_text(k, v, g, why);
    if (k->type != CTR_COL_MULTI_HOT) {
        *why = "is an array: only a multi_hot column takes one";
        return EMBER_EINPUT;
    }
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) {
        if (!json_is_string(item) && !json_is_integer(item)) {
            *why = "has an item that is not a string or an integer";
            return EMBER_EINPUT;
        }
        if (i > 0 && put(g, &k->separator, 1))
            return EMBER_ENOMEM;
        size_t at = g->tlen;
        int rc = scalar_text(k, item, g, why);
        if (rc)
            return rc;
        if (g->tlen == at || memchr(g->text + at, k->separator, g->tlen - at)) {
            *why = g->tlen == at ? "has an empty item" : "has an item holding the column's separator";
            return EMBER_EINPUT;
        }
    }
    return 0;
}

int serve_decode_rows(const serve_shape *s, json_t *rows, serve_batch *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!s->plan)
        return no_schema(s, out, err, errlen);
    const text_plan *p = s->plan;
    if (!json_is_array(rows))
        return fail_rows(&(staged){0}, out, err, errlen, "\"rows\": expected an array with an object per row");
    if (json_array_size(rows) > (size_t)s->max_samples)
        return fail_rows(&(staged){0}, out, err, errlen, "\"rows\": %zu rows, more than one request may hold (%d)",
                         json_array_size(rows), (int)s->max_samples);
    const int32_t C = p->num_columns;
    staged g = {0};
    const char **fs = calloc((size_t)C, sizeof *fs);
    size_t *fl = calloc((size_t)C, sizeof *fl), *off = calloc((size_t)C, sizeof *off);
    int rc = 0;
    if (!fs || !fl || !off) {
        rc = no_memory(&g, out, err, errlen);
        goto done;
    }
    size_t r;
    json_t *row;
    json_array_foreach(rows, r, row) {
        if (!json_is_object(row)) {
            rc = fail_rows(&g, out, err, errlen, "row %zu: expected an object with a value per column", r);
            goto done;
        }
        g.tlen = 0;
        for (int32_t c = 0; c < C; c++) {
            const ctr_column *k = &p->cols[c];
            json_t *v = json_object_get(row, k->name);
            fs[c] = NULL;
            if (!v)
                continue;
            if (k->type == CTR_COL_IGNORE || k->type == CTR_COL_LABEL)
                continue;
            const char *why = NULL;
            off[c] = g.tlen;
            int vr = value_text(k, v, &g, &why);
            if (vr == EMBER_ENOMEM) {
                rc = no_memory(&g, out, err, errlen);
                goto done;
            }
            if (vr) {
                rc = fail_rows(&g, out, err, errlen, "row %zu, column \"%s\": the value %s", r, k->name, why);
                goto done;
            }
            fs[c] = "";  /* present; pointed into the text below */
            fl[c] = g.tlen - off[c];
        }
        for (int32_t c = 0; c < C; c++)
            if (fs[c])
                fs[c] = g.text ? g.text + off[c] : "";
        if ((rc = stage_row(p, &g, fs, fl, "row", (int64_t)r, out, err, errlen)))
            goto done;
    }
    rc = stage_finish(s, &g, out, err, errlen);
done:
    free(fs);
    free(fl);
    free(off);
    return rc;
}

/* ------------------------------------------------------- CSV, TSV bodies */

/* Whether a first line of n fields is a header: every field a name the
 * model knows, and every column a row needs among them. */
static int is_header(const serve_shape *s, const char *const *fs, const size_t *fl, int n, int32_t *field_of)
{
    const text_plan *p = s->plan;
    for (int i = 0; i < n; i++) { /* every field a name (a column's, or the training file's): a data row is not */
        int known = 0;
        for (int32_t c = 0; c < p->num_columns && !known; c++)
            known = fl[i] == strlen(p->cols[c].name) && !memcmp(fs[i], p->cols[c].name, fl[i]);
        for (int32_t k = 0; k < s->num_file_fields && !known; k++)
            known = fl[i] == strlen(s->file_fields[k]) && !memcmp(fs[i], s->file_fields[k], fl[i]);
        if (!known)
            return 0;
    }
    for (int32_t c = 0; c < p->num_columns; c++) {
        field_of[c] = -1;
        const ctr_column *k = &p->cols[c];
        size_t nl = strlen(k->name);
        for (int i = 0; i < n; i++)
            if (fl[i] == nl && !memcmp(fs[i], k->name, nl)) {
                field_of[c] = i;
                break;
            }
        if (field_of[c] < 0 && k->type != CTR_COL_IGNORE && k->type != CTR_COL_LABEL)
            return 0;
    }
    return 1;
}

/* A line of k fields without a header, as the training file's fields
 * (all, or all but the label's): each column's field in field_of.  0 when
 * k is neither. */
static int by_file_fields(const serve_shape *s, int k, int32_t *field_of)
{
    const text_plan *p = s->plan;
    const int32_t N = s->num_file_fields;
    int32_t li = -1;
    for (int32_t i = 0; p->label_col >= 0 && i < N && li < 0; i++)
        if (!strcmp(s->file_fields[i], p->cols[p->label_col].name))
            li = i;
    const int drop = k == N - 1 && li >= 0;
    if (N == 0 || (k != N && !drop))
        return 0;
    for (int32_t c = 0; c < p->num_columns; c++) {
        int32_t i = 0;
        while (i < N && strcmp(s->file_fields[i], p->cols[c].name))
            i++;
        field_of[c] = i == N || p->cols[c].type == CTR_COL_IGNORE || (drop && i == li) ? -1
                      : drop && i > li ? i - 1 : i;
    }
    return 1;
}

int serve_decode_text(const serve_shape *s, const char *body, size_t n, char delimiter, serve_batch *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!s->plan)
        return no_schema(s, out, err, errlen);
    const text_plan *p = s->plan;
    if (delimiter != p->delimiter)
        return fail_rows(&(staged){0}, out, err, errlen, "the body is %s but the model was trained on %s: send "
                         "Content-Type %s", delimiter == ',' ? "CSV" : "TSV", p->delimiter == ',' ? "CSV" : "TSV",
                         p->delimiter == ',' ? "text/csv" : "text/tab-separated-values");
    const int32_t C = p->num_columns;
    const int cap = C + 1 > 4 * CTR_MAX_COLUMNS ? C + 1 : 4 * CTR_MAX_COLUMNS;
    staged g = {0};
    const char **fs = malloc((size_t)cap * sizeof *fs), **col = malloc((size_t)C * sizeof *col);
    size_t *fl = malloc((size_t)cap * sizeof *fl), *cl = malloc((size_t)C * sizeof *cl);
    int32_t *field_of = malloc((size_t)C * sizeof *field_of);
    char *scratch = malloc((size_t)p->max_line + 1);
    int rc = 0, header = -1, nfields = 0;
    if (!fs || !col || !fl || !cl || !field_of || !scratch) {
        rc = no_memory(&g, out, err, errlen);
        goto done;
    }
    const char *at = body, *end = body + n;
    for (int64_t line = 1; at < end; line++) {
        const char *nl = memchr(at, '\n', (size_t)(end - at));
        const char *e = nl ? nl : end;
        size_t len = (size_t)(e - at);
        const char *text = at;
        at = nl ? nl + 1 : end;
        if (len > 0 && text[len - 1] == '\r')
            len--;
        if (line == 1 && len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
            text += 3, len -= 3;
        if (len == 0)
            continue; /* a blank line, or the end of the last one: no row */
        if (len > (size_t)p->max_line || memchr(text, '\0', len)) {
            rc = fail_rows(&g, out, err, errlen, "line %lld: %s", (long long)line, len > (size_t)p->max_line
                           ? "longer than the model's max_line" : "holds a NUL byte");
            goto done;
        }
        char msg[300];
        int k = text_split(p, text, len, scratch, fs, fl, cap, msg, sizeof msg);
        if (k < 0 || k > cap) {
            rc = fail_rows(&g, out, err, errlen, "line %lld: %s", (long long)line, k < 0 ? msg : "too many fields");
            goto done;
        }
        if (header < 0) { /* the first line: a header, or the first row */
            header = is_header(s, fs, fl, k, field_of);
            nfields = k;
            if (!header && !by_file_fields(s, k, field_of)) {
                int with_label = k == C;
                if (s->num_file_fields > 0 || (k != C && !(p->label_col >= 0 && k == C - 1))) {
                    int32_t want = s->num_file_fields > 0 ? s->num_file_fields : C;
                    rc = fail_rows(&g, out, err, errlen, "line %lld: %d fields; a row without a header has the %s's "
                                   "%d fields (or %d without the label), in order (GET /model)", (long long)line, k,
                                   s->num_file_fields > 0 ? "training file" : "model's schema", (int)want, (int)want - 1);
                    goto done;
                }
                for (int32_t c = 0, i = 0; c < C; c++)
                    field_of[c] = !with_label && c == p->label_col ? -1 : i++;
            }
            if (header)
                continue;
        }
        if (k != nfields) {
            rc = fail_rows(&g, out, err, errlen, "line %lld: %d fields, expected %d like line 1", (long long)line, k,
                           nfields);
            goto done;
        }
        if (g.n >= s->max_samples) {
            rc = fail_rows(&g, out, err, errlen, "more than %d rows, what one request may hold", (int)s->max_samples);
            goto done;
        }
        for (int32_t c = 0; c < C; c++) {
            col[c] = field_of[c] >= 0 ? fs[field_of[c]] : NULL;
            cl[c] = field_of[c] >= 0 ? fl[field_of[c]] : 0;
        }
        if ((rc = stage_row(p, &g, col, cl, "line", line, out, err, errlen)))
            goto done;
    }
    rc = stage_finish(s, &g, out, err, errlen);
done:
    free(fs);
    free(col);
    free(fl);
    free(cl);
    free(field_of);
    free(scratch);
    return rc;
}
