/*
 * cmd_inspect.c: `ember inspect DIR [--json] [--step S]`: what a checkpoint
 * holds (docs/training.md, "Checkpoints and resume"; the bytes in
 * docs/checkpoint-format.md), or a bundle of `ember export`.
 *
 * DIR is a checkpoint root (its newest complete checkpoint, or step S) or
 * one step-* folder.  Opening verifies every file's checksums; a failure
 * prints the library's message (file and part) and exits 1.  What is
 * reported is the library's (ember.h, "checkpoints: what they hold"): per
 * table its value and state statistics, its rows never touched and a
 * content digest independent of the layout; per blob its size and XXH64,
 * decoded for `ember train`'s own blobs.  This file parses the options and
 * prints, as text or one JSON object.  Not collective: under mpirun every
 * rank would print the same, so only rank 0's output is kept (tool_ctx.h).
 * `ember inspect --samples N FILE` is inspect_data.c.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "commands.h"
#include "ember.h"

static void inspect_usage(FILE *f)
{
    fprintf(f, "usage: ember inspect DIR [--json] [--step S]\n"
               "       ember inspect --samples N|all FILE [--config CFG]\n"
               "  the samples of a data file as JSON lines (binary, or text by CFG's data.schema)\n"
               "  what a checkpoint holds: manifest, files (checksums verified), tables (size,\n"
               "  optimizer, placement, value and state statistics, rows never touched, a content\n"
               "  digest), blobs.  DIR: a checkpoint root (its newest complete checkpoint, or\n"
               "  --step S) or one step-* folder; or a bundle of `ember export` (its tables, a\n"
               "  dynamic table's keys, and files, checksums verified).\n\n"
               "  --json     one JSON object\n"
               "  --step S   the checkpoint of step S under the root DIR\n");
}

/* A bundle (ember export): every file verified, then its tables and files. */
static int inspect_bundle(const tool_ctx *ctx, const char *dir, int json)
{
    char *report = NULL;
    if (ember_bundle_inspect(dir, &report) != EMBER_OK) {
        fprintf(ctx->err, "ember inspect: %s\n", ember_errmsg(NULL));
        return 1;
    }
    if (json) {
        printf("%s\n", report);
        fflush(stdout);
        free(report);
        return 0;
    }
    json_t *r = json_loads(report, 0, NULL);
    free(report);
    json_t *tables = json_object_get(r, "tables"), *dense = json_object_get(r, "dense");
    printf("bundle %s: %d table%s, %lld dense parameters (files verified)\n", dir, (int)json_array_size(tables),
           json_array_size(tables) == 1 ? "" : "s",
           (long long)(json_integer_value(json_object_get(dense, "bytes")) / 4));
    printf("tables:\n");
    for (size_t i = 0; i < json_array_size(tables); i++) {
        json_t *e = json_array_get(tables, i), *keys = json_object_get(e, "keys");
        printf("  %s: %lld %sx %lld, %s, %-20s %12lld bytes  xxh3 %016llx  ok\n",
               json_string_value(json_object_get(e, "name")),
               (long long)json_integer_value(json_object_get(e, "rows")), keys ? "keys (dynamic) " : "",
               (long long)json_integer_value(json_object_get(e, "dim")),
               json_string_value(json_object_get(e, "encoding")), json_string_value(json_object_get(e, "file")),
               (long long)json_integer_value(json_object_get(e, "bytes")),
               (unsigned long long)json_integer_value(json_object_get(e, "xxh3")));
        if (keys) /* a dynamic table: its keys, the row of key i is row i */
            printf("    its keys: %-20s %12lld bytes  xxh3 %016llx  ok\n",
                   json_string_value(json_object_get(keys, "file")),
                   (long long)json_integer_value(json_object_get(keys, "bytes")),
                   (unsigned long long)json_integer_value(json_object_get(keys, "xxh3")));
    }
    printf("dense: %-20s %12lld bytes  xxh3 %016llx  ok\n", json_string_value(json_object_get(dense, "file")),
           (long long)json_integer_value(json_object_get(dense, "bytes")),
           (unsigned long long)json_integer_value(json_object_get(dense, "xxh3")));
    fflush(stdout);
    json_decref(r);
    return 0;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *hex(uint64_t v)
{
    char b[20];
    snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
    return json_string(b);
}

/* A blob's line and object. */
static void report_blob(const ember_checkpoint *ck, int32_t rank, const char *name, int json, json_t *arr)
{
    ember_blob_summary b;
    ember_checkpoint_blob_summary(ck, rank, name, &b);
    if (json) {
        json_t *o = json_pack("{sssIso}", "name", name, "bytes", (json_int_t)b.bytes, "digest", hex(b.digest));
        if (rank >= 0)
            json_object_set_new(o, "rank", json_integer(rank));
        if (b.content[0])
            json_object_set_new(o, "content", json_loads(b.content, 0, NULL));
        json_array_append_new(arr, o);
        return;
    }
    char who[32] = "";
    if (rank >= 0)
        snprintf(who, sizeof who, " (rank %d)", (int)rank);
    printf("  %-20s%-10s %10lld bytes  digest %016llx%s%s\n", name, who, (long long)b.bytes,
           (unsigned long long)b.digest, b.text[0] ? "  " : "", b.text);
}

/* The blobs, saved once then per rank. */
static void report_blobs(const ember_checkpoint *ck, const ember_checkpoint_summary *cs, int json, json_t *out)
{
    json_t *barr = json_array(), *rarr = json_array();
    if (!json)
        printf("blobs:\n");
    for (int32_t i = 0; i < cs->num_blobs; i++)
        report_blob(ck, -1, ember_checkpoint_blob_name(ck, 0, i), json, barr);
    for (int32_t r = 0; r < cs->num_files; r++)
        for (int32_t i = 0; i < cs->num_rank_blobs; i++)
            report_blob(ck, r, ember_checkpoint_blob_name(ck, 1, i), json, rarr);
    if (!json && !cs->num_blobs && !cs->num_rank_blobs)
        printf("  (none)\n");
    json_object_set_new(out, "blobs", barr);
    json_object_set_new(out, "rank_blobs", rarr);
}

/* One table as text. */
static void print_table(const ember_table_config *tc, const ember_table_summary *st, int64_t opt_steps)
{
    char where[64];
    if (tc->placement == EMBER_PLACE_TABLE)
        snprintf(where, sizeof where, "table on rank %d", (int)tc->owner);
    else
        snprintf(where, sizeof where, "%s", ember_placement_name(tc->placement));
    printf("  %s: %lld x %d %s, %s (step %lld), %s, init %s %g\n", tc->name, (long long)st->rows, (int)tc->dim,
           ember_precision_name(tc->precision), ember_optimizer_name(tc->optimizer.kind), (long long)opt_steps, where,
           ember_init_name(tc->init), (double)tc->init_value);
    if (tc->kind == EMBER_TABLE_DYNAMIC) {
        printf("    dynamic: %lld of %lld rows hold keys (%.1f%%; fullest rank %lld of %lld); admit after %d, "
               "evict %s\n", (long long)st->resident, (long long)st->rows,
               100.0 * (double)st->resident / (double)st->rows, (long long)st->most_on_a_rank,
               (long long)tc->capacity, (int)tc->admit_after, ember_evict_name(tc->evict));
        printf("    keys: %lld admitted, %lld evicted, %lld expired (use counts %lld), %lld ids not admitted\n",
               (long long)st->admitted, (long long)st->evicted, (long long)st->expired,
               (long long)st->evicted_count_sum, (long long)st->not_admitted);
        printf("    values (every slot): L2 norm %.6g, mean row norm %.6g, max |v| %.6g\n", st->norm,
               st->mean_row_norm, st->max_abs);
    } else {
        printf("    values: L2 norm %.6g, mean row norm %.6g, max |v| %.6g; %lld of %lld rows never touched "
               "(%.1f%%)\n", st->norm, st->mean_row_norm, st->max_abs, (long long)st->untouched_rows,
               (long long)st->rows, 100.0 * (double)st->untouched_rows / (double)st->rows);
    }
    if (st->zero_values > 0)
        printf("    zeros: %lld of %lld values (%.1f%%); %lld rows entirely\n", (long long)st->zero_values,
               (long long)(st->rows * tc->dim), 100.0 * (double)st->zero_values / (double)(st->rows * tc->dim),
               (long long)st->zero_rows);
    if (st->state_floats > 0)
        printf("    state: %d %s per row, L2 norm %.6g, max |s| %.6g\n", (int)st->state_floats,
               tc->state_precision == EMBER_PRECISION_FP32 ? "floats" : ember_precision_name(tc->state_precision),
               st->state_norm, st->state_max_abs);
    printf("    digest %016llx\n", (unsigned long long)st->digest);
}

/* One table as a JSON object. */
static json_t *table_json(const ember_table_config *tc, const ember_table_summary *st, int64_t opt_steps)
{
    json_t *o = json_pack("{sssIsisssIsssisi}", "name", tc->name, "rows", (json_int_t)st->rows, "dim", (int)tc->dim,
                          "optimizer", ember_optimizer_name(tc->optimizer.kind), "optimizer_steps",
                          (json_int_t)opt_steps, "placement", ember_placement_name(tc->placement), "owner",
                          (int)tc->owner, "state_floats", (int)st->state_floats);
    json_object_set_new(o, "precision", json_string(ember_precision_name(tc->precision)));
    json_object_set_new(o, "state_precision", json_string(ember_precision_name(tc->state_precision)));
    json_object_set_new(o, "init", json_pack("{ssso}", "kind", ember_init_name(tc->init), "value",
                                             num((double)tc->init_value)));
    json_object_set_new(o, "norm", num(st->norm));
    json_object_set_new(o, "mean_row_norm", num(st->mean_row_norm));
    json_object_set_new(o, "max_abs", num(st->max_abs));
    json_object_set_new(o, "untouched_rows", st->untouched_rows >= 0 ? json_integer(st->untouched_rows) : json_null());
    json_object_set_new(o, "zero_values", json_integer(st->zero_values));
    json_object_set_new(o, "zero_rows", json_integer(st->zero_rows));
    json_object_set_new(o, "state_norm", num(st->state_norm));
    json_object_set_new(o, "state_max_abs", num(st->state_max_abs));
    json_object_set_new(o, "digest", hex(st->digest));
    if (tc->kind == EMBER_TABLE_DYNAMIC)
        json_object_set_new(o, "dynamic", json_pack("{sIsIsIsIsIsIsIsIsisssi}", "capacity_per_rank",
            (json_int_t)tc->capacity, "resident", (json_int_t)st->resident, "most_on_a_rank",
            (json_int_t)st->most_on_a_rank, "admitted", (json_int_t)st->admitted, "evicted",
            (json_int_t)st->evicted, "expired", (json_int_t)st->expired, "not_admitted",
            (json_int_t)st->not_admitted, "evicted_count_sum", (json_int_t)st->evicted_count_sum,
            "admit_after", (int)tc->admit_after, "evict", ember_evict_name(tc->evict), "sketch_width",
            (int)st->sketch_width));
    return o;
}

/* The tables: 0, or 1 after the message. */
static int report_tables(const tool_ctx *ctx, const ember_checkpoint *ck, int64_t opt_steps, int json, json_t *out)
{
    json_t *tables = json_array();
    json_object_set_new(out, "tables", tables);
    if (!json)
        printf("tables:\n");
    for (int32_t t = 0; t < ember_checkpoint_num_tables(ck); t++) {
        ember_table_config tc;
        ember_table_summary st;
        ember_checkpoint_table(ck, t, &tc);
        if (ember_checkpoint_table_summary(ck, t, &st) != EMBER_OK) {
            fprintf(ctx->err, "ember inspect: %s\n", ember_errmsg(ck));
            return 1;
        }
        if (json)
            json_array_append_new(tables, table_json(&tc, &st, opt_steps));
        else
            print_table(&tc, &st, opt_steps);
    }
    return 0;
}

/* The header and the files. */
static void report_head(const ember_checkpoint *ck, const ember_checkpoint_summary *cs, int json, json_t *out)
{
    const int32_t W = ember_checkpoint_world(ck);
    if (json) {
        json_object_set_new(out, "path", json_string(ember_checkpoint_path(ck)));
        json_object_set_new(out, "step", json_integer(ember_checkpoint_step(ck)));
        json_object_set_new(out, "world", json_integer(W));
        json_object_set_new(out, "ember_version", cs->ember_version ? json_string(cs->ember_version) : json_null());
        json_object_set_new(out, "seed", hex(cs->seed));
        json_object_set_new(out, "optimizer_steps", json_integer(cs->optimizer_steps));
    } else {
        printf("checkpoint %s: step %lld, saved by %d rank%s, ember %s, seed %016llx, optimizer steps %lld\n",
               ember_checkpoint_path(ck), (long long)ember_checkpoint_step(ck), (int)W, W > 1 ? "s" : "",
               cs->ember_version ? cs->ember_version : "?", (unsigned long long)cs->seed,
               (long long)cs->optimizer_steps);
        printf("files (checksums verified):\n");
    }
    json_t *files = json_array();
    for (int32_t i = 0; i < cs->num_files; i++) {
        const char *name;
        int64_t bytes;
        uint64_t sum;
        ember_checkpoint_file(ck, i, &name, &bytes, &sum);
        if (json)
            json_array_append_new(files, json_pack("{sssIsosb}", "name", name, "bytes", (json_int_t)bytes,
                                                   "checksum", hex(sum), "verified", 1));
        else
            printf("  %-24s %12lld bytes  xxh3 %016llx  ok\n", name, (long long)bytes, (unsigned long long)sum);
    }
    json_object_set_new(out, "files", files);
}

/* The dense model `ember train` saved, whole or in pipeline pieces, as one
 * vector (nothing for a checkpoint of another program). */
static void report_dense(const ember_checkpoint *ck, int json, json_t *out)
{
    ember_dense_summary d;
    if (ember_checkpoint_dense_summary(ck, &d) != EMBER_OK)
        return;
    if (json) {
        json_object_set_new(out, "dense", json_pack("{sIsisisfsoso}", "params", (json_int_t)d.params,
                                                    "state_floats", d.state_floats, "pieces", d.pieces, "norm",
                                                    d.norm, "params_digest", hex(d.params_digest), "state_digest",
                                                    hex(d.state_digest)));
        return;
    }
    char how[48] = "whole";
    if (d.pieces)
        snprintf(how, sizeof how, "in pieces from %d rank%s", (int)d.pieces, d.pieces > 1 ? "s" : "");
    printf("dense model (%s): %lld parameters, L2 norm %.6g, digest %016llx; optimizer state %d float%s a "
           "parameter, digest %016llx\n", how, (long long)d.params, d.norm, (unsigned long long)d.params_digest,
           (int)d.state_floats, d.state_floats == 1 ? "" : "s", (unsigned long long)d.state_digest);
}

/* A checkpoint: 0, or 1 after the message. */
static int inspect_checkpoint(const tool_ctx *ctx, const char *path, int json)
{
    ember_checkpoint *ck = NULL;
    if (ember_checkpoint_open(path, &ck) != EMBER_OK) {
        fprintf(ctx->err, "ember inspect: %s\n", ember_errmsg(NULL));
        return 1;
    }
    ember_checkpoint_summary cs;
    ember_checkpoint_summarize(ck, &cs);
    json_t *out = json_object();
    report_head(ck, &cs, json, out);
    int status = report_tables(ctx, ck, cs.optimizer_steps, json, out);
    if (status == 0) {
        report_dense(ck, json, out);
        report_blobs(ck, &cs, json, out);
        if (json) {
            char *s = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
            if (s)
                printf("%s\n", s);
            free(s);
        }
    }
    fflush(stdout);
    json_decref(out);
    ember_checkpoint_close(ck);
    return status;
}

/* The options: 0 (a DIR or FILE in *dir), -1 after --help, or 2. */
static int parse(const tool_ctx *ctx, int argc, char **argv, const char **dir, const char **config, int *json,
                 int64_t *samples, long long *step)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            inspect_usage(stdout);
            return -1;
        } else if (!strcmp(a, "--json")) {
            *json = 1;
        } else if (!strcmp(a, "--step") || !strncmp(a, "--step=", 7)) {
            const char *v = a[6] == '=' ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
            char *end;
            *step = v && *v ? strtoll(v, &end, 10) : -1;
            if (!v || !*v || *end || *step < 0 || *step > 999999999999LL) {
                fprintf(ctx->err, "ember inspect: bad value for --step: '%s'\n", v ? v : "(missing)");
                return 2;
            }
        } else if (!strcmp(a, "--samples") || !strcmp(a, "--config")) {
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            if (!v) {
                fprintf(ctx->err, "ember inspect: %s needs a value\n", a);
                return 2;
            }
            if (a[2] == 'c') {
                *config = v;
                continue;
            }
            char *end;
            *samples = !strcmp(v, "all") ? -1 : strtoll(v, &end, 10);
            if (strcmp(v, "all") && (!*v || *end || *samples < 0)) {
                fprintf(ctx->err, "ember inspect: --samples takes a count or all, got '%s'\n", v);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(ctx->err, "ember inspect: unknown option '%s' (ember inspect --help)\n", a);
            return 2;
        } else if (!*dir) {
            *dir = a;
        } else {
            fprintf(ctx->err, "ember inspect: unexpected argument '%s' (ember inspect --help)\n", a);
            return 2;
        }
    }
    if (!*dir) {
        inspect_usage(ctx->err);
        return 2;
    }
    return 0;
}

int cmd_inspect(const tool_ctx *ctx, int argc, char **argv)
{
    const char *dir = NULL, *config = NULL;
    int json = 0;
    int64_t samples = -2; /* -1: all */
    long long step = -1;
    int rc = parse(ctx, argc, argv, &dir, &config, &json, &samples, &step);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (samples != -2)
        return inspect_samples(ctx, dir, config, samples);
    struct stat sb;
    if (step < 0 && stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* a data file, or a checkpoint's own file */
        fprintf(ctx->err, "ember inspect: %s: a file (%lld bytes), not a checkpoint or bundle folder%s\n", dir,
                (long long)sb.st_size, S_ISREG(sb.st_mode) ? " (ember inspect --samples N FILE shows a data file's "
                                                              "samples)" : "");
        return 1;
    }
    if (step < 0 && ember_bundle_is(dir))
        return inspect_bundle(ctx, dir, json);
    char path[4096];
    if (step >= 0)
        snprintf(path, sizeof path, "%s/step-%012lld", dir, step);
    else
        snprintf(path, sizeof path, "%s", dir);
    return inspect_checkpoint(ctx, path, json);
}
