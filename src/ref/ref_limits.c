/*
 * ref_limits.c: naive reference for ember_partition_counts() and for the
 * per-partition limit policies of ember_table_config.
 *
 * Everything is rebuilt from the batch for every question asked: a "unit" is
 * a distinct id within one bag (sample, feature); a sample range's units are
 * listed, sorted and counted per (table, shard) from scratch each time.  The
 * greedy mini-batch split recounts every candidate range from scratch too.
 * That is quadratic in the batch size, which is the point: no incremental
 * state to get wrong.  shard = (ref_stack_offset(t) + id) % num_shards.
 *
 * Ids outside [0, rows) are ignored here (they are a bounds matter, not a
 * limits one); their keep byte stays 1 and ref_forward skips them anyway.
 */
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/rng.h"
#include "ref/ref.h"

/* num_shards 0 means the world size, which is 1 for the reference. */
static int32_t ref_shards(const ember_collection_config *cfg) { return cfg->num_shards > 0 ? cfg->num_shards : 1; }

/* One distinct id of one bag. */
typedef struct unit {
    int32_t table;
    int32_t shard;
    int64_t id;
    int32_t sample;
    int32_t feature;
} unit;

/* Start of every bag in the batch's ids: bag (f, b) begins at
 * start[f * B + b]; start[F * B] = num_ids.  Caller frees. */
static int64_t *bag_starts(const ember_batch *b)
{
    int64_t nbags = (int64_t)b->num_features * b->batch_size;
    int64_t *start = malloc((size_t)(nbags + 1) * sizeof *start);
    if (!start)
        return NULL;
    int64_t off = 0;
    for (int64_t k = 0; k < nbags; k++) {
        start[k] = off;
        off += b->lengths[k];
    }
    start[nbags] = off;
    return start;
}

static int id_valid(const ember_collection_config *cfg, int32_t t, int64_t id)
{
    return cfg->tables[t].kind == EMBER_TABLE_DYNAMIC || (id >= 0 && id < cfg->tables[t].rows);
}

/* The units of samples [lo, hi), in (feature, sample, position) order.
 * Returns the count, or -1 on allocation failure; *out is malloc'd. */
static int64_t list_units(const ember_collection_config *cfg, const ember_batch *b,
                          const int64_t *start, int32_t lo, int32_t hi, unit **out)
{
    int64_t cap = 0;
    for (int32_t f = 0; f < b->num_features; f++)
        for (int32_t s = lo; s < hi; s++)
            cap += b->lengths[(int64_t)f * b->batch_size + s];
    unit *u = malloc((size_t)(cap ? cap : 1) * sizeof *u);
    if (!u)
        return -1;
    int64_t n = 0;
    for (int32_t f = 0; f < b->num_features; f++) {
        int32_t t = cfg->features[f].table;
        int64_t off = ref_stack_offset(cfg, t);
        for (int32_t s = lo; s < hi; s++) {
            int64_t k = (int64_t)f * b->batch_size + s;
            for (int64_t i = start[k]; i < start[k + 1]; i++) {
                int64_t id = b->ids[i];
                if (!id_valid(cfg, t, id))
                    continue;
                int seen = 0;
                for (int64_t j = start[k]; j < i; j++)
                    if (b->ids[j] == id)
                        seen = 1;
                if (seen)
                    continue;
                u[n].table = t;
                u[n].shard = cfg->tables[t].kind == EMBER_TABLE_DYNAMIC /* a key's destination */
                                 ? (ref_shards(cfg) == 1 ? 0 : (int32_t)(ember_mix64((uint64_t)id) % (uint64_t)ref_shards(cfg)))
                                 : (int32_t)((off + id) % ref_shards(cfg));
                u[n].id = id;
                u[n].sample = s;
                u[n].feature = f;
                n++;
            }
        }
    }
    *out = u;
    return n;
}

/* (table, shard, id, sample, feature): the drop walk's order within a
 * partition, and distinct ids are adjacent. */
static int unit_cmp(const void *pa, const void *pb)
{
    const unit *a = pa, *b = pb;
    if (a->table != b->table)
        return a->table < b->table ? -1 : 1;
    if (a->shard != b->shard)
        return a->shard < b->shard ? -1 : 1;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    if (a->sample != b->sample)
        return a->sample < b->sample ? -1 : 1;
    if (a->feature != b->feature)
        return a->feature < b->feature ? -1 : 1;
    return 0;
}

/* Counts of samples [lo, hi) into ids[] and unique[] (T * S each, zeroed
 * here).  0, or -1 on allocation failure. */
static int range_counts(const ember_collection_config *cfg, const ember_batch *b,
                        const int64_t *start, int32_t lo, int32_t hi, int64_t *ids,
                        int64_t *unique)
{
    int64_t cells = (int64_t)cfg->num_tables * ref_shards(cfg);
    memset(ids, 0, (size_t)cells * sizeof *ids);
    memset(unique, 0, (size_t)cells * sizeof *unique);
    unit *u;
    int64_t n = list_units(cfg, b, start, lo, hi, &u);
    if (n < 0)
        return EMBER_EINVAL;
    qsort(u, (size_t)n, sizeof *u, unit_cmp);
    for (int64_t i = 0; i < n; i++) {
        int64_t cell = (int64_t)u[i].table * ref_shards(cfg) + u[i].shard;
        ids[cell] += 1;
        if (i == 0 || u[i - 1].table != u[i].table || u[i - 1].id != u[i].id)
            unique[cell] += 1;
    }
    free(u);
    return 0;
}

void ref_partition_counts(const ember_collection_config *cfg, const ember_batch *b, int64_t *ids,
                          int64_t *unique)
{
    int64_t *start = bag_starts(b);
    /* the reference has no error path; tests are small */
    EMBER_ASSERT(start != NULL);
    int rc = range_counts(cfg, b, start, 0, b->batch_size, ids, unique);
    EMBER_ASSERT(rc == 0);
    free(start);
}

/* Does table t, under its own limits, fit in every shard of these counts? */
static int table_fits(const ember_collection_config *cfg, int32_t t, const int64_t *ids,
                      const int64_t *unique)
{
    const ember_table_config *tc = &cfg->tables[t];
    for (int32_t s = 0; s < ref_shards(cfg); s++) {
        int64_t cell = (int64_t)t * ref_shards(cfg) + s;
        if (tc->max_ids_per_partition > 0 && ids[cell] > tc->max_ids_per_partition)
            return 0;
        if (tc->max_unique_ids_per_partition > 0 &&
            unique[cell] > tc->max_unique_ids_per_partition)
            return 0;
    }
    return 1;
}

static int has_limits(const ember_table_config *tc)
{
    return tc->max_ids_per_partition > 0 || tc->max_unique_ids_per_partition > 0;
}

/* 1 if every table with the given policy fits samples [lo, hi), 0 if not,
 * -1 on allocation failure. */
static int policy_fits(const ember_collection_config *cfg, const ember_batch *b,
                       const int64_t *start, int32_t lo, int32_t hi, ember_limit_policy policy,
                       int64_t *ids, int64_t *unique)
{
    if (range_counts(cfg, b, start, lo, hi, ids, unique) != 0)
        return EMBER_EINVAL;
    for (int32_t t = 0; t < cfg->num_tables; t++)
        if (cfg->tables[t].limit_policy == policy && has_limits(&cfg->tables[t]) &&
            !table_fits(cfg, t, ids, unique))
            return 0;
    return 1;
}

/* Policy drop for samples [lo, hi): per (table, shard), walk the units in
 * (id, sample, feature) order exactly as ember.h writes it, and clear keep[]
 * for every occurrence of a dropped unit in its bag. */
static int apply_drop(const ember_collection_config *cfg, const ember_batch *b,
                      const int64_t *start, int32_t lo, int32_t hi, uint8_t *keep)
{
    unit *u;
    int64_t n = list_units(cfg, b, start, lo, hi, &u);
    if (n < 0)
        return EMBER_EINVAL;
    qsort(u, (size_t)n, sizeof *u, unit_cmp);
    int64_t i = 0;
    while (i < n) {
        /* one partition: units [i, j) share (table, shard) */
        int64_t j = i;
        while (j < n && u[j].table == u[i].table && u[j].shard == u[i].shard)
            j++;
        const ember_table_config *tc = &cfg->tables[u[i].table];
        if (tc->limit_policy == EMBER_LIMIT_DROP && has_limits(tc)) {
            int64_t distinct = 0, kept = 0;
            for (int64_t k = i; k < j; k++) {
                if (k == i || u[k].id != u[k - 1].id)
                    distinct += 1;
                int keep_it = (tc->max_unique_ids_per_partition == 0 ||
                               distinct <= tc->max_unique_ids_per_partition) &&
                              (tc->max_ids_per_partition == 0 ||
                               kept < tc->max_ids_per_partition);
                if (keep_it) {
                    kept += 1;
                    continue;
                }
                int64_t bag = (int64_t)u[k].feature * b->batch_size + u[k].sample;
                for (int64_t p = start[bag]; p < start[bag + 1]; p++)
                    if (b->ids[p] == u[k].id)
                        keep[p] = 0;
            }
        }
        i = j;
    }
    free(u);
    return 0;
}

int ref_limits_apply(const ember_collection_config *cfg, const ember_batch *b, uint8_t *keep,
                     int32_t *num_minibatches, int32_t *minibatch_start)
{
    int rc = EMBER_OK;
    int64_t cells = (int64_t)cfg->num_tables * ref_shards(cfg);
    int64_t *start = bag_starts(b);
    int64_t *ids = malloc((size_t)cells * sizeof *ids);
    int64_t *unique = malloc((size_t)cells * sizeof *unique);
    if (!start || !ids || !unique) {
        rc = EMBER_ENOMEM;
        goto fail;
    }
    memset(keep, 1, (size_t)b->num_ids);

    /* 1. greedy split on the minibatch-policy tables */
    int32_t B = b->batch_size, nmb = 0;
    int split = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++)
        if (cfg->tables[t].limit_policy == EMBER_LIMIT_MINIBATCH && has_limits(&cfg->tables[t]))
            split = 1;
    minibatch_start[0] = 0;
    int32_t lo = 0;
    while (split && lo < B) {
        int fit = policy_fits(cfg, b, start, lo, lo + 1, EMBER_LIMIT_MINIBATCH, ids, unique);
        if (fit < 0) {
            rc = EMBER_ENOMEM;
            goto fail;
        }
        if (!fit) { /* sample lo alone overflows */
            rc = EMBER_ELIMIT;
            goto fail;
        }
        int32_t hi = lo + 1;
        while (hi < B) {
            fit = policy_fits(cfg, b, start, lo, hi + 1, EMBER_LIMIT_MINIBATCH, ids, unique);
            if (fit < 0) {
                rc = EMBER_ENOMEM;
                goto fail;
            }
            if (!fit)
                break;
            hi++;
        }
        minibatch_start[++nmb] = hi;
        lo = hi;
    }
    if (nmb == 0) /* nothing to split, or an empty batch: one mini-batch */
        minibatch_start[++nmb] = B;
    *num_minibatches = nmb;

    /* 2. per mini-batch: error tables must fit, drop tables are trimmed */
    for (int32_t m = 0; m < nmb; m++) {
        int32_t mlo = minibatch_start[m], mhi = minibatch_start[m + 1];
        int fit = policy_fits(cfg, b, start, mlo, mhi, EMBER_LIMIT_ERROR, ids, unique);
        if (fit < 0) {
            rc = EMBER_ENOMEM;
            goto fail;
        }
        if (!fit) {
            rc = EMBER_ELIMIT;
            goto fail;
        }
        if (apply_drop(cfg, b, start, mlo, mhi, keep) != 0) {
            rc = EMBER_ENOMEM;
            goto fail;
        }
    }

fail:
    free(start);
    free(ids);
    free(unique);
    return rc;
}
