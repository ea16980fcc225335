/*
 * dynamic_tables.c: the public calls on dynamic tables (include/ember.h): stats,
 * the keys a step evicted, eviction on demand, rows by key, the resident
 * keys, and the training switch.
 *
 * Reading rows by key is collective like ember_table_read: every rank asks
 * for the same keys; each owner reads those it holds and sends them, as
 * one block, to every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/collection.h"
#include "dyn/dyn.h"
#include "dyn/dyn_evict.h"
#include "exchange/exchange.h"

/* The dynamic table t, or NULL with a message on c. */
static ember_dyn_table *dyn_of(const ember_collection *c, int32_t table)
{
    ember_collection *m = (ember_collection *)c;
    if (table < 0 || table >= c->cfg.num_tables) {
        ember_fail(m, EMBER_EINVAL, "table %d outside [0, %d)", table, c->cfg.num_tables);
        return NULL;
    }
    ember_dyn_table *dt = c->ptables[c->tables[table].ptable].dyn;
    if (!dt)
        ember_fail(m, EMBER_EINVAL, "table '%s' is not dynamic", c->tables[table].cfg.name);
    return dt;
}

int ember_collection_set_training(ember_collection *c, int training)
{
    if (training != 0 && training != 1)
        return ember_fail(c, EMBER_EINVAL, "training must be 0 or 1 (got %d)", training);
    c->training = training;
    return EMBER_OK;
}

int ember_table_dynamic_stats(const ember_collection *c, int32_t table, ember_dynamic_stats *out)
{
    memset(out, 0, sizeof *out);
    const ember_dyn_table *dt = dyn_of(c, table);
    if (!dt)
        return EMBER_EINVAL;
    const ember_dyn *d = &dt->d;
    out->capacity = d->p.capacity;
    out->resident = d->resident;
    out->admitted = d->total.admitted;
    out->evicted = d->total.evicted;
    out->expired = d->total.expired;
    out->evicted_count_sum = d->total.evicted_count_sum;
    out->not_admitted = d->total.not_admitted;
    out->last_evicted = d->evicted_n;
    out->index_bytes = ember_dyn_index_bytes(d->p.capacity, d->p.evict);
    out->sketch_bytes = ember_dyn_sketch_bytes(d->p.sketch_width);
    return EMBER_OK;
}

int ember_dynamic_evicted(const ember_collection *c, int32_t table, int64_t max, int64_t *keys, int64_t *counts,
                          int64_t *n)
{
    const ember_dyn_table *dt = dyn_of(c, table);
    *n = 0;
    if (!dt)
        return EMBER_EINVAL;
    const ember_dyn *d = &dt->d;
    int64_t k = d->evicted_n < max ? d->evicted_n : max;
    for (int64_t i = 0; i < k; i++) {
        keys[i] = (int64_t)d->evicted_keys[i];
        counts[i] = d->evicted_counts[i];
    }
    *n = d->evicted_n;
    return EMBER_OK;
}

int ember_dynamic_evict(ember_collection *c, int32_t table, int64_t idle_steps, int64_t *freed)
{
    ember_dyn_table *dt = dyn_of(c, table);
    if (freed)
        *freed = 0;
    if (!dt)
        return EMBER_EINVAL;
    if (idle_steps < 0)
        return ember_fail(c, EMBER_EINVAL, "idle_steps %lld must be >= 0", (long long)idle_steps);
    int64_t n = ember_dyn_evict_idle(&dt->d, (uint32_t)(c->stats.steps + 1), idle_steps);
    if (freed)
        *freed = n;
    return EMBER_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int ember_dynamic_keys(const ember_collection *c, int32_t table, int64_t max, int64_t *keys, int64_t *n)
{
    const ember_dyn_table *dt = dyn_of(c, table);
    *n = 0;
    if (!dt)
        return EMBER_EINVAL;
    const ember_dyn *d = &dt->d;
    *n = d->resident;
    if (max < d->resident)
        return EMBER_OK;
    int64_t k = 0;
    for (int64_t s = 0; s < d->p.capacity; s++)
        if (!(d->free_bits[s >> 6] >> (s & 63) & 1))
            keys[k++] = (int64_t)d->slot_key[s];
    qsort(keys, (size_t)k, sizeof *keys, cmp_i64);
    return EMBER_OK;
}

/* This rank's answer for the keys it owns, packed in key order: per key a
 * found flag, then the row's values and state (zeros when absent). */
static int read_owned(ember_collection *c, const ember_ptable *pt, const int64_t *keys, int64_t n, float *mine,
                      int64_t per)
{
    const ember_dyn *d = &pt->dyn->d;
    ember_store *s = pt->store;
    int32_t W = c->world->size, rank = c->world->rank;
    float *o = mine;
    for (int64_t i = 0; i < n; i++) {
        if ((int32_t)ember_dyn_owner(keys[i], W) != rank)
            continue;
        memset(o, 0, sizeof(float) * (size_t)per);
        uint32_t slot = ember_keymap_find(&d->map, (uint64_t)keys[i]);
        if (slot != EMBER_KEYMAP_NONE) {
            float *v, *st;
            if (s->ops->acquire(s, &slot, 1, &v, &st) != EMBER_OK)
                return ember_fail(c, EMBER_EIO, "%s", s->errmsg);
            o[0] = 1.0f;
            memcpy(o + 1, v, sizeof(float) * (size_t)s->dim);
            if (s->state_floats)
                memcpy(o + 1 + s->dim, st, sizeof(float) * (size_t)s->state_floats);
            s->ops->release(s, &slot, 1, 0);
        }
        o += per;
    }
    return EMBER_OK;
}

int ember_dynamic_read(const ember_collection *cc, int32_t table, const int64_t *keys, int64_t n, float *values,
                       float *state, int8_t *found)
{
    ember_collection *c = (ember_collection *)cc;
    ember_dyn_table *dt = dyn_of(c, table);
    if (!dt)
        return EMBER_EINVAL;
    if (n < 0 || (n > 0 && !keys))
        return ember_fail(c, EMBER_EINVAL, "ember_dynamic_read: n %lld < 0 or keys NULL", (long long)n);
    const ember_ptable *pt = &c->ptables[c->tables[table].ptable];
    int32_t W = c->world->size, rank = c->world->rank, dim = pt->store->dim, sf = pt->store->state_floats;
    int64_t per = 1 + (int64_t)dim + sf;
    int64_t *cnt = calloc((size_t)4 * W, sizeof(int64_t));
    if (!cnt)
        return ember_dist_agree(c, ember_fail(c, EMBER_ENOMEM, "out of memory"), NULL);
    for (int64_t i = 0; i < n; i++)
        cnt[ember_dyn_owner(keys[i], W)]++;
    float *mine = malloc(sizeof(float) * (size_t)(cnt[rank] * per + 1));
    float *all = malloc(sizeof(float) * (size_t)(n * per + 1));
    int st = mine && all ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory reading %lld keys", (long long)n);
    if ((st = ember_dist_agree(c, st, NULL)) == EMBER_OK) {
        int lst = read_owned(c, pt, keys, n, mine, per);
        if (W == 1) {
            memcpy(all, mine, sizeof(float) * (size_t)(n * per));
        } else { /* the same block to every rank; rank r's block lands at its offset */
            int64_t *scnt = cnt + W, *sdsp = cnt + 2 * W, *rdsp = cnt + 3 * W, off = 0;
            int64_t my_bytes = cnt[rank] * per * (int64_t)sizeof(float);
            for (int32_t r = 0; r < W; r++) {
                scnt[r] = my_bytes;
                sdsp[r] = 0;
                rdsp[r] = off;
                off += cnt[r] * per * (int64_t)sizeof(float);
                cnt[r] *= per * (int64_t)sizeof(float);
            }
            if (ember_comm_alltoallv(c->world, mine, scnt, sdsp, all, cnt, rdsp) != EMBER_OK)
                st = ember_dist_comm_failed(c);
            for (int32_t r = 0; r < W; r++) /* back to key counts, rdsp to float offsets */
                cnt[r] /= per * (int64_t)sizeof(float), rdsp[r] /= (int64_t)sizeof(float);
        }
        if (st == EMBER_OK)
            st = ember_dist_agree(c, lst, NULL);
        if (st == EMBER_OK) {
            int64_t *at = cnt + 3 * W;
            if (W == 1)
                at[0] = 0;
            for (int64_t i = 0; i < n; i++) {
                uint32_t r = ember_dyn_owner(keys[i], W);
                const float *in = all + at[r];
                at[r] += per;
                if (found)
                    found[i] = in[0] != 0.0f;
                if (values)
                    memcpy(values + i * dim, in + 1, sizeof(float) * (size_t)dim);
                if (state && sf)
                    memcpy(state + i * sf, in + 1 + dim, sizeof(float) * (size_t)sf);
            }
        }
    }
    free(cnt);
    free(mine);
    free(all);
    return st;
}
