/*
 * plan_start.c: a training run places the config's "auto" tables as
 * `ember plan` would place them for this very run (run.h).
 *
 * The run's world and global batch (micro-batch x accumulation x ranks)
 * and id statistics measured on the first batches of the training data
 * (the synthetic law for the built-in data) go to the same planner
 * (plan_make) `ember plan` calls, so `ember plan --data FILE` run with the
 * same world and batch shows the placement the run uses.  Pins in the
 * config are kept.  A saved `ember plan --json` (train.plan) is applied
 * instead, by table name, when its world is the run's.  Every rank
 * computes the plan from the same inputs, so every rank holds the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "config/plan_config.h"
#include "train/run.h"

#define TRAIN_PLAN_BATCHES 16 /* batches of the training data measured */

/* The placement (exchange) a plan's name stands for, or -1. */
static int parse_name(const char *(*name)(int), int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (!strcmp(name(i), s))
            return i;
    return -1;
}

/* One note line: what each table got. */
static void note_tables(ember_trainer *s, const char *how)
{
    const config_file *cf = s->cf;
    size_t k = (size_t)snprintf(s->plan_note, sizeof s->plan_note, "%s:", how);
    for (int32_t t = 0; t < cf->num_tables && k < sizeof s->plan_note; t++) {
        const ember_table_config *tb = &cf->tables[t];
        if (tb->placement == EMBER_PLACE_REPLICATED) /* no exchange: every rank looks up its own copy */
            k += (size_t)snprintf(s->plan_note + k, sizeof s->plan_note - k, "%s %s replicated", t ? "," : "",
                                  tb->name);
        else
            k += (size_t)snprintf(s->plan_note + k, sizeof s->plan_note - k, "%s %s %s/%s", t ? "," : "", tb->name,
                                  config_placement_name(tb->placement), config_exchange_name(tb->exchange));
        if (tb->placement == EMBER_PLACE_TABLE && k < sizeof s->plan_note)
            k += (size_t)snprintf(s->plan_note + k, sizeof s->plan_note - k, " on rank %d", (int)tb->owner);
    }
}

/* The placements of a saved `ember plan --json`, by table name. */
static int apply_saved(ember_trainer *s, int32_t world, char *err, size_t errlen)
{
    config_file *cf = s->cf;
    const char *path = s->t.plan_file;
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    int rc = EMBER_EINVAL;
    if (!j) {
        snprintf(err, errlen, "%s:%d: train.plan: not a plan (%s)", path, je.line, je.text);
        return EMBER_EINVAL;
    }
    json_t *tables = json_object_get(j, "tables");
    json_int_t pw = json_integer_value(json_object_get(j, "world"));
    if (!json_is_array(tables)) {
        snprintf(err, errlen, "%s: train.plan: no \"tables\" list (write it with ember plan --json)", path);
        goto out;
    }
    if (pw != world) {
        snprintf(err, errlen, "%s: train.plan: a plan for %lld ranks, this run has %d (plan again with --world %d)",
                 path, (long long)pw, (int)world, (int)world);
        goto out;
    }
    for (int32_t t = 0; t < cf->num_tables; t++) {
        ember_table_config *tb = &cf->tables[t];
        const cfg_table_extra *x = &cf->table_extra[t];
        json_t *e = NULL;
        for (size_t i = 0; i < json_array_size(tables) && !e; i++) {
            json_t *c = json_array_get(tables, i);
            const char *nm = json_string_value(json_object_get(c, "name"));
            if (nm && !strcmp(nm, tb->name))
                e = c;
        }
        if (!e) {
            snprintf(err, errlen, "%s: train.plan: no table \"%s\" (a plan of another config?)", path, tb->name);
            goto out;
        }
        int p = parse_name(config_placement_name, 4, json_string_value(json_object_get(e, "placement")));
        int xg = p == EMBER_PLACE_REPLICATED
                     ? (int)EMBER_EXCHANGE_ROWS /* none: its own copy */
                     : parse_name(config_exchange_name, 2, json_string_value(json_object_get(e, "exchange")));
        if (p < 0 || xg < 0) {
            snprintf(err, errlen, "%s: train.plan: table \"%s\": placement or exchange is not one ember knows", path,
                     tb->name);
            goto out;
        }
        int owner = -1;
        if (p == EMBER_PLACE_TABLE) {
            json_t *o = json_object_get(e, "owner");
            owner = json_is_integer(o) ? (int)json_integer_value(o) : -1;
        }
        const char *pinned = x->placement_pin >= 0 && p != x->placement_pin ? "placement"
                             : x->exchange_pin >= 0 && p != EMBER_PLACE_REPLICATED && xg != x->exchange_pin ? "exchange"
                             : x->owner_pin >= 0 && p == EMBER_PLACE_TABLE && owner != x->owner_pin ? "owner"
                                                                                                      : NULL;
        if (pinned) { /* a pin in the config wins: a plan that contradicts it is of another config */
            snprintf(err, errlen, "%s: train.plan: table \"%s\": the plan's %s contradicts the pin in %s (plan the "
                     "config again)", path, tb->name, pinned, cf->path);
            goto out;
        }
        tb->placement = (ember_placement)p;
        tb->exchange = (ember_exchange)xg;
        if (p == EMBER_PLACE_TABLE) {
            if (owner < 0 || owner >= world) {
                snprintf(err, errlen, "%s: train.plan: table \"%s\": a table placement needs an owner below %d", path,
                         tb->name, (int)world);
                goto out;
            }
            tb->owner = owner;
        }
    }
    char how[600];
    snprintf(how, sizeof how, "from %s", path);
    note_tables(s, how);
    rc = 0;
out:
    json_decref(j);
    return rc;
}

int train_plan_tables(ember_trainer *s, int64_t global_batch, char *err, size_t errlen)
{
    config_file *cf = s->cf;
    s->plan_note[0] = '\0';
    if (!cf || !cf->num_features) /* the built-in student's tables: row-wise */
        return 0;
    const int32_t T = cf->num_tables, F = cf->num_features, W = s->size;
    if (s->t.plan_file)
        return apply_saved(s, W, err, errlen);
    int any = 0;
    for (int32_t t = 0; t < T; t++)
        any |= cf->table_extra[t].placement_pin < 0 || cf->table_extra[t].exchange_pin < 0;
    if (!any || W == 1) /* one rank: every placement is the same table */
        return 0;
    plan_id_stats *st = calloc((size_t)T, sizeof *st);
    double *pooling = calloc((size_t)F + 1, sizeof *pooling);
    plan_pin *pins = calloc((size_t)T, sizeof *pins);
    plan_result res;
    memset(&res, 0, sizeof res);
    int rc = -1, weighted = config_file_weighted(cf);
    char source[512];
    if (!st || !pooling || !pins) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int32_t f = 0; f < F; f++)
        pooling[f] = cf->feature_extra[f].pooling;
    if (s->t.train_file) {
        int64_t read = 0;
        if (plan_config_stats_data(cf, s->t.train_file, TRAIN_PLAN_BATCHES, st, pooling, &weighted, &read, err,
                                   errlen))
            goto out;
        snprintf(source, sizeof source, "planned on %lld batch%s of %s", (long long)read, read == 1 ? "" : "es",
                 s->t.train_file);
    } else if (s->t.synth.drift != EMBER_DRIFT_NONE) { /* the law moves: its first batches say where it starts */
        if (plan_config_stats_task(cf, &s->t.synth, TRAIN_PLAN_BATCHES, st, pooling, &weighted, err, errlen))
            goto out;
        snprintf(source, sizeof source, "planned on %d batches of the synthetic task (its ids drift)",
                 TRAIN_PLAN_BATCHES);
    } else {
        if (plan_config_stats_law(cf, W, pooling, st, err, errlen))
            goto out;
        snprintf(source, sizeof source, "planned on the synthetic law");
    }
    for (int32_t t = 0; t < T; t++)
        pins[t] = (plan_pin){cf->table_extra[t].placement_pin, cf->table_extra[t].owner_pin,
                             cf->table_extra[t].exchange_pin};
    plan_options po = plan_options_default();
    po.world = W;
    po.memory_per_rank = cf->planner.memory_per_rank;
    po.replicate_threshold = cf->planner.replicate_threshold;
    po.lookup_weight = cf->planner.lookup_weight;
    plan_workload w = {&cf->coll, global_batch, pooling, weighted, st};
    if (plan_make(&w, pins, &po, &res) != EMBER_OK) {
        snprintf(err, errlen, "%s: the planner: %s", cf->path, res.error);
        goto out;
    }
    for (int32_t t = 0; t < T; t++) {
        ember_table_config *tb = &cf->tables[t];
        tb->placement = res.placement[t];
        tb->owner = res.owner[t];
        tb->exchange = res.exchange[t];
    }
    snprintf(source + strlen(source), sizeof source - strlen(source), ", global batch %lld", (long long)global_batch);
    note_tables(s, source);
    rc = 0;
out:
    plan_result_free(&res);
    free(st);
    free(pooling);
    free(pins);
    return rc;
}
