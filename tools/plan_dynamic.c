/*
 * plan_dynamic.c: `ember plan`'s report of dynamic tables (plan_dynamic.h,
 * docs/planner.md "Dynamic tables").  The numbers are the library's
 * (plan_dynamic_keys); this file lays them out and words the warnings.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan_dynamic.h"

const char *plan_fmt_count(double v, char *buf, size_t n)
{
    if (!isfinite(v))
        snprintf(buf, n, "never");
    else if (v >= 1e9)
        snprintf(buf, n, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
    return buf;
}

/* The warnings of one table, if its keys outgrow its rows. */
static void warn(const ember_table_config *tb, const plan_dynamic *d)
{
    char k[32], f[48], m[32];
    if (d->over_step)
        printf("warning: dynamic table '%s': one step brings %s distinct keys to rank %d, more than its "
               "capacity of %lld rows per rank: once they hold keys, such a step fails (every row holds a key "
               "the batch uses)\n", tb->name, plan_fmt_count(d->keys_step, k, sizeof k), (int)d->busiest,
               (long long)d->capacity);
    if (!d->over_horizon)
        return;
    plan_fmt_count(d->keys_horizon, k, sizeof k);
    double fill = ceil(d->fill_steps);
    snprintf(f, sizeof f, "%s step%s", plan_fmt_count(fill, m, sizeof m), fill == 1 ? "" : "s");
    printf("warning: dynamic table '%s': %s distinct keys per rank over %.0f steps, %.2fx its capacity of "
           "%lld rows per rank: ", tb->name, k, d->steps, d->keys_horizon / (double)d->capacity,
           (long long)d->capacity);
    if (tb->evict == EMBER_EVICT_NONE)
        printf("with evict = \"none\" its rows fill after about %s and the next step that needs a row "
               "fails\n", f);
    else
        printf("its rows fill after about %s, then about %s keys per step per rank find no row (LRU "
               "estimate): rows are evicted and reset, and evicted keys start again from the initializer\n",
               f, plan_fmt_count(d->miss_step, m, sizeof m));
}

void plan_dynamic_print(const config_file *cf, const plan_result *res, const plan_dynamic *dyn, int64_t B)
{
    int32_t T = cf->num_tables, nw = 5, any = 0;
    for (int32_t t = 0; t < T; t++)
        if (cf->tables[t].kind == EMBER_TABLE_DYNAMIC) {
            any = 1;
            nw = (int)strlen(cf->tables[t].name) > nw ? (int)strlen(cf->tables[t].name) : nw;
        }
    if (!any)
        return;
    double steps = 0;
    for (int32_t t = 0; t < T; t++)
        steps = dyn[t].capacity ? dyn[t].steps : steps;
    printf("\ndynamic tables (docs/dynamic.md): rank r owns the keys with mix64(key) mod %d = r; per rank, "
           "over %.0f steps of %lld samples (--horizon):\n", (int)res->world, steps, (long long)B);
    printf("  %-*s %13s %15s %12s %14s %21s %12s %17s\n", nw, "table", "capacity/rank", "rows + state",
           "key index", "keys/step", "keys over the horizon", "rows fill in", "no row, per step");
    for (int32_t t = 0; t < T; t++) {
        const plan_dynamic *d = &dyn[t];
        if (cf->tables[t].kind != EMBER_TABLE_DYNAMIC)
            continue;
        char b1[32], b2[32], k1[32], k2[32], f[48], m[32], over[48];
        /* an SSD table's rows are in its store file (split evenly by key hash); in
         * memory it has its cache */
        int ssd = res->tables[t].ssd_bytes > 0;
        int64_t rows = ssd ? res->tables[t].ssd_bytes / res->world : res->tables[t].max_rank_bytes - d->index_bytes;
        snprintf(over, sizeof over, "%s (%.2fx)", plan_fmt_count(d->keys_horizon, k2, sizeof k2),
                 d->keys_horizon / (double)d->capacity);
        if (isfinite(d->fill_steps))
            snprintf(f, sizeof f, "%s step%s", plan_fmt_count(ceil(d->fill_steps), k1, sizeof k1),
                     ceil(d->fill_steps) == 1 ? "" : "s");
        else
            snprintf(f, sizeof f, "never");
        char rb[40];
        snprintf(rb, sizeof rb, "%s%s", plan_format_bytes((double)rows, b1, sizeof b1), ssd ? " (ssd)" : "");
        printf("  %-*s %13lld %15s %12s %14s %21s %12s %17s\n", nw, cf->tables[t].name, (long long)d->capacity, rb,
               plan_format_bytes((double)d->index_bytes, b2, sizeof b2),
               plan_fmt_count(d->keys_step, k1, sizeof k1), over, f,
               plan_fmt_count(d->miss_step, m, sizeof m));
    }
    printf("  (expected distinct keys of the rank their hottest keys hash to; admission is not modelled, so "
           "they are the rows wanted at most)\n");
    for (int32_t t = 0; t < T; t++)
        if (cf->tables[t].kind == EMBER_TABLE_DYNAMIC)
            warn(&cf->tables[t], &dyn[t]);
}

json_t *plan_dynamic_json(const plan_dynamic *d)
{
    json_t *j = json_object();
    json_object_set_new(j, "capacity", json_integer(d->capacity));
    json_object_set_new(j, "index_bytes_per_rank", json_integer(d->index_bytes));
    json_object_set_new(j, "horizon_steps", json_real(d->steps));
    json_object_set_new(j, "busiest_rank", json_integer(d->busiest));
    json_object_set_new(j, "keys_per_step", json_real(d->keys_step));
    json_object_set_new(j, "keys_over_horizon", json_real(d->keys_horizon));
    json_object_set_new(j, "fill_steps", isfinite(d->fill_steps) ? json_real(d->fill_steps) : json_null());
    json_object_set_new(j, "keys_without_row_per_step", json_real(d->miss_step));
    json_object_set_new(j, "over_capacity_per_step", json_boolean(d->over_step));
    json_object_set_new(j, "over_capacity_over_horizon", json_boolean(d->over_horizon));
    return j;
}
