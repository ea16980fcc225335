/*
 * tiers.c: the planner's memory tiers (plan.h, plan_tiers): the same rules
 * that collection create applies (collection/tier_rule.c), so `ember plan` shows the
 * tiers the collection will choose, and for each SSD table the hit rate its
 * cache can expect on the workload's id statistics.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "plan/plan.h"
#include "tier/tier.h"

int plan_tiers(const plan_workload *w, const plan_options *o, ember_table_config *tables, double *hit)
{
    const ember_collection_config *cfg = w->cfg;
    int32_t T = cfg->num_tables, W = o->world > 0 ? o->world : 1;
    ember_storage *storage = malloc(sizeof *storage * (size_t)(T > 0 ? T : 1));
    int64_t *cache = malloc(sizeof *cache * (size_t)(T > 0 ? T : 1));
    if (!storage || !cache) {
        free(storage);
        free(cache);
        return EMBER_ENOMEM;
    }
    ember_collection_config cc = *cfg;
    if (cc.memory_budget == 0)
        cc.memory_budget = o->memory_per_rank;
    ember_tier_resolve(&cc, W, storage, cache);
    for (int32_t t = 0; t < T; t++) {
        ember_table_config *tb = &tables[t];
        *tb = cfg->tables[t];
        tb->storage = storage[t];
        hit[t] = -1;
        if (tb->storage != EMBER_STORAGE_SSD)
            continue;
        tb->cache_bytes = cache[t];
        if (tb->cache_policy == EMBER_CACHE_DEFAULT)
            tb->cache_policy = cc.ssd_policy != EMBER_CACHE_DEFAULT ? cc.ssd_policy : EMBER_CACHE_LOOKAHEAD;
        /* the rows one rank's cache holds (tier.h's rule, as create), and
         * the ranks' caches together see all of the table's ids */
        int32_t ld = tb->placement == EMBER_PLACE_COLUMN ? (tb->dim + W - 1) / W : tb->dim;
        int64_t local = tb->kind == EMBER_TABLE_DYNAMIC ? ember_dyn_capacity(tb)
                        : tb->placement == EMBER_PLACE_ROW ? (tb->rows + W - 1) / W
                                                             : tb->rows;
        int64_t rec = ember_row_bytes(tb, ld) + ember_row_state_bytes(tb, ld); /* a record as held */
        double rows_cached = (double)ember_ssd_cache_rows(tb->cache_bytes, local, rec, tb->cache_policy);
        if (tb->placement == EMBER_PLACE_ROW)
            rows_cached *= W;
        double ids = 0;
        for (int32_t f = 0; f < cfg->num_features; f++)
            if (cfg->features[f].table == t)
                ids += (double)w->global_batch * w->pooling[f];
        hit[t] = plan_lru_hit_rate(&w->stats[t], ids, rows_cached);
    }
    free(storage);
    free(cache);
    return EMBER_OK;
}
