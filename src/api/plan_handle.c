/*
 * plan_handle.c: ember_plan_create (include/ember-plan.h, "planner"), the work of
 * `ember plan CONFIG`: a placement per table for a world of N ranks, and
 * what each rank then holds, serves and exchanges per step
 * (docs/planner.md).
 *
 * The config gives the tables, pins and planner settings (src/config); the
 * id statistics come from the config's id law or from a sample of data
 * (config/plan_config.h); then, in the planner's order (src/plan): the
 * tiers first (tables over the budget go to the SSD tier, whose cache is
 * then what counts in memory), the placements, the dynamic tables' keys,
 * and the figures over ranks (plan_summarise).  No MPI: the world is a
 * number.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_file.h"
#include "config/plan_config.h"
#include "core/status.h"
#include "data/data_error.h"
#include "ember-plan.h"
#include "model/model.h"
#include "plan/plan.h"

struct ember_plan {
    ember_handle_msg head;      /* first: ember_errmsg's, over msg          */
    char msg[256];
    config_file *cf;
    plan_result res;
    plan_pin *pins;
    ember_table_config *tiered; /* the tables with their tiers (plan_tiers) */
    double *hit;                /* expected LRU hit rate, -1: memory        */
    plan_dynamic *dyn;          /* [T] dynamic tables' keys                  */
    plan_summary sum;           /* over ranks                               */
    ember_plan_summary summary;
    char source[600];
    ember_plan_dense dense[64];  /* per pipeline stage                      */
};

ember_plan_config ember_plan_config_default(void)
{
    ember_plan_config c;
    memset(&c, 0, sizeof c);
    c.batches = 20;
    c.memory_per_rank = -1;
    c.replicate_threshold = -1;
    c.lookup_weight = -1;
    return c;
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

/* The planner's options: the call's, else the config's. */
static plan_options options_of(const ember_plan_config *c, const config_file *cf)
{
    plan_options po = plan_options_default();
    po.world = c->world ? c->world : cf->planner.world;
    po.memory_per_rank = c->memory_per_rank >= 0 ? c->memory_per_rank : cf->planner.memory_per_rank;
    po.replicate_threshold = c->replicate_threshold >= 0 ? c->replicate_threshold : cf->planner.replicate_threshold;
    po.lookup_weight = c->lookup_weight >= 0 ? c->lookup_weight : cf->planner.lookup_weight;
    po.choose_hot_rows = c->choose_hot_rows;
    return po;
}

/* The id statistics and pooling of every table (and the source line).
 * EMBER_OK, or a status with err. */
static int statistics(ember_plan *p, const ember_plan_config *c, const plan_options *po, plan_id_stats *st,
                      double *pooling, int *weighted, char *err, size_t n)
{
    const config_file *cf = p->cf;
    for (int32_t f = 0; f < cf->num_features; f++)
        pooling[f] = cf->feature_extra[f].pooling;
    *weighted = config_file_weighted(cf);
    if (c->data) {
        int64_t read = 0;
        if (plan_config_stats_data(cf, c->data, c->batches, st, pooling, weighted, &read, err, n))
            return EMBER_EINVAL;
        snprintf(p->source, sizeof p->source, "measured on %lld batch%s of %s (pooling and weights as observed)",
                 (long long)read, read == 1 ? "" : "es", c->data);
        return EMBER_OK;
    }
    if (plan_config_stats_law(cf, po->world, pooling, st, err, n))
        return EMBER_EINVAL;
    law_source(cf, p->source, sizeof p->source);
    return EMBER_OK;
}

/* Tiers, placements, dynamic tables' keys and the figures over ranks, on
 * the workload w.  EMBER_OK, or a status with err. */
static int make(ember_plan *p, plan_workload *w, const plan_options *po, int64_t horizon, char *err, size_t n)
{
    const config_file *cf = p->cf;
    const int32_t T = cf->num_tables;
    for (int32_t t = 0; t < T; t++)
        p->pins[t] = (plan_pin){cf->table_extra[t].placement_pin, cf->table_extra[t].owner_pin,
                                cf->table_extra[t].exchange_pin};
    /* tiers first: tables over the budget go to the SSD tier, whose cache is
     * then what counts in memory */
    if (plan_tiers(w, po, p->tiered, p->hit) != EMBER_OK) {
        snprintf(err, n, "out of memory");
        return EMBER_ENOMEM;
    }
    ember_collection_config tcc = cf->coll;
    tcc.tables = p->tiered;
    w->cfg = &tcc;
    int st = plan_make(w, p->pins, po, &p->res);
    if (st != EMBER_OK) {
        snprintf(err, n, "%s: %s", cf->path, p->res.error);
        return st;
    }
    for (int32_t t = 0; t < T; t++)
        if (cf->tables[t].kind == EMBER_TABLE_DYNAMIC &&
            plan_dynamic_keys(w, t, po->world, (double)horizon, &p->dyn[t]) != EMBER_OK) {
            snprintf(err, n, "%s: table '%s': no key statistics", cf->path, cf->tables[t].name);
            return EMBER_EINVAL;
        }
    if (plan_summarise(&p->res, cf->tables, po->lookup_weight, &p->sum) != EMBER_OK) {
        snprintf(err, n, "out of memory");
        return EMBER_ENOMEM;
    }
    return EMBER_OK;
}

/* The summary the accessors return. */
static void fill_summary(ember_plan *p, const plan_options *po, int64_t B, int64_t horizon)
{
    const config_file *cf = p->cf;
    const plan_summary *s = &p->sum;
    p->summary = (ember_plan_summary){
        .config = cf->path, .name = cf->name, .id_statistics = p->source,
        .tables = cf->num_tables, .features = cf->num_features, .world = po->world,
        .global_batch = B, .memory_per_rank = po->memory_per_rank,
        .replicate_threshold = po->replicate_threshold, .lookup_weight = po->lookup_weight,
        .horizon = horizon, .cost = p->res.cost, .seconds = p->res.seconds,
        .a2a_bytes = s->a2a, .ag_bytes = s->ag, .busiest_rank = s->busiest,
        .max_rank_memory = s->mem_max, .max_rank_index = s->index_max, .max_rank_ssd_bytes = s->ssd_max,
        .imbalance_ids_served = s->imb_ids, .imbalance_memory = s->imb_rows,
        .imbalance_bytes_sent = s->imb_sent, .imbalance_cost = s->imb_cost,
    };
}

/* The dense model's bytes per stage (model_plan_memory), for a world of W:
 * the train settings as the trainer reads them (none, stages 0, for a
 * model, stages or cuts the trainer would refuse). */
static void plan_dense(ember_plan *p, int32_t W)
{
    const cfg_train *t = &p->cf->train;
    const int32_t S = t->pipe_stages > 1 ? t->pipe_stages : 1;
    model_config mc = {t->micro_batch, t->accumulate, t->dense_optim, 1, 1, t->optimizer_shards, t->pipe_stages,
                       t->pipe_schedule, t->pipe_virtual, t->pipe_recompute, t->pipe_num_cuts, {0},
                       t->pipe_balance_memory};
    memcpy(mc.pipe_cuts, t->pipe_cuts, sizeof mc.pipe_cuts);
    if (dlrm_memory_bytes(&t->model, NULL, 1, 0) < 0 || W % S)
        return; /* no dense model the trainer would make here: no stages */
    char derr[300];
    for (int32_t s = 0; s < S; s++) {
        model_memory m;
        if (model_plan_memory(&mc, &t->model, s, W / S, &m, derr, sizeof derr) != EMBER_OK) {
            p->dense[0].stages = 0; /* cuts the trainer would refuse (it says why) */
            return;
        }
        p->dense[s] = (ember_plan_dense){S, mc.pipe_num_cuts, {0}, m.params, m.grads, m.state, m.activations};
        memcpy(p->dense[s].cuts, mc.pipe_cuts, sizeof p->dense[s].cuts);
    }
}

/* Everything after the config is read.  EMBER_OK, or a status with err. */
static int plan_config(ember_plan *p, const ember_plan_config *c, char *err, size_t n)
{
    const config_file *cf = p->cf;
    const int32_t T = cf->num_tables, F = cf->num_features;
    plan_id_stats *st = calloc((size_t)T, sizeof *st);
    double *pooling = calloc((size_t)F + 1, sizeof *pooling);
    p->pins = calloc((size_t)T, sizeof *p->pins);
    p->dyn = calloc((size_t)T, sizeof *p->dyn);
    p->tiered = calloc((size_t)T + 1, sizeof *p->tiered);
    p->hit = calloc((size_t)T + 1, sizeof *p->hit);
    int rc = EMBER_ENOMEM;
    if (!st || !pooling || !p->pins || !p->dyn || !p->tiered || !p->hit) {
        snprintf(err, n, "out of memory");
        goto done;
    }
    plan_options po = options_of(c, cf);
    /* a config for `ember train`: its run's global batch (micro-batch x accumulation x ranks) */
    int64_t B = c->batch             ? c->batch
                : cf->train.present ? (int64_t)cf->train.micro_batch * cf->train.accumulate * po.world
                                    : cf->data.batch_size;
    int weighted = 0;
    if ((rc = statistics(p, c, &po, st, pooling, &weighted, err, n)) != EMBER_OK)
        goto done;
    plan_workload w = {&cf->coll, B, pooling, weighted, st};
    int64_t horizon = c->horizon ? c->horizon : cf->train.steps > 0 ? cf->train.steps : 1;
    if ((rc = make(p, &w, &po, horizon, err, n)) == EMBER_OK) {
        plan_dense(p, po.world);
        fill_summary(p, &po, B, horizon);
    }
done:
    free(st);
    free(pooling);
    return rc;
}

int ember_plan_create(const ember_plan_config *c, ember_plan **out)
{
    char err[1024] = "";
    if (!c || !out || !c->config) {
        ember_data_set_error("ember_plan_create: no config");
        return EMBER_EINVAL;
    }
    *out = NULL;
    ember_plan *p = calloc(1, sizeof *p);
    if (!p) {
        ember_data_set_error("out of memory");
        return EMBER_ENOMEM;
    }
    ember_handle_begin(&p->head, p->msg, sizeof p->msg);
    int rc = EMBER_EINVAL;
    if (config_file_load(c->config, &p->cf, err, sizeof err) == 0) {
        if (p->cf->num_tables == 0) /* a file for `ember train` may leave them out */
            snprintf(err, sizeof err, "%s: no tables to place (tables = ( ... ); is missing)", c->config);
        else
            rc = plan_config(p, c, err, sizeof err);
    }
    if (rc != EMBER_OK) {
        ember_data_set_error("%s", err);
        ember_plan_destroy(p);
        return rc;
    }
    *out = p;
    return EMBER_OK;
}

void ember_plan_destroy(ember_plan *p)
{
    if (!p)
        return;
    plan_result_free(&p->res);
    plan_summary_free(&p->sum);
    free(p->pins);
    free(p->tiered);
    free(p->hit);
    free(p->dyn);
    config_file_free(p->cf);
    ember_handle_end(&p->head);
    free(p);
}

int ember_plan_summary_info(const ember_plan *p, ember_plan_summary *out)
{
    if (!p || !out)
        return ember_handle_fail(p ? &p->head : NULL, EMBER_EINVAL, "ember_plan_summary_info: %s is NULL",
                                 p ? "out" : "the plan");
    *out = p->summary;
    return EMBER_OK;
}

/* The rows of a table as laid out: a dynamic table's capacity x world. */
static int64_t shown_rows(const ember_table_config *tb, int32_t W)
{
    return tb->kind == EMBER_TABLE_DYNAMIC ? plan_dynamic_capacity(tb) * W : tb->rows;
}

int ember_plan_table_info(const ember_plan *p, int32_t t, ember_plan_table *out)
{
    if (!p || !out || t < 0 || t >= p->cf->num_tables)
        return ember_handle_fail(p ? &p->head : NULL, EMBER_EINVAL, "ember_plan_table_info: no table %d, or a NULL "
                                 "argument", (int)t);
    const ember_table_config *tb = &p->cf->tables[t];
    const plan_table_cost *tc = &p->res.tables[t];
    const plan_dynamic *d = &p->dyn[t];
    const int ssd = p->tiered[t].storage == EMBER_STORAGE_SSD;
    *out = (ember_plan_table){
        .name = tb->name, .reason = p->res.reason[t], .kind = tb->kind, .rows = shown_rows(tb, p->res.world),
        .dim = tb->dim, .optimizer = tb->optimizer.kind, .placement = p->res.placement[t],
        .owner = p->res.owner[t], .exchange = p->res.exchange[t], .pinned = p->pins[t].placement >= 0,
        .hot_rows = p->res.hot_rows[t], .row_bytes = tc->row_bytes, .state_bytes = tc->state_bytes,
        .max_rank_bytes = tc->max_rank_bytes, .a2a_bytes = tc->a2a_bytes, .ag_bytes = tc->ag_bytes,
        .ids_served = tc->ids_served, .storage = ssd ? EMBER_STORAGE_SSD : EMBER_STORAGE_MEMORY,
        .cache_bytes = ssd ? p->tiered[t].cache_bytes : 0, .ssd_bytes = tc->ssd_bytes,
        .expected_lru_hit_rate = p->hit[t], .index_bytes = tc->index_bytes, .key_bytes = tc->key_bytes,
        .evict = tb->evict,
        .keys = {d->capacity, d->index_bytes, d->busiest, d->keys_step, d->keys_horizon, d->fill_steps,
                 d->miss_step, d->over_step, d->over_horizon},
    };
    return EMBER_OK;
}

int ember_plan_dense_info(const ember_plan *p, int32_t s, ember_plan_dense *out)
{
    if (!p || !out || s < 0 || s >= p->dense[0].stages)
        return ember_handle_fail(p ? &p->head : NULL, EMBER_EINVAL, "ember_plan_dense_info: no stage %d, or a NULL "
                                 "argument", (int)s);
    *out = p->dense[s];
    return EMBER_OK;
}

int ember_plan_rank_info(const ember_plan *p, int32_t r, ember_plan_rank *out)
{
    if (!p || !out || r < 0 || r >= p->res.world)
        return ember_handle_fail(p ? &p->head : NULL, EMBER_EINVAL, "ember_plan_rank_info: no rank %d, or a NULL "
                                 "argument", (int)r);
    const plan_rank_cost *c = &p->res.ranks[r];
    *out = (ember_plan_rank){
        .table_wise = p->sum.table_wise[r], .shared_tables = p->sum.shared[r], .row_bytes = c->row_bytes,
        .state_bytes = c->state_bytes, .index_bytes = c->index_bytes, .ssd_bytes = c->ssd_bytes,
        .ids_served = c->ids_served, .lookup_bytes = c->lookup_bytes, .a2a_sent = c->a2a_sent,
        .ag_sent = c->ag_sent, .a2a_received = c->a2a_recv, .ag_received = c->ag_recv, .cost = p->sum.cost[r],
    };
    return EMBER_OK;
}
