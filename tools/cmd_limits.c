/*
 * cmd_limits.c: `ember limits DATA`: observed per-partition id counts and
 * suggested limits (SparseCore's limit calculation, steps 1-7).
 *
 * It reads batches from a batch file, or from the synthetic generator with
 * --synthetic, builds a collection shaped like the data (one table per file
 * table, dim 1, SGD, stacked unless --no-stack, so the shard of an id is
 * exactly what training with those tables would see) and asks
 * ember_partition_counts() for every batch.  Per table it keeps the batch's
 * maximum over shards of the ids and of the unique ids; the report is the
 * maximum and the p50/p99/p99.9 of those per-batch maxima, and suggests
 * ceil(p99.9) as the limit (the maximum is the limit that never overflows on
 * this data).  Percentiles interpolate linearly between order statistics
 * (numpy's default).
 *
 * With --config it counts a config's tables on the data `ember train
 * --config` reads (its synthetic task, TSV or binary file), in global
 * batches of data.batch_size (--batch): a dynamic table is one there, and
 * its keys are also counted by owner, per batch and over all batches,
 * against its capacity (limits_keys.h), which is what `ember plan`
 * predicts for it.
 *
 * Under mpirun every rank reads (or draws) the same global batches and
 * counts its contiguous share of the samples (batch_slice.h), because
 * limits are enforced per rank over its local batch (docs/distributed.md,
 * "Limits across ranks").  Per batch the counts are reduced to the maximum
 * over ranks of each (table, shard) before the statistics, so the suggested
 * limits hold on every rank of a world of that size.  --shards defaults to
 * the world size, as the collection's num_shards does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "batch_slice.h"
#include "commands.h"
#include "config/config_file.h"
#include "config/data_open.h"
#include "ember.h"
#include "limits_keys.h"
#include "plan/plan.h"
#include "synth_args.h"

typedef struct limits_opts {
    const char *data, *config;
    int64_t batch;   /* --batch: the global batch (0: the preset's or config's) */
    int synthetic, json, dedup_note, stack;
    int64_t shards;  /* resolved: 0 (default) becomes the world size */
    int32_t ranks;   /* the world size                               */
    int64_t batches; /* -1: all (file) or 10 (synthetic) */
    synth_args sa;
} limits_opts;

/* Per table: the per-batch maxima over shards, and totals. */
typedef struct table_obs {
    int64_t *max_ids, *max_unique; /* [batches]                          */
    int64_t ids_total;             /* ids of its features, before dedup  */
    int64_t units_total;           /* after per-sample dedup             */
} table_obs;

static void limits_usage(FILE *f)
{
    fprintf(f,
            "usage: ember limits DATA [options]\n"
            "       ember limits --synthetic [generator options] [options]\n"
            "       ember limits --config CONFIG [--batch N] [options]\n"
            "  observed ids and unique ids per partition (table, shard) per batch, after\n"
            "  per-sample dedup, and suggested max_ids_per_partition /\n"
            "  max_unique_ids_per_partition (ceil of the p99.9 over batches)\n\n"
            "  --shards N          partitions (default: the world size, as the collection's\n"
            "                      num_shards; 1 alone)\n"
            "  --no-stack          do not stack tables (shard = id %% N per table)\n"
            "  --batches K         scan at most K batches (synthetic default 10)\n"
            "  --json              JSON lines: one object per table, then a summary\n"
            "  --dedup-note        explain the counting unit and show how many ids the\n"
            "                      per-sample dedup removed\n"
            "  --synthetic         batches from the generator instead of DATA, with\n"
            "    --preset quick|W1|W2|W3 --tables N --rows N --batch N --pooling N\n"
            "    --dist zipf|uniform --alpha A --seed S\n"
            "  --config CONFIG     a config's tables on the data `ember train --config` reads,\n"
            "                      global batches of --batch N (default data.batch_size);\n"
            "                      dynamic tables: distinct keys by owner against capacity\n"
            "Under mpirun -np N each rank counts its share of every batch (samples\n"
            "[r*B/N, (r+1)*B/N)); the statistics are of the maximum over ranks.\n");
}

/* 0, -1 after --help, or 2 for a usage error (message on ctx->err). */
static int parse_args(const tool_ctx *ctx, int argc, char **argv, limits_opts *o)
{
    FILE *err = ctx->err;
    memset(o, 0, sizeof *o);
    o->stack = 1;
    o->shards = ember_collection_config_default().num_shards;
    o->batches = -1;
    synth_args_init(&o->sa);
    o->sa.err = err;
    int gen_flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            if (o->data) {
                fprintf(err, "ember limits: more than one DATA ('%s', '%s')\n", o->data, arg);
                return 2;
            }
            o->data = arg;
            continue;
        }
        char name[64];
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nlen >= sizeof name) {
            fprintf(err, "ember limits: unknown option '%s' (ember limits --help)\n", arg);
            return 2;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        int flag = 0; /* a flag without a value */
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            limits_usage(stdout);
            return -1;
        } else if (!strcmp(name, "--json")) {
            o->json = flag = 1;
        } else if (!strcmp(name, "--dedup-note")) {
            o->dedup_note = flag = 1;
        } else if (!strcmp(name, "--no-stack")) {
            o->stack = 0;
            flag = 1;
        } else if (!strcmp(name, "--synthetic")) {
            o->synthetic = flag = 1;
        } else if (!strcmp(name, "--config") || !strcmp(name, "--batch")) {
            int bad = !val;
            if (name[2] == 'c')
                o->config = val;
            else if (!bad && !(bad = synth_parse_int64(val, 1, INT32_MAX, &o->batch)))
                o->sa.batch = (int32_t)o->batch; /* the generator's too */
            if (bad) {
                fprintf(err, "ember limits: bad value '%s' for %s\n", val ? val : "", name);
                return 2;
            }
            if (!eq)
                i++;
            continue;
        } else if (!strcmp(name, "--shards") || !strcmp(name, "--batches")) {
            int64_t *dst = name[2] == 's' ? &o->shards : &o->batches;
            if (!val || synth_parse_int64(val, name[2] == 's' ? 1 : 0, INT32_MAX, dst)) {
                fprintf(err, "ember limits: bad value '%s' for %s\n", val ? val : "",
                        name);
                return 2;
            }
            if (!eq)
                i++;
            continue;
        } else {
            int used = 0;
            int took = synth_args_take(&o->sa, "limits", name, val, &used);
            if (took < 0)
                return 2;
            if (took == 0) {
                fprintf(err, "ember limits: unknown option '%s' (ember limits --help)\n",
                        arg);
                return 2;
            }
            gen_flags = 1;
            if (used && !eq)
                i++;
            flag = !used;
        }
        if (flag && eq) {
            fprintf(err, "ember limits: %s takes no value\n", name);
            return 2;
        }
    }
    if ((o->synthetic != 0) + (o->data != NULL) + (o->config != NULL) > 1) {
        fprintf(err, "ember limits: give one of DATA, --synthetic and --config\n");
        return 2;
    }
    if (!o->synthetic && !o->data && !o->config) {
        fprintf(err, "ember limits: missing DATA (a batch file), --synthetic or --config\n");
        limits_usage(err);
        return 2;
    }
    if (gen_flags && !o->synthetic) {
        fprintf(err, "ember limits: generator options need --synthetic\n");
        return 2;
    }
    if (o->batch && o->data && !ctr_file_is_binary(o->data)) {
        fprintf(err, "ember limits: --batch needs --synthetic, --config or a training file in ember's binary "
                     "format (a batch file's batches are as written)\n");
        return 2;
    }
    if ((o->synthetic || o->config) && o->batches < 0)
        o->batches = 10;
    if (o->shards == 0)
        o->shards = ctx->size;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* p in [0, 1] of sorted v[n], linear between order statistics. */
static double percentile(const int64_t *sorted, int64_t n, double p)
{
    if (n == 0)
        return 0;
    double h = (double)(n - 1) * p;
    int64_t lo = (int64_t)floor(h);
    if (lo >= n - 1)
        return (double)sorted[n - 1];
    return (double)sorted[lo] + (h - (double)lo) * (double)(sorted[lo + 1] - sorted[lo]);
}

typedef struct table_report {
    int64_t max_ids, max_unique;
    double p50_ids, p99_ids, p999_ids, p50_unique, p99_unique, p999_unique;
    int64_t suggest_ids, suggest_unique;
} table_report;

/* Sorts the per-batch maxima in place and summarises them. */
static void summarise(table_obs *ob, int64_t n, table_report *r)
{
    qsort(ob->max_ids, (size_t)n, sizeof(int64_t), cmp_i64);
    qsort(ob->max_unique, (size_t)n, sizeof(int64_t), cmp_i64);
    r->max_ids = n ? ob->max_ids[n - 1] : 0;
    r->max_unique = n ? ob->max_unique[n - 1] : 0;
    r->p50_ids = percentile(ob->max_ids, n, 0.5);
    r->p99_ids = percentile(ob->max_ids, n, 0.99);
    r->p999_ids = percentile(ob->max_ids, n, 0.999);
    r->p50_unique = percentile(ob->max_unique, n, 0.5);
    r->p99_unique = percentile(ob->max_unique, n, 0.99);
    r->p999_unique = percentile(ob->max_unique, n, 0.999);
    /* ceil, but an interpolation a rounding error above an integer stays it */
    r->suggest_ids = (int64_t)ceil(r->p999_ids - 1e-9);
    r->suggest_unique = (int64_t)ceil(r->p999_unique - 1e-9);
}

static int print_json(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!s)
        return -1;
    puts(s);
    free(s);
    return 0;
}

/* The aligned text table: one row of cells per table, widths from content. */
#define NCOLS 13
static void print_text(const limits_opts *o, const char *source, const ember_batch_file_info *info,
                       const table_obs *obs, const table_report *rep, int64_t batches, char (*names)[32])
{
    static const char *head[NCOLS] = {"table", "rows", "ids", "dedup_ids", "max_ids",
                                      "p50", "p99", "p99.9", "max_unique", "p50",
                                      "p99", "p99.9", "suggest ids/unique"};
    int32_t T = info->num_tables;
    char(*cell)[NCOLS][48] = calloc((size_t)T + 1, sizeof *cell);
    if (!cell)
        return;
    int width[NCOLS];
    for (int c = 0; c < NCOLS; c++)
        snprintf(cell[0][c], sizeof cell[0][c], "%s", head[c]);
    for (int32_t t = 0; t < T; t++) {
        char(*row)[48] = cell[t + 1];
        const table_report *r = &rep[t];
        snprintf(row[0], 48, "%s", names[t]);
        if (info->table_rows[t])
            snprintf(row[1], 48, "%lld", (long long)info->table_rows[t]);
        else
            snprintf(row[1], 48, "keys"); /* a dynamic table */
        snprintf(row[2], 48, "%lld", (long long)obs[t].ids_total);
        snprintf(row[3], 48, "%lld", (long long)obs[t].units_total);
        snprintf(row[4], 48, "%lld", (long long)r->max_ids);
        snprintf(row[5], 48, "%.1f", r->p50_ids);
        snprintf(row[6], 48, "%.1f", r->p99_ids);
        snprintf(row[7], 48, "%.1f", r->p999_ids);
        snprintf(row[8], 48, "%lld", (long long)r->max_unique);
        snprintf(row[9], 48, "%.1f", r->p50_unique);
        snprintf(row[10], 48, "%.1f", r->p99_unique);
        snprintf(row[11], 48, "%.1f", r->p999_unique);
        snprintf(row[12], 48, "%lld / %lld", (long long)r->suggest_ids,
                 (long long)r->suggest_unique);
    }
    for (int c = 0; c < NCOLS; c++) {
        width[c] = 0;
        for (int32_t t = 0; t <= T; t++) {
            int w = (int)strlen(cell[t][c]);
            if (w > width[c])
                width[c] = w;
        }
    }
    printf("ember limits: %s: %lld batches, %d tables, %d features, %lld shards, stacking %s\n",
           source, (long long)batches, (int)T, (int)info->num_features, (long long)o->shards,
           o->stack ? "on" : "off");
    printf("per table: ids = ids of its features, dedup_ids = after per-sample dedup; max/pXX "
           "over batches of the batch's largest shard\n");
    if (o->ranks > 1)
        printf("over %d ranks: each counts its local batch (samples [r*B/%d, (r+1)*B/%d)); "
               "per batch the max over ranks\n",
               (int)o->ranks, (int)o->ranks, (int)o->ranks);
    putchar('\n');
    for (int32_t t = 0; t <= T; t++) {
        for (int c = 0; c < NCOLS; c++) {
            if (c == 0 || c == NCOLS - 1) /* names and the last column to the left */
                printf("%s%-*s", c ? "  " : "", c == NCOLS - 1 ? 0 : width[c], cell[t][c]);
            else
                printf("  %*s", width[c], cell[t][c]);
        }
        putchar('\n');
    }
    if (o->dedup_note) {
        printf("\nnote: the unit counted is a distinct id within one bag (sample, feature): an "
               "id repeated in a\nbag counts once, whatever the "
               "collection's dedup setting, and\nthe same id in two samples counts twice in "
               "max_ids but once in max_unique.\n");
        for (int32_t t = 0; t < T; t++)
            if (obs[t].ids_total > 0)
                printf("  %s: per-sample dedup removed %lld of %lld ids (%.2f%%)\n", names[t],
                       (long long)(obs[t].ids_total - obs[t].units_total),
                       (long long)obs[t].ids_total,
                       100.0 * (double)(obs[t].ids_total - obs[t].units_total) /
                           (double)obs[t].ids_total);
    }
    free(cell);
}

static int emit_json(const limits_opts *o, const char *source, const ember_batch_file_info *info,
                     const table_obs *obs, const table_report *rep, int64_t batches,
                     double seconds, char (*names)[32], const limits_keys *keys)
{
    int64_t all_ids = 0, all_unique = 0, ids_total = 0, units_total = 0;
    for (int32_t t = 0; t < info->num_tables; t++) {
        const table_report *r = &rep[t];
        json_t *j = json_object();
        json_object_set_new(j, "record", json_string("table"));
        json_object_set_new(j, "table", json_integer(t));
        json_object_set_new(j, "name", json_string(names[t]));
        json_object_set_new(j, "rows", json_integer(info->table_rows[t]));
        json_object_set_new(j, "shards", json_integer(o->shards));
        json_object_set_new(j, "batches", json_integer(batches));
        json_object_set_new(j, "ids_total", json_integer(obs[t].ids_total));
        json_object_set_new(j, "dedup_ids_total", json_integer(obs[t].units_total));
        json_object_set_new(j, "max_ids", json_integer(r->max_ids));
        json_object_set_new(j, "max_unique_ids", json_integer(r->max_unique));
        json_object_set_new(j, "p50_ids", json_real(r->p50_ids));
        json_object_set_new(j, "p99_ids", json_real(r->p99_ids));
        json_object_set_new(j, "p999_ids", json_real(r->p999_ids));
        json_object_set_new(j, "p50_unique_ids", json_real(r->p50_unique));
        json_object_set_new(j, "p99_unique_ids", json_real(r->p99_unique));
        json_object_set_new(j, "p999_unique_ids", json_real(r->p999_unique));
        json_object_set_new(j, "suggested_max_ids_per_partition", json_integer(r->suggest_ids));
        json_object_set_new(j, "suggested_max_unique_ids_per_partition",
                            json_integer(r->suggest_unique));
        limits_keys_json(keys, t, j);
        if (print_json(j))
            return -1;
        if (r->max_ids > all_ids)
            all_ids = r->max_ids;
        if (r->max_unique > all_unique)
            all_unique = r->max_unique;
        ids_total += obs[t].ids_total;
        units_total += obs[t].units_total;
    }
    json_t *j = json_object();
    json_object_set_new(j, "record", json_string("summary"));
    json_object_set_new(j, "source", json_string(source));
    json_object_set_new(j, "shards", json_integer(o->shards));
    json_object_set_new(j, "stack_tables", json_boolean(o->stack));
    json_object_set_new(j, "ranks", json_integer(o->ranks));
    json_object_set_new(j, "tables", json_integer(info->num_tables));
    json_object_set_new(j, "features", json_integer(info->num_features));
    json_object_set_new(j, "batches", json_integer(batches));
    json_object_set_new(j, "ids_total", json_integer(ids_total));
    json_object_set_new(j, "dedup_ids_total", json_integer(units_total));
    json_object_set_new(j, "max_ids", json_integer(all_ids));
    json_object_set_new(j, "max_unique_ids", json_integer(all_unique));
    json_object_set_new(j, "seconds", json_real(seconds));
    if (o->dedup_note)
        json_object_set_new(j, "note",
                            json_string("counts are of distinct ids within one bag (sample, "
                                        "feature), after per-sample dedup ("
                                        "step 3), whatever the collection's dedup setting"));
    return print_json(j);
}

static int grow_i64(int64_t **p, int64_t n)
{
    int64_t *q = realloc(*p, (size_t)n * sizeof *q);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

/* Samples per batch read from a binary training file without a config. */
#define LIMITS_FILE_BATCH 4096

/* The next global batch into *b: 1, 0 at the end, or < 0 (message printed). */
static int next_batch(const tool_ctx *ctx, ember_synth *syn, ember_batch_reader *reader,
                      ctr_source *src, int32_t batch, int64_t n, ember_batch *b)
{
    int rc;
    if (src) { /* --config: the data ember train reads */
        char err[512];
        ctr_batch cb;
        int64_t got = ctr_source_next(src, batch, &cb, err, sizeof err);
        if (got < 0)
            tool_local_error(ctx, "limits", "batch %lld: %s", (long long)n, err);
        else if (got > 0)
            *b = cb.sparse;
        return got < 0 ? -1 : got > 0;
    }
    if (syn) {
        if ((rc = ember_synth_next(syn, b)) != EMBER_OK) {
            tool_local_error(ctx, "limits", "batch %lld: %s: %s", (long long)n,
                             ember_status_str(rc), ember_data_errmsg());
            return rc;
        }
        return 1;
    }
    rc = ember_batch_reader_next(reader, b);
    if (rc < 0)
        tool_local_error(ctx, "limits", "%s: %s", ember_status_str(rc), ember_data_errmsg());
    return rc;
}

/* The data of a config's `ember train`: its source as a world of one (every
 * rank reads the same global batches).  0, or -1 with the message in err. */
static int open_data(const config_file *cf, ctr_source **src, char *err, size_t n)
{
    const cfg_train *t = &cf->train;
    if (t->source == CFG_SOURCE_SYNTHETIC) {
        if (t->error[0]) {
            snprintf(err, n, "%s: no synthetic data for these tables: %s", cf->path, t->error);
            return -1;
        }
        return ctr_source_synth(&t->synth, 0, 0, 1, src, err, n);
    }
    return data_open_file(cf, t, t->train_file, DATA_FILE_TRAIN, NULL, 0, 1, src, err, n);
}

/* --config: the config, its data, and the shape of both (info points into
 * rows and ftab).  0, or -1 with the message printed. */
static int open_config(const tool_ctx *ctx, const limits_opts *o, config_file **cf, ctr_source **src,
                       int64_t **rows, int32_t **ftab, ember_batch_file_info *info, char *source, size_t n)
{
    char err[1024];
    if (config_file_load(o->config, cf, err, sizeof err) == 0 && !(*cf)->num_features)
        snprintf(err, sizeof err, "%s: no tables and features to count", o->config);
    else if (*cf && open_data(*cf, src, err, sizeof err) == 0)
        err[0] = '\0';
    const config_file *c = *cf;
    const ctr_schema *sc = *src ? ctr_source_schema(*src) : NULL;
    if (sc && sc->num_sparse != c->num_features)
        snprintf(err, sizeof err, "%s: %d features, but the data has %d sparse features", c->path,
                 (int)c->num_features, (int)sc->num_sparse);
    for (int32_t f = 0; sc && !err[0] && f < c->num_features; f++) {
        const ember_table_config *tb = &c->tables[c->features[f].table];
        if ((tb->kind == EMBER_TABLE_DYNAMIC) != (sc->rows[f] == 0) || (sc->rows[f] && sc->rows[f] > tb->rows))
            snprintf(err, sizeof err, "%s: feature \"%s\": the data's ids do not fit table \"%s\" (%s)", c->path,
                     c->features[f].name, tb->name, sc->rows[f] ? "row numbers" : "64-bit keys");
    }
    if (err[0]) {
        tool_local_error(ctx, "limits", "%s", err);
        return -1;
    }
    *rows = malloc(sizeof **rows * (size_t)c->num_tables);
    *ftab = malloc(sizeof **ftab * (size_t)c->num_features);
    if (!*rows || !*ftab) {
        tool_local_error(ctx, "limits", "out of memory");
        return -1;
    }
    for (int32_t t = 0; t < c->num_tables; t++)
        (*rows)[t] = c->tables[t].rows; /* 0: dynamic */
    for (int32_t f = 0; f < c->num_features; f++)
        (*ftab)[f] = c->features[f].table;
    *info = (ember_batch_file_info){c->num_tables, *rows, c->num_features, *ftab};
    static const char *const SRC[] = {"the synthetic task", "TSV", "binary"};
    snprintf(source, n, "%s (%s): %s%s%s, global batch %lld", c->path, c->name, SRC[c->train.source],
             c->train.source ? " " : "", c->train.source ? c->train.train_file : "",
             (long long)(o->batch ? o->batch : c->data.batch_size));
    return 0;
}

int cmd_limits(const tool_ctx *ctx, int argc, char **argv)
{
    limits_opts o;
    int prc = parse_args(ctx, argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    o.ranks = ctx->size;

    int status = 1, rc;
    double t0 = ember_now();
    ember_batch_reader *reader = NULL;
    ember_synth *syn = NULL;
    config_file *cf = NULL;
    ctr_source *src = NULL;
    limits_keys *keys = NULL;
    int64_t *capacity = NULL;
    ember_collection *coll = NULL;
    ember_table_config *tables = NULL;
    ember_feature_config *features = NULL;
    char (*names)[32] = NULL;
    table_obs *obs = NULL;
    table_report *rep = NULL;
    int64_t *counts = NULL, *own_rows = NULL, *totals = NULL;
    int32_t *own_ftab = NULL;
    batch_slice slice = {0};
    ember_batch_file_info info = {0, NULL, 0, NULL};
    char source[512];
    int failed = 0; /* this rank's own failure, agreed before every collective step */

    /* 1. the source of batches and its shape (every rank: the same global batches) */
    if (o.synthetic) {
        ember_synth_config sc;
        if (synth_args_config(&o.sa, "limits", &sc)) {
            status = 2;
            goto fail;
        }
        if ((rc = ember_synth_create(&sc, &syn)) != EMBER_OK) {
            tool_local_error(ctx, "limits", "%s: %s", ember_status_str(rc), ember_data_errmsg());
            failed = 1;
        } else {
            own_rows = malloc((size_t)sc.tables * sizeof *own_rows);
            own_ftab = malloc((size_t)sc.tables * sizeof *own_ftab);
            if (!own_rows || !own_ftab) {
                tool_local_error(ctx, "limits", "out of memory");
                failed = 1;
            } else {
                for (int32_t t = 0; t < sc.tables; t++) {
                    own_rows[t] = sc.rows;
                    own_ftab[t] = t;
                }
                info = (ember_batch_file_info){sc.tables, own_rows, sc.tables, own_ftab};
            }
        }
        snprintf(source, sizeof source, "synthetic %s (%d x %lld rows, batch %d, pooling %d, "
                 "%s, seed %llu)",
                 o.sa.preset ? o.sa.preset : "quick", (int)sc.tables, (long long)sc.rows,
                 (int)sc.batch_size, (int)sc.pooling, sc.zipf ? "zipf" : "uniform",
                 (unsigned long long)sc.seed);
    } else if (o.config) {
        failed = open_config(ctx, &o, &cf, &src, &own_rows, &own_ftab, &info, source, sizeof source) != 0;
    } else if (ctr_file_is_binary(o.data)) { /* the training data's binary format: a table per feature */
        char err[512] = "";
        if (ctr_source_binary(o.data, 0, 1, &src, err, sizeof err) == 0) {
            const ctr_schema *sc = ctr_source_schema(src);
            own_rows = malloc(sizeof *own_rows * (size_t)sc->num_sparse + 1);
            own_ftab = malloc(sizeof *own_ftab * (size_t)sc->num_sparse + 1);
            if (!own_rows || !own_ftab)
                snprintf(err, sizeof err, "out of memory");
            for (int32_t f = 0; !err[0] && f < sc->num_sparse; f++) {
                if (sc->rows[f] == 0)
                    snprintf(err, sizeof err, "%s: feature %s holds 64-bit keys: count it with --config, whose "
                             "table for it is dynamic", o.data, sc->names[f]);
                own_rows[f] = sc->rows[f];
                own_ftab[f] = f;
            }
            info = (ember_batch_file_info){sc->num_sparse, own_rows, sc->num_sparse, own_ftab};
        }
        if (err[0]) {
            tool_local_error(ctx, "limits", "%s", err);
            failed = 1;
        }
        snprintf(source, sizeof source, "%s (ember's binary format: a table per sparse feature, batches of %lld)",
                 o.data, (long long)(o.batch ? o.batch : LIMITS_FILE_BATCH));
    } else {
        if ((rc = ember_batch_reader_open(o.data, &reader)) != EMBER_OK) {
            tool_local_error(ctx, "limits", "%s: %s", ember_status_str(rc), ember_data_errmsg());
            failed = 1;
        } else {
            info = *ember_batch_reader_info(reader);
        }
        snprintf(source, sizeof source, "%s", o.data);
    }
    int32_t T = info.num_tables, F = info.num_features;
    const int64_t TS = (int64_t)T * o.shards;

    /* 2. a collection shaped like the data over the world: dim 1, SGD, zero
     * init (cheap), so stacking and shards are what training would see; a
     * config's dynamic tables stay dynamic (capacity 1: counting keys by
     * owner needs no rows) */
    if (!failed) {
        tables = calloc((size_t)T, sizeof *tables);
        features = calloc((size_t)F, sizeof *features);
        names = calloc((size_t)T + (size_t)F, sizeof *names);
        obs = calloc((size_t)T, sizeof *obs);
        rep = calloc((size_t)T, sizeof *rep);
        counts = calloc((size_t)(2 * TS + 1), sizeof *counts); /* ids, unique, failure */
        totals = calloc((size_t)(2 * T), sizeof *totals);
        capacity = calloc((size_t)T + 1, sizeof *capacity);
        if (!tables || !features || !names || !obs || !rep || !counts || !totals || !capacity) {
            tool_local_error(ctx, "limits", "out of memory");
            failed = 1;
        }
    }
    if (ember_comm_any_failed(ctx->world, failed, NULL))
        goto fail;
    for (int32_t t = 0; t < T; t++) {
        if (cf)
            snprintf(names[t], sizeof names[t], "%.31s", cf->tables[t].name);
        else if (src) /* a binary file: its features' names */
            snprintf(names[t], sizeof names[t], "%.31s", ctr_source_schema(src)->names[t]);
        else
            snprintf(names[t], sizeof names[t], "t%d", (int)t);
        tables[t] = ember_table_config_default();
        tables[t].name = names[t];
        tables[t].rows = info.table_rows[t];
        tables[t].dim = 1;
        tables[t].init = EMBER_INIT_ZEROS;
        tables[t].optimizer = ember_optimizer_default(EMBER_OPT_SGD);
        if (cf && cf->tables[t].kind == EMBER_TABLE_DYNAMIC) {
            tables[t].kind = EMBER_TABLE_DYNAMIC;
            tables[t].capacity = 1;
            capacity[t] = plan_dynamic_capacity(&cf->tables[t]);
        }
    }
    int oom = limits_keys_create(&info, tables, capacity, o.shards, &keys) != 0;
    if (oom)
        tool_local_error(ctx, "limits", "out of memory");
    if (ember_comm_any_failed(ctx->world, oom, NULL))
        goto fail;
    for (int32_t f = 0; f < F; f++) {
        if (cf)
            snprintf(names[T + f], sizeof names[T + f], "%.31s", cf->features[f].name);
        else
            snprintf(names[T + f], sizeof names[T + f], "f%d", (int)f);
        features[f].name = names[T + f];
        features[f].table = info.feature_table[f];
        features[f].combiner = EMBER_COMBINER_SUM;
    }
    ember_collection_config cc = ember_collection_config_default();
    cc.tables = tables;
    cc.num_tables = T;
    cc.features = features;
    cc.num_features = F;
    cc.num_shards = (int32_t)o.shards;
    cc.stack_tables = o.stack;
    cc.world = ctx->world;
    if ((rc = ember_collection_create(&cc, &coll)) != EMBER_OK)
        tool_local_error(ctx, "limits", "%s: %s", ember_status_str(rc), ember_errmsg(NULL));
    if (ember_comm_any_failed(ctx->world, rc != EMBER_OK, NULL))
        goto fail;

    /* 3. every batch: this rank's counts per (table, shard), the max over
     * ranks of each, then the max over shards */
    int64_t *ids = counts, *unique = counts + TS;
    int64_t n = 0, cap = 0;
    for (;;) {
        if (o.batches >= 0 && n >= o.batches)
            break;
        ember_batch global = {0}, b = {0};
        int32_t gb = (int32_t)(o.batch ? o.batch : cf ? cf->data.batch_size : LIMITS_FILE_BATCH);
        int got = next_batch(ctx, syn, reader, src, gb, n, &global);
        failed = got < 0;
        if (got == 1 && keys && limits_keys_add(keys, &global)) { /* the global batch's keys by owner */
            tool_local_error(ctx, "limits", "out of memory counting keys");
            failed = 1;
        }
        if (got == 1 && ctx->size > 1) {
            int sl = batch_slice_take(&slice, &global, ctx->rank, ctx->size);
            if (sl)
                tool_local_error(ctx, "limits", "%s: batch %lld: %s", source, (long long)n,
                                 sl == -2 ? "out of memory" : "malformed lengths");
            failed = sl != 0;
            b = slice.batch;
        } else {
            b = global;
        }
        if (got == 1 && !failed && (rc = ember_partition_counts(coll, &b, ids, unique)) != EMBER_OK) {
            tool_local_error(ctx, "limits", "%s: batch %lld: %s: %s", source, (long long)n,
                             ember_status_str(rc), ember_errmsg(coll));
            failed = 1;
        }
        if (got == 1 && !failed) {
            for (int32_t t = 0; t < T; t++)
                for (int64_t s = 0; s < o.shards; s++)
                    totals[T + t] += ids[(int64_t)t * o.shards + s]; /* units: this rank's */
            for (int32_t f = 0; f < F; f++)
                for (int32_t s = 0; s < b.batch_size; s++)
                    totals[info.feature_table[f]] += b.lengths[(int64_t)f * b.batch_size + s];
        } else {
            memset(counts, 0, (size_t)(2 * TS) * sizeof *counts);
        }
        /* one reduction per batch: the counts' max, a failure anywhere, the end */
        counts[2 * TS] = failed ? 2 : got == 0 ? 1 : 0;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            for (int32_t t = 0; t < T; t++)
                if (grow_i64(&obs[t].max_ids, cap) || grow_i64(&obs[t].max_unique, cap)) {
                    tool_local_error(ctx, "limits", "out of memory");
                    counts[2 * TS] = 2;
                }
        }
        ember_comm_reduce_i64(ctx->world, counts, 2 * TS + 1, EMBER_REDUCE_MAX);
        if (counts[2 * TS] == 2)
            goto fail; /* the failing rank said why */
        if (counts[2 * TS] == 1)
            break;
        for (int32_t t = 0; t < T; t++) {
            int64_t mi = 0, mu = 0;
            for (int64_t s = 0; s < o.shards; s++) {
                int64_t cell = (int64_t)t * o.shards + s;
                if (ids[cell] > mi)
                    mi = ids[cell];
                if (unique[cell] > mu)
                    mu = unique[cell];
            }
            obs[t].max_ids[n] = mi;
            obs[t].max_unique[n] = mu;
        }
        n++;
    }
    /* totals of the global batches: the sum over ranks of their shares */
    ember_comm_reduce_i64(ctx->world, totals, 2 * (int64_t)T, EMBER_REDUCE_SUM);
    for (int32_t t = 0; t < T; t++) {
        obs[t].ids_total = totals[t];
        obs[t].units_total = totals[T + t];
    }

    /* 4. report (rank 0's stdout; the other ranks' goes nowhere) */
    for (int32_t t = 0; t < T; t++)
        summarise(&obs[t], n, &rep[t]);
    if (o.json) {
        if (emit_json(&o, source, &info, obs, rep, n, ember_now() - t0, names, keys))
            tool_local_error(ctx, "limits", "could not format JSON");
        else
            status = 0;
    } else {
        print_text(&o, source, &info, obs, rep, n, names);
        limits_keys_print(keys, names);
        status = 0;
    }

fail:
    if (obs)
        for (int32_t t = 0; t < info.num_tables; t++) {
            free(obs[t].max_ids);
            free(obs[t].max_unique);
        }
    batch_slice_free(&slice);
    ember_collection_destroy(coll);
    ember_batch_reader_destroy(reader);
    ember_synth_destroy(syn);
    free(tables);
    free(features);
    free(names);
    free(obs);
    free(rep);
    free(counts);
    free(totals);
    free(own_rows);
    free(own_ftab);
    free(capacity);
    limits_keys_destroy(keys);
    ctr_source_destroy(src);
    config_file_free(cf);
    return status;
}
