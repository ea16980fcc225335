/*
 * cmd_convert.c: `ember convert [--config FILE] IN OUT.bin`: text lines, by
 * the config's data.schema (docs/data.md) or Criteo TSV without one, to
 * ember's binary CTR format (docs/ctr-format.md), which `ember train` maps
 * instead of parsing text every epoch.
 *
 * The work is the library's (ember_convert, include/ember-data.h): lines
 * parsed by --threads threads; for Criteo, categoricals hashed into --rows
 * buckets, or kept whole as 64-bit keys where --rows says 0 (features of
 * dynamic tables: the file is then format version 2), bad lines skipped
 * and counted (or fatal with --bad fail), OUT written whole, fsync'd and
 * named (never through a link).  This file reads the options, calls it
 * and reports.  Under mpirun only rank 0 converts (the ranks would write
 * the same bytes to the same path).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ember-data.h"
#include "synth_args.h"


static void convert_usage(FILE *f)
{
    fprintf(f,
            "usage: ember convert [--config FILE | --model MODEL] IN OUT.bin [options]\n"
            "  converts text to ember's binary CTR format (docs/ctr-format.md): with --config, any\n"
            "  CSV or TSV (plain, gzip or zstd) by the file's data.schema (docs/data.md); with\n"
            "  --model, by the input schema a trained model carries; without either, Criteo TSV\n"
            "  (label, I1..I13, C1..C26, tab-separated)\n\n"
            "  --config FILE         the schema (data.schema), the tables' rows and data.bad_lines\n"
            "  --model MODEL         a checkpoint or bundle: its schema, rows and the standardize\n"
            "                        statistics of its training file, so OUT scores as IN does\n"
            "  --schema FILE         the same: a config file that may hold data.schema alone\n"
            "  --threads T           threads that parse lines (default: every core); the output\n"
            "                        is the same for any T\n"
            "  --rows N              Criteo: buckets of every categorical (default %d)\n"
            "  --rows N1,N2,...,N26  buckets of each of C1..C26; 0: the categorical's whole\n"
            "                        64-bit key, for a dynamic table (written as format version 2)\n"
            "  --bad skip|fail       bad lines: count and skip them (default), or stop at the first\n"
            "  --max-bad-fraction F  skipped bad lines above this fraction of the lines read (judged\n"
            "                        over at least the first 4096) stop the conversion, no OUT\n"
            "                        (default: data.max_bad_fraction, 0.01 without a config)\n"
            "  --max-bad-lines N     more than N skipped bad lines stop it (default:\n"
            "                        data.max_bad_lines, none without a config; -1: none)\n",
            EMBER_CRITEO_ROWS);
}

/* "N" or 26 comma-separated values, each 0 (64-bit keys) or in [1, 2^32];
 * 0, or -1 for a bad list. */
static int parse_rows(const char *s, int64_t rows[26])
{
    char buf[64];
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= sizeof buf || n == 26)
            return -1;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (synth_parse_int64(buf, 0, INT64_C(1) << 32, &rows[n++]))
            return -1;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (n == 1)
        for (int f = 1; f < 26; f++)
            rows[f] = rows[0];
    else if (n != 26)
        return -1;
    return 0;
}

/* A fraction in [0, 1]; 0, or -1. */
static int parse_fraction(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0 || v > 1)
        return -1;
    *out = v;
    return 0;
}

/* Which categoricals went out as 64-bit keys (format version 2). */
static void print_keyed(const int64_t rows[26])
{
    char list[26 * 5] = "";
    size_t k = 0;
    for (int f = 0; f < 26; f++)
        if (rows[f] == 0)
            k += (size_t)snprintf(list + k, sizeof list - k, "%sC%d", k ? "," : "", f + 1);
    if (k > 0)
        printf("ember convert: 64-bit keys (format version 2) for %s\n", list);
}

/* Distinct keys per sparse feature and the standardize statistics used. */
static void print_found(const ember_conversion *cv)
{
    for (int32_t f = 0; f < ember_conversion_num_features(cv); f++) {
        int64_t d;
        const char *name = ember_conversion_feature(cv, f, &d);
        int64_t rows = 0;
        double shared = ember_conversion_collisions(cv, f, &rows);
        char collide[160] = "";
        if (rows > 0 && shared == shared)
            snprintf(collide, sizeof collide, "; in %lld rows %s%.3g %% of them share a row with another key",
                     (long long)rows, d > EMBER_DISTINCT_KEYS_CAP ? "at least " : "about ", 100.0 * shared);
        else if (rows == 0 && d >= 0)
            snprintf(collide, sizeof collide, "; 64-bit keys, a row each (no collisions)");
        if (d > EMBER_DISTINCT_KEYS_CAP)
            printf("ember convert: feature %s: more than %lld distinct keys%s\n", name,
                   (long long)EMBER_DISTINCT_KEYS_CAP, collide);
        else if (d >= 0)
            printf("ember convert: feature %s: %lld distinct keys%s\n", name, (long long)d, collide);
    }
    for (int32_t c = 0; c < ember_conversion_num_standardized(cv); c++) {
        double mean, std;
        const char *name = ember_conversion_standardized(cv, c, &mean, &std);
        printf("ember convert: field %s: standardize with mean %.17g std %.17g\n", name, mean, std);
    }
}

int cmd_convert(const tool_ctx *ctx, int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *config = NULL, *model = NULL;
    int64_t rows[26], threads = 0, max_bad_lines = -2;
    double max_bad_fraction = -1;
    int rows_set = 0, bad_set = 0, policy_fail = 0;
    for (int f = 0; f < 26; f++)
        rows[f] = EMBER_CRITEO_ROWS;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            convert_usage(stdout);
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (in && out) {
                fprintf(ctx->err, "ember convert: more than two files ('%s')\n", arg);
                return 2;
            }
            *(in ? &out : &in) = arg;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
        if (nlen == 6 && !strncmp(arg, "--rows", 6)) {
            rows_set = 1;
            if (!val || parse_rows(val, rows)) {
                fprintf(ctx->err, "ember convert: --rows takes N or 26 values N1,...,N26, each in [1, 2^32] or 0 "
                                "(64-bit keys)\n");
                return 2;
            }
        } else if (nlen == 5 && !strncmp(arg, "--bad", 5)) {
            if (!val || (strcmp(val, "skip") && strcmp(val, "fail"))) {
                fprintf(ctx->err, "ember convert: --bad takes skip or fail\n");
                return 2;
            }
            policy_fail = !strcmp(val, "fail");
            bad_set = 1;
        } else if ((nlen == 8 && !strncmp(arg, "--config", 8)) || (nlen == 8 && !strncmp(arg, "--schema", 8))) {
            if (!val) {
                fprintf(ctx->err, "ember convert: %.8s takes a file\n", arg);
                return 2;
            }
            config = val;
        } else if (nlen == 7 && !strncmp(arg, "--model", 7)) {
            if (!val) {
                fprintf(ctx->err, "ember convert: --model takes a checkpoint or a bundle\n");
                return 2;
            }
            model = val;
        } else if (nlen == 18 && !strncmp(arg, "--max-bad-fraction", 18)) {
            if (!val || parse_fraction(val, &max_bad_fraction)) {
                fprintf(ctx->err, "ember convert: --max-bad-fraction takes a number in [0, 1]\n");
                return 2;
            }
        } else if (nlen == 15 && !strncmp(arg, "--max-bad-lines", 15)) {
            if (!val || synth_parse_int64(val, -1, INT64_MAX, &max_bad_lines)) {
                fprintf(ctx->err, "ember convert: --max-bad-lines takes an integer >= -1 (-1: no limit)\n");
                return 2;
            }
        } else if (nlen == 9 && !strncmp(arg, "--threads", 9)) {
            if (!val || synth_parse_int64(val, 1, 256, &threads)) {
                fprintf(ctx->err, "ember convert: --threads takes an integer in [1, 256]\n");
                return 2;
            }
        } else {
            fprintf(ctx->err, "ember convert: unknown option '%s' (ember convert --help)\n", arg);
            return 2;
        }
        if (!eq)
            i++;
    }
    if (!in || !out) {
        fprintf(ctx->err, "ember convert: need an input and an output file\n");
        convert_usage(ctx->err);
        return 2;
    }
    if (ctx->rank != 0) /* main() agrees on rank 0's status */
        return 0;
    ember_convert_config c = ember_convert_config_default();
    c.config = config;
    c.model = model;
    c.criteo_rows = rows_set ? rows : NULL;
    c.bad_lines = bad_set ? policy_fail : -1;
    c.threads = (int32_t)threads;
    c.max_bad_fraction = max_bad_fraction;
    c.max_bad_lines = max_bad_lines;
    ember_conversion *cv = NULL;
    int rc = ember_convert(in, out, &c, &cv);
    ember_reader_counts st = {0, 0, 0, ""};
    if (cv)
        ember_conversion_stats(cv, &st);
    if (rc != EMBER_OK) {
        tool_local_error(ctx, "convert", "%s", cv ? ember_errmsg(cv) : ember_errmsg(NULL));
        if (st.first_bad[0])
            fprintf(stderr, "ember convert: first bad line: %s\n", st.first_bad);
        ember_conversion_destroy(cv);
        return 1;
    }
    printf("ember convert: wrote %lld samples to %s (%lld lines read, %lld bad lines skipped)\n",
           (long long)st.samples, out, (long long)st.lines, (long long)st.bad_lines);
    if (st.first_bad[0])
        printf("ember convert: first bad line: %s\n", st.first_bad);
    if (!config && !model)
        print_keyed(rows);
    print_found(cv);
    ember_conversion_destroy(cv);
    return 0;
}
