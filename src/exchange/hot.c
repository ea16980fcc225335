/*
 * hot.c: hot-row replication (hot.h; docs/distributed.md, "Hot rows").
 *
 * The copies: every rank holds values and state of the n hot rows, in
 * ascending row order.  A reload gathers them from their owners (each rank
 * sends the hot rows it owns to every rank, one alltoallv).
 *
 * The backward: this rank's occurrences of hot rows, in entry order per
 * row (a counting sort by hot index keeps entry order), are summed the way
 * optim/grad.c sums a row, g += scale * d, each element in sequence.  Rank 0
 * starts from zeros, sends its sums to rank 1, which continues them with
 * its own occurrences, and so on to rank W-1; the totals then go on round
 * the ring, W-1 to 0 to 1 ... to W-2.  The global batch is the ranks'
 * local batches in rank order, so each element sees the same additions in
 * the same order as in one process.  2(W-1) hops of n * (dim + 1) floats,
 * one after the other, at most two sent per rank: the price of exact sums,
 * paid once per step whatever the batch.
 *
 * The refresh (ember_refresh_hot_rows): owners count the entries they
 * served per row, every rank counts its occurrences of the hot rows; the
 * ranks gather each one's top candidates and the hot rows' counts, and
 * every rank picks the same K rows (most occurrences, then lowest row).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collection/shard.h"
#include "comm/comm.h"
#include "core/reserve.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "exchange/xchg.h"
#include "optim/grad.h"
#include "quant/round.h"

/* 1 when the table's rows are half precision: the copies then hold the
 * halves' values (exact in fp32), and every update is rounded as the
 * owner's row is, with the same bits, on every rank. */
static int half_rows(const ember_ptable *pt) { return ember_enc_half(pt->store->encoding); }

/* The same for half optimizer state (store.h's state_enc; its qstate is
 * NULL on a rank that holds no rows): the copies hold its values, rounded
 * as the owner rounds its state. */
static uint16_t *half_state_of(const ember_ptable *pt, uint32_t local)
{
    return pt->store->qstate + (int64_t)local * pt->store->state_floats;
}

int ember_hot_create(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_ptable *pt = &c->ptables[p];
        int64_t k = 0;
        for (int32_t i = 0; i < pt->num_tables; i++)
            k += c->tables[pt->tables[i]].cfg.hot_rows;
        if (k == 0)
            continue;
        if (k > pt->rows)
            k = pt->rows;
        ember_hot *h = calloc(1, sizeof *h);
        int32_t dim = pt->dim, sf = pt->store->state_floats;
        if (h) {
            h->cap = k;
            h->rows = malloc(sizeof(uint32_t) * (size_t)k);
            h->values = malloc(sizeof(float) * (size_t)(k * dim));
            h->state = malloc(sizeof(float) * (size_t)(k * sf + 1));
            h->slot = malloc(sizeof(int32_t) * (size_t)k);
            h->counts = calloc((size_t)pt->local_rows + 1, sizeof(uint32_t));
            h->hot_counts = calloc((size_t)k + 1, sizeof(uint64_t)); /* + 1: the refresh sends n + 1 */
            h->g = malloc(sizeof(float) * (size_t)(2 * k * (dim + 1))); /* sums, then what arrives */
            h->touched = malloc(sizeof(int64_t) * (size_t)k);
            h->at = malloc(sizeof(int64_t) * (size_t)(k + 1));
            uint32_t size = 16;
            while (size < 4 * k)
                size *= 2;
            h->mask = size - 1;
            h->table = malloc(sizeof(uint32_t) * 2 * (size_t)size);
        }
        if (!h || !h->rows || !h->values || !h->state || !h->slot || !h->counts || !h->hot_counts || !h->g ||
            !h->touched || !h->at || !h->table) {
            ember_hot_free(h);
            return ember_fail_create(EMBER_ENOMEM, "out of memory for the hot rows of table '%s'",
                                     c->tables[pt->tables[0]].cfg.name);
        }
        for (int64_t i = 0; i < k; i++)
            h->slot[i] = -1;
        pt->hot = h;
    }
    return EMBER_OK;
}

void ember_hot_free(ember_hot *h)
{
    if (!h)
        return;
    free(h->rows);
    free(h->values);
    free(h->state);
    free(h->slot);
    free(h->counts);
    free(h->hot_counts);
    free(h->g);
    free(h->touched);
    free(h->keys);
    free(h->at);
    free(h->table);
    free(h);
}

int64_t ember_hot_bytes(const ember_ptable *pt)
{
    const ember_hot *h = pt->hot;
    if (!h)
        return 0;
    int64_t per = 2 * (int64_t)pt->dim + 1 + pt->store->state_floats; /* copies and sums */
    return h->cap * (per * 4 + 4 + 4 + 8 + 8 + 8) + h->keys_cap * 8 + pt->local_rows * 4 +
           ((int64_t)h->mask + 1) * 8;
}

/* Counts and displacements (bytes) of an exchange in which every rank sends
 * the same block of `mine` bytes and receives each rank's from[s] bytes. */
static void gather_counts(int32_t W, int64_t mine, const int64_t *from, int64_t *cnt)
{
    int64_t at = 0;
    for (int32_t s = 0; s < W; s++) {
        cnt[s] = mine;
        cnt[W + s] = 0;
        cnt[2 * W + s] = from[s];
        cnt[3 * W + s] = at;
        at += from[s];
    }
}

int ember_hot_reload(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    ember_hot *h = pt->hot;
    if (!h || h->n == 0)
        return EMBER_OK;
    int32_t W = c->world->size, me = c->world->rank, dim = pt->dim, sf = pt->store->state_floats;
    int64_t per = dim + sf, *from = calloc((size_t)W * 5, sizeof(int64_t));
    float *out = malloc(sizeof(float) * (size_t)(h->n * per + 1)), *in = malloc(sizeof(float) * (size_t)(h->n * per + 1));
    int st = from && out && in ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory for %lld hot rows", (long long)h->n);
    if ((st = ember_dist_agree(c, st, NULL)) == EMBER_OK) {
        int64_t mine = 0;
        for (int64_t i = 0; i < h->n; i++) {
            int32_t o = ember_shard_owner(pt, W, h->rows[i]);
            from[o] += per * 4;
            if (o != me)
                continue;
            uint32_t l = ember_shard_local(pt, W, h->rows[i]);
            if (half_rows(pt))
                ember_half_decode_row(pt->store->encoding, dim, (const uint16_t *)pt->store->qrows + (int64_t)l * dim,
                                      out + mine * per);
            else
                memcpy(out + mine * per, pt->store->values + (int64_t)l * dim, sizeof(float) * (size_t)dim);
            if (sf && pt->store->state_enc)
                ember_half_decode_row(pt->store->state_enc, sf, half_state_of(pt, l), out + mine * per + dim);
            else if (sf)
                memcpy(out + mine * per + dim, pt->store->state + (int64_t)l * sf, sizeof(float) * (size_t)sf);
            mine++;
        }
        int64_t *cnt = from + W;
        gather_counts(W, mine * per * 4, from, cnt);
        if (ember_comm_alltoallv(c->world, out, cnt, cnt + W, in, cnt + 2 * W, cnt + 3 * W) != EMBER_OK)
            st = ember_dist_comm_failed(c);
        int64_t *k = from; /* reused: rows taken from each rank so far */
        for (int32_t s = 0; s < W && st == EMBER_OK; s++)
            k[s] = cnt[3 * W + s] / 4;
        for (int64_t i = 0; i < h->n && st == EMBER_OK; i++) {
            int32_t o = ember_shard_owner(pt, W, h->rows[i]);
            memcpy(h->values + i * dim, in + k[o], sizeof(float) * (size_t)dim);
            if (sf)
                memcpy(h->state + i * sf, in + k[o] + dim, sizeof(float) * (size_t)sf);
            k[o] += per;
        }
    }
    free(from);
    free(out);
    free(in);
    return st;
}

void ember_hot_write(const ember_ptable *pt, int64_t phys0, int64_t count, const float *buf, int state)
{
    ember_hot *h = pt->hot;
    int32_t width = state ? pt->store->state_floats : pt->dim;
    int enc = state ? pt->store->state_enc : half_rows(pt) ? pt->store->encoding : 0;
    for (int64_t i = 0; h && width && i < h->n; i++) {
        if (h->rows[i] < phys0 || h->rows[i] >= phys0 + count)
            continue;
        float *to = (state ? h->state : h->values) + i * width;
        const float *from = buf + (h->rows[i] - phys0) * width;
        if (!enc) {
            memcpy(to, from, sizeof(float) * (size_t)width);
            continue;
        }
        uint16_t q[2048]; /* rounded to nearest, as the owner's write */
        ember_half_encode_row(enc, 0, 0, 0, width, from, q);
        ember_half_decode_row(enc, width, q, to);
    }
}

/* This rank's occurrences of hot rows in its route, by hot row then entry
 * (a stable counting sort), and their per-row counts. */
static int hot_keys(ember_collection *c, ember_ptable *pt, ember_hot *h, int64_t *nk)
{
    const ember_route *r = &pt->route;
    const int32_t *hot_of = pt->xchg->hot_of; /* the forward's counting found them */
    memset(h->at, 0, sizeof(int64_t) * (size_t)(h->n + 1));
    int64_t n = 0;
    for (int64_t e = 0; e < r->n; e++)
        if (hot_of[e] >= 0) {
            h->at[hot_of[e] + 1]++;
            n++;
        }
    if (ember_reserve((void **)&h->keys, &h->keys_cap, n + 1, sizeof(uint64_t)))
        return ember_fail(c, EMBER_ENOMEM, "out of memory for %lld hot occurrences", (long long)n);
    for (int64_t i = 0; i < h->n; i++) {
        h->hot_counts[i] += (uint64_t)h->at[i + 1];
        h->at[i + 1] += h->at[i];
    }
    int64_t *pos = h->touched; /* scratch until the sums travel */
    memcpy(pos, h->at, sizeof(int64_t) * (size_t)h->n);
    for (int64_t g = 0; g < r->nseg; g++)
        for (int64_t e = r->seg_start[g]; e < r->seg_start[g + 1]; e++)
            if (hot_of[e] >= 0)
                h->keys[pos[hot_of[e]]++] = (uint64_t)g << 32 | (uint64_t)e;
    *nk = n;
    return EMBER_OK;
}

int ember_hot_sum(ember_collection *c, int32_t p, const float *dp, const float *ds)
{
    ember_ptable *pt = &c->ptables[p];
    ember_hot *h = pt->hot;
    if (!h || h->n == 0)
        return EMBER_OK;
    int32_t W = c->world->size, me = c->world->rank, dim = pt->dim;
    const ember_route *r = &pt->route;
    int64_t nk = 0, len = h->n * (dim + 1); /* sums, then one float per row: its occurrences so far */
    int st = ember_dist_agree(c, hot_keys(c, pt, h, &nk), NULL);
    if (st != EMBER_OK)
        return st;
    float *g = h->g, *cnt_f = h->g + h->n * dim, *in = h->g + len;
    int64_t *cnt = c->exchange_scratch; /* [4W] */
    /* 2(W-1) hops: the sums from rank 0 to W-1, each rank continuing them
     * with its own occurrences; then the totals from W-1 on round the ring
     * to W-2.  A hop is one sender and one receiver. */
    if (me == 0)
        memset(g, 0, sizeof(float) * (size_t)len);
    for (int32_t hop = 0; hop < 2 * W - 1; hop++) {
        if (hop == me) /* my turn in the first round: add my occurrences */
            for (int64_t i = 0; i < h->n; i++) {
                float *gi = g + i * dim;
                for (int64_t j = h->at[i]; j < h->at[i + 1]; j++) {
                    int64_t seg = (int64_t)(h->keys[j] >> 32), e = (int64_t)(uint32_t)h->keys[j];
                    float dv = r->seg_div[seg], w = r->weighted ? r->weight[e] : 1.0f;
                    ember_grad_accumulate(gi, ember_grad_scale(dv, w), ember_seg_out(r, seg, (float *)dp, (float *)ds),
                                          dim);
                }
                cnt_f[i] += (float)(h->at[i + 1] - h->at[i]);
            }
        if (hop == 2 * W - 2 || W == 1)
            break;
        int32_t from = hop % W, to = (hop + 1) % W; /* hops W-1 .. 2W-3: W-1 -> 0 -> 1 ... -> W-2 */
        for (int32_t q = 0; q < W; q++) {
            cnt[q] = me == from && q == to ? len * 4 : 0;
            cnt[W + q] = 0;
            cnt[2 * W + q] = me == to && q == from ? len * 4 : 0;
            cnt[3 * W + q] = 0;
        }
        if (ember_comm_alltoallv(c->world, g, cnt, cnt + W, in, cnt + 2 * W, cnt + 3 * W) != EMBER_OK)
            return ember_dist_comm_failed(c);
        if (me == to)
            memcpy(g, in, sizeof(float) * (size_t)len);
    }
    for (int64_t i = 0; i < h->n; i++)
        h->touched[i] = (int64_t)cnt_f[i];
    return EMBER_OK;
}

int ember_hot_check(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    ember_hot *h = pt->hot;
    for (int64_t i = 0; h && i < h->n; i++)
        for (int32_t k = 0; k < pt->dim; k++)
            if (!isfinite(h->g[i * pt->dim + k]))
                return ember_fail(c, EMBER_ENUMERIC, "table '%s' hot row %u: gradient is not finite; no table was "
                                  "changed", c->tables[pt->tables[0]].cfg.name, h->rows[i]);
    return EMBER_OK;
}

void ember_hot_apply(ember_collection *c, int32_t p, int64_t step)
{
    ember_ptable *pt = &c->ptables[p];
    ember_hot *h = pt->hot;
    if (!h || h->n == 0)
        return;
    int32_t W = c->world->size, me = c->world->rank, dim = pt->dim, sf = pt->store->state_floats;
    ember_optim_step o = ember_optim_prepare(&pt->opt, step, c->lr_scale);
    int half = half_rows(pt);
    const ember_table_config *first = &c->tables[pt->tables[0]].cfg;
    ember_grad_rounding rd = {first->rounding == EMBER_ROUND_STOCHASTIC, step, 1, 0, pt->col0, c->tables,
                              pt->tables, pt->num_tables, NULL}; /* hot rows: fixed tables only */
    for (int64_t i = 0; i < h->n; i++) {
        if (h->touched[i] == 0)
            continue;
        float *w = h->values + i * dim, *s = sf ? h->state + i * sf : NULL;
        int64_t clips[2] = {0, 0}; /* counted by the owner, as the row */
        ember_optim_clip(&o, dim, h->g + i * dim, clips);
        ember_optim_row(&o, dim, w, s, h->g + i * dim);
        uint16_t q[1024], qs[2048];
        if (half) { /* rounded as the backward rounds the row, then held as the halves' values */
            uint64_t bits = ember_grad_round_bits_phys(&rd, (int64_t)h->rows[i], EMBER_ROUND_ROW);
            ember_half_encode_row(pt->store->encoding, rd.stochastic, bits, rd.col0, dim, w, q);
            ember_half_decode_row(pt->store->encoding, dim, q, w);
        }
        if (sf && pt->store->state_enc) { /* the state likewise (on every rank, one holding no rows too) */
            ember_grad_round_state(&rd, pt->store->state_enc, (int64_t)h->rows[i], 0, dim, sf, s, qs);
            ember_half_decode_row(pt->store->state_enc, sf, qs, s);
        }
        if (ember_shard_owner(pt, W, h->rows[i]) != me)
            continue;
        uint32_t l = ember_shard_local(pt, W, h->rows[i]);
        if (half)
            memcpy((uint16_t *)pt->store->qrows + (int64_t)l * dim, q, sizeof q[0] * (size_t)dim);
        else
            memcpy(pt->store->values + (int64_t)l * dim, w, sizeof(float) * (size_t)dim);
        if (sf && pt->store->state_enc)
            memcpy(half_state_of(pt, l), qs, sizeof qs[0] * (size_t)sf);
        else if (sf)
            memcpy(pt->store->state + (int64_t)l * sf, s, sizeof(float) * (size_t)sf);
        c->stats.last_unique_rows++;
        c->stats.clipped_values += clips[0];
        c->stats.clipped_rows += clips[1];
    }
}

void ember_hot_count_served(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    if (!pt->hot || !pt->xchg)
        return;
    const ember_route *rr = &pt->xchg->rr;
    for (int64_t e = 0; e < rr->n; e++)
        if (rr->row[e] < pt->local_rows)
            pt->hot->counts[rr->row[e]]++;
}

/* ------------------------------------------------------------ the hot set */

/* Sets table p's hot rows (ascending physical rows, n <= cap; every rank
 * the same) and fills the copies. */
static int hot_set(ember_collection *c, int32_t p, const uint32_t *rows, int64_t n)
{
    ember_hot *h = c->ptables[p].hot;
    memcpy(h->rows, rows, sizeof(uint32_t) * (size_t)n);
    h->n = n;
    memset(h->table, 0xff, sizeof(uint32_t) * 2 * ((size_t)h->mask + 1));
    for (int64_t i = 0; i < n; i++) {
        uint32_t b = ember_hot_bucket(h, rows[i]);
        while (h->table[2 * (int64_t)b] != UINT32_MAX)
            b = (b + 1) & h->mask;
        h->table[2 * (int64_t)b] = rows[i];
        h->table[2 * (int64_t)b + 1] = (uint32_t)i;
    }
    memset(h->hot_counts, 0, sizeof(uint64_t) * (size_t)h->cap);
    return ember_hot_reload(c, p);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* (count, row) candidates: more occurrences first, then the lower row. */
typedef struct cand {
    uint64_t count;
    uint64_t row;
} cand;

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return (x->row > y->row) - (x->row < y->row);
}

static int cmp_cand_row(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return (x->row > y->row) - (x->row < y->row);
}

int ember_set_hot_rows(ember_collection *c, int32_t table, const int64_t *ids, int64_t count)
{
    if (!c)
        return EMBER_EINVAL;
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if (c->routed || c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_set_hot_rows between a forward and its backward (or with a "
                          "batch begun): the batch's rows were routed with the old hot rows");
    int st = EMBER_OK;
    const ember_ltable *lt = table >= 0 && table < c->cfg.num_tables ? &c->tables[table] : NULL;
    ember_ptable *pt = lt ? &c->ptables[lt->ptable] : NULL;
    if (!lt)
        st = ember_fail(c, EMBER_EINVAL, "ember_set_hot_rows: table %d out of range", table);
    else if (!pt->hot)
        st = ember_fail(c, EMBER_EINVAL, "table '%s' has no hot rows (hot_rows 0)", lt->cfg.name);
    else if (count < 0 || count > lt->cfg.hot_rows || (count > 0 && !ids))
        st = ember_fail(c, EMBER_EINVAL, "table '%s': %lld hot rows, at most %lld (hot_rows)", lt->cfg.name,
                        (long long)count, (long long)lt->cfg.hot_rows);
    for (int64_t i = 0; st == EMBER_OK && i < count; i++)
        if (ids[i] < 0 || ids[i] >= lt->cfg.rows)
            st = ember_fail(c, EMBER_EINVAL, "table '%s': hot id %lld outside [0, %lld)", lt->cfg.name,
                            (long long)ids[i], (long long)lt->cfg.rows);
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK || !ember_distributed(c))
        return st;
    /* this table's rows replace its old ones; the stacked tables' stay */
    ember_hot *h = pt->hot;
    uint32_t *rows = malloc(sizeof(uint32_t) * (size_t)(h->cap + count + 1));
    st = rows ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory");
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK) {
        free(rows);
        return st;
    }
    int64_t n = 0, end = lt->offset + lt->cfg.rows;
    for (int64_t i = 0; i < h->n; i++)
        if (h->rows[i] < lt->offset || h->rows[i] >= end)
            rows[n++] = h->rows[i];
    for (int64_t i = 0; i < count; i++)
        rows[n++] = (uint32_t)(lt->offset + ids[i]);
    qsort(rows, (size_t)n, sizeof *rows, cmp_u32);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (u == 0 || rows[i] != rows[u - 1])
            rows[u++] = rows[i];
    st = u <= h->cap ? hot_set(c, lt->ptable, rows, u)
                     : ember_fail(c, EMBER_EINVAL, "table '%s': too many hot rows", lt->cfg.name);
    free(rows);
    return st;
}

/* The logical table (index into pt->tables) that physical row `row` of pt
 * belongs to. */
static int32_t table_of(const ember_collection *c, const ember_ptable *pt, uint64_t row)
{
    int32_t i = 0;
    while (i + 1 < pt->num_tables && (uint64_t)c->tables[pt->tables[i + 1]].offset <= row)
        i++;
    return i;
}

/* From candidates by rank (most occurrences first), the first hot_rows of
 * each logical table with a count, into out (may be `in` itself: entries
 * only move forward); their number.  taken: [pt->num_tables] scratch. */
static int64_t take_per_table(const ember_collection *c, const ember_ptable *pt, const cand *in, int64_t n,
                              cand *out, int64_t *taken)
{
    int64_t k = 0;
    memset(taken, 0, sizeof(int64_t) * (size_t)pt->num_tables);
    for (int64_t i = 0; i < n && k < pt->hot->cap && in[i].count > 0; i++) {
        int32_t t = table_of(c, pt, in[i].row);
        if (taken[t] < c->tables[pt->tables[t]].cfg.hot_rows) {
            taken[t]++;
            out[k++] = in[i];
        }
    }
    return k;
}

/* One table's refresh: the cap rows with most occurrences since the last. */
static int refresh_ptable(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    ember_hot *h = pt->hot;
    int32_t W = c->world->size, me = c->world->rank;
    int64_t K = h->cap, total = (int64_t)W * K + h->n;
    cand *mine = calloc((size_t)K + 1, sizeof *mine), *all = calloc((size_t)total + 1, sizeof *all);
    uint64_t *hot_all = calloc((size_t)W * (size_t)(h->n + 1), sizeof *hot_all);
    uint32_t *rows = malloc(sizeof(uint32_t) * (size_t)K + 4);
    int64_t *taken = malloc(sizeof(int64_t) * (size_t)pt->num_tables);
    int st = mine && all && hot_all && rows && taken ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory");
    if ((st = ember_dist_agree(c, st, NULL)) == EMBER_OK) {
        /* this rank's K most served rows (a partial selection by sort) */
        int64_t nl = 0;
        for (int64_t l = 0; l < pt->local_rows; l++)
            if (h->counts[l])
                nl++;
        cand *local = malloc(sizeof(cand) * (size_t)(nl + 1));
        st = ember_dist_agree(c, local ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory"), NULL);
        if (st == EMBER_OK) {
            nl = 0;
            for (int64_t l = 0; l < pt->local_rows; l++)
                if (h->counts[l])
                    local[nl++] = (cand){h->counts[l], (uint64_t)l * (uint64_t)W + (uint64_t)me};
            qsort(local, (size_t)nl, sizeof *local, cmp_cand);
            take_per_table(c, pt, local, nl, mine, taken); /* each table's hot_rows best */
            if (ember_comm_allgather(c->world, mine, (int64_t)sizeof(cand) * K, all) != EMBER_OK ||
                ember_comm_allgather(c->world, h->hot_counts, (int64_t)sizeof(uint64_t) * (h->n + 1),
                                     hot_all) != EMBER_OK)
                st = ember_dist_comm_failed(c);
        }
        free(local);
    }
    if (st == EMBER_OK) {
        int64_t n = (int64_t)W * K;
        for (int64_t i = 0; i < h->n; i++) { /* the hot rows' own counts, summed over ranks */
            uint64_t sum = 0;
            for (int32_t s = 0; s < W; s++)
                sum += hot_all[(int64_t)s * (h->n + 1) + i];
            all[n++] = (cand){sum, h->rows[i]};
        }
        qsort(all, (size_t)n, sizeof *all, cmp_cand_row); /* a row counted twice: its counts summed */
        int64_t u = 0;
        for (int64_t i = 0; i < n; i++) {
            if (u > 0 && all[u - 1].row == all[i].row)
                all[u - 1].count += all[i].count;
            else
                all[u++] = all[i];
        }
        n = u;
        qsort(all, (size_t)n, sizeof *all, cmp_cand);
        int64_t k = take_per_table(c, pt, all, n, all, taken);
        for (int64_t i = 0; i < k; i++)
            rows[i] = (uint32_t)all[i].row;
        qsort(rows, (size_t)k, sizeof *rows, cmp_u32);
        memset(h->counts, 0, sizeof(uint32_t) * (size_t)pt->local_rows);
        st = hot_set(c, p, rows, k);
    }
    free(mine);
    free(all);
    free(hot_all);
    free(rows);
    free(taken);
    return st;
}

int ember_refresh_hot_rows(ember_collection *c)
{
    if (!c)
        return EMBER_EINVAL;
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    if (c->routed || c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_refresh_hot_rows between a forward and its backward (or with a "
                          "batch begun): the batch's rows were routed with the old hot rows");
    int st = EMBER_OK;
    for (int32_t p = 0; p < c->num_ptables && st == EMBER_OK && ember_distributed(c); p++)
        if (c->ptables[p].hot)
            st = refresh_ptable(c, p);
    return st;
}
