/*
 * data_open.c: a config's CTR data opened the same way by every command
 * (data_open.h).  The file's first bytes pick the reader, so a model can
 * train on a converted binary file and evaluate on the raw text, and a
 * binary file needs no schema at all: its header is one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_open.h"

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

int data_open_file(const config_file *cf, const cfg_train *t, const char *path, int32_t rank, int32_t world,
                   ctr_source **out, char *err, size_t errlen)
{
    if (ctr_file_is_binary(path))
        return ctr_source_binary(path, rank, world, out, err, errlen);
    if (cf && cf->train.schema.num_columns) {
        ctr_column *cols = malloc((size_t)cf->train.schema.num_columns * sizeof *cols);
        ctr_text_schema sc;
        if (!cols) {
            snprintf(err, errlen, "%s: out of memory", path);
            return -1;
        }
        config_file_text_schema(cf, cols, &sc);
        int rc = ctr_source_text(path, &sc, t->bad_lines, rank, world, out, err, errlen);
        free(cols);
        return rc;
    }
    int64_t rows[CTR_MAX_FEATURES];
    for (int f = 0; f < CTR_MAX_FEATURES; f++)
        rows[f] = t->hash_rows;
    if (cf && cf->num_features) {
        if (cf->num_features != 26) {
            snprintf(err, errlen, "%s: a Criteo TSV has 26 categorical features, the config has %d (data.schema "
                     "reads other layouts: docs/data.md)", cf->path, cf->num_features);
            return -1;
        }
        for (int f = 0; f < 26; f++) { /* a dynamic table (rows 0) reads whole 64-bit keys */
            const ember_table_config *tb = &cf->tables[cf->features[f].table];
            rows[f] = tb->kind == EMBER_TABLE_DYNAMIC ? 0 : tb->rows;
        }
    }
    return ctr_source_tsv(path, rows, t->bad_lines, rank, world, out, err, errlen);
}
