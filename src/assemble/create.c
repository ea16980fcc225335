/*
 * create.c: creating and destroying a collection (ember_collection_create,
 * ember_collection_destroy).
 *
 * Create validates the whole config before allocating anything big
 * (validate.c), so a bad config fails fast with the field named; then it
 * copies the names, resolves every table's tier (collection/config.h), lays
 * the tables out over physical tables with their stores (layout.c), makes
 * the dynamic tables' key indexes (dynamic.c), writes the initial rows
 * (init.c) and the hot rows' state (exchange/hot.h).  Destroy takes apart
 * what create and the steps since made.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "assemble/assemble.h"
#include "collection/config.h"
#include "core/rng.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "step/step.h"

/* Copies names into one block so the collection owns them. */
static int copy_names(ember_collection *c, const ember_collection_config *cfg)
{
    size_t total = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++)
        total += strlen(cfg->tables[t].name) + 1;
    for (int32_t f = 0; f < cfg->num_features; f++)
        total += strlen(cfg->features[f].name) + 1;
    c->names = malloc(total);
    if (!c->names)
        return EMBER_ENOMEM;
    char *p = c->names;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        size_t len = strlen(cfg->tables[t].name) + 1;
        memcpy(p, cfg->tables[t].name, len);
        c->tables[t].cfg = cfg->tables[t];
        c->tables[t].cfg.name = p;
        c->tables[t].rng_key = ember_rng_table_key(cfg->seed, XXH64(p, len - 1, 0));
        if (cfg->tables[t].kind == EMBER_TABLE_DYNAMIC) { /* capacity rows on every rank */
            c->tables[t].cfg.capacity = ember_dyn_capacity(&cfg->tables[t]);
            c->tables[t].cfg.capacity_bytes = 0;
            c->tables[t].cfg.rows = c->tables[t].cfg.capacity * ember_world_size(cfg->world);
        }
        p += len;
    }
    for (int32_t f = 0; f < cfg->num_features; f++) {
        size_t len = strlen(cfg->features[f].name) + 1;
        memcpy(p, cfg->features[f].name, len);
        c->features[f].name = p;
        c->features[f].table = cfg->features[f].table;
        c->features[f].combiner = cfg->features[f].combiner;
        p += len;
    }
    return EMBER_OK;
}

/* Storage, cache policy, cache bytes and folder of every table, from its
 * own settings and the collection's rules (collection/tier_rule.c). */
static int resolve_tiers(ember_collection *c, const ember_collection_config *cfg)
{
    ember_storage *storage = malloc(sizeof(ember_storage) * (size_t)cfg->num_tables);
    int64_t *cache = malloc(sizeof(int64_t) * (size_t)cfg->num_tables);
    if (!storage || !cache) {
        free(storage);
        free(cache);
        return ember_fail_create(EMBER_ENOMEM, "out of memory");
    }
    ember_tier_resolve(cfg, c->world->size, storage, cache);
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        ember_table_config *tc = &c->tables[t].cfg;
        tc->storage = storage[t];
        if (tc->cache_policy == EMBER_CACHE_DEFAULT)
            tc->cache_policy = cfg->ssd_policy != EMBER_CACHE_DEFAULT ? cfg->ssd_policy : EMBER_CACHE_LOOKAHEAD;
        tc->cache_bytes = cache[t];
        if (!tc->path)
            tc->path = cfg->ssd_dir ? cfg->ssd_dir : ".";
    }
    free(storage);
    free(cache);
    if (c->cfg.lookahead == 0)
        c->cfg.lookahead = 16;
    ember_window_init(c);
    if (c->cfg.io_threads == 0)
        c->cfg.io_threads = 32;
    return EMBER_OK;
}

int ember_collection_create(const ember_collection_config *cfg, ember_collection **out)
{
    return ember_collection_create_rows(cfg, 1, out);
}

int ember_collection_create_rows(const ember_collection_config *cfg, int init_rows, ember_collection **out)
{
    int st;
    if (!out)
        return ember_fail_create(EMBER_EINVAL, "out is NULL");
    *out = NULL;
    if ((st = ember_validate_config(cfg)) != EMBER_OK)
        return st;
    ember_collection *c = calloc(1, sizeof *c);
    if (!c)
        return ember_fail_create(EMBER_ENOMEM, "out of memory");
    ember_handle_begin(&c->head, c->errmsg, sizeof c->errmsg);
    c->cfg = *cfg;
    c->world = cfg->world;
    if (!c->world) {
        if (ember_world_self(&c->own_world) != EMBER_OK) {
            free(c);
            return ember_fail_create(EMBER_ENOMEM, "out of memory");
        }
        c->world = c->own_world;
    }
    if (c->cfg.num_shards == 0)
        c->cfg.num_shards = c->world->size;
    c->threads = cfg->threads > 0 ? cfg->threads : omp_get_max_threads();
    c->tables = calloc((size_t)cfg->num_tables, sizeof *c->tables);
    c->features = calloc((size_t)cfg->num_features, sizeof *c->features);
    c->shape.seq_off = calloc((size_t)cfg->num_features, sizeof *c->shape.seq_off);
    c->sort_hist = malloc(sizeof(int64_t) * EMBER_SORT_HIST_SIZE);
    c->limits.counts = calloc((size_t)4 * cfg->num_tables * c->cfg.num_shards, sizeof(int64_t));
    c->comm_scratch = calloc((size_t)2 * c->world->size, sizeof(int64_t));
    c->prefetch.cnt = calloc((size_t)6 * c->world->size, sizeof(int64_t));
    c->exchange_scratch = calloc((size_t)4 * c->world->size, sizeof(int64_t));
    c->training = 1;
    c->lr_scale = 1.0f;
    if (!c->comm_scratch || !c->prefetch.cnt || !c->exchange_scratch || !c->tables || !c->features ||
        !c->shape.seq_off || !c->sort_hist || !c->limits.counts) {
        st = ember_fail_create(EMBER_ENOMEM, "out of memory");
        goto fail;
    }
    if ((st = copy_names(c, cfg)) != EMBER_OK) {
        ember_fail_create(st, "out of memory");
        goto fail;
    }
    if ((st = resolve_tiers(c, cfg)) != EMBER_OK)
        goto fail;
    for (int32_t t = 0; t < cfg->num_tables; t++) { /* what the SSD tier refuses, its storage resolved */
        const ember_table_config *tc = &c->tables[t].cfg;
        const char *why = tc->storage != EMBER_STORAGE_SSD ? NULL
                          : tc->hot_rows > 0                         ? "hot rows need the memory tier"
                          : cfg->schedule == EMBER_SCHEDULE_STALE    ? "the SSD tier does not go with the stale "
                                                                       "schedule (its cache holds one batch's rows "
                                                                       "at a time)"
                                                                     : NULL;
        if (why) {
            st = ember_fail_create(EMBER_EINVAL, "table '%s': %s", tc->name, why);
            goto fail;
        }
    }
    c->cfg.tables = NULL; /* the copies in c->tables are authoritative */
    c->cfg.features = NULL;
    st = ember_layout_build(c); /* layout sets the create message */
    for (int32_t t = 0; t < cfg->num_tables; t++)
        c->tables[t].cfg.path = NULL; /* the caller's strings are needed only here */
    c->cfg.ssd_dir = NULL;
    if (st != EMBER_OK || (st = ember_dyn_tables_create(c)) != EMBER_OK)
        goto fail;
    for (int32_t p = 0; p < c->num_ptables && init_rows; p++)
        ember_init_ptable(c, p);
    if ((st = ember_hot_create(c)) != EMBER_OK)
        goto fail;
    *out = c;
    return EMBER_OK;
fail:
    ember_collection_destroy(c);
    return st;
}

void ember_collection_destroy(ember_collection *c)
{
    if (!c)
        return;
    ember_schedule_cancel(c); /* MPI must be done with the begun batch's buffers */
    ember_dyn_tables_destroy(c);
    ember_slot_free(c);
    ember_world_destroy(c->sched_world);
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_hot_free(c->ptables[p].hot);
        ember_xchg_free(c->ptables[p].xchg);
        ember_store_destroy(c->ptables[p].store);
        free(c->ptables[p].tables);
        free(c->ptables[p].features);
        ember_route_free(&c->ptables[p].route);
    }
    free(c->ptables);
    free(c->prep_tables);
    free(c->tables);
    free(c->features);
    free(c->shape.seq_off);
    free(c->sort_hist);
    free(c->limits.counts);
    free(c->obs_record);
    free(c->obs_queue);
    free(c->obs_counts);
    free(c->comm_scratch);
    free(c->exchange_scratch);
    free(c->limits.mb_hash);
    free(c->shape.minibatch_start);
    free(c->shape.bag_off);
    free(c->prefetch.cnt);
    free(c->prefetch.out);
    free(c->prefetch.in);
    free(c->prefetch.tmp);
    free(c->prefetch.rows);
    free(c->prefetch.sec_counts);
    free(c->prefetch.section);
    free(c->names);
    ember_world_destroy(c->own_world);
    ember_handle_end(&c->head);
    free(c);
}

