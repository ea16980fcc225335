/*
 * text_parse.h: one line of a text data file to one sample, by a schema
 * (docs/data.md), shared by the text source (ctr_text.c) and its threads.
 *
 * A text_plan is the schema made ready to parse: which column each field
 * of a line is (with a header, found by name), where each column's value
 * goes (dense index, sparse feature), the resolved standardize statistics
 * and the wrong-count message.  text_parse_line is pure: it reads the
 * plan and writes only its outputs, so threads parse lines at once.
 */
#ifndef EMBER_DATA_TEXT_PARSE_H
#define EMBER_DATA_TEXT_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "data/ctr.h"

typedef struct text_plan {
    char delimiter;
    int quoting;                /* csv                                      */
    int header;
    int32_t max_line;
    int32_t num_columns;
    ctr_column *cols;           /* owned copy                               */
    int32_t nfields;            /* fields a line must have                  */
    int32_t *field_col;         /* [nfields] column, or -1: ignored         */
    int32_t *col_field;         /* [num_columns] field, or -1 (ignore type) */
    int32_t *col_out;           /* [num_columns] dense index or feature     */
    int32_t D, S, label_col;
    int any_weighted;
    int label_optional;         /* the schema's                              */
    int unlabeled;              /* the file has no label field: labels read 0 */
    char **header_names;        /* text_plan_header's fields, [nfields]      */
    char expect[160];
} text_plan;

/* The plan of a schema; header: the header line's fields (NULL without).
 * 0, or -1 with err (prefixed by who). */
int text_plan_init(text_plan *p, const ctr_text_schema *sc, const char *who, char *err, size_t errlen);
int text_plan_header(text_plan *p, const char *line, size_t len, const char *who, char *err, size_t errlen);
void text_plan_free(text_plan *p);
/* Lines without the label's field (their first has one field fewer): its
 * field is gone, every later field moves down by one, labels read 0.  0,
 * or EMBER_ENOMEM. */
int text_plan_drop_label(text_plan *p);

/* Growable keys (and weights) of parsed lines. */
typedef struct text_ids {
    int64_t *keys;              /* 64-bit keys, before `mod rows`           */
    float *w;                   /* weights (with any weighted feature)      */
    int64_t n, cap;
} text_ids;

/* Room for n keys (and weights when weighted); 0, or EMBER_ENOMEM. */
int text_ids_reserve(text_ids *t, int64_t n, int weighted);
void text_ids_free(text_ids *t);

/* Why a line was bad, for the advice of a bad-line limit (text_bad_hint):
 * the kinds that have a fix to suggest, and the column at fault. */
typedef enum text_bad_kind {
    TEXT_BAD_OTHER = 0,
    TEXT_BAD_FIELDS,            /* the wrong number of fields, a quote       */
    TEXT_BAD_NOT_INT,           /* an int column or id holds a non-integer   */
    TEXT_BAD_LABEL              /* a binary label that is not 0 or 1         */
} text_bad_kind;
typedef struct text_why {
    text_bad_kind kind;
    int32_t col;                /* the schema's column, -1 for none          */
} text_why;

/* One parsed sample's outputs. */
typedef struct text_sample {
    float *label;               /* [1]                                      */
    float *dense;               /* [D], transformed                         */
    double *raw;                /* NULL, or [D]: values before the transform */
    int32_t *lens;              /* [S]                                      */
    text_why *why;              /* NULL, or set when the line is bad         */
} text_sample;

/* Parses line (len bytes, no '\n') into o, appending its keys to ids;
 * scratch holds max_line + 1 bytes.  0, or -1 with msg (no FILE:LINE:
 * prefix; "out of memory" on allocation failure); ids->n is then as
 * before. */
int text_parse_line(const text_plan *p, const char *line, size_t len, char *scratch, text_sample *o,
                    text_ids *ids, char *msg, size_t msglen);

/* The fields of one sample, indexed like a line's (p->col_field maps a
 * column to its field), parsed into o with keys appended to ids.  A NULL
 * field is a missing column (an error naming it).  row 0: a file's line,
 * messages name "field K (name)"; row 1: a row from a client (serve, the
 * Python rows), messages name `column "name"` and the label column is
 * not read.  0, or -1 with msg; ids->n is then as before.  text_parse_line
 * is text_split, a field count check and this. */
int text_parse_fields(const text_plan *p, const char *const *fs, const size_t *fl, int row, text_sample *o,
                      text_ids *ids, char *msg, size_t msglen);

/* Splits line (no '\n', no '\r') into fields by p's delimiter, CSV quotes
 * unescaped into scratch (len + 1 bytes): the count of fields (at most cap
 * recorded in fs, fl), or -1 with msg for a quoting error. */
int text_split(const text_plan *p, const char *line, size_t len, char *scratch, const char **fs, size_t *fl, int cap,
               char *msg, size_t msglen);

/* The id of a key in a feature of rows rows (0: the 64-bit key itself),
 * as every reader of text reduces it. */
static inline int64_t text_id(int64_t key, int64_t rows)
{
    return rows ? (int64_t)((uint64_t)key % (uint64_t)rows) : key;
}

/* What to do about a bad line of this kind, in a few words naming the
 * column and the schema key that fixes it ("" for none). */
void text_bad_hint(const text_plan *p, const text_why *w, char *out, size_t len);

/* An int column's or int id's text (docs/data.md, "Values"): a decimal
 * integer with an optional sign in int64, or one followed by a point and
 * zeros ("84.0", a float column's export of an integer) with a magnitude
 * below 2^53.  0, EMBER_EINPUT (not an integer), or EMBER_ELIMIT (a point
 * and zeros at 2^53 or beyond: the float it came from may be rounded,
 * 2^53 + 1 prints as 2^53). */
int text_parse_int(const char *s, size_t n, int64_t *out);

/* The key of a value (docs/data.md): XXH64 with the feature as seed. */
int64_t text_key_hex(uint32_t v, int32_t f);

#endif
