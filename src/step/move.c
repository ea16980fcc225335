/*
 * move.c: every table's rows and optimizer state from one collection to
 * another of the same tables placed otherwise, in a running job (rows.h,
 * ember_move_rows; docs/adaptive.md, "Re-planning while training").
 *
 * A row is made of pieces (rows.c): a whole row under ROW and TABLE
 * placement, a column slice and the row-wise floats under COLUMN.  For each
 * row, rank s *provides* pieces of it in `from` (its holder; a replicated
 * row from rank row % W, so the copies share the sending) and rank d
 * *stores* pieces of it in `to`; every overlap of a provided piece with a
 * stored one travels from s to d (a local copy when s = d).  Both sides
 * walk the rows, the senders and the pieces in the same order, so no sizes
 * or offsets travel: one all-to-all per chunk of rows, values then state.
 * Hot rows (exchange/hot.h) of a table that keeps them in `to` are the same
 * ones after (set collectively).  `from` is only read; `to` is written, so
 * a failure leaves `from` as it was and `to` to be thrown away.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "collection/shard.h"
#include "comm/comm.h"
#include "core/reserve.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "step/rows.h"
#include "step/step.h"

#define MOVE_CHUNK_FLOATS (INT64_C(1) << 23) /* floats a rank sends per chunk, about */

/* The overlaps of pieces p[np] (provided, in `from`) with q[nq] (stored,
 * in `to`), in whole-row offsets, walked in one order: each copied from src
 * to dst, where a side given as packed (a message) takes the overlaps one
 * after another and a stored row takes them at their pieces' offsets; with
 * src NULL only counted.  Returns the floats. */
static int64_t overlaps(const ember_row_piece *p, int np, const ember_row_piece *q, int nq, const float *src,
                        int src_packed, float *dst, int dst_packed)
{
    int64_t n = 0;
    for (int i = 0; i < np; i++)
        for (int j = 0; j < nq; j++) {
            int32_t lo = p[i].dst > q[j].dst ? p[i].dst : q[j].dst;
            int32_t hi = p[i].dst + p[i].len < q[j].dst + q[j].len ? p[i].dst + p[i].len : q[j].dst + q[j].len;
            if (hi <= lo)
                continue;
            if (src)
                memcpy(dst + (dst_packed ? n : q[j].src + (lo - q[j].dst)),
                       src + (src_packed ? n : p[i].src + (lo - p[i].dst)), sizeof(float) * (size_t)(hi - lo));
            n += hi - lo;
        }
    return n;
}

typedef struct mover {
    ember_collection *from, *to;
    int32_t W, me;
    int64_t *scnt, *sdsp, *rcnt, *rdsp, *cur; /* [W] each, floats then bytes */
    float *sbuf, *rbuf;
    int64_t scap, rcap;                 /* floats (core/reserve.h) */
    /* a chunk's pieces: those rank s provides of a row it provides, those
     * rank d stores of a row it stores (they do not depend on the row), and
     * the floats of their overlaps */
    ember_row_piece *P, *Q;             /* [W][3] */
    int *np, *nq;                       /* [W] */
    int64_t *ov;                        /* [W][W]: s provides, d stores */
} mover;

/* Does rank r provide physical row phys of pt (from)? */
static int provides_row(const ember_ptable *pt, int32_t W, int32_t r, uint32_t phys)
{
    if (!ember_shard_holds(pt, W, r, phys))
        return 0;
    return pt->placement != EMBER_PLACE_REPLICATED || (int32_t)(phys % (uint32_t)W) == r;
}

/* A row of a store, values or state, in floats: direct (the memory tier's
 * fp32 rows) or acquired (staged or encoded: *acq set, released after). */
static float *row_of(const ember_ptable *pt, uint32_t local, int state, int *acq, int *failed)
{
    ember_store *st = pt->store;
    float *base = state ? st->state : st->values;
    *acq = 0;
    if (base && !st->staged)
        return base + (int64_t)local * (state ? st->state_floats : st->dim);
    float *v, *sv;
    if (st->ops->acquire(st, &local, 1, &v, &sv) != EMBER_OK) {
        *failed = 1;
        return NULL;
    }
    *acq = 1;
    return state ? sv : v;
}

/* One chunk: rows [r0, r0 + n) of logical table t, values or state. */
static int move_chunk(mover *m, int32_t t, int64_t r0, int64_t n, int state)
{
    ember_collection *A = m->from, *B = m->to;
    const ember_ltable *la = &A->tables[t], *lb = &B->tables[t];
    const ember_ptable *pa = &A->ptables[la->ptable], *pb = &B->ptables[lb->ptable];
    const int32_t W = m->W, me = m->me;
    for (int32_t r = 0; r < W; r++) { /* the pieces, once */
        m->np[r] = ember_row_pieces(pa, r, state, 0, &m->P[3 * r]);
        if (pa->placement == EMBER_PLACE_REPLICATED) { /* the whole row, from row % W */
            int32_t width = state ? ember_state_floats(pa->opt.kind, pa->dim) : pa->dim;
            m->P[3 * r] = (ember_row_piece){0, 0, width};
            m->np[r] = width > 0;
        }
        m->nq[r] = ember_row_pieces(pb, r, state, 1, &m->Q[3 * r]);
    }
    for (int32_t s = 0; s < W; s++)
        for (int32_t d = 0; d < W; d++)
            m->ov[s * W + d] = overlaps(&m->P[3 * s], m->np[s], &m->Q[3 * d], m->nq[d], NULL, 0, NULL, 0);
    /* sizes: what this rank sends to each d, and receives from each s */
    memset(m->scnt, 0, sizeof(int64_t) * (size_t)W);
    memset(m->rcnt, 0, sizeof(int64_t) * (size_t)W);
    for (int64_t i = 0; i < n; i++) {
        uint32_t fa = (uint32_t)(la->offset + r0 + i), fb = (uint32_t)(lb->offset + r0 + i);
        if (provides_row(pa, W, me, fa))
            for (int32_t d = 0; d < W; d++)
                if (d != me && ember_shard_holds(pb, W, d, fb))
                    m->scnt[d] += m->ov[me * W + d];
        if (ember_shard_holds(pb, W, me, fb))
            for (int32_t s = 0; s < W; s++)
                if (s != me && provides_row(pa, W, s, fa))
                    m->rcnt[s] += m->ov[s * W + me];
    }
    int64_t st_total = 0, rt_total = 0;
    for (int32_t r = 0; r < W; r++) {
        m->sdsp[r] = st_total, st_total += m->scnt[r];
        m->rdsp[r] = rt_total, rt_total += m->rcnt[r];
    }
    int st = ember_reserve((void **)&m->sbuf, &m->scap, st_total + 1, sizeof(float)) ||
                     ember_reserve((void **)&m->rbuf, &m->rcap, rt_total + 1, sizeof(float))
                 ? EMBER_ENOMEM
                 : EMBER_OK;
    if (st != EMBER_OK)
        ember_fail(B, st, "out of memory moving table '%s'", la->cfg.name);
    if ((st = ember_dist_agree(B, st, NULL)) != EMBER_OK)
        return st;
    /* pack (and the local copies), row by row */
    for (int32_t d = 0; d < W; d++)
        m->cur[d] = m->sdsp[d];
    int failed = 0;
    for (int64_t i = 0; i < n && !failed; i++) {
        uint32_t fa = (uint32_t)(la->offset + r0 + i), fb = (uint32_t)(lb->offset + r0 + i);
        if (!provides_row(pa, W, me, fa))
            continue;
        int acq_a, acq_b;
        uint32_t ra = ember_shard_local(pa, W, fa);
        const float *src = row_of(pa, ra, state, &acq_a, &failed);
        for (int32_t d = 0; d < W && src; d++) {
            if (!ember_shard_holds(pb, W, d, fb) || !m->ov[me * W + d])
                continue;
            if (d != me) {
                m->cur[d] += overlaps(&m->P[3 * me], m->np[me], &m->Q[3 * d], m->nq[d], src, 0, m->sbuf + m->cur[d], 1);
                continue;
            }
            uint32_t rb = ember_shard_local(pb, W, fb);
            float *dst = row_of(pb, rb, state, &acq_b, &failed);
            if (!dst)
                break;
            overlaps(&m->P[3 * me], m->np[me], &m->Q[3 * me], m->nq[me], src, 0, dst, 0); /* stored to stored */
            if (acq_b)
                pb->store->ops->release(pb->store, &rb, 1, 1);
        }
        if (acq_a && src)
            pa->store->ops->release(pa->store, &ra, 1, 0);
    }
    int lst = failed ? ember_fail(B, EMBER_EIO, "moving table '%s': %s", la->cfg.name, pa->store->errmsg) : EMBER_OK;
    /* bytes, for the exchange */
    for (int32_t r = 0; r < W; r++) {
        m->scnt[r] *= (int64_t)sizeof(float), m->sdsp[r] *= (int64_t)sizeof(float);
        m->rcnt[r] *= (int64_t)sizeof(float), m->rdsp[r] *= (int64_t)sizeof(float);
    }
    st = W > 1 ? ember_comm_alltoallv(A->world, m->sbuf, m->scnt, m->sdsp, m->rbuf, m->rcnt, m->rdsp) : EMBER_OK;
    if (st == EMBER_ECOMM)
        return ember_dist_comm_failed(B);
    if (st != EMBER_OK)
        lst = ember_fail(B, st, "out of memory moving table '%s'", la->cfg.name);
    if ((st = ember_dist_agree(B, lst, NULL)) != EMBER_OK)
        return st;
    /* unpack: each row this rank stores, from each sender in rank order */
    for (int32_t s = 0; s < W; s++)
        m->cur[s] = m->rdsp[s] / (int64_t)sizeof(float);
    for (int64_t i = 0; i < n && !failed; i++) {
        uint32_t fa = (uint32_t)(la->offset + r0 + i), fb = (uint32_t)(lb->offset + r0 + i);
        if (!ember_shard_holds(pb, W, me, fb))
            continue;
        uint32_t rb = ember_shard_local(pb, W, fb);
        float *dst = NULL;
        int acq_b = 0;
        for (int32_t s = 0; s < W; s++) {
            if (s == me || !m->ov[s * W + me] || !provides_row(pa, W, s, fa))
                continue;
            if (!dst && !(dst = row_of(pb, rb, state, &acq_b, &failed)))
                break;
            m->cur[s] += overlaps(&m->P[3 * s], m->np[s], &m->Q[3 * me], m->nq[me], m->rbuf + m->cur[s], 1, dst, 0);
        }
        if (dst && acq_b)
            pb->store->ops->release(pb->store, &rb, 1, 1);
    }
    lst = failed ? ember_fail(B, EMBER_EIO, "moving table '%s': %s", la->cfg.name, pb->store->errmsg) : EMBER_OK;
    return ember_dist_agree(B, lst, NULL);
}

int ember_move_rows(ember_collection *from, ember_collection *to)
{
    if (from->cfg.num_tables != to->cfg.num_tables || from->world->size != to->world->size)
        return ember_fail(to, EMBER_EINVAL, "ember_move_rows: collections of %d and %d tables over %d and %d ranks",
                          from->cfg.num_tables, to->cfg.num_tables, from->world->size, to->world->size);
    for (int32_t t = 0; t < from->cfg.num_tables; t++) {
        const ember_table_config *a = &from->tables[t].cfg, *b = &to->tables[t].cfg;
        if (a->rows != b->rows || a->dim != b->dim || a->optimizer.kind != b->optimizer.kind ||
            a->kind != EMBER_TABLE_FIXED || b->kind != EMBER_TABLE_FIXED)
            return ember_fail(to, EMBER_EINVAL, "ember_move_rows: table '%s' is not the same fixed table in both",
                              a->name);
    }
    mover m;
    memset(&m, 0, sizeof m);
    m.from = from, m.to = to, m.W = from->world->size, m.me = from->world->rank;
    m.scnt = calloc((size_t)m.W * ((size_t)m.W + 5), sizeof(int64_t));
    m.P = calloc((size_t)m.W * 6, sizeof *m.P);
    m.np = calloc((size_t)m.W * 2, sizeof *m.np);
    int st = m.scnt && m.P && m.np ? EMBER_OK : ember_fail(to, EMBER_ENOMEM, "out of memory");
    if ((st = ember_dist_agree(to, st, NULL)) != EMBER_OK) {
        free(m.scnt), free(m.P), free(m.np);
        return st;
    }
    m.sdsp = m.scnt + m.W, m.rcnt = m.scnt + 2 * m.W, m.rdsp = m.scnt + 3 * m.W, m.cur = m.scnt + 4 * m.W;
    m.ov = m.scnt + 5 * m.W;
    m.Q = m.P + 3 * m.W;
    m.nq = m.np + m.W;
    for (int32_t t = 0; t < from->cfg.num_tables && st == EMBER_OK; t++) {
        const ember_ptable *pa = &from->ptables[from->tables[t].ptable];
        for (int state = 0; state < 2 && st == EMBER_OK; state++) {
            int32_t width = state ? ember_state_floats(pa->opt.kind, pa->dim) : pa->dim;
            if (width == 0)
                continue;
            int64_t rows = from->tables[t].cfg.rows, chunk = MOVE_CHUNK_FLOATS / ((int64_t)width * m.W);
            chunk = chunk < 1024 ? 1024 : chunk;
            for (int64_t r0 = 0; r0 < rows && st == EMBER_OK; r0 += chunk)
                st = move_chunk(&m, t, r0, rows - r0 < chunk ? rows - r0 : chunk, state);
        }
    }
    free(m.scnt), free(m.P), free(m.np);
    free(m.sbuf);
    free(m.rbuf);
    /* hot rows: a table that keeps them keeps the same ones (the same list
     * on every rank; set collectively, their copies read from the owners) */
    for (int32_t t = 0; t < from->cfg.num_tables && st == EMBER_OK; t++) {
        const ember_ltable *la = &from->tables[t];
        const ember_hot *h = from->ptables[la->ptable].hot;
        if (!h || !to->ptables[to->tables[t].ptable].hot)
            continue;
        int64_t *ids = malloc(sizeof(int64_t) * (size_t)(h->n + 1)), n = 0;
        if ((st = ember_dist_agree(to, ids ? EMBER_OK : ember_fail(to, EMBER_ENOMEM, "out of memory"), NULL)) !=
            EMBER_OK) {
            free(ids);
            break;
        }
        for (int64_t i = 0; i < h->n; i++)
            if (h->rows[i] >= la->offset && h->rows[i] < la->offset + la->cfg.rows && n < la->cfg.hot_rows)
                ids[n++] = (int64_t)h->rows[i] - la->offset;
        st = ember_set_hot_rows(to, t, ids, n);
        free(ids);
    }
    if (st == EMBER_OK) { /* the next step is the one `from` would take */
        to->stats = from->stats;
        to->lr_scale = from->lr_scale;
        to->training = from->training;
    }
    return st;
}
