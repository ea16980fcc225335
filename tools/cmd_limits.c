/*
 * cmd_limits.c: `ember limits DATA`: observed per-partition id counts and
 * suggested limits (SparseCore's limit calculation, steps 1-7).  The count
 * is the library's (ember_limits_run, include/ember-plan.h): this file
 * reads the options, calls it and prints its report as an aligned text
 * table or as JSON lines (one object per table, then a summary).
 *
 * The batches come from a batch file, a binary training file, the
 * synthetic generator (--synthetic, with the generator options of
 * synth_args.h) or the data `ember train --config` reads (--config); with
 * --config a dynamic table's keys are also counted by owner against its
 * capacity, which is what `ember plan` predicts for it.  Under mpirun
 * every rank counts its share of every global batch and the statistics
 * are of the maximum over ranks; rank 0 prints (tool_ctx.h).  --shards
 * defaults to the world size, as the collection's num_shards does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commands.h"
#include "ember-data.h"
#include "ember-plan.h"
#include "ember.h"
#include "synth_args.h"

typedef struct limits_opts {
    const char *data, *config;
    int64_t batch;   /* --batch: the global batch (0: the preset's or config's) */
    int synthetic, json, dedup_note, stack;
    int64_t shards;  /* 0: the world size                           */
    int64_t batches; /* -1: all (file) or 10 (synthetic, config)     */
    synth_args sa;
} limits_opts;

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
            "    --drift rotate|grow --drift-every K --drift-rows R --drift-start S\n"
            "    --drift-tables N\n"
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
    if (o->batch && o->data && ember_data_file_kind(o->data) != EMBER_FILE_CTR) {
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

/* The cells of one table's row of the text table. */
#define NCOLS 13
static void table_cells(const ember_limits_table *r, char (*row)[48])
{
    snprintf(row[0], 48, "%s", r->name);
    if (r->rows)
        snprintf(row[1], 48, "%lld", (long long)r->rows);
    else
        snprintf(row[1], 48, "keys"); /* a dynamic table */
    snprintf(row[2], 48, "%lld", (long long)r->ids_total);
    snprintf(row[3], 48, "%lld", (long long)r->dedup_ids_total);
    snprintf(row[4], 48, "%lld", (long long)r->max_ids);
    snprintf(row[5], 48, "%.1f", r->p50_ids);
    snprintf(row[6], 48, "%.1f", r->p99_ids);
    snprintf(row[7], 48, "%.1f", r->p999_ids);
    snprintf(row[8], 48, "%lld", (long long)r->max_unique_ids);
    snprintf(row[9], 48, "%.1f", r->p50_unique_ids);
    snprintf(row[10], 48, "%.1f", r->p99_unique_ids);
    snprintf(row[11], 48, "%.1f", r->p999_unique_ids);
    snprintf(row[12], 48, "%lld / %lld", (long long)r->suggested_max_ids_per_partition,
             (long long)r->suggested_max_unique_ids_per_partition);
}

/* The note of --dedup-note: the unit counted, and what the dedup removed. */
static void print_dedup_note(const ember_limits_table *rep, int32_t T)
{
    printf("\nnote: the unit counted is a distinct id within one bag (sample, feature): an "
           "id repeated in a\nbag counts once, whatever the "
           "collection's dedup setting, and\nthe same id in two samples counts twice in "
           "max_ids but once in max_unique.\n");
    for (int32_t t = 0; t < T; t++)
        if (rep[t].ids_total > 0)
            printf("  %s: per-sample dedup removed %lld of %lld ids (%.2f%%)\n", rep[t].name,
                   (long long)(rep[t].ids_total - rep[t].dedup_ids_total), (long long)rep[t].ids_total,
                   100.0 * (double)(rep[t].ids_total - rep[t].dedup_ids_total) / (double)rep[t].ids_total);
}

/* The aligned text table: one row of cells per table, widths from content. */
static void print_text(const limits_opts *o, const ember_limits_summary *sum, const ember_limits_table *rep)
{
    static const char *head[NCOLS] = {"table", "rows", "ids", "dedup_ids", "max_ids",
                                      "p50", "p99", "p99.9", "max_unique", "p50",
                                      "p99", "p99.9", "suggest ids/unique"};
    int32_t T = sum->tables;
    char(*cell)[NCOLS][48] = calloc((size_t)T + 1, sizeof *cell);
    if (!cell)
        return;
    int width[NCOLS];
    for (int c = 0; c < NCOLS; c++)
        snprintf(cell[0][c], sizeof cell[0][c], "%s", head[c]);
    for (int32_t t = 0; t < T; t++)
        table_cells(&rep[t], cell[t + 1]);
    for (int c = 0; c < NCOLS; c++) {
        width[c] = 0;
        for (int32_t t = 0; t <= T; t++) {
            int w = (int)strlen(cell[t][c]);
            if (w > width[c])
                width[c] = w;
        }
    }
    printf("ember limits: %s: %lld batches, %d tables, %d features, %lld shards, stacking %s\n",
           sum->source, (long long)sum->batches, (int)T, (int)sum->features, (long long)sum->shards,
           sum->stack_tables ? "on" : "off");
    printf("per table: ids = ids of its features, dedup_ids = after per-sample dedup; max/pXX "
           "over batches of the batch's largest shard\n");
    if (sum->ranks > 1)
        printf("over %d ranks: each counts its local batch (samples [r*B/%d, (r+1)*B/%d)); "
               "per batch the max over ranks\n",
               (int)sum->ranks, (int)sum->ranks, (int)sum->ranks);
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
    if (o->dedup_note)
        print_dedup_note(rep, T);
    free(cell);
}

/* The dynamic tables' section after the table, with a warning per table
 * whose keys outgrow its capacity (nothing without a dynamic table). */
static void print_keys(const ember_limits_summary *sum, const ember_limits_table *rep)
{
    int nw = 5, any = 0;
    for (int32_t t = 0; t < sum->tables; t++)
        if (rep[t].dynamic) {
            any = 1;
            nw = (int)strlen(rep[t].name) > nw ? (int)strlen(rep[t].name) : nw;
        }
    if (!any)
        return;
    printf("\ndynamic tables: distinct keys by owner (mix64(key) mod %lld), of the global batches: the busiest "
           "owner's per batch, and over all %lld batches\n", (long long)sum->shards, (long long)sum->batches);
    printf("  %-*s  %13s  %15s  %16s  %20s  %11s\n", nw, "table", "capacity/rank", "keys/batch, max",
           "keys/batch, mean", "keys over the data", "of capacity");
    for (int32_t t = 0; t < sum->tables; t++) {
        const ember_limits_table *r = &rep[t];
        if (r->dynamic)
            printf("  %-*s  %13lld  %15lld  %16.1f  %20lld  %10.2fx\n", nw, r->name, (long long)r->capacity,
                   (long long)r->max_keys_per_owner_per_batch, r->mean_keys_per_owner_per_batch,
                   (long long)r->distinct_keys_per_owner, (double)r->distinct_keys_per_owner / (double)r->capacity);
    }
    for (int32_t t = 0; t < sum->tables; t++) {
        const ember_limits_table *r = &rep[t];
        if (r->dynamic && r->max_keys_per_owner_per_batch > r->capacity)
            printf("warning: dynamic table '%s': a batch brought %lld distinct keys to one owner, more than its "
                   "capacity of %lld rows per rank: once they hold keys, such a step fails\n", r->name,
                   (long long)r->max_keys_per_owner_per_batch, (long long)r->capacity);
        else if (r->dynamic && r->over_capacity)
            printf("warning: dynamic table '%s': %lld distinct keys on one owner over the data, %.2fx its "
                   "capacity of %lld rows per rank: rows are evicted and reset\n", r->name,
                   (long long)r->distinct_keys_per_owner,
                   (double)r->distinct_keys_per_owner / (double)r->capacity, (long long)r->capacity);
    }
}

/* One table's JSON record. */
static json_t *table_json(int32_t t, const ember_limits_summary *sum, const ember_limits_table *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "record", json_string("table"));
    json_object_set_new(j, "table", json_integer(t));
    json_object_set_new(j, "name", json_string(r->name));
    json_object_set_new(j, "rows", json_integer(r->rows));
    json_object_set_new(j, "shards", json_integer(sum->shards));
    json_object_set_new(j, "batches", json_integer(sum->batches));
    json_object_set_new(j, "ids_total", json_integer(r->ids_total));
    json_object_set_new(j, "dedup_ids_total", json_integer(r->dedup_ids_total));
    json_object_set_new(j, "max_ids", json_integer(r->max_ids));
    json_object_set_new(j, "max_unique_ids", json_integer(r->max_unique_ids));
    json_object_set_new(j, "p50_ids", json_real(r->p50_ids));
    json_object_set_new(j, "p99_ids", json_real(r->p99_ids));
    json_object_set_new(j, "p999_ids", json_real(r->p999_ids));
    json_object_set_new(j, "p50_unique_ids", json_real(r->p50_unique_ids));
    json_object_set_new(j, "p99_unique_ids", json_real(r->p99_unique_ids));
    json_object_set_new(j, "p999_unique_ids", json_real(r->p999_unique_ids));
    json_object_set_new(j, "suggested_max_ids_per_partition", json_integer(r->suggested_max_ids_per_partition));
    json_object_set_new(j, "suggested_max_unique_ids_per_partition",
                        json_integer(r->suggested_max_unique_ids_per_partition));
    if (r->dynamic) {
        json_object_set_new(j, "kind", json_string("dynamic"));
        json_object_set_new(j, "capacity", json_integer(r->capacity));
        json_object_set_new(j, "owners", json_integer(r->owners));
        json_object_set_new(j, "max_keys_per_owner_per_batch", json_integer(r->max_keys_per_owner_per_batch));
        json_object_set_new(j, "mean_keys_per_owner_per_batch", json_real(r->mean_keys_per_owner_per_batch));
        json_object_set_new(j, "distinct_keys_per_owner", json_integer(r->distinct_keys_per_owner));
        json_object_set_new(j, "distinct_keys", json_integer(r->distinct_keys));
        json_object_set_new(j, "over_capacity", json_boolean(r->over_capacity));
    }
    return j;
}

/* JSON lines: one object per table, then the summary. */
static int emit_json(const limits_opts *o, const ember_limits_summary *sum, const ember_limits_table *rep)
{
    for (int32_t t = 0; t < sum->tables; t++)
        if (print_json(table_json(t, sum, &rep[t])))
            return -1;
    json_t *j = json_object();
    json_object_set_new(j, "record", json_string("summary"));
    json_object_set_new(j, "source", json_string(sum->source));
    json_object_set_new(j, "shards", json_integer(sum->shards));
    json_object_set_new(j, "stack_tables", json_boolean(sum->stack_tables));
    json_object_set_new(j, "ranks", json_integer(sum->ranks));
    json_object_set_new(j, "tables", json_integer(sum->tables));
    json_object_set_new(j, "features", json_integer(sum->features));
    json_object_set_new(j, "batches", json_integer(sum->batches));
    json_object_set_new(j, "ids_total", json_integer(sum->ids_total));
    json_object_set_new(j, "dedup_ids_total", json_integer(sum->dedup_ids_total));
    json_object_set_new(j, "max_ids", json_integer(sum->max_ids));
    json_object_set_new(j, "max_unique_ids", json_integer(sum->max_unique_ids));
    json_object_set_new(j, "seconds", json_real(sum->seconds));
    if (o->dedup_note)
        json_object_set_new(j, "note",
                            json_string("counts are of distinct ids within one bag (sample, "
                                        "feature), after per-sample dedup ("
                                        "step 3), whatever the collection's dedup setting"));
    return print_json(j);
}

/* The report of a finished count: 0, or 1 after the message. */
static int report(const tool_ctx *ctx, const limits_opts *o, const ember_limits *l)
{
    ember_limits_summary sum;
    ember_limits_summary_info(l, &sum);
    ember_limits_table *rep = calloc((size_t)sum.tables + 1, sizeof *rep);
    if (!rep) {
        tool_local_error(ctx, "limits", "out of memory");
        return 1;
    }
    for (int32_t t = 0; t < sum.tables; t++)
        ember_limits_table_info(l, t, &rep[t]);
    int status = 0;
    if (o->json) {
        if (emit_json(o, &sum, rep)) {
            tool_local_error(ctx, "limits", "could not format JSON");
            status = 1;
        }
    } else {
        print_text(o, &sum, rep);
        print_keys(&sum, rep);
    }
    free(rep);
    return status;
}

int cmd_limits(const tool_ctx *ctx, int argc, char **argv)
{
    limits_opts o;
    int prc = parse_args(ctx, argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    ember_synth_config sc;
    ember_limits_config c = ember_limits_config_default();
    if (o.synthetic) {
        if (synth_args_config(&o.sa, "limits", &sc))
            return 2;
        c.synthetic = &sc;
        c.synthetic_name = o.sa.preset;
    }
    c.data = o.data;
    c.config = o.config;
    c.batch = o.synthetic ? 0 : o.batch; /* the generator's is its batch_size (--batch too) */
    c.batches = o.batches;
    c.shards = (int32_t)o.shards;
    c.stack_tables = o.stack;
    c.world = ctx->world;
    ember_limits *l = NULL;
    if (ember_limits_run(&c, &l) != EMBER_OK) { /* agreed: every rank has the message */
        fprintf(ctx->err, "ember limits: %s\n", ember_errmsg(NULL));
        return 1;
    }
    int status = report(ctx, &o, l); /* rank 0's stdout; the other ranks' goes nowhere */
    ember_limits_destroy(l);
    return status;
}
