/*
 * tier_step.c: the SSD tier on the spine of a step (docs/tiers.md):
 *
 *   ember_forward:  begin (last step's pins released) -> route -> stage the
 *                   rows each store must serve (translating row -> slot in
 *                   the route the kernels read) -> pool
 *   ember_prefetch: route the announced batch's ids to their owners ->
 *                   announce them to each SSD store (background reads)
 *   ember_backward: mark the pinned rows dirty -> fused optimizer on slots
 *   ember_save:     flush dirty rows (the checkpoint reads every row anyway)
 *
 * A route that was staged holds slots, so its sort keys (built from rows)
 * are dropped and rebuilt by the backward from the slots.
 */
#include <stdlib.h>
#include <string.h>

#include "core/collection.h"
#include "dist/dist.h"
#include "dist/shard.h"
#include "prep/route.h"
#include "tier/tier.h"

void ember_tier_begin(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++)
        if (c->ptables[p].store->staged)
            c->ptables[p].store->ops->begin(c->ptables[p].store, c->stats.steps);
}

int ember_tier_stage(ember_collection *c, ember_ptable *pt, const uint32_t *rows, uint32_t *slots, int64_t n)
{
    ember_store *s = pt->store;
    if (!s->staged)
        return EMBER_OK;
    int st = s->ops->stage(s, rows, slots, n);
    return st == EMBER_OK ? EMBER_OK : ember_fail(c, st, "%s", s->errmsg);
}

int ember_tier_stage_route(ember_collection *c, ember_ptable *pt, ember_route *r)
{
    if (!pt->store->staged)
        return EMBER_OK;
    r->nkeys = 0; /* keys and sources were built from rows */
    r->sorted_all = 0;
    r->sources_ready = 0;
    return ember_tier_stage(c, pt, r->row, r->row, r->n);
}

void ember_tier_mark_dirty(ember_collection *c, ember_ptable *pt)
{
    (void)c;
    if (pt->store->staged)
        pt->store->ops->mark_dirty(pt->store);
}

int ember_tier_flush(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_store *s = c->ptables[p].store;
        if (s->staged && s->ops->flush(s) != EMBER_OK)
            return ember_fail(c, EMBER_EIO, "%s", s->errmsg);
    }
    return EMBER_OK;
}

/* ------------------------------------------------------------ prefetch */

/* A table that takes announcements.  Not a dynamic one: its keys become
 * rows only when a step resolves them, so its cache runs as LFU. */
static int lookahead_table(const ember_ptable *pt)
{
    return pt->storage == EMBER_STORAGE_SSD && pt->policy == EMBER_CACHE_LOOKAHEAD && !pt->dyn;
}

/* (ptable << 32 | local row) of every valid id of a lookahead table, per
 * destination rank: counts into cnt[W] (zeroed by the caller), and with out
 * the pairs in destination order (cnt[W..2W) is scratch). */
static int64_t collect(const ember_collection *c, const ember_batch *b, int64_t *cnt, uint64_t *out)
{
    int32_t W = c->world->size;
    int64_t at = 0, total = 0;
    for (int pass = 0; pass < (out ? 2 : 1); pass++) {
        int64_t *pos = cnt + W; /* pass 1: write cursors */
        if (pass == 1)
            for (int32_t d = 0; d < W; d++)
                pos[d] = (d ? pos[d - 1] + cnt[d - 1] : 0);
        at = 0;
        for (int32_t f = 0; f < c->cfg.num_features; f++) {
            const ember_lfeature *fe = &c->features[f];
            const ember_ptable *pt = &c->ptables[fe->ptable];
            int64_t len = 0;
            for (int32_t s = 0; s < b->batch_size; s++)
                len += b->lengths[(int64_t)f * b->batch_size + s];
            if (!lookahead_table(pt)) {
                at += len;
                continue;
            }
            int64_t rows = c->tables[fe->table].cfg.rows;
            for (int64_t i = at; i < at + len; i++) {
                int64_t id = b->ids[i];
                if (id < 0 || id >= rows)
                    continue; /* a hint: ember_forward reports bad ids */
                uint32_t phys = (uint32_t)(fe->offset + id);
                int32_t owner = ember_shard_owner(pt, W, phys);
                uint64_t key = (uint64_t)fe->ptable << 32 | ember_shard_local(pt, W, phys);
                for (int32_t d = owner < 0 ? 0 : owner; d < (owner < 0 ? W : owner + 1); d++) {
                    if (pass == 0)
                        cnt[d]++, total++;
                    else
                        out[pos[d]++] = key;
                }
            }
            at += len;
        }
    }
    return total;
}

static int check_batch(ember_collection *c, const ember_batch *b)
{
    if (!b || b->num_features != c->cfg.num_features || b->batch_size < 0 || (b->batch_size > 0 && !b->lengths))
        return ember_fail(c, EMBER_EINPUT, "ember_prefetch: the batch does not match the collection's %d features",
                          c->cfg.num_features);
    int64_t n = 0;
    for (int64_t i = 0; i < (int64_t)b->num_features * b->batch_size; i++) {
        if (b->lengths[i] < 0)
            return ember_fail(c, EMBER_EINPUT, "ember_prefetch: negative length at %lld", (long long)i);
        n += b->lengths[i];
    }
    if (n != b->num_ids || (n > 0 && !b->ids))
        return ember_fail(c, EMBER_EINPUT, "ember_prefetch: lengths sum to %lld, num_ids is %lld", (long long)n,
                          (long long)b->num_ids);
    return EMBER_OK;
}

/* Hands the received pairs to each lookahead store (sorted by ptable, so
 * each store's rows are one run). */
static int announce_all(ember_collection *c, uint64_t *pairs, int64_t n, int64_t seq)
{
    ember_prefetch_scratch *ps = &c->prefetch;
    if (ember_reserve((void **)&ps->tmp, &ps->tmp_cap, n + 1, sizeof(uint64_t)) ||
        ember_reserve((void **)&ps->rows, &ps->rows_cap, n + 1, sizeof(uint32_t)))
        return ember_fail(c, EMBER_ENOMEM, "ember_prefetch: out of memory for %lld ids", (long long)n);
    uint64_t *tmp = ps->tmp;
    uint32_t *rows = ps->rows;
    int hi = 32 + (64 - __builtin_clzll((unsigned long long)c->num_ptables));
    ember_radix_sort(pairs, tmp, c->sort_hist, n, 0, hi, c->threads);
    int st = EMBER_OK;
    for (int64_t i = 0; i < n && st == EMBER_OK;) {
        int32_t p = (int32_t)(pairs[i] >> 32);
        int64_t m = 0;
        for (; i < n && (int32_t)(pairs[i] >> 32) == p; i++)
            if (m == 0 || rows[m - 1] != (uint32_t)pairs[i])
                rows[m++] = (uint32_t)pairs[i];
        ember_store *s = c->ptables[p].store;
        if (s->staged && s->ops->announce(s, rows, m, seq) != EMBER_OK)
            st = ember_fail(c, EMBER_EIO, "%s", s->errmsg);
    }
    return st;
}

int32_t ember_prefetch_depth(const ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++)
        if (lookahead_table(&c->ptables[p]))
            return c->cfg.lookahead;
    return 0;
}

int ember_prefetch(ember_collection *c, const ember_batch *b)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if (ember_prefetch_depth(c) == 0)
        return EMBER_OK; /* the same answer on every rank: no messages */
    /* the step that will train on it: after the pending one and after the
     * batches announced before it */
    int64_t seq = c->stats.steps + (c->routed ? 1 : 0);
    if (seq < c->next_announce)
        seq = c->next_announce;
    c->next_announce = seq + 1;
    /* grow-only scratch on the collection: nothing is allocated per step */
    int32_t W = c->world->size;
    ember_prefetch_scratch *ps = &c->prefetch;
    int st = check_batch(c, b);
    int64_t *cnt = ps->cnt, total = 0, got = 0; /* [6 * world], made by create */
    if (st == EMBER_OK) {
        memset(cnt, 0, sizeof(int64_t) * 6 * (size_t)W);
        total = collect(c, b, cnt, NULL); /* counts */
        if (ember_reserve((void **)&ps->out, &ps->out_cap, total + 1, sizeof(uint64_t)))
            st = ember_fail(c, EMBER_ENOMEM, "ember_prefetch: out of memory for %lld ids", (long long)total);
        else {
            memset(cnt, 0, sizeof(int64_t) * (size_t)W);
            collect(c, b, cnt, ps->out);
        }
    }
    if (W == 1)
        return st == EMBER_OK ? announce_all(c, ps->out, total, seq) : st;
    /* counts travel first; the world agrees before the pairs do */
    int64_t *scnt = cnt, *rcnt = cnt + 2 * W, *sdsp = cnt + 3 * W, *rdsp = cnt + 4 * W;
    if (st != EMBER_OK)
        memset(scnt, 0, sizeof(int64_t) * (size_t)W);
    if (ember_comm_alltoall_i64(c->world, scnt, rcnt) != EMBER_OK) {
        c->panicked = 1;
        return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
    }
    for (int32_t d = 0; d < W; d++)
        got += rcnt[d];
    if (st == EMBER_OK && ember_reserve((void **)&ps->in, &ps->in_cap, got + 1, sizeof(uint64_t)))
        st = ember_fail(c, EMBER_ENOMEM, "ember_prefetch: out of memory for %lld ids", (long long)got);
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
        return st;
    for (int32_t d = 0; d < W; d++) {
        sdsp[d] = (d ? sdsp[d - 1] + scnt[d - 1] : 0);
        rdsp[d] = (d ? rdsp[d - 1] + rcnt[d - 1] : 0);
    }
    for (int32_t d = 0; d < W; d++) { /* bytes */
        scnt[d] *= 8, sdsp[d] *= 8, rcnt[d] *= 8, rdsp[d] *= 8;
    }
    if (ember_comm_alltoallv(c->world, ps->out, scnt, sdsp, ps->in, rcnt, rdsp) != EMBER_OK) {
        c->panicked = 1;
        return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
    }
    return ember_dist_agree(c, announce_all(c, ps->in, got, seq), NULL);
}
