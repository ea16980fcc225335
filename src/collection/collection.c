/*
 * collection.c: the small calls on a collection that only read or set its
 * fields: its last message, world, threads, output sizes, statistics,
 * learning-rate scale and tier counters.  Create and destroy are
 * assemble/'s; the step's calls are step/'s.
 */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <string.h>

#include "collection/collection.h"
#include "tier/ssd.h"

int ember_fail(ember_collection *coll, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ember_fail_vinto(coll->errmsg, status, fmt, ap);
    va_end(ap);
    return status;
}

ember_prep ember_collection_prep(ember_collection *c)
{
    ember_prep P = {c->cfg.num_features, c->cfg.num_tables, c->num_ptables, c->cfg.num_shards, c->features, c->tables,
                    c->prep_tables, c->pooled_width, c->cfg.dedup, c->cfg.bounds, c->threads, c->sort_hist,
                    &c->limits, c->errmsg};
    return P;
}

int ember_ptable_stage(ember_collection *c, ember_ptable *pt, const uint32_t *rows, uint32_t *slots, int64_t n)
{
    int st = ember_store_stage(pt->store, rows, slots, n);
    return st == EMBER_OK ? EMBER_OK : ember_fail(c, st, "%s", pt->store->errmsg);
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
        out->reads += s.reads;
        out->segment_writes += s.segment_writes;
        out->file_bytes_written += s.file_bytes_written;
        out->moved_rows += s.moved_rows;
        out->cold_reloads += s.cold_reloads;
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
