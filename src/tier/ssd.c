/*
 * ssd.c: the SSD tier's store (docs/tiers.md): a physical table's rows and
 * optimizer state in a store file on a local filesystem, with a DRAM cache
 * of slots in front.  This file creates it (the file: locked, space
 * reserved, O_DIRECT where the filesystem allows it; the cache's arrays),
 * destroys it (the file is working space and goes with it), and holds the
 * helpers its other files share: ssd_stage.c (the step), ssd_rows.c (row
 * access, flush), ssd_cache.c (map and policies); ssd_log.c keeps the
 * file's records.
 *
 * The store file is a log of records, values then state per row
 * (ssd_log.h): a dirty row leaving the cache is appended, never written in
 * place.  Rows never written are not read but computed by the initializer
 * (the log's index says which), so a new store needs no reads and no
 * zero-filled file.  Records and slots hold a row as the table does: half
 * rows (precision fp16, bf16) and half state (state_precision) take 2 bytes
 * an element, so a step moves them between the file and the slots as they
 * are, and the kernels update them in place.
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

#include "core/huge.h"
#include "core/safe_file.h"
#include "quant/quant.h"
#include "tier/ssd_impl.h"
#include "tier/ssd_size.h"

double ssd_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int ssd_fail(ssd_store *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->base.errmsg, sizeof s->base.errmsg, fmt, ap);
    va_end(ap);
    return status;
}

int ssd_io_fail(ssd_store *s, const ember_io_req *r, int64_t n_failed)
{
    return ssd_fail(s, EMBER_EIO, "%s: read of row %lld of the store file %s failed: %s (%lld request%s failed)",
                s->label, (long long)r->row, s->path, strerror(r->err), (long long)n_failed,
                n_failed == 1 ? "" : "s");
}

int ssd_write_fail(ssd_store *s, int err)
{
    if (err == ENOMEM)
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for a segment of the store file %s", s->label, s->path);
    return ssd_fail(s, EMBER_EIO, "%s: write-back of rows to the store file %s failed: %s (nothing was lost: the "
                    "rows stay in memory until a retry succeeds)", s->label, s->path, strerror(err));
}

int ssd_save_record(ssd_store *s, uint32_t row, const void *values, const void *state)
{
    int e = ssd_log_append(&s->log, row, values, s->vrow, state, s->sf ? s->srow : 0);
    if (e)
        return ssd_write_fail(s, e);
    s->st.writes++;
    s->st.bytes_written += s->rec_bytes;
    return EMBER_OK;
}

void ssd_init_record(ssd_store *s, uint32_t row, void *values, void *state)
{
    if (s->venc) { /* as the memory tier's initializer writes a half row */
        float v[1024]; /* dim <= 1024 (ember.h) */
        s->init(s->init_ctx, row, v);
        memset(values, 0, (size_t)s->vrow); /* a row no half holds stays zeros, as there */
        ember_quant_row((ember_encoding)s->venc, s->dim, v, values);
    } else {
        s->init(s->init_ctx, row, values);
    }
    if (s->sf)
        memset(state, 0, (size_t)s->srow); /* +0 in every format */
}

static void init_hook(void *ctx, ember_io_req *r)
{
    ssd_init_record(ctx, r->row, r->iov[0].iov_base, r->iov[1].iov_base);
}

void ssd_slot_req(ssd_store *s, ember_io_req *q, int32_t x, uint32_t row, int op)
{
    q->offset = op == EMBER_IO_READ ? ssd_log_offset(&s->log, row) : 0;
    q->bounce = s->direct;
    q->iov[0].iov_base = s->vslot + (int64_t)x * s->vrow;
    q->iov[0].iov_len = (size_t)s->vrow;
    q->iov[1].iov_base = s->sf ? s->sslot + (int64_t)x * s->srow : NULL;
    q->iov[1].iov_len = (size_t)s->srow;
    q->op = op;
    q->row = row;
    q->err = 0;
}

/* ------------------------------------------------------- create, destroy */

static void ssd_destroy(ember_store *bs)
{
    ssd_store *s = (ssd_store *)bs;
    ember_io_pool_destroy(s->io); /* waits for a background job */
    ssd_log_free(&s->log);
    if (s->fd >= 0 && s->own) { /* working space: a checkpoint is what keeps a table */
        struct stat a, b;
        if (fstat(s->fd, &a) == 0 && fstatat(s->dir_fd, s->name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
            a.st_dev == b.st_dev && a.st_ino == b.st_ino) /* still ours under that name */
            unlinkat(s->dir_fd, s->name, 0);
    }
    if (s->fd >= 0)
        close(s->fd);
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    ember_huge_free(s->vslot, s->base.value_bytes);
    ember_huge_free(s->sslot, s->base.state_bytes);
    void *arrays[] = {s->slot_row, s->flags, s->map, s->free_slots, s->pinned, s->prev,
                      s->next, s->where, s->freq, s->last, s->chead, s->ctail, s->cbits, s->mask, s->cold_seen,
                      s->job.slot, s->job.new_row, s->job.old_row, s->job.old_dirty, s->job.saved,
                      s->job.req, s->miss, s->miss_row, s->bulk, s->dec, s->bulk_slot, s->bulk_req, s->wh_row, s->wh_mask, s->look};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
    for (int e = 0; e < SSD_WINDOW; e++)
        free(s->wrows[e]);
    free(s);
}

/* Faults the cache's pages in now, once: the kernel zeroes a page on its
 * first touch, and while a cache fills that took a fifth of each step. */
static void touch_pages(char *p, int64_t bytes)
{
    for (int64_t i = 0; p && i < bytes; i += 4096)
        ((volatile char *)p)[i] = 0;
}

static const ember_store_ops SSD_OPS = {ssd_acquire, ssd_release, ssd_destroy, ssd_begin,
                                        ssd_stage, ssd_mark_dirty, ssd_flush, ssd_announce};

/* The first 4 KiB of every store file: this text, so that a file found at
 * a store's name is replaced only if an earlier ember store left it there
 * (with its owner and mode: this user's, 0600).  Stores of earlier versions
 * (records in place) had their mark in the last 4 KiB. */
static const char STORE_MARK[] = "ember store file, version 2\n";
static const char STORE_MARK_V1[] = "ember store file, version 1\n";
#define MARK_BLOCK SSD_LOG_MARK_BYTES

/* The mark at offset at of fd: 1 when it is there. */
static int has_mark(int fd, int64_t at, const char *mark, size_t len)
{
    char got[64] = "";
    return at >= 0 && pread(fd, got, len, at) == (ssize_t)len && memcmp(got, mark, len) == 0;
}

/* A regular file at the store's name: ours to take only when it is locked by
 * nobody, has one name and ends with the marker (a store that a killed
 * process left).  EMBER_OK with s->fd locked, else the named refusal. */
static int take_leftover(ssd_store *s, char *why, size_t len)
{
    s->fd = openat(s->dir_fd, s->name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (s->fd < 0 || fstat(s->fd, &sb) != 0)
        return snprintf(why, len, "%s", strerror(errno)), EMBER_EIO;
    if (!S_ISREG(sb.st_mode) || sb.st_nlink != 1)
        return snprintf(why, len, "it is not a regular file with one name"), EMBER_EIO;
    if (flock(s->fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(s->fd);
        s->fd = -1;
        return ssd_fail(s, EMBER_EIO, "%s: the store file %s is in use by another collection or process (%s)",
                        s->label, s->path, e == EWOULDBLOCK ? "locked" : strerror(e));
    }
    if (sb.st_size < MARK_BLOCK || sb.st_size % MARK_BLOCK ||
        !(has_mark(s->fd, 0, STORE_MARK, sizeof STORE_MARK - 1) ||
          has_mark(s->fd, sb.st_size - MARK_BLOCK, STORE_MARK_V1, sizeof STORE_MARK_V1 - 1)))
        return snprintf(why, len, "it is not an ember store file"), EMBER_EIO;
    /* a store is made 0600 by its own user: a file someone else owns, or
     * that others may write, was planted, whatever its bytes say */
    if (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0)
        return snprintf(why, len, "it is not this user's own store file (owner %ld, mode %03o)", (long)sb.st_uid,
                        (unsigned)(sb.st_mode & 0777)), EMBER_EIO;
    return EMBER_OK;
}

/* Opens the store's folder once and creates its file there, never through a
 * link and never over a file that an ember store did not leave. */
static int create_file(ssd_store *s, const char *dir)
{
    char err[600], why[200] = "";
    safe_dir d;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return ssd_fail(s, EMBER_EIO, "%s: the SSD tier's folder %s %s", s->label, dir,
                        errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ssd_fail(s, EMBER_EIO, "%s: the SSD tier's folder %s is not a folder", s->label, dir);
    if (safe_dir_open(&d, dir, err, sizeof err) != EMBER_OK)
        return ssd_fail(s, EMBER_EIO, "%s: the SSD tier's folder: %s", s->label, err);
    s->dir_fd = d.fd;
    s->fd = safe_create(&d, s->name, O_RDWR, 0600, err, sizeof err);
    if (s->fd >= 0) {
        s->own = 1;
        if (flock(s->fd, LOCK_EX | LOCK_NB) != 0) /* not shared yet: never fails in practice */
            return ssd_fail(s, EMBER_EIO, "%s: cannot lock %s: %s", s->label, s->path, strerror(errno));
        return EMBER_OK;
    }
    if (errno != EEXIST)
        return ssd_fail(s, EMBER_EIO, "%s: cannot create the store file %s: %s", s->label, s->path,
                        strerror(errno));
    int k = safe_kind(&d, s->name), st = EMBER_OK;
    if (k != SAFE_FILE) /* a link, a folder, a device: named, never touched */
        return ssd_fail(s, EMBER_EIO, "%s: %s", s->label, err);
    if ((st = take_leftover(s, why, sizeof why)) != EMBER_OK) {
        if (s->fd >= 0)
            close(s->fd);
        s->fd = -1;
        if (why[0])
            ssd_fail(s, st, "%s: %s exists and %s: ember does not replace what it did not create (remove it, or "
                     "choose another folder)", s->label, s->path, why);
        return st;
    }
    s->own = 1;
    return EMBER_OK;
}

static int open_file(ssd_store *s, const char *dir, int buffered)
{
    int st = create_file(s, dir);
    if (st != EMBER_OK)
        return st;
    /* O_DIRECT where the filesystem takes it (tmpfs may not) */
    int fl = fcntl(s->fd, F_GETFL);
    s->direct = !buffered && fl >= 0 && fcntl(s->fd, F_SETFL, fl | O_DIRECT) == 0;
    int64_t bytes = ember_ssd_file_bytes(s->rows, s->rec_bytes);
    s->base.disk_bytes = bytes;
    if (ftruncate(s->fd, 0) != 0)
        return ssd_fail(s, EMBER_EIO, "%s: cannot truncate %s: %s", s->label, s->path, strerror(errno));
    struct statvfs fs;
    if (fstatvfs(s->fd, &fs) == 0 && (int64_t)fs.f_bavail * (int64_t)fs.f_frsize < bytes)
        return ssd_fail(s, EMBER_EIO, "%s: the filesystem of %s has %lld bytes free; the table needs %lld",
                    s->label, s->path, (long long)fs.f_bavail * (long long)fs.f_frsize, (long long)bytes);
    void *mark = NULL;
    if (posix_memalign(&mark, 4096, MARK_BLOCK) != 0)
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory", s->label);
    memset(mark, 0, MARK_BLOCK);
    memcpy(mark, STORE_MARK, sizeof STORE_MARK - 1);
    ssize_t k = pwrite(s->fd, mark, MARK_BLOCK, 0);
    int e = errno;
    free(mark);
    if (k != MARK_BLOCK)
        return ssd_fail(s, EMBER_EIO, "%s: cannot write the store file %s: %s", s->label, s->path,
                        k < 0 ? strerror(e) : "no space");
    /* reserve the space now, so that a segment write cannot meet a full disk
     * later (filesystems without fallocate get a sparse file).  Nothing is
     * written: the log's segments are written whole, sequentially, so
     * unwritten extents cost the filesystem one update per segment */
    if (bytes > MARK_BLOCK && fallocate(s->fd, 0, MARK_BLOCK, bytes - MARK_BLOCK) != 0) {
        e = errno;
        if (e != EOPNOTSUPP && e != ENOSYS)
            return ssd_fail(s, EMBER_EIO, "%s: cannot reserve %lld bytes for %s: %s", s->label, (long long)bytes,
                        s->path, strerror(e));
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
    s->fd = s->dir_fd = -1;
    s->base.ops = &SSD_OPS;
    s->base.staged = 1;
    s->rows = p->rows;
    s->dim = p->dim;
    s->sf = p->state_floats;
    s->venc = p->row_enc;
    s->senc = p->state_enc;
    s->vrow = (int64_t)p->dim * (s->venc ? 2 : 4);
    s->srow = (int64_t)p->state_floats * (s->senc ? 2 : 4);
    s->rec_bytes = ember_ssd_record_bytes(p->dim, p->state_floats, s->venc != 0, s->senc != 0);
    s->init = p->init;
    s->init_ctx = p->init_ctx;
    s->policy = p->policy;
    s->K = p->lookahead;
    snprintf(s->label, sizeof s->label, "%s", p->label);
    snprintf(s->name, sizeof s->name, "%s.rank%d.ember-store", p->name, (int)p->rank);
    snprintf(s->path, sizeof s->path, "%s/%s", p->dir, s->name);
    if (strchr(p->name, '/') || strlen(p->name) > 200) {
        st = ssd_fail(s, EMBER_EINVAL, "%s: the SSD tier names its store file after the table: a name with '/' or "
                      "over 200 bytes cannot be one", s->label);
        goto done;
    }
    int64_t per = ember_ssd_slot_bytes(s->rec_bytes, p->policy);
    s->cap = ember_ssd_cache_rows(p->cache_bytes, p->rows, s->rec_bytes, p->policy);
    if (s->cap < 1 && p->rows > 0) {
        st = ssd_fail(s, EMBER_EINVAL,
                      "%s: cache_bytes %lld holds no row (one cached row takes %lld bytes, after %lld bytes of "
                      "index for the %lld rows of this rank)",
                      s->label, (long long)p->cache_bytes, (long long)per,
                      (long long)ember_ssd_index_bytes(p->rows, s->rec_bytes), (long long)p->rows);
        goto done;
    }
    if (s->cap >= (int64_t)INT32_MAX) {
        st = ssd_fail(s, EMBER_EINVAL, "%s: a cache of %lld rows is more than 2^31-1", s->label, (long long)s->cap);
        goto done;
    }
    s->base.rows = p->rows;
    s->base.dim = p->dim;
    s->base.state_floats = p->state_floats;
    s->base.value_bytes = s->cap * s->vrow;
    s->base.state_bytes = s->cap * s->srow;
    s->base.disk_bytes = ember_ssd_file_bytes(p->rows, s->rec_bytes);
    s->map_size = s->cap > 1 ? 2 * s->cap : 2;
    size_t cap = (size_t)(s->cap > 0 ? s->cap : 1);
    s->vslot = ember_huge_alloc(s->base.value_bytes);
    s->sslot = s->base.state_bytes ? ember_huge_alloc(s->base.state_bytes) : NULL;
    touch_pages(s->vslot, s->base.value_bytes);
    touch_pages(s->sslot, s->base.state_bytes);
    if (s->venc) { /* the kernels read and update half slots as half rows */
        s->base.encoding = s->venc;
        s->base.qrows = (uint8_t *)s->vslot;
        s->base.qrow_bytes = s->vrow;
    } else {
        s->base.values = (float *)s->vslot;
    }
    if (s->senc) {
        s->base.state_enc = s->senc;
        s->base.qstate = (uint16_t *)s->sslot;
    } else {
        s->base.state = (float *)s->sslot;
    }
    s->slot_row = malloc(cap * sizeof(uint32_t));
    s->flags = calloc(cap, 1);
    s->map = malloc((size_t)s->map_size * sizeof(uint64_t));
    s->free_slots = malloc(cap * sizeof(int32_t));
    s->pinned = malloc(cap * sizeof(int32_t));
    s->prev = malloc(cap * sizeof(int32_t));
    s->next = malloc(cap * sizeof(int32_t));
    s->where = malloc(cap);
    int ok = (s->vslot || !s->base.value_bytes) && (s->sslot || !s->base.state_bytes) &&
             s->slot_row && s->flags && s->map && s->free_slots && s->pinned && s->prev && s->next && s->where;
    if (p->policy == EMBER_CACHE_LFU || p->policy == EMBER_CACHE_LOOKAHEAD) {
        s->freq = calloc(cap, sizeof(uint32_t));
        s->last = calloc(cap, sizeof(uint32_t));
        ok = ok && s->freq && s->last && ssd_cold_reserve(s) == 0;
    }
    if (p->policy == EMBER_CACHE_LOOKAHEAD) {
        ok = ok && (s->mask = calloc(cap, sizeof(uint64_t)));
        ok = ok && (s->cold_seen = malloc(SSD_COLD_SEEN * sizeof(uint64_t)));
        if (ok)
            memset(s->cold_seen, 0xff, SSD_COLD_SEEN * sizeof(uint64_t));
        /* at most a cache's worth of evictions a step, over 64 steps: a
         * share of the rows whose evictions fill the table a quarter */
        double share = (double)SSD_COLD_SEEN / (4.0 * 64.0 * (double)(cap > 0 ? cap : 1));
        s->cold_sample = share >= 1 ? UINT64_MAX : (uint64_t)(share * 0x1p64);
    }
    if (!ok) {
        st = ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for a cache of %lld rows", s->label, (long long)s->cap);
        goto done;
    }
    s->base.slot_row = s->slot_row;
    s->base.meta_bytes = s->cap * (per - s->rec_bytes) + ember_ssd_index_bytes(p->rows, s->rec_bytes);
    memset(s->map, 0xff, (size_t)s->map_size * sizeof(uint64_t));
    memset(s->where, -1, cap);
    for (size_t x = 0; x < cap; x++)
        s->slot_row[x] = SSD_NONE;
    for (int l = 0; l < SSD_LISTS; l++)
        s->head[l] = s->tail[l] = -1;
    s->st.cache_rows = s->cap;
    if ((st = open_file(s, p->dir, p->buffered)) != EMBER_OK)
        goto done;
    int e = ssd_log_init(&s->log, s->fd, s->direct, p->rows, s->rec_bytes);
    if (e) {
        if (e == EFBIG)
            st = ssd_fail(s, EMBER_EINVAL, "%s: %lld rows of %lld bytes are too many for one store file (records "
                          "are numbered in 32 bits)", s->label, (long long)p->rows, (long long)s->rec_bytes);
        else
            st = ssd_fail(s, e == ENOMEM ? EMBER_ENOMEM : EMBER_EINVAL, "%s: %s", s->label,
                          e == ENOMEM ? "out of memory for the store's index" : "cannot start the store's writer thread");
        goto done;
    }
    s->io = ember_io_pool_create(p->io_threads, init_hook, s);
    if (!s->io || (s->direct && ember_io_pool_set_bounce(s->io, SSD_RUN_BYTES + 1024) != 0))
        st = ssd_fail(s, EMBER_ENOMEM, "%s: cannot start %d I/O threads", s->label, (int)p->io_threads);
done:
    if (st != EMBER_OK) {
        snprintf(err, errlen, "%s", s->base.errmsg);
        ssd_destroy(&s->base);
        return st;
    }
    *out = &s->base;
    return EMBER_OK;
}

void ember_store_ssd_set_lookahead(ember_store *bs, int32_t K)
{
    if (!bs || !bs->staged)
        return;
    ssd_store *s = (ssd_store *)bs;
    s->K = K < 1 ? 1 : K >= SSD_WINDOW ? SSD_WINDOW - 1 : K;
}

void ember_store_ssd_window_counts(const ember_store *bs, ember_ssd_window_counts *out)
{
    *out = (ember_ssd_window_counts){0};
    if (!bs || !bs->staged)
        return;
    const ssd_store *s = (const ssd_store *)bs;
    *out = (ember_ssd_window_counts){s->st.accesses, s->st.demand_loads + s->st.prefetch_used, s->st.evictions,
                                     s->sample_loads, s->sample_reloads};
}

void ember_store_tier_stats(const ember_store *bs, ember_tier_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!bs || !bs->staged)
        return;
    const ssd_store *s = (const ssd_store *)bs;
    *out = s->st;
    out->resident_rows = s->resident;
    if (s->sample_loads) /* the sample's share of cold reloads, over all loads */
        out->cold_reloads = (int64_t)((double)s->sample_reloads * (double)(s->st.demand_loads + s->st.prefetch_loads) /
                                      (double)s->sample_loads);
    out->segment_writes = __atomic_load_n(&s->log.seg_writes, __ATOMIC_RELAXED);
    out->file_bytes_written = __atomic_load_n(&s->log.bytes_written, __ATOMIC_RELAXED);
    out->moved_rows = s->log.moved;
    for (int64_t x = 0; x < s->used; x++)
        out->dirty_rows += (s->flags[x] & F_DIRTY) != 0;
}

void ember_store_ssd_inject_failure(ember_store *bs, int64_t k, int err, int writes_only)
{
    ssd_store *s = (ssd_store *)bs;
    ember_io_inject_failure(s->io, writes_only ? 0 : k, err);
    ssd_log_inject_failure(&s->log, k, err);
}

void ember_store_ssd_wait_writes(ember_store *bs)
{
    if (bs && bs->staged)
        ssd_log_wait(&((ssd_store *)bs)->log);
}
