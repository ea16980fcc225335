/*
 * init.c: initial values, a pure function of (seed, table name, row, column)
 * through the counter-based generator in core/rng.h (DESIGN.md principle 1),
 * so they never depend on sharding, thread count, stacking or creation order.
 *
 * Rows are written with a static split over threads, which also places the
 * pages (first touch) and faults them in now rather than in the first step;
 * a dynamic table's slots are zeroed for the same reason (their values come
 * when keys take them).
 * Optimizer state is zeroed the same way.  Each rank writes only the rows
 * and columns it holds (exchange/shard.h), with the values one process would.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/collection.h"
#include "core/rng.h"
#include "exchange/shard.h"
#include "dyn/dyn_step.h"
#include "table/init.h"

/* The uniform kind, the common one, as a loop without branches: the row's
 * half of the mix is computed once and the columns vectorise (a reset of a
 * dynamic table's slot runs this on the training step).  Same values as
 * the general loop below, bit for bit. */
static void init_uniform(uint64_t key, int64_t row, int32_t k0, int32_t n, double scale, float *out)
{
    uint64_t zr = ember_rng_row(key, (uint64_t)row);
    for (int32_t j = 0; j < n; j++) {
        float u = (float)(ember_rng_col(zr, (uint64_t)(k0 + j), 0) >> 40) * 0x1.0p-24f;
        out[j] = (float)((2.0 * u - 1.0) * scale);
    }
}

/* Columns [k0, k0 + width) of a row; columns at or past dim (the padding
 * of a COLUMN slice) are zero. */
static void init_row(const ember_table_config *tc, uint64_t key, int64_t row, int32_t k0, int32_t width,
                     float *out)
{
    if (tc->init == EMBER_INIT_UNIFORM) {
        int32_t n = tc->dim - k0 < width ? tc->dim - k0 : width;
        n = n < 0 ? 0 : n;
        init_uniform(key, row, k0, n, tc->init_value, out);
        for (int32_t j = n; j < width; j++)
            out[j] = 0.0f;
        return;
    }
    for (int32_t j = 0; j < width; j++) {
        int32_t k = k0 + j;
        if (k >= tc->dim) {
            out[j] = 0.0f;
            continue;
        }
        switch (tc->init) {
        case EMBER_INIT_UNIFORM:
            out[j] = (float)((2.0 * ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 0) - 1.0) *
                             tc->init_value);
            break;
        case EMBER_INIT_NORMAL: {
            double u1 = ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 1);
            double u2 = ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 2);
            out[j] = (float)(tc->init_value * sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
            break;
        }
        case EMBER_INIT_ZEROS:
            out[j] = 0.0f;
            break;
        case EMBER_INIT_CONSTANT:
            out[j] = tc->init_value;
            break;
        }
    }
}

void ember_init_row_values(int init_kind, float init_value, int32_t dim, uint64_t rng_key, int64_t row, float *out)
{
    ember_table_config tc;
    memset(&tc, 0, sizeof tc);
    tc.init = (ember_init_kind)init_kind;
    tc.init_value = init_value;
    tc.dim = dim;
    init_row(&tc, rng_key, row, 0, dim, out);
}

void ember_init_local_row(void *ctx, uint32_t local, float *out)
{
    const ember_tier_init_ctx *ic = ctx;
    const ember_collection *c = ic->coll;
    const ember_ptable *pt = &c->ptables[ic->ptable];
    int32_t W = c->world->size;
    if (pt->dyn) { /* a slot: the row of the key it holds (a free slot's values never matter) */
        const ember_ltable *t = &c->tables[pt->tables[0]];
        init_row(&t->cfg, t->rng_key, (int64_t)pt->dyn->d.slot_key[local], 0, pt->local_dim, out);
        return;
    }
    int64_t phys = pt->placement == EMBER_PLACE_ROW ? (int64_t)local * W + c->world->rank : (int64_t)local;
    int32_t i = 0; /* the logical table holding phys: tables ascend by offset */
    while (i + 1 < pt->num_tables && c->tables[pt->tables[i + 1]].offset <= phys)
        i++;
    const ember_ltable *t = &c->tables[pt->tables[i]];
    init_row(&t->cfg, t->rng_key, phys - t->offset, pt->col0, pt->local_dim, out);
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
            init_row(&t->cfg, t->rng_key, r, pt->col0, pt->local_dim, v);
            if (sv)
                memset(sv, 0, sizeof(float) * (size_t)s->state_floats);
            s->ops->release(s, &row, 1, 1);
        }
    }
}
