/*
 * prefetch.c: ember_prefetch, the lookahead announcements of the SSD tier
 * (docs/tiers.md): route the announced batch's ids to their owners (a
 * dynamic table's keys: found in the owner's key map), then announce the
 * rows to each SSD store, which may read them in the background.
 *
 * The announced batch goes to each rank as one block of 64-bit words:
 *
 *   k_1 .. k_D     how many keys of each dynamic lookahead table follow
 *                  (D of them, in physical-table order; none when D = 0)
 *   pairs          (ptable << 32 | local row) of the fixed tables' ids
 *   keys           of dynamic table 1, then 2, ... D
 *
 * A fixed table's id becomes its owner and local row at the sender.  A key
 * becomes a row only at its owner (mix64(key) mod W, as the step routes it),
 * which finds it in its key map without changing anything; a key without a
 * row is skipped (its step will admit it and reset the slot).  Either way an
 * announcement is a hint: a slot announced and then reused for another key
 * before its step only makes the cache choose worse; no result changes.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/collection.h"
#include "collection/shard.h"
#include "core/reserve.h"
#include "dyn/dyn.h"
#include "exchange/exchange.h"
#include "prep/route.h"

/* A table that takes announcements. */
static int lookahead_table(const ember_ptable *pt)
{
    return pt->storage == EMBER_STORAGE_SSD && pt->policy == EMBER_CACHE_LOOKAHEAD;
}

/* The sections of a block: ps->section[p] = 0 (pairs), 1 + j (the keys of
 * dynamic table j) or -1 (no announcements) for each physical table p;
 * ps->section[P + j] = the physical table of dynamic section j. */
static int sections(ember_collection *c)
{
    ember_prefetch_scratch *ps = &c->prefetch;
    int32_t P = c->num_ptables;
    if (ember_reserve((void **)&ps->section, &ps->section_cap, 2 * (int64_t)P + 1, sizeof(int32_t)))
        return ember_fail(c, EMBER_ENOMEM, "ember_prefetch: out of memory");
    ps->num_sections = 1;
    for (int32_t p = 0; p < P; p++) {
        const ember_ptable *pt = &c->ptables[p];
        ps->section[p] = !lookahead_table(pt) ? -1 : pt->dyn ? ps->num_sections++ : 0;
        if (ps->section[p] > 0)
            ps->section[P + ps->section[p] - 1] = p;
    }
    return EMBER_OK;
}

/* Counts the ids of lookahead tables into cnt[d * S + s] (destination d,
 * section s), or with out writes them at the cursors pos[d * S + s]. */
static void collect(const ember_collection *c, const ember_batch *b, int64_t *cnt, int64_t *pos, uint64_t *out)
{
    int32_t W = c->world->size, S = c->prefetch.num_sections;
    int64_t at = 0;
    for (int32_t f = 0; f < c->cfg.num_features; f++) {
        const ember_lfeature *fe = &c->features[f];
        const ember_ptable *pt = &c->ptables[fe->ptable];
        int32_t s = c->prefetch.section[fe->ptable];
        int64_t len = 0;
        for (int32_t i = 0; i < b->batch_size; i++)
            len += b->lengths[(int64_t)f * b->batch_size + i];
        if (s > 0) { /* keys, to their owners as they are */
            for (int64_t i = at; i < at + len; i++) {
                int64_t x = (int64_t)ember_dyn_owner(b->ids[i], W) * S + s;
                if (out)
                    out[pos[x]++] = (uint64_t)b->ids[i];
                else
                    cnt[x]++;
            }
        } else if (s == 0) { /* rows, as their owners hold them */
            int64_t rows = c->tables[fe->table].cfg.rows;
            for (int64_t i = at; i < at + len; i++) {
                int64_t id = b->ids[i];
                if (id < 0 || id >= rows)
                    continue; /* a hint: ember_forward reports bad ids */
                uint32_t phys = (uint32_t)(fe->offset + id);
                int32_t owner = ember_shard_owner(pt, W, phys); /* < 0: every rank holds it */
                uint64_t pair = (uint64_t)fe->ptable << 32 | ember_shard_local(pt, W, phys);
                for (int32_t d = owner < 0 ? 0 : owner; d < (owner < 0 ? W : owner + 1); d++) {
                    if (out)
                        out[pos[(int64_t)d * S]++] = pair;
                    else
                        cnt[(int64_t)d * S]++;
                }
            }
        }
        at += len;
    }
}

/* The blocks of the batch for every rank, in rank order, into ps->out;
 * words[d] = the length of block d. */
static int pack(ember_collection *c, const ember_batch *b, int64_t *words)
{
    ember_prefetch_scratch *ps = &c->prefetch;
    int32_t W = c->world->size, S = ps->num_sections;
    int64_t WS = (int64_t)W * S, total = 0;
    if (ember_reserve((void **)&ps->sec_counts, &ps->sec_counts_cap, 2 * WS, sizeof(int64_t)))
        return ember_fail(c, EMBER_ENOMEM, "ember_prefetch: out of memory");
    int64_t *cnt = ps->sec_counts, *pos = ps->sec_counts + WS;
    memset(cnt, 0, sizeof(int64_t) * (size_t)WS);
    collect(c, b, cnt, NULL, NULL);
    for (int32_t d = 0; d < W; d++) {
        words[d] = S - 1;
        for (int32_t s = 0; s < S; s++)
            words[d] += cnt[(int64_t)d * S + s];
        total += words[d];
    }
    if (ember_reserve((void **)&ps->out, &ps->out_cap, total + 1, sizeof(uint64_t)))
        return ember_fail(c, EMBER_ENOMEM, "ember_prefetch: out of memory for %lld ids", (long long)total);
    int64_t base = 0;
    for (int32_t d = 0; d < W; base += words[d++]) {
        const int64_t *k = cnt + (int64_t)d * S;
        int64_t *p = pos + (int64_t)d * S;
        p[0] = base + S - 1;
        for (int32_t s = 1; s < S; s++) {
            ps->out[base + s - 1] = (uint64_t)k[s];
            p[s] = p[s - 1] + k[s - 1];
        }
    }
    collect(c, b, NULL, pos, ps->out);
    return EMBER_OK;
}

/* Turns the blocks in buf (from each rank in order, words[r] long) into
 * (ptable, local row) pairs, in place: the pairs as they came, and the keys
 * that hold a slot in their table's key map (find only) as (ptable, slot);
 * a slot is the row-wise table's local row.  *n = the pairs. */
static int unpack(ember_collection *c, uint64_t *buf, const int64_t *words, int32_t nsrc, int64_t *n)
{
    ember_prefetch_scratch *ps = &c->prefetch;
    int32_t D = ps->num_sections - 1;
    int64_t total = 0, m = 0, at = 0;
    for (int32_t r = 0; r < nsrc; r++)
        total += words[r];
    if (ember_reserve((void **)&ps->rows, &ps->rows_cap, total + 1, sizeof(uint32_t)))
        return ember_fail(c, EMBER_ENOMEM, "ember_prefetch: out of memory for %lld ids", (long long)total);
    int64_t *k = ps->sec_counts; /* a block's key counts, read before the pairs move over them */
    for (int32_t r = 0; r < nsrc; at += words[r++]) {
        int64_t npairs = words[r] - D;
        for (int32_t j = 0; j < D; j++)
            npairs -= (k[j] = (int64_t)buf[at + j]);
        memmove(buf + m, buf + at + D, sizeof(uint64_t) * (size_t)npairs);
        m += npairs;
        for (int64_t j = 0, kp = at + D + npairs; j < D; kp += k[j++]) {
            int32_t p = ps->section[c->num_ptables + j];
            ember_dyn_find(&c->ptables[p].dyn->d, buf + kp, k[j], c->threads, ps->rows);
            for (int64_t i = 0; i < k[j]; i++) /* m <= kp + i: keys are read before they are overwritten */
                if (ps->rows[i] != EMBER_DYN_NONE)
                    buf[m++] = (uint64_t)p << 32 | ps->rows[i];
        }
    }
    *n = m;
    return EMBER_OK;
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

/* Hands the pairs to each lookahead store (sorted by ptable, so each
 * store's rows are one run).  Every lookahead store hears of every batch,
 * also one that has no rows there (a dynamic table's keys none of which
 * holds a slot yet, a batch without ids for the table): a store numbers
 * its window by the announcements it gets, and one it missed would make
 * the next look out of turn, so the store would drop the batches it holds,
 * the next step's among them; and an announcement is also when the store
 * reads the next step's missing rows. */
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
    int64_t i = 0;
    for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK; p++) {
        int64_t m = 0;
        for (; i < n && (int32_t)(pairs[i] >> 32) == p; i++)
            if (m == 0 || rows[m - 1] != (uint32_t)pairs[i])
                rows[m++] = (uint32_t)pairs[i];
        ember_store *s = c->ptables[p].store;
        if (lookahead_table(&c->ptables[p]) && s->staged && s->ops->announce(s, rows, m, seq) != EMBER_OK)
            st = ember_fail(c, EMBER_EIO, "%s", s->errmsg);
    }
    return st;
}

int32_t ember_prefetch_depth(const ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++)
        if (lookahead_table(&c->ptables[p]))
            return c->window.now;
    return 0;
}

int32_t ember_prefetch_depth_max(const ember_collection *c)
{
    int32_t d = ember_prefetch_depth(c);
    return d > 0 && c->window.max > 0 ? c->window.max : d;
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
    int64_t *scnt = ps->cnt, *rcnt = scnt + W; /* [6 * world], made by create: words, */
    int64_t *sbytes = scnt + 2 * W, *sdsp = scnt + 3 * W, *rbytes = scnt + 4 * W, *rdsp = scnt + 5 * W; /* bytes */
    int64_t n = 0, got = 0;
    int st = check_batch(c, b);
    if (st == EMBER_OK && (st = sections(c)) == EMBER_OK)
        st = pack(c, b, scnt);
    if (W == 1) {
        if (st == EMBER_OK)
            st = unpack(c, ps->out, scnt, 1, &n);
        return st == EMBER_OK ? announce_all(c, ps->out, n, seq) : st;
    }
    /* counts travel first; the world agrees before the blocks do */
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
        sbytes[d] = 8 * scnt[d];
        rbytes[d] = 8 * rcnt[d];
        sdsp[d] = d ? sdsp[d - 1] + sbytes[d - 1] : 0;
        rdsp[d] = d ? rdsp[d - 1] + rbytes[d - 1] : 0;
    }
    if (ember_comm_alltoallv(c->world, ps->out, sbytes, sdsp, ps->in, rbytes, rdsp) != EMBER_OK) {
        c->panicked = 1;
        return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
    }
    st = unpack(c, ps->in, rcnt, W, &n);
    return ember_dist_agree(c, st == EMBER_OK ? announce_all(c, ps->in, n, seq) : st, NULL);
}
