/*
 * text_stream.h: the bytes of a text data file, plain, gzip or zstd, read
 * line by line (text_stream.c).
 *
 * The compression is found from the file's first bytes (the gzip magic
 * 1f 8b, the zstd magic 28 b5 2f fd), not its name, and decompressed as
 * it is read (zlib, libzstd); concatenated gzip members and zstd frames
 * are read through.  Positions are offsets in the decompressed bytes, so
 * the text readers work the same on every kind: a plain file seeks to one
 * directly, a compressed one reads its stream again from the start.
 *
 * A UTF-8 byte-order mark (EF BB BF) that begins the text is skipped (the
 * first line starts at offset 3).  Read errors name the file and the line
 * being read ("data.csv.gz:1234: gzip: ..."), lines counted from 1.
 */
#ifndef EMBER_DATA_TEXT_STREAM_H
#define EMBER_DATA_TEXT_STREAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct text_stream text_stream;

typedef enum text_kind { TEXT_PLAIN = 0, TEXT_GZIP = 1, TEXT_ZSTD = 2 } text_kind;

/* Opens path; 0, or -1 with err naming it. */
int text_stream_open(const char *path, text_stream **out, char *err, size_t errlen);
void text_stream_close(text_stream *t);
text_kind text_stream_kind(const text_stream *t);

/* The next line: *line points at its bytes (valid until the next call;
 * the '\n' dropped, a trailing '\r' kept), *len its length, at most
 * max_len bytes kept (*overlong set when it was longer: the rest is
 * consumed).  1: a line, 0: end of file, -1: read or decompression error
 * with err. */
int text_stream_line(text_stream *t, size_t max_len, const char **line, size_t *len, int *overlong, char *err,
                     size_t errlen);
/* Offset (decompressed) of the next byte text_stream_line reads. */
int64_t text_stream_tell(const text_stream *t);
/* Moves to a decompressed offset found by an earlier tell, where line
 * `line` (counted from 0: the lines before it) starts; 0 or -1. */
int text_stream_seek(text_stream *t, int64_t offset, int64_t line, char *err, size_t errlen);

#endif
