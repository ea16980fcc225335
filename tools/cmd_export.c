/*
 * cmd_export.c: `ember export`, two ways out of a checkpoint:
 *   ember export CHECKPOINT OUT --quantize ENC [--per-table NAME=ENC ...]
 *       an inference bundle (ember_bundle_write; docs/inference.md);
 *   ember export CHECKPOINT --table T [--out FILE]
 *       one table as (key, row) records for serving (ember_export).
 * Both run on rank 0 alone under mpirun: they read the checkpoint, nothing
 * is collective.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ember.h"

#define MAX_PER_TABLE 1024

static void usage(FILE *f)
{
    fprintf(f, "usage: ember export CHECKPOINT OUT --quantize fp32|fp16|int8|int4 [--per-table NAME=ENC ...]\n"
               "       ember export CHECKPOINT --table T [--out FILE]\n"
               "  CHECKPOINT        a checkpoint root (its newest checkpoint) or one step-* folder\n"
               "  OUT --quantize E  an inference bundle in the folder OUT (which must not exist): every\n"
               "                    table's rows encoded row-wise as E (fp16; int8 and int4 with a scale\n"
               "                    and a bias per row; a dynamic table with its keys), the dense model\n"
               "                    and the model description;\n"
               "                    `ember predict OUT DATA` scores with it (docs/inference.md)\n"
               "  --per-table N=E   table N encoded as E instead (repeat for more tables)\n"
               "  --table T         one table as (key, row) records sorted by key: a fixed table's every\n"
               "                    row (the key is the row number), a dynamic table's every key that\n"
               "                    holds a row (docs/checkpoint-format.md, \"Exported rows\")\n"
               "  --out FILE        where --table writes (default T.ember-rows)\n");
}

int cmd_export(const tool_ctx *ctx, int argc, char **argv)
{
    const char *dir = NULL, *table = NULL, *out = NULL, *bundle = NULL, *quantize = NULL;
    const char *per[MAX_PER_TABLE];
    int32_t nper = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--table") && i + 1 < argc) {
            table = argv[++i];
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--quantize") && i + 1 < argc) {
            quantize = argv[++i];
        } else if (!strcmp(argv[i], "--per-table") && i + 1 < argc && nper < MAX_PER_TABLE) {
            per[nper++] = argv[++i];
        } else if (argv[i][0] != '-' && (!dir || !bundle)) {
            *(dir ? &bundle : &dir) = argv[i];
        } else {
            fprintf(ctx->err, "ember export: unexpected argument '%s' (ember export --help)\n", argv[i]);
            return 2;
        }
    }
    if (!dir || (!table && !(bundle && quantize)) || (table && (bundle || quantize || nper))) {
        usage(ctx->err);
        return 2;
    }
    if (ctx->rank != 0) /* under mpirun: rank 0 writes */
        return 0;
    if (bundle) {
        if (ember_bundle_write(dir, bundle, quantize, per, nper) != EMBER_OK) {
            fprintf(ctx->err, "ember export: %s\n", ember_errmsg(NULL));
            return 1;
        }
        printf("ember export: bundle %s (%s%s)\n", bundle, quantize, nper ? ", with per-table encodings" : "");
        return 0;
    }
    char path[4096];
    if (!out) {
        snprintf(path, sizeof path, "%s.ember-rows", table);
        out = path;
    }
    ember_checkpoint *ck = NULL;
    if (ember_checkpoint_open(dir, &ck) != EMBER_OK) {
        fprintf(ctx->err, "ember export: %s\n", ember_errmsg(NULL));
        return 1;
    }
    int st = ember_export(ck, table, out);
    if (st != EMBER_OK)
        fprintf(ctx->err, "ember export: %s\n", ember_errmsg(ck));
    ember_checkpoint_close(ck);
    if (st != EMBER_OK)
        return 1;
    printf("ember export: table \"%s\" -> %s\n", table, out);
    return 0;
}
