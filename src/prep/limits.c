/*
 * limits.c: per-partition limits (SparseCore's max_ids_per_partition and max_unique_ids_per_partition): counting, the error and
 * drop policies, and the greedy mini-batch split.
 *
 * The unit is a distinct id within a bag (the route's leader entries).  A
 * unit of table t goes to shard physical_row % shards.  Counting walks the
 * route's leader keys sorted by row: within one (table, shard) they come in
 * (id, sample, feature) order, the order the drop policy keeps them in, and
 * a new row means a new unique id.  The mini-batch split walks samples in
 * order and needs "seen in this mini-batch" per row: an open-addressing set
 * of (ptable, row) keys stamped with the mini-batch number (64 bits each),
 * so it never needs clearing within a batch.  Limit bookkeeping costs nothing when no table has a limit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/reserve.h"
#include "core/status.h"
#include "prep/limits.h"

static int has_limit(const ember_table_config *t)
{
    return t->max_ids_per_partition > 0 || t->max_unique_ids_per_partition > 0;
}

int ember_limits_active(const ember_prep *P)
{
    for (int32_t t = 0; t < P->num_tables; t++)
        if (has_limit(&P->tables[t].cfg))
            return 1;
    return 0;
}

/* Logical table of a physical row; *i is a cursor that only moves forward
 * while rows ascend. */
static int32_t table_at(const ember_prep *P, const ember_prep_table *pt, uint32_t row, int32_t *i)
{
    while (*i + 1 < pt->num_tables && row >= P->tables[pt->tables[*i + 1]].offset)
        (*i)++;
    return pt->tables[*i];
}

static int over(const ember_table_config *tc, int64_t ids, int64_t uniq)
{
    return (tc->max_ids_per_partition > 0 && ids > tc->max_ids_per_partition) ||
           (tc->max_unique_ids_per_partition > 0 && uniq > tc->max_unique_ids_per_partition);
}

static int limit_error(const ember_prep *P, int32_t t, int32_t shard, int64_t ids, int64_t uniq,
                       const char *where)
{
    const ember_table_config *tc = &P->tables[t].cfg;
    int by_ids = tc->max_ids_per_partition > 0 && ids > tc->max_ids_per_partition;
    return ember_fail_into(P->errmsg, EMBER_ELIMIT, "table '%s' shard %d: %lld %s exceed %s %lld%s", tc->name, shard,
                      (long long)(by_ids ? ids : uniq), by_ids ? "ids" : "unique ids",
                      by_ids ? "max_ids_per_partition" : "max_unique_ids_per_partition",
                      (long long)(by_ids ? tc->max_ids_per_partition : tc->max_unique_ids_per_partition),
                      where);
}

void ember_limits_count(const ember_prep *P, int64_t *ids, int64_t *unique)
{
    int32_t S = P->num_shards;
    for (int32_t p = 0; p < P->num_ptables; p++) {
        const ember_prep_table *pt = &P->ptables[p];
        ember_route *r = pt->route;
        ember_route_sort_rows(r, pt->rows, 0, P->sort_hist, P->threads);
        int32_t cur = 0;
        for (int64_t j = 0; j < r->nkeys; j++) {
            uint32_t row = (uint32_t)(r->keys[j] >> 32);
            int64_t k = (int64_t)table_at(P, pt, row, &cur) * S + row % (uint32_t)S;
            ids[k]++;
            if (j == 0 || (uint32_t)(r->keys[j - 1] >> 32) != row)
                unique[k]++;
        }
    }
}

/* ---- mini-batch split ---- */

/* Slots are (key, stamp) pairs: key = ptable << 32 | row (UINT64_MAX =
 * empty), stamp = the last mini-batch that saw it. */
static int reserve_hash(ember_limit_scratch *ls, int64_t units)
{
    int64_t cap = 64;
    while (cap < 2 * units)
        cap *= 2;
    if (cap > ls->mb_hash_cap) {
        void *h = realloc(ls->mb_hash, 2 * sizeof(uint64_t) * (size_t)cap);
        if (!h)
            return EMBER_ENOMEM;
        ls->mb_hash = h;
        ls->mb_hash_cap = cap;
    }
    for (int64_t i = 0; i < ls->mb_hash_cap; i++)
        ls->mb_hash[2 * i] = UINT64_MAX;
    return EMBER_OK;
}

/* 1 if (p, row) was not yet seen in mini-batch m; marks it seen. */
static int first_in_minibatch(ember_limit_scratch *ls, int32_t p, uint32_t row, int64_t m)
{
    uint64_t key = (uint64_t)p << 32 | row, mask = (uint64_t)ls->mb_hash_cap - 1;
    for (uint64_t h = (key * 0x9e3779b97f4a7c15ULL) >> 20;; h++) {
        uint64_t *slot = &ls->mb_hash[2 * (h & mask)];
        if (slot[0] == UINT64_MAX || slot[0] == key) {
            int fresh = slot[0] == UINT64_MAX || slot[1] != (uint64_t)m;
            slot[0] = key;
            slot[1] = (uint64_t)m;
            return fresh;
        }
    }
}

static int minibatch_split(const ember_prep *P, ember_batch_shape *bs)
{
    int32_t B = bs->batch_size, S = P->num_shards, T = P->num_tables;
    int64_t *ids = P->limits->counts, *uniq = ids + (int64_t)T * S;
    int64_t units = 0;
    for (int32_t p = 0; p < P->num_ptables; p++)
        units += P->ptables[p].route->n;
    if (reserve_hash(P->limits, units) != EMBER_OK)
        return ember_fail_into(P->errmsg, EMBER_ENOMEM, "out of memory for the mini-batch split");
    memset(ids, 0, sizeof(int64_t) * 2 * (size_t)T * S);
    int32_t m = 0, start = 0;
    bs->minibatch_start[0] = 0;
    for (int32_t s = 0; s < B; s++) {
        for (int32_t p = 0; p < P->num_ptables; p++) {
            const ember_route *r = P->ptables[p].route;
            for (int64_t g = r->sample_seg[s]; g < r->sample_seg[s + 1]; g++) {
                int32_t t = P->features[r->seg_feature[g]].table;
                const ember_table_config *tc = &P->tables[t].cfg;
                if (tc->limit_policy != EMBER_LIMIT_MINIBATCH || !has_limit(tc))
                    continue;
                for (int64_t e = r->seg_start[g]; e < r->seg_start[g + 1]; e++) {
                    if (r->leader[e] != (int32_t)e)
                        continue;
                    int64_t k = (int64_t)t * S + r->row[e] % (uint32_t)S;
                    ids[k]++;
                    uniq[k] += first_in_minibatch(P->limits, p, r->row[e], m);
                }
            }
        }
        for (int64_t k = 0; k < (int64_t)T * S; k++) {
            const ember_table_config *tc = &P->tables[k / S].cfg;
            if (tc->limit_policy != EMBER_LIMIT_MINIBATCH || !over(tc, ids[k], uniq[k]))
                continue;
            if (s == start) {
                char where[96];
                snprintf(where, sizeof where, " in sample %d alone; mini-batching cannot split a sample", s);
                return limit_error(P, (int32_t)(k / S), (int32_t)(k % S), ids[k], uniq[k], where);
            }
            bs->minibatch_start[++m] = s; /* cut before s and count s again */
            start = s;
            memset(ids, 0, sizeof(int64_t) * 2 * (size_t)T * S);
            s--;
            break;
        }
    }
    bs->num_minibatches = m + 1;
    bs->minibatch_start[m + 1] = B;
    return EMBER_OK;
}

/* ---- error and drop policies, per mini-batch ---- */

static int check_and_drop(const ember_prep *P, const ember_batch_shape *bs, int32_t p, int32_t m, int64_t *dropped)
{
    const ember_prep_table *pt = &P->ptables[p];
    ember_route *r = pt->route;
    int32_t S = P->num_shards, T = P->num_tables;
    int32_t b0 = bs->minibatch_start[m], b1 = bs->minibatch_start[m + 1];
    int64_t e_lo = r->seg_start[r->sample_seg[b0]], e_hi = r->seg_start[r->sample_seg[b1]];
    int64_t *ids = P->limits->counts, *uniq = ids + (int64_t)T * S;
    int64_t *kept = uniq + (int64_t)T * S, *kuniq = kept + (int64_t)T * S;
    memset(ids, 0, sizeof(int64_t) * 4 * (size_t)T * S);
    int32_t cur = 0;
    uint32_t prev = EMBER_ROW_DROPPED;
    int keep_row = 1;
    for (int64_t j = 0; j < r->nkeys; j++) {
        uint32_t e = (uint32_t)r->keys[j], row = (uint32_t)(r->keys[j] >> 32);
        if (e < e_lo || e >= e_hi)
            continue;
        int32_t t = table_at(P, pt, row, &cur);
        const ember_table_config *tc = &P->tables[t].cfg;
        if (!has_limit(tc) || tc->limit_policy == EMBER_LIMIT_MINIBATCH)
            continue;
        int64_t k = (int64_t)t * S + row % (uint32_t)S;
        int fresh = row != prev;
        prev = row;
        ids[k]++;
        uniq[k] += fresh;
        if (tc->limit_policy != EMBER_LIMIT_DROP)
            continue;
        if (fresh) { /* the walk rule of ember_table_config */
            kuniq[k]++;
            keep_row = tc->max_unique_ids_per_partition == 0 || kuniq[k] <= tc->max_unique_ids_per_partition;
        }
        if (keep_row && (tc->max_ids_per_partition == 0 || kept[k] < tc->max_ids_per_partition)) {
            kept[k]++;
        } else {
            r->row[e] = EMBER_ROW_DROPPED;
            *dropped += r->dedup ? r->mult[e] : 1;
        }
    }
    for (int64_t k = 0; k < (int64_t)T * S; k++) {
        const ember_table_config *tc = &P->tables[k / S].cfg;
        if (tc->limit_policy == EMBER_LIMIT_ERROR && P->tables[k / S].ptable == p && over(tc, ids[k], uniq[k])) {
            char where[96] = "";
            if (bs->num_minibatches > 1)
                snprintf(where, sizeof where, " (mini-batch %d, samples %d..%d)", m, b0, b1 - 1);
            return limit_error(P, (int32_t)(k / S), (int32_t)(k % S), ids[k], uniq[k], where);
        }
    }
    return EMBER_OK;
}

int ember_limits_apply(const ember_prep *P, ember_batch_shape *bs, int64_t *dropped)
{
    int32_t B = bs->batch_size;
    *dropped = 0;
    if (ember_reserve((void **)&bs->minibatch_start, &bs->minibatch_cap, (int64_t)B + 2, sizeof(int32_t)))
        return ember_fail_into(P->errmsg, EMBER_ENOMEM, "out of memory");
    bs->num_minibatches = 1;
    bs->minibatch_start[0] = 0;
    bs->minibatch_start[1] = B;
    if (!ember_limits_active(P))
        return EMBER_OK;
    int has_mb = 0, has_other = 0;
    for (int32_t t = 0; t < P->num_tables; t++) {
        const ember_table_config *tc = &P->tables[t].cfg;
        has_mb |= has_limit(tc) && tc->limit_policy == EMBER_LIMIT_MINIBATCH;
        has_other |= has_limit(tc) && tc->limit_policy != EMBER_LIMIT_MINIBATCH;
    }
    int st;
    if (has_mb && B > 0 && (st = minibatch_split(P, bs)) != EMBER_OK)
        return st;
    if (!has_other)
        return EMBER_OK;
    int64_t drops = 0;
    for (int32_t p = 0; p < P->num_ptables; p++) {
        ember_route *r = P->ptables[p].route;
        ember_route_sort_rows(r, P->ptables[p].rows, 0, P->sort_hist, P->threads);
        for (int32_t m = 0; m < bs->num_minibatches; m++)
            if ((st = check_and_drop(P, bs, p, m, &drops)) != EMBER_OK)
                return st;
        if (drops) { /* a unit's repeats in its bag follow their leader */
            for (int64_t e = 0; e < r->n; e++)
                if (r->leader[e] != (int32_t)e && r->row[r->leader[e]] == EMBER_ROW_DROPPED &&
                    r->row[e] != EMBER_ROW_DROPPED) {
                    r->row[e] = EMBER_ROW_DROPPED;
                    drops += r->dedup ? r->mult[e] : 1;
                }
            r->nkeys = 0;
        }
    }
    *dropped = drops;
    return EMBER_OK;
}
