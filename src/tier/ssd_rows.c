/*
 * ssd_rows.c: whole-row access to an SSD store outside the step
 * (ember_table_read/write, checkpoints, ember_load) and the flush of dirty
 * rows at save.  Cached rows are used in place; the others go through a
 * page-aligned scratch buffer of records: read from the file (runs of
 * records next to each other in the log move with one request), copied from
 * a log buffer, or the initializer's; written ones are appended to the log.
 * A store of half rows or state hands out fp32 rows instead (ssd_half.c),
 * with the same scratch and requests.
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
    if (bulk_bytes(s, n * s->rec_bytes) ||
        ember_reserve((void **)&s->bulk_slot, &s->bulk_slot_cap, n + 1, sizeof(int64_t)) ||
        ember_reserve((void **)&s->bulk_req, &s->bulk_req_cap, n + 1, sizeof(ember_io_req)))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for accessing %lld rows", s->label, (long long)n);
    return EMBER_OK;
}

void ssd_fetch_record(ssd_store *s, int64_t *nq, uint32_t row, char *rec)
{
    if (!ssd_log_written(&s->log, row)) {
        ssd_init_record(s, row, rec, rec + s->vrow);
        return;
    }
    const char *buffered = ssd_log_buffered(&s->log, row);
    if (buffered) {
        memcpy(rec, buffered, (size_t)s->rec_bytes);
        return;
    }
    /* the last request grows when the record follows it in memory and in
     * the file (rows appended together, e.g. by a load of the table) */
    int64_t off = ssd_log_offset(&s->log, row);
    ember_io_req *q = *nq ? &s->bulk_req[*nq - 1] : NULL;
    if (q && (char *)q->iov[0].iov_base + q->iov[0].iov_len == rec && q->offset + (int64_t)q->iov[0].iov_len == off &&
        (int64_t)q->iov[0].iov_len + s->rec_bytes <= SSD_RUN_BYTES) {
        q->iov[0].iov_len += (size_t)s->rec_bytes;
        return;
    }
    q = &s->bulk_req[(*nq)++];
    memset(q, 0, sizeof *q);
    q->offset = off;
    q->iov[0].iov_base = rec;
    q->iov[0].iov_len = (size_t)s->rec_bytes;
    q->op = EMBER_IO_READ;
    q->row = row;
    q->bounce = s->direct;
}

int ssd_bulk_run(ssd_store *s, int64_t nq)
{
    double t0 = ssd_now();
    int64_t failed = ember_io_run(s->io, s->fd, s->bulk_req, nq), nbad = 0;
    s->st.io_seconds += ssd_now() - t0;
    for (int64_t k = 0; k < nq; k++) {
        nbad += s->bulk_req[k].err != 0;
        if (!s->bulk_req[k].err) {
            s->st.bytes_read += (int64_t)s->bulk_req[k].iov[0].iov_len;
            s->st.reads++;
        }
    }
    return failed >= 0 ? ssd_io_fail(s, &s->bulk_req[failed], nbad) : EMBER_OK;
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
        char *rec = s->bulk + i * s->rec_bytes;
        values[i] = (float *)rec;
        if (state)
            state[i] = s->sf ? (float *)(rec + s->vrow) : NULL;
        ssd_fetch_record(s, &nq, rows[i], rec);
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
    for (int64_t i = 0; i < n; i++) {
        if (s->bulk_slot[i] >= 0) {
            s->flags[s->bulk_slot[i]] |= F_DIRTY;
            continue;
        }
        const char *rec = s->bulk + i * s->rec_bytes;
        int st = ssd_save_record(s, rows[i], rec, rec + s->vrow);
        if (st != EMBER_OK)
            return st;
    }
    return EMBER_OK;
}

/* Every dirty slot to the log, then every segment to the file. */
int ssd_flush(ember_store *bs)
{
    ssd_store *s = (ssd_store *)bs;
    int st = ssd_bg_finish(s);
    if (st != EMBER_OK)
        return st;
    int e = ssd_log_check(&s->log);
    for (int64_t x = 0; x < s->used && !e; x++) {
        if (!(s->flags[x] & F_DIRTY))
            continue;
        if ((st = ssd_save_record(s, s->slot_row[x], s->vslot + x * s->vrow, s->sf ? s->sslot + x * s->srow : NULL)))
            return st;
        s->flags[x] &= (uint8_t)~F_DIRTY;
    }
    double t0 = ssd_now();
    if (!e)
        e = ssd_log_sync(&s->log);
    s->st.io_seconds += ssd_now() - t0;
    return e ? ssd_write_fail(s, e) : EMBER_OK;
}
