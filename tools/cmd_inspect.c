/*
 * cmd_inspect.c: `ember inspect DIR [--json] [--step S]`: what a checkpoint
 * holds (docs/training.md, "Checkpoints and resume"; the bytes in
 * docs/checkpoint-format.md).
 *
 * DIR is a checkpoint root (its newest complete checkpoint, or step S) or
 * one step-* folder.  Opening verifies every file's checksums; a failure
 * prints the library's message (file and part) and exits 1.  Then, per
 * table, statistics over its canonical rows (ckpt_read_rows assembles them
 * from the saving ranks' files whatever the placement), streamed in chunks
 * of about 4 MiB so that no table is ever whole in memory:
 *
 *   values    L2 norm over the table, mean row norm, max |value|, and the
 *             rows never touched: those equal to their initial values bit
 *             for bit (recomputed from init kind, value and rng_key)
 *   state     L2 norm and max |value| of the optimizer state
 *   digest    XXH64 over each row's values then its state, in row order:
 *             independent of the file layout, world and placement, so two
 *             checkpoints of the same model state have the same digests
 *
 * and per blob its size and XXH64, decoded for `ember train`'s own blobs
 * (src/train/checkpoint.c).  Not collective: under mpirun every rank would print the
 * same, so only rank 0's output is kept (tool_ctx.h).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "commands.h"
#include "infer/bundle.h"
#include "table/init.h"

static void inspect_usage(FILE *f)
{
    fprintf(f, "usage: ember inspect DIR [--json] [--step S]\n"
               "       ember inspect --samples N|all FILE [--config CFG]\n"
               "  the samples of a data file as JSON lines (binary, or text by CFG's data.schema)\n"
               "  what a checkpoint holds: manifest, files (checksums verified), tables (size,\n"
               "  optimizer, placement, value and state statistics, rows never touched, a content\n"
               "  digest), blobs.  DIR: a checkpoint root (its newest complete checkpoint, or\n"
               "  --step S) or one step-* folder; or a bundle of `ember export` (its tables and\n"
               "  files, checksums verified).\n\n"
               "  --json     one JSON object\n"
               "  --step S   the checkpoint of step S under the root DIR\n");
}

/* A bundle (ember export): every file verified, then its tables and files. */
static int inspect_bundle(const tool_ctx *ctx, const char *dir, int json)
{
    ember_bundle *b = NULL;
    char err[1024];
    if (bundle_open(dir, &b, err, sizeof err) != EMBER_OK) {
        fprintf(ctx->err, "ember inspect: %s\n", err);
        return 1;
    }
    const json_t *man = bundle_manifest(b); /* read and checked by bundle_open */
    json_t *tables = json_object_get(man, "tables"), *dense = json_object_get(man, "dense");
    int64_t dense_bytes = 0;
    bundle_dense(b, &dense_bytes);
    if (json) {
        json_t *out = json_pack("{sssssOsOsO}", "path", dir, "format", "ember-bundle", "version",
                                json_object_get(man, "version"), "tables", tables, "dense", dense);
        json_object_set_new(out, "verified", json_true());
        char *txt = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (txt)
            printf("%s\n", txt);
        free(txt);
        json_decref(out);
    } else {
        printf("bundle %s: %d table%s, %lld dense parameters (files verified)\n", dir, (int)json_array_size(tables),
               json_array_size(tables) == 1 ? "" : "s", (long long)(dense_bytes / 4));
        printf("tables:\n");
        for (size_t i = 0; i < json_array_size(tables); i++) {
            json_t *e = json_array_get(tables, i);
            printf("  %s: %lld x %lld, %s, %-20s %12lld bytes  xxh3 %016llx  ok\n",
                   json_string_value(json_object_get(e, "name")),
                   (long long)json_integer_value(json_object_get(e, "rows")),
                   (long long)json_integer_value(json_object_get(e, "dim")),
                   json_string_value(json_object_get(e, "encoding")),
                   json_string_value(json_object_get(e, "file")),
                   (long long)json_integer_value(json_object_get(e, "bytes")),
                   (unsigned long long)json_integer_value(json_object_get(e, "xxh3")));
        }
        printf("dense: %-20s %12lld bytes  xxh3 %016llx  ok\n", json_string_value(json_object_get(dense, "file")),
               (long long)json_integer_value(json_object_get(dense, "bytes")),
               (unsigned long long)json_integer_value(json_object_get(dense, "xxh3")));
    }
    fflush(stdout);
    bundle_close(b);
    return 0;
}

typedef struct table_stats {
    double sumsq, row_norm_sum, max_abs;
    double state_sumsq, state_max_abs;
    int64_t untouched;
    uint64_t digest;
} table_stats;

/* Streams table t's rows in chunks.  0, or -1 with the message printed. */
static int table_scan(const tool_ctx *ctx, const ember_checkpoint *ck, int32_t t, table_stats *st)
{
    const ckpt_table_info *ti = ckpt_table(ck, t);
    const int64_t D = ti->dim, S = ti->state_floats;
    int64_t chunk = (INT64_C(1) << 20) / (D + S + 1);
    if (chunk < 1)
        chunk = 1;
    if (chunk > ti->rows)
        chunk = ti->rows;
    float *v = malloc((size_t)(chunk * D) * sizeof *v), *s = malloc((size_t)(chunk * S + 1) * sizeof *s);
    float *init = malloc((size_t)D * sizeof *init);
    XXH64_state_t *h = XXH64_createState();
    int rc = -1;
    memset(st, 0, sizeof *st);
    if (!v || !s || !init || !h) {
        fprintf(ctx->err, "ember inspect: out of memory for table \"%s\"\n", ti->name);
        goto out;
    }
    XXH64_reset(h, 0);
    for (int64_t first = 0; first < ti->rows; first += chunk) {
        int64_t n = ti->rows - first < chunk ? ti->rows - first : chunk;
        int e = ckpt_read_rows(ck, t, first, n, v, S > 0 ? s : NULL);
        if (e != EMBER_OK) {
            fprintf(ctx->err, "ember inspect: %s\n", ember_data_errmsg());
            goto out;
        }
        for (int64_t r = 0; r < n; r++) {
            const float *x = v + r * D, *y = s + r * S;
            double row = 0;
            for (int64_t j = 0; j < D; j++) {
                double a = fabs((double)x[j]);
                row += a * a;
                if (a > st->max_abs || isnan(a))
                    st->max_abs = a;
            }
            st->sumsq += row;
            st->row_norm_sum += sqrt(row);
            for (int64_t j = 0; j < S; j++) {
                double a = fabs((double)y[j]);
                st->state_sumsq += a * a;
                if (a > st->state_max_abs || isnan(a))
                    st->state_max_abs = a;
            }
            ember_init_row_values(ti->init, ti->init_value, ti->dim, ti->rng_key, first + r, init);
            if (!memcmp(init, x, (size_t)D * sizeof *x))
                st->untouched++;
            XXH64_update(h, x, (size_t)D * sizeof *x);
            if (S > 0)
                XXH64_update(h, y, (size_t)S * sizeof *y);
        }
    }
    st->digest = XXH64_digest(h);
    rc = 0;
out:
    XXH64_freeState(h);
    free(v);
    free(s);
    free(init);
    return rc;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *hex(uint64_t v)
{
    char b[20];
    snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
    return json_string(b);
}

/* What `ember train`'s own blobs say (src/train/checkpoint.c); NULL for others. */
static json_t *known_blob(const char *name, const void *p, int64_t bytes, char *text, size_t n)
{
    text[0] = '\0';
    json_t *j = NULL;
    if (!strcmp(name, "train.state") && bytes == 64) {
        int64_t v[8];
        memcpy(v, p, sizeof v);
        j = json_pack("{sIsIsIsI}", "step", (json_int_t)v[2], "samples", (json_int_t)v[3], "dense_params",
                      (json_int_t)v[4], "dense_optimizer_step", (json_int_t)v[5]);
        snprintf(text, n, "trainer step %lld, %lld samples, %lld dense parameters, dense optimizer step %lld",
                 (long long)v[2], (long long)v[3], (long long)v[4], (long long)v[5]);
    } else if ((!strcmp(name, "dense.params") || !strcmp(name, "dense.optim")) && bytes % 4 == 0) {
        double ss = 0;
        const float *f = p;
        for (int64_t i = 0; i < bytes / 4; i++) {
            float x;
            memcpy(&x, f + i, sizeof x);
            ss += (double)x * x;
        }
        j = json_pack("{sIso}", "floats", (json_int_t)(bytes / 4), "norm", num(sqrt(ss)));
        snprintf(text, n, "%lld floats, L2 norm %.6g", (long long)(bytes / 4), sqrt(ss));
    } else if (!strcmp(name, "data.position") && bytes == 48) {
        int64_t v[6];
        memcpy(v, p, sizeof v);
        j = json_pack("{sIsIsIsI}", "next", (json_int_t)v[2], "epochs", (json_int_t)v[3], "share_begin",
                      (json_int_t)v[4], "share_end", (json_int_t)v[5]);
        snprintf(text, n, "next sample %lld, epoch %lld, share [%lld, %lld)", (long long)v[2], (long long)v[3],
                 (long long)v[4], (long long)v[5]);
    }
    return j;
}

/* A blob's line and object. */
static void report_blob(const ember_checkpoint *ck, int32_t rank, const char *name, int json, json_t *arr)
{
    int64_t bytes = 0;
    const void *p = ember_checkpoint_blob(ck, rank, name, &bytes);
    if (!p) {
        bytes = 0;
        p = "";
    }
    uint64_t d = XXH64(p, (size_t)bytes, 0);
    char text[256];
    json_t *k = known_blob(name, p, bytes, text, sizeof text);
    if (json) {
        json_t *o = json_pack("{sssIso}", "name", name, "bytes", (json_int_t)bytes, "digest", hex(d));
        if (rank >= 0)
            json_object_set_new(o, "rank", json_integer(rank));
        if (k)
            json_object_set_new(o, "content", k);
        json_array_append_new(arr, o);
        return;
    }
    json_decref(k);
    char who[32] = "";
    if (rank >= 0)
        snprintf(who, sizeof who, " (rank %d)", (int)rank);
    printf("  %-20s%-10s %10lld bytes  digest %016llx%s%s\n", name, who, (long long)bytes, (unsigned long long)d,
           text[0] ? "  " : "", text);
}

int cmd_inspect(const tool_ctx *ctx, int argc, char **argv)
{
    const char *dir = NULL, *config = NULL;
    int json = 0;
    int64_t samples = -2; /* -1: all */
    long long step = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            inspect_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--step") || !strncmp(a, "--step=", 7)) {
            const char *v = a[6] == '=' ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
            char *end;
            step = v && *v ? strtoll(v, &end, 10) : -1;
            if (!v || !*v || *end || step < 0 || step > 999999999999LL) {
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
                config = v;
                continue;
            }
            char *end;
            samples = !strcmp(v, "all") ? -1 : strtoll(v, &end, 10);
            if (strcmp(v, "all") && (!*v || *end || samples < 0)) {
                fprintf(ctx->err, "ember inspect: --samples takes a count or all, got '%s'\n", v);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(ctx->err, "ember inspect: unknown option '%s' (ember inspect --help)\n", a);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(ctx->err, "ember inspect: unexpected argument '%s' (ember inspect --help)\n", a);
            return 2;
        }
    }
    if (!dir) {
        inspect_usage(ctx->err);
        return 2;
    }
    if (samples != -2)
        return inspect_samples(ctx, dir, config, samples);
    struct stat sb;
    if (step < 0 && stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* a data file, or a checkpoint's own file */
        fprintf(ctx->err, "ember inspect: %s: a file (%lld bytes), not a checkpoint or bundle folder%s\n", dir,
                (long long)sb.st_size, S_ISREG(sb.st_mode) ? " (ember inspect --samples N FILE shows a data file's "
                                                              "samples)" : "");
        return 1;
    }
    if (step < 0 && bundle_is(dir))
        return inspect_bundle(ctx, dir, json);
    char path[4096];
    if (step >= 0)
        snprintf(path, sizeof path, "%s/step-%012lld", dir, step);
    else
        snprintf(path, sizeof path, "%s", dir);
    ember_checkpoint *ck = NULL;
    if (ember_checkpoint_open(path, &ck) != EMBER_OK) {
        fprintf(ctx->err, "ember inspect: %s\n", ember_data_errmsg());
        return 1;
    }
    int status = 1;
    json_error_t jerr;
    json_t *man = json_loads(ckpt_manifest_text(ck), 0, &jerr), *out = json_object();
    const char *version = json_string_value(json_object_get(man, "ember_version"));
    json_t *blobs = json_object_get(man, "blobs"), *rank_blobs = json_object_get(man, "rank_blobs");
    const int32_t W = ember_checkpoint_world(ck), T = ckpt_num_tables(ck);

    if (json) {
        json_object_set_new(out, "path", json_string(ember_checkpoint_path(ck)));
        json_object_set_new(out, "step", json_integer(ember_checkpoint_step(ck)));
        json_object_set_new(out, "world", json_integer(W));
        json_object_set_new(out, "ember_version", version ? json_string(version) : json_null());
        json_object_set_new(out, "seed", hex(ckpt_seed(ck)));
        json_object_set_new(out, "optimizer_steps", json_integer(ckpt_optimizer_steps(ck)));
    } else {
        printf("checkpoint %s: step %lld, saved by %d rank%s, ember %s, seed %016llx, optimizer steps %lld\n",
               ember_checkpoint_path(ck), (long long)ember_checkpoint_step(ck), (int)W, W > 1 ? "s" : "",
               version ? version : "?", (unsigned long long)ckpt_seed(ck), (long long)ckpt_optimizer_steps(ck));
        printf("files (checksums verified):\n");
    }
    json_t *files = json_array();
    for (int32_t i = 0; i < ckpt_num_files(ck); i++) {
        if (json)
            json_array_append_new(files, json_pack("{sssIsosb}", "name", ckpt_file_name(ck, i), "bytes",
                                                   (json_int_t)ckpt_file_bytes(ck, i), "checksum",
                                                   hex(ckpt_file_checksum(ck, i)), "verified", 1));
        else
            printf("  %-24s %12lld bytes  xxh3 %016llx  ok\n", ckpt_file_name(ck, i),
                   (long long)ckpt_file_bytes(ck, i), (unsigned long long)ckpt_file_checksum(ck, i));
    }
    json_object_set_new(out, "files", files);

    json_t *tables = json_array();
    if (!json)
        printf("tables:\n");
    for (int32_t t = 0; t < T; t++) {
        const ckpt_table_info *ti = ckpt_table(ck, t);
        table_stats st;
        if (table_scan(ctx, ck, t, &st))
            goto out;
        double norm = sqrt(st.sumsq), mean_row = st.row_norm_sum / (double)ti->rows, snorm = sqrt(st.state_sumsq);
        char where[64];
        if (ti->placement == EMBER_PLACE_TABLE)
            snprintf(where, sizeof where, "table on rank %d", (int)ti->owner);
        else
            snprintf(where, sizeof where, "%s", ckpt_placement_name(ti->placement));
        if (json) {
            json_t *o = json_pack("{sssIsisssIsssisi}", "name", ti->name, "rows", (json_int_t)ti->rows, "dim",
                                  (int)ti->dim, "optimizer", ckpt_optimizer_name(ti->opt.kind), "optimizer_steps",
                                  (json_int_t)ckpt_optimizer_steps(ck), "placement",
                                  ckpt_placement_name(ti->placement), "owner", (int)ti->owner, "state_floats",
                                  (int)ti->state_floats);
            json_object_set_new(o, "init", json_pack("{ssso}", "kind", ckpt_init_name(ti->init), "value",
                                                     num((double)ti->init_value)));
            json_object_set_new(o, "norm", num(norm));
            json_object_set_new(o, "mean_row_norm", num(mean_row));
            json_object_set_new(o, "max_abs", num(st.max_abs));
            json_object_set_new(o, "untouched_rows", json_integer(st.untouched));
            json_object_set_new(o, "state_norm", num(snorm));
            json_object_set_new(o, "state_max_abs", num(st.state_max_abs));
            json_object_set_new(o, "digest", hex(st.digest));
            if (ti->kind == EMBER_TABLE_DYNAMIC) {
                ckpt_dyn_summary ds;
                ckpt_dyn_summarize(ck, t, &ds);
                json_object_set_new(o, "untouched_rows", json_null()); /* slots: no row number to compare */
                json_object_set_new(o, "dynamic", json_pack("{sIsIsIsIsIsIsIsIsisssi}", "capacity_per_rank",
                    (json_int_t)ti->capacity, "resident", (json_int_t)ds.resident, "most_on_a_rank",
                    (json_int_t)ds.most_on_a_rank, "admitted", (json_int_t)ds.admitted, "evicted",
                    (json_int_t)ds.evicted, "expired", (json_int_t)ds.expired, "not_admitted",
                    (json_int_t)ds.not_admitted, "evicted_count_sum", (json_int_t)ds.evicted_count_sum,
                    "admit_after", (int)ti->admit_after, "evict", ckpt_evict_name(ti->evict), "sketch_width",
                    (int)ti->sketch_width));
            }
            json_array_append_new(tables, o);
        } else {
            printf("  %s: %lld x %d, %s (step %lld), %s, init %s %g\n", ti->name, (long long)ti->rows,
                   (int)ti->dim, ckpt_optimizer_name(ti->opt.kind), (long long)ckpt_optimizer_steps(ck), where,
                   ckpt_init_name(ti->init), (double)ti->init_value);
            if (ti->kind == EMBER_TABLE_DYNAMIC) {
                ckpt_dyn_summary ds;
                ckpt_dyn_summarize(ck, t, &ds);
                printf("    dynamic: %lld of %lld rows hold keys (%.1f%%; fullest rank %lld of %lld); admit after %d, "
                       "evict %s\n", (long long)ds.resident, (long long)ti->rows,
                       100.0 * (double)ds.resident / (double)ti->rows, (long long)ds.most_on_a_rank,
                       (long long)ti->capacity, (int)ti->admit_after, ckpt_evict_name(ti->evict));
                printf("    keys: %lld admitted, %lld evicted, %lld expired (use counts %lld), %lld ids not admitted\n",
                       (long long)ds.admitted, (long long)ds.evicted, (long long)ds.expired,
                       (long long)ds.evicted_count_sum, (long long)ds.not_admitted);
                printf("    values (every slot): L2 norm %.6g, mean row norm %.6g, max |v| %.6g\n", norm, mean_row,
                       st.max_abs);
            } else {
                printf("    values: L2 norm %.6g, mean row norm %.6g, max |v| %.6g; %lld of %lld rows never touched "
                       "(%.1f%%)\n", norm, mean_row, st.max_abs, (long long)st.untouched, (long long)ti->rows,
                       100.0 * (double)st.untouched / (double)ti->rows);
            }
            if (ti->state_floats > 0)
                printf("    state: %d floats per row, L2 norm %.6g, max |s| %.6g\n", (int)ti->state_floats, snorm,
                       st.state_max_abs);
            printf("    digest %016llx\n", (unsigned long long)st.digest);
        }
    }
    json_object_set_new(out, "tables", tables);

    json_t *barr = json_array(), *rarr = json_array();
    if (!json)
        printf("blobs:\n");
    for (size_t i = 0; i < json_array_size(blobs); i++) {
        const char *name = json_string_value(json_array_get(blobs, i));
        if (name)
            report_blob(ck, -1, name, json, barr);
    }
    for (int32_t r = 0; r < W; r++)
        for (size_t i = 0; i < json_array_size(rank_blobs); i++) {
            const char *name = json_string_value(json_array_get(rank_blobs, i));
            if (name)
                report_blob(ck, r, name, json, rarr);
        }
    if (!json && !json_array_size(blobs) && !json_array_size(rank_blobs))
        printf("  (none)\n");
    json_object_set_new(out, "blobs", barr);
    json_object_set_new(out, "rank_blobs", rarr);
    if (json) {
        char *s = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        if (s)
            printf("%s\n", s);
        free(s);
    }
    status = 0;
out:
    fflush(stdout);
    json_decref(out);
    json_decref(man);
    ember_checkpoint_close(ck);
    return status;
}
