/*
 * limits_keys.c: dynamic tables' keys by owner for `ember limits`
 * (limits_keys.h).  The library's keyed statistics builder (plan.h) holds
 * the distinct keys and counts them by owner, so the owner rule is the one
 * dynamic tables use.  Every rank counts the same global batches, so no
 * reduction is needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limits_keys.h"
#include "plan/plan.h"

typedef struct table_keys {
    int dynamic;
    int64_t capacity;
    plan_stats_builder *all;  /* every key so far                      */
    int64_t batch_max;        /* max over batches of the busiest owner  */
    double batch_sum;         /* sum over batches of the busiest owner  */
} table_keys;

struct limits_keys {
    ember_batch_file_info info;
    int64_t owners, batches;
    int64_t *count;           /* [owners] scratch                       */
    table_keys *t;            /* [info.num_tables]                      */
};

int limits_keys_create(const ember_batch_file_info *info, const ember_table_config *tables,
                       const int64_t *capacity, int64_t owners, limits_keys **out)
{
    *out = NULL;
    int any = 0;
    for (int32_t t = 0; t < info->num_tables; t++)
        any |= tables[t].kind == EMBER_TABLE_DYNAMIC;
    if (!any)
        return 0;
    limits_keys *k = calloc(1, sizeof *k);
    if (!k)
        return -1;
    k->info = *info;
    k->owners = owners;
    k->count = calloc((size_t)owners, sizeof *k->count);
    k->t = calloc((size_t)info->num_tables, sizeof *k->t);
    if (!k->count || !k->t) {
        limits_keys_destroy(k);
        return -1;
    }
    for (int32_t t = 0; t < info->num_tables; t++) {
        k->t[t].dynamic = tables[t].kind == EMBER_TABLE_DYNAMIC;
        k->t[t].capacity = capacity[t];
        if (k->t[t].dynamic && plan_stats_builder_create(0, &k->t[t].all) != EMBER_OK) {
            limits_keys_destroy(k);
            return -1;
        }
    }
    *out = k;
    return 0;
}

/* The keys of table t's features in the batch, into each builder given. */
static int add_keys(const limits_keys *k, const ember_batch *b, int32_t t, plan_stats_builder *one,
                    plan_stats_builder *all)
{
    int64_t at = 0;
    for (int32_t f = 0; f < b->num_features; f++) {
        int64_t len = 0;
        for (int32_t s = 0; s < b->batch_size; s++)
            len += b->lengths[(int64_t)f * b->batch_size + s];
        if (k->info.feature_table[f] == t &&
            (plan_stats_builder_add(one, b->ids + at, len) || plan_stats_builder_add(all, b->ids + at, len)))
            return -1;
        at += len;
    }
    return 0;
}

int limits_keys_add(limits_keys *k, const ember_batch *global)
{
    for (int32_t t = 0; t < k->info.num_tables; t++) {
        table_keys *tk = &k->t[t];
        if (!tk->dynamic)
            continue;
        plan_stats_builder *one = NULL;
        if (plan_stats_builder_create(0, &one) || add_keys(k, global, t, one, tk->all) ||
            plan_stats_builder_owners(one, (int32_t)k->owners, k->count)) {
            plan_stats_builder_destroy(one);
            return -1;
        }
        plan_stats_builder_destroy(one);
        int64_t mx = 0;
        for (int64_t o = 0; o < k->owners; o++)
            mx = k->count[o] > mx ? k->count[o] : mx;
        tk->batch_max = mx > tk->batch_max ? mx : tk->batch_max;
        tk->batch_sum += (double)mx;
    }
    k->batches++;
    return 0;
}

/* The busiest owner's distinct keys over all batches, and the total. */
static int64_t owner_max(const limits_keys *k, int32_t t, int64_t *total)
{
    const table_keys *tk = &k->t[t];
    *total = plan_stats_builder_distinct(tk->all);
    if (plan_stats_builder_owners(tk->all, (int32_t)k->owners, k->count))
        return 0;
    int64_t mx = 0;
    for (int64_t o = 0; o < k->owners; o++)
        mx = k->count[o] > mx ? k->count[o] : mx;
    return mx;
}

void limits_keys_print(const limits_keys *k, char (*names)[32])
{
    if (!k)
        return;
    int nw = 5;
    for (int32_t t = 0; t < k->info.num_tables; t++)
        if (k->t[t].dynamic && (int)strlen(names[t]) > nw)
            nw = (int)strlen(names[t]);
    printf("\ndynamic tables: distinct keys by owner (mix64(key) mod %lld), of the global batches: the busiest "
           "owner's per batch, and over all %lld batches\n", (long long)k->owners, (long long)k->batches);
    printf("  %-*s  %13s  %15s  %16s  %20s  %11s\n", nw, "table", "capacity/rank", "keys/batch, max",
           "keys/batch, mean", "keys over the data", "of capacity");
    for (int32_t t = 0; t < k->info.num_tables; t++) {
        const table_keys *tk = &k->t[t];
        if (!tk->dynamic)
            continue;
        int64_t total, mx = owner_max(k, t, &total);
        printf("  %-*s  %13lld  %15lld  %16.1f  %20lld  %10.2fx\n", nw, names[t], (long long)tk->capacity,
               (long long)tk->batch_max, k->batches ? tk->batch_sum / (double)k->batches : 0.0, (long long)mx,
               (double)mx / (double)tk->capacity);
    }
    for (int32_t t = 0; t < k->info.num_tables; t++) {
        const table_keys *tk = &k->t[t];
        int64_t total, mx = tk->dynamic ? owner_max(k, t, &total) : 0;
        if (tk->dynamic && tk->batch_max > tk->capacity)
            printf("warning: dynamic table '%s': a batch brought %lld distinct keys to one owner, more than its "
                   "capacity of %lld rows per rank: once they hold keys, such a step fails\n", names[t],
                   (long long)tk->batch_max, (long long)tk->capacity);
        else if (tk->dynamic && mx > tk->capacity)
            printf("warning: dynamic table '%s': %lld distinct keys on one owner over the data, %.2fx its "
                   "capacity of %lld rows per rank: rows are evicted and reset\n", names[t], (long long)mx,
                   (double)mx / (double)tk->capacity, (long long)tk->capacity);
    }
}

void limits_keys_json(const limits_keys *k, int32_t t, json_t *j)
{
    if (!k || !k->t[t].dynamic)
        return;
    const table_keys *tk = &k->t[t];
    int64_t total, mx = owner_max(k, t, &total);
    json_object_set_new(j, "kind", json_string("dynamic"));
    json_object_set_new(j, "capacity", json_integer(tk->capacity));
    json_object_set_new(j, "owners", json_integer(k->owners));
    json_object_set_new(j, "max_keys_per_owner_per_batch", json_integer(tk->batch_max));
    json_object_set_new(j, "mean_keys_per_owner_per_batch",
                        json_real(k->batches ? tk->batch_sum / (double)k->batches : 0.0));
    json_object_set_new(j, "distinct_keys_per_owner", json_integer(mx));
    json_object_set_new(j, "distinct_keys", json_integer(total));
    json_object_set_new(j, "over_capacity", json_boolean(mx > tk->capacity));
}

void limits_keys_destroy(limits_keys *k)
{
    if (!k)
        return;
    for (int32_t t = 0; k->t && t < k->info.num_tables; t++)
        plan_stats_builder_destroy(k->t[t].all);
    free(k->t);
    free(k->count);
    free(k);
}
