/*
 * cmd_plan.c: `ember plan CONFIG`: a placement per table for a world of N
 * ranks, and what each rank then holds, serves and exchanges per step
 * (docs/planner.md).
 *
 * The id statistics come from the config's id law per table (the synthetic
 * generator's Zipf or uniform, computed exactly; a dynamic table's keys as
 * `ember train`'s synthetic task draws them from its `keys`), or with
 * --data from a sample of a batch file (distinct rows and keys measured,
 * pooling and weights as observed).  For each dynamic table it prints its
 * keys per step and over a horizon against its capacity (plan_dynamic.h).
 * No MPI: the world is a number, so `--world 1024` shows a cluster's plan
 * on a laptop.  The planner and the model are library code
 * (src/plan/); this file reads options, prints and exits.  Under mpirun
 * every rank computes the same plan without talking to the others; rank 0
 * prints it (tool_ctx.h), and messages go to ctx->err.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commands.h"
#include "config/config_file.h"
#include "config/data_open.h"
#include "ember.h"
#include "plan/plan.h"
#include "config/plan_config.h"
#include "plan_dynamic.h"
#include "synth_args.h"

typedef struct plan_opts {
    const char *config, *data;
    int32_t world;            /* 0: the config's                        */
    int64_t memory;           /* -1: the config's                       */
    int64_t replicate;        /* -1: the config's                       */
    double lookup_weight;     /* < 0: the config's                      */
    int64_t batch;            /* 0: the config's                        */
    int64_t batches;          /* --data: batches to read                */
    int64_t horizon;          /* steps; 0: the config's train.steps     */
    int json, all_ranks, hot_rows;
} plan_opts;

static void plan_usage(FILE *f)
{
    fprintf(f,
            "usage: ember plan CONFIG [options]\n"
            "  a placement per table (row, column, table, replicated) that fits the memory\n"
            "  budget and minimises the bytes exchanged per step; per rank: tables, rows and\n"
            "  state, ids served, bytes sent and received (docs/planner.md, docs/config.md)\n\n"
            "  --world N                ranks to plan for (default: planner.world)\n"
            "  --memory-per-rank BYTES  rows + state per rank, e.g. 64G (default: the config's;\n"
            "                           0 = no limit)\n"
            "  --replicate-threshold B  tables up to B may be replicated (default 1 MiB)\n"
            "  --lookup-weight X        a looked-up byte against a network byte (default 1)\n"
            "  --batch N                global batch (default: data.batch_size)\n"
            "  --data FILE              id statistics from data instead of the config's id law:\n"
            "                           a batch file (tables and features must match) or a\n"
            "                           training file in ember's binary format (its sparse\n"
            "                           features in the config's feature order)\n"
            "  --batches K              batches of FILE to sample (default 20)\n"
            "  --horizon STEPS          dynamic tables: distinct keys over this many steps\n"
            "                           against capacity (default: train.steps, 3000)\n"
            "  --json                   one JSON object instead of text\n"
            "  --all-ranks              list every rank (text lists 16 when the world is > 64)\n"
            "  --hot-rows               also choose how many hot rows each row-wise table copies\n"
            "                           onto every rank (tables whose config sets none)\n");
}

static int parse_args(int argc, char **argv, plan_opts *o, FILE *err)
{
    memset(o, 0, sizeof *o);
    o->memory = -1;
    o->replicate = -1;
    o->lookup_weight = -1;
    o->batches = 20;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            if (o->config) {
                fprintf(err, "ember plan: more than one CONFIG ('%s', '%s')\n", o->config, arg);
                return 2;
            }
            o->config = arg;
            continue;
        }
        char name[64];
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nlen >= sizeof name) {
            fprintf(err, "ember plan: unknown option '%s' (ember plan --help)\n", arg);
            return 2;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            plan_usage(stdout);
            return -1;
        }
        if (!strcmp(name, "--json") || !strcmp(name, "--all-ranks") || !strcmp(name, "--hot-rows")) {
            if (eq) {
                fprintf(err, "ember plan: %s takes no value\n", name);
                return 2;
            }
            if (name[2] == 'j')
                o->json = 1;
            else if (name[2] == 'a')
                o->all_ranks = 1;
            else
                o->hot_rows = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        if (strcmp(name, "--world") && strcmp(name, "--memory-per-rank") &&
            strcmp(name, "--replicate-threshold") && strcmp(name, "--lookup-weight") &&
            strcmp(name, "--batch") && strcmp(name, "--data") && strcmp(name, "--batches") &&
            strcmp(name, "--horizon")) {
            fprintf(err, "ember plan: unknown option '%s' (ember plan --help)\n", arg);
            return 2;
        }
        if (!val) {
            fprintf(err, "ember plan: %s needs a value\n", name);
            return 2;
        }
        if (!eq)
            i++;
        int bad = 0;
        int64_t v = 0;
        if (!strcmp(name, "--world")) {
            bad = synth_parse_int64(val, 1, 1 << 20, &v);
            o->world = (int32_t)v;
        } else if (!strcmp(name, "--memory-per-rank")) {
            bad = config_parse_bytes(val, &o->memory);
        } else if (!strcmp(name, "--replicate-threshold")) {
            bad = config_parse_bytes(val, &o->replicate);
        } else if (!strcmp(name, "--lookup-weight")) {
            char *end;
            o->lookup_weight = strtod(val, &end);
            bad = end == val || *end || !(o->lookup_weight >= 0) || !isfinite(o->lookup_weight);
        } else if (!strcmp(name, "--batch")) {
            bad = synth_parse_int64(val, 1, INT32_MAX, &o->batch);
        } else if (!strcmp(name, "--batches")) {
            bad = synth_parse_int64(val, 1, INT32_MAX, &o->batches);
        } else if (!strcmp(name, "--horizon")) {
            bad = synth_parse_int64(val, 1, INT64_C(1) << 40, &o->horizon);
        } else {
            o->data = val;
        }
        if (bad) {
            fprintf(err, "ember plan: bad value '%s' for %s\n", val, name);
            return 2;
        }
    }
    if (!o->config) {
        fprintf(err, "ember plan: missing CONFIG\n");
        plan_usage(err);
        return 2;
    }
    return 0;
}

/* Where the statistics come from, for the header line. */
static void law_source(const config_file *cf, char *buf, size_t n)
{
    int zipf = 0, unif = 0, keyed = 0, guessed = 0;
    for (int32_t t = 0; t < cf->num_tables; t++) {
        zipf += cf->table_extra[t].zipf, unif += !cf->table_extra[t].zipf;
        keyed += cf->tables[t].kind == EMBER_TABLE_DYNAMIC;
        guessed += cf->tables[t].kind == EMBER_TABLE_DYNAMIC && !cf->table_extra[t].vocab;
    }
    int k;
    if (unif == 0)
        k = snprintf(buf, n, "Zipf(%g) law of the config", cf->table_extra[0].alpha);
    else if (zipf == 0)
        k = snprintf(buf, n, "uniform law of the config");
    else
        k = snprintf(buf, n, "the config's laws (%d Zipf, %d uniform tables)", zipf, unif);
    if (keyed && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "; dynamic tables: the synthetic task's keys, `keys` per feature%s",
                 guessed ? " (unset: capacity x world)" : "");
}

static const char *place_short(ember_placement p)
{
    static const char *n[] = {"row", "column", "table", "replicated"};
    return (unsigned)p < 4 ? n[p] : "?";
}

/* max / mean of v over W ranks (1 when the mean is 0) */
static double imbalance(const double *v, int32_t W)
{
    double mx = 0, sum = 0;
    for (int32_t r = 0; r < W; r++) {
        sum += v[r];
        if (v[r] > mx)
            mx = v[r];
    }
    return sum > 0 ? mx / (sum / W) : 1.0;
}

typedef struct summary {
    const ember_table_config *tiered; /* tables with their tiers (plan_tiers) */
    const double *hit;                /* expected LRU hit rate, -1: memory     */
    const plan_dynamic *dyn;          /* [T] dynamic tables' keys (capacity 0:
                                         a fixed table)                       */
    int64_t index_max;                /* key indexes on a rank, at most        */
    double imb_ids, imb_rows, imb_sent, imb_cost;
    double a2a, ag, sent_max, mem_max;
    int32_t busiest;
    double *cost; /* [W] */
} summary;

static int summarise(const plan_result *res, double lw, summary *s)
{
    int32_t W = res->world;
    double *v[4];
    for (int i = 0; i < 4; i++)
        if (!(v[i] = malloc(sizeof(double) * (size_t)W)))
            return -1;
    memset(s, 0, sizeof *s);
    for (int32_t r = 0; r < W; r++) {
        const plan_rank_cost *c = &res->ranks[r];
        v[0][r] = c->ids_served;
        v[1][r] = (double)plan_rank_memory(c);
        v[2][r] = c->a2a_sent + c->ag_sent;
        v[3][r] = plan_rank_weight(c, lw);
        s->a2a += c->a2a_sent;
        s->ag += c->ag_sent;
        if (v[2][r] > s->sent_max)
            s->sent_max = v[2][r];
        if (v[1][r] > s->mem_max)
            s->mem_max = v[1][r];
        if (c->index_bytes > s->index_max)
            s->index_max = c->index_bytes;
        if (v[3][r] > v[3][s->busiest])
            s->busiest = r;
    }
    s->imb_ids = imbalance(v[0], W);
    s->imb_rows = imbalance(v[1], W);
    s->imb_sent = imbalance(v[2], W);
    s->imb_cost = imbalance(v[3], W);
    s->cost = v[3];
    for (int i = 0; i < 3; i++)
        free(v[i]);
    return 0;
}

static json_t *jbytes(double v) { return json_integer((json_int_t)llround(v)); }

/* The rows of a table as laid out: a dynamic table's capacity x world. */
static int64_t shown_rows(const ember_table_config *tb, int32_t W)
{
    return tb->kind == EMBER_TABLE_DYNAMIC ? plan_dynamic_capacity(tb) * W : tb->rows;
}

static int print_json(const plan_opts *o, const config_file *cf, const plan_options *po,
                      int64_t B, const plan_result *res, const summary *s, const plan_pin *pins,
                      const char *source)
{
    json_t *root = json_object(), *tabs = json_array(), *ranks = json_array();
    json_object_set_new(root, "config", json_string(cf->path));
    json_object_set_new(root, "name", json_string(cf->name));
    json_object_set_new(root, "world", json_integer(po->world));
    json_object_set_new(root, "global_batch", json_integer(B));
    json_object_set_new(root, "memory_per_rank", json_integer(po->memory_per_rank));
    json_object_set_new(root, "replicate_threshold", json_integer(po->replicate_threshold));
    json_object_set_new(root, "lookup_weight", json_real(po->lookup_weight));
    json_object_set_new(root, "id_statistics", json_string(source));
    json_object_set_new(root, "cost", jbytes(res->cost));
    json_object_set_new(root, "seconds", json_real(res->seconds));
    for (int32_t t = 0; t < cf->num_tables; t++) {
        const ember_table_config *tb = &cf->tables[t];
        const plan_table_cost *tc = &res->tables[t];
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string(tb->name));
        json_object_set_new(j, "rows", json_integer(shown_rows(tb, res->world)));
        json_object_set_new(j, "dim", json_integer(tb->dim));
        json_object_set_new(j, "optimizer", json_string(config_optimizer_name(tb->optimizer.kind)));
        json_object_set_new(j, "placement", json_string(place_short(res->placement[t])));
        if (res->placement[t] == EMBER_PLACE_TABLE)
            json_object_set_new(j, "owner", json_integer(res->owner[t]));
        if (res->placement[t] == EMBER_PLACE_TABLE || res->placement[t] == EMBER_PLACE_ROW)
            json_object_set_new(j, "exchange", json_string(config_exchange_name(res->exchange[t])));
        json_object_set_new(j, "pinned", json_boolean(pins[t].placement >= 0));
        json_object_set_new(j, "hot_rows", json_integer(res->hot_rows[t]));
        json_object_set_new(j, "row_bytes", json_integer(tc->row_bytes));
        json_object_set_new(j, "state_bytes", json_integer(tc->state_bytes));
        json_object_set_new(j, "max_rank_bytes", json_integer(tc->max_rank_bytes));
        json_object_set_new(j, "a2a_bytes", jbytes(tc->a2a_bytes));
        json_object_set_new(j, "ag_bytes", jbytes(tc->ag_bytes));
        json_object_set_new(j, "ids_served", json_real(tc->ids_served));
        json_object_set_new(j, "reason", json_string(res->reason[t]));
        json_object_set_new(j, "storage", json_string(s->tiered[t].storage == EMBER_STORAGE_SSD ? "ssd" : "memory"));
        if (s->tiered[t].storage == EMBER_STORAGE_SSD) {
            json_object_set_new(j, "cache_bytes", json_integer(s->tiered[t].cache_bytes));
            json_object_set_new(j, "ssd_bytes", json_integer(tc->ssd_bytes));
            json_object_set_new(j, "expected_lru_hit_rate", json_real(s->hit[t]));
        }
        json_object_set_new(j, "kind", json_string(tb->kind == EMBER_TABLE_DYNAMIC ? "dynamic" : "fixed"));
        if (tb->kind == EMBER_TABLE_DYNAMIC) {
            json_object_set_new(j, "index_bytes", json_integer(tc->index_bytes));
            json_object_set_new(j, "key_bytes", jbytes(tc->key_bytes));
            json_object_set_new(j, "dynamic", plan_dynamic_json(&s->dyn[t]));
        }
        json_array_append_new(tabs, j);
    }
    for (int32_t r = 0; r < res->world; r++) {
        const plan_rank_cost *c = &res->ranks[r];
        json_t *j = json_object(), *own = json_array();
        int shared = 0;
        for (int32_t t = 0; t < cf->num_tables; t++) {
            if (res->placement[t] == EMBER_PLACE_TABLE) {
                if (res->owner[t] == r)
                    json_array_append_new(own, json_string(cf->tables[t].name));
            } else if (res->placement[t] != EMBER_PLACE_ROW || shown_rows(&cf->tables[t], res->world) > r) {
                shared++;
            }
        }
        json_object_set_new(j, "rank", json_integer(r));
        json_object_set_new(j, "table_wise", own);
        json_object_set_new(j, "shared_tables", json_integer(shared));
        json_object_set_new(j, "row_bytes", json_integer(c->row_bytes));
        json_object_set_new(j, "state_bytes", json_integer(c->state_bytes));
        json_object_set_new(j, "index_bytes", json_integer(c->index_bytes));
        json_object_set_new(j, "ssd_bytes", json_integer(c->ssd_bytes));
        json_object_set_new(j, "ids_served", json_real(c->ids_served));
        json_object_set_new(j, "lookup_bytes", jbytes(c->lookup_bytes));
        json_object_set_new(j, "a2a_sent", jbytes(c->a2a_sent));
        json_object_set_new(j, "ag_sent", jbytes(c->ag_sent));
        json_object_set_new(j, "a2a_received", jbytes(c->a2a_recv));
        json_object_set_new(j, "ag_received", jbytes(c->ag_recv));
        json_object_set_new(j, "bytes_sent", jbytes(c->a2a_sent + c->ag_sent));
        json_object_set_new(j, "cost", jbytes(s->cost[r]));
        json_array_append_new(ranks, j);
    }
    json_object_set_new(root, "tables", tabs);
    json_object_set_new(root, "ranks", ranks);
    json_t *tot = json_object(), *imb = json_object();
    json_object_set_new(tot, "a2a_bytes", jbytes(s->a2a));
    json_object_set_new(tot, "ag_bytes", jbytes(s->ag));
    json_object_set_new(tot, "bytes_sent", jbytes(s->a2a + s->ag));
    json_object_set_new(tot, "busiest_rank", json_integer(s->busiest));
    json_object_set_new(tot, "max_rank_memory", jbytes(s->mem_max));
    json_object_set_new(tot, "max_rank_index", json_integer(s->index_max));
    json_object_set_new(imb, "ids_served", json_real(s->imb_ids));
    json_object_set_new(imb, "row_bytes", json_real(s->imb_rows));
    json_object_set_new(imb, "bytes_sent", json_real(s->imb_sent));
    json_object_set_new(imb, "cost", json_real(s->imb_cost));
    json_object_set_new(root, "totals", tot);
    json_object_set_new(root, "imbalance", imb);
    (void)o;
    char *out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (!out)
        return -1;
    puts(out);
    free(out);
    return 0;
}

/* The SSD tier's tables: cache and store file per rank, expected hit rate. */
static void print_tiers(const config_file *cf, const plan_result *res, const summary *s)
{
    char b1[32], b2[32], b3[32];
    int any = 0;
    for (int32_t t = 0; t < cf->num_tables; t++)
        any |= s->tiered[t].storage == EMBER_STORAGE_SSD;
    if (!any)
        return;
    int64_t dram = 0, disk = 0;
    for (int32_t r = 0; r < res->world; r++) {
        const plan_rank_cost *c = &res->ranks[r];
        dram = plan_rank_memory(c) > dram ? plan_rank_memory(c) : dram;
        disk = c->ssd_bytes > disk ? c->ssd_bytes : disk;
    }
    printf("\nSSD tier (docs/tiers.md): per rank at most %s in DRAM (rows, state%s and caches) and %s in "
           "store files\n", plan_format_bytes((double)dram, b1, sizeof b1), s->index_max ? ", key indexes" : "",
           plan_format_bytes((double)disk, b2, sizeof b2));
    printf("  %-24s %12s %14s %20s\n", "table", "cache/rank", "store, total", "expected hit rate");
    for (int32_t t = 0; t < cf->num_tables; t++) {
        if (s->tiered[t].storage != EMBER_STORAGE_SSD)
            continue;
        printf("  %-24s %12s %14s %19.1f%%\n", cf->tables[t].name,
               plan_format_bytes((double)s->tiered[t].cache_bytes, b1, sizeof b1),
               plan_format_bytes((double)res->tables[t].ssd_bytes, b3, sizeof b3), 100.0 * s->hit[t]);
    }
    printf("  (hit rate: LRU by Che's approximation from the id statistics; lookahead does better)\n");
}

static void print_text(const plan_opts *o, const config_file *cf, const plan_options *po,
                       int64_t B, const plan_result *res, const summary *s, const char *source)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32], b8[32];
    int32_t W = po->world, T = cf->num_tables;
    printf("ember plan: %s (%s): %d table%s, %d feature%s, global batch %lld, world %d, ",
           cf->path, cf->name, (int)T, T == 1 ? "" : "s", (int)cf->num_features,
           cf->num_features == 1 ? "" : "s", (long long)B, (int)W);
    if (po->memory_per_rank > 0)
        printf("budget %s per rank\n", plan_format_bytes((double)po->memory_per_rank, b1, sizeof b1));
    else
        printf("no memory budget\n");
    printf("ids: %s; bytes are per step (forward + backward), expected values; planned in "
           "%.1f ms\n\n", source, 1e3 * res->seconds);

    /* tables: widths from the names */
    int nw = 5;
    for (int32_t t = 0; t < T; t++)
        if ((int)strlen(cf->tables[t].name) > nw)
            nw = (int)strlen(cf->tables[t].name);
    printf("%-*s %11s %4s %-15s %-10s %5s %-6s %10s %10s %10s  %s\n", nw, "table", "rows", "dim",
           "optimizer", "placement", "owner", "xchg", "per rank", "a2a sent", "ag sent", "why");
    for (int32_t t = 0; t < T; t++) {
        const ember_table_config *tb = &cf->tables[t];
        const plan_table_cost *tc = &res->tables[t];
        char owner[16] = "-";
        if (res->placement[t] == EMBER_PLACE_TABLE)
            snprintf(owner, sizeof owner, "%d", (int)res->owner[t]);
        const char *x = res->placement[t] == EMBER_PLACE_ROW || res->placement[t] == EMBER_PLACE_TABLE
                            ? config_exchange_name(res->exchange[t]) : "-";
        char why[200];
        snprintf(why, sizeof why, "%s", res->reason[t]);
        if (res->hot_rows[t])
            snprintf(why, sizeof why, "%s; hot rows %lld", res->reason[t], (long long)res->hot_rows[t]);
        printf("%-*s %11lld %4d %-15s %-10s %5s %-6s %10s %10s %10s  %s\n", nw, tb->name,
               (long long)shown_rows(tb, W), tb->dim, config_optimizer_name(tb->optimizer.kind),
               place_short(res->placement[t]), owner, x,
               plan_format_bytes((double)tc->max_rank_bytes, b1, sizeof b1),
               plan_format_bytes(tc->a2a_bytes, b2, sizeof b2),
               plan_format_bytes(tc->ag_bytes, b3, sizeof b3), why);
    }

    /* ranks: all, or the first 8 and the 8 busiest */
    char *show = calloc((size_t)W, 1);
    if (!show)
        return;
    int limited = W > 64 && !o->all_ranks;
    for (int32_t r = 0; r < W; r++)
        show[r] = !limited || r < 8;
    if (limited) /* and the 8 busiest of the others */
        for (int k = 0; k < 8; k++) {
            int32_t best = -1;
            for (int32_t r = 8; r < W; r++)
                if (!show[r] && (best < 0 || s->cost[r] > s->cost[best]))
                    best = r;
            if (best >= 0)
                show[best] = 1;
        }
    int ix = s->index_max > 0; /* a key index column for dynamic tables */
    printf("\n%5s  %-24s %10s %10s%*s %10s %10s %10s %10s %10s %10s\n", "rank", "tables", "rows",
           "state", ix ? 11 : 0, ix ? "key index" : "", "ids served", "lookups", "a2a sent", "ag sent",
           "received", "cost");
    int32_t hidden = 0;
    for (int32_t r = 0; r < W; r++) {
        if (!show[r]) {
            hidden++;
            continue;
        }
        const plan_rank_cost *c = &res->ranks[r];
        char list[25] = "", more[64];
        int own = 0, shared = 0, full = 0;
        for (int32_t t = 0; t < T; t++) {
            if (res->placement[t] == EMBER_PLACE_TABLE) {
                if (res->owner[t] != r)
                    continue;
                own++;
                size_t L = strlen(list);
                if (!full && L + strlen(cf->tables[t].name) + 2 < sizeof list - 4)
                    snprintf(list + L, sizeof list - L, "%s%s", L ? "," : "", cf->tables[t].name);
                else
                    full = 1;
            } else if (res->placement[t] != EMBER_PLACE_ROW || shown_rows(&cf->tables[t], res->world) > r) {
                shared++;
            }
        }
        if (full)
            snprintf(list + strlen(list), sizeof list - strlen(list), ",..");
        if (shared)
            snprintf(more, sizeof more, "%s%s+%d spread", list, own ? " " : "", shared);
        else
            snprintf(more, sizeof more, "%s", list);
        if (strlen(more) > 24)
            snprintf(more, sizeof more, "%d own +%d spread", own, shared);
        char index[32] = "";
        if (ix)
            plan_format_bytes((double)c->index_bytes, index, sizeof index);
        printf("%5d  %-24s %10s %10s%*s %10s %10s %10s %10s %10s %10s%s\n", (int)r, more,
               plan_format_bytes((double)c->row_bytes, b1, sizeof b1),
               plan_format_bytes((double)c->state_bytes, b2, sizeof b2), ix ? 11 : 0, index,
               plan_fmt_count(c->ids_served, b3, sizeof b3),
               plan_format_bytes(c->lookup_bytes, b4, sizeof b4),
               plan_format_bytes(c->a2a_sent, b5, sizeof b5),
               plan_format_bytes(c->ag_sent, b6, sizeof b6),
               plan_format_bytes(c->a2a_recv + c->ag_recv, b7, sizeof b7),
               plan_format_bytes(s->cost[r], b8, sizeof b8), r == s->busiest ? "  busiest" : "");
    }
    if (hidden)
        printf("  ... %d more ranks (--all-ranks lists them, --json has all)\n", (int)hidden);
    free(show);
    printf("\nper step, all ranks: all-to-all %s, all-gather %s sent; busiest rank %d: cost %s "
           "(max(sent, received) + %g x lookups)\n",
           plan_format_bytes(s->a2a, b1, sizeof b1), plan_format_bytes(s->ag, b2, sizeof b2),
           (int)s->busiest, plan_format_bytes(s->cost[s->busiest], b3, sizeof b3),
           po->lookup_weight);
    printf("imbalance, max / mean over ranks: ids served %.2f, rows + state %.2f, bytes sent %.2f, "
           "cost %.2f\n", s->imb_ids, s->imb_rows, s->imb_sent, s->imb_cost);
    printf("memory: at most %s of rows + state%s on a rank", plan_format_bytes(s->mem_max, b1, sizeof b1),
           s->index_max ? " + key indexes" : "");
    if (po->memory_per_rank > 0)
        printf(" (%.0f%% of the budget)", 100.0 * s->mem_max / (double)po->memory_per_rank);
    printf("; plan cost (busiest + mean rank) %s\n", plan_format_bytes(res->cost, b2, sizeof b2));
    print_tiers(cf, res, s);
    plan_dynamic_print(cf, res, s->dyn, B);
}

int cmd_plan(const tool_ctx *ctx, int argc, char **argv)
{
    plan_opts o;
    int prc = parse_args(argc, argv, &o, ctx->err);
    if (prc)
        return prc < 0 ? 0 : prc;
    char msg[1024];
    config_file *cf = NULL;
    if (config_file_load(o.config, &cf, msg, sizeof msg)) {
        fprintf(ctx->err, "ember plan: %s\n", msg);
        return 1;
    }
    if (cf->num_tables == 0) { /* a file for `ember train` may leave them out */
        fprintf(ctx->err, "ember plan: %s: no tables to place (tables = ( ... ); is missing)\n", o.config);
        config_file_free(cf);
        return 1;
    }
    int status = 1;
    int32_t T = cf->num_tables, F = cf->num_features;
    plan_id_stats *st = calloc((size_t)T, sizeof *st);
    double *pooling = calloc((size_t)F + 1, sizeof *pooling);
    plan_pin *pins = calloc((size_t)T, sizeof *pins);
    plan_dynamic *dyn = calloc((size_t)T, sizeof *dyn);
    plan_result res;
    summary sm = {0};
    ember_table_config *tiered = NULL;
    double *hit = NULL;
    memset(&res, 0, sizeof res);
    if (!st || !pooling || !pins || !dyn) {
        fprintf(ctx->err, "ember plan: out of memory\n");
        goto done;
    }
    plan_options po = plan_options_default();
    po.world = o.world ? o.world : cf->planner.world;
    po.memory_per_rank = o.memory >= 0 ? o.memory : cf->planner.memory_per_rank;
    po.replicate_threshold = o.replicate >= 0 ? o.replicate : cf->planner.replicate_threshold;
    po.lookup_weight = o.lookup_weight >= 0 ? o.lookup_weight : cf->planner.lookup_weight;
    po.choose_hot_rows = o.hot_rows;
    /* a config for `ember train`: its run's global batch (micro-batch x accumulation x ranks) */
    int64_t B = o.batch                ? o.batch
                : cf->train.present    ? (int64_t)cf->train.micro_batch * cf->train.accumulate * po.world
                                       : cf->data.batch_size;
    for (int32_t f = 0; f < F; f++)
        pooling[f] = cf->feature_extra[f].pooling;
    int weighted = config_file_weighted(cf);
    char source[600];
    if (o.data) {
        int64_t read = 0;
        if (plan_config_stats_data(cf, o.data, o.batches, st, pooling, &weighted, &read, msg, sizeof msg)) {
            fprintf(ctx->err, "ember plan: %s\n", msg);
            goto done;
        }
        snprintf(source, sizeof source, "measured on %lld batch%s of %s (pooling and weights as "
                 "observed)", (long long)read, read == 1 ? "" : "es", o.data);
    } else {
        if (plan_config_stats_law(cf, po.world, pooling, st, msg, sizeof msg)) {
            fprintf(ctx->err, "ember plan: %s\n", msg);
            goto done;
        }
        law_source(cf, source, sizeof source);
    }
    for (int32_t t = 0; t < T; t++)
        pins[t] = (plan_pin){cf->table_extra[t].placement_pin, cf->table_extra[t].owner_pin,
                             cf->table_extra[t].exchange_pin};
    plan_workload w = {&cf->coll, B, pooling, weighted, st};
    /* tiers first: tables over the budget go to the SSD tier, whose cache is
     * then what counts in memory */
    tiered = calloc((size_t)T + 1, sizeof *tiered);
    hit = calloc((size_t)T + 1, sizeof *hit);
    if (!tiered || !hit || plan_tiers(&w, &po, tiered, hit) != EMBER_OK) {
        fprintf(ctx->err, "ember plan: out of memory\n");
        goto done;
    }
    ember_collection_config tcc = cf->coll;
    tcc.tables = tiered;
    w.cfg = &tcc;
    if (plan_make(&w, pins, &po, &res) != EMBER_OK) {
        fprintf(ctx->err, "ember plan: %s: %s\n", cf->path, res.error);
        goto done;
    }
    int64_t horizon = o.horizon ? o.horizon : cf->train.steps > 0 ? cf->train.steps : 1;
    for (int32_t t = 0; t < T; t++)
        if (cf->tables[t].kind == EMBER_TABLE_DYNAMIC &&
            plan_dynamic_keys(&w, t, po.world, (double)horizon, &dyn[t]) != EMBER_OK) {
            fprintf(ctx->err, "ember plan: %s: table '%s': no key statistics\n", cf->path, cf->tables[t].name);
            goto done;
        }
    if (summarise(&res, po.lookup_weight, &sm)) {
        fprintf(ctx->err, "ember plan: out of memory\n");
        goto done;
    }
    sm.tiered = tiered;
    sm.hit = hit;
    sm.dyn = dyn;
    if (o.json) {
        if (print_json(&o, cf, &po, B, &res, &sm, pins, source)) {
            fprintf(ctx->err, "ember plan: could not format JSON\n");
            goto done;
        }
    } else {
        print_text(&o, cf, &po, B, &res, &sm, source);
    }
    status = 0;
done:
    free(tiered);
    free(hit);
    free(dyn);
    free(sm.cost);
    plan_result_free(&res);
    free(st);
    free(pooling);
    free(pins);
    config_file_free(cf);
    return status;
}
