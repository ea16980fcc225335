/*
 * layout.c: table stacking (as SparseCore's).
 *
 * Tables with the same dim and bitwise-equal optimizer config share one
 * physical table, in config order, each at a row offset; with stacking off
 * every table is its own physical table.  Row-wise with S > 1 shards (the
 * world size by default), the k-th table of a physical table starts at a
 * row = k (mod S) (a few unused rows before it), so row 0 of each table,
 * where many id laws put their hottest id, lands on shard (rank) k mod S
 * rather than on one for all.  Stacking gives the kernels one
 * larger batch per physical table, and because rows are sharded by
 * physical_row % shards, it also rotates each table's hot low ids onto
 * different shards.  Limits and policies stay per logical table.  Tables
 * stack only with equal placement, exchange and owner; each rank then
 * allocates its share of every physical table (collection/shard.h).  SSD tables
 * stack only with the same cache policy and folder; the physical table's
 * cache is the sum of its tables' cache budgets.  Tables stack only with
 * the same simulated quantization (the store applies it to every read), the
 * same row encoding and the same training precisions (rows, state) and rounding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble/assemble.h"
#include "collection/config.h"
#include "collection/shard.h"
#include "quant/quant.h"
#include "tier/ssd.h"
#include "tier/store_quant.h"

static int same_group(const ember_table_config *a, const ember_table_config *b)
{
    if (a->kind == EMBER_TABLE_DYNAMIC || b->kind == EMBER_TABLE_DYNAMIC)
        return 0; /* a dynamic table's rows are slot * W + owner: never offset */
    return a->dim == b->dim && !memcmp(&a->optimizer, &b->optimizer, sizeof a->optimizer) &&
           a->placement == b->placement && a->exchange == b->exchange &&
           (a->placement != EMBER_PLACE_TABLE || a->owner == b->owner) && a->storage == b->storage &&
           (a->storage != EMBER_STORAGE_SSD || (a->cache_policy == b->cache_policy && !strcmp(a->path, b->path))) &&
           a->quant_buckets == b->quant_buckets && a->rows_encoding == b->rows_encoding &&
           a->precision == b->precision && a->rounding == b->rounding && a->state_precision == b->state_precision &&
           (!a->quant_buckets || (a->quant_low == b->quant_low && a->quant_high == b->quant_high));
}

/* The store of physical table p: memory, or the SSD tier (a rank that holds
 * none of its rows keeps an empty memory store).  In memory, encoded rows,
 * half rows and half state take the store of encoded rows; the SSD tier
 * holds half rows and state in its slots and file itself. */
static int create_store_tier(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    const ember_table_config *first = &c->tables[pt->tables[0]].cfg;
    int ssd = pt->storage == EMBER_STORAGE_SSD && pt->local_rows > 0 && first->rows_encoding == EMBER_ROWS_FP32;
    if (!ssd && (first->rows_encoding != EMBER_ROWS_FP32 || first->precision != EMBER_PRECISION_FP32 ||
                 first->state_precision != EMBER_PRECISION_FP32)) {
        int train = first->rows_encoding == EMBER_ROWS_FP32;
        int enc = !train ? (int)first->rows_encoding : ember_precision_encoding(first->precision);
        int st = ember_store_quant_create(pt->local_rows, pt->local_dim, pt->state_floats, enc, train,
                                          ember_precision_encoding(first->state_precision), c->threads, &pt->store);
        if (st != EMBER_OK)
            return ember_fail_create(st, "physical table %d (first table '%s'): cannot allocate %lld encoded rows x %d",
                                     p, first->name, (long long)pt->local_rows, pt->local_dim);
        return EMBER_OK;
    }
    if (!ssd) {
        int st = ember_store_memory_create(pt->local_rows, pt->local_dim, pt->state_floats, &pt->store);
        if (st != EMBER_OK)
            return ember_fail_create(st, "physical table %d (first table '%s'): cannot allocate %lld rows x %d",
                                     p, first->name, (long long)pt->local_rows, pt->local_dim);
        return EMBER_OK;
    }
    char label[160], err[512];
    if (pt->num_tables > 1)
        snprintf(label, sizeof label, "table '%s' (stacked with %d more)", first->name, pt->num_tables - 1);
    else
        snprintf(label, sizeof label, "table '%s'", first->name);
    pt->init_ctx.coll = c;
    pt->init_ctx.ptable = p;
    ember_ssd_params sp = {first->path, first->name, label, c->world->rank, pt->local_rows, pt->local_dim,
                           pt->state_floats, pt->cache_bytes, pt->policy, c->cfg.lookahead, c->cfg.io_threads,
                           c->cfg.ssd_buffered, ember_init_local_row, &pt->init_ctx,
                           ember_precision_encoding(first->precision), ember_precision_encoding(first->state_precision)};
    int st = ember_store_ssd_create(&sp, &pt->store, err, sizeof err);
    return st == EMBER_OK ? EMBER_OK : ember_fail_create(st, "%s", err);
}

/* The store of physical table p, with its tables' simulated quantization. */
static int create_store(ember_collection *c, int32_t p)
{
    int st = create_store_tier(c, p);
    ember_ptable *pt = &c->ptables[p];
    const ember_table_config *first = &c->tables[pt->tables[0]].cfg;
    if (st == EMBER_OK && first->quant_buckets >= 2) {
        pt->store->fq_low = first->quant_low;
        pt->store->fq_high = first->quant_high;
        pt->store->fq_step = (first->quant_high - first->quant_low) / (float)(first->quant_buckets - 1);
    }
    return st;
}

/* The physical tables as prep/ reads them: views of their lists and routes
 * (a route moves between the collection and the spare batch by value, so
 * its address stays). */
static int prep_tables(ember_collection *c)
{
    c->prep_tables = calloc((size_t)c->num_ptables, sizeof *c->prep_tables);
    if (!c->prep_tables)
        return ember_fail_create(EMBER_ENOMEM, "out of memory");
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_ptable *pt = &c->ptables[p];
        c->prep_tables[p] = (ember_prep_table){&pt->route, pt->rows, pt->num_tables, pt->tables, pt->num_features,
                                               pt->features};
    }
    return EMBER_OK;
}

int ember_layout_build(ember_collection *c)
{
    int32_t nt = c->cfg.num_tables, nf = c->cfg.num_features;
    c->ptables = calloc((size_t)nt, sizeof *c->ptables);
    if (!c->ptables)
        return ember_fail_create(EMBER_ENOMEM, "out of memory");
    c->num_ptables = 0;
    int32_t shards = c->cfg.num_shards > 0 ? c->cfg.num_shards : c->world->size;
    for (int32_t t = 0; t < nt; t++) {
        int32_t p = -1;
        if (c->cfg.stack_tables)
            for (int32_t q = 0; q < c->num_ptables && p < 0; q++)
                if (same_group(&c->tables[c->ptables[q].tables[0]].cfg, &c->tables[t].cfg))
                    p = q;
        if (p < 0) {
            p = c->num_ptables++;
            ember_ptable *pt = &c->ptables[p];
            pt->dim = c->tables[t].cfg.dim;
            pt->opt = c->tables[t].cfg.optimizer;
            pt->placement = c->tables[t].cfg.placement;
            pt->exchange = c->tables[t].cfg.exchange;
            pt->owner = c->tables[t].cfg.owner;
            pt->storage = c->tables[t].cfg.storage;
            pt->policy = c->tables[t].cfg.cache_policy;
            pt->tables = malloc(sizeof(int32_t) * (size_t)nt);
            pt->features = malloc(sizeof(int32_t) * (size_t)nf);
            if (!pt->tables || !pt->features)
                return ember_fail_create(EMBER_ENOMEM, "out of memory");
        }
        ember_ptable *pt = &c->ptables[p];
        if (pt->rows + shards + c->tables[t].cfg.rows >= (int64_t)UINT32_MAX)
            return ember_fail_create(EMBER_EINVAL,
                                     "table '%s': stacked table would exceed 2^32-1 rows; "
                                     "set stack_tables = 0",
                                     c->tables[t].cfg.name);
        c->tables[t].ptable = p;
        c->tables[t].offset = ember_stack_offset(pt->rows, pt->num_tables, pt->placement, shards);
        pt->cache_bytes += c->tables[t].cfg.cache_bytes;
        pt->rows = c->tables[t].offset + c->tables[t].cfg.rows;
        pt->tables[pt->num_tables++] = t;
    }
    int64_t col = 0;
    for (int32_t f = 0; f < nf; f++) {
        ember_lfeature *fe = &c->features[f];
        int32_t t = fe->table;
        fe->ptable = c->tables[t].ptable;
        fe->offset = c->tables[t].offset;
        fe->dim = c->tables[t].cfg.dim;
        fe->out_col = fe->combiner == EMBER_COMBINER_NONE ? -1 : col;
        if (fe->combiner != EMBER_COMBINER_NONE)
            col += fe->dim;
        ember_ptable *pt = &c->ptables[fe->ptable];
        pt->features[pt->num_features++] = f;
    }
    c->pooled_width = col;
    if (prep_tables(c) != EMBER_OK)
        return EMBER_ENOMEM;
    int32_t W = c->world->size, rank = c->world->rank;
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_ptable *pt = &c->ptables[p];
        pt->row_magic = ember_shard_magic(W);
        pt->local_rows = ember_shard_local_rows(pt, W, rank);
        pt->local_dim = pt->dim;
        if (pt->placement == EMBER_PLACE_COLUMN) {
            pt->local_dim = ember_shard_cols(pt->dim, W);
            pt->col0 = rank * pt->local_dim;
        }
        pt->state_floats = ember_state_floats(pt->opt.kind, pt->local_dim);
        int st = create_store(c, p);
        if (st != EMBER_OK)
            return st;
    }
    return EMBER_OK;
}
