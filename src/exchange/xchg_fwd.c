/*
 * xchg_fwd.c: forward of one physical table over a world of W > 1 ranks
 * (docs/distributed.md, "The step" and "Wire format").
 *
 * Per mini-batch round: (1) the requester counts what it sends to each rank
 * and the counts travel with its status; (2) buffers are reserved and the
 * world agrees; (3) segment headers and entries go all-to-all; (4) owners
 * append them to their received route `rr` and look up: distinct rows
 * (ROWS), partial pooled sums (POOLED), column slices (COLUMN), or nothing
 * (REPLICATED); (5) vectors come back and the requester writes its outputs.
 * After the last round the owner's route is put in source-rank order, the
 * order backward sums in.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/shard.h"
#include "core/reserve.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "exchange/xchg.h"
#include "lookup/lookup.h"
#include "quant/quant.h"
#include "quant/round.h"

typedef struct seg_header {
    uint32_t count; /* entries of the segment in this message */
    float div;      /* combiner divisor                        */
} seg_header;

typedef struct seg_debug {
    int32_t feature, sample;
} seg_debug;

/* Pointers into one message: headers, debug, entries, weights, distinct rows. */
typedef struct msg_view {
    seg_header *hdr;
    seg_debug *dbg;
    uint32_t *row;
    float *weight;
    uint32_t *uniq;
} msg_view;

static int all_dest(const ember_ptable *pt)
{
    return pt->placement == EMBER_PLACE_COLUMN || pt->placement == EMBER_PLACE_REPLICATED;
}

/* 1 when the ROWS exchange sends this table's rows encoded (fp16, bf16,
 * int8, int4), as the owner holds them, so that the requester pools them
 * with the kernel a local table uses (same sums); 0: dim floats (fp32 rows,
 * and the int8/int4 rows of a table with hot rows, whose fp32 copies follow
 * the received rows; half rows' copies hold halves, so they go encoded). */
static int wire_encoded(const ember_ptable *pt)
{
    return pt->store->encoding && (!pt->hot || ember_enc_half(pt->store->encoding));
}

/* Bytes of one row the ROWS exchange sends. */
static int64_t wire_row_bytes(const ember_ptable *pt)
{
    return wire_encoded(pt) ? pt->store->qrow_bytes : (int64_t)pt->dim * 4;
}


ember_xchg *ember_xchg_get(ember_collection *c, int32_t p)
{
    ember_ptable *pt = &c->ptables[p];
    if (pt->xchg)
        return pt->xchg;
    ember_xchg *x = calloc(1, sizeof *x);
    int32_t W = c->world->size;
    if (!x || !(x->scnt = calloc((size_t)W * 10 + 2, sizeof(int64_t))) ||
        !(x->pos = calloc((size_t)W * 6, sizeof(int64_t))) || !(x->views = calloc((size_t)W, sizeof(msg_view)))) {
        if (x) {
            free(x->scnt);
            free(x->pos);
        }
        free(x);
        return NULL;
    }
    x->W = W;
    x->sdsp = x->scnt + W;
    x->rcnt = x->scnt + 2 * W;
    x->rdsp = x->scnt + 3 * W;
    x->ctl = x->scnt + 4 * W;
    x->agree = x->scnt + 8 * W;
    pt->xchg = x;
    return x;
}

void ember_xchg_free(ember_xchg *x)
{
    if (!x)
        return;
    free(x->sent);
    free(x->seg_list);
    free(x->seg_list_at);
    free(x->remap);
    free(x->keys);
    free(x->keys_tmp);
    free(x->rows_in);
    free(x->hot_list);
    free(x->hot_of);
    free(x->recv);
    free(x->block);
    ember_route_free(&x->rr);
    ember_route_free(&x->rr_tmp);
    free(x->rows_out);
    free(x->sbuf);
    free(x->rbuf);
    free(x->scnt);
    free(x->pos);
    free(x->views);
    free(x->grad_out);
    free(x->grad_in);
    free(x);
}

int64_t ember_xchg_bytes(const ember_xchg *x)
{
    if (!x)
        return 0;
    return (x->sent_cap + x->recv_cap + x->block_cap + x->seg_list_cap + x->seg_list_at_cap) * 8 +
           x->remap_cap * 4 + x->hot_list_cap * 8 + x->hot_of_cap * 4 + (x->keys_cap + x->keys_tmp_cap) * 8 + (x->rows_in_cap + x->rows_out_cap) * 4 + x->sbuf_cap +
           x->rbuf_cap + (x->grad_out_cap + x->grad_in_cap) * 4 + ember_route_bytes(&x->rr) +
           ember_route_bytes(&x->rr_tmp) + ((int64_t)x->W * 16 + 2) * 8;
}

/* A control exchange (counts, agreements; not counted as payload), blocking
 * or started (x->req) when `start`: every rank sends `bytes` to every rank
 * from send + (same_block ? 0 : d * bytes) and receives into recv + s * bytes.
 * The counts stay in x->ctl until it completes. */
static int control_exchange(ember_collection *c, ember_xchg *x, int start, const void *send, int same_block,
                            void *recv, int64_t bytes)
{
    int32_t W = c->world->size;
    int64_t *cnt = x->ctl; /* [4W]: counts, send displacements, receive displacements */
    for (int32_t r = 0; r < W; r++) {
        cnt[r] = bytes;
        cnt[W + r] = same_block ? 0 : r * bytes;
        cnt[2 * W + r] = r * bytes;
    }
    int counting = c->world->counting, st;
    c->world->counting = 0;
    st = start ? ember_comm_ialltoallv(c->world, send, cnt, cnt + W, recv, cnt, cnt + 2 * W, &x->req)
               : ember_comm_alltoallv(c->world, send, cnt, cnt + W, recv, cnt, cnt + 2 * W);
    c->world->counting = counting;
    return st == EMBER_OK ? EMBER_OK : ember_dist_comm_failed(c);
}

static int64_t header_bytes(const ember_collection *c)
{
    return (int64_t)sizeof(seg_header) + (c->cfg.debug_checks ? (int64_t)sizeof(seg_debug) : 0);
}

static int64_t message_bytes(const ember_collection *c, const int64_t *n)
{
    return n[XC_SEGS] * header_bytes(c) + n[XC_ENTS] * (n[XC_WEIGHTED] ? 8 : 4) + n[XC_UNIQ] * 4;
}


static msg_view view_of(const ember_collection *c, char *base, const int64_t *n)
{
    msg_view v;
    char *p = base;
    v.hdr = (seg_header *)p;
    p += n[XC_SEGS] * (int64_t)sizeof(seg_header);
    v.dbg = c->cfg.debug_checks ? (seg_debug *)p : NULL;
    if (c->cfg.debug_checks)
        p += n[XC_SEGS] * (int64_t)sizeof(seg_debug);
    v.row = (uint32_t *)p;
    p += n[XC_ENTS] * 4;
    v.weight = n[XC_WEIGHTED] ? (float *)p : NULL;
    if (n[XC_WEIGHTED])
        p += n[XC_ENTS] * 4;
    v.uniq = (uint32_t *)p;
    return v;
}

/* Step 1: what this rank sends in round m for segments [g0, g1). */
static int count_round(ember_collection *c, ember_ptable *pt, ember_xchg *x, int64_t g0, int64_t g1,
                       int64_t *sent)
{
    const ember_route *r = &pt->route;
    int32_t W = c->world->size;
    int64_t e0 = r->seg_start[g0], e1 = r->seg_start[g1];
    memset(sent, 0, sizeof(int64_t) * XC_N * (size_t)W);
    if (all_dest(pt)) {
        int64_t kept = 0;
        for (int64_t e = e0; e < e1; e++)
            kept += r->row[e] != EMBER_ROW_DROPPED;
        for (int32_t d = 0; d < W; d++) {
            sent[d * XC_N + XC_SEGS] = g1 - g0;
            sent[d * XC_N + XC_ENTS] = kept;
        }
    } else {
        int64_t *last = x->rcnt; /* scratch [W] */
        for (int32_t d = 0; d < W; d++)
            last[d] = -1;
        ember_hot *h = pt->hot && pt->hot->n ? pt->hot : NULL;
        x->hot_used = 0;
        for (int64_t i = 0; h && i < h->n; i++) /* free, even after a forward that failed half-way */
            h->slot[i] = -1;
        if (h && (ember_reserve((void **)&x->hot_list, &x->hot_list_cap, h->n, sizeof(int64_t)) ||
                  ember_reserve((void **)&x->hot_of, &x->hot_of_cap, r->n + 1, sizeof(int32_t))))
            return ember_fail(c, EMBER_ENOMEM, "out of memory for %lld hot rows", (long long)h->n);
        for (int64_t g = g0; g < g1; g++)
            for (int64_t e = r->seg_start[g]; e < r->seg_start[g + 1]; e++) {
                if (r->row[e] == EMBER_ROW_DROPPED) {
                    if (h)
                        x->hot_of[e] = -1;
                    continue;
                }
                int64_t hi = h ? ember_hot_find(h, r->row[e]) : -1;
                if (h)
                    x->hot_of[e] = (int32_t)hi;
                if (hi >= 0) { /* read from this rank's copy: a slot after the received rows */
                    if (h->slot[hi] < 0) {
                        h->slot[hi] = (int32_t)x->hot_used;
                        x->hot_list[x->hot_used++] = hi;
                    }
                    continue;
                }
                int32_t d = ember_shard_owner(pt, W, r->row[e]);
                sent[d * XC_N + XC_ENTS]++;
                if (last[d] != g) {
                    last[d] = g;
                    sent[d * XC_N + XC_SEGS]++;
                }
            }
        if (pt->exchange == EMBER_EXCHANGE_ROWS) {
            /* distinct rows per owner: sort this round's kept entries by row */
            int64_t nk = 0;
            if (ember_reserve((void **)&x->keys, &x->keys_cap, e1 - e0 + 1, sizeof(uint64_t)) ||
                ember_reserve((void **)&x->keys_tmp, &x->keys_tmp_cap, e1 - e0 + 1, sizeof(uint64_t)))
                return ember_fail(c, EMBER_ENOMEM, "out of memory for %lld ids", (long long)(e1 - e0));
            for (int64_t e = e0; e < e1; e++)
                if (r->row[e] != EMBER_ROW_DROPPED && (!h || x->hot_of[e] < 0))
                    x->keys[nk++] = (uint64_t)r->row[e] << 32 | (uint64_t)e;
            int bits = pt->rows > 1 ? 64 - __builtin_clzll((unsigned long long)(pt->rows - 1)) : 0;
            ember_radix_sort(x->keys, x->keys_tmp, c->sort_hist, nk, 32, 32 + bits, c->threads);
            for (int64_t j = 0; j < nk; j++)
                if (j == 0 || (x->keys[j] >> 32) != (x->keys[j - 1] >> 32))
                    sent[ember_shard_owner(pt, W, (uint32_t)(x->keys[j] >> 32)) * XC_N + XC_UNIQ]++;
            x->nkeys = nk; /* the sorted round, for pack_round */
        }
    }
    for (int32_t d = 0; d < W; d++)
        sent[d * XC_N + XC_WEIGHTED] = r->weighted;
    return EMBER_OK;
}

/* Step 3: packs round m's messages into sbuf (displacements in sdsp), the
 * segment lists per destination, and (ROWS) the entry -> received-row map. */
static void pack_round(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, int64_t g0, int64_t g1,
                       const int64_t *sent)
{
    const ember_route *r = &pt->route;
    int32_t W = c->world->size;
    if (all_dest(pt)) { /* one message for every rank; no segment lists */
        for (int32_t d = 0; d < W; d++)
            x->seg_list_at[(int64_t)m * W + d + 1] = x->seg_list_at[(int64_t)m * W];
        msg_view v = view_of(c, x->sbuf, sent);
        int64_t k = 0;
        for (int64_t g = g0; g < g1; g++) {
            uint32_t cnt = 0;
            for (int64_t e = r->seg_start[g]; e < r->seg_start[g + 1]; e++) {
                if (r->row[e] == EMBER_ROW_DROPPED)
                    continue;
                v.row[k] = r->row[e];
                if (v.weight)
                    v.weight[k] = r->weight[e];
                k++, cnt++;
            }
            v.hdr[g - g0] = (seg_header){cnt, r->seg_div[g]};
            if (v.dbg)
                v.dbg[g - g0] = (seg_debug){r->seg_feature[g], r->seg_sample[g]};
        }
        return;
    }
    msg_view *mv = x->views;
    int64_t *seg_at = x->pos, *hdr_k = x->pos + W, *ent_k = x->pos + 2 * W, *cnt_g = x->pos + 3 * W,
            *touched = x->pos + 4 * W, *uniq_k = x->pos + 5 * W;
    int64_t list0 = x->seg_list_at[(int64_t)m * W];
    for (int32_t d = 0; d < W; d++) {
        mv[d] = view_of(c, x->sbuf + x->sdsp[d], sent + d * XC_N);
        seg_at[d] = list0;
        list0 += sent[d * XC_N + XC_SEGS];
        x->seg_list_at[(int64_t)m * W + d + 1] = list0;
        hdr_k[d] = ent_k[d] = cnt_g[d] = uniq_k[d] = 0;
    }
    const ember_hot *h = pt->hot && pt->hot->n ? pt->hot : NULL;
    for (int64_t g = g0; g < g1; g++) {
        int64_t nt = 0;
        for (int64_t e = r->seg_start[g]; e < r->seg_start[g + 1]; e++) {
            if (r->row[e] == EMBER_ROW_DROPPED || (h && x->hot_of[e] >= 0))
                continue;
            int32_t d = ember_shard_owner(pt, W, r->row[e]);
            if (cnt_g[d]++ == 0)
                touched[nt++] = d;
            msg_view *v = &mv[d];
            v->row[ent_k[d]] = ember_shard_local(pt, W, r->row[e]);
            if (v->weight)
                v->weight[ent_k[d]] = r->weight[e];
            ent_k[d]++;
        }
        for (int64_t i = 0; i < nt; i++) {
            int64_t d = touched[i];
            mv[d].hdr[hdr_k[d]] = (seg_header){(uint32_t)cnt_g[d], r->seg_div[g]};
            if (mv[d].dbg)
                mv[d].dbg[hdr_k[d]] = (seg_debug){r->seg_feature[g], r->seg_sample[g]};
            hdr_k[d]++;
            x->seg_list[seg_at[d]++] = g;
            cnt_g[d] = 0;
        }
    }
    if (pt->exchange != EMBER_EXCHANGE_ROWS)
        return;
    /* distinct rows in ascending order per owner; rows_in holds owner d's
     * rows from row (sum of UNIQ of the ranks before d) */
    int64_t base = 0;
    for (int32_t d = 0; d < W; d++) {
        touched[d] = base;
        base += sent[d * XC_N + XC_UNIQ];
    }
    for (int64_t j = 0; j < x->nkeys; j++) {
        uint32_t row = (uint32_t)(x->keys[j] >> 32);
        uint32_t e = (uint32_t)x->keys[j];
        int32_t d = ember_shard_owner(pt, W, row);
        if (j == 0 || (x->keys[j - 1] >> 32) != row)
            mv[d].uniq[uniq_k[d]++] = ember_shard_local(pt, W, row);
        x->remap[e] = (uint32_t)(touched[d] + uniq_k[d] - 1);
    }
    if (!h || x->hot_used == 0)
        return;
    for (int64_t e = r->seg_start[g0]; e < r->seg_start[g1]; e++) { /* hot rows: after the received ones */
        int64_t hi = x->hot_of[e];
        if (hi >= 0)
            x->remap[e] = (uint32_t)(base + h->slot[hi]);
    }
}

/* Step 4: appends round m's received messages to rr, by source rank. */
static void unpack_round(ember_collection *c, ember_xchg *x, int32_t m, const int64_t *recv)
{
    int32_t W = c->world->size;
    ember_route *rr = &x->rr;
    for (int32_t s = 0; s < W; s++) {
        const int64_t *n = recv + s * XC_N;
        msg_view v = view_of(c, x->rbuf + x->rdsp[s], n);
        int64_t *blk = x->block + ((int64_t)m * W + s) * 4;
        blk[0] = rr->nseg, blk[1] = n[XC_SEGS], blk[2] = rr->n, blk[3] = n[XC_ENTS];
        for (int64_t i = 0; i < n[XC_SEGS]; i++) {
            int64_t g = rr->nseg + i;
            rr->seg_start[g + 1] = rr->seg_start[g] + v.hdr[i].count;
            rr->seg_div[g] = v.hdr[i].div;
            rr->seg_feature[g] = v.dbg ? v.dbg[i].feature : 0;
            rr->seg_sample[g] = v.dbg ? v.dbg[i].sample : -1;
        }
        memcpy(rr->row + rr->n, v.row, sizeof(uint32_t) * (size_t)n[XC_ENTS]);
        for (int64_t i = 0; i < n[XC_ENTS]; i++)
            rr->weight[rr->n + i] = v.weight ? v.weight[i] : 1.0f;
        rr->nseg += n[XC_SEGS];
        rr->n += n[XC_ENTS];
    }
    memset(rr->row + rr->n, 0, sizeof(uint32_t) * EMBER_ROUTE_PAD);
}

/* dst[i] = table row rows[i] (rb bytes each), for the rows one source
 * asked for.  The reads are random, so rows are prefetched GATHER_AHEAD
 * ahead (the bounds test is on the index, which GCC keeps: check
 * `objdump -d | grep prefetch`). */
#define GATHER_AHEAD 16
static void gather_rows(char *dst, const char *base, const uint32_t *rows, int64_t n, int64_t rb, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && n > 4096)
    for (int64_t i = 0; i < n; i++) {
        if (i + GATHER_AHEAD < n) {
            const char *pf = base + (int64_t)rows[i + GATHER_AHEAD] * rb;
            for (int64_t b = 0; b < rb; b += 64)
                __builtin_prefetch(pf + b, 0, 0);
        }
        memcpy(dst + i * rb, base + (int64_t)rows[i] * rb, (size_t)rb);
    }
}

/* Step 4, lookup: what each source gets back in round m (rows_out at
 * scnt/sdsp, in bytes).  ROWS: its distinct rows (wire_row_bytes each);
 * POOLED and COLUMN: one pooled row (or slice) of floats per segment. */
static void lookup_round(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, const int64_t *recv)
{
    int32_t W = c->world->size, ld = pt->local_dim;
    ember_route *rr = &x->rr;
    int64_t at = 0;
    if (pt->exchange == EMBER_EXCHANGE_ROWS && !all_dest(pt)) {
        const ember_store *st = pt->store;
        int64_t rb = wire_row_bytes(pt);
        for (int32_t s = 0; s < W; s++) {
            const int64_t *n = recv + s * XC_N;
            msg_view v = view_of(c, x->rbuf + x->rdsp[s], n);
            char *out = (char *)x->rows_out + at;
            x->sdsp[s] = at;
            if (st->encoding && !wire_encoded(pt)) /* hot rows' table: decoded (never COLUMN: ld is the dim) */
                for (int64_t i = 0; i < n[XC_UNIQ]; i++)
                    ember_dequant_row((ember_encoding)st->encoding, ld, st->qrows + (int64_t)v.uniq[i] * st->qrow_bytes,
                                      (float *)out + i * ld);
            else
                gather_rows(out, st->encoding ? (const char *)st->qrows : (const char *)st->values, v.uniq,
                            n[XC_UNIQ], rb, c->threads);
            at += n[XC_UNIQ] * rb;
            x->scnt[s] = at - x->sdsp[s];
        }
        return;
    }
    int64_t g0 = x->block[(int64_t)m * W * 4], g1 = rr->nseg;
    for (int64_t g = g0; g < g1; g++)
        rr->seg_out[g] = (g - g0) * ld;
    ember_pool(rr, pt->store, g0, g1, x->rows_out, NULL, c->threads);
    for (int32_t s = 0; s < W; s++) {
        const int64_t *blk = x->block + ((int64_t)m * W + s) * 4;
        x->sdsp[s] = (blk[0] - g0) * ld * 4;
        x->scnt[s] = blk[1] * ld * 4;
    }
}

/* Step 4 on an SSD table: the rows this rank serves in round m become
 * resident and pinned, and every list of them that a kernel reads holds
 * slots: the received entries (forward pooling and backward), each
 * source's distinct rows (ROWS), and a replicated table's own entries
 * (x->remap: pt->route keeps its rows for packing). */
static int stage_round(ember_collection *c, ember_ptable *pt, ember_xchg *x, int64_t n0, int64_t g0, int64_t g1,
                       const int64_t *recv)
{
    ember_route *rr = &x->rr, *r = &pt->route;
    int st = ember_ptable_stage(c, pt, rr->row + n0, rr->row + n0, rr->n - n0);
    if (st == EMBER_OK && pt->exchange == EMBER_EXCHANGE_ROWS && !all_dest(pt))
        for (int32_t s = 0; s < c->world->size && st == EMBER_OK; s++) {
            const int64_t *n = recv + s * XC_N;
            msg_view v = view_of(c, x->rbuf + x->rdsp[s], n);
            st = ember_ptable_stage(c, pt, v.uniq, v.uniq, n[XC_UNIQ]);
        }
    if (st == EMBER_OK && pt->placement == EMBER_PLACE_REPLICATED) {
        int64_t e0 = r->seg_start[g0], e1 = r->seg_start[g1];
        st = ember_ptable_stage(c, pt, r->row + e0, x->remap + e0, e1 - e0);
    }
    return st;
}

/* Step 5: the requester's outputs for segments [g0, g1) of round m. */
static void assemble_round(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, int64_t g0,
                           int64_t g1, float *pooled, float *sequence)
{
    ember_route *r = &pt->route;
    int32_t W = c->world->size, dim = pt->dim, ld = pt->local_dim;
    if (pt->placement == EMBER_PLACE_REPLICATED) {
        ember_route view = *r;
        if (pt->store->staged)
            view.row = x->remap; /* slots (stage_round) */
        ember_pool(&view, pt->store, g0, g1, pooled, sequence, c->threads);
    } else if (pt->placement == EMBER_PLACE_COLUMN) {
        for (int32_t d = 0; d < W; d++) {
            int32_t width = dim - d * ld < ld ? dim - d * ld : ld;
            const float *in = x->rows_in + x->rdsp[d] / 4;
            for (int64_t g = g0; g < g1 && width > 0; g++)
                memcpy(ember_seg_out(r, g, pooled, sequence) + d * ld, in + (g - g0) * ld,
                       sizeof(float) * (size_t)width);
        }
    } else if (pt->exchange == EMBER_EXCHANGE_ROWS) {
        ember_route view = *r;
        view.row = x->remap;
        ember_store rows = *pt->store;
        rows.dim = dim;
        if (wire_encoded(pt)) { /* encoded rows, as the owners hold them */
            rows.qrows = (uint8_t *)x->rows_in;
        } else { /* fp32 rows */
            rows.values = x->rows_in;
            rows.encoding = 0;
        }
        ember_pool(&view, &rows, g0, g1, pooled, sequence, c->threads);
    } else { /* POOLED: partial sums added in rank order */
        for (int64_t g = g0; g < g1; g++)
            memset(ember_seg_out(r, g, pooled, sequence), 0, sizeof(float) * (size_t)dim);
        for (int32_t d = 0; d < W; d++) {
            const float *in = x->rows_in + x->rdsp[d] / 4;
            int64_t l0 = x->seg_list_at[(int64_t)m * W + d], l1 = x->seg_list_at[(int64_t)m * W + d + 1];
            for (int64_t i = l0; i < l1; i++, in += dim) {
                float *o = ember_seg_out(r, x->seg_list[i], pooled, sequence);
                for (int32_t k = 0; k < dim; k++)
                    o[k] += in[k];
            }
        }
    }
}

/* Bytes of the vectors this rank receives back from each owner in round m. */
static void vector_counts(const ember_ptable *pt, ember_xchg *x, const int64_t *sent, int32_t W)
{
    int64_t at = 0;
    for (int32_t d = 0; d < W; d++) {
        const int64_t *n = sent + d * XC_N;
        int64_t bytes = pt->placement == EMBER_PLACE_COLUMN      ? n[XC_SEGS] * pt->local_dim * 4
                        : pt->placement == EMBER_PLACE_REPLICATED ? 0
                        : pt->exchange == EMBER_EXCHANGE_ROWS     ? n[XC_UNIQ] * wire_row_bytes(pt)
                                                                  : n[XC_SEGS] * pt->dim * 4;
        x->rcnt[d] = bytes;
        x->rdsp[d] = at;
        at += bytes;
    }
}

/* Reserves everything round m needs once the counts are known. */
static int reserve_round(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, const int64_t *sent,
                         const int64_t *recv)
{
    int32_t W = c->world->size, ld = pt->local_dim;
    int64_t sbytes = 0, rbytes = 0, segs_out = 0, segs_in = 0, ents_in = 0, uniq_in = 0, back = 0;
    for (int32_t d = 0; d < W; d++) {
        int64_t b = message_bytes(c, sent + d * XC_N);
        x->scnt[d] = b;
        x->sdsp[d] = all_dest(pt) ? 0 : sbytes;
        sbytes = all_dest(pt) ? b : sbytes + b;
        segs_out += sent[d * XC_N + XC_SEGS];
        x->rcnt[d] = message_bytes(c, recv + d * XC_N);
        x->rdsp[d] = rbytes;
        rbytes += x->rcnt[d];
        segs_in += recv[d * XC_N + XC_SEGS];
        ents_in += recv[d * XC_N + XC_ENTS];
        uniq_in += recv[d * XC_N + XC_UNIQ];
        const int64_t *n = sent + d * XC_N;
        back += pt->placement == EMBER_PLACE_COLUMN       ? n[XC_SEGS] * ld * 4
                : pt->placement == EMBER_PLACE_REPLICATED ? 0
                : pt->exchange == EMBER_EXCHANGE_ROWS     ? n[XC_UNIQ] * wire_row_bytes(pt)
                                                          : n[XC_SEGS] * pt->dim * 4;
    }
    back += x->hot_used * pt->dim * 4; /* the round's hot rows, copied after the received ones */
    int64_t out_bytes = pt->placement == EMBER_PLACE_REPLICATED                  ? 0
                        : pt->exchange == EMBER_EXCHANGE_ROWS && !all_dest(pt) ? uniq_in * wire_row_bytes(pt)
                                                                               : segs_in * ld * 4;
    int64_t list_end = x->seg_list_at[(int64_t)m * W] + (all_dest(pt) ? 0 : segs_out);
    if (ember_reserve((void **)&x->sbuf, &x->sbuf_cap, sbytes + 1, 1) ||
        ember_reserve((void **)&x->rbuf, &x->rbuf_cap, rbytes + 1, 1) ||
        ember_reserve((void **)&x->seg_list, &x->seg_list_cap, list_end + 1, sizeof(int64_t)) ||
        ember_route_reserve(&x->rr, x->rr.n + ents_in, x->rr.nseg + segs_in, 0) ||
        ember_reserve((void **)&x->rows_out, &x->rows_out_cap, out_bytes / 4 + 1, sizeof(float)) ||
        ember_reserve((void **)&x->rows_in, &x->rows_in_cap, back / 4 + 1, sizeof(float)))
        return ember_fail(c, EMBER_ENOMEM, "out of memory for the exchange of table '%s' (%lld bytes in)",
                          c->tables[pt->tables[0]].cfg.name, (long long)rbytes);
    return EMBER_OK;
}

/* An exchange, blocking or started (x->req) when `start`. */
static int exchange(ember_collection *c, ember_xchg *x, int start, const void *send, void *recv)
{
    int st = start ? ember_comm_ialltoallv(c->world, send, x->scnt, x->sdsp, recv, x->rcnt, x->rdsp, &x->req)
                   : ember_comm_alltoallv(c->world, send, x->scnt, x->sdsp, recv, x->rcnt, x->rdsp);
    return st == EMBER_OK ? EMBER_OK : ember_dist_comm_failed(c);
}

int ember_xchg_wait(ember_collection *c, ember_xchg *x)
{
    return ember_comm_wait(c->world, &x->req) == EMBER_OK ? EMBER_OK : ember_dist_comm_failed(c);
}

/* Segments [*g0, *g1) of round m of the routed batch. */
static void round_segments(const ember_collection *c, const ember_route *r, int32_t m, int64_t *g0, int64_t *g1)
{
    *g0 = *g1 = r->nseg;
    if (m < c->shape.num_minibatches) {
        *g0 = r->sample_seg[c->shape.minibatch_start[m]];
        *g1 = r->sample_seg[c->shape.minibatch_start[m + 1]];
    }
}

int ember_xchg_counts(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, int start)
{
    int32_t W = c->world->size;
    int64_t g0, g1, *sent = x->sent + (int64_t)m * W * XC_N, *recv = x->recv + (int64_t)m * W * XC_N;
    round_segments(c, &pt->route, m, &g0, &g1);
    int st = count_round(c, pt, x, g0, g1, sent);
    for (int32_t d = 0; d < W; d++)
        sent[d * XC_N + XC_STATUS] = st;
    return control_exchange(c, x, start, sent, 0, recv, XC_N * (int64_t)sizeof(int64_t));
}

int ember_xchg_reserve(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m)
{
    int32_t W = c->world->size;
    const int64_t *sent = x->sent + (int64_t)m * W * XC_N, *recv = x->recv + (int64_t)m * W * XC_N;
    if (sent[XC_STATUS] != EMBER_OK)
        return (int)sent[XC_STATUS];
    for (int32_t s = 0; s < W; s++)
        if (recv[s * XC_N + XC_STATUS] != EMBER_OK)
            return EMBER_OK; /* that rank's own status fails the agreement, naming it */
    return reserve_round(c, pt, x, m, sent, recv);
}

int ember_xchg_agree_start(ember_collection *c, ember_xchg *x, int st)
{
    int64_t *mine = x->agree; /* agree: [2] mine, then [2W] everyone's */
    mine[0] = st;
    mine[1] = 0;
    return control_exchange(c, x, 1, mine, 1, mine + 2, 2 * (int64_t)sizeof(int64_t));
}

int ember_xchg_send_ids(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, int start)
{
    int32_t W = c->world->size;
    int64_t g0, g1, *sent = x->sent + (int64_t)m * W * XC_N, *recv = x->recv + (int64_t)m * W * XC_N;
    round_segments(c, &pt->route, m, &g0, &g1);
    if (m == 0) {
        x->rr_weighted = 0;
        for (int32_t s = 0; s < W; s++)
            x->rr_weighted |= recv[s * XC_N + XC_WEIGHTED] != 0;
        x->rr.weighted = x->rr_weighted; /* the owner pools with weights */
    }
    pack_round(c, pt, x, m, g0, g1, sent);
    return exchange(c, x, start, x->sbuf, x->rbuf);
}

/* The round's hot rows into rows_in after the received rows (slot order),
 * read from this rank's copies now: at the lookup, as the owners read
 * theirs.  Their slots are free again. */
static void copy_hot_rows(const ember_ptable *pt, ember_xchg *x, const int64_t *sent, int32_t W)
{
    ember_hot *h = pt->hot;
    if (!h || x->hot_used == 0)
        return;
    int64_t base = 0;
    for (int32_t d = 0; d < W; d++)
        base += sent[d * XC_N + XC_UNIQ];
    int64_t rb = wire_row_bytes(pt);
    for (int64_t s = 0; s < x->hot_used; s++) {
        int64_t i = x->hot_list[s];
        char *to = (char *)x->rows_in + (base + s) * rb;
        if (wire_encoded(pt)) /* a half row's copy holds halves: each rounds to itself */
            ember_half_encode_row(pt->store->encoding, 0, 0, 0, pt->dim, h->values + i * pt->dim, (uint16_t *)to);
        else
            memcpy(to, h->values + i * pt->dim, sizeof(float) * (size_t)pt->dim);
        h->slot[i] = -1;
    }
    x->hot_used = 0;
}

int ember_xchg_lookup(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, int start, float *pooled,
                      float *sequence)
{
    int32_t W = c->world->size;
    int64_t g0, g1, *sent = x->sent + (int64_t)m * W * XC_N, *recv = x->recv + (int64_t)m * W * XC_N;
    round_segments(c, &pt->route, m, &g0, &g1);
    int64_t n0 = x->rr.n;
    unpack_round(c, x, m, recv);
    if (pt->storage == EMBER_STORAGE_SSD) { /* the same on every rank: agreed */
        int st = stage_round(c, pt, x, n0, g0, g1, recv);
        if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
            return st;
    }
    if (pt->placement == EMBER_PLACE_REPLICATED) {
        assemble_round(c, pt, x, m, g0, g1, pooled, sequence);
        return EMBER_OK;
    }
    lookup_round(c, pt, x, m, recv);
    vector_counts(pt, x, sent, W);
    copy_hot_rows(pt, x, sent, W);
    return exchange(c, x, start, x->rows_out, x->rows_in);
}

void ember_xchg_assemble(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, float *pooled,
                         float *sequence)
{
    if (pt->placement == EMBER_PLACE_REPLICATED)
        return;
    int64_t g0, g1;
    round_segments(c, &pt->route, m, &g0, &g1);
    assemble_round(c, pt, x, m, g0, g1, pooled, sequence);
}

/* One round, blocking: counts, agreement, ids, lookup, vectors, outputs. */
static int forward_round(ember_collection *c, ember_ptable *pt, ember_xchg *x, int32_t m, float *pooled,
                         float *sequence)
{
    int st = ember_xchg_counts(c, pt, x, m, 0);
    if (st != EMBER_OK) /* the exchange failed: the collection is disabled */
        return st;
    if ((st = ember_dist_agree(c, ember_xchg_reserve(c, pt, x, m), NULL)) != EMBER_OK)
        return st;
    if ((st = ember_xchg_send_ids(c, pt, x, m, 0)) != EMBER_OK)
        return st;
    if ((st = ember_xchg_lookup(c, pt, x, m, 0, pooled, sequence)) != EMBER_OK)
        return st;
    ember_xchg_assemble(c, pt, x, m, pooled, sequence);
    return EMBER_OK;
}

/* Puts rr in (source rank, round) order, the global batch's order, and
 * points each segment at its row of the gradient buffer. */
int ember_xchg_finish(ember_collection *c, ember_ptable *pt, ember_xchg *x)
{
    int32_t W = c->world->size, R = x->rounds;
    ember_route *rr = &x->rr;
    if (R > 1) {
        ember_route *t = &x->rr_tmp;
        if (ember_route_reserve(t, rr->n, rr->nseg, 0))
            return ember_fail(c, EMBER_ENOMEM, "out of memory");
        int64_t G = 0, E = 0;
        t->seg_start[0] = 0;
        for (int32_t s = 0; s < W; s++)
            for (int32_t m = 0; m < R; m++) {
                const int64_t *blk = x->block + ((int64_t)m * W + s) * 4;
                for (int64_t i = 0; i < blk[1]; i++, G++) {
                    int64_t g = blk[0] + i;
                    t->seg_start[G + 1] = t->seg_start[G] + (rr->seg_start[g + 1] - rr->seg_start[g]);
                    t->seg_div[G] = rr->seg_div[g];
                    t->seg_feature[G] = rr->seg_feature[g];
                    t->seg_sample[G] = rr->seg_sample[g];
                }
                memcpy(t->row + E, rr->row + blk[2], sizeof(uint32_t) * (size_t)blk[3]);
                memcpy(t->weight + E, rr->weight + blk[2], sizeof(float) * (size_t)blk[3]);
                E += blk[3];
            }
        t->n = E;
        t->nseg = G;
        ember_route swap = *rr;
        *rr = *t;
        *t = swap;
        memset(rr->row + rr->n, 0, sizeof(uint32_t) * EMBER_ROUTE_PAD);
    }
    for (int64_t g = 0; g < rr->nseg; g++)
        rr->seg_out[g] = g * pt->local_dim;
    rr->weighted = x->rr_weighted;
    rr->dedup = 0;
    rr->nkeys = 0;
    rr->sorted_all = 0;
    rr->sources_ready = 0;
    return EMBER_OK;
}

int ember_xchg_prepare(ember_collection *c, int32_t p, ember_xchg **out)
{
    ember_ptable *pt = &c->ptables[p];
    ember_route *r = &pt->route;
    int32_t W = c->world->size, R = c->num_rounds;
    ember_xchg *x = *out = ember_xchg_get(c, p);
    int st = EMBER_OK;
    if (!x || ember_reserve((void **)&x->sent, &x->sent_cap, (int64_t)R * W * XC_N, sizeof(int64_t)) ||
        ember_reserve((void **)&x->recv, &x->recv_cap, (int64_t)R * W * XC_N, sizeof(int64_t)) ||
        ember_reserve((void **)&x->block, &x->block_cap, (int64_t)R * W * 4, sizeof(int64_t)) ||
        ember_reserve((void **)&x->seg_list_at, &x->seg_list_at_cap, (int64_t)R * W + 1, sizeof(int64_t)) ||
        ember_reserve((void **)&x->remap, &x->remap_cap, r->n + EMBER_ROUTE_PAD, sizeof(uint32_t)) ||
        ember_route_reserve(&x->rr, 0, 0, 0))
        st = ember_fail(c, EMBER_ENOMEM, "out of memory for the exchange state");
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
        return st;
    x->rounds = R;
    x->grads_ready = 0;
    x->seg_list_at[0] = 0;
    x->rr.n = x->rr.nseg = 0;
    x->rr.seg_start[0] = 0;
    for (int64_t e = 0; e < r->n + EMBER_ROUTE_PAD; e++)
        x->remap[e] = e < r->n && r->row[e] == EMBER_ROW_DROPPED ? EMBER_ROW_DROPPED : 0;
    return EMBER_OK;
}

int ember_dist_forward(ember_collection *c, int32_t p, float *pooled, float *sequence)
{
    ember_xchg *x;
    int st = ember_xchg_prepare(c, p, &x);
    for (int32_t m = 0; m < c->num_rounds && st == EMBER_OK; m++)
        st = forward_round(c, &c->ptables[p], x, m, pooled, sequence);
    if (st != EMBER_OK)
        return st;
    st = ember_xchg_finish(c, &c->ptables[p], x);
    return ember_dist_agree(c, st, NULL);
}
