/*
 * ssd_log.c: the store file as a log of row records (ssd_log.h): appends
 * into segment buffers, the writer thread, reads of records still in a
 * buffer, and greedy compaction.
 *
 * Only the caller's thread changes the index, the live counts and the free
 * segments; the writer only turns a QUEUED buffer into WRITTEN or FAILED
 * (under the mutex), and the caller reaps WRITTEN buffers when it needs one.
 * So a buffer's records stay readable from memory until the caller itself
 * lets the buffer go.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tier/ssd_log.h"
#include "tier/ssd_size.h"

static inline int64_t seg_offset(const ssd_log *l, int64_t seg) { return SSD_LOG_MARK_BYTES + seg * l->seg_bytes; }
static inline uint32_t *footer(const ssd_log *l, char *mem) { return (uint32_t *)(mem + l->data_bytes); }
static inline int buf_state(const ssd_log_buf *b) { return __atomic_load_n(&b->state, __ATOMIC_ACQUIRE); }
static inline void set_state(ssd_log_buf *b, int st) { __atomic_store_n(&b->state, st, __ATOMIC_RELEASE); }

/* The buffer holding segment seg, or -1. */
static int held_by(const ssd_log *l, int64_t seg)
{
    for (int b = 0; b < SSD_LOG_BUFS; b++)
        if (buf_state(&l->buf[b]) != LOG_BUF_FREE && l->buf[b].seg == seg)
            return b;
    return -1;
}

/* A whole buffer to its segment with one write (continued after a short one). */
static int write_buf(ssd_log *l, ssd_log_buf *b)
{
    if (__atomic_load_n(&l->fail_in, __ATOMIC_RELAXED) > 0 &&
        __atomic_sub_fetch(&l->fail_in, 1, __ATOMIC_RELAXED) <= 0) {
        __atomic_store_n(&l->fail_in, 1, __ATOMIC_RELAXED); /* every later one fails too */
        return l->fail_err;
    }
    int64_t off = seg_offset(l, b->seg);
    for (int64_t done = 0; done < l->seg_bytes;) {
        ssize_t k = pwrite(l->fd, b->mem + done, (size_t)(l->seg_bytes - done), off + done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno ? errno : EIO;
        if (k == 0)
            return ENOSPC;
        done += k;
    }
    __atomic_fetch_add(&l->seg_writes, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&l->bytes_written, l->seg_bytes, __ATOMIC_RELAXED);
    return 0;
}

static void *writer_main(void *arg)
{
    ssd_log *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && l->qn == 0)
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stop)
            break;
        int b = l->queue[l->qhead];
        l->qhead = (l->qhead + 1) % SSD_LOG_BUFS;
        l->qn--;
        l->writing = 1;
        pthread_mutex_unlock(&l->mu);
        int e = write_buf(l, &l->buf[b]);
        pthread_mutex_lock(&l->mu);
        l->buf[b].err = e;
        set_state(&l->buf[b], e ? LOG_BUF_FAILED : LOG_BUF_WRITTEN);
        l->writing = 0;
        pthread_cond_broadcast(&l->done);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* --------------------------------------------------------- set up, free */

int ssd_log_init(ssd_log *l, int fd, int direct, int64_t rows, int64_t rec_bytes)
{
    memset(l, 0, sizeof *l);
    l->fd = fd;
    l->direct = direct;
    l->rows = rows;
    l->rec_bytes = rec_bytes;
    l->open = -1;
    for (int b = 0; b < SSD_LOG_BUFS; b++)
        l->buf[b].seg = -1;
    ember_ssd_layout lay;
    if (ember_ssd_layout_of(rows, rec_bytes, &lay) != 0)
        return EFBIG;
    l->seg_recs = lay.seg_recs;
    l->seg_bytes = lay.seg_bytes;
    l->data_bytes = lay.data_bytes;
    l->max_segs = lay.max_segs;
    l->where = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(uint32_t));
    l->live = calloc((size_t)l->max_segs, sizeof(int32_t));
    l->free_segs = malloc((size_t)l->max_segs * sizeof(int64_t));
    if (!l->where || !l->live || !l->free_segs)
        return ENOMEM;
    memset(l->where, 0xff, (size_t)rows * sizeof(uint32_t));
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->done, NULL);
    if (pthread_create(&l->thread, NULL, writer_main, l) != 0)
        return EAGAIN;
    l->started = 1;
    return 0;
}

void ssd_log_free(ssd_log *l)
{
    if (l->started) { /* queued writes are dropped: the file goes with the store */
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->work);
        pthread_cond_destroy(&l->done);
    }
    for (int b = 0; b < SSD_LOG_BUFS; b++)
        free(l->buf[b].mem);
    free(l->scratch);
    free(l->where);
    free(l->live);
    free(l->free_segs);
    memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------- records */

const char *ssd_log_buffered(const ssd_log *l, uint32_t row)
{
    uint32_t k = l->where[row];
    if (k == SSD_LOG_NONE)
        return NULL;
    int b = held_by(l, k / l->seg_recs);
    return b < 0 ? NULL : l->buf[b].mem + (int64_t)(k % l->seg_recs) * l->rec_bytes;
}

int64_t ssd_log_offset(const ssd_log *l, uint32_t row)
{
    uint32_t k = l->where[row];
    return seg_offset(l, k / l->seg_recs) + (int64_t)(k % l->seg_recs) * l->rec_bytes;
}

/* Segment seg has no live record left: its space may be written again,
 * once no buffer holds it. */
static void maybe_free(ssd_log *l, int64_t seg)
{
    if (l->live[seg] == 0 && held_by(l, seg) < 0)
        l->free_segs[l->nfree++] = seg;
}

/* WRITTEN buffers become free (under mu).  Their records are in the file. */
static void reap(ssd_log *l)
{
    for (int b = 0; b < SSD_LOG_BUFS; b++) {
        if (buf_state(&l->buf[b]) != LOG_BUF_WRITTEN)
            continue;
        int64_t seg = l->buf[b].seg;
        set_state(&l->buf[b], LOG_BUF_FREE);
        l->buf[b].seg = -1;
        maybe_free(l, seg);
    }
}

/* A free buffer (allocated on first use), waiting for the writer when all
 * are queued.  -1 when none can come: the others failed. */
static int take_buf(ssd_log *l)
{
    pthread_mutex_lock(&l->mu);
    int got = -1;
    for (;;) {
        reap(l);
        for (int b = 0; b < SSD_LOG_BUFS && got < 0; b++)
            if (buf_state(&l->buf[b]) == LOG_BUF_FREE)
                got = b;
        if (got >= 0 || (l->qn == 0 && !l->writing))
            break;
        pthread_cond_wait(&l->done, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    if (got >= 0 && !l->buf[got].mem) {
        void *m = NULL;
        if (posix_memalign(&m, 4096, (size_t)l->seg_bytes) != 0)
            return -2;
        l->buf[got].mem = m;
    }
    return got;
}

static int read_segment(ssd_log *l, int64_t seg, char *into)
{
    int64_t off = seg_offset(l, seg);
    for (int64_t done = 0; done < l->seg_bytes;) {
        ssize_t k = pread(l->fd, into + done, (size_t)(l->seg_bytes - done), off + done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno ? errno : EIO;
        if (k == 0)
            return EIO;
        done += k;
    }
    return 0;
}

/* No segment is free and the file is at its size: buffer b takes over the
 * segment with the fewest live records, those records first. */
static int compact(ssd_log *l, ssd_log_buf *b)
{
    int64_t v = -1;
    for (int64_t g = 0; g < l->nsegs; g++)
        if ((v < 0 || l->live[g] < l->live[v]) && held_by(l, g) < 0)
            v = g;
    if (v < 0 || l->live[v] >= l->seg_recs)
        return ENOSPC; /* cannot happen with the layout's room; refused, not looped */
    if (!l->scratch && posix_memalign((void **)&l->scratch, 4096, (size_t)l->seg_bytes) != 0)
        return ENOMEM;
    int e = read_segment(l, v, l->scratch);
    if (e)
        return e;
    const uint32_t *rows_in = footer(l, l->scratch);
    uint32_t *rows_out = footer(l, b->mem);
    uint32_t base = (uint32_t)(v * l->seg_recs);
    b->fill = 0;
    for (int64_t i = 0; i < l->seg_recs; i++) {
        uint32_t row = rows_in[i];
        if (row == SSD_LOG_NONE || row >= l->rows || l->where[row] != base + (uint32_t)i)
            continue; /* dead: the row has a newer record */
        memcpy(b->mem + (int64_t)b->fill * l->rec_bytes, l->scratch + i * l->rec_bytes, (size_t)l->rec_bytes);
        rows_out[b->fill] = row;
        l->where[row] = base + (uint32_t)b->fill++;
    }
    l->moved += b->fill;
    b->seg = v;
    return 0;
}

/* The open buffer is full (or there is none): queue it, open another. */
static int open_next(ssd_log *l)
{
    if (l->open >= 0) {
        pthread_mutex_lock(&l->mu);
        set_state(&l->buf[l->open], LOG_BUF_QUEUED);
        l->queue[(l->qhead + l->qn++) % SSD_LOG_BUFS] = l->open;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->mu);
        l->open = -1;
    }
    int b = take_buf(l);
    if (b == -1) { /* every other buffer failed: retry them here */
        int e = ssd_log_check(l);
        if (e)
            return e;
        b = take_buf(l);
    }
    if (b < 0)
        return b == -2 ? ENOMEM : EIO;
    ssd_log_buf *B = &l->buf[b];
    memset(footer(l, B->mem), 0xff, (size_t)(l->seg_bytes - l->data_bytes));
    B->fill = 0;
    if (l->nfree > 0) {
        B->seg = l->free_segs[--l->nfree];
    } else if (l->nsegs < l->max_segs) {
        B->seg = l->nsegs++;
    } else {
        int e = compact(l, B);
        if (e)
            return e;
    }
    set_state(B, LOG_BUF_OPEN);
    l->open = b;
    return 0;
}

int ssd_log_append(ssd_log *l, uint32_t row, const void *values, int64_t vbytes, const void *state,
                   int64_t sbytes)
{
    if (l->open < 0 || l->buf[l->open].fill == l->seg_recs) {
        int e = open_next(l);
        if (e)
            return e;
    }
    ssd_log_buf *b = &l->buf[l->open];
    int64_t k = b->fill++;
    char *rec = b->mem + k * l->rec_bytes;
    memcpy(rec, values, (size_t)vbytes);
    if (sbytes)
        memcpy(rec + vbytes, state, (size_t)sbytes);
    footer(l, b->mem)[k] = row;
    uint32_t old = l->where[row];
    l->where[row] = (uint32_t)(b->seg * l->seg_recs + k);
    l->live[b->seg]++;
    if (old != SSD_LOG_NONE) {
        int64_t seg = old / l->seg_recs;
        l->live[seg]--;
        maybe_free(l, seg);
    }
    l->appended++;
    return 0;
}

/* -------------------------------------------------------- check, sync */

int ssd_log_check(ssd_log *l)
{
    for (int b = 0; b < SSD_LOG_BUFS; b++) {
        if (buf_state(&l->buf[b]) != LOG_BUF_FAILED)
            continue;
        int e = write_buf(l, &l->buf[b]);
        pthread_mutex_lock(&l->mu);
        l->buf[b].err = e;
        if (!e)
            set_state(&l->buf[b], LOG_BUF_WRITTEN);
        pthread_mutex_unlock(&l->mu);
        if (e)
            return e;
    }
    return 0;
}

void ssd_log_wait(ssd_log *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->qn > 0 || l->writing)
        pthread_cond_wait(&l->done, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

int ssd_log_sync(ssd_log *l)
{
    int e = 0;
    if (l->open >= 0 && l->buf[l->open].fill > 0) { /* stays open: later appends fill it on */
        e = write_buf(l, &l->buf[l->open]);
        if (e) /* once more, as a failed queued buffer is (ssd_log_check) */
            e = write_buf(l, &l->buf[l->open]);
    }
    ssd_log_wait(l);
    int e2 = ssd_log_check(l);
    return e ? e : e2;
}

void ssd_log_inject_failure(ssd_log *l, int64_t k, int err)
{
    l->fail_err = err;
    __atomic_store_n(&l->fail_in, k, __ATOMIC_RELAXED);
}
