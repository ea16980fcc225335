/*
 * rule.c: which tables go to the SSD tier (PopART's tensor locations: a
 * size threshold and a memory budget decide, a table may also say), shared
 * by collection create and the planner so that `ember plan` shows the
 * tiers the collection will use.
 */
#include "tier/tier.h"

int64_t ember_tier_rank_bytes(const ember_table_config *t, int32_t W)
{
    int64_t rows = t->rows;
    int32_t dim = t->dim;
    if (W > 1 && t->placement == EMBER_PLACE_ROW)
        rows = (rows + W - 1) / W;
    if (W > 1 && t->placement == EMBER_PLACE_COLUMN)
        dim = (dim + W - 1) / W;
    return rows * (dim + ember_state_floats(t->optimizer.kind, dim)) * (int64_t)sizeof(float);
}

int64_t ember_tier_cache_bytes(const ember_collection_config *cfg, const ember_table_config *t)
{
    if (t->cache_bytes > 0)
        return t->cache_bytes;
    return cfg->ssd_cache_bytes > 0 ? cfg->ssd_cache_bytes : EMBER_SSD_CACHE_DEFAULT;
}

void ember_tier_resolve(const ember_collection_config *cfg, int32_t W, ember_storage *out)
{
    int64_t need = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        int64_t bytes = ember_tier_rank_bytes(tc, W);
        out[t] = tc->storage;
        if (out[t] == EMBER_STORAGE_AUTO)
            out[t] = cfg->ssd_min_bytes > 0 && bytes > cfg->ssd_min_bytes ? EMBER_STORAGE_SSD : EMBER_STORAGE_AUTO;
        need += out[t] == EMBER_STORAGE_SSD ? ember_tier_cache_bytes(cfg, tc) : bytes;
    }
    /* over the budget: the largest undecided tables move to the SSD tier */
    while (cfg->memory_budget > 0 && need > cfg->memory_budget) {
        int32_t best = -1;
        int64_t best_bytes = 0;
        for (int32_t t = 0; t < cfg->num_tables; t++) {
            int64_t b = ember_tier_rank_bytes(&cfg->tables[t], W);
            if (out[t] == EMBER_STORAGE_AUTO && b > best_bytes)
                best = t, best_bytes = b;
        }
        if (best < 0)
            break;
        out[best] = EMBER_STORAGE_SSD;
        need += ember_tier_cache_bytes(cfg, &cfg->tables[best]) - best_bytes;
    }
    for (int32_t t = 0; t < cfg->num_tables; t++)
        if (out[t] == EMBER_STORAGE_AUTO)
            out[t] = EMBER_STORAGE_MEMORY;
}
