/*
 * limits_keys.c: dynamic tables' keys by owner for `ember limits`
 * (limits.h).  Per global batch, the distinct keys each owner (mix64(key)
 * mod owners) receives, and over all batches the distinct keys each owner
 * has seen, against the table's capacity per rank: the working set the
 * planner predicts (docs/planner.md, "Dynamic tables").  The keyed
 * statistics builder (plan.h) holds the distinct keys and counts them by
 * owner, so the owner rule is the one dynamic tables use.
 */
#include <stdlib.h>

#include "plan/limits.h"
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

int limits_keys_create(const ember_batch_file_info *info, const int *dynamic, const int64_t *capacity,
                       int64_t owners, limits_keys **out)
{
    *out = NULL;
    int any = 0;
    for (int32_t t = 0; t < info->num_tables; t++)
        any |= dynamic[t];
    if (!any)
        return EMBER_OK;
    limits_keys *k = calloc(1, sizeof *k);
    if (!k)
        return EMBER_ENOMEM;
    k->info = *info;
    k->owners = owners;
    k->count = calloc((size_t)owners, sizeof *k->count);
    k->t = calloc((size_t)info->num_tables, sizeof *k->t);
    if (!k->count || !k->t) {
        limits_keys_destroy(k);
        return EMBER_ENOMEM;
    }
    for (int32_t t = 0; t < info->num_tables; t++) {
        k->t[t].dynamic = dynamic[t];
        k->t[t].capacity = capacity[t];
        if (k->t[t].dynamic && plan_stats_builder_create(0, &k->t[t].all) != EMBER_OK) {
            limits_keys_destroy(k);
            return EMBER_ENOMEM;
        }
    }
    *out = k;
    return EMBER_OK;
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
            return EMBER_EINVAL;
        at += len;
    }
    return 0;
}

static int64_t busiest(const limits_keys *k)
{
    int64_t mx = 0;
    for (int64_t o = 0; o < k->owners; o++)
        mx = k->count[o] > mx ? k->count[o] : mx;
    return mx;
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
            return EMBER_ENOMEM;
        }
        plan_stats_builder_destroy(one);
        int64_t mx = busiest(k);
        tk->batch_max = mx > tk->batch_max ? mx : tk->batch_max;
        tk->batch_sum += (double)mx;
    }
    k->batches++;
    return EMBER_OK;
}

void limits_keys_fill(const limits_keys *k, int32_t t, ember_limits_table *out)
{
    if (!k || !k->t[t].dynamic)
        return;
    const table_keys *tk = &k->t[t];
    int64_t mx = 0;
    if (plan_stats_builder_owners(tk->all, (int32_t)k->owners, k->count) == EMBER_OK)
        mx = busiest(k);
    out->dynamic = 1;
    out->capacity = tk->capacity;
    out->owners = k->owners;
    out->max_keys_per_owner_per_batch = tk->batch_max;
    out->mean_keys_per_owner_per_batch = k->batches ? tk->batch_sum / (double)k->batches : 0.0;
    out->distinct_keys_per_owner = mx;
    out->distinct_keys = plan_stats_builder_distinct(tk->all);
    out->over_capacity = mx > tk->capacity;
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
