/*
 * ref_init.c: the reference model's tables, built with the initializer
 * formula of ember_collection_create written out literally, and the stacking
 * offset rule of ember_collection_config.stack_tables.
 *
 * One ref_table per config table, never stacked: the reference answers "what
 * are the values of table t", and stacking must not change that answer.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/rng.h"
#include "ref/ref.h"

/* Element (r, c) of a table, exactly as the header writes it. */
float ref_init_value(const ember_table_config *t, uint64_t key, int64_t r, int32_t c)
{
    float value = t->init_value;
    switch (t->init) {
    case EMBER_INIT_UNIFORM: {
        float u0 = ember_rng_uniform(key, (uint64_t)r, (uint64_t)c, 0);
        return (float)((2 * u0 - 1) * value);
    }
    case EMBER_INIT_NORMAL: {
        double u1 = ember_rng_uniform(key, (uint64_t)r, (uint64_t)c, 1);
        double u2 = ember_rng_uniform(key, (uint64_t)r, (uint64_t)c, 2);
        return (float)(value * sqrt(-2 * log(1 - u1)) * cos(2 * M_PI * u2));
    }
    case EMBER_INIT_ZEROS:
        return 0.0f;
    case EMBER_INIT_CONSTANT:
        return value;
    }
    return NAN;
}

uint64_t ref_table_key(uint64_t seed, const char *name)
{
    return ember_rng_table_key(seed, XXH64(name, strlen(name), 0));
}

int ref_model_init(ref_model *m, const ember_collection_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->tables = calloc((size_t)cfg->num_tables, sizeof *m->tables);
    if (!m->tables)
        return EMBER_ENOMEM;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        ref_table *rt = &m->tables[t];
        int32_t sf = ember_state_floats(tc->optimizer.kind, tc->dim);
        rt->rows = tc->rows;
        rt->dim = tc->dim;
        rt->w = malloc((size_t)tc->rows * (size_t)tc->dim * sizeof(float));
        rt->state = calloc((size_t)tc->rows * (size_t)(sf > 0 ? sf : 1), sizeof(float));
        if (!rt->w || !rt->state) {
            ref_model_free(m);
            return EMBER_ENOMEM;
        }
        uint64_t key = ember_rng_table_key(cfg->seed, XXH64(tc->name, strlen(tc->name), 0));
        for (int64_t r = 0; r < tc->rows; r++)
            for (int32_t c = 0; c < tc->dim; c++)
                rt->w[r * tc->dim + c] = ref_init_value(tc, key, r, c);
    }
    return 0;
}

void ref_model_free(ref_model *m)
{
    if (m->tables) {
        for (int32_t t = 0; t < m->cfg.num_tables; t++) {
            free(m->tables[t].w);
            free(m->tables[t].state);
        }
    }
    free(m->tables);
    m->tables = NULL;
}

/* offset(t) = rows of the earlier tables with equal dim and a bitwise equal
 * optimizer (ember_optimizer has no padding: one enum and five floats),
 * placement, owner, exchange, quantization and encoding; row-wise with
 * S > 1 shards (num_shards, or the world size), each of them and t itself
 * first moved to the next row that is its position in the group modulo S. */
int64_t ref_stack_offset(const ember_collection_config *cfg, int32_t t)
{
    if (!cfg->stack_tables)
        return 0;
    const ember_table_config *me = &cfg->tables[t];
    int64_t W = cfg->num_shards > 0 ? cfg->num_shards : ember_world_size(cfg->world), off = 0, k = 0;
    int pad = me->placement == EMBER_PLACE_ROW && W > 1; /* the k-th table of a group starts at k mod shards */
    for (int32_t u = 0; u < t; u++) {
        const ember_table_config *o = &cfg->tables[u];
        if (o->dim == me->dim && memcmp(&o->optimizer, &me->optimizer, sizeof me->optimizer) == 0 &&
            o->placement == me->placement && o->exchange == me->exchange &&
            (o->placement != EMBER_PLACE_TABLE || o->owner == me->owner) && o->quant_buckets == me->quant_buckets &&
            (!me->quant_buckets || (o->quant_low == me->quant_low && o->quant_high == me->quant_high)) &&
            o->rows_encoding == me->rows_encoding && o->kind != EMBER_TABLE_DYNAMIC) {
            while (pad && off % W != k % W)
                off++;
            off += o->rows;
            k++;
        }
    }
    while (pad && off % W != k % W)
        off++;
    return off;
}
