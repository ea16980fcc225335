/*
 * predict_out.c: the CSV scores of ember_predict (predict_scores.h): a
 * header, then one "id,score[,label]" line per sample in data order.
 *
 * The id is the sample's line in a text file, or with an id column that
 * column's field of the line: rank 0 reads the file once more, line by
 * line through the same text_stream (plain, gzip, zstd, a byte-order
 * mark), and splits only the lines that were scored, which it knows by
 * number.  So whatever the source skipped (bad lines, the header) needs no
 * second judgement here, and the file is streamed, never held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/predict_scores.h"
#include "data/text_parse.h"
#include "data/text_stream.h"

/* Reads one column's field of chosen lines of a text file, in increasing
 * line order. */
typedef struct id_reader {
    text_stream *ts;
    text_plan split;       /* only the delimiter and the quoting are set */
    int32_t field, max_line;
    int64_t line;          /* lines read so far                          */
    char *scratch;
    const char *path;
} id_reader;

static void id_reader_close(id_reader *r)
{
    text_stream_close(r->ts);
    free(r->scratch);
}

/* Field k of line (fields unescaped into scratch): *f, *fl. */
static int field_of(id_reader *r, const char *line, size_t len, int32_t k, const char **f, size_t *fl, char *err,
                    size_t errlen)
{
    enum { CAP = 4 * CTR_MAX_COLUMNS };
    static _Thread_local const char *fs[CAP];
    static _Thread_local size_t lens[CAP];
    char msg[200];
    if (len > 0 && line[len - 1] == '\r')
        len--;
    int n = text_split(&r->split, line, len, r->scratch, fs, lens, CAP, msg, sizeof msg);
    if (n < 0 || k >= n || k >= CAP) {
        snprintf(err, errlen, "%s:%lld: %s", r->path, (long long)r->line, n < 0 ? msg : "no such field");
        return EMBER_EINPUT;
    }
    *f = fs[k];
    *fl = lens[k];
    return 0;
}

/* The field of column `name`: from the header's fields, or the schema's
 * column order for a headerless file (without the label's field when the
 * file is unlabeled). */
static int id_reader_open(id_reader *r, const char *path, const ctr_text_schema *sc, int header, int unlabeled,
                          const char *name, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->split.delimiter = sc->delimiter;
    r->split.quoting = sc->delimiter == ',';
    r->max_line = sc->max_line;
    r->field = -1;
    if (!(r->scratch = malloc((size_t)sc->max_line + 2))) {
        snprintf(err, errlen, "out of memory");
        return EMBER_ENOMEM;
    }
    if (text_stream_open(path, &r->ts, err, errlen))
        return EMBER_EIO;
    if (header) {
        const char *line, *f;
        size_t len, fl;
        int over, rc = text_stream_line(r->ts, (size_t)sc->max_line, &line, &len, &over, err, errlen);
        if (rc <= 0)
            return rc < 0 ? EMBER_EIO : (snprintf(err, errlen, "%s: no header line", path), EMBER_EINPUT);
        r->line = 1;
        for (int32_t k = 0; r->field < 0 && field_of(r, line, len, k, &f, &fl, err, errlen) == 0; k++)
            if (fl == strlen(name) && !memcmp(f, name, fl))
                r->field = k;
        if (r->field < 0)
            snprintf(err, errlen, "--id %s: %s's header has no such column", name, path);
    } else { /* the training file's fields in order, else the schema's columns; the label's left out */
        const int by_fields = sc->num_file_fields > 0;
        const int32_t n = by_fields ? sc->num_file_fields : sc->num_columns;
        const char *label = NULL;
        for (int32_t c = 0; c < sc->num_columns; c++)
            if (sc->columns[c].type == CTR_COL_LABEL)
                label = sc->columns[c].name;
        for (int32_t i = 0, k = 0; i < n && r->field < 0; i++) {
            const char *f = by_fields ? sc->file_fields[i] : sc->columns[i].name;
            if (unlabeled && label && !strcmp(f, label))
                continue;
            if (!strcmp(f, name))
                r->field = k;
            k++;
        }
        if (r->field < 0)
            snprintf(err, errlen, "--id %s: no such column in the file (it has no header: %s)", name,
                     by_fields ? "the training file's fields" : "the model's schema columns");
    }
    return r->field < 0 ? EMBER_EINVAL : 0;
}

/* Column field of line number `want` (from 1, not below the last one). */
static int id_reader_get(id_reader *r, int64_t want, const char **f, size_t *fl, char *err, size_t errlen)
{
    const char *line = NULL;
    size_t len = 0;
    int over = 0;
    while (r->line < want) {
        int rc = text_stream_line(r->ts, (size_t)r->max_line, &line, &len, &over, err, errlen);
        if (rc <= 0) {
            if (rc == 0)
                snprintf(err, errlen, "%s: ended before line %lld (the file changed while it was scored?)", r->path,
                         (long long)want);
            return EMBER_EIO;
        }
        r->line++;
    }
    if (!line || over) {
        snprintf(err, errlen, "%s:%lld: the line scored cannot be read again", r->path, (long long)want);
        return EMBER_EIO;
    }
    return field_of(r, line, len, r->field, f, fl, err, errlen);
}

/* A field as one CSV field: quoted when it holds a comma, a quote or a
 * line break, its quotes doubled. */
static void put_csv_field(FILE *f, const char *s, size_t n)
{
    if (!memchr(s, ',', n) && !memchr(s, '"', n) && !memchr(s, '\n', n) && !memchr(s, '\r', n)) {
        fwrite(s, 1, n, f);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            fputc('"', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

int predict_csv_check(const predict_csv *c, char *err, size_t len)
{
    id_reader r;
    int st = c->id && c->schema ? id_reader_open(&r, c->path, c->schema, c->header, !c->labeled, c->id, err, len)
                                : EMBER_OK;
    if (c->id && c->schema)
        id_reader_close(&r);
    return st;
}

int predict_scores_write_csv(ember_output *o, const predict_scores *s, const predict_csv *c, char *err, size_t len)
{
    FILE *f = ember_output_stdio(o);
    id_reader r;
    int st = EMBER_OK, reading = c->id && c->schema;
    if (reading && (st = id_reader_open(&r, c->path, c->schema, c->header, !c->labeled, c->id, err, len)) != EMBER_OK) {
        id_reader_close(&r);
        ember_output_abort(o);
        return st;
    }
    if (f) {
        put_csv_field(f, c->id ? c->id : c->index_name, strlen(c->id ? c->id : c->index_name));
        fprintf(f, ",score%s\n", c->labeled ? ",label" : "");
    }
    for (int64_t i = 0; f && i < s->n && !ferror(f) && st == EMBER_OK; i++) {
        if (reading) {
            const char *v;
            size_t vl;
            if ((st = id_reader_get(&r, s->index[i], &v, &vl, err, len)) != EMBER_OK)
                break;
            put_csv_field(f, v, vl);
        } else {
            fprintf(f, "%lld", (long long)s->index[i]);
        }
        fprintf(f, ",%.9g", s->score[i]);
        if (c->labeled)
            fprintf(f, ",%g", s->label[i]);
        fputc('\n', f);
    }
    if (reading)
        id_reader_close(&r);
    if (st != EMBER_OK) {
        ember_output_abort(o);
        return st;
    }
    st = ember_output_commit(o);
    if (st != EMBER_OK)
        snprintf(err, len, "%s", ember_errmsg(NULL));
    return st;
}
