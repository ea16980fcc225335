/*
 * ssd.c: the SSD tier: a physical table's rows and optimizer state in a
 * store file, with a DRAM cache of slots in front (docs/tiers.md).
 *
 * The step stages its rows (stage: look every row up, pin the hits, claim a
 * slot for each distinct miss, write dirty victims back, then read or
 * initialise the missing rows) and the kernels run on slots.  Lookahead
 * (announce) does the same for a future batch in the background, evicting
 * only rows that no announced batch needs.
 *
 * Failure leaves the table as it was: a claim changes the map at once (so a
 * batch's repeated rows share a slot), but victims are written back before
 * their slots are read into (two-part I/O batches), and when a write-back
 * fails every claim of the batch is undone: victims return to the map with
 * their dirty data still in their slots.  When a read fails, only that
 * row's slot is freed; the row is still in the file.  The store file holds
 * a record of values then state per row, at row * rec_bytes; rows never
 * written are not read but computed by the initializer (a bitmap says
 * which), so a new store needs no writes at all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "prep/route.h"
#include "tier/ssd_impl.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(ssd_store *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ssd_store *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->base.errmsg, sizeof s->base.errmsg, fmt, ap);
    va_end(ap);
    return status;
}

static int io_fail(ssd_store *s, const ember_io_req *r, int64_t n_failed)
{
    return fail(s, EMBER_EIO, "%s: %s of row %lld of the store file %s failed: %s (%lld request%s failed)",
                s->label, r->op == EMBER_IO_WRITE ? "write-back" : "read",
                (long long)(r->offset / s->stride), s->path, strerror(r->err), (long long)n_failed,
                n_failed == 1 ? "" : "s");
}

static int grow(void **p, int64_t *cap, int64_t n, size_t sz)
{
    if (n <= *cap)
        return 0;
    int64_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = realloc(*p, (size_t)c * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void init_hook(void *ctx, ember_io_req *r)
{
    ssd_store *s = ctx;
    s->init(s->init_ctx, r->row, r->iov[0].iov_base);
    if (s->sf)
        memset(r->iov[1].iov_base, 0, sizeof(float) * (size_t)s->sf);
}

/* A request that moves slot x's record (values, state) at row's place. */
static void slot_req(ssd_store *s, ember_io_req *q, int32_t x, uint32_t row, int op)
{
    q->offset = (int64_t)row * s->stride;
    q->bounce = s->direct;
    q->iov[0].iov_base = s->base.values + (int64_t)x * s->dim;
    q->iov[0].iov_len = sizeof(float) * (size_t)s->dim;
    q->iov[1].iov_base = s->sf ? s->base.state + (int64_t)x * s->sf : NULL;
    q->iov[1].iov_len = sizeof(float) * (size_t)s->sf;
    q->op = op;
    q->row = row;
    q->err = 0;
}

/* ----------------------------------------------------------- load jobs */

static int job_reserve(ssd_store *s, int64_t n)
{
    ssd_job *j = &s->job;
    if (n <= j->cap)
        return 0;
    int64_t c = j->cap ? j->cap : 256;
    while (c < n)
        c *= 2;
    uint32_t *a = realloc(j->slot, sizeof(uint32_t) * (size_t)c);
    if (a)
        j->slot = a;
    uint32_t *b = realloc(j->new_row, sizeof(uint32_t) * (size_t)c);
    if (b)
        j->new_row = b;
    uint32_t *d = realloc(j->old_row, sizeof(uint32_t) * (size_t)c);
    if (d)
        j->old_row = d;
    uint8_t *e = realloc(j->old_dirty, (size_t)c);
    if (e)
        j->old_dirty = e;
    int32_t *w = realloc(j->wreq, sizeof(int32_t) * (size_t)c);
    if (w)
        j->wreq = w;
    ember_io_req *q = realloc(j->req, sizeof(ember_io_req) * (size_t)(2 * c));
    if (q)
        j->req = q;
    if (!a || !b || !d || !e || !w || !q)
        return -1;
    j->cap = c;
    return 0;
}

/* Claims a slot for row: the map points at it at once (LOADING), its
 * victim leaves the map.  0, or -1 when no slot is left. */
static int claim(ssd_store *s, uint32_t row, int64_t keep_through)
{
    uint32_t victim;
    int32_t x = ssd_take_slot(s, keep_through, &victim);
    if (x < 0)
        return -1;
    ssd_job *j = &s->job;
    int64_t k = j->n++;
    j->slot[k] = (uint32_t)x;
    j->new_row[k] = row;
    j->wreq[k] = -1;
    j->old_row[k] = victim;
    j->old_dirty[k] = victim != SSD_NONE && (s->flags[x] & F_DIRTY);
    if (victim != SSD_NONE)
        ssd_map_erase(s, victim);
    ssd_map_insert(s, row, (uint32_t)x);
    s->flags[x] = F_LOADING;
    return 0;
}

/* Undoes every claim of the job: victims back in the map and their policy
 * structures, fresh slots free.  written: which write-backs succeeded. */
static void job_undo(ssd_store *s)
{
    ssd_job *j = &s->job;
    for (int64_t k = j->n - 1; k >= 0; k--) {
        int32_t x = (int32_t)j->slot[k];
        ssd_map_erase(s, j->new_row[k]);
        if (j->old_row[k] == SSD_NONE) {
            ssd_release_slot(s, x);
            continue;
        }
        ssd_map_insert(s, j->old_row[k], (uint32_t)x);
        s->slot_row[x] = j->old_row[k];
        int wrote = j->wreq[k] >= 0 && j->req[j->wreq[k]].err == 0 && j->nreq > 0;
        if (wrote) {
            ssd_set_written(s, j->old_row[k]);
            s->st.writes++;
            s->st.bytes_written += s->rec_bytes;
        }
        s->flags[x] = j->old_dirty[k] && !wrote ? F_DIRTY : 0;
        if (s->mask)
            s->mask[x] = ssd_window_mask(s, j->old_row[k]);
        ssd_policy_place(s, x);
    }
    j->n = j->nreq = j->nwrites = 0;
}

/* The I/O of the claims: write-backs of dirty victims, then loads. */
static void job_requests(ssd_store *s)
{
    ssd_job *j = &s->job;
    j->nreq = 0;
    for (int64_t k = 0; k < j->n; k++) {
        j->wreq[k] = -1;
        if (j->old_dirty[k]) {
            j->wreq[k] = (int32_t)j->nreq;
            slot_req(s, &j->req[j->nreq++], (int32_t)j->slot[k], j->old_row[k], EMBER_IO_WRITE);
        }
    }
    j->nwrites = j->nreq;
    for (int64_t k = 0; k < j->n; k++) {
        uint32_t r = j->new_row[k];
        slot_req(s, &j->req[j->nreq++], (int32_t)j->slot[k], r, ssd_is_written(s, r) ? EMBER_IO_READ : EMBER_IO_INIT);
    }
}

/* Applies the outcome of the job's I/O (failed: index of a failed request
 * or -1).  pin: the step's loads (pinned, demand) or lookahead's. */
static int job_finish(ssd_store *s, int64_t failed, int pin)
{
    ssd_job *j = &s->job;
    int64_t nbad = 0;
    for (int64_t i = 0; i < j->nreq; i++)
        nbad += j->req[i].err != 0 && j->req[i].err != ECANCELED;
    if (failed >= 0 && failed < j->nwrites) {
        ember_io_req bad = j->req[failed];
        job_undo(s);
        return io_fail(s, &bad, nbad);
    }
    int st = EMBER_OK;
    for (int64_t k = 0; k < j->n; k++) {
        int32_t x = (int32_t)j->slot[k];
        if (j->old_row[k] != SSD_NONE) {
            s->st.evictions++;
            s->resident--;
            if (j->old_dirty[k]) {
                ssd_set_written(s, j->old_row[k]);
                s->st.writes++;
                s->st.bytes_written += s->rec_bytes;
            }
        }
        ember_io_req *q = &j->req[j->nwrites + k];
        if (q->err) {
            if (st == EMBER_OK)
                st = io_fail(s, q, nbad);
            ssd_map_erase(s, j->new_row[k]);
            ssd_release_slot(s, x);
            continue;
        }
        s->slot_row[x] = j->new_row[k];
        s->flags[x] = 0;
        s->resident++;
        if (q->op == EMBER_IO_INIT)
            s->st.init_loads++;
        else
            s->st.bytes_read += s->rec_bytes;
        if (s->freq)
            s->freq[x] = 0;
        if (s->mask)
            s->mask[x] = ssd_window_mask(s, j->new_row[k]);
        if (pin) {
            s->st.demand_loads++;
            ssd_pin(s, x);
        } else {
            s->st.prefetch_loads++;
            s->flags[x] = F_PREFETCHED;
            ssd_policy_place(s, x);
        }
    }
    j->n = j->nreq = j->nwrites = 0;
    return st;
}

/* Waits for the background job (lookahead) and applies it. */
static int bg_finish(ssd_store *s)
{
    if (!s->job.background)
        return EMBER_OK;
    double t0 = now_s();
    int64_t failed = ember_io_wait(s->io);
    s->st.wait_seconds += now_s() - t0;
    s->job.background = 0;
    return job_finish(s, failed, 0);
}

/* ---------------------------------------------------------- step staging */

static void ssd_begin(ember_store *bs, int64_t step)
{
    ssd_store *s = (ssd_store *)bs;
    s->step_now = step;
    if (s->policy == EMBER_CACHE_LOOKAHEAD)
        ssd_window_to(s, step);
    for (int64_t i = 0; i < s->npinned; i++) {
        int32_t x = s->pinned[i];
        s->flags[x] &= (uint8_t)~F_PINNED;
        ssd_policy_place(s, x);
    }
    s->npinned = 0;
    s->step++;
}

static void ssd_mark_dirty(ember_store *bs)
{
    ssd_store *s = (ssd_store *)bs;
    for (int64_t i = 0; i < s->npinned; i++)
        s->flags[s->pinned[i]] |= F_DIRTY;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The message for a step whose rows do not fit the cache. */
static int too_small(ssd_store *s, int64_t from)
{
    int64_t extra = 0, nm = 0;
    for (int64_t i = from; s->miss[i] >= 0; i++)
        s->miss_row[nm++] = s->miss_row[i];
    qsort(s->miss_row, (size_t)nm, sizeof(uint32_t), cmp_u32);
    for (int64_t i = 0; i < nm; i++)
        extra += (i == 0 || s->miss_row[i] != s->miss_row[i - 1]) && ssd_map_find(s, s->miss_row[i]) < 0;
    int64_t need = s->npinned + s->job.n + extra;
    job_undo(s);
    int64_t per = ember_ssd_slot_bytes(s->dim, s->sf, s->policy);
    return fail(s, EMBER_ELIMIT,
                "%s: one step needs %lld distinct rows cached at once (%lld bytes of cache) but the "
                "SSD tier's cache holds %lld rows (%lld bytes); raise cache_bytes or use smaller batches",
                s->label, (long long)need, (long long)(need * per), (long long)s->cap,
                (long long)(s->cap * per));
}

static int ssd_stage(ember_store *bs, const uint32_t *rows, uint32_t *slots, int64_t n)
{
    ssd_store *s = (ssd_store *)bs;
    int st = bg_finish(s);
    if (st != EMBER_OK)
        return st;
    if (grow((void **)&s->miss, &s->miss_cap, n + 1, sizeof(int64_t)) ||
        grow((void **)&s->miss_row, &s->miss_row_cap, n + 1, sizeof(uint32_t)))
        return fail(s, EMBER_ENOMEM, "%s: out of memory for staging %lld rows", s->label, (long long)n);
    /* pass 1: hits are pinned where they are */
    int64_t nm = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i + 8 < n && rows[i + 8] != EMBER_ROW_DROPPED)
            ssd_map_prefetch(s, rows[i + 8]);
        uint32_t r = rows[i];
        if (r == EMBER_ROW_DROPPED) {
            slots[i] = r;
            continue;
        }
        int64_t x = ssd_map_find(s, r);
        if (x < 0) {
            s->miss[nm] = i;
            s->miss_row[nm++] = r;
            continue;
        }
        if (!(s->flags[x] & F_PINNED))
            ssd_pin(s, (int32_t)x);
        slots[i] = (uint32_t)x;
    }
    if (nm == 0)
        return EMBER_OK;
    /* pass 2: a slot per distinct missing row (none of this step's rows can
     * be a victim: they are all pinned) */
    s->miss[nm] = -1;
    if (job_reserve(s, nm))
        return fail(s, EMBER_ENOMEM, "%s: out of memory for %lld loads", s->label, (long long)nm);
    for (int64_t k = 0; k < nm; k++) {
        int64_t x = ssd_map_find(s, s->miss_row[k]);
        if (x < 0) {
            if (claim(s, s->miss_row[k], INT64_MIN) < 0)
                return too_small(s, k);
            x = s->job.slot[s->job.n - 1];
        }
        slots[s->miss[k]] = (uint32_t)x;
    }
    job_requests(s);
    double t0 = now_s();
    int64_t failed = ember_io_run(s->io, s->fd, s->job.req, s->job.nwrites, s->job.nreq);
    s->st.io_seconds += now_s() - t0;
    return job_finish(s, failed, 1);
}

/* ------------------------------------------------------------ lookahead */

static int ssd_announce(ember_store *bs, const uint32_t *rows, int64_t n, int64_t seq)
{
    ssd_store *s = (ssd_store *)bs;
    if (s->policy != EMBER_CACHE_LOOKAHEAD)
        return EMBER_OK;
    int st = bg_finish(s);
    if (st != EMBER_OK)
        return st;
    if (s->wlen > 0 && seq != s->seq_cur + s->wlen) /* not the next one: start again */
        ssd_window_to(s, INT64_MAX);
    if (s->wlen == 0)
        s->seq_cur = seq;
    /* the window: the current step's batch and K more (the ring holds 64) */
    if (seq > s->step_now + s->K || s->wlen >= SSD_WINDOW) {
        s->st.ignored_hints++;
        return EMBER_OK;
    }
    int e = (int)((s->seq_cur + s->wlen) % SSD_WINDOW);
    if (grow((void **)&s->wrows[e], &s->wcap[e], n + 1, sizeof(uint32_t)))
        return fail(s, EMBER_ENOMEM, "%s: out of memory for an announced batch", s->label);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (rows[i] != EMBER_ROW_DROPPED)
            s->wrows[e][m++] = rows[i];
    int sorted = 1; /* the collection hands over sorted distinct rows */
    for (int64_t i = 1; i < m && sorted; i++)
        sorted = s->wrows[e][i - 1] < s->wrows[e][i];
    if (!sorted)
        qsort(s->wrows[e], (size_t)m, sizeof(uint32_t), cmp_u32);
    int64_t u = 0;
    for (int64_t i = 0; i < m; i++)
        if (u == 0 || s->wrows[e][i] != s->wrows[e][u - 1])
            s->wrows[e][u++] = s->wrows[e][i];
    s->wn[e] = u;
    s->wlen++;
    int64_t next_n = s->wn[(s->step_now + 1) % SSD_WINDOW];
    if (job_reserve(s, next_n > u ? next_n : u))
        return fail(s, EMBER_ENOMEM, "%s: out of memory for %lld loads", s->label, (long long)u);
    /* first every resident row of the batch leaves the cold list, so that
     * none of them can be the victim of another row of the same batch (its
     * write-back and its reload would race) */
    for (int64_t i = 0; i < u; i++) {
        int64_t x = ssd_map_find(s, s->wrows[e][i]);
        if (x < 0)
            continue;
        uint64_t had = s->mask[x];
        s->mask[x] |= 1ull << e;
        if (!had && ssd_policy_cold(s, (int32_t)x)) /* cold until now: its next use is this batch */
            ssd_policy_place(s, (int32_t)x);
    }
    /* read the next step's missing rows (announced earlier, or now): one step
     * ahead hides the reads behind this step's backward and dense work, and
     * reading earlier would only take slots from rows needed sooner.  A
     * victim is a cold row, else one needed after that step, farthest first */
    int64_t next = s->step_now + 1;
    if (next >= s->seq_cur && next < s->seq_cur + s->wlen) {
        int ne = (int)(next % SSD_WINDOW);
        for (int64_t i = 0; i < s->wn[ne]; i++)
            if (ssd_map_find(s, s->wrows[ne][i]) < 0 && claim(s, s->wrows[ne][i], INT64_MAX) < 0)
                break;
    }
    if (s->job.n == 0)
        return EMBER_OK;
    job_requests(s);
    s->job.background = 1;
    ember_io_start(s->io, s->fd, s->job.req, s->job.nwrites, s->job.nreq);
    return EMBER_OK;
}

/* ------------------------------------------------------- whole-row access */

/* The scratch records, page-aligned (O_DIRECT reads runs into it). */
static int bulk_reserve(ssd_store *s, int64_t floats)
{
    if (floats + 1 <= s->bulk_cap)
        return 0;
    int64_t c = s->bulk_cap ? 2 * s->bulk_cap : 4096;
    while (c < floats + 1)
        c *= 2;
    void *b = NULL;
    if (posix_memalign(&b, 4096, sizeof(float) * (size_t)c) != 0)
        return -1;
    free(s->bulk);
    s->bulk = b;
    s->bulk_cap = c;
    return 0;
}

/* Adds row's record at rec to the row-access requests: the last request
 * grows when it ends right before rec, in memory and in the file. */
static void add_record(ssd_store *s, int64_t *nq, uint32_t row, float *rec, int op)
{
    ember_io_req *q = *nq ? &s->bulk_req[*nq - 1] : NULL;
    int64_t off = (int64_t)row * s->stride;
    if (q && q->op == op && (char *)q->iov[0].iov_base + q->iov[0].iov_len == (char *)rec &&
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

/* Row access outside the step (ember_table_read/write, checkpoints): cached
 * rows are used in place; others go through a scratch buffer in the file's
 * record layout, so runs of consecutive rows move with one request. */
static int ssd_acquire(ember_store *bs, const uint32_t *rows, int64_t n, float **values, float **state)
{
    ssd_store *s = (ssd_store *)bs;
    int st = bg_finish(s);
    if (st != EMBER_OK)
        return st;
    int64_t recf = s->stride / (int64_t)sizeof(float);
    if (bulk_reserve(s, n * recf) ||
        grow((void **)&s->bulk_slot, &s->bulk_slot_cap, n + 1, sizeof(int64_t)) ||
        grow((void **)&s->bulk_req, &s->bulk_req_cap, n + 1, sizeof(ember_io_req)))
        return fail(s, EMBER_ENOMEM, "%s: out of memory for reading %lld rows", s->label, (long long)n);
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
        float *rec = s->bulk + i * recf;
        values[i] = rec;
        if (state)
            state[i] = s->sf ? rec + s->dim : NULL;
        if (!ssd_is_written(s, rows[i])) {
            s->init(s->init_ctx, rows[i], rec);
            memset(rec + s->dim, 0, sizeof(float) * (size_t)s->sf);
            continue;
        }
        add_record(s, &nq, rows[i], rec, EMBER_IO_READ);
    }
    double t0 = now_s();
    int64_t failed = ember_io_run(s->io, s->fd, s->bulk_req, 0, nq);
    s->st.io_seconds += now_s() - t0;
    for (int64_t i = 0; i < nq; i++)
        s->st.bytes_read += s->bulk_req[i].err ? 0 : (int64_t)s->bulk_req[i].iov[0].iov_len / s->stride * s->rec_bytes;
    return failed >= 0 ? io_fail(s, &s->bulk_req[failed], 1) : EMBER_OK;
}

static int ssd_release(ember_store *bs, const uint32_t *rows, int64_t n, int dirty)
{
    ssd_store *s = (ssd_store *)bs;
    if (!dirty)
        return EMBER_OK;
    int64_t recf = s->stride / (int64_t)sizeof(float), nq = 0;
    for (int64_t i = 0; i < n; i++) {
        if (s->bulk_slot[i] >= 0) {
            s->flags[s->bulk_slot[i]] |= F_DIRTY;
            continue;
        }
        add_record(s, &nq, rows[i], s->bulk + i * recf, EMBER_IO_WRITE);
    }
    double t0 = now_s();
    int64_t failed = ember_io_run(s->io, s->fd, s->bulk_req, 0, nq);
    s->st.io_seconds += now_s() - t0;
    for (int64_t k = 0; k < nq; k++) {
        ember_io_req *q = &s->bulk_req[k];
        if (q->err)
            continue;
        int64_t first = q->offset / s->stride, cnt = (int64_t)q->iov[0].iov_len / s->stride;
        for (int64_t r = first; r < first + cnt; r++)
            ssd_set_written(s, (uint32_t)r);
        s->st.writes += cnt;
        s->st.bytes_written += cnt * s->rec_bytes;
    }
    return failed >= 0 ? io_fail(s, &s->bulk_req[failed], 1) : EMBER_OK;
}

static int ssd_flush(ember_store *bs)
{
    ssd_store *s = (ssd_store *)bs;
    int st = bg_finish(s);
    if (st != EMBER_OK)
        return st;
    int64_t nd = 0;
    for (int64_t x = 0; x < s->used; x++)
        nd += (s->flags[x] & F_DIRTY) != 0;
    if (nd == 0)
        return EMBER_OK;
    if (grow((void **)&s->bulk_req, &s->bulk_req_cap, nd, sizeof(ember_io_req)))
        return fail(s, EMBER_ENOMEM, "%s: out of memory for writing %lld rows back", s->label, (long long)nd);
    int64_t nq = 0;
    for (int64_t x = 0; x < s->used; x++)
        if (s->flags[x] & F_DIRTY)
            slot_req(s, &s->bulk_req[nq++], (int32_t)x, s->slot_row[x], EMBER_IO_WRITE);
    double t0 = now_s();
    int64_t failed = ember_io_run(s->io, s->fd, s->bulk_req, 0, nq);
    s->st.io_seconds += now_s() - t0;
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
    return failed >= 0 ? io_fail(s, &s->bulk_req[failed], nbad) : EMBER_OK;
}

/* ------------------------------------------------------- create, destroy */

static void ssd_destroy(ember_store *bs)
{
    ssd_store *s = (ssd_store *)bs;
    ember_io_pool_destroy(s->io); /* waits for a background job */
    if (s->fd >= 0) {
        unlink(s->path); /* working space: a checkpoint is what keeps a table */
        close(s->fd);
    }
    ember_huge_free(s->base.values, s->base.value_bytes);
    ember_huge_free(s->base.state, s->base.state_bytes);
    void *arrays[] = {s->written, s->slot_row, s->flags, s->map, s->free_slots, s->pinned, s->prev,
                      s->next, s->where, s->freq, s->last, s->heap, s->heap_pos, s->mask,
                      s->job.slot, s->job.new_row, s->job.old_row, s->job.old_dirty, s->job.wreq,
                      s->job.req, s->miss, s->miss_row, s->bulk, s->bulk_slot, s->bulk_req};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
    for (int e = 0; e < SSD_WINDOW; e++)
        free(s->wrows[e]);
    free(s);
}

static const ember_store_ops SSD_OPS = {ssd_acquire, ssd_release, ssd_destroy, ssd_begin,
                                        ssd_stage, ssd_mark_dirty, ssd_flush, ssd_announce};

int64_t ember_ssd_slot_bytes(int32_t dim, int32_t state_floats, ember_cache_policy policy)
{
    /* values + state; slot_row, flags, where, pinned, prev/next; map at
     * load <= 1/2: 16; LFU: freq, last, heap, heap_pos; lookahead: mask */
    int64_t meta = 4 + 1 + 1 + 4 + 8 + 16;
    if (policy == EMBER_CACHE_LFU || policy == EMBER_CACHE_LOOKAHEAD)
        meta += 16;
    if (policy == EMBER_CACHE_LOOKAHEAD)
        meta += 8;
    return (int64_t)sizeof(float) * (dim + state_floats) + meta;
}

/* Writes bytes of zeros with large aligned direct writes. */
static int zero_fill(ssd_store *s, int64_t bytes)
{
    const int64_t chunk = 8 << 20;
    void *z = NULL;
    if (posix_memalign(&z, 4096, (size_t)chunk) != 0)
        return fail(s, EMBER_ENOMEM, "%s: out of memory", s->label);
    memset(z, 0, (size_t)chunk);
    int st = EMBER_OK;
    for (int64_t at = 0; at < bytes && st == EMBER_OK;) {
        int64_t n = bytes - at < chunk ? (bytes - at + 4095) / 4096 * 4096 : chunk;
        ssize_t k = pwrite(s->fd, z, (size_t)n, at);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            st = fail(s, EMBER_EIO, "%s: cannot write the store file %s (%lld of %lld bytes): %s", s->label,
                      s->path, (long long)at, (long long)bytes, k < 0 ? strerror(errno) : "no space");
        at += k > 0 ? k : 0;
    }
    free(z);
    if (st == EMBER_OK && ftruncate(s->fd, bytes) != 0) /* the last chunk was rounded up */
        st = fail(s, EMBER_EIO, "%s: cannot size %s: %s", s->label, s->path, strerror(errno));
    return st;
}

static int open_file(ssd_store *s, const char *dir, int buffered)
{
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fail(s, EMBER_EIO, "%s: the SSD tier's folder %s %s", s->label, dir,
                    errno == ENOENT ? "does not exist" : "is not a folder");
    s->fd = -1;
    if (!buffered) { /* O_DIRECT where the filesystem takes it (tmpfs does not) */
        s->fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
        s->direct = s->fd >= 0;
    }
    if (s->fd < 0)
        s->fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->fd < 0)
        return fail(s, EMBER_EIO, "%s: cannot create the store file %s: %s", s->label, s->path, strerror(errno));
    if (!s->direct)
        s->stride = s->rec_bytes; /* buffered: records unpadded */
    int64_t bytes = s->rows * s->stride;
    s->base.disk_bytes = bytes;
    if (flock(s->fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(s->fd);
        s->fd = -1; /* not ours: never unlink it */
        return fail(s, EMBER_EIO, "%s: the store file %s is in use by another collection or process (%s)",
                    s->label, s->path, e == EWOULDBLOCK ? "locked" : strerror(e));
    }
    if (ftruncate(s->fd, 0) != 0)
        return fail(s, EMBER_EIO, "%s: cannot truncate %s: %s", s->label, s->path, strerror(errno));
    struct statvfs fs;
    if (fstatvfs(s->fd, &fs) == 0 && (int64_t)fs.f_bavail * (int64_t)fs.f_frsize < bytes)
        return fail(s, EMBER_EIO, "%s: the filesystem of %s has %lld bytes free; the table needs %lld",
                    s->label, s->path, (long long)fs.f_bavail * (long long)fs.f_frsize, (long long)bytes);
    /* reserve the space now, so that a write-back cannot meet a full disk
     * later (filesystems without fallocate get a sparse file).  Under
     * O_DIRECT the file is written with zeros instead: a direct write into
     * an unwritten extent costs the filesystem a metadata update each time
     * (measured on ext4: about 10k instead of 30k random writes/s) */
    if (s->direct && bytes > 0)
        return zero_fill(s, bytes);
    if (bytes > 0 && fallocate(s->fd, 0, 0, bytes) != 0) {
        int e = errno;
        if (e != EOPNOTSUPP && e != ENOSYS)
            return fail(s, EMBER_EIO, "%s: cannot reserve %lld bytes for %s: %s", s->label, (long long)bytes,
                        s->path, strerror(e));
        if (ftruncate(s->fd, bytes) != 0)
            return fail(s, EMBER_EIO, "%s: cannot size %s: %s", s->label, s->path, strerror(errno));
    }
    return EMBER_OK;
}

int ember_store_ssd_create(const ember_ssd_params *p, ember_store **out, char *err, size_t errlen)
{
    *out = NULL;
    ssd_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return EMBER_ENOMEM;
    }
    int st = EMBER_OK;
    s->fd = -1;
    s->base.ops = &SSD_OPS;
    s->base.staged = 1;
    s->rows = p->rows;
    s->dim = p->dim;
    s->sf = p->state_floats;
    s->rec_bytes = (int64_t)sizeof(float) * (p->dim + p->state_floats);
    s->stride = p->buffered ? s->rec_bytes : ember_ssd_stride(p->dim, p->state_floats);
    s->init = p->init;
    s->init_ctx = p->init_ctx;
    s->policy = p->policy;
    s->K = p->lookahead;
    snprintf(s->label, sizeof s->label, "%s", p->label);
    snprintf(s->path, sizeof s->path, "%s/%s.rank%d.ember-store", p->dir, p->name, (int)p->rank);
    int64_t per = ember_ssd_slot_bytes(p->dim, p->state_floats, p->policy);
    s->cap = p->cache_bytes / per;
    if (s->cap > p->rows)
        s->cap = p->rows;
    if (s->cap < 1 && p->rows > 0) {
        st = fail(s, EMBER_EINVAL, "%s: cache_bytes %lld holds no row (one cached row takes %lld bytes)", s->label,
                  (long long)p->cache_bytes, (long long)per);
        goto done;
    }
    if (s->cap >= (int64_t)INT32_MAX) {
        st = fail(s, EMBER_EINVAL, "%s: a cache of %lld rows is more than 2^31-1", s->label, (long long)s->cap);
        goto done;
    }
    s->base.rows = p->rows;
    s->base.dim = p->dim;
    s->base.state_floats = p->state_floats;
    s->base.value_bytes = s->cap * p->dim * (int64_t)sizeof(float);
    s->base.state_bytes = s->cap * p->state_floats * (int64_t)sizeof(float);
    s->base.disk_bytes = p->rows * s->stride;
    s->map_size = 2;
    s->map_shift = 63;
    while (s->map_size < 2 * s->cap)
        s->map_size *= 2, s->map_shift--;
    size_t cap = (size_t)(s->cap > 0 ? s->cap : 1);
    s->base.values = ember_huge_alloc(s->base.value_bytes);
    s->base.state = s->base.state_bytes ? ember_huge_alloc(s->base.state_bytes) : NULL;
    s->written = calloc((size_t)(p->rows / 64 + 1), sizeof(uint64_t));
    s->slot_row = malloc(cap * sizeof(uint32_t));
    s->flags = calloc(cap, 1);
    s->map = malloc((size_t)s->map_size * sizeof(uint64_t));
    s->free_slots = malloc(cap * sizeof(int32_t));
    s->pinned = malloc(cap * sizeof(int32_t));
    s->prev = malloc(cap * sizeof(int32_t));
    s->next = malloc(cap * sizeof(int32_t));
    s->where = malloc(cap);
    int ok = (s->base.values || !s->base.value_bytes) && (s->base.state || !s->base.state_bytes) && s->written &&
             s->slot_row && s->flags && s->map && s->free_slots && s->pinned && s->prev && s->next && s->where;
    if (p->policy == EMBER_CACHE_LFU || p->policy == EMBER_CACHE_LOOKAHEAD) {
        s->freq = calloc(cap, sizeof(uint32_t));
        s->last = calloc(cap, sizeof(uint32_t));
        s->heap = malloc(cap * sizeof(int32_t));
        s->heap_pos = malloc(cap * sizeof(int32_t));
        ok = ok && s->freq && s->last && s->heap && s->heap_pos;
    }
    if (p->policy == EMBER_CACHE_LOOKAHEAD)
        ok = ok && (s->mask = calloc(cap, sizeof(uint64_t)));
    if (!ok) {
        st = fail(s, EMBER_ENOMEM, "%s: out of memory for a cache of %lld rows", s->label, (long long)s->cap);
        goto done;
    }
    s->base.slot_row = s->slot_row;
    s->base.meta_bytes = s->cap * (per - s->rec_bytes) + (p->rows / 64 + 1) * 8;
    memset(s->map, 0xff, (size_t)s->map_size * sizeof(uint64_t));
    memset(s->where, -1, cap);
    if (s->heap_pos)
        memset(s->heap_pos, -1, cap * sizeof(int32_t));
    for (size_t x = 0; x < cap; x++)
        s->slot_row[x] = SSD_NONE;
    for (int l = 0; l < SSD_LISTS; l++)
        s->head[l] = s->tail[l] = -1;
    s->st.cache_rows = s->cap;
    if ((st = open_file(s, p->dir, p->buffered)) != EMBER_OK)
        goto done;
    s->io = ember_io_pool_create(p->io_threads, init_hook, s);
    if (!s->io || (s->direct && ember_io_pool_set_stride(s->io, s->stride) != 0))
        st = fail(s, EMBER_ENOMEM, "%s: cannot start %d I/O threads", s->label, (int)p->io_threads);
done:
    if (st != EMBER_OK) {
        snprintf(err, errlen, "%s", s->base.errmsg);
        ssd_destroy(&s->base);
        return st;
    }
    *out = &s->base;
    return EMBER_OK;
}

void ember_store_tier_stats(const ember_store *bs, ember_tier_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!bs || !bs->staged)
        return;
    const ssd_store *s = (const ssd_store *)bs;
    *out = s->st;
    out->resident_rows = s->resident;
    for (int64_t x = 0; x < s->used; x++)
        out->dirty_rows += (s->flags[x] & F_DIRTY) != 0;
}

void ember_store_ssd_inject_failure(ember_store *bs, int64_t k, int err, int writes_only)
{
    ssd_store *s = (ssd_store *)bs;
    ember_io_inject_failure(s->io, k, err, writes_only);
}
