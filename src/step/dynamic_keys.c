/*
 * dynamic_keys.c: dynamic tables on the step's spine (docs/dynamic.md): keys
 * become row ids before routing, so everything after it is unchanged.
 *
 *   requester: keys of each dynamic table, batch order -> bucket by owner
 *              (owner = mix64(key) mod W), order kept
 *   exchange keys (alltoallv; nothing to send in a world of one)
 *   owner:     resolve the received keys (ranks in order: the global batch
 *              order), reset the rows of new keys, agree on the status
 *   exchange slots back
 *   requester: id = slot * W + owner (row-wise placement read backwards),
 *              or EMBER_ID_UNSEEN for a key with no row (reads zeros)
 *
 * The forward then routes the translated ids.  When it succeeds the owners
 * commit (last step and count of every row used); when anything fails the
 * owners roll back: map, metadata and sketch as before, the reset rows
 * restored from copies taken before they were overwritten.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/reserve.h"
#include "dyn/dyn.h"
#include "exchange/exchange.h"
#include "step/dynamic_keys.h"
#include "table/init.h"

#define RESET_CHUNK 256 /* rows acquired from the store at once */
#define RESET_AHEAD 8   /* rows whose lines are requested ahead of the reset */

static inline void prefetch_row(const float *v, const float *st, int32_t dim, int32_t state_floats)
{
    for (int32_t k = 0; k < dim; k += 16)
        __builtin_prefetch(v + k, 1);
    for (int32_t k = 0; st && k < state_floats; k += 16)
        __builtin_prefetch(st + k, 1);
}

/* The table's first feature's logical table config (dynamic tables are
 * never stacked: one logical table per physical table). */
static const ember_ltable *ltable_of(const ember_collection *c, const ember_ptable *pt)
{
    return &c->tables[pt->tables[0]];
}

/* Resets the rows of the keys admitted by the pending resolve: the old
 * values and state are copied to undo_rows first. */
static int apply_resets(ember_collection *c, ember_ptable *pt)
{
    ember_dyn_table *dt = pt->dyn;
    ember_store *s = pt->store;
    const ember_ltable *t = ltable_of(c, pt);
    int64_t n = dt->d.resets_n, per = (int64_t)s->dim + s->state_floats;
    dt->undo_done = 0;
    if (ember_reserve((void **)&dt->undo_rows, &dt->undo_cap, n * per, sizeof(float)))
        return ember_fail(c, EMBER_ENOMEM, "table '%s': out of memory resetting %lld rows", t->cfg.name,
                          (long long)n);
    for (int64_t i0 = 0; i0 < n; i0 += RESET_CHUNK) {
        int64_t m = n - i0 < RESET_CHUNK ? n - i0 : RESET_CHUNK;
        uint32_t rows[RESET_CHUNK];
        float *v[RESET_CHUNK], *st[RESET_CHUNK];
        for (int64_t i = 0; i < m; i++)
            rows[i] = dt->d.reset_slot[i0 + i];
        int rc = s->ops->acquire(s, rows, m, v, st);
        if (rc != EMBER_OK)
            return ember_fail(c, rc, "table '%s': %s", t->cfg.name, s->errmsg);
        for (int64_t i = 0; i < m; i++) {
            if (i + RESET_AHEAD < m) /* the old values are copied, then overwritten */
                prefetch_row(v[i + RESET_AHEAD], st[i + RESET_AHEAD], s->dim, s->state_floats);
            float *u = dt->undo_rows + (i0 + i) * per;
            memcpy(u, v[i], sizeof(float) * (size_t)s->dim);
            if (s->state_floats)
                memcpy(u + s->dim, st[i], sizeof(float) * (size_t)s->state_floats);
            ember_init_row_values(t->cfg.init, t->cfg.init_value, s->dim, t->rng_key,
                                  (int64_t)dt->d.reset_key[i0 + i], v[i]);
            if (s->state_floats)
                memset(st[i], 0, sizeof(float) * (size_t)s->state_floats);
        }
        if ((rc = s->ops->release(s, rows, m, 1)) != EMBER_OK)
            return ember_fail(c, rc, "table '%s': %s", t->cfg.name, s->errmsg);
        dt->undo_done = i0 + m;
    }
    return EMBER_OK;
}

/* Puts the rows apply_resets overwrote back (best effort on a failing
 * store: the rows' keys are forgotten by the rollback anyway). */
static void undo_resets(ember_ptable *pt)
{
    ember_dyn_table *dt = pt->dyn;
    ember_store *s = pt->store;
    int64_t per = (int64_t)s->dim + s->state_floats;
    for (int64_t i0 = 0; i0 < dt->undo_done; i0 += RESET_CHUNK) {
        int64_t m = dt->undo_done - i0 < RESET_CHUNK ? dt->undo_done - i0 : RESET_CHUNK;
        uint32_t rows[RESET_CHUNK];
        float *v[RESET_CHUNK], *st[RESET_CHUNK];
        for (int64_t i = 0; i < m; i++)
            rows[i] = dt->d.reset_slot[i0 + i];
        if (s->ops->acquire(s, rows, m, v, st) != EMBER_OK)
            return;
        for (int64_t i = 0; i < m; i++) {
            const float *u = dt->undo_rows + (i0 + i) * per;
            memcpy(v[i], u, sizeof(float) * (size_t)s->dim);
            if (s->state_floats)
                memcpy(st[i], u + s->dim, sizeof(float) * (size_t)s->state_floats);
        }
        s->ops->release(s, rows, m, 1);
    }
    dt->undo_done = 0;
}

/* Keys of physical table p's features in batch order into c->dyn_keys,
 * bucketed by owner (order kept): c->dyn_pos[j] = the batch position of
 * the j-th key sent; counts in c->dyn_cnt[0..W). Returns the key count. */
static int64_t gather_keys(ember_collection *c, const ember_ptable *pt, const ember_batch *b)
{
    int32_t B = b->batch_size, W = c->world->size;
    int64_t *cnt = c->dyn_cnt, n = 0;
    memset(cnt, 0, sizeof(int64_t) * 4 * (size_t)W);
    for (int32_t i = 0; i < pt->num_features; i++) {
        const int64_t *bo = c->shape.bag_off + (int64_t)pt->features[i] * (B + 1);
        for (int64_t k = bo[0]; k < bo[B]; k++)
            cnt[ember_dyn_owner(b->ids[k], W)]++;
        n += bo[B] - bo[0];
    }
    int64_t *at = cnt + W; /* next send position per owner */
    for (int32_t r = 0, acc = 0; r < W; r++) {
        at[r] = acc;
        acc += (int32_t)cnt[r];
    }
    for (int32_t i = 0; i < pt->num_features; i++) {
        const int64_t *bo = c->shape.bag_off + (int64_t)pt->features[i] * (B + 1);
        for (int64_t k = bo[0]; k < bo[B]; k++) {
            int64_t j = at[ember_dyn_owner(b->ids[k], W)]++;
            c->dyn_keys[j] = (uint64_t)b->ids[k];
            c->dyn_pos[j] = k;
        }
    }
    return n;
}

/* Owner side of one table: receive keys, resolve, reset rows.  Sets
 * dt->n and dt->slots (the received keys' slots, for commit). */
static int resolve_table(ember_collection *c, ember_ptable *pt, int64_t nsend, uint32_t step)
{
    ember_dyn_table *dt = pt->dyn;
    int32_t W = c->world->size;
    const ember_ltable *t = ltable_of(c, pt);
    int64_t *cnt = c->dyn_cnt, *rcnt = cnt + 2 * W, nrecv = nsend;
    const uint64_t *keys = c->dyn_keys;
    int st = EMBER_OK;
    if (W > 1) {
        if (ember_comm_alltoall_i64(c->world, cnt, rcnt) != EMBER_OK)
            return ember_dist_comm_failed(c);
        nrecv = 0;
        for (int32_t r = 0; r < W; r++)
            nrecv += rcnt[r];
    }
    if (ember_reserve((void **)&dt->slots, &dt->cap, nrecv + 1, sizeof *dt->slots) ||
        (W > 1 && ember_reserve((void **)&c->dyn_recv, &c->dyn_recv_cap, nrecv + 1, sizeof *c->dyn_recv)))
        st = ember_fail(c, EMBER_ENOMEM, "table '%s': out of memory for %lld keys", t->cfg.name, (long long)nrecv);
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
        return st;
    if (W > 1) {
        st = ember_dist_exchange(c, keys, cnt, c->dyn_recv, rcnt, sizeof(uint64_t));
        if (st != EMBER_OK)
            return st;
        keys = c->dyn_recv;
    }
    dt->n = nrecv;
    char err[256] = "";
    /* a table of encoded inference rows is read-only: it holds the keys it
     * was loaded with, and looks keys up as evaluation does in any forward;
     * half-precision training rows admit as fp32 ones do */
    int admits = c->training && (!pt->store->encoding || t->cfg.precision != EMBER_PRECISION_FP32);
    st = ember_dyn_resolve(&dt->d, keys, nrecv, step, admits, c->threads, dt->slots, err, sizeof err);
    if (st != EMBER_OK)
        st = ember_fail(c, st, "dynamic table '%s' %s", t->cfg.name, err);
    else if (admits)
        st = apply_resets(c, pt);
    return ember_dist_agree(c, st, NULL);
}

int ember_dyn_forward_begin(ember_collection *c, const ember_batch *b, ember_batch *out)
{
    *out = *b;
    if (c->num_dynamic == 0)
        return EMBER_OK;
    int32_t W = c->world->size;
    uint32_t step = (uint32_t)(c->stats.steps + 1);
    if (ember_reserve((void **)&c->dyn_ids, &c->dyn_ids_cap, b->num_ids + 1, sizeof *c->dyn_ids) ||
        ember_reserve((void **)&c->dyn_keys, &c->dyn_keys_cap, b->num_ids + 1, sizeof *c->dyn_keys) ||
        ember_reserve((void **)&c->dyn_pos, &c->dyn_pos_cap, b->num_ids + 1, sizeof *c->dyn_pos) ||
        ember_reserve((void **)&c->dyn_slots, &c->dyn_slots_cap, b->num_ids + 1, sizeof *c->dyn_slots))
        return ember_dist_agree(c, ember_fail(c, EMBER_ENOMEM, "out of memory for %lld keys", (long long)b->num_ids),
                                NULL);
    memcpy(c->dyn_ids, b->ids, sizeof(int64_t) * (size_t)b->num_ids);
    int st = EMBER_OK;
    for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++) {
        ember_ptable *pt = &c->ptables[p];
        if (!pt->dyn)
            continue;
        int64_t n = gather_keys(c, pt, b);
        if ((st = resolve_table(c, pt, n, step)) != EMBER_OK)
            break;
        const uint32_t *slots = pt->dyn->slots;
        if (W > 1) {
            int64_t *cnt = c->dyn_cnt, *rcnt = cnt + 2 * W;
            if ((st = ember_dist_exchange(c, pt->dyn->slots, rcnt, c->dyn_slots, cnt, sizeof(uint32_t))) != EMBER_OK)
                break;
            slots = c->dyn_slots;
        }
        int64_t j = 0;
        for (int32_t r = 0; r < W; r++)
            for (int64_t e = j + c->dyn_cnt[r]; j < e; j++)
                c->dyn_ids[c->dyn_pos[j]] =
                    slots[j] == EMBER_DYN_NONE ? EMBER_ID_UNSEEN : (int64_t)slots[j] * W + r;
    }
    out->ids = c->dyn_ids;
    return st;
}

void ember_dyn_forward_end(ember_collection *c, int status)
{
    if (c->num_dynamic == 0 || !c->training)
        return;
    uint32_t step = (uint32_t)(c->stats.steps + 1);
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_ptable *pt = &c->ptables[p];
        if (!pt->dyn || !pt->dyn->d.pending)
            continue;
        if (status == EMBER_OK) {
            ember_dyn_commit(&pt->dyn->d, pt->dyn->slots, pt->dyn->n, step, c->threads);
        } else {
            undo_resets(pt);
            ember_dyn_rollback(&pt->dyn->d);
        }
    }
}

int ember_dyn_partition_counts(ember_collection *c, const ember_batch *b, int64_t *ids, int64_t *unique)
{
    int32_t B = b->batch_size, S = c->cfg.num_shards;
    for (int32_t p = 0; p < c->num_ptables; p++) {
        const ember_ptable *pt = &c->ptables[p];
        if (!pt->dyn)
            continue;
        int32_t t = pt->tables[0];
        int64_t n = 0;
        for (int32_t i = 0; i < pt->num_features; i++) {
            const int64_t *bo = c->shape.bag_off + (int64_t)pt->features[i] * (B + 1);
            n += bo[B] - bo[0];
        }
        memset(ids + (int64_t)t * S, 0, sizeof(int64_t) * (size_t)S);
        memset(unique + (int64_t)t * S, 0, sizeof(int64_t) * (size_t)S);
        ember_keymap seen; /* the table's distinct keys of this batch */
        if (n > 0 && ember_keymap_init(&seen, n, 0.5, 0, 0x2545f4914f6cdd1dULL) != EMBER_OK)
            return ember_fail(c, EMBER_ENOMEM, "out of memory counting %lld keys", (long long)n);
        for (int32_t i = 0; i < pt->num_features && n > 0; i++) {
            const int64_t *bo = c->shape.bag_off + (int64_t)pt->features[i] * (B + 1);
            for (int32_t s = 0; s < B; s++)
                for (int64_t k = bo[s]; k < bo[s + 1]; k++) {
                    int repeat = 0; /* per-sample dedup: a key counts once per bag */
                    for (int64_t j = bo[s]; j < k && !repeat; j++)
                        repeat = b->ids[j] == b->ids[k];
                    if (repeat)
                        continue;
                    int64_t cell = (int64_t)t * S + ember_dyn_owner(b->ids[k], S);
                    ids[cell]++;
                    unique[cell] += ember_keymap_find_or_insert(&seen, (uint64_t)b->ids[k], 0) == EMBER_KEYMAP_NONE;
                }
        }
        if (n > 0)
            ember_keymap_free(&seen);
    }
    return EMBER_OK;
}
