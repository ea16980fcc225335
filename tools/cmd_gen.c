/*
 * cmd_gen.c: `ember gen OUT`: writes synthetic batches to a batch file;
 * `ember gen --task N OUT.bin`: the first N samples of `ember train`'s
 * synthetic task (the built-in one, or a config's) to a CTR binary file,
 * through ember_reader_write, so that a run can read the task instead of
 * generating it.
 *
 * The batches are ember_synth_next()'s, so `ember limits OUT` and
 * `ember limits --synthetic` with the same options see the same ids.  The
 * file appears under OUT only when complete (src/core/safe_file.h).
 * Under mpirun only rank 0 writes (the ranks would write the same bytes to
 * the same path); the others wait for its status and return it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ember-data.h"
#include "ember.h"
#include "synth_args.h"

static void gen_usage(FILE *f)
{
    fprintf(f,
            "usage: ember gen OUT [options]\n"
            "  writes synthetic batches to the batch file OUT (docs/batch-format.md)\n\n"
            "  --preset quick|W1|W2|W3  workload shape (default quick: 8 tables x 100000 rows,\n"
            "                           batch 1024, pooling 20, zipf)\n"
            "  --tables N --rows N --batch N --pooling N   override the preset\n"
            "  --dist zipf|uniform      --alpha A (zipf exponent, default 1.05)\n"
            "  --batches K              batches to write (default 10)\n"
            "  --seed S                 generator seed\n"
            "  --drift rotate|grow      ids that drift: every --drift-every K batches (10) the hot\n"
            "                           set moves --drift-rows R ranks down (rotate), or R new\n"
            "                           ids join the law (grow; R: a tenth of the rows);\n"
            "                           --drift-start S: grow's ranks at first (R);\n"
            "                           --drift-tables N: only the first N tables drift\n"
            "  --weighted               also write a weight in [0.5, 1.5) per id\n\n"
            "usage: ember gen --task N OUT.bin [--config FILE] [--eval]\n"
            "  writes the first N samples of ember train's synthetic task (the built-in one, or\n"
            "  the config's) to OUT.bin in ember's binary CTR format (docs/ctr-format.md);\n"
            "  ember train --train-file OUT.bin then trains on those very samples\n"
            "  --eval                   the task's held-out stream instead\n");
}

/* `ember gen --task ...`: 0, 1 after printing the problem, 2 for bad usage. */
static int gen_task(const tool_ctx *ctx, int argc, char **argv)
{
    const char *out_path = NULL, *config = NULL;
    int64_t samples = -1;
    int eval = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--eval")) {
            eval = 1;
        } else if (!strcmp(arg, "--task") || !strcmp(arg, "--config")) {
            if (i + 1 >= argc || (!strcmp(arg, "--task") && synth_parse_int64(argv[i + 1], 1, INT64_MAX, &samples))) {
                fprintf(ctx->err, "ember gen: %s takes %s\n", arg, arg[2] == 't' ? "a sample count >= 1" : "a file");
                return 2;
            }
            if (arg[2] == 'c')
                config = argv[i + 1];
            i++;
        } else if (strncmp(arg, "--", 2) != 0 && !out_path) {
            out_path = arg;
        } else {
            fprintf(ctx->err, "ember gen: '%s' is not an option of ember gen --task (ember gen --help)\n", arg);
            return 2;
        }
    }
    if (!out_path) {
        fprintf(ctx->err, "ember gen: missing the output file\n");
        return 2;
    }
    if (ctx->rank != 0) /* rank 0 writes; main() agrees on the status */
        return 0;
    ember_reader *r = NULL;
    int rc = ember_reader_open(config, NULL, eval, 0, 1, &r);
    if (rc != EMBER_OK) {
        tool_local_error(ctx, "gen", "%s", ember_errmsg(NULL));
        return 1;
    }
    int64_t wrote = 0;
    if ((rc = ember_reader_write(r, out_path, samples, &wrote)) != EMBER_OK) {
        tool_local_error(ctx, "gen", "%s", ember_errmsg(r));
        ember_reader_close(r);
        return 1;
    }
    printf("ember gen: wrote %lld samples of the %s task's %s stream (%d dense, %d sparse features) to %s\n",
           (long long)wrote, config ? config : "built-in", eval ? "held-out" : "training",
           (int)ember_reader_num_dense(r), (int)ember_reader_num_features(r), out_path);
    ember_reader_close(r);
    return 0;
}

static int gen_write(const tool_ctx *ctx, const char *out_path, int64_t batches,
                     const ember_synth_config *cfg);

int cmd_gen(const tool_ctx *ctx, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--task"))
            return gen_task(ctx, argc, argv);
    const char *out_path = NULL;
    int64_t batches = 10;
    synth_args sa;
    synth_args_init(&sa);
    sa.err = ctx->err;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            gen_usage(stdout);
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (out_path) {
                fprintf(ctx->err, "ember gen: more than one output file ('%s', '%s')\n",
                        out_path, arg);
                return 2;
            }
            out_path = arg;
            continue;
        }
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nlen >= sizeof name) {
            fprintf(ctx->err, "ember gen: unknown option '%s' (ember gen --help)\n", arg);
            return 2;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[i + 1];
        if (!strcmp(name, "--batches")) {
            if (!val || synth_parse_int64(val, 0, INT64_MAX, &batches)) {
                fprintf(ctx->err, "ember gen: bad value for --batches\n");
                return 2;
            }
            if (!eq)
                i++;
            continue;
        }
        int used = 0;
        int took = synth_args_take(&sa, "gen", name, val, &used);
        if (took < 0)
            return 2;
        if (took == 0) {
            fprintf(ctx->err, "ember gen: unknown option '%s' (ember gen --help)\n", arg);
            return 2;
        }
        if (used && !eq)
            i++;
        if (!used && eq) {
            fprintf(ctx->err, "ember gen: %s takes no value\n", name);
            return 2;
        }
    }
    if (!out_path) {
        fprintf(ctx->err, "ember gen: missing the output file\n");
        gen_usage(ctx->err);
        return 2;
    }
    ember_synth_config sc;
    if (synth_args_config(&sa, "gen", &sc))
        return 2;
    /* rank 0 writes; main() agrees on the status, so every rank returns it */
    return ctx->rank == 0 ? gen_write(ctx, out_path, batches, &sc) : 0;
}

/* Writes the file; 0, or 1 after printing the problem. */
static int gen_write(const tool_ctx *ctx, const char *out_path, int64_t batches,
                     const ember_synth_config *cfg)
{
    const ember_synth_config sc = *cfg;
    int status = 1, rc;
    int64_t *rows = NULL;
    int32_t *ftab = NULL;
    ember_synth *syn = NULL;
    ember_batch_writer *w = NULL;
    rows = malloc((size_t)sc.tables * sizeof *rows);
    ftab = malloc((size_t)sc.tables * sizeof *ftab);
    if (!rows || !ftab) {
        tool_local_error(ctx, "gen", "out of memory");
        goto fail;
    }
    for (int32_t t = 0; t < sc.tables; t++) {
        rows[t] = sc.rows;
        ftab[t] = t;
    }
    ember_batch_file_info info = {sc.tables, rows, sc.tables, ftab};
    if ((rc = ember_synth_create(&sc, &syn)) != EMBER_OK ||
        (rc = ember_batch_writer_create(out_path, &info, &w)) != EMBER_OK) {
        tool_local_error(ctx, "gen", "%s: %s", ember_status_str(rc), ember_errmsg(w));
        goto fail;
    }
    int64_t ids = 0;
    for (int64_t k = 0; k < batches; k++) {
        ember_batch b;
        const void *failed = NULL;
        if ((rc = ember_synth_next(syn, &b)) != EMBER_OK)
            failed = syn;
        else if ((rc = ember_batch_writer_append(w, &b)) != EMBER_OK)
            failed = w;
        if (failed) {
            tool_local_error(ctx, "gen", "batch %lld: %s: %s", (long long)k, ember_status_str(rc),
                             ember_errmsg(failed));
            goto fail;
        }
        ids += b.num_ids;
    }
    if ((rc = ember_batch_writer_close(w)) != EMBER_OK) {
        tool_local_error(ctx, "gen", "%s: %s", ember_status_str(rc), ember_errmsg(w));
        goto fail;
    }
    char drift[160] = "";
    if (sc.drift != EMBER_DRIFT_NONE)
        snprintf(drift, sizeof drift, ", drift %s by %lld ranks every %lld batches%s", ember_drift_name(sc.drift),
                 (long long)sc.drift_rows, (long long)sc.drift_every, sc.drift_tables ? " (first tables)" : "");
    printf("ember gen: wrote %lld batches (%lld ids; %d tables x %lld rows, batch %d, pooling "
           "%d, %s%s%s) to %s\n",
           (long long)batches, (long long)ids, (int)sc.tables, (long long)sc.rows,
           (int)sc.batch_size, (int)sc.pooling, sc.zipf ? "zipf" : "uniform",
           sc.weighted ? ", weighted" : "", drift, out_path);
    status = 0;

fail:
    ember_batch_writer_destroy(w);
    ember_synth_destroy(syn);
    free(rows);
    free(ftab);
    return status;
}
