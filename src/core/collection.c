/*
 * collection.c: creating and destroying a collection, and the small queries
 * on it (stats, memory, row access, threads).
 *
 * Create validates the whole config before allocating anything big, so a bad
 * config fails fast with the field named.  Stacking groups tables whose dim
 * and optimizer are bitwise equal into one physical table (table/layout.c).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/collection.h"
#include "core/rng.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "dyn/dyn_step.h"
#include "step/step.h"
#include "quant/quant.h"
#include "table/init.h"
#include "table/layout.h"
#include "tier/tier.h"

ember_optimizer ember_optimizer_default(ember_optimizer_kind kind)
{
    ember_optimizer o = {kind, 0.01f, 1e-8f, 0.0f, 0.9f, 0.999f};
    return o;
}

ember_table_config ember_table_config_default(void)
{
    ember_table_config t;
    memset(&t, 0, sizeof t);
    t.init = EMBER_INIT_UNIFORM;
    t.init_value = 0.05f;
    t.optimizer = ember_optimizer_default(EMBER_OPT_SGD);
    t.limit_policy = EMBER_LIMIT_ERROR;
    return t;
}

ember_collection_config ember_collection_config_default(void)
{
    ember_collection_config c;
    memset(&c, 0, sizeof c);
    c.num_shards = 0; /* the world size */
    c.stack_tables = 1;
    c.bounds = EMBER_BOUNDS_ERROR;
    return c;
}

int32_t ember_state_floats(ember_optimizer_kind kind, int32_t dim)
{
    switch (kind) {
    case EMBER_OPT_ADAGRAD: return dim;
    case EMBER_OPT_ROWWISE_ADAGRAD: return 1;
    case EMBER_OPT_ADAM: return 2 * dim;
    default: return 0;
    }
}

static int check_finite_pos(float x) { return x == x && x > 0 && x < 1e30f; }

const char *ember_encoding_refusal(const ember_table_config *tc)
{
    return tc->kind == EMBER_TABLE_DYNAMIC         ? "a dynamic table"
           : tc->storage == EMBER_STORAGE_SSD      ? "the SSD tier"
           : tc->placement == EMBER_PLACE_COLUMN   ? "COLUMN placement"
           : tc->quant_buckets != 0                ? "simulated quantization"
                                                   : NULL;
}

static int validate_config(const ember_collection_config *cfg)
{
    if (!cfg)
        return ember_fail_create(EMBER_EINVAL, "config is NULL");
    if (cfg->num_tables < 1 || !cfg->tables)
        return ember_fail_create(EMBER_EINVAL, "num_tables must be >= 1 (got %d)", cfg->num_tables);
    if (cfg->num_features < 1 || !cfg->features)
        return ember_fail_create(EMBER_EINVAL, "num_features must be >= 1 (got %d)",
                                 cfg->num_features);
    if (cfg->num_shards < 0)
        return ember_fail_create(EMBER_EINVAL, "num_shards must be >= 0 (0 = world size; got %d)",
                                 cfg->num_shards);
    int32_t W = ember_world_size(cfg->world);
    if (cfg->threads < 0)
        return ember_fail_create(EMBER_EINVAL, "threads must be >= 0 (got %d)", cfg->threads);
    if (cfg->bounds != EMBER_BOUNDS_ERROR && cfg->bounds != EMBER_BOUNDS_DROP)
        return ember_fail_create(EMBER_EINVAL, "bounds policy %d is not error or drop", cfg->bounds);
    if (cfg->schedule < EMBER_SCHEDULE_BLOCKING || cfg->schedule > EMBER_SCHEDULE_STALE)
        return ember_fail_create(EMBER_EINVAL, "unknown schedule %d", cfg->schedule);
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        const char *nm = tc->name;
        if (!nm || !*nm)
            return ember_fail_create(EMBER_EINVAL, "table %d: name is empty", t);
        for (int32_t u = 0; u < t; u++)
            if (!strcmp(cfg->tables[u].name, nm))
                return ember_fail_create(EMBER_EINVAL, "table '%s': name used twice (tables %d and %d)",
                                         nm, u, t);
        char derr[400];
        if (ember_dyn_check_config(tc, W, derr, sizeof derr) != EMBER_OK)
            return ember_fail_create(EMBER_EINVAL, "%s", derr);
        if (tc->hot_rows < 0 || tc->hot_rows > tc->rows)
            return ember_fail_create(EMBER_EINVAL, "table '%s': hot_rows %lld outside [0, rows %lld]", nm,
                                     (long long)tc->hot_rows, (long long)tc->rows);
        if (tc->hot_rows > 0 && (tc->placement != EMBER_PLACE_ROW || tc->exchange != EMBER_EXCHANGE_ROWS ||
                                 tc->kind != EMBER_TABLE_FIXED || tc->rows_encoding != EMBER_ROWS_FP32))
            return ember_fail_create(EMBER_EINVAL, "table '%s': hot rows need row placement, the rows exchange "
                                     "and a fixed table with fp32 rows", nm); /* the tier: once resolved */
        if (tc->kind != EMBER_TABLE_FIXED && cfg->schedule != EMBER_SCHEDULE_BLOCKING)
            return ember_fail_create(EMBER_EINVAL, "table '%s': a dynamic table needs the blocking schedule (its "
                                     "keys become rows in the forward itself)", nm);
        if (tc->kind == EMBER_TABLE_FIXED && (tc->rows < 1 || tc->rows >= (int64_t)UINT32_MAX))
            return ember_fail_create(EMBER_EINVAL, "table '%s': rows %lld outside [1, 2^32-1)", nm,
                                     (long long)tc->rows);
        if (tc->dim < 1 || tc->dim > 1024)
            return ember_fail_create(EMBER_EINVAL, "table '%s': dim %d outside [1, 1024]", nm, tc->dim);
        if (tc->init < EMBER_INIT_UNIFORM || tc->init > EMBER_INIT_CONSTANT)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown init %d", nm, tc->init);
        if (tc->quant_buckets != 0 && (tc->quant_buckets < 2 || tc->quant_buckets > (1 << 24)))
            return ember_fail_create(EMBER_EINVAL, "table '%s': quantization buckets %d outside [2, 2^24] (0 = off)",
                                     nm, tc->quant_buckets);
        if (tc->quant_buckets != 0 &&
            !(isfinite(tc->quant_low) && isfinite(tc->quant_high) && tc->quant_low < tc->quant_high))
            return ember_fail_create(EMBER_EINVAL, "table '%s': quantization range [%g, %g] must be finite with "
                                     "low < high", nm, tc->quant_low, tc->quant_high);
        if (tc->rows_encoding < EMBER_ROWS_FP32 || tc->rows_encoding > EMBER_ROWS_INT4)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown rows_encoding %d", nm, tc->rows_encoding);
        if (tc->rows_encoding != EMBER_ROWS_FP32) {
            const char *why = ember_encoding_refusal(tc);
            if (why)
                return ember_fail_create(EMBER_EINVAL, "table '%s': encoded rows (%s) do not go with %s; they are "
                                         "for inference in memory, placed ROW, TABLE or REPLICATED", nm,
                                         ember_encoding_name((ember_encoding)tc->rows_encoding), why);
        }
        const ember_optimizer *o = &tc->optimizer;
        if (o->kind < EMBER_OPT_SGD || o->kind > EMBER_OPT_ADAM)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown optimizer %d", nm, o->kind);
        if (!check_finite_pos(o->lr))
            return ember_fail_create(EMBER_EINVAL, "table '%s': optimizer.lr %g must be > 0", nm, o->lr);
        if (o->kind != EMBER_OPT_SGD && !check_finite_pos(o->eps))
            return ember_fail_create(EMBER_EINVAL, "table '%s': optimizer.eps %g must be > 0", nm, o->eps);
        if (!(o->weight_decay >= 0 && o->weight_decay < 1e30f))
            return ember_fail_create(EMBER_EINVAL, "table '%s': optimizer.weight_decay %g must be >= 0",
                                     nm, o->weight_decay);
        if (o->kind == EMBER_OPT_ADAM &&
            !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1))
            return ember_fail_create(EMBER_EINVAL, "table '%s': Adam betas (%g, %g) must be in [0, 1)",
                                     nm, o->beta1, o->beta2);
        if (tc->max_ids_per_partition < 0 || tc->max_unique_ids_per_partition < 0)
            return ember_fail_create(EMBER_EINVAL, "table '%s': limits must be >= 0 (0 = unlimited)", nm);
        if (tc->limit_policy < EMBER_LIMIT_ERROR || tc->limit_policy > EMBER_LIMIT_MINIBATCH)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown limit policy %d", nm,
                                     tc->limit_policy);
        if (tc->placement < EMBER_PLACE_ROW || tc->placement > EMBER_PLACE_REPLICATED)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown placement %d", nm, tc->placement);
        if (tc->exchange != EMBER_EXCHANGE_ROWS && tc->exchange != EMBER_EXCHANGE_POOLED)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown exchange %d", nm, tc->exchange);
        if (tc->placement == EMBER_PLACE_TABLE && (tc->owner < 0 || tc->owner >= W))
            return ember_fail_create(EMBER_EINVAL, "table '%s': owner rank %d outside the world [0, %d)",
                                     nm, tc->owner, W);
        if (tc->storage < EMBER_STORAGE_AUTO || tc->storage > EMBER_STORAGE_SSD)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown storage %d", nm, tc->storage);
        if (tc->cache_policy < EMBER_CACHE_DEFAULT || tc->cache_policy > EMBER_CACHE_LOOKAHEAD)
            return ember_fail_create(EMBER_EINVAL, "table '%s': unknown cache policy %d", nm, tc->cache_policy);
        if (tc->cache_bytes < 0)
            return ember_fail_create(EMBER_EINVAL, "table '%s': cache_bytes %lld must be >= 0", nm,
                                     (long long)tc->cache_bytes);
        if (tc->path && (!*tc->path || strlen(tc->path) > 3000))
            return ember_fail_create(EMBER_EINVAL, "table '%s': path is empty or longer than 3000 bytes", nm);
    }
    if (cfg->ssd_min_bytes < 0 || cfg->memory_budget < 0 || cfg->ssd_cache_bytes < 0)
        return ember_fail_create(EMBER_EINVAL, "ssd_min_bytes, memory_budget and ssd_cache_bytes must be >= 0");
    if (cfg->ssd_policy < EMBER_CACHE_DEFAULT || cfg->ssd_policy > EMBER_CACHE_LOOKAHEAD)
        return ember_fail_create(EMBER_EINVAL, "unknown ssd_policy %d", cfg->ssd_policy);
    if (cfg->lookahead < 0 || cfg->lookahead >= 64)
        return ember_fail_create(EMBER_EINVAL, "lookahead %d outside [0, 63] (0 = 16)", cfg->lookahead);
    if (cfg->io_threads < 0 || cfg->io_threads > 256)
        return ember_fail_create(EMBER_EINVAL, "io_threads %d outside [0, 256] (0 = 32)", cfg->io_threads);
    if (cfg->ssd_dir && (!*cfg->ssd_dir || strlen(cfg->ssd_dir) > 3000))
        return ember_fail_create(EMBER_EINVAL, "ssd_dir is empty or longer than 3000 bytes");
    for (int32_t f = 0; f < cfg->num_features; f++) {
        const ember_feature_config *fc = &cfg->features[f];
        if (!fc->name || !*fc->name)
            return ember_fail_create(EMBER_EINVAL, "feature %d: name is empty", f);
        for (int32_t g = 0; g < f; g++)
            if (!strcmp(cfg->features[g].name, fc->name))
                return ember_fail_create(EMBER_EINVAL, "feature '%s': name used twice", fc->name);
        if (fc->table < 0 || fc->table >= cfg->num_tables)
            return ember_fail_create(EMBER_EINVAL, "feature '%s': table %d outside [0, %d)", fc->name,
                                     fc->table, cfg->num_tables);
        if (fc->combiner < EMBER_COMBINER_SUM || fc->combiner > EMBER_COMBINER_NONE)
            return ember_fail_create(EMBER_EINVAL, "feature '%s': unknown combiner %d", fc->name,
                                     fc->combiner);
    }
    return EMBER_OK;
}

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
 * own settings and the collection's rules (tier/rule.c). */
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
    if (c->cfg.io_threads == 0)
        c->cfg.io_threads = 32;
    return EMBER_OK;
}

int ember_collection_create(const ember_collection_config *cfg, ember_collection **out)
{
    int st;
    if (!out)
        return ember_fail_create(EMBER_EINVAL, "out is NULL");
    *out = NULL;
    if ((st = validate_config(cfg)) != EMBER_OK)
        return st;
    ember_collection *c = calloc(1, sizeof *c);
    if (!c)
        return ember_fail_create(EMBER_ENOMEM, "out of memory");
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
    c->seq_off = calloc((size_t)cfg->num_features, sizeof *c->seq_off);
    c->sort_hist = malloc(sizeof(int64_t) * EMBER_SORT_HIST_SIZE);
    c->limit_counts = calloc((size_t)4 * cfg->num_tables * c->cfg.num_shards, sizeof(int64_t));
    c->comm_scratch = calloc((size_t)2 * c->world->size, sizeof(int64_t));
    c->prefetch.cnt = calloc((size_t)6 * c->world->size, sizeof(int64_t));
    c->exchange_scratch = calloc((size_t)4 * c->world->size, sizeof(int64_t));
    c->dyn_cnt = calloc((size_t)4 * c->world->size, sizeof(int64_t));
    c->training = 1;
    c->lr_scale = 1.0f;
    if (!c->comm_scratch || !c->prefetch.cnt || !c->exchange_scratch || !c->dyn_cnt || !c->tables || !c->features || !c->seq_off || !c->sort_hist || !c->limit_counts) {
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
    for (int32_t p = 0; p < c->num_ptables; p++)
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
    free(c->tables);
    free(c->features);
    free(c->seq_off);
    free(c->sort_hist);
    free(c->limit_counts);
    free(c->comm_scratch);
    free(c->exchange_scratch);
    free(c->mb_hash);
    free(c->minibatch_start);
    free(c->bag_off);
    free(c->prefetch.cnt);
    free(c->prefetch.out);
    free(c->prefetch.in);
    free(c->prefetch.tmp);
    free(c->prefetch.rows);
    free(c->prefetch.sec_counts);
    free(c->prefetch.section);
    free(c->names);
    ember_world_destroy(c->own_world);
    free(c);
}

ember_world *ember_collection_world(const ember_collection *c) { return c->world; }

int ember_collection_set_threads(ember_collection *c, int32_t threads)
{
    if (threads < 0)
        return ember_fail(c, EMBER_EINVAL, "threads must be >= 0 (got %d)", threads);
    c->threads = threads > 0 ? threads : omp_get_max_threads();
    return EMBER_OK;
}

int64_t ember_pooled_width(const ember_collection *c) { return c->pooled_width; }

int64_t ember_sequence_size(const ember_collection *c, const ember_batch *b)
{
    if (!b || !b->lengths || b->num_features != c->cfg.num_features || b->batch_size < 0)
        return 0;
    int64_t total = 0;
    for (int32_t f = 0; f < c->cfg.num_features; f++) {
        if (c->features[f].combiner != EMBER_COMBINER_NONE)
            continue;
        int64_t n = 0;
        for (int32_t s = 0; s < b->batch_size; s++)
            n += b->lengths[(int64_t)f * b->batch_size + s];
        total += n * c->features[f].dim;
    }
    return total;
}

void ember_collection_stats(const ember_collection *c, ember_stats *out) { *out = c->stats; }

int ember_set_lr_scale(ember_collection *c, float scale)
{
    if (!c)
        return EMBER_EINVAL;
    if (!(scale >= 0.0f) || !isfinite(scale))
        return ember_fail(c, EMBER_EINVAL, "learning-rate scale %g must be finite and >= 0", (double)scale);
    c->lr_scale = scale;
    return EMBER_OK;
}

void ember_collection_memory(const ember_collection *c, ember_memory *out)
{
    memset(out, 0, sizeof *out);
    out->physical_tables = c->num_ptables;
    for (int32_t p = 0; p < c->num_ptables; p++) {
        const ember_ptable *pt = &c->ptables[p];
        out->row_bytes += pt->store->value_bytes;
        out->state_bytes += pt->store->state_bytes;
        out->cache_meta_bytes += pt->store->meta_bytes;
        out->disk_bytes += pt->store->disk_bytes;
        out->workspace_bytes += ember_route_bytes(&pt->route) + ember_xchg_bytes(pt->xchg);
        out->workspace_bytes += ember_hot_bytes(pt); /* hot rows' copies and sums */
        if (pt->dyn)
            out->index_bytes += ember_dyn_bytes(&pt->dyn->d);
    }
    out->workspace_bytes += ember_slot_bytes(c) + c->bag_off_cap * (int64_t)sizeof(int64_t) +
                            c->minibatch_cap * (int64_t)sizeof(int32_t) +
                            2 * c->mb_hash_cap * (int64_t)sizeof(uint64_t) +
                            (int64_t)sizeof(int64_t) * 4 * c->cfg.num_tables * c->cfg.num_shards +
                            (int64_t)sizeof(int64_t) * EMBER_SORT_HIST_SIZE;
}

int ember_table_tier_stats(const ember_collection *c, int32_t table, ember_tier_stats *out)
{
    if (table < 0 || table >= c->cfg.num_tables)
        return ember_fail((ember_collection *)c, EMBER_EINVAL, "table %d outside [0, %d)", table,
                          c->cfg.num_tables);
    const ember_ptable *pt = &c->ptables[c->tables[table].ptable];
    memset(out, 0, sizeof *out);
    if (pt->storage != EMBER_STORAGE_SSD)
        return ember_fail((ember_collection *)c, EMBER_EINVAL, "table '%s' is in the memory tier",
                          c->tables[table].cfg.name);
    ember_store_tier_stats(pt->store, out);
    return EMBER_OK;
}

int32_t ember_collection_tier_stats(const ember_collection *c, ember_tier_stats *out)
{
    memset(out, 0, sizeof *out);
    int32_t n = 0;
    for (int32_t p = 0; p < c->num_ptables; p++) {
        if (!c->ptables[p].store->staged)
            continue;
        ember_tier_stats s;
        ember_store_tier_stats(c->ptables[p].store, &s);
        n++;
        out->cache_rows += s.cache_rows;
        out->resident_rows += s.resident_rows;
        out->dirty_rows += s.dirty_rows;
        out->accesses += s.accesses;
        out->demand_loads += s.demand_loads;
        out->prefetch_loads += s.prefetch_loads;
        out->prefetch_used += s.prefetch_used;
        out->prefetch_wasted += s.prefetch_wasted;
        out->init_loads += s.init_loads;
        out->evictions += s.evictions;
        out->writes += s.writes;
        out->bytes_read += s.bytes_read;
        out->bytes_written += s.bytes_written;
        out->ignored_hints += s.ignored_hints;
        out->wait_seconds += s.wait_seconds;
        out->io_seconds += s.io_seconds;
    }
    return n;
}

static int check_range(const ember_collection *c, int32_t table, int64_t first, int64_t count)
{
    if (table < 0 || table >= c->cfg.num_tables)
        return ember_fail((ember_collection *)c, EMBER_EINVAL, "table %d outside [0, %d)", table,
                          c->cfg.num_tables);
    const ember_ltable *t = &c->tables[table];
    if (first < 0 || count < 0 || first > t->cfg.rows - count)
        return ember_fail((ember_collection *)c, EMBER_EINVAL,
                          "table '%s': rows [%lld, %lld) outside [0, %lld)", t->cfg.name,
                          (long long)first, (long long)(first + count), (long long)t->cfg.rows);
    return EMBER_OK;
}

int ember_table_read(const ember_collection *c, int32_t table, int64_t first, int64_t count, float *out)
{
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows((ember_collection *)c, table, first, count, out, 0, 0);
}

int ember_table_write(ember_collection *c, int32_t table, int64_t first, int64_t count, const float *in)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows(c, table, first, count, (float *)in, 1, 0);
}

int ember_table_read_state(const ember_collection *c, int32_t table, int64_t first, int64_t count,
                           float *out)
{
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows((ember_collection *)c, table, first, count, out, 0, 1);
}

int ember_table_write_state(ember_collection *c, int32_t table, int64_t first, int64_t count, const float *in)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows(c, table, first, count, (float *)in, 1, 1);
}
