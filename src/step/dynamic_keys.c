/*
 * dynamic_keys.c: dynamic tables on the step's spine (docs/dynamic.md): keys
 * become row ids before routing, so everything after it is unchanged.
 *
 *   requester: keys of each dynamic table, batch order -> bucket by owner
 *              (owner = mix64(key) mod W), order kept
 *   exchange keys (alltoallv; nothing to send in a world of one)
 *   owner:     resolve the received keys (ranks in order: the global batch
 *              order), reset the rows of new keys (blocks of rows, over
 *              the threads), agree on the status
 *   exchange slots back
 *   requester: id = slot * W + owner (row-wise placement read backwards),
 *              or EMBER_ID_UNSEEN for a key with no row (reads zeros)
 *
 * The forward then routes the translated ids.  When it succeeds the owners
 * commit (last step and count of every row used); when anything fails the
 * owners roll back: map, metadata and sketch as before, the reset rows
 * restored from copies taken before they were overwritten.
 *
 * Threads: the keys of every table are exchanged first, table by table;
 * then the owners resolve.  With at least as many dynamic tables as threads
 * (in memory), the tables resolve and commit side by side, one thread
 * each: admissions are serial in batch order within a table, and a table's
 * resolve reads and writes only that table, so its result is the same
 * whichever thread runs it.  Otherwise they go one after the other, each
 * on every thread (the finds, the resets and the commit are parallel).
 * Either way the tables are bit-identical for any thread count.
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
#define RESET_BLOCK 64  /* rows reset together on a direct store (one init block) */
#define RESET_AHEAD 8   /* rows whose lines are requested ahead of the reset */
#define RESET_MIN_PARALLEL 2048 /* resets below which one thread does them all */

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

/* A store whose rows and state are plain arrays (the memory tier at fp32
 * state): resets write them directly, from any thread. */
static int direct_store(const ember_store *s)
{
    return !s->staged && s->values && (s->state_floats == 0 || s->state);
}

/* Resets rows [i0, i0 + m) of the pending resolve's list, whose values and
 * state are v[i] and st[i]: the old contents copied to undo_rows, then the
 * new key's initial values (in one block) and zero state.  v and st hold
 * `ahead` >= m rows: those past m (the next block's) are only prefetched. */
static void reset_block(const ember_ltable *t, const ember_store *s, ember_dyn_table *dt, int64_t i0, int64_t m,
                        int64_t ahead, float *const *v, float *const *st)
{
    int64_t per = (int64_t)s->dim + s->state_floats;
    for (int64_t i = 0; i < m; i++) {
        if (i + RESET_AHEAD < ahead) /* the old values are copied, then overwritten */
            prefetch_row(v[i + RESET_AHEAD], st[i + RESET_AHEAD], s->dim, s->state_floats);
        float *u = dt->undo_rows + (i0 + i) * per;
        memcpy(u, v[i], sizeof(float) * (size_t)s->dim);
        if (s->state_floats) {
            memcpy(u + s->dim, st[i], sizeof(float) * (size_t)s->state_floats);
            memset(st[i], 0, sizeof(float) * (size_t)s->state_floats);
        }
    }
    ember_init_rows(t->cfg.init, t->cfg.init_value, s->dim, t->rng_key, dt->d.reset_key + i0, m, v);
}

/* Resets the rows of the keys admitted by the pending resolve: the old
 * values and state are copied to undo_rows first.  Each row is a function
 * of its key alone, so on a direct store blocks of rows go to `threads`
 * threads and the rows are the same for any thread count; other stores
 * (one acquire at a time) reset on this thread.  Messages go to err: tables
 * may reset side by side. */
static int apply_resets(const ember_collection *c, ember_ptable *pt, int threads, char *err)
{
    ember_dyn_table *dt = pt->dyn;
    ember_store *s = pt->store;
    const ember_ltable *t = ltable_of(c, pt);
    int64_t n = dt->d.resets_n, per = (int64_t)s->dim + s->state_floats;
    dt->undo_done = 0;
    if (ember_reserve((void **)&dt->undo_rows, &dt->undo_cap, n * per, sizeof(float)))
        return ember_fail_into(err, EMBER_ENOMEM, "table '%s': out of memory resetting %lld rows", t->cfg.name,
                               (long long)n);
    if (direct_store(s)) {
        int64_t blocks = (n + RESET_BLOCK - 1) / RESET_BLOCK;
        if (n < RESET_MIN_PARALLEL)
            threads = 1;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t k = 0; k < blocks; k++) {
            int64_t i0 = k * RESET_BLOCK, m = n - i0 < RESET_BLOCK ? n - i0 : RESET_BLOCK;
            int64_t ahead = n - i0 < RESET_BLOCK + RESET_AHEAD ? n - i0 : RESET_BLOCK + RESET_AHEAD;
            float *v[RESET_BLOCK + RESET_AHEAD], *st[RESET_BLOCK + RESET_AHEAD];
            for (int64_t i = 0; i < ahead; i++) {
                uint32_t r = dt->d.reset_slot[i0 + i];
                v[i] = s->values + (int64_t)r * s->dim;
                st[i] = s->state_floats ? s->state + (int64_t)r * s->state_floats : NULL;
            }
            for (int64_t i = 0; i < RESET_AHEAD && i < m; i++) /* this block's first rows */
                prefetch_row(v[i], st[i], s->dim, s->state_floats);
            reset_block(t, s, dt, i0, m, ahead, v, st);
        }
        dt->undo_done = n;
        return EMBER_OK;
    }
    for (int64_t i0 = 0; i0 < n; i0 += RESET_CHUNK) {
        int64_t m = n - i0 < RESET_CHUNK ? n - i0 : RESET_CHUNK;
        uint32_t rows[RESET_CHUNK];
        float *v[RESET_CHUNK], *st[RESET_CHUNK];
        for (int64_t i = 0; i < m; i++)
            rows[i] = dt->d.reset_slot[i0 + i];
        int rc = s->ops->acquire(s, rows, m, v, st);
        if (rc != EMBER_OK)
            return ember_fail_into(err, rc, "table '%s': %s", t->cfg.name, s->errmsg);
        reset_block(t, s, dt, i0, m, m, v, st);
        if ((rc = s->ops->release(s, rows, m, 1)) != EMBER_OK)
            return ember_fail_into(err, rc, "table '%s': %s", t->cfg.name, s->errmsg);
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

/* A world of one: the table's keys in batch order into dt->keys, their
 * positions into dt->pos (room reserved by gather_keys).  Touches only the
 * table's buffers: tables fill side by side. */
static void fill_local(const ember_collection *c, ember_ptable *pt, const ember_batch *b)
{
    ember_dyn_table *dt = pt->dyn;
    int32_t B = b->batch_size;
    int64_t j = 0;
    for (int32_t i = 0; i < pt->num_features; i++) {
        const int64_t *bo = c->shape.bag_off + (int64_t)pt->features[i] * (B + 1);
        for (int64_t k = bo[0]; k < bo[B]; k++, j++) {
            dt->keys[j] = (uint64_t)b->ids[k];
            dt->pos[j] = k;
        }
    }
}

/* Keys of physical table pt's features in batch order into dt->keys,
 * bucketed by owner (order kept): dt->pos[j] = the batch position of the
 * j-th key sent; counts in dt->cnt[0..W).  Sets dt->n to the key count.
 * In a world of one only the room is made: fill_local copies the keys with
 * the resolve. */
static int gather_keys(ember_collection *c, ember_ptable *pt, const ember_batch *b)
{
    ember_dyn_table *dt = pt->dyn;
    int32_t B = b->batch_size, W = c->world->size;
    int64_t n = 0;
    for (int32_t i = 0; i < pt->num_features; i++) {
        const int64_t *bo = c->shape.bag_off + (int64_t)pt->features[i] * (B + 1);
        n += bo[B] - bo[0];
    }
    if (ember_reserve((void **)&dt->cnt, &dt->cnt_cap, 4 * (int64_t)W, sizeof *dt->cnt) ||
        ember_reserve((void **)&dt->keys, &dt->keys_cap, n + 1, sizeof *dt->keys) ||
        ember_reserve((void **)&dt->pos, &dt->pos_cap, n + 1, sizeof *dt->pos))
        return EMBER_ENOMEM;
    int64_t *cnt = dt->cnt;
    memset(cnt, 0, sizeof(int64_t) * 4 * (size_t)W);
    dt->n = n;
    if (W == 1) { /* one owner: the keys in batch order (fill_local) */
        cnt[0] = n;
        return EMBER_OK;
    }
    for (int32_t i = 0; i < pt->num_features; i++) {
        const int64_t *bo = c->shape.bag_off + (int64_t)pt->features[i] * (B + 1);
        for (int64_t k = bo[0]; k < bo[B]; k++)
            cnt[ember_dyn_owner(b->ids[k], W)]++;
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
            dt->keys[j] = (uint64_t)b->ids[k];
            dt->pos[j] = k;
        }
    }
    return EMBER_OK;
}

/* Requester and owner side of one table before its resolve (collective):
 * its keys to their owners.  Sets dt->n to the keys received (in dt->recv,
 * or dt->keys in a world of one) and room for their slots. */
static int send_keys(ember_collection *c, ember_ptable *pt, const ember_batch *b)
{
    ember_dyn_table *dt = pt->dyn;
    int32_t W = c->world->size;
    const ember_ltable *t = ltable_of(c, pt);
    int st = gather_keys(c, pt, b);
    int64_t nrecv = dt->n;
    if (st == EMBER_OK && W > 1) {
        int64_t *cnt = dt->cnt, *rcnt = cnt + 2 * W;
        if (ember_comm_alltoall_i64(c->world, cnt, rcnt) != EMBER_OK)
            return ember_dist_comm_failed(c);
        nrecv = 0;
        for (int32_t r = 0; r < W; r++)
            nrecv += rcnt[r];
    }
    if (st != EMBER_OK || ember_reserve((void **)&dt->slots, &dt->cap, nrecv + 1, sizeof *dt->slots) ||
        (W > 1 && ember_reserve((void **)&dt->recv, &dt->recv_cap, nrecv + 1, sizeof *dt->recv)))
        st = ember_fail(c, EMBER_ENOMEM, "table '%s': out of memory for %lld keys", t->cfg.name, (long long)nrecv);
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
        return st;
    if (W > 1) {
        int64_t *cnt = dt->cnt, *rcnt = cnt + 2 * W;
        st = ember_dist_exchange(c, dt->keys, cnt, dt->recv, rcnt, sizeof(uint64_t));
        if (st != EMBER_OK)
            return st;
    }
    dt->n = nrecv;
    return EMBER_OK;
}

/* Owner side of one table: resolve the received keys, reset the rows of
 * the new ones, on `threads` threads.  Touches only this table (its index,
 * store, buffers; the message to dt->err), so tables may run side by side. */
static int resolve_local(const ember_collection *c, ember_ptable *pt, uint32_t step, int threads)
{
    ember_dyn_table *dt = pt->dyn;
    const ember_ltable *t = ltable_of(c, pt);
    const uint64_t *keys = c->world->size > 1 ? dt->recv : dt->keys;
    char err[256] = "";
    /* a table of encoded inference rows is read-only: it holds the keys it
     * was loaded with, and looks keys up as evaluation does in any forward;
     * half-precision training rows admit as fp32 ones do */
    int admits = c->training && (!pt->store->encoding || t->cfg.precision != EMBER_PRECISION_FP32);
    int st = ember_dyn_resolve(&dt->d, keys, dt->n, step, admits, threads, dt->slots, err, sizeof err);
    if (st != EMBER_OK)
        return ember_fail_into(dt->err, st, "dynamic table '%s' %s", t->cfg.name, err);
    return admits ? apply_resets(c, pt, threads, dt->err) : EMBER_OK;
}

/* The requester's ids of a table: slot * W + owner, or EMBER_ID_UNSEEN.
 * Writes only the table's own batch positions. */
static void translate(ember_collection *c, const ember_dyn_table *dt, const uint32_t *slots)
{
    int32_t W = c->world->size;
    int64_t j = 0;
    for (int32_t r = 0; r < W; r++)
        for (int64_t e = j + dt->cnt[r]; j < e; j++)
            c->dyn_ids[dt->pos[j]] = slots[j] == EMBER_DYN_NONE ? EMBER_ID_UNSEEN : (int64_t)slots[j] * W + r;
}

/* Step 2 for one table (no communication): in a world of one its keys are
 * copied and its ids translated here too, so that tables side by side do
 * that in parallel as well. */
static int own_table(ember_collection *c, ember_ptable *pt, const ember_batch *b, uint32_t step, int threads)
{
    int local = c->world->size == 1;
    if (local)
        fill_local(c, pt, b);
    int st = resolve_local(c, pt, step, threads);
    if (st == EMBER_OK && local)
        translate(c, pt->dyn, pt->dyn->slots);
    return st;
}

/* Whether the tables resolve side by side, one thread each, rather than
 * one after the other on every thread: with at least as many dynamic
 * tables as threads, none of them on a staged store (whose acquire is not
 * thread-safe).  Each table's resolve is a function of its own keys, so
 * the tables are the same either way. */
static int tables_side_by_side(const ember_collection *c)
{
    if (c->threads < 2 || c->num_dynamic < c->threads)
        return 0;
    for (int32_t p = 0; p < c->num_ptables; p++)
        if (c->ptables[p].dyn && c->ptables[p].store->staged)
            return 0;
    return 1;
}

int ember_dyn_forward_begin(ember_collection *c, const ember_batch *b, ember_batch *out)
{
    *out = *b;
    if (c->num_dynamic == 0)
        return EMBER_OK;
    int32_t W = c->world->size, np = c->num_ptables;
    uint32_t step = (uint32_t)(c->stats.steps + 1);
    if (ember_reserve((void **)&c->dyn_ids, &c->dyn_ids_cap, b->num_ids + 1, sizeof *c->dyn_ids) ||
        ember_reserve((void **)&c->dyn_slots, &c->dyn_slots_cap, b->num_ids + 1, sizeof *c->dyn_slots))
        return ember_dist_agree(c, ember_fail(c, EMBER_ENOMEM, "out of memory for %lld keys", (long long)b->num_ids),
                                NULL);
    for (int32_t f = 0; f < b->num_features; f++) { /* fixed tables' ids as they are; translate writes the rest */
        const int64_t *bo = c->shape.bag_off + (int64_t)f * (b->batch_size + 1);
        if (!c->ptables[c->features[f].ptable].dyn)
            memcpy(c->dyn_ids + bo[0], b->ids + bo[0], sizeof(int64_t) * (size_t)(bo[b->batch_size] - bo[0]));
    }
    int st = EMBER_OK;
    /* 1: every table's keys to their owners (collective, table by table) */
    for (int32_t p = 0; p < np; p++)
        if (c->ptables[p].dyn && (st = send_keys(c, &c->ptables[p], b)) != EMBER_OK)
            return st;
    /* 2: the owners resolve (no communication) */
    for (int32_t p = 0; p < np; p++)
        if (c->ptables[p].dyn)
            c->ptables[p].dyn->status = 1; /* not run (errors are negative) */
    if (tables_side_by_side(c)) {
        int nt = c->threads < c->num_dynamic ? c->threads : c->num_dynamic;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (int32_t p = 0; p < np; p++)
            if (c->ptables[p].dyn)
                c->ptables[p].dyn->status = own_table(c, &c->ptables[p], b, step, 1);
    } else {
        for (int32_t p = 0; p < np && st == EMBER_OK; p++)
            if (c->ptables[p].dyn)
                st = c->ptables[p].dyn->status = own_table(c, &c->ptables[p], b, step, c->threads);
    }
    st = EMBER_OK; /* the first table that failed, in table order */
    for (int32_t p = 0; p < np && st == EMBER_OK; p++) {
        const ember_dyn_table *dt = c->ptables[p].dyn;
        if (dt && dt->status < 0)
            st = ember_fail(c, dt->status, "%s", dt->err);
    }
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
        return st; /* ember_dyn_forward_end rolls every resolved table back */
    /* 3: slots back to the requesters; keys become row ids (a world of
     * one translated them in step 2) */
    for (int32_t p = 0; p < np && W > 1; p++) {
        ember_dyn_table *dt = c->ptables[p].dyn;
        if (!dt)
            continue;
        int64_t *cnt = dt->cnt, *rcnt = cnt + 2 * W;
        if ((st = ember_dist_exchange(c, dt->slots, rcnt, c->dyn_slots, cnt, sizeof(uint32_t))) != EMBER_OK)
            return st;
        translate(c, dt, c->dyn_slots);
    }
    out->ids = c->dyn_ids;
    return EMBER_OK;
}

void ember_dyn_forward_end(ember_collection *c, int status)
{
    if (c->num_dynamic == 0 || !c->training)
        return;
    uint32_t step = (uint32_t)(c->stats.steps + 1);
    int32_t np = c->num_ptables;
    if (status == EMBER_OK && tables_side_by_side(c)) { /* each table's commit is its own */
        int nt = c->threads < c->num_dynamic ? c->threads : c->num_dynamic;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (int32_t p = 0; p < np; p++) {
            ember_dyn_table *dt = c->ptables[p].dyn;
            if (dt && dt->d.pending)
                ember_dyn_commit(&dt->d, dt->slots, dt->n, step, 1);
        }
        return;
    }
    for (int32_t p = 0; p < np; p++) {
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
