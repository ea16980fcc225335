/*
 * rows.c: row access over the world (ember_table_read / write / read_state).
 *
 * A row of the caller's buffer is assembled from *pieces*: contiguous runs of
 * floats that one rank holds (a whole row under ROW and TABLE placement, a
 * column slice under COLUMN, for Adam one slice of m and one of v, for
 * row-wise kinds the row's float).  A read
 * packs each rank's pieces in row order, all-gathers them (every rank knows
 * every rank's piece sizes, so no sizes travel), and unpacks them in rank
 * order.  A write stores, on each rank, the pieces it holds; it needs no
 * messages.  Replicated tables are read from rank 0's copy (the copies are
 * bit-identical) and written on every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "collection/shard.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"
#include "quant/quant.h"
#include "step/rows.h"
#include "step/step.h"

typedef ember_row_piece piece;

/* Real columns of rank r's COLUMN slice. */
static int32_t slice_width(const ember_ptable *pt, int32_t r)
{
    int32_t w = pt->dim - r * pt->local_dim;
    return w < 0 ? 0 : w > pt->local_dim ? pt->local_dim : w;
}

int ember_row_pieces(const ember_ptable *pt, int32_t r, int state, int write, piece out[3])
{
    int32_t dim = pt->dim, c = pt->local_dim;
    ember_optimizer_kind kind = pt->opt.kind;
    int whole = pt->placement == EMBER_PLACE_ROW || pt->placement == EMBER_PLACE_TABLE ||
                (pt->placement == EMBER_PLACE_REPLICATED && (write || r == 0));
    if (pt->placement == EMBER_PLACE_REPLICATED && !whole)
        return 0;
    int32_t width = state ? ember_state_floats(kind, dim) : dim;
    if (width == 0)
        return 0;
    if (whole) {
        out[0] = (piece){0, 0, width};
        return 1;
    }
    /* COLUMN: each state vector's slice (Adam: m, v), then the floats of
     * the whole row (row-wise kinds), equal on every rank: rank 0's read,
     * every copy written */
    int32_t w = slice_width(pt, r), nv = state ? ember_state_vectors(kind) : 1;
    int32_t nr = state ? ember_state_row_floats(kind) : 0;
    int np = 0;
    for (int32_t j = 0; j < nv && w > 0; j++)
        out[np++] = (piece){j * c, j * dim + r * c, w};
    if (nr && (write || r == 0))
        out[np++] = (piece){nv * c, nv * dim, nr};
    return np;
}

/* Rows x in [0, m) with x % W == r. */
static int64_t residue_count(int64_t m, int32_t W, int32_t r) { return m > r ? (m - r - 1) / W + 1 : 0; }

/* Rows of physical range [a, a + n) that rank r holds. */
static int64_t held_rows(const ember_ptable *pt, int32_t W, int32_t r, int64_t a, int64_t n)
{
    switch (pt->placement) {
    case EMBER_PLACE_ROW: return residue_count(a + n, W, r) - residue_count(a, W, r);
    case EMBER_PLACE_TABLE: return r == pt->owner ? n : 0;
    default: return n;
    }
}

/* Copies rank-local pieces between the store and buf (rows of `width`).
 * Only the SSD tier can fail (EMBER_EIO, message on the collection). */
static int copy_local(ember_collection *c, const ember_ptable *pt, int64_t phys0, int64_t count,
                      float *buf, int32_t width, int to_table, int state)
{
    int32_t W = c->world->size, rank = c->world->rank;
    ember_store *s = pt->store;
    piece pc[3];
    int np = ember_row_pieces(pt, rank, state, to_table, pc);
    if (np == 0)
        return EMBER_OK;
    for (int64_t i = 0; i < count; i++) {
        uint32_t phys = (uint32_t)(phys0 + i);
        if (!ember_shard_holds(pt, W, rank, phys))
            continue;
        uint32_t row = ember_shard_local(pt, W, phys);
        float *v, *sv;
        if (s->ops->acquire(s, &row, 1, &v, &sv) != EMBER_OK)
            return ember_fail(c, EMBER_EIO, "%s", s->errmsg);
        float *stored = state ? sv : v;
        for (int k = 0; k < np; k++) {
            float *b = buf + i * width + pc[k].dst;
            if (to_table)
                memcpy(stored + pc[k].src, b, sizeof(float) * (size_t)pc[k].len);
            else
                memcpy(b, stored + pc[k].src, sizeof(float) * (size_t)pc[k].len);
        }
        if (s->ops->release(s, &row, 1, to_table) != EMBER_OK)
            return ember_fail(c, EMBER_EIO, "%s", s->errmsg);
    }
    return EMBER_OK;
}

/* A write to encoded rows: every row must be encodable before any is
 * written (each rank checks all of them, so all agree without a message). */
static int check_encodable(ember_collection *c, const ember_ltable *lt, const ember_store *s, int64_t first,
                           int64_t count, const float *buf)
{
    uint8_t *row = malloc((size_t)s->qrow_bytes);
    if (!row)
        return ember_fail(c, EMBER_ENOMEM, "out of memory");
    int64_t bad = -1;
    for (int64_t i = 0; i < count && bad < 0; i++)
        if (ember_quant_row((ember_encoding)s->encoding, s->dim, buf + i * s->dim, row) != 0)
            bad = i;
    free(row);
    if (bad < 0)
        return EMBER_OK;
    return ember_fail(c, EMBER_EINPUT, "table '%s' row %lld: %s; nothing was written", lt->cfg.name,
                      (long long)(first + bad), ember_quant_refusal((ember_encoding)s->encoding));
}

int ember_dist_rows(ember_collection *c, int32_t t, int64_t first, int64_t count, float *buf, int to_table,
                    int state)
{
    if (to_table) { /* a stale batch begun reads the rows as they were before */
        int settled = ember_schedule_settle(c);
        if (settled != EMBER_OK)
            return settled;
    }
    const ember_ltable *lt = &c->tables[t];
    const ember_ptable *pt = &c->ptables[lt->ptable];
    int32_t W = c->world->size, rank = c->world->rank;
    int32_t width = state ? ember_state_floats(pt->opt.kind, pt->dim) : pt->dim;
    int64_t phys0 = lt->offset + first;
    if (to_table && !state && pt->store->encoding) {
        int st = check_encodable(c, lt, pt->store, first, count, buf);
        if (st != EMBER_OK)
            return st;
    }
    if (to_table || W == 1) {
        int st = copy_local(c, pt, phys0, count, buf, width, to_table, state);
        if (st == EMBER_OK && to_table) /* every rank has the rows: its hot copies too */
            ember_hot_write(pt, phys0, count, buf, state);
        return st;
    }
    /* read over the world: sizes of every rank's pieces, then one all-gather */
    int64_t *cnt = calloc((size_t)W * 3, sizeof(int64_t));
    if (!cnt)
        return ember_fail(c, EMBER_ENOMEM, "out of memory");
    int64_t *zero = cnt + W, *dsp = cnt + 2 * (int64_t)W, total = 0;
    for (int32_t r = 0; r < W; r++) {
        piece pc[3];
        int np = ember_row_pieces(pt, r, state, 0, pc);
        int64_t per_row = 0;
        for (int k = 0; k < np; k++)
            per_row += pc[k].len;
        cnt[r] = held_rows(pt, W, r, phys0, count) * per_row * (int64_t)sizeof(float);
        dsp[r] = total;
        total += cnt[r];
    }
    float *recv = malloc((size_t)total + 1);
    float *mine = malloc((size_t)cnt[rank] + 1);
    int st = EMBER_OK;
    if (!recv || !mine)
        st = ember_fail(c, EMBER_ENOMEM, "out of memory for a %lld-byte row read", (long long)total);
    /* agree before exchanging, so an allocation failure on one rank fails all */
    st = ember_dist_agree(c, st, NULL);
    if (st == EMBER_OK) {
        piece pc[3];
        int np = ember_row_pieces(pt, rank, state, 0, pc), lst = EMBER_OK;
        float *o = mine;
        for (int64_t i = 0; i < count && np; i++) {
            uint32_t phys = (uint32_t)(phys0 + i);
            if (!ember_shard_holds(pt, W, rank, phys))
                continue;
            uint32_t row = ember_shard_local(pt, W, phys);
            float *v, *sv;
            if (pt->store->ops->acquire(pt->store, &row, 1, &v, &sv) != EMBER_OK) {
                lst = ember_fail(c, EMBER_EIO, "%s", pt->store->errmsg);
                break; /* the exchange still runs (it is collective); then agreed */
            }
            for (int k = 0; k < np; k++) {
                memcpy(o, (state ? sv : v) + pc[k].src, sizeof(float) * (size_t)pc[k].len);
                o += pc[k].len;
            }
            pt->store->ops->release(pt->store, &row, 1, 0);
        }
        int64_t *scnt = zero; /* the same block to every rank */
        for (int32_t r = 0; r < W; r++)
            scnt[r] = cnt[rank];
        int64_t *sdsp = calloc((size_t)W, sizeof(int64_t));
        st = sdsp ? ember_comm_alltoallv(c->world, mine, scnt, sdsp, recv, cnt, dsp) : EMBER_ENOMEM;
        free(sdsp);
        if (st == EMBER_ECOMM) {
            c->panicked = 1;
            ember_fail(c, st, "%s", c->world->errmsg);
        } else if (st != EMBER_OK) {
            ember_fail(c, st, "out of memory");
        }
        if (st == EMBER_OK)
            st = ember_dist_agree(c, lst, NULL);
    }
    if (st == EMBER_OK) {
        for (int32_t r = 0; r < W; r++) {
            piece pc[3];
            int np = ember_row_pieces(pt, r, state, 0, pc);
            const float *in = recv + dsp[r] / (int64_t)sizeof(float);
            for (int64_t i = 0; i < count && np; i++) {
                if (!ember_shard_holds(pt, W, r, (uint32_t)(phys0 + i)))
                    continue;
                for (int k = 0; k < np; k++) {
                    memcpy(buf + i * width + pc[k].dst, in, sizeof(float) * (size_t)pc[k].len);
                    in += pc[k].len;
                }
            }
        }
    }
    free(recv);
    free(mine);
    free(cnt);
    return st;
}

int ember_dist_write_encoded(ember_collection *c, int32_t t, int64_t first, int64_t count, const uint8_t *rows,
                             int64_t row_bytes)
{
    const ember_ltable *lt = &c->tables[t];
    const ember_ptable *pt = &c->ptables[lt->ptable];
    ember_store *s = pt->store;
    if (!s->encoding || s->qrow_bytes != row_bytes)
        return ember_fail(c, EMBER_EINVAL, "table '%s': rows of %lld bytes, the table holds %s rows of %lld",
                          lt->cfg.name, (long long)row_bytes,
                          s->encoding ? ember_encoding_name((ember_encoding)s->encoding) : "fp32",
                          (long long)s->qrow_bytes);
    int32_t W = c->world->size, rank = c->world->rank;
    for (int64_t i = 0; i < count; i++) {
        uint32_t phys = (uint32_t)(lt->offset + first + i);
        if (ember_shard_holds(pt, W, rank, phys))
            memcpy(s->qrows + (int64_t)ember_shard_local(pt, W, phys) * row_bytes, rows + i * row_bytes,
                   (size_t)row_bytes);
    }
    return EMBER_OK;
}

/* ------------------------------------------- the public calls (include/ember.h) */

static int check_range(const ember_collection *c, int32_t table, int64_t first, int64_t count)
{
    if (table < 0 || table >= c->cfg.num_tables)
        return ember_fail((ember_collection *)c, EMBER_EINVAL, "table %d outside [0, %d)", table,
                          c->cfg.num_tables);
    const ember_ltable *t = &c->tables[table];
    if (first < 0 || count < 0 || first > t->cfg.rows - count)
        return ember_fail((ember_collection *)c, EMBER_EINVAL,
                          "table '%s': rows [%lld, %lld) outside [0, %lld)", t->cfg.name,
                          (long long)first, (long long)(first + count), (long long)t->cfg.rows);
    return EMBER_OK;
}

int ember_table_read(const ember_collection *c, int32_t table, int64_t first, int64_t count, float *out)
{
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows((ember_collection *)c, table, first, count, out, 0, 0);
}

int ember_table_write(ember_collection *c, int32_t table, int64_t first, int64_t count, const float *in)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows(c, table, first, count, (float *)in, 1, 0);
}

int ember_table_read_state(const ember_collection *c, int32_t table, int64_t first, int64_t count,
                           float *out)
{
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows((ember_collection *)c, table, first, count, out, 0, 1);
}

int ember_table_write_state(ember_collection *c, int32_t table, int64_t first, int64_t count, const float *in)
{
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    int st = check_range(c, table, first, count);
    return st != EMBER_OK ? st : ember_dist_rows(c, table, first, count, (float *)in, 1, 1);
}
