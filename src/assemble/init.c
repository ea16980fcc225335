/*
 * init.c: a new collection's rows.  Every logical table's rows get their
 * initial values (table/init.h) and zero optimizer state; each rank writes
 * only the rows and columns it holds (collection/shard.h), with the values
 * one process would.
 *
 * Rows are written with a static split over threads, which also places the
 * pages (first touch) and faults them in now rather than in the first step;
 * a dynamic table's slots are zeroed for the same reason (their values come
 * when keys take them).  An SSD table computes a row's values when it first
 * loads it, through ember_init_local_row.
 */
#include <omp.h>
#include <string.h>

#include "assemble/assemble.h"
#include "collection/shard.h"
#include "table/init.h"

void ember_init_local_row(void *ctx, uint32_t local, float *out)
{
    const ember_tier_init_ctx *ic = ctx;
    const ember_collection *c = ic->coll;
    const ember_ptable *pt = &c->ptables[ic->ptable];
    int32_t W = c->world->size;
    if (pt->dyn) { /* a slot: the row of the key it holds (a free slot's values never matter) */
        const ember_ltable *t = &c->tables[pt->tables[0]];
        ember_init_row(&t->cfg, t->rng_key, (int64_t)pt->dyn->d.slot_key[local], 0, pt->local_dim, out);
        return;
    }
    int64_t phys = pt->placement == EMBER_PLACE_ROW ? (int64_t)local * W + c->world->rank : (int64_t)local;
    int32_t i = 0; /* the logical table holding phys: tables ascend by offset */
    while (i + 1 < pt->num_tables && c->tables[pt->tables[i + 1]].offset <= phys)
        i++;
    const ember_ltable *t = &c->tables[pt->tables[i]];
    ember_init_row(&t->cfg, t->rng_key, phys - t->offset, pt->col0, pt->local_dim, out);
}

void ember_init_ptable(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    ember_store *s = pt->store;
    if (s->staged)
        return; /* the SSD tier computes rows never written when it loads them */
    int32_t W = c->world->size, rank = c->world->rank;
    if (pt->dyn) { /* rows are written when keys take them; zeros now place the pages */
        int64_t rows = pt->local_rows;
#pragma omp parallel for schedule(static) num_threads(c->threads)
        for (int64_t r = 0; r < rows; r++) {
            uint32_t row = (uint32_t)r;
            float *v, *sv;
            s->ops->acquire(s, &row, 1, &v, &sv);
            memset(v, 0, sizeof(float) * (size_t)s->dim);
            if (sv)
                memset(sv, 0, sizeof(float) * (size_t)s->state_floats);
            s->ops->release(s, &row, 1, 1);
        }
        return;
    }
    for (int32_t i = 0; i < pt->num_tables; i++) {
        const ember_ltable *t = &c->tables[pt->tables[i]];
        int64_t rows = t->cfg.rows;
#pragma omp parallel for schedule(static) num_threads(c->threads)
        for (int64_t r = 0; r < rows; r++) {
            uint32_t phys = (uint32_t)(t->offset + r);
            if (!ember_shard_holds(pt, W, rank, phys))
                continue;
            uint32_t row = ember_shard_local(pt, W, phys);
            float *v, *sv;
            s->ops->acquire(s, &row, 1, &v, &sv);
            ember_init_row(&t->cfg, t->rng_key, r, pt->col0, pt->local_dim, v);
            if (sv)
                memset(sv, 0, sizeof(float) * (size_t)s->state_floats);
            s->ops->release(s, &row, 1, 1);
        }
    }
}
