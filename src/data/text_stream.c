/*
 * text_stream.c: plain, gzip and zstd text read line by line
 * (text_stream.h).
 *
 * Design: one buffer of decompressed bytes; a line that lies inside it is
 * handed out in place, one that crosses its end is assembled in a second
 * buffer.  `base` is the decompressed offset of the buffer's first byte,
 * so tell is base + pos.  gzip goes through zlib's gzread (which reads
 * concatenated members); zstd through ZSTD_decompressStream over raw
 * reads, frame after frame, and input that ends inside a frame is an
 * error, never a silently short file.
 *
 * A UTF-8 byte-order mark (EF BB BF) at the start of the text (after
 * decompression) is skipped: Excel and pandas (`encoding="utf-8-sig"`)
 * write one.  Offsets still count it, so the first line starts at byte 3.
 *
 * Errors name the line being read (file:LINE, the file's lines counted
 * from 1, a header included), as the parser's do: the stream counts the
 * lines it hands out, and a seek is told the line that starts there.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#include "data/ctr_impl.h" /* ctr_fail */
#include "data/text_stream.h"

#define TS_BUF (1 << 20)     /* the buffer, at most                    */
#define TS_BUF_MIN (1 << 12) /* and at least: a small file's own size   */

static const unsigned char BOM[3] = {0xef, 0xbb, 0xbf};

struct text_stream {
    char *path;
    text_kind kind;
    int fd;
    gzFile gz;
    ZSTD_DCtx *zd;
    unsigned char *zin;         /* compressed input (zstd)                  */
    ZSTD_inBuffer in;
    size_t zframe;              /* 0 at a frame boundary (zstd)             */
    int eof;                    /* the source gave its last byte            */
    char *buf;                  /* decompressed bytes [0, end), cap bytes   */
    size_t cap;
    size_t pos, end;
    int64_t base;               /* offset of buf[0]                         */
    char *line;                 /* a line that crossed the buffer's end     */
    size_t line_cap;
    size_t skip;                /* 3: the text starts with a byte-order mark */
    int64_t line_no;            /* lines before the next one handed out     */
};

/* "path:LINE" of the line being read, for a message. */
static const char *ts_where(const text_stream *t, char *buf, size_t n)
{
    snprintf(buf, n, "%s:%lld", t->path, (long long)t->line_no + 1);
    return buf;
}

static void ts_close_source(text_stream *t)
{
    if (t->gz)
        gzclose(t->gz); /* closes fd too */
    else if (t->fd >= 0)
        close(t->fd);
    t->gz = NULL;
    t->fd = -1;
    if (t->zd)
        ZSTD_freeDCtx(t->zd);
    t->zd = NULL;
}

/* (Re)opens the file at its start. */
static int ts_open_source(text_stream *t, char *err, size_t errlen)
{
    ts_close_source(t);
    t->fd = open(t->path, O_RDONLY | O_CLOEXEC);
    if (t->fd < 0)
        return ctr_fail(err, errlen, "%s: cannot open: %s", t->path, strerror(errno));
    unsigned char m[4] = {0};
    ssize_t got = pread(t->fd, m, 4, 0);
    if (got < 0)
        return ctr_fail(err, errlen, "%s: read error: %s", t->path, strerror(errno));
    t->kind = got >= 2 && m[0] == 0x1f && m[1] == 0x8b                                     ? TEXT_GZIP
              : got == 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd ? TEXT_ZSTD
                                                                                       : TEXT_PLAIN;
    if (t->kind == TEXT_GZIP) {
        t->gz = gzdopen(t->fd, "rb");
        if (!t->gz)
            return ctr_fail(err, errlen, "%s: cannot read gzip: out of memory", t->path);
        gzbuffer(t->gz, 1 << 18);
    } else if (t->kind == TEXT_ZSTD) {
        if (!t->zin && !(t->zin = malloc(ZSTD_DStreamInSize())))
            return ctr_fail(err, errlen, "%s: out of memory", t->path);
        if (!(t->zd = ZSTD_createDCtx()))
            return ctr_fail(err, errlen, "%s: out of memory", t->path);
        t->in.src = t->zin;
        t->in.size = t->in.pos = 0;
        t->zframe = 0;
    }
    t->eof = 0;
    t->pos = t->end = 0;
    t->base = 0;
    return 0;
}

/* Up to cap decompressed bytes into p; the count (0: end), or -1. */
static ssize_t ts_read(text_stream *t, char *p, size_t cap, char *err, size_t errlen)
{
    char at[300];
    if (t->kind == TEXT_PLAIN) {
        ssize_t n;
        do
            n = read(t->fd, p, cap);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return ctr_fail(err, errlen, "%s: read error: %s", ts_where(t, at, sizeof at), strerror(errno));
        return n;
    }
    if (t->kind == TEXT_GZIP) {
        int n = gzread(t->gz, p, (unsigned)cap);
        if (n == 0) { /* zlib reports a file cut inside a member as an end with Z_BUF_ERROR */
            int code;
            gzerror(t->gz, &code);
            if (code == Z_BUF_ERROR)
                return ctr_fail(err, errlen, "%s: gzip: the file ends inside a member (truncated)",
                                ts_where(t, at, sizeof at));
        }
        if (n < 0) {
            int code;
            const char *msg = gzerror(t->gz, &code);
            if (code != Z_ERRNO && msg && msg[0] == '<' && strstr(msg, ">: "))
                msg = strstr(msg, ">: ") + 3; /* zlib's "<fd:3>: " */
            return ctr_fail(err, errlen, "%s: gzip: %s (found while reading this line)", ts_where(t, at, sizeof at),
                            code == Z_ERRNO ? strerror(errno) : msg);
        }
        return n;
    }
    ZSTD_outBuffer out = {p, cap, 0};
    while (out.pos == 0) {
        if (t->in.pos == t->in.size) {
            ssize_t n;
            do
                n = read(t->fd, t->zin, ZSTD_DStreamInSize());
            while (n < 0 && errno == EINTR);
            if (n < 0)
                return ctr_fail(err, errlen, "%s: read error: %s", ts_where(t, at, sizeof at), strerror(errno));
            if (n == 0) {
                if (t->zframe != 0)
                    return ctr_fail(err, errlen, "%s: zstd: the file ends inside a frame (truncated)",
                                    ts_where(t, at, sizeof at));
                return 0;
            }
            t->in.size = (size_t)n;
            t->in.pos = 0;
        }
        size_t r = ZSTD_decompressStream(t->zd, &out, &t->in);
        if (ZSTD_isError(r))
            return ctr_fail(err, errlen, "%s: zstd: %s (found while reading this line)",
                            ts_where(t, at, sizeof at), ZSTD_getErrorName(r));
        t->zframe = r;
    }
    return (ssize_t)out.pos;
}

/* Refills the buffer (its unread bytes are gone: callers consume first).
 * At the text's start a byte-order mark is read whole and skipped. */
static int ts_fill(text_stream *t, char *err, size_t errlen)
{
    t->base += (int64_t)t->end;
    t->pos = t->end = 0;
    if (t->eof)
        return 0;
    const int start = t->base == 0;
    for (;;) {
        ssize_t n = ts_read(t, t->buf + t->end, t->cap - t->end, err, errlen);
        if (n < 0)
            return EMBER_EINVAL;
        if (n == 0) {
            t->eof = 1;
            break;
        }
        t->end += (size_t)n;
        if (!start || t->end >= sizeof BOM || memcmp(t->buf, BOM, t->end)) /* else a mark's first bytes: read on */
            break;
    }
    if (start && t->end >= sizeof BOM && !memcmp(t->buf, BOM, sizeof BOM)) {
        t->skip = t->pos = sizeof BOM;
        if (t->pos == t->end && !t->eof) /* nothing after the mark yet */
            return ts_fill(t, err, errlen);
    }
    return 0;
}

int text_stream_open(const char *path, text_stream **out, char *err, size_t errlen)
{
    *out = NULL;
    text_stream *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    t->fd = -1;
    if (ts_open_source(t, err, errlen)) {
        text_stream_close(t);
        return EMBER_EINVAL;
    }
    /* the buffer: 1 MiB, or a small file's whole text (compressed: 16x its
     * bytes) rounded up to a power of two; its size changes no result */
    struct stat sb;
    int64_t want = fstat(t->fd, &sb) == 0 ? (int64_t)sb.st_size * (t->kind == TEXT_PLAIN ? 1 : 16) + 1 : TS_BUF;
    t->cap = TS_BUF_MIN;
    while (t->cap < TS_BUF && (int64_t)t->cap < want)
        t->cap *= 2;
    if (!(t->buf = malloc(t->cap))) {
        text_stream_close(t);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    *out = t;
    return 0;
}

void text_stream_close(text_stream *t)
{
    if (!t)
        return;
    ts_close_source(t);
    free(t->zin);
    free(t->buf);
    free(t->line);
    free(t->path);
    free(t);
}

text_kind text_stream_kind(const text_stream *t)
{
    return t->kind;
}

int64_t text_stream_tell(const text_stream *t)
{
    return t->base + (int64_t)t->pos;
}

int text_stream_line(text_stream *t, size_t max_len, const char **line, size_t *len, int *overlong, char *err,
                     size_t errlen)
{
    if (t->pos == t->end && ts_fill(t, err, errlen))
        return EMBER_EINVAL;
    if (t->pos == t->end)
        return 0;
    char *nl = memchr(t->buf + t->pos, '\n', t->end - t->pos);
    if (nl) { /* in place */
        size_t n = (size_t)(nl - (t->buf + t->pos));
        *line = t->buf + t->pos;
        *overlong = n > max_len;
        *len = n > max_len ? max_len : n;
        t->pos += n + 1;
        t->line_no++;
        return 1;
    }
    /* assembled across refills, keeping at most max_len bytes */
    size_t n = 0, kept = 0;
    for (;;) {
        size_t avail = t->end - t->pos;
        nl = memchr(t->buf + t->pos, '\n', avail);
        size_t take = nl ? (size_t)(nl - (t->buf + t->pos)) : avail;
        size_t keep = kept + take > max_len ? max_len - kept : take;
        if (keep > 0) {
            if (kept + keep > t->line_cap) {
                size_t cap = t->line_cap ? t->line_cap : 4096;
                while (cap < kept + keep)
                    cap *= 2;
                char *q = realloc(t->line, cap);
                if (!q)
                    return ctr_fail(err, errlen, "%s: out of memory for a line", t->path);
                t->line = q;
                t->line_cap = cap;
            }
            memcpy(t->line + kept, t->buf + t->pos, keep);
            kept += keep;
        }
        n += take;
        t->pos += take + (nl ? 1 : 0);
        if (nl)
            break;
        if (ts_fill(t, err, errlen))
            return EMBER_EINVAL;
        if (t->end == 0)
            break; /* the last line, without '\n' */
    }
    *line = t->line ? t->line : t->buf;
    *len = kept;
    *overlong = n > max_len;
    t->line_no++;
    return 1;
}

static int64_t count_newlines(const char *p, size_t n)
{
    int64_t k = 0;
    for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        k++;
    return k;
}

int text_stream_seek(text_stream *t, int64_t offset, int64_t line, char *err, size_t errlen)
{
    if (offset < (int64_t)t->skip) /* the start of the text is after its byte-order mark */
        offset = (int64_t)t->skip;
    if (offset >= t->base && offset <= t->base + (int64_t)t->end) {
        t->pos = (size_t)(offset - t->base);
        t->line_no = line;
        return 0;
    }
    if (t->kind == TEXT_PLAIN) {
        if (lseek(t->fd, (off_t)offset, SEEK_SET) < 0)
            return ctr_fail(err, errlen, "%s:%lld: seek to byte %lld: %s", t->path, (long long)line + 1,
                            (long long)offset, strerror(errno));
        t->eof = 0;
        t->base = offset;
        t->pos = t->end = 0;
        t->line_no = line;
        return 0;
    }
    /* decompressed again up to offset, the lines passed counted so that an
     * error names the line it strikes in */
    if (offset < t->base) {
        if (ts_open_source(t, err, errlen))
            return EMBER_EINVAL;
        t->line_no = 0;
    } else {
        t->line_no += count_newlines(t->buf + t->pos, t->end - t->pos);
    }
    while (t->base + (int64_t)t->end < offset) {
        if (t->eof)
            return ctr_fail(err, errlen, "%s: the text ends before line %lld (changed while read?)", t->path,
                            (long long)line + 1);
        if (ts_fill(t, err, errlen))
            return EMBER_EINVAL;
        t->line_no += count_newlines(t->buf, t->end);
    }
    t->pos = (size_t)(offset - t->base);
    t->line_no = line;
    return 0;
}
