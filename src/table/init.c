/*
 * init.c: initial values, a pure function of (seed, table name, row, column)
 * through the counter-based generator in core/rng.h (DESIGN.md principle 1),
 * so they never depend on sharding, thread count, stacking or creation order.
 *
 * Rows are written with a static split over threads, which also places the
 * pages (first touch) and faults them in now rather than in the first step.
 * Optimizer state is zeroed the same way.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/collection.h"
#include "core/rng.h"
#include "table/init.h"

static void init_row(const ember_table_config *tc, uint64_t key, int64_t row, float *out)
{
    switch (tc->init) {
    case EMBER_INIT_UNIFORM:
        for (int32_t k = 0; k < tc->dim; k++)
            out[k] = (float)((2.0 * ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 0) - 1.0) *
                             tc->init_value);
        break;
    case EMBER_INIT_NORMAL:
        for (int32_t k = 0; k < tc->dim; k++) {
            double u1 = ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 1);
            double u2 = ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 2);
            out[k] = (float)(tc->init_value * sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
        }
        break;
    case EMBER_INIT_ZEROS:
        memset(out, 0, sizeof(float) * (size_t)tc->dim);
        break;
    case EMBER_INIT_CONSTANT:
        for (int32_t k = 0; k < tc->dim; k++)
            out[k] = tc->init_value;
        break;
    }
}

void ember_init_ptable(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    ember_store *s = pt->store;
    for (int32_t i = 0; i < pt->num_tables; i++) {
        const ember_ltable *t = &c->tables[pt->tables[i]];
        int64_t rows = t->cfg.rows;
#pragma omp parallel for schedule(static) num_threads(c->threads)
        for (int64_t r = 0; r < rows; r++) {
            uint32_t row = (uint32_t)(t->offset + r);
            float *v, *sv;
            s->ops->acquire(s, &row, 1, &v, &sv);
            init_row(&t->cfg, t->rng_key, r, v);
            if (sv)
                memset(sv, 0, sizeof(float) * (size_t)s->state_floats);
            s->ops->release(s, &row, 1, 1);
        }
    }
}
