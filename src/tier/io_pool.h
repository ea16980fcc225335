/*
 * io_pool.h: a small pool of I/O threads that run batches of row reads and
 * writes (preadv/pwritev) against one file, either waited for at once or in
 * the background while the caller computes.
 *
 * Why threads and not io_uring: on the project machine's virtio disk a pool
 * of blocking preadv threads reaches the device's random-read limit with a
 * handful of threads, needs no extra dependency and keeps the code small
 * (docs/tiers.md, "I/O").  A request moves one row: its values and its
 * optimizer state are two iovecs of one contiguous record in the file.
 */
#ifndef EMBER_TIER_IO_POOL_H
#define EMBER_TIER_IO_POOL_H

#include <stdint.h>
#include <sys/uio.h>

enum { EMBER_IO_READ = 0, EMBER_IO_WRITE = 1, EMBER_IO_INIT = 2 };

typedef struct ember_io_req {
    int64_t offset;      /* bytes into the file                               */
    struct iovec iov[2]; /* values, then state (iov[1].iov_len may be 0)      */
    int op;              /* EMBER_IO_READ (preadv), _WRITE (pwritev), or _INIT:
                            the pool's init hook fills the row (no I/O)       */
    uint32_t row;        /* for _INIT                                         */
    int bounce;          /* O_DIRECT: move `stride` bytes through an aligned
                            buffer of the thread (the iovecs are not aligned) */
    int32_t err;         /* errno after the run; 0 when it succeeded;
                            ECANCELED when skipped after a failed first part */
} ember_io_req;

/* Fills a row that was never written: values from the initializer, state
 * zeroed (iov[0] and iov[1] of the request). */
typedef void (*ember_io_init_fn)(void *ctx, ember_io_req *req);

typedef struct ember_io_pool ember_io_pool;

/* Starts `threads` I/O threads (>= 1).  NULL when out of memory or when a
 * thread cannot be started. */
ember_io_pool *ember_io_pool_create(int threads, ember_io_init_fn init, void *init_ctx);
/* O_DIRECT: requests with `bounce` move `stride` bytes (a multiple of 512)
 * through a 4096-aligned buffer per thread.  0, or EMBER_ENOMEM. */
int ember_io_pool_set_stride(ember_io_pool *p, int64_t stride);
void ember_io_pool_destroy(ember_io_pool *p); /* waits for a running batch */

/* Runs n requests on fd in two parts: requests [0, first) complete before
 * any of [first, n) starts, and when one of the first part fails the second
 * part is skipped (err = ECANCELED).  That is how a cache writes a dirty
 * victim back before the same slot is read into.  The caller's thread works
 * on the batch too.  Returns the index of the first failed request, or -1
 * when all succeeded. */
int64_t ember_io_run(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t first, int64_t n);

/* The same in the background: returns at once; reqs must stay valid until
 * ember_io_wait.  At most one batch runs at a time: a second start waits for
 * the first. */
void ember_io_start(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t first, int64_t n);
/* Waits for the background batch (if any); returns as ember_io_run. */
int64_t ember_io_wait(ember_io_pool *p);

/* Test hook: the k-th request from now (k >= 1) and every later one fail
 * with errno `err` (ENOSPC, EIO); k = 0 switches failure injection off.
 * Applies to writes only when writes_only is set. */
void ember_io_inject_failure(ember_io_pool *p, int64_t k, int err, int writes_only);

#endif
