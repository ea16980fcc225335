/*
 * io_pool.c: I/O threads for the SSD tier (io_pool.h).
 *
 * One batch at a time: its requests are claimed one by one with an atomic
 * counter by the pool threads and by whoever waits for the batch, so a
 * waiting caller never idles while requests remain.  Requests never share
 * bytes of memory or of the file, so their order does not matter.
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
    int64_t n, first;
    int first_failed;   /* a request of the first part failed  */
    int64_t next;       /* next request to claim (atomic)      */
    int64_t done;       /* finished requests (under mu)        */
    int active;         /* a batch was started, not yet waited */
    int in_batch;       /* workers inside the current batch    */
    uint64_t gen;       /* batch generation, wakes the workers */
    /* failure injection (test_tier; reads too.  The system calls themselves are failed by
     * tests/fault/fault_shim.c, preloaded: test_fault_io, fault_io) */
    int64_t fail_in;    /* requests until failure; 0 = off (atomic) */
    int fail_err, fail_writes_only;
    ember_io_init_fn init;
    void *init_ctx;
    int64_t stride;     /* O_DIRECT record bytes                  */
    char *bounce;       /* (nthreads + 1) x stride, 4096-aligned  */
};

/* One aligned record through the thread's bounce buffer (O_DIRECT). */
static int bounced(int fd, ember_io_req *r, char *buf, int64_t stride, int write)
{
    if (write) {
        memcpy(buf, r->iov[0].iov_base, r->iov[0].iov_len);
        if (r->iov[1].iov_len)
            memcpy(buf + r->iov[0].iov_len, r->iov[1].iov_base, r->iov[1].iov_len);
        memset(buf + r->iov[0].iov_len + r->iov[1].iov_len, 0,
               (size_t)stride - r->iov[0].iov_len - r->iov[1].iov_len);
    }
    for (int64_t done = 0; done < stride;) {
        ssize_t k = write ? pwrite(fd, buf + done, (size_t)(stride - done), r->offset + done)
                          : pread(fd, buf + done, (size_t)(stride - done), r->offset + done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno ? errno : EIO;
        if (k == 0)
            return write ? ENOSPC : EIO;
        done += k;
    }
    if (!write) {
        memcpy(r->iov[0].iov_base, buf, r->iov[0].iov_len);
        if (r->iov[1].iov_len)
            memcpy(r->iov[1].iov_base, buf + r->iov[0].iov_len, r->iov[1].iov_len);
    }
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
    int write = r->op == EMBER_IO_WRITE;
    if (__atomic_load_n(&p->fail_in, __ATOMIC_RELAXED) > 0 && (write || !p->fail_writes_only)) {
        int64_t left = __atomic_sub_fetch(&p->fail_in, 1, __ATOMIC_RELAXED);
        if (left <= 0) {
            __atomic_store_n(&p->fail_in, 1, __ATOMIC_RELAXED); /* every later one fails too */
            return p->fail_err;
        }
    }
    if (r->bounce)
        return bounced(fd, r, p->bounce + (int64_t)who * p->stride, p->stride, write);
    struct iovec iov[2] = {r->iov[0], r->iov[1]};
    int cnt = iov[1].iov_len ? 2 : 1, first = 0;
    int64_t off = r->offset;
    while (first < cnt) {
        ssize_t k = write ? pwritev(fd, iov + first, cnt - first, off) : preadv(fd, iov + first, cnt - first, off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (k == 0)
            return write ? ENOSPC : EIO; /* short file: the store file shrank */
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

/* Claims and runs requests of the current batch until none are left.  A
 * claim in the second part first waits until the first part is done. */
static void work_batch(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t first, int64_t n, int who)
{
    for (;;) {
        int64_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (i >= n)
            break;
        if (i >= first && first > 0) {
            pthread_mutex_lock(&p->mu);
            while (p->done < first)
                pthread_cond_wait(&p->done_cv, &p->mu);
            int skip = p->first_failed;
            pthread_mutex_unlock(&p->mu);
            if (skip) {
                reqs[i].err = ECANCELED;
                goto finished;
            }
        }
        reqs[i].err = do_io(p, fd, &reqs[i], who);
    finished:
        pthread_mutex_lock(&p->mu);
        if (reqs[i].err && i < first)
            p->first_failed = 1;
        p->done++;
        if (p->done == p->n || p->done == first)
            pthread_cond_broadcast(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
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
        int64_t n = p->n, first = p->first;
        p->in_batch++;
        pthread_mutex_unlock(&p->mu);
        work_batch(p, fd, reqs, first, n, who);
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

int ember_io_pool_set_stride(ember_io_pool *p, int64_t stride)
{
    void *b = NULL;
    if (posix_memalign(&b, 4096, (size_t)(stride * (p->nthreads + 1))) != 0)
        return EMBER_ENOMEM;
    free(p->bounce);
    p->bounce = b;
    p->stride = stride;
    return 0;
}

void ember_io_start(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t first, int64_t n)
{
    ember_io_wait(p);
    pthread_mutex_lock(&p->mu);
    p->fd = fd;
    p->reqs = reqs;
    p->n = n;
    p->first = first;
    p->first_failed = 0;
    p->done = 0;
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
    work_batch(p, p->fd, p->reqs, p->first, p->n, p->nthreads);
    pthread_mutex_lock(&p->mu);
    /* also until every worker has left the batch: a late one must not claim
     * requests of the next batch with this batch's pointers */
    while (p->done < p->n || p->in_batch > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    p->active = 0;
    pthread_mutex_unlock(&p->mu);
    for (int64_t i = 0; i < p->n; i++)
        if (p->reqs[i].err)
            return i;
    return -1;
}

int64_t ember_io_run(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t first, int64_t n)
{
    if (n <= 0)
        return -1;
    ember_io_start(p, fd, reqs, first, n);
    return ember_io_wait(p);
}

void ember_io_inject_failure(ember_io_pool *p, int64_t k, int err, int writes_only)
{
    p->fail_err = err;
    p->fail_writes_only = writes_only;
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
