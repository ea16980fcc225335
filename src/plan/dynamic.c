/*
 * dynamic.c: what the planner knows of dynamic tables (plan.h,
 * docs/planner.md "Dynamic tables"): their memory per rank, and their keys
 * against their capacity.
 *
 * A dynamic table holds `capacity` rows on every rank, and the keys that
 * rank owns (mix64(key) mod W) compete for them.  From the table's keyed
 * statistics the owner o receives, among n draws of the table's keys,
 *     D_o(n) = sum_{hot keys k on o} 1 - (1 - p_k)^n
 *              + (D(n) - sum_{hot keys k} 1 - (1 - p_k)^n) / W
 * distinct keys: the hot keys where they hash, the rest evenly.  A step
 * draws B N keys (global batch times ids per sample), so D_o(B N) is the
 * rank's keys per step and D_o(s B N) over s steps; the steps to fill the
 * rank and the keys that find no row once it is full (Che's approximation
 * of LRU, as plan_lru_hit_rate) follow by bisection on n.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "dyn/dyn.h"
#include "plan/plan.h"

#define HUGE_DRAWS 1e30 /* beyond the curve's last point: D(n) has its limit */

int64_t plan_dynamic_capacity(const ember_table_config *tb)
{
    return tb->kind == EMBER_TABLE_DYNAMIC ? ember_dyn_capacity(tb) : 0;
}

int64_t plan_dynamic_index_bytes(const ember_table_config *tb)
{
    if (tb->kind != EMBER_TABLE_DYNAMIC)
        return 0;
    int64_t rows = plan_dynamic_capacity(tb) * (ember_row_bytes(tb, tb->dim) + ember_row_state_bytes(tb, tb->dim));
    int64_t all = ember_dynamic_bytes(tb);
    return all > rows ? all - rows : 0;
}

/* One owner's view of a table's keys. */
typedef struct owner_keys {
    const plan_id_stats *s;
    int32_t W, o;
    const int32_t *hot_owner; /* [s->hot] */
} owner_keys;

/* D_o(n): distinct keys of owner o among n draws. */
static double owner_distinct(const owner_keys *k, double n)
{
    const plan_id_stats *s = k->s;
    double mine = 0, hot = 0;
    for (int32_t i = 0; i < s->hot; i++) {
        double g = plan_touch(s->hot_p[i], n);
        hot += g;
        if (k->hot_owner[i] == k->o)
            mine += g;
    }
    double rest = plan_stats_distinct(s, n) - hot;
    return mine + (rest > 0 ? rest / k->W : 0);
}

static double owner_distinct_of(const void *k, double n) { return owner_distinct(k, n); }

/* The n with D_o(n) = target (D_o is increasing), by bisection in log n;
 * INFINITY when D_o never reaches it. */
static double owner_draws_for(const owner_keys *k, double target)
{
    if (owner_distinct(k, HUGE_DRAWS) < target)
        return INFINITY;
    return plan_solve_increasing(owner_distinct_of, k, target, 1, HUGE_DRAWS);
}

/* Keys per sample of table t: its features' pooling summed. */
static double keys_per_sample(const plan_workload *w, int32_t t)
{
    double n = 0;
    for (int32_t f = 0; f < w->cfg->num_features; f++)
        if (w->cfg->features[f].table == t)
            n += w->pooling[f];
    return n;
}

int plan_dynamic_keys(const plan_workload *w, int32_t t, int32_t world, double steps, plan_dynamic *out)
{
    memset(out, 0, sizeof *out);
    if (!w || !w->cfg || t < 0 || t >= w->cfg->num_tables || world < 1 || !(steps >= 0) || !w->stats)
        return EMBER_EINVAL;
    const ember_table_config *tb = &w->cfg->tables[t];
    const plan_id_stats *s = &w->stats[t];
    out->capacity = plan_dynamic_capacity(tb);
    if (out->capacity < 1 || !s->keyed)
        return EMBER_EINVAL;
    out->index_bytes = plan_dynamic_index_bytes(tb);
    out->steps = steps;
    int32_t *hot_owner = malloc(sizeof *hot_owner * (size_t)(s->hot > 0 ? s->hot : 1));
    if (!hot_owner)
        return EMBER_ENOMEM;
    for (int32_t i = 0; i < s->hot; i++)
        hot_owner[i] = (int32_t)ember_dyn_owner(s->hot_row[i], world);
    double step = (double)w->global_batch * keys_per_sample(w, t), C = (double)out->capacity;
    /* the busiest owner: the hot keys decide; the tail is even */
    double *hot_d = calloc((size_t)world, sizeof *hot_d);
    if (!hot_d) {
        free(hot_owner);
        return EMBER_ENOMEM;
    }
    for (int32_t i = 0; i < s->hot; i++)
        hot_d[hot_owner[i]] += plan_touch(s->hot_p[i], step);
    for (int32_t o = 1; o < world; o++)
        if (hot_d[o] > hot_d[out->busiest])
            out->busiest = o;
    free(hot_d);
    owner_keys k = {s, world, out->busiest, hot_owner};
    out->keys_step = owner_distinct(&k, step);
    out->keys_horizon = owner_distinct(&k, steps * step);
    double fill = owner_draws_for(&k, C);
    out->fill_steps = step > 0 ? fill / step : INFINITY;
    if (isfinite(fill)) { /* Che: the rows hold the last T draws' keys */
        double miss = owner_distinct(&k, step + fill) - C;
        out->miss_step = miss < 0 ? 0 : miss > out->keys_step ? out->keys_step : miss;
    }
    out->over_step = out->keys_step > C;
    out->over_horizon = out->keys_horizon > C;
    free(hot_owner);
    return EMBER_OK;
}
