/*
 * memory.c: what a collection holds, in bytes (ember_collection_memory):
 * every part create made (stores, key indexes) and every grow-only buffer
 * the step keeps (routes, exchange state, hot rows, the spare batch).
 */
#include <string.h>

#include "collection/collection.h"
#include "dyn/dyn.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "step/step.h"

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
    out->workspace_bytes += ember_slot_bytes(c) + c->shape.bag_off_cap * (int64_t)sizeof(int64_t) +
                            c->shape.minibatch_cap * (int64_t)sizeof(int32_t) +
                            2 * c->limits.mb_hash_cap * (int64_t)sizeof(uint64_t) +
                            (int64_t)sizeof(int64_t) * 4 * c->cfg.num_tables * c->cfg.num_shards +
                            (int64_t)sizeof(int64_t) * EMBER_SORT_HIST_SIZE;
}
