/*
 * text_parse.c: the schema made ready (text_plan) and one line parsed to
 * one sample (text_parse.h; the rules are docs/data.md's).
 *
 * Numbers are checked against a grammar before they are converted, so
 * what strtod would accept beyond it ("nan", "0x10", " 1", "1e") is a bad
 * line, as it is for the reference reader of the tests.  Keys are XXH64
 * of the value's bytes seeded by the feature's index, so a string and the
 * Criteo hex rule are one mechanism.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* keys of a few bytes: the call would cost more than the hash */
#include <xxhash.h>

#include "data/ctr_impl.h" /* ctr_fail */
#include "data/text_parse.h"

#define SHOW(n) ((int)((n) > 40 ? 40 : (n)))

int64_t text_key_hex(uint32_t v, int32_t f)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    return (int64_t)XXH64(b, 4, (XXH64_hash_t)f);
}

static int64_t key_int(int64_t v, int32_t f)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    return (int64_t)XXH64(b, 8, (XXH64_hash_t)f);
}


int text_plan_init(text_plan *p, const ctr_text_schema *sc, const char *who, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->label_col = -1;
    if (!sc || !sc->columns || sc->num_columns < 1 || sc->num_columns > CTR_MAX_COLUMNS)
        return ctr_fail(err, errlen, "%s: the schema needs 1 to %d columns", who, CTR_MAX_COLUMNS);
    if (sc->delimiter != ',' && sc->delimiter != '\t')
        return ctr_fail(err, errlen, "%s: the schema's separator must be ',' (csv) or a tab (tsv)", who);
    if (sc->max_line < 1 || sc->max_line > CTR_TEXT_MAX_LINE_LIMIT)
        return ctr_fail(err, errlen, "%s: max_line %d outside [1, %d]", who, (int)sc->max_line,
                    CTR_TEXT_MAX_LINE_LIMIT);
    const int32_t C = sc->num_columns;
    p->delimiter = sc->delimiter;
    p->label_optional = sc->label_optional;
    p->quoting = sc->delimiter == ',';
    p->header = sc->header;
    p->max_line = sc->max_line;
    p->num_columns = C;
    p->cols = malloc((size_t)C * sizeof *p->cols);
    p->col_field = malloc((size_t)C * sizeof(int32_t));
    p->col_out = malloc((size_t)C * sizeof(int32_t));
    if (!p->cols || !p->col_field || !p->col_out) {
        text_plan_free(p);
        return ctr_fail(err, errlen, "%s: out of memory", who);
    }
    memcpy(p->cols, sc->columns, (size_t)C * sizeof *p->cols);
    for (int32_t c = 0; c < C; c++) {
        const ctr_column *k = &p->cols[c];
        const char *nm = k->name;
        int rc = 0;
        if (!nm[0] || memchr(nm, '\0', sizeof k->name) == NULL)
            rc = ctr_fail(err, errlen, "%s: column %d: a name of 1 to 31 bytes is needed", who, (int)c);
        for (int32_t d = 0; !rc && d < c; d++)
            if (k->type != CTR_COL_IGNORE && !strcmp(p->cols[d].name, nm))
                rc = ctr_fail(err, errlen, "%s: column %d (%s): the name is used twice", who, (int)c, nm);
        if (!rc && ((unsigned)k->type > CTR_COL_MULTI_HOT))
            rc = ctr_fail(err, errlen, "%s: column %d (%s): unknown type", who, (int)c, nm);
        if (rc) {
            text_plan_free(p);
            return EMBER_EINVAL;
        }
        p->col_out[c] = -1;
        switch (k->type) {
        case CTR_COL_LABEL:
            if (p->label_col >= 0)
                rc = ctr_fail(err, errlen, "%s: columns %s and %s are both labels; one label is needed", who,
                          p->cols[p->label_col].name, nm);
            p->label_col = c;
            break;
        case CTR_COL_INT:
        case CTR_COL_FLOAT:
            if (k->transform == CTR_TF_CLIP && !(k->min <= k->max))
                rc = ctr_fail(err, errlen, "%s: column %s: clip needs min <= max", who, nm);
            if (k->transform == CTR_TF_STANDARDIZE && k->has_stats && !(k->std > 0 && isfinite(k->mean)))
                rc = ctr_fail(err, errlen, "%s: column %s: standardize needs std > 0", who, nm);
            p->col_out[c] = p->D++;
            break;
        case CTR_COL_CATEGORICAL:
        case CTR_COL_MULTI_HOT:
            if (k->rows < 0)
                rc = ctr_fail(err, errlen, "%s: column %s: rows %lld, must be >= 1 (or 0: 64-bit keys)", who, nm,
                          (long long)k->rows);
            if (k->type == CTR_COL_MULTI_HOT &&
                (k->separator == sc->delimiter || k->separator == '\0' || k->separator == '\n' ||
                 k->separator == '"' || (k->weighted && k->separator == ':')))
                rc = ctr_fail(err, errlen, "%s: column %s: separator '%c' cannot separate ids here", who, nm,
                          k->separator);
            if ((unsigned)k->encoding > CTR_ENC_HEX)
                rc = ctr_fail(err, errlen, "%s: column %s: unknown encoding", who, nm);
            if (k->type == CTR_COL_MULTI_HOT && k->weighted)
                p->any_weighted = 1;
            p->col_out[c] = p->S++;
            break;
        default:
            break;
        }
        if (rc) {
            text_plan_free(p);
            return EMBER_EINVAL;
        }
    }
    if (p->label_col < 0 || p->D > 4096 || p->S < 1 || p->S > CTR_MAX_FEATURES) {
        ctr_fail(err, errlen, p->label_col < 0 ? "%s: the schema has no label column" : p->D > 4096
                              ? "%s: the schema has more than 4096 int and float columns"
                              : "%s: the schema needs 1 to 64 categorical or multi_hot columns", who);
        text_plan_free(p);
        return EMBER_EINVAL;
    }
    if (!sc->header) { /* every column in order */
        p->nfields = C;
        p->field_col = malloc((size_t)C * sizeof(int32_t));
        if (!p->field_col) {
            text_plan_free(p);
            return ctr_fail(err, errlen, "%s: out of memory", who);
        }
        for (int32_t c = 0; c < C; c++) {
            p->col_field[c] = p->cols[c].type == CTR_COL_IGNORE ? -1 : c;
            p->field_col[c] = p->cols[c].type == CTR_COL_IGNORE ? -1 : c;
        }
        if (sc->expect)
            snprintf(p->expect, sizeof p->expect, "%s", sc->expect);
        else
            snprintf(p->expect, sizeof p->expect, "the schema's columns");
    }
    return 0;
}

int text_plan_drop_label(text_plan *p)
{
    const int32_t L = p->label_col;
    if (L < 0 || p->col_field[L] < 0)
        return 0;
    for (int32_t c = 0; c < p->num_columns; c++)
        if (p->col_field[c] > p->col_field[L])
            p->col_field[c]--;
    p->col_field[L] = -1;
    p->nfields--;
    for (int32_t k = 0; k < p->nfields; k++)
        p->field_col[k] = -1;
    for (int32_t c = 0; c < p->num_columns; c++)
        if (p->col_field[c] >= 0)
            p->field_col[p->col_field[c]] = c;
    p->unlabeled = 1;
    snprintf(p->expect, sizeof p->expect, "the schema's columns without the label");
    return 0;
}

void text_plan_free(text_plan *p)
{
    if (p->header_names)
        free(p->header_names[0]);
    free(p->header_names);
    free(p->cols);
    free(p->field_col);
    free(p->col_field);
    free(p->col_out);
    memset(p, 0, sizeof *p);
}

/* " (name)" of the column field k holds, for messages ("" before the
 * header is read, or for a field the schema ignores). */
static const char *field_label(const text_plan *p, int k)
{
    static _Thread_local char buf[48];
    if (!p->field_col || k >= p->nfields || p->field_col[k] < 0)
        return "";
    snprintf(buf, sizeof buf, " (%s)", p->cols[p->field_col[k]].name);
    return buf;
}

/* Splits line into fields (at most cap recorded; the count returned), CSV
 * quotes unescaped into scratch.  -1 with msg for a quoting error. */
static int split(const text_plan *p, const char *line, size_t len, char *scratch, const char **fs, size_t *fl,
                 int cap, char *msg, size_t msglen)
{
    const char *e = line + len, *q = line;
    char *out = scratch;
    int n = 0;
    for (;;) {
        const char *start = q, *end;
        size_t flen;
        if (p->quoting && q < e && *q == '"') {
            char *o = out;
            const char *r = q + 1;
            for (;;) {
                const char *qq = memchr(r, '"', (size_t)(e - r));
                if (!qq)
                    return ctr_fail(msg, msglen, "field %d%s: a quote is not closed", n, field_label(p, n));
                memcpy(o, r, (size_t)(qq - r));
                o += qq - r;
                if (qq + 1 < e && qq[1] == '"') {
                    *o++ = '"';
                    r = qq + 2;
                    continue;
                }
                end = qq + 1;
                break;
            }
            if (end < e && *end != p->delimiter)
                return ctr_fail(msg, msglen, "field %d%s: text after its closing quote", n, field_label(p, n));
            start = out;
            flen = (size_t)(o - out);
            out = o;
        } else {
            const char *d = memchr(q, p->delimiter, (size_t)(e - q));
            end = d ? d : e;
            flen = (size_t)(end - q);
        }
        if (n < cap) {
            fs[n] = start;
            fl[n] = flen;
        }
        n++;
        if (end >= e)
            break;
        q = end + 1; /* past the delimiter */
        if (q == e) { /* a trailing delimiter: one more, empty field */
            if (n < cap) {
                fs[n] = e;
                fl[n] = 0;
            }
            n++;
            break;
        }
    }
    return n;
}

int text_plan_header(text_plan *p, const char *line, size_t len, const char *who, char *err, size_t errlen)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    char *scratch = malloc(len + 1);
    int cap = CTR_MAX_COLUMNS * 4;
    const char **fs = malloc((size_t)cap * sizeof *fs);
    size_t *fl = malloc((size_t)cap * sizeof *fl);
    char msg[160];
    int rc = EMBER_EINVAL;
    if (!scratch || !fs || !fl) {
        ctr_fail(err, errlen, "%s: out of memory", who);
        goto out;
    }
    int n = split(p, line, len, scratch, fs, fl, cap, msg, sizeof msg);
    if (n < 0) {
        ctr_fail(err, errlen, "%s:1: header: %s", who, msg);
        goto out;
    }
    if (n > cap) {
        ctr_fail(err, errlen, "%s:1: header: %d fields, at most %d", who, n, cap);
        goto out;
    }
    p->nfields = n;
    p->field_col = malloc((size_t)n * sizeof(int32_t));
    if (!p->field_col) {
        ctr_fail(err, errlen, "%s: out of memory", who);
        goto out;
    }
    for (int k = 0; k < n; k++)
        p->field_col[k] = -1;
    for (int32_t c = 0; c < p->num_columns; c++) {
        p->col_field[c] = -1;
        if (p->cols[c].type == CTR_COL_IGNORE)
            continue;
        const char *nm = p->cols[c].name;
        size_t nl = strlen(nm);
        for (int k = 0; k < n; k++)
            if (fl[k] == nl && !memcmp(fs[k], nm, nl)) {
                if (p->field_col[k] < 0)
                    p->field_col[k] = c;
                p->col_field[c] = k;
                break;
            }
        if (p->col_field[c] < 0 && c == p->label_col && p->label_optional) {
            p->unlabeled = 1; /* a file to score, without labels */
            continue;
        }
        if (p->col_field[c] < 0) {
            ctr_fail(err, errlen, "%s:1: the header has no column named \"%s\" (the schema's column %d)", who, nm,
                 (int)c);
            goto out;
        }
    }
    size_t bytes = 0; /* the names, kept for ctr_source_text_fields */
    for (int k = 0; k < n; k++)
        bytes += fl[k] + 1;
    p->header_names = malloc(((size_t)n + 1) * sizeof *p->header_names);
    char *blob = malloc(bytes + 1);
    if (!p->header_names || !blob) {
        free(blob);
        free(p->header_names);
        p->header_names = NULL;
        ctr_fail(err, errlen, "%s: out of memory", who);
        goto out;
    }
    p->header_names[0] = blob; /* what text_plan_free frees */
    for (int k = 0; k < n; k++) {
        memcpy(blob, fs[k], fl[k]);
        blob[fl[k]] = '\0';
        p->header_names[k] = blob;
        blob += fl[k] + 1;
    }
    snprintf(p->expect, sizeof p->expect, "the header's columns");
    rc = 0;
out:
    free(scratch);
    free(fs);
    free(fl);
    return rc;
}

int text_ids_reserve(text_ids *t, int64_t n, int weighted)
{
    if (n <= t->cap && t->keys && (!weighted || t->w))
        return 0;
    int64_t cap = t->cap * 2 > n ? t->cap * 2 : n < 1024 ? 1024 : n;
    int64_t *k = realloc(t->keys, (size_t)cap * sizeof *k);
    if (!k)
        return EMBER_ENOMEM;
    t->keys = k;
    if (weighted) {
        float *w = realloc(t->w, (size_t)cap * sizeof *w);
        if (!w)
            return EMBER_ENOMEM;
        t->w = w;
    }
    t->cap = cap;
    return 0;
}

void text_ids_free(text_ids *t)
{
    free(t->keys);
    free(t->w);
    memset(t, 0, sizeof *t);
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Decimal integer with an optional sign in int64; EMBER_EINPUT otherwise. */
static int parse_int(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (n > 0 && (s[0] == '-' || s[0] == '+'))
        neg = s[i++] == '-';
    if (i == n)
        return EMBER_EINPUT;
    uint64_t v = 0, max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        if (!is_digit(s[i]))
            return EMBER_EINPUT;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (max - d) / 10)
            return EMBER_EINPUT;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* Design choice: an integer exported through a float column (pandas
 * writes an int column with missing values as 84.0) reads as the integer:
 * the digits before the point are parsed as an integer, never through a
 * double, so the value is exact; from 2^53 on the float it was printed from
 * may already have been rounded, and the field is refused.  Exponents
 * ("1e2") stay refused: a float prints one only beyond 1e16 or below 1e-4,
 * where it is not an exact integer either. */
int text_parse_int(const char *s, size_t n, int64_t *out)
{
    if (parse_int(s, n, out) == 0)
        return 0;
    const char *dot = memchr(s, '.', n);
    if (!dot || dot + 1 == s + n)
        return EMBER_EINPUT;
    for (const char *z = dot + 1; z < s + n; z++)
        if (*z != '0')
            return EMBER_EINPUT;
    int64_t v;
    if (parse_int(s, (size_t)(dot - s), &v))
        return EMBER_EINPUT;
    if (v >= (INT64_C(1) << 53) || v <= -(INT64_C(1) << 53)) /* 2^53 may be 2^53 + 1 rounded */
        return EMBER_ELIMIT;
    *out = v;
    return 0;
}

/* The message of an int text that text_parse_int refused (rc). */
static const char *not_int(int rc)
{
    return rc == EMBER_ELIMIT ? " (a point and zeros at 2^53 or beyond: the float it came from may be rounded)" : "";
}

static void set_why(text_why *why, text_bad_kind kind, int32_t col)
{
    if (why) {
        why->kind = kind;
        why->col = col;
    }
}

void text_bad_hint(const text_plan *p, const text_why *w, char *out, size_t len)
{
    const ctr_column *k = w->col >= 0 && w->col < p->num_columns ? &p->cols[w->col] : NULL;
    switch (w->kind) {
    case TEXT_BAD_NOT_INT:
        if (k && k->type == CTR_COL_INT)
            snprintf(out, len, "column %s holds numbers that are not integers: declare it type = \"float\" (an int "
                     "column reads 84 and 84.0, not 84.5)", k->name);
        else if (k)
            snprintf(out, len, "column %s holds ids that are not integers: encoding = \"string\" reads them as text",
                     k->name);
        else
            snprintf(out, len, "a value is not an integer");
        return;
    case TEXT_BAD_FIELDS:
        snprintf(out, len, "lines do not split into %s: check data.schema's format (csv or tsv), header and "
                 "columns against the file", p->expect);
        return;
    case TEXT_BAD_LABEL:
        snprintf(out, len, "column %s must hold 0 or 1: label = \"float\" reads numbers in [0, 1]",
                 k ? k->name : "label");
        return;
    default:
        snprintf(out, len, "fix the file or data.schema (docs/data.md, \"Values\")");
        return;
    }
}

/* [+-]?(d+(.d*)?|.d+)([eE][+-]?d+)? then strtod; EMBER_EINPUT: not one,
 * EMBER_ELIMIT: too big. */
static int parse_float(const char *s, size_t n, double *out)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    while (i < n && is_digit(s[i]))
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && is_digit(s[i]))
            i++, digits++;
    }
    if (digits == 0)
        return EMBER_EINPUT;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t ed = 0;
        while (i < n && is_digit(s[i]))
            i++, ed++;
        if (ed == 0)
            return EMBER_EINPUT;
    }
    if (i != n)
        return EMBER_EINPUT;
    char buf[512];
    if (n >= sizeof buf)
        return EMBER_EINPUT;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return EMBER_ELIMIT;
    *out = v;
    return 0;
}

/* A hexadecimal digit's value, 16 for any other byte: one load per digit. */
static const unsigned char HEX_DIGIT[256] = {
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
     0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 16, 16, 16, 16, 16, 16,
    16, 10, 11, 12, 13, 14, 15, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 10, 11, 12, 13, 14, 15, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
    16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
};

static int parse_hex(const char *s, size_t n, uint32_t *out)
{
    if (n < 1 || n > 8)
        return EMBER_EINPUT;
    uint32_t v = 0;
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = HEX_DIGIT[(unsigned char)s[i]];
        bad |= d & 16;
        v = v << 4 | (d & 15);
    }
    if (bad)
        return EMBER_EINPUT;
    *out = v;
    return 0;
}

/* The key of one id's text in feature f; -1 with msg (the value quoted). */
static int id_key(const ctr_column *k, int32_t f, const char *s, size_t n, int64_t *key, char *what, size_t wlen)
{
    switch (k->encoding) {
    case CTR_ENC_INT: {
        int64_t v;
        int rc = text_parse_int(s, n, &v);
        if (rc)
            return ctr_fail(what, wlen, "\"%.*s\" is not an integer%s", SHOW(n), s, not_int(rc));
        *key = key_int(v, f);
        return 0;
    }
    case CTR_ENC_HEX: {
        uint32_t v;
        if (parse_hex(s, n, &v))
            return ctr_fail(what, wlen, "\"%.*s\" is not hexadecimal%s", SHOW(n), s, n > 8 ? " of at most 8 digits" : "");
        *key = text_key_hex(v, f);
        return 0;
    }
    default:
        *key = (int64_t)XXH64(s, n, (XXH64_hash_t)f);
        return 0;
    }
}

/* A sparse column's bag into ids; -1 with msg. */
static int parse_bag(const ctr_column *k, int32_t f, const char *s, size_t n, int any_w, text_ids *ids,
                     int32_t *len, text_why *why, char *msg, size_t msglen)
{
    char what[120];
    *len = 0;
    if (n == 0)
        return 0;
    if (k->type == CTR_COL_CATEGORICAL) {
        if (text_ids_reserve(ids, ids->n + 1, any_w))
            return ctr_fail(msg, msglen, "out of memory");
        if (id_key(k, f, s, n, &ids->keys[ids->n], what, sizeof what)) {
            if (k->encoding == CTR_ENC_INT)
                set_why(why, TEXT_BAD_NOT_INT, -1);
            return ctr_fail(msg, msglen, "%s", what);
        }
        if (any_w)
            ids->w[ids->n] = 1.0f;
        ids->n++;
        *len = 1;
        return 0;
    }
    const char *e = s + n, *q = s;
    int32_t item = 0;
    for (;;) {
        const char *sep = memchr(q, k->separator, (size_t)(e - q));
        const char *ie = sep ? sep : e;
        size_t il = (size_t)(ie - q);
        item++;
        if (item > CTR_MAX_BAG_IDS)
            return ctr_fail(msg, msglen, "more than %d ids", CTR_MAX_BAG_IDS);
        if (il == 0)
            return ctr_fail(msg, msglen, "item %d is empty", (int)item);
        size_t idl = il;
        double wt = 1.0;
        if (k->weighted) {
            const char *colon = NULL;
            for (const char *c = ie; c > q; c--)
                if (c[-1] == ':') {
                    colon = c - 1;
                    break;
                }
            if (colon) {
                idl = (size_t)(colon - q);
                size_t wl = (size_t)(ie - colon - 1);
                int rc = parse_float(colon + 1, wl, &wt);
                if (rc)
                    return ctr_fail(msg, msglen, "item %d \"%.*s\": \"%.*s\" is not a weight%s", (int)item, SHOW(il), q, SHOW(wl), colon + 1, rc == EMBER_ELIMIT ? " (out of range)" : "");
                if (idl == 0)
                    return ctr_fail(msg, msglen, "item %d \"%.*s\" has no id before its weight", (int)item, SHOW(il), q);
            }
        }
        if (text_ids_reserve(ids, ids->n + 1, any_w))
            return ctr_fail(msg, msglen, "out of memory");
        if (id_key(k, f, q, idl, &ids->keys[ids->n], what, sizeof what)) {
            if (k->encoding == CTR_ENC_INT)
                set_why(why, TEXT_BAD_NOT_INT, -1);
            return ctr_fail(msg, msglen, "item %d: %s", (int)item, what);
        }
        if (any_w) {
            ids->w[ids->n] = (float)wt;
            if (!isfinite(ids->w[ids->n]))
                return ctr_fail(msg, msglen, "item %d \"%.*s\": the weight is out of range for a float",
                            (int)item, SHOW(il), q);
        }
        ids->n++;
        if (!sep)
            break;
        q = sep + 1;
    }
    *len = item;
    return 0;
}

static double transform(const ctr_column *k, double x)
{
    switch (k->transform) {
    case CTR_TF_LOG1P:
        return log1p(x > 0 ? x : 0);
    case CTR_TF_CLIP:
        return x < k->min ? k->min : x > k->max ? k->max : x;
    case CTR_TF_STANDARDIZE:
        return (x - k->mean) / k->std;
    default:
        return x;
    }
}

/* Where column c's value came from, for messages: "field K (name)" in a
 * file (its field K), `column "name"` in a row. */
static const char *where(const text_plan *p, int32_t c, int row, char *buf, size_t n)
{
    if (row)
        snprintf(buf, n, "column \"%s\"", p->cols[c].name);
    else
        snprintf(buf, n, "field %d (%s)", (int)p->col_field[c], p->cols[c].name);
    return buf;
}

int text_parse_fields(const text_plan *p, const char *const *fs, const size_t *fl, int row, text_sample *o,
                      text_ids *ids, char *msg, size_t msglen)
{
    const int64_t ids_before = ids->n;
    char at[64];
    set_why(o->why, TEXT_BAD_OTHER, -1);
    if (p->unlabeled)
        *o->label = 0.0f;
    int rc = EMBER_EINVAL;
    for (int32_t c = 0; c < p->num_columns; c++) {
        const ctr_column *k = &p->cols[c];
        int field = p->col_field[c];
        if (field < 0 || (row && k->type == CTR_COL_LABEL))
            continue;
        const char *s = fs[field];
        size_t sl = fl[field];
        if (!s) {
            ctr_fail(msg, msglen, "column \"%s\" is missing", k->name);
            goto out;
        }
        switch (k->type) {
        case CTR_COL_LABEL:
            if (!k->float_label) {
                if (!(sl == 1 && (s[0] == '0' || s[0] == '1'))) {
                    set_why(o->why, TEXT_BAD_LABEL, c);
                    ctr_fail(msg, msglen, "%s: \"%.*s\" is not 0 or 1", where(p, c, row, at, sizeof at), SHOW(sl), s);
                    goto out;
                }
                *o->label = s[0] == '1' ? 1.0f : 0.0f;
            } else {
                double v;
                if (parse_float(s, sl, &v) || v < 0 || v > 1) {
                    ctr_fail(msg, msglen, "%s: \"%.*s\" is not a number in [0, 1]", where(p, c, row, at, sizeof at),
                             SHOW(sl), s);
                    goto out;
                }
                *o->label = (float)v;
            }
            break;
        case CTR_COL_INT:
        case CTR_COL_FLOAT: {
            double x = 0;
            if (sl > 0) {
                if (k->type == CTR_COL_INT) {
                    int64_t v;
                    int r = text_parse_int(s, sl, &v);
                    if (r) {
                        set_why(o->why, TEXT_BAD_NOT_INT, c);
                        ctr_fail(msg, msglen, "%s: \"%.*s\" is not an integer%s", where(p, c, row, at, sizeof at),
                                 SHOW(sl), s, not_int(r));
                        goto out;
                    }
                    x = (double)v;
                } else {
                    int r = parse_float(s, sl, &x);
                    if (r) {
                        ctr_fail(msg, msglen, "%s: \"%.*s\" is not a number%s", where(p, c, row, at, sizeof at),
                                 SHOW(sl), s, r == EMBER_ELIMIT ? " (out of range)" : "");
                        goto out;
                    }
                }
            }
            int32_t d = p->col_out[c];
            if (o->raw)
                o->raw[d] = x;
            o->dense[d] = (float)transform(k, x);
            if (!isfinite(o->dense[d])) {
                ctr_fail(msg, msglen, "%s: \"%.*s\" is out of range for a float%s", where(p, c, row, at, sizeof at),
                         SHOW(sl), s, k->transform != CTR_TF_NONE ? " after its transform" : "");
                goto out;
            }
            break;
        }
        case CTR_COL_CATEGORICAL:
        case CTR_COL_MULTI_HOT: {
            int32_t f = p->col_out[c];
            char bag[200]; /* the message without its place, named only on failure */
            if (parse_bag(k, f, s, sl, p->any_weighted, ids, &o->lens[f], o->why, bag, sizeof bag)) {
                if (o->why && o->why->kind == TEXT_BAD_NOT_INT)
                    o->why->col = c;
                if (!strcmp(bag, "out of memory"))
                    ctr_fail(msg, msglen, "out of memory");
                else
                    ctr_fail(msg, msglen, "%s: %s", where(p, c, row, at, sizeof at), bag);
                goto out;
            }
            break;
        }
        default:
            break;
        }
    }
    rc = 0;
out:
    if (rc)
        ids->n = ids_before;
    return rc;
}

int text_split(const text_plan *p, const char *line, size_t len, char *scratch, const char **fs, size_t *fl, int cap,
               char *msg, size_t msglen)
{
    return split(p, line, len, scratch, fs, fl, cap, msg, msglen);
}

int text_parse_line(const text_plan *p, const char *line, size_t len, char *scratch, text_sample *o, text_ids *ids,
                    char *msg, size_t msglen)
{
    enum { FCAP = 256 };
    const char *fs_small[FCAP];
    size_t fl_small[FCAP];
    const char **fs = fs_small;
    size_t *fl = fl_small;
    set_why(o->why, TEXT_BAD_OTHER, -1);
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (memchr(line, '\0', len) != NULL)
        return ctr_fail(msg, msglen, "line holds a NUL byte");
    if (p->nfields > FCAP) {
        fs = malloc((size_t)p->nfields * sizeof *fs);
        fl = malloc((size_t)p->nfields * sizeof *fl);
        if (!fs || !fl) {
            free(fs);
            free(fl);
            return ctr_fail(msg, msglen, "out of memory");
        }
    }
    int rc = EMBER_EINVAL;
    int n = split(p, line, len, scratch, fs, fl, p->nfields, msg, msglen);
    if (n < 0)
        goto out;
    if (n != p->nfields) {
        set_why(o->why, TEXT_BAD_FIELDS, -1);
        ctr_fail(msg, msglen, "%d fields, expected %d (%s)", n, (int)p->nfields, p->expect);
        goto out;
    }
    rc = text_parse_fields(p, fs, fl, 0, o, ids, msg, msglen);
out:
    if (fs != fs_small) {
        free(fs);
        free(fl);
    }
    return rc;
}
