/*
 * data_open.c: a config's CTR data opened the same way by every command
 * (data_open.h).  The file's first bytes pick the reader, so a model can
 * train on a converted binary file and evaluate on the raw text, and a
 * binary file needs no schema at all: its header is one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/data_open.h"
#include "data/text_stream.h"

int data_is_batch_file(const char *path)
{
    char m[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(m, 1, sizeof m, f);
    fclose(f);
    return got == sizeof m && !memcmp(m, "EMBBATCH", 8);
}

/* A file that begins with a NUL byte is neither format (text never holds
 * one, ember's binary format begins with its magic): most often a file
 * not written whole, its space reserved as zeros.  0, or -1 with err. */
static int refuse_zeros(const char *path, char *err, size_t errlen)
{
    unsigned char b[4096];
    struct stat sb;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0; /* the reader says why */
    size_t n = fread(b, 1, sizeof b, f);
    int64_t size = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : -1;
    fclose(f);
    if (n == 0 || b[0] != 0)
        return 0;
    size_t z = 0;
    while (z < n && b[z] == 0)
        z++;
    if (z == n && (int64_t)n == size)
        snprintf(err, errlen, "%s: all %lld bytes are zero (a file not written whole?): neither ember's binary "
                 "format nor text", path, (long long)n);
    else if (z == n)
        snprintf(err, errlen, "%s: its first %zu bytes are zero (a file not written whole?): neither ember's "
                 "binary format nor text", path, n);
    else
        snprintf(err, errlen, "%s: byte 0 is a NUL byte: neither ember's binary format (bad magic) nor text", path);
    return EMBER_EINVAL;
}

/* The config's text schema for the file at path, each categorical in its
 * table's rows, each standardize column scaled as the training data: the
 * mean and std given, else train's (a text training source's, computed at
 * its open), never computed on this file.  *cols (free it) holds the
 * columns of *sc.  0, or EMBER_EINVAL with err. */
static int schema_scaled(const config_file *cf, const char *path, const ctr_source *train, ctr_column **cols,
                         ctr_text_schema *sc, char *err, size_t errlen)
{
    ctr_column *c0 = *cols = malloc((size_t)cf->train.schema.num_columns * sizeof *c0);
    if (!c0) {
        snprintf(err, errlen, "%s: out of memory", path);
        return EMBER_EINVAL;
    }
    config_file_text_schema(cf, c0, sc);
    for (int32_t c = 0; train && c < sc->num_columns; c++) {
        ctr_column *k = &c0[c];
        if (k->transform != CTR_TF_STANDARDIZE || k->has_stats || (k->type != CTR_COL_INT && k->type != CTR_COL_FLOAT))
            continue;
        if (ctr_source_text_stats(train, c, &k->mean, &k->std) != 0) {
            snprintf(err, errlen, "%s: column %s: standardize has no mean and std, and the training data is not "
                     "text to compute them from: give them in data.schema (ember convert printed them)", path,
                     k->name);
            free(c0);
            *cols = NULL;
            return EMBER_EINVAL;
        }
        k->has_stats = 1;
    }
    return EMBER_OK;
}

/* The rows of a Criteo TSV's 26 categoricals: their tables', or
 * t->hash_rows without a config's features.  0, or EMBER_EINVAL with err. */
static int criteo_rows(const config_file *cf, const cfg_train *t, int64_t *rows, char *err, size_t errlen)
{
    for (int f = 0; f < CTR_MAX_FEATURES; f++)
        rows[f] = t->hash_rows;
    if (cf && cf->num_features) {
        if (cf->num_features != 26) {
            snprintf(err, errlen, "%s: a Criteo TSV has 26 categorical features, the config has %d (data.schema "
                     "reads other layouts: docs/data.md)", cf->path, cf->num_features);
            return EMBER_EINVAL;
        }
        for (int f = 0; f < 26; f++)
            rows[f] = config_feature_rows(cf, f);
    }
    return EMBER_OK;
}

/* (data_open.h) A file read as Criteo TSV (no data.schema) whose first lines are not:
 * refused at open with the way out, instead of skipping every line as a
 * bad one.  A layout is Criteo's when one of the first 100 lines has its
 * 40 tab-separated fields (a bad line here and there is the reader's to
 * count).  0, or EMBER_EINVAL with err; a file that cannot be read is the
 * reader's to name. */
int data_refuse_not_criteo(const char *path, char *err, size_t errlen)
{
    text_stream *ts = NULL;
    char why[256];
    if (text_stream_open(path, &ts, why, sizeof why) != 0)
        return 0;
    const char *line;
    size_t len;
    int overlong, lines = 0, got = 0, fields = 0, commas = 0;
    while (lines < 100 && (got = text_stream_line(ts, 1 << 16, &line, &len, &overlong, why, sizeof why)) == 1) {
        fields = 1, commas = 0;
        for (size_t i = 0; i < len; i++)
            fields += line[i] == '\t', commas += line[i] == ',';
        if (fields == 40)
            break;
        lines++;
    }
    text_stream_close(ts);
    if (lines == 0 || fields == 40 || got < 0) /* a read error: the reader's to name */
        return 0;
    snprintf(err, errlen, "%s: not a Criteo TSV (no line of the first %d has its 40 tab-separated fields; the last "
             "had %d%s): a file of another layout needs a config with data.schema (docs/data.md)", path, lines,
             fields, commas ? " and commas: a CSV?" : "");
    return EMBER_EINVAL;
}

/* A file the config names against the config's data.source: 0 to open it
 * by its first bytes, 1 when it was opened (binary), or -1 with err. */
static int open_as_declared(const config_file *cf, const cfg_train *t, const char *path, data_file_role role,
                            int32_t rank, int32_t world, ctr_source **out, char *err, size_t errlen)
{
    const int line = role == DATA_FILE_TRAIN ? t->train_file_line : role == DATA_FILE_EVAL ? t->eval_file_line : 0;
    const char *key = role == DATA_FILE_TRAIN ? "data.train_file" : "data.eval_file";
    if (!cf || !line || t->file_source == CFG_SOURCE_SYNTHETIC)
        return 0; /* the command line's, read by its first bytes */
    const int binary = ctr_file_is_binary(path);
    if (t->file_source == CFG_SOURCE_BINARY && !binary) {
        char why[400];
        FILE *f = fopen(path, "rb");
        if (!f) /* missing or unreadable: the reader's own message */
            return ctr_source_binary(path, rank, world, out, err, errlen) ? -1 : 1;
        fclose(f);
        if (ctr_source_binary(path, rank, world, out, why, sizeof why) == 0)
            return 1;
        snprintf(err, errlen, "%s:%d: %s: %s; data.source = \"binary\" (line %d) reads ember's binary format: "
                 "convert text with ember convert, or set data.source to \"text\" or \"tsv\"", cf->path, line, key,
                 why, t->file_source_line);
        return EMBER_EINVAL;
    }
    if (t->file_source != CFG_SOURCE_BINARY && binary) {
        snprintf(err, errlen, "%s:%d: %s: %s is an ember binary CTR file, but data.source = \"%s\" (line %d) reads "
                 "text: set data.source = \"binary\"", cf->path, line, key, path,
                 config_source_name(t->file_source), t->file_source_line);
        return EMBER_EINVAL;
    }
    return 0;
}

int data_open_file(const config_file *cf, const cfg_train *t, const char *path, data_file_role role,
                   const ctr_source *train, int32_t rank, int32_t world, ctr_source **out, char *err, size_t errlen)
{
    if (!path) {
        snprintf(err, errlen, "%s: no data file (data.train_file, or a file on the command line)",
                 cf ? cf->path : "ember");
        return EMBER_EINVAL;
    }
    if (refuse_zeros(path, err, errlen))
        return EMBER_EINVAL;
    int declared = open_as_declared(cf, t, path, role, rank, world, out, err, errlen);
    if (declared)
        return declared < 0 ? -1 : 0;
    if (ctr_file_is_binary(path))
        return ctr_source_binary(path, rank, world, out, err, errlen);
    if (cf && cf->train.schema.num_columns) {
        ctr_column *cols = NULL;
        ctr_text_schema sc;
        if (schema_scaled(cf, path, train, &cols, &sc, err, errlen) != EMBER_OK)
            return EMBER_EINVAL;
        int rc = ctr_source_text(path, &sc, t->bad_lines, rank, world, out, err, errlen);
        free(cols);
        if (rc == 0)
            ctr_source_set_bad_limit(*out, t->max_bad_fraction, t->max_bad_lines);
        return rc;
    }
    int64_t rows[CTR_MAX_FEATURES];
    if (criteo_rows(cf, t, rows, err, errlen) != EMBER_OK || data_refuse_not_criteo(path, err, errlen) != EMBER_OK)
        return EMBER_EINVAL;
    int rc = ctr_source_tsv(path, rows, t->bad_lines, rank, world, out, err, errlen);
    if (rc == 0)
        ctr_source_set_bad_limit(*out, t->max_bad_fraction, t->max_bad_lines);
    return rc;
}

int data_input_schema(const config_file *cf, const cfg_train *t, const char *path, const ctr_source *train,
                      data_input_kind *kind, ctr_column **cols, ctr_text_schema *sc, char *err, size_t errlen)
{
    *cols = NULL;
    memset(sc, 0, sizeof *sc);
    if (t->source == CFG_SOURCE_SYNTHETIC || !path) {
        *kind = DATA_INPUT_SYNTHETIC;
        return EMBER_OK;
    }
    if (ctr_file_is_binary(path)) {
        *kind = DATA_INPUT_BINARY;
        return EMBER_OK;
    }
    if (cf && cf->train.schema.num_columns) {
        *kind = DATA_INPUT_TEXT;
        int rc = schema_scaled(cf, path, train, cols, sc, err, errlen);
        if (rc == EMBER_OK && train) /* the header's fields, for files to score without one */
            sc->num_file_fields = ctr_source_text_fields(train, &sc->file_fields);
        return rc;
    }
    *kind = DATA_INPUT_CRITEO_TSV;
    int64_t rows[CTR_MAX_FEATURES];
    if (!(*cols = malloc(40 * sizeof **cols))) {
        snprintf(err, errlen, "%s: out of memory", path);
        return EMBER_ENOMEM;
    }
    if (criteo_rows(cf, t, rows, err, errlen) != EMBER_OK) {
        free(*cols);
        *cols = NULL;
        return EMBER_EINVAL;
    }
    ctr_text_schema_criteo(rows, *cols, sc);
    return EMBER_OK;
}

int data_shuffle_train(const cfg_train *t, ctr_source *s, char *err, size_t errlen)
{
    if (!t->shuffle)
        return 0;
    return ctr_source_shuffle(s, t->model.seed ^ 0x5348554646u, err, errlen);
}
