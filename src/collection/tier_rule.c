/*
 * tier_rule.c: which tables go to the SSD tier, and with how much cache
 * (config.h; PopART's tensor locations: a size threshold and a memory
 * budget decide, a table may also say), shared by collection create and the
 * planner so that `ember plan` shows the tiers and caches the collection
 * will use.  A
 * dynamic table moves its capacity's rows and state; its key index, row
 * metadata and sketch stay in DRAM on either tier, so they always count in
 * the budget.
 */
#include "collection/config.h"
#include "tier/ssd_size.h"

int64_t ember_tier_rank_bytes(const ember_table_config *t, int32_t W)
{
    int64_t rows = t->kind == EMBER_TABLE_DYNAMIC ? ember_dyn_capacity(t) : t->rows; /* dynamic: on every rank */
    int32_t dim = t->dim;
    if (t->kind != EMBER_TABLE_DYNAMIC && W > 1 && t->placement == EMBER_PLACE_ROW)
        rows = (rows + W - 1) / W;
    if (t->kind != EMBER_TABLE_DYNAMIC && W > 1 && t->placement == EMBER_PLACE_COLUMN) /* never encoded rows */
        dim = (dim + W - 1) / W;
    return rows * (ember_row_bytes(t, dim) + ember_row_state_bytes(t, dim));
}

/* DRAM a table keeps on a rank whatever its tier: a dynamic table's key
 * map, row metadata, victim heap and sketch. */
static int64_t index_bytes(const ember_table_config *t)
{
    if (t->kind != EMBER_TABLE_DYNAMIC)
        return 0;
    int64_t b = ember_dynamic_bytes(t) - ember_tier_rank_bytes(t, 1);
    return b > 0 ? b : 0;
}

/* A cache size the table or the collection set; 0 when neither did. */
static int64_t set_cache(const ember_collection_config *cfg, const ember_table_config *t)
{
    return t->cache_bytes > 0 ? t->cache_bytes : cfg->ssd_cache_bytes;
}

void ember_tier_resolve(const ember_collection_config *cfg, int32_t W, ember_storage *storage, int64_t *cache)
{
    int64_t need = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        int64_t bytes = ember_tier_rank_bytes(tc, W);
        storage[t] = tc->rows_encoding != EMBER_ROWS_FP32 ? EMBER_STORAGE_MEMORY : tc->storage; /* encoded: memory only */
        if (storage[t] == EMBER_STORAGE_AUTO)
            storage[t] = cfg->ssd_min_bytes > 0 && bytes > cfg->ssd_min_bytes ? EMBER_STORAGE_SSD : EMBER_STORAGE_AUTO;
        need += (storage[t] == EMBER_STORAGE_SSD ? set_cache(cfg, tc) : bytes) + index_bytes(tc);
    }
    /* over the budget: the largest undecided tables move to the SSD tier */
    while (cfg->memory_budget > 0 && need > cfg->memory_budget) {
        int32_t best = -1;
        int64_t best_bytes = 0;
        for (int32_t t = 0; t < cfg->num_tables; t++) {
            int64_t b = ember_tier_rank_bytes(&cfg->tables[t], W);
            if (storage[t] == EMBER_STORAGE_AUTO && b > best_bytes)
                best = t, best_bytes = b;
        }
        if (best < 0)
            break;
        storage[best] = EMBER_STORAGE_SSD;
        need += set_cache(cfg, &cfg->tables[best]) - best_bytes;
    }
    /* caches nobody sized: the budget's rest in equal shares, else 256 MiB */
    int32_t open = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        if (storage[t] == EMBER_STORAGE_AUTO)
            storage[t] = EMBER_STORAGE_MEMORY;
        cache[t] = storage[t] == EMBER_STORAGE_SSD ? set_cache(cfg, &cfg->tables[t]) : 0;
        open += storage[t] == EMBER_STORAGE_SSD && cache[t] == 0;
    }
    int64_t share = EMBER_SSD_CACHE_DEFAULT;
    if (cfg->memory_budget > 0 && open > 0)
        share = need < cfg->memory_budget ? (cfg->memory_budget - need) / open : 0;
    for (int32_t t = 0; t < cfg->num_tables; t++)
        if (storage[t] == EMBER_STORAGE_SSD && cache[t] == 0)
            cache[t] = share > 0 ? share : 1; /* 1: create names the cache that holds no row */
}
