/*
 * cmd_plan.c: `ember plan CONFIG`: a placement per table for a world of N
 * ranks, and what each rank then holds, serves and exchanges per step
 * (docs/planner.md).  The plan is the library's (ember_plan_create,
 * include/ember-plan.h: the id statistics from the config's law or, with
 * --data, from a sample of data; tiers, placements, dynamic tables' keys
 * against their capacity); this file reads the options, calls it and
 * prints the plan as one JSON object or as text (plan_text.c).  No MPI:
 * the world is a number, so `--world 1024` shows a cluster's plan on a
 * laptop.  Under mpirun every rank computes the same plan without talking
 * to the others; rank 0 prints it (tool_ctx.h), and messages go to
 * ctx->err.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commands.h"
#include "ember-plan.h"
#include "ember.h"
#include "plan_print.h"
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
            bad = ember_parse_bytes(val, &o->memory);
        } else if (!strcmp(name, "--replicate-threshold")) {
            bad = ember_parse_bytes(val, &o->replicate);
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

static json_t *jbytes(double v) { return json_integer((json_int_t)llround(v)); }

/* The "dynamic" object of a table. */
static json_t *keys_json(const ember_plan_keys *d, int64_t horizon)
{
    json_t *j = json_object();
    json_object_set_new(j, "capacity", json_integer(d->capacity));
    json_object_set_new(j, "index_bytes_per_rank", json_integer(d->index_bytes));
    json_object_set_new(j, "horizon_steps", json_real((double)horizon));
    json_object_set_new(j, "busiest_rank", json_integer(d->busiest_rank));
    json_object_set_new(j, "keys_per_step", json_real(d->keys_per_step));
    json_object_set_new(j, "keys_over_horizon", json_real(d->keys_over_horizon));
    json_object_set_new(j, "fill_steps", isfinite(d->fill_steps) ? json_real(d->fill_steps) : json_null());
    json_object_set_new(j, "keys_without_row_per_step", json_real(d->keys_without_row_per_step));
    json_object_set_new(j, "over_capacity_per_step", json_boolean(d->over_capacity_per_step));
    json_object_set_new(j, "over_capacity_over_horizon", json_boolean(d->over_capacity_over_horizon));
    return j;
}

static json_t *table_json(const plan_view *v, int32_t t)
{
    const ember_plan_table *tb = &v->tables[t];
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(tb->name));
    json_object_set_new(j, "rows", json_integer(tb->rows));
    json_object_set_new(j, "dim", json_integer(tb->dim));
    json_object_set_new(j, "optimizer", json_string(ember_optimizer_name(tb->optimizer)));
    json_object_set_new(j, "placement", json_string(ember_placement_name(tb->placement)));
    if (tb->placement == EMBER_PLACE_TABLE)
        json_object_set_new(j, "owner", json_integer(tb->owner));
    if (tb->placement == EMBER_PLACE_TABLE || tb->placement == EMBER_PLACE_ROW)
        json_object_set_new(j, "exchange", json_string(ember_exchange_name(tb->exchange)));
    json_object_set_new(j, "pinned", json_boolean(tb->pinned));
    json_object_set_new(j, "hot_rows", json_integer(tb->hot_rows));
    json_object_set_new(j, "row_bytes", json_integer(tb->row_bytes));
    json_object_set_new(j, "state_bytes", json_integer(tb->state_bytes));
    json_object_set_new(j, "max_rank_bytes", json_integer(tb->max_rank_bytes));
    json_object_set_new(j, "a2a_bytes", jbytes(tb->a2a_bytes));
    json_object_set_new(j, "ag_bytes", jbytes(tb->ag_bytes));
    json_object_set_new(j, "ids_served", json_real(tb->ids_served));
    json_object_set_new(j, "reason", json_string(tb->reason));
    json_object_set_new(j, "storage", json_string(tb->storage == EMBER_STORAGE_SSD ? "ssd" : "memory"));
    if (tb->storage == EMBER_STORAGE_SSD) {
        json_object_set_new(j, "cache_bytes", json_integer(tb->cache_bytes));
        json_object_set_new(j, "ssd_bytes", json_integer(tb->ssd_bytes));
        json_object_set_new(j, "expected_lru_hit_rate", json_real(tb->expected_lru_hit_rate));
    }
    json_object_set_new(j, "kind", json_string(tb->kind == EMBER_TABLE_DYNAMIC ? "dynamic" : "fixed"));
    if (tb->kind == EMBER_TABLE_DYNAMIC) {
        json_object_set_new(j, "index_bytes", json_integer(tb->index_bytes));
        json_object_set_new(j, "key_bytes", jbytes(tb->key_bytes));
        json_object_set_new(j, "dynamic", keys_json(&tb->keys, v->sum->horizon));
    }
    return j;
}

static json_t *rank_json(const plan_view *v, int32_t r)
{
    const ember_plan_rank *c = &v->ranks[r];
    json_t *j = json_object(), *own = json_array();
    for (int32_t t = 0; t < v->sum->tables; t++)
        if (v->tables[t].placement == EMBER_PLACE_TABLE && v->tables[t].owner == r)
            json_array_append_new(own, json_string(v->tables[t].name));
    json_object_set_new(j, "rank", json_integer(r));
    json_object_set_new(j, "table_wise", own);
    json_object_set_new(j, "shared_tables", json_integer(c->shared_tables));
    json_object_set_new(j, "row_bytes", json_integer(c->row_bytes));
    json_object_set_new(j, "state_bytes", json_integer(c->state_bytes));
    json_object_set_new(j, "index_bytes", json_integer(c->index_bytes));
    json_object_set_new(j, "ssd_bytes", json_integer(c->ssd_bytes));
    json_object_set_new(j, "ids_served", json_real(c->ids_served));
    json_object_set_new(j, "lookup_bytes", jbytes(c->lookup_bytes));
    json_object_set_new(j, "a2a_sent", jbytes(c->a2a_sent));
    json_object_set_new(j, "ag_sent", jbytes(c->ag_sent));
    json_object_set_new(j, "a2a_received", jbytes(c->a2a_received));
    json_object_set_new(j, "ag_received", jbytes(c->ag_received));
    json_object_set_new(j, "bytes_sent", jbytes(c->a2a_sent + c->ag_sent));
    json_object_set_new(j, "cost", jbytes(c->cost));
    return j;
}

/* The dense model per pipeline stage, bytes per rank; NULL when the
 * config has none. */
static json_t *dense_json(const ember_plan *p)
{
    ember_plan_dense d;
    if (ember_plan_dense_info(p, 0, &d) != EMBER_OK)
        return NULL;
    json_t *j = json_object(), *cuts = json_array(), *stages = json_array();
    json_object_set_new(j, "stages", json_integer(d.stages));
    for (int32_t i = 0; i < d.num_cuts; i++)
        json_array_append_new(cuts, json_integer(d.cuts[i]));
    json_object_set_new(j, "cuts", cuts);
    for (int32_t s = 0; s < d.stages && ember_plan_dense_info(p, s, &d) == EMBER_OK; s++)
        json_array_append_new(stages, json_pack("{sIsIsIsI}", "params", (json_int_t)d.params, "grads",
                                                (json_int_t)d.grads, "state", (json_int_t)d.state, "activations",
                                                (json_int_t)d.activations));
    json_object_set_new(j, "per_stage", stages);
    return j;
}

/* The plan as one JSON object.  0, or -1 when it could not be formatted. */
static int print_json(const plan_view *v)
{
    const ember_plan_summary *s = v->sum;
    json_t *root = json_object(), *tabs = json_array(), *ranks = json_array();
    json_object_set_new(root, "config", json_string(s->config));
    json_object_set_new(root, "name", json_string(s->name));
    json_object_set_new(root, "world", json_integer(s->world));
    json_object_set_new(root, "global_batch", json_integer(s->global_batch));
    json_object_set_new(root, "memory_per_rank", json_integer(s->memory_per_rank));
    json_object_set_new(root, "replicate_threshold", json_integer(s->replicate_threshold));
    json_object_set_new(root, "lookup_weight", json_real(s->lookup_weight));
    json_object_set_new(root, "id_statistics", json_string(s->id_statistics));
    json_object_set_new(root, "cost", jbytes(s->cost));
    json_object_set_new(root, "seconds", json_real(s->seconds));
    for (int32_t t = 0; t < s->tables; t++)
        json_array_append_new(tabs, table_json(v, t));
    for (int32_t r = 0; r < s->world; r++)
        json_array_append_new(ranks, rank_json(v, r));
    json_object_set_new(root, "tables", tabs);
    json_object_set_new(root, "ranks", ranks);
    json_t *tot = json_object(), *imb = json_object();
    json_object_set_new(tot, "a2a_bytes", jbytes(s->a2a_bytes));
    json_object_set_new(tot, "ag_bytes", jbytes(s->ag_bytes));
    json_object_set_new(tot, "bytes_sent", jbytes(s->a2a_bytes + s->ag_bytes));
    json_object_set_new(tot, "busiest_rank", json_integer(s->busiest_rank));
    json_object_set_new(tot, "max_rank_memory", jbytes(s->max_rank_memory));
    json_object_set_new(tot, "max_rank_index", json_integer(s->max_rank_index));
    json_object_set_new(imb, "ids_served", json_real(s->imbalance_ids_served));
    json_object_set_new(imb, "row_bytes", json_real(s->imbalance_memory));
    json_object_set_new(imb, "bytes_sent", json_real(s->imbalance_bytes_sent));
    json_object_set_new(imb, "cost", json_real(s->imbalance_cost));
    json_object_set_new(root, "totals", tot);
    json_object_set_new(root, "imbalance", imb);
    json_t *dense = dense_json(v->plan);
    if (dense)
        json_object_set_new(root, "dense", dense);
    char *out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (!out)
        return -1;
    puts(out);
    free(out);
    return 0;
}

/* The plan's report into v (its arrays malloc'd): 0, or -1 out of memory. */
static int view_of(const ember_plan *p, ember_plan_summary *sum, plan_view *v)
{
    ember_plan_summary_info(p, sum);
    v->sum = sum;
    ember_plan_table *tables = calloc((size_t)sum->tables + 1, sizeof *tables);
    ember_plan_rank *ranks = calloc((size_t)sum->world + 1, sizeof *ranks);
    v->tables = tables;
    v->ranks = ranks;
    if (!tables || !ranks)
        return -1;
    for (int32_t t = 0; t < sum->tables; t++)
        ember_plan_table_info(p, t, &tables[t]);
    for (int32_t r = 0; r < sum->world; r++)
        ember_plan_rank_info(p, r, &ranks[r]);
    return 0;
}

int cmd_plan(const tool_ctx *ctx, int argc, char **argv)
{
    plan_opts o;
    int prc = parse_args(argc, argv, &o, ctx->err);
    if (prc)
        return prc < 0 ? 0 : prc;
    ember_plan_config c = ember_plan_config_default();
    c.config = o.config;
    c.data = o.data;
    c.batches = o.batches;
    c.world = o.world;
    c.memory_per_rank = o.memory;
    c.replicate_threshold = o.replicate;
    c.lookup_weight = o.lookup_weight;
    c.batch = o.batch;
    c.horizon = o.horizon;
    c.choose_hot_rows = o.hot_rows;
    ember_plan *p = NULL;
    if (ember_plan_create(&c, &p) != EMBER_OK) {
        fprintf(ctx->err, "ember plan: %s\n", ember_errmsg(NULL));
        return 1;
    }
    ember_plan_summary sum;
    plan_view v = {NULL, NULL, NULL, o.all_ranks, p};
    int status = 1;
    if (view_of(p, &sum, &v))
        fprintf(ctx->err, "ember plan: out of memory\n");
    else if (o.json && print_json(&v))
        fprintf(ctx->err, "ember plan: could not format JSON\n");
    else
        status = 0;
    if (status == 0 && !o.json)
        plan_print_text(&v);
    free((void *)v.tables);
    free((void *)v.ranks);
    ember_plan_destroy(p);
    return status;
}
