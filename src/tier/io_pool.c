/*
 * io_pool.c: read threads for the SSD tier (io_pool.h).
 *
 * One batch at a time: its requests are claimed one by one with an atomic
 * counter by the pool threads and by whoever waits for the batch, so a
 * waiting caller never idles while requests remain.  Requests never share
 * bytes of memory, so their order does not matter.  Writes are not the
 * pool's: the store's log has its own writer (ssd_log.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "tier/io_pool.h"

struct ember_io_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done_cv;
    pthread_t *threads;
    int nthreads, started, stop;
    /* the current batch */
    int fd;
    ember_io_req *reqs;
    int64_t n;
    int64_t next;       /* next request to claim (atomic)      */
    int64_t done;       /* finished requests (atomic)          */
    int active;         /* a batch was started, not yet waited */
    int in_batch;       /* workers inside the current batch    */
    uint64_t gen;       /* batch generation, wakes the workers */
    /* failure injection (test_tier; reads too.  The system calls themselves are failed by
     * tests/fault/fault_shim.c, preloaded: test_fault_io, fault_io) */
    int64_t fail_in;    /* requests until failure; 0 = off (atomic) */
    int fail_err;
    ember_io_init_fn init;
    void *init_ctx;
    int64_t bounce_bytes; /* O_DIRECT: per thread                 */
    char *bounce;       /* (nthreads + 1) x bounce_bytes, 4096-aligned */
};

/* O_DIRECT: the aligned blocks around the request's bytes are read into
 * the thread's bounce buffer, and the request's part copied out (records
 * are packed in the store file, so they start anywhere in a block). */
static int bounced(int fd, ember_io_req *r, char *buf, int64_t cap)
{
    int64_t len = (int64_t)(r->iov[0].iov_len + r->iov[1].iov_len);
    int64_t from = r->offset & ~(int64_t)511, span = (r->offset + len - from + 511) & ~(int64_t)511;
    if (span > cap)
        return EINVAL;
    for (int64_t done = 0; done < span;) {
        ssize_t k = pread(fd, buf + done, (size_t)(span - done), from + done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno ? errno : EIO;
        if (k == 0)
            return EIO; /* short file: the store file shrank */
        done += k;
    }
    const char *at = buf + (r->offset - from);
    memcpy(r->iov[0].iov_base, at, r->iov[0].iov_len);
    if (r->iov[1].iov_len)
        memcpy(r->iov[1].iov_base, at + r->iov[0].iov_len, r->iov[1].iov_len);
    return 0;
}

/* Moves one whole request; partial transfers continue where they stopped.
 * who: the thread's index (nthreads for the waiting caller). */
static int do_io(ember_io_pool *p, int fd, ember_io_req *r, int who)
{
    if (r->op == EMBER_IO_INIT) {
        p->init(p->init_ctx, r);
        return 0;
    }
    if (r->op == EMBER_IO_DONE)
        return 0;
    if (__atomic_load_n(&p->fail_in, __ATOMIC_RELAXED) > 0 &&
        __atomic_sub_fetch(&p->fail_in, 1, __ATOMIC_RELAXED) <= 0) {
        __atomic_store_n(&p->fail_in, 1, __ATOMIC_RELAXED); /* every later one fails too */
        return p->fail_err;
    }
    if (r->bounce)
        return bounced(fd, r, p->bounce + (int64_t)who * p->bounce_bytes, p->bounce_bytes);
    struct iovec iov[2] = {r->iov[0], r->iov[1]};
    int cnt = iov[1].iov_len ? 2 : 1, first = 0;
    int64_t off = r->offset;
    while (first < cnt) {
        ssize_t k = preadv(fd, iov + first, cnt - first, off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (k == 0)
            return EIO; /* short file: the store file shrank */
        off += k;
        while (first < cnt && (size_t)k >= iov[first].iov_len)
            k -= (ssize_t)iov[first++].iov_len;
        if (first < cnt) {
            iov[first].iov_base = (char *)iov[first].iov_base + k;
            iov[first].iov_len -= (size_t)k;
        }
    }
    return 0;
}

/* Claims and runs requests of the current batch until none are left. */
static void work_batch(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t n, int who)
{
    for (;;) {
        int64_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (i >= n)
            break;
        reqs[i].err = do_io(p, fd, &reqs[i], who);
        /* the lock only for the last one: the waiter checks `done` under
         * it, so the broadcast cannot fall between its check and its wait */
        if (__atomic_add_fetch(&p->done, 1, __ATOMIC_ACQ_REL) == n) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}
typedef struct worker_arg {
    ember_io_pool *p;
    int who;
} worker_arg;

static void *worker(void *arg)
{
    ember_io_pool *p = ((worker_arg *)arg)->p;
    int who = ((worker_arg *)arg)->who;
    free(arg);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        if (!p->active)
            continue; /* that batch is over already */
        int fd = p->fd;
        ember_io_req *reqs = p->reqs;
        int64_t n = p->n;
        p->in_batch++;
        pthread_mutex_unlock(&p->mu);
        work_batch(p, fd, reqs, n, who);
        pthread_mutex_lock(&p->mu);
        if (--p->in_batch == 0)
            pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ember_io_pool *ember_io_pool_create(int threads, ember_io_init_fn init, void *init_ctx)
{
    ember_io_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->init = init;
    p->init_ctx = init_ctx;
    p->threads = calloc((size_t)(threads > 0 ? threads : 1), sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->nthreads = threads > 0 ? threads : 1;
    for (; p->started < p->nthreads; p->started++) {
        worker_arg *a = malloc(sizeof *a);
        if (a)
            *a = (worker_arg){p, p->started};
        if (!a || pthread_create(&p->threads[p->started], NULL, worker, a) != 0) {
            free(a);
            ember_io_pool_destroy(p);
            return NULL;
        }
    }
    return p;
}

int ember_io_pool_set_bounce(ember_io_pool *p, int64_t bytes)
{
    void *b = NULL;
    if (posix_memalign(&b, 4096, (size_t)(bytes * (p->nthreads + 1))) != 0)
        return EMBER_ENOMEM;
    free(p->bounce);
    p->bounce = b;
    p->bounce_bytes = bytes;
    return 0;
}

void ember_io_start(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t n)
{
    ember_io_wait(p);
    pthread_mutex_lock(&p->mu);
    p->fd = fd;
    p->reqs = reqs;
    p->n = n;
    __atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
    p->active = 1;
    p->gen++;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

int64_t ember_io_wait(ember_io_pool *p)
{
    if (!p->active)
        return -1;
    work_batch(p, p->fd, p->reqs, p->n, p->nthreads);
    pthread_mutex_lock(&p->mu);
    /* also until every worker has left the batch: a late one must not claim
     * requests of the next batch with this batch's pointers */
    while (__atomic_load_n(&p->done, __ATOMIC_ACQUIRE) < p->n || p->in_batch > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    p->active = 0;
    pthread_mutex_unlock(&p->mu);
    for (int64_t i = 0; i < p->n; i++)
        if (p->reqs[i].err)
            return i;
    return -1;
}

int64_t ember_io_run(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t n)
{
    if (n <= 0)
        return -1;
    ember_io_start(p, fd, reqs, n);
    return ember_io_wait(p);
}

void ember_io_inject_failure(ember_io_pool *p, int64_t k, int err)
{
    p->fail_err = err;
    __atomic_store_n(&p->fail_in, k, __ATOMIC_RELAXED);
}

void ember_io_pool_destroy(ember_io_pool *p)
{
    if (!p)
        return;
    if (p->active)
        ember_io_wait(p);
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p->bounce);
    free(p);
}
