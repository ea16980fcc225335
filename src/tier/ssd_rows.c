/*
 * ssd_rows.c: whole-row access to an SSD store outside the step
 * (ember_table_read/write, checkpoints, ember_load) and the flush of dirty
 * rows at save.  Cached rows are used in place; the others go through a
 * page-aligned scratch buffer in the file's record layout, so that runs of
 * consecutive rows move with one request (O_DIRECT included).  A store of
 * half rows or state hands out fp32 rows instead (ssd_half.c), with the
 * same scratch and requests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/reserve.h"
#include "tier/ssd_impl.h"

/* ------------------------------------------------------- whole-row access */

/* The scratch records, page-aligned (O_DIRECT reads runs into it). */
static int bulk_bytes(ssd_store *s, int64_t bytes)
{
    if (bytes + 1 <= s->bulk_cap)
        return 0;
    int64_t c = s->bulk_cap ? 2 * s->bulk_cap : 16384;
    while (c < bytes + 1)
        c *= 2;
    void *b = NULL;
    if (posix_memalign(&b, 4096, (size_t)c) != 0)
        return EMBER_ENOMEM;
    free(s->bulk);
    s->bulk = b;
    s->bulk_cap = c;
    return 0;
}

int ssd_bulk_reserve(ssd_store *s, int64_t n)
{
    if (bulk_bytes(s, n * s->stride) ||
        ember_reserve((void **)&s->bulk_slot, &s->bulk_slot_cap, n + 1, sizeof(int64_t)) ||
        ember_reserve((void **)&s->bulk_req, &s->bulk_req_cap, n + 1, sizeof(ember_io_req)))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for accessing %lld rows", s->label, (long long)n);
    return EMBER_OK;
}

/* Adds row's record at rec to the row-access requests: the last request
 * grows when it ends right before rec, in memory and in the file. */
void ssd_add_record(ssd_store *s, int64_t *nq, uint32_t row, char *rec, int op)
{
    ember_io_req *q = *nq ? &s->bulk_req[*nq - 1] : NULL;
    int64_t off = (int64_t)row * s->stride;
    if (q && q->op == op && (char *)q->iov[0].iov_base + q->iov[0].iov_len == rec &&
        q->offset + (int64_t)q->iov[0].iov_len == off) {
        q->iov[0].iov_len += (size_t)s->stride;
        return;
    }
    q = &s->bulk_req[(*nq)++];
    memset(q, 0, sizeof *q);
    q->offset = off;
    q->iov[0].iov_base = rec;
    q->iov[0].iov_len = (size_t)s->stride;
    q->op = op;
}

int ssd_bulk_run(ssd_store *s, int64_t nq)
{
    double t0 = ssd_now();
    int64_t failed = ember_io_run(s->io, s->fd, s->bulk_req, 0, nq);
    s->st.io_seconds += ssd_now() - t0;
    for (int64_t k = 0; k < nq; k++) {
        ember_io_req *q = &s->bulk_req[k];
        if (q->err)
            continue;
        int64_t first = q->offset / s->stride, cnt = (int64_t)q->iov[0].iov_len / s->stride;
        if (q->op == EMBER_IO_READ) {
            s->st.bytes_read += cnt * s->rec_bytes;
            continue;
        }
        for (int64_t r = first; r < first + cnt; r++)
            ssd_set_written(s, (uint32_t)r);
        s->st.writes += cnt;
        s->st.bytes_written += cnt * s->rec_bytes;
    }
    return failed >= 0 ? ssd_io_fail(s, &s->bulk_req[failed], 1) : EMBER_OK;
}

/* Row access outside the step (ember_table_read/write, checkpoints): cached
 * rows are used in place; others go through a scratch buffer in the file's
 * record layout, so runs of consecutive rows move with one request. */
int ssd_acquire(ember_store *bs, const uint32_t *rows, int64_t n, float **values, float **state)
{
    ssd_store *s = (ssd_store *)bs;
    int st = ssd_bg_finish(s);
    if (st != EMBER_OK)
        return st;
    if (s->venc || s->senc)
        return ssd_half_acquire(s, rows, n, values, state);
    if ((st = ssd_bulk_reserve(s, n)) != EMBER_OK)
        return st;
    int64_t nq = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = ssd_map_find(s, rows[i]);
        s->bulk_slot[i] = x;
        if (x >= 0) {
            values[i] = s->base.values + x * s->dim;
            if (state)
                state[i] = s->sf ? s->base.state + x * s->sf : NULL;
            continue;
        }
        char *rec = s->bulk + i * s->stride;
        values[i] = (float *)rec;
        if (state)
            state[i] = s->sf ? (float *)(rec + s->vrow) : NULL;
        if (!ssd_is_written(s, rows[i]))
            ssd_init_record(s, rows[i], rec, rec + s->vrow);
        else
            ssd_add_record(s, &nq, rows[i], rec, EMBER_IO_READ);
    }
    return ssd_bulk_run(s, nq);
}

int ssd_release(ember_store *bs, const uint32_t *rows, int64_t n, int dirty)
{
    ssd_store *s = (ssd_store *)bs;
    if (!dirty)
        return EMBER_OK;
    if (s->venc || s->senc)
        return ssd_half_release(s, rows, n);
    int64_t nq = 0;
    for (int64_t i = 0; i < n; i++) {
        if (s->bulk_slot[i] >= 0) {
            s->flags[s->bulk_slot[i]] |= F_DIRTY;
            continue;
        }
        ssd_add_record(s, &nq, rows[i], s->bulk + i * s->stride, EMBER_IO_WRITE);
    }
    return ssd_bulk_run(s, nq);
}

int ssd_flush(ember_store *bs)
{
    ssd_store *s = (ssd_store *)bs;
    int st = ssd_bg_finish(s);
    if (st != EMBER_OK)
        return st;
    int64_t nd = 0;
    for (int64_t x = 0; x < s->used; x++)
        nd += (s->flags[x] & F_DIRTY) != 0;
    if (nd == 0)
        return EMBER_OK;
    if (ember_reserve((void **)&s->bulk_req, &s->bulk_req_cap, nd, sizeof(ember_io_req)))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for writing %lld rows back", s->label, (long long)nd);
    int64_t nq = 0;
    for (int64_t x = 0; x < s->used; x++)
        if (s->flags[x] & F_DIRTY)
            ssd_slot_req(s, &s->bulk_req[nq++], (int32_t)x, s->slot_row[x], EMBER_IO_WRITE);
    double t0 = ssd_now();
    int64_t failed = ember_io_run(s->io, s->fd, s->bulk_req, 0, nq);
    s->st.io_seconds += ssd_now() - t0;
    int64_t nbad = 0;
    for (int64_t k = 0; k < nq; k++) {
        ember_io_req *q = &s->bulk_req[k];
        if (q->err) {
            nbad++;
            continue;
        }
        int64_t x = ssd_map_find(s, q->row);
        s->flags[x] &= (uint8_t)~F_DIRTY;
        ssd_set_written(s, q->row);
        s->st.writes++;
        s->st.bytes_written += s->rec_bytes;
    }
    return failed >= 0 ? ssd_io_fail(s, &s->bulk_req[failed], nbad) : EMBER_OK;
}
