/*
 * cmd_predict.c: `ember predict CHECKPOINT DATA [--out FILE]`: one score per
 * sample of a data file (text read with the model's input schema, or
 * ember's binary format) or of the built-in task's held-out stream, with
 * AUC and log loss against the labels
 * (docs/inference.md).  The work is the library's (ember_predict, ember.h:
 * the predictor, the data, the scores gathered in data order and written);
 * this file reads the options, calls it and prints the result as a line
 * of text or of JSON.  Under mpirun every rank scores its share; rank 0
 * prints (tool_ctx.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ember.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: ember predict CHECKPOINT DATA [--out FILE] [--format f32|tsv|csv] [--id COLUMN]\n"
               "                     [--samples N] [--threads T] [--max-bad-fraction F] [--json]\n"
               "  CHECKPOINT    a checkpoint of `ember train` (a root: its newest; or one step-* folder),\n"
               "                or a bundle of `ember export --quantize`\n"
               "  DATA          a text file, read with the model's own input schema as training read it\n"
               "                (CSV or TSV by the training config's data.schema, plain, gzip or zstd;\n"
               "                Criteo TSV for a model trained on it or written before models carried\n"
               "                their schema), an ember binary file (`ember convert`), or `synthetic`:\n"
               "                the held-out stream of the built-in task the model was trained on.\n"
               "                A text file may lack the label column: it is scored without AUC\n"
               "  --out FILE    the scores, one per sample in the data's order\n"
               "  --format F    f32: little-endian float32 (default); tsv: index, score, label per line;\n"
               "                csv: a header, then id,score,label (no label without labels). The index\n"
               "                and id are the sample's line in a text file, else its number from 0\n"
               "  --id COLUMN   csv: name each score by this column's field of its line (a header\n"
               "                field of the text file, or a column of the model's schema)\n"
               "  --samples N   score the first N samples (synthetic: default 65536; files: all)\n"
               "  --threads T   threads per rank for the embedding work (default 1)\n"
               "  --max-bad-fraction F  text: bad lines above this share of the lines read stop it,\n"
               "                naming the first (default 0.01; 1: skip them all, counted)\n"
               "  --json        one JSON line instead of text\n"
               "Prints the samples scored, AUC and log loss against the data's labels. Under mpirun\n"
               "every rank scores its share; at the training world size the scores are the ones\n"
               "`ember train` evaluated, bit for bit (docs/inference.md).\n");
}

int cmd_predict(const tool_ctx *ctx, int argc, char **argv)
{
    const char *ck = NULL, *data = NULL, *out = NULL, *id = NULL;
    int tsv = 0, csv = 0, json = 0;
    double max_bad = 0.01;
    int64_t samples = -1, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            if (ctx->rank == 0)
                usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            const char *f = argv[++i];
            if (strcmp(f, "f32") && strcmp(f, "tsv") && strcmp(f, "csv")) {
                fprintf(ctx->err, "ember predict: --format %s: expected f32, tsv or csv\n", f);
                return 2;
            }
            tsv = !strcmp(f, "tsv");
            csv = !strcmp(f, "csv");
        } else if (!strcmp(argv[i], "--id") && i + 1 < argc) {
            id = argv[++i];
        } else if (!strcmp(argv[i], "--max-bad-fraction") && i + 1 < argc) {
            char *end;
            max_bad = strtod(argv[++i], &end);
            if (*end || !(max_bad >= 0 && max_bad <= 1)) {
                fprintf(ctx->err, "ember predict: --max-bad-fraction %s: expected a number in [0, 1]\n", argv[i]);
                return 2;
            }
        } else if ((!strcmp(argv[i], "--samples") || !strcmp(argv[i], "--threads")) && i + 1 < argc) {
            char *end;
            long long v = strtoll(argv[i + 1], &end, 10);
            if (*end || v < 1) {
                fprintf(ctx->err, "ember predict: %s %s: expected a positive integer\n", argv[i], argv[i + 1]);
                return 2;
            }
            *(argv[i][2] == 's' ? &samples : &threads) = v;
            i++;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] != '-' && (!ck || !data)) {
            *(ck ? &data : &ck) = argv[i];
        } else {
            fprintf(ctx->err, "ember predict: unexpected argument '%s' (ember predict --help)\n", argv[i]);
            return 2;
        }
    }
    if (!ck || !data) {
        if (ctx->rank == 0)
            usage(ctx->err);
        return 2;
    }
    if (id && (!csv || !out)) {
        fprintf(ctx->err, "ember predict: --id names the scores of --out FILE --format csv\n");
        return 2;
    }
    ember_predict_config c = ember_predict_config_default();
    c.out = out;
    c.tsv = tsv;
    c.csv = csv;
    c.id = id;
    c.max_bad_fraction = max_bad;
    c.samples = samples > 0 ? samples : 0;
    c.threads = (int32_t)threads;
    c.world = ctx->world;
    ember_prediction res;
    int st = ember_predict(ck, data, &c, &res); /* collective; failures agreed */
    if (st != EMBER_OK)
        fprintf(ctx->err, "ember predict: %s\n", ember_errmsg(NULL));
    if (!res.scored)
        return 1;
    if (json) {
        char *text = ember_prediction_json(&res);
        if (text)
            printf("%s\n", text);
        free(text);
    } else {
        if (res.bad_lines > 0)
            printf("skipped %lld bad lines (--max-bad-fraction 0 stops at the first and names it)\n",
                   (long long)res.bad_lines);
        if (res.labeled)
            printf("scored %lld samples in %.2f s: AUC %.4f, log loss %.4f%s%s\n", (long long)res.samples,
                   res.seconds, res.auc, res.logloss, res.out ? "; scores in " : "", res.out ? res.out : "");
        else
            printf("scored %lld samples in %.2f s (no labels: no AUC)%s%s\n", (long long)res.samples, res.seconds,
                   res.out ? "; scores in " : "", res.out ? res.out : "");
    }
    return st != EMBER_OK;
}
