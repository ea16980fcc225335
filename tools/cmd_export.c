/*
 * cmd_export.c: `ember export CHECKPOINT --table T [--out FILE]`: one table
 * of a checkpoint as (key, row) records for serving (ember_export).
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ember.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: ember export CHECKPOINT --table T [--out FILE]\n"
               "  CHECKPOINT   a checkpoint root (its newest checkpoint) or one step-* folder\n"
               "  --table T    the table to export\n"
               "  --out FILE   where to write (default T.ember-rows)\n"
               "Writes (key, row) records sorted by key: a fixed table's every row (the key is the\n"
               "row number), a dynamic table's every key that holds a row; the format is in\n"
               "docs/checkpoint-format.md (\"Exported rows\").\n");
}

int cmd_export(const tool_ctx *ctx, int argc, char **argv)
{
    const char *dir = NULL, *table = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--table") && i + 1 < argc) {
            table = argv[++i];
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (argv[i][0] != '-' && !dir) {
            dir = argv[i];
        } else {
            fprintf(ctx->err, "ember export: unexpected argument '%s' (ember export --help)\n", argv[i]);
            return 2;
        }
    }
    if (!dir || !table) {
        usage(ctx->err);
        return 2;
    }
    char path[4096];
    if (!out) {
        snprintf(path, sizeof path, "%s.ember-rows", table);
        out = path;
    }
    if (ctx->rank != 0) /* under mpirun: rank 0 writes */
        return 0;
    ember_checkpoint *ck = NULL;
    if (ember_checkpoint_open(dir, &ck) != EMBER_OK) {
        fprintf(ctx->err, "ember export: %s\n", ember_data_errmsg());
        return 1;
    }
    int st = ember_export(ck, table, out);
    ember_checkpoint_close(ck);
    if (st != EMBER_OK) {
        fprintf(ctx->err, "ember export: %s\n", ember_data_errmsg());
        return 1;
    }
    printf("ember export: table \"%s\" -> %s\n", table, out);
    return 0;
}
