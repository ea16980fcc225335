/*
 * io_pool.h: a small pool of I/O threads that run batches of row reads
 * (preadv) against one file, either waited for at once or in the background
 * while the caller computes.  (Writes are whole segments, by the store's
 * log writer: ssd_log.h.)
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

enum { EMBER_IO_READ = 0, EMBER_IO_INIT = 2, EMBER_IO_DONE = 3 };

typedef struct ember_io_req {
    int64_t offset;      /* bytes into the file                               */
    struct iovec iov[2]; /* values, then state (iov[1].iov_len may be 0)      */
    int op;              /* EMBER_IO_READ (preadv); _INIT: the pool's init hook
                            fills the row (no I/O); _DONE: nothing to do      */
    uint32_t row;        /* for _INIT                                         */
    int bounce;          /* O_DIRECT: read the aligned blocks around the bytes
                            into a buffer of the thread, then copy them out  */
    int32_t err;         /* errno after the run; 0 when it succeeded          */
} ember_io_req;

/* Fills a row that was never written: values from the initializer, state
 * zeroed (iov[0] and iov[1] of the request). */
typedef void (*ember_io_init_fn)(void *ctx, ember_io_req *req);

typedef struct ember_io_pool ember_io_pool;

/* Starts `threads` I/O threads (>= 1).  NULL when out of memory or when a
 * thread cannot be started. */
ember_io_pool *ember_io_pool_create(int threads, ember_io_init_fn init, void *init_ctx);
/* O_DIRECT: requests with `bounce` cover at most bytes (a multiple of 512)
 * of aligned blocks, read through a 4096-aligned buffer per thread.  0, or
 * EMBER_ENOMEM. */
int ember_io_pool_set_bounce(ember_io_pool *p, int64_t bytes);
void ember_io_pool_destroy(ember_io_pool *p); /* waits for a running batch */

/* Runs n requests on fd.  The caller's thread works on the batch too.
 * Returns the index of the first failed request, or -1 when all succeeded. */
int64_t ember_io_run(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t n);

/* The same in the background: returns at once; reqs must stay valid until
 * ember_io_wait.  At most one batch runs at a time: a second start waits for
 * the first. */
void ember_io_start(ember_io_pool *p, int fd, ember_io_req *reqs, int64_t n);
/* Waits for the background batch (if any); returns as ember_io_run. */
int64_t ember_io_wait(ember_io_pool *p);

/* Test hook: the k-th read from now (k >= 1) and every later one fail with
 * errno `err` (EIO); k = 0 switches failure injection off. */
void ember_io_inject_failure(ember_io_pool *p, int64_t k, int err);

#endif
