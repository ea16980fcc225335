/*
 * ctr_tsv.c: the Criteo TSV reader of ctr.h.
 *
 * A line is 40 tab-separated fields: the label (0 or 1), 13 integers I1..I13
 * and 26 categoricals C1..C26, any of the last 39 possibly empty.  An
 * integer x becomes log(1 + max(x, 0)) (empty: 0); a categorical of 1 to 8
 * hexadecimal digits, read as a 32-bit value v, becomes the id
 * XXH64(v as 4 little-endian bytes, seed = f) % rows[f], f = 0 for C1 .. 25
 * for C26; an empty categorical is an empty bag.  Fields are numbered from
 * 0 (the label) in messages, so C1 is field 14 (docs/ctr-format.md).
 *
 * A bad line (not 40 fields, a label not 0 or 1, an integer that is not
 * one, a categorical that is not hexadecimal, a line over
 * CTR_TSV_MAX_LINE bytes) is counted, its message kept if it is the first,
 * and skipped, or fails the read under CTR_BAD_FAIL.  A trailing '\r' is
 * dropped; a last line without '\n' counts.
 *
 * Rank share, design choice: open counts the file's lines once (a memchr
 * pass at disk speed) and rank r of W reads lines [r*N/W, (r+1)*N/W): bad
 * lines count as lines, so every line belongs to exactly one rank and the
 * shares do not depend on the contents.  The pass remembers where every
 * 65536th line starts, so a rank seeks near its first line instead of
 * reading the file twice.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "data/ctr_impl.h"

#define CTR_TSV_FIELDS 40
#define CTR_TSV_DENSE 13
#define CTR_TSV_SPARSE 26
#define CTR_TSV_MAX_LINE 4096 /* bytes, without the newline           */
#define TSV_MARK_SHIFT 16     /* a line start remembered every 2^16 lines */

typedef struct tsv_impl {
    char *path;
    FILE *f;
    ctr_bad_policy policy;
    int64_t rows[CTR_TSV_SPARSE];
    int64_t lines;          /* in the file                                  */
    int64_t begin, end;     /* this rank's lines [begin, end)               */
    int64_t begin_offset;   /* byte where line `begin` starts               */
    int64_t line;           /* index of the next line to read               */
    int64_t seen;           /* lines below this were already counted (rewind) */
    char *buf;              /* CTR_TSV_MAX_LINE + 2 bytes                    */
} tsv_impl;

/* Reads the next line into buf (NUL-terminated, newline dropped, at most
 * CTR_TSV_MAX_LINE + 1 bytes kept); *len its length, *overlong when it was
 * longer than CTR_TSV_MAX_LINE (the rest is consumed).  1: a line, 0: end of
 * file, -1: read error.  Byte by byte, so a NUL byte cannot hide a newline. */
static int tsv_getline(tsv_impl *t, size_t *len, int *overlong)
{
    size_t n = 0;
    int c;
    while ((c = getc_unlocked(t->f)) != EOF && c != '\n') {
        if (n <= CTR_TSV_MAX_LINE)
            t->buf[n] = (char)c;
        n++;
    }
    if (c == EOF) {
        if (ferror(t->f))
            return -1;
        if (n == 0)
            return 0;
    }
    *overlong = n > CTR_TSV_MAX_LINE;
    if (*overlong)
        n = CTR_TSV_MAX_LINE + 1;
    else if (n > 0 && t->buf[n - 1] == '\r')
        n--;
    t->buf[n] = '\0';
    *len = n;
    return 1;
}

/* tsv_getline for a line that open counted: 0, or -1 with err (a read
 * error, or the file shrank since open). */
static int tsv_counted_line(tsv_impl *t, size_t *len, int *overlong, char *err, size_t errlen)
{
    int rc = tsv_getline(t, len, overlong);
    if (rc < 0)
        return ctr_fail(err, errlen, "%s:%lld: read error: %s", t->path, (long long)t->line + 1, strerror(errno));
    if (rc == 0)
        return ctr_fail(err, errlen, "%s:%lld: file ends before its %lld counted lines (changed while read?)",
                        t->path, (long long)t->line + 1, (long long)t->lines);
    return 0;
}

static int hex_value(const char *s, size_t n, uint32_t *out)
{
    if (n < 1 || n > 8)
        return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* Decimal integer with an optional sign; -1 for anything else or overflow. */
static int int_value(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (n > 0 && (s[0] == '-' || s[0] == '+'))
        neg = s[i++] == '-';
    if (i == n)
        return -1;
    uint64_t v = 0, max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX; /* -2^63 is an int64 too */
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (max - d) / 10) /* v * 10 + d would pass max (or wrap) */
            return -1;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v; /* 0 - v in uint64: -2^63 without overflow */
    return 0;
}

/* ctr_tsv_categorical of docs/ctr-format.md: the id of value v in feature f. */
static inline int64_t tsv_id(uint32_t v, int32_t f, int64_t rows)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    uint64_t h = XXH64(b, 4, (XXH64_hash_t)f);
    return rows == 0 ? (int64_t)h : (int64_t)(h % (uint64_t)rows); /* 0: a dynamic table's 64-bit key */
}

static void field_name(int k, char *out, size_t n)
{
    if (k == 0)
        snprintf(out, n, "label");
    else if (k <= CTR_TSV_DENSE)
        snprintf(out, n, "I%d", k);
    else
        snprintf(out, n, "C%d", k - CTR_TSV_DENSE);
}

/* Parses buf (len bytes) as sample b of the staging buffers; 0, or -1 with
 * the line's problem in msg (without the FILE:LINE: prefix). */
static int tsv_parse(ctr_source *s, tsv_impl *t, size_t len, int32_t b, int64_t *nids, char *msg, size_t msglen)
{
    const char *start[CTR_TSV_FIELDS];
    size_t flen[CTR_TSV_FIELDS];
    int nf = 0;
    const char *p = t->buf, *e = t->buf + len;
    if (memchr(p, '\0', len) != NULL) {
        snprintf(msg, msglen, "line holds a NUL byte");
        return -1;
    }
    for (;;) {
        const char *tab = memchr(p, '\t', (size_t)(e - p));
        const char *fe = tab ? tab : e;
        if (nf < CTR_TSV_FIELDS) {
            start[nf] = p;
            flen[nf] = (size_t)(fe - p);
        }
        nf++;
        if (!tab)
            break;
        p = tab + 1;
    }
    if (nf != CTR_TSV_FIELDS) {
        snprintf(msg, msglen, "%d fields, expected %d (label, I1..I13, C1..C26)", nf, CTR_TSV_FIELDS);
        return -1;
    }
    char name[8];
    if (!(flen[0] == 1 && (start[0][0] == '0' || start[0][0] == '1'))) {
        snprintf(msg, msglen, "field 0 (label): \"%.*s\" is not 0 or 1", (int)(flen[0] > 40 ? 40 : flen[0]),
                 start[0]);
        return -1;
    }
    float *dense = s->dense + (int64_t)b * CTR_TSV_DENSE;
    for (int k = 1; k <= CTR_TSV_DENSE; k++) {
        int64_t v = 0;
        if (flen[k] > 0 && int_value(start[k], flen[k], &v)) {
            field_name(k, name, sizeof name);
            snprintf(msg, msglen, "field %d (%s): \"%.*s\" is not an integer", k, name,
                     (int)(flen[k] > 40 ? 40 : flen[k]), start[k]);
            return -1;
        }
        dense[k - 1] = (float)log1p((double)(v > 0 ? v : 0));
    }
    if (ctr_buf_reserve_ids(s, *nids + CTR_TSV_SPARSE, 1)) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    int32_t *lens = s->stage_len + (int64_t)b * CTR_TSV_SPARSE;
    int64_t n = *nids;
    for (int f = 0; f < CTR_TSV_SPARSE; f++) {
        int k = 1 + CTR_TSV_DENSE + f;
        uint32_t v;
        lens[f] = 0;
        if (flen[k] == 0)
            continue;
        if (hex_value(start[k], flen[k], &v)) {
            field_name(k, name, sizeof name);
            snprintf(msg, msglen, "field %d (%s): \"%.*s\" is not hexadecimal%s", k, name,
                     (int)(flen[k] > 40 ? 40 : flen[k]), start[k], flen[k] > 8 ? " of at most 8 digits" : "");
            return -1;
        }
        s->stage_ids[n++] = tsv_id(v, f, t->rows[f]);
        lens[f] = 1;
    }
    s->label[b] = start[0][0] == '1' ? 1.0f : 0.0f;
    *nids = n;
    return 0;
}

static int64_t tsv_next(ctr_source *s, int32_t max, char *err, size_t errlen)
{
    tsv_impl *t = s->impl;
    if (t->end - t->line < max) /* no room for samples the share does not hold */
        max = (int32_t)(t->end - t->line);
    if (max <= 0)
        return 0;
    if (ctr_buf_reserve(s, max, 1))
        return ctr_fail(err, errlen, "%s: out of memory for %d samples", t->path, (int)max);
    int32_t n = 0;
    int64_t nids = 0, first = -1;
    char msg[200];
    while (n < max && t->line < t->end) {
        size_t len;
        int overlong;
        if (tsv_counted_line(t, &len, &overlong, err, errlen))
            return -1;
        int64_t line = t->line++;
        int fresh = line >= t->seen;
        if (fresh) {
            s->stats.lines++;
            t->seen = line + 1;
        }
        int bad = 0;
        if (overlong) {
            snprintf(msg, sizeof msg, "line longer than %d bytes", CTR_TSV_MAX_LINE);
            bad = 1;
        } else {
            bad = tsv_parse(s, t, len, n, &nids, msg, sizeof msg) != 0;
        }
        if (bad) {
            if (!strcmp(msg, "out of memory"))
                return ctr_fail(err, errlen, "%s:%lld: out of memory", t->path, (long long)line + 1);
            if (fresh) {
                s->stats.bad_lines++;
                if (!s->stats.first_bad[0])
                    snprintf(s->stats.first_bad, sizeof s->stats.first_bad, "%s:%lld: %s", t->path,
                             (long long)line + 1, msg);
            }
            if (t->policy == CTR_BAD_FAIL)
                return ctr_fail(err, errlen, "%s:%lld: %s", t->path, (long long)line + 1, msg);
            continue;
        }
        if (first < 0)
            first = line;
        n++;
    }
    if (n > 0 && ctr_buf_transpose(s, n, nids))
        return ctr_fail(err, errlen, "%s: out of memory for %lld ids", t->path, (long long)nids);
    s->batch_first = first;
    return n;
}

static void tsv_rewind(ctr_source *s)
{
    tsv_impl *t = s->impl;
    if (fseeko(t->f, (off_t)t->begin_offset, SEEK_SET) == 0)
        t->line = t->begin;
    /* a failed seek leaves the position: the next read reports what it finds */
}

static void tsv_destroy(ctr_source *s)
{
    tsv_impl *t = s->impl;
    if (!t)
        return;
    if (t->f)
        fclose(t->f);
    free(t->path);
    free(t->buf);
    free(t);
}

static void tsv_tell(const ctr_source *s, ctr_position *out)
{
    const tsv_impl *t = s->impl;
    out->next = t->line;
    out->begin = t->begin;
    out->end = t->end;
}

/* From the share's first line, reads lines up to next without parsing. */
static int tsv_seek(ctr_source *s, int64_t next, char *err, size_t errlen)
{
    tsv_impl *t = s->impl;
    if (next < t->begin || next > t->end)
        return ctr_fail(err, errlen, "%s: position: line %lld is outside this rank's lines %lld to %lld", t->path,
                        (long long)next + 1, (long long)t->begin + 1, (long long)t->end);
    if (fseeko(t->f, (off_t)t->begin_offset, SEEK_SET) != 0)
        return ctr_fail(err, errlen, "%s: seek to byte %lld: %s", t->path, (long long)t->begin_offset,
                        strerror(errno));
    t->line = t->begin;
    while (t->line < next) {
        size_t len;
        int overlong;
        if (tsv_counted_line(t, &len, &overlong, err, errlen))
            return -1;
        t->line++;
    }
    if (t->seen < next)
        t->seen = next; /* lines skipped here are not counted as read */
    return 0;
}

static const ctr_source_ops TSV_OPS = {tsv_next, tsv_rewind, tsv_destroy, tsv_tell, tsv_seek, NULL};

/* Counts the lines and finds where line `want` starts (via marks every
 * 2^16 lines and a second short pass).  0 or -1 with err. */
static int tsv_locate(tsv_impl *t, int32_t rank, int32_t world, char *err, size_t errlen)
{
    enum { CHUNK = 1 << 20 };
    char *chunk = malloc(CHUNK);
    int64_t *marks = NULL, nmarks = 0, cap = 0, off = 0, lines = 0;
    int last = '\n', rc = -1;
    if (!chunk)
        return ctr_fail(err, errlen, "%s: out of memory", t->path);
    for (;;) {
        size_t got = fread(chunk, 1, CHUNK, t->f);
        for (size_t i = 0; i < got;) {
            /* a line starts at off + i when the byte before it was '\n' */
            if (last == '\n') {
                if ((lines & ((INT64_C(1) << TSV_MARK_SHIFT) - 1)) == 0) {
                    if (nmarks == cap) {
                        int64_t *q = realloc(marks, (size_t)(cap ? 2 * cap : 64) * sizeof *q);
                        if (!q) {
                            ctr_fail(err, errlen, "%s: out of memory", t->path);
                            goto done;
                        }
                        marks = q;
                        cap = cap ? 2 * cap : 64;
                    }
                    marks[nmarks++] = off + (int64_t)i;
                }
                lines++;
            }
            char *nl = memchr(chunk + i, '\n', got - i);
            if (!nl) {
                last = chunk[got - 1];
                i = got;
            } else {
                last = '\n';
                i = (size_t)(nl - chunk) + 1;
            }
        }
        off += (int64_t)got;
        if (got < CHUNK) {
            if (ferror(t->f)) {
                ctr_fail(err, errlen, "%s: read error at byte %lld: %s", t->path, (long long)off,
                         strerror(errno));
                goto done;
            }
            break;
        }
    }
    t->lines = lines;
    t->begin = ctr_share_begin(lines, rank, world);
    t->end = ctr_share_begin(lines, rank + 1, world);
    /* from the mark at or before `begin`, skip to it */
    int64_t m = t->begin >> TSV_MARK_SHIFT, line = m << TSV_MARK_SHIFT;
    int64_t pos = m < nmarks ? marks[m] : off;
    if (fseeko(t->f, (off_t)pos, SEEK_SET) != 0) {
        ctr_fail(err, errlen, "%s: seek to byte %lld: %s", t->path, (long long)pos, strerror(errno));
        goto done;
    }
    while (line < t->begin) {
        int c;
        while ((c = getc(t->f)) != EOF && c != '\n')
            pos++;
        if (c == EOF) {
            ctr_fail(err, errlen, "%s: file ends before line %lld (changed while read?)", t->path,
                     (long long)t->begin + 1);
            goto done;
        }
        pos++;
        line++;
    }
    t->begin_offset = pos;
    t->line = t->begin;
    t->seen = t->begin;
    rc = 0;
done:
    free(chunk);
    free(marks);
    return rc;
}

int ctr_source_tsv(const char *path, const int64_t *rows, ctr_bad_policy policy, int32_t rank, int32_t world,
                   ctr_source **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !rows || !out)
        return ctr_fail(err, errlen, "ctr_source_tsv: path, rows and out must not be NULL");
    if (ctr_check_world(path, rank, world, err, errlen))
        return -1;
    if (policy != CTR_BAD_SKIP && policy != CTR_BAD_FAIL)
        return ctr_fail(err, errlen, "%s: bad-line policy %d is neither skip nor fail", path, (int)policy);
    ctr_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.num_dense = CTR_TSV_DENSE;
    sc.num_sparse = CTR_TSV_SPARSE;
    for (int f = 0; f < CTR_TSV_SPARSE; f++) {
        if (rows[f] < 0)
            return ctr_fail(err, errlen, "%s: rows of C%d = %lld, must be >= 0 (0: 64-bit keys)", path, f + 1,
                            (long long)rows[f]);
        sc.rows[f] = rows[f];
        snprintf(sc.names[f], sizeof sc.names[f], "C%d", f + 1);
    }
    tsv_impl *t = calloc(1, sizeof *t);
    ctr_source *s = t ? ctr_source_alloc(&TSV_OPS, t, &sc) : NULL;
    if (!s) {
        free(t);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    t->policy = policy;
    memcpy(t->rows, rows, sizeof t->rows);
    t->path = malloc(strlen(path) + 1);
    t->buf = malloc(CTR_TSV_MAX_LINE + 2);
    if (!t->path || !t->buf) {
        ctr_source_destroy(s);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    strcpy(t->path, path);
    t->f = fopen(path, "rb");
    if (!t->f) {
        ctr_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        ctr_source_destroy(s);
        return -1;
    }
    if (tsv_locate(t, rank, world, err, errlen)) {
        ctr_source_destroy(s);
        return -1;
    }
    *out = s;
    return 0;
}
