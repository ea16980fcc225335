/*
 * ssd_log.h: the SSD tier's store file as a log (docs/tiers.md, "The store
 * file").  A row's record (values, then state, as the table holds them) is
 * never rewritten in place: a dirty row that leaves the cache is copied to
 * the end of the open segment buffer in DRAM, and a writer thread writes
 * whole segments with one large sequential write each.  An index in DRAM
 * says where each row's newest record is; the records it no longer points
 * at are dead, and compaction moves a segment's live records forward so
 * that its space can be written again.
 *
 * Why: random 512-byte write-backs were four fifths of the tier's I/O, and
 * random writes into fresh space are what virtual disks do worst; a segment
 * append costs one request per few thousand rows, and reads never queue
 * behind writes (the writer has its own thread and its own requests).
 *
 * Layout: a 4 KiB marker block, then segments of seg_bytes: seg_recs
 * records packed (rec_bytes each), then a footer of the segment's rows
 * (uint32 each, SSD_LOG_NONE where nothing was appended), so compaction can
 * tell which record belongs to which row without a reverse index.  Record
 * number k = segment * seg_recs + position; the file never holds more than
 * max_segs segments (ember_ssd_layout_of, ssd_size.h): about 1.5 times the
 * rows, so greedy compaction (fewest live records first) rewrites at most
 * two live records per record appended: write amplification <= 3.
 *
 * Threads: everything but the segment writes runs on the caller's thread
 * (the step's); the writer only writes buffers queued to it.  A buffer is
 * reused only after its write succeeded; a failed write keeps the buffer and
 * its records (reads are served from it) until a retry succeeds, so a write
 * error loses nothing and is reported by the next ssd_log_check.
 */
#ifndef EMBER_TIER_SSD_LOG_H
#define EMBER_TIER_SSD_LOG_H

#include <pthread.h>
#include <stdint.h>

#define SSD_LOG_NONE UINT32_MAX
#define SSD_LOG_BUFS 4 /* segment buffers: one open, the others queued */
#define SSD_LOG_MARK_BYTES 4096

enum { LOG_BUF_FREE = 0, LOG_BUF_OPEN, LOG_BUF_QUEUED, LOG_BUF_WRITTEN, LOG_BUF_FAILED };

typedef struct ssd_log_buf {
    char *mem;      /* seg_bytes, 4096-aligned: records, then the footer */
    int64_t seg;    /* its segment, -1 when free                         */
    int32_t fill;   /* records appended                                  */
    int state;      /* LOG_BUF_*                                         */
    int err;        /* errno of its failed write                         */
} ssd_log_buf;

typedef struct ssd_log {
    int fd, direct;
    int64_t rows, rec_bytes;
    int64_t seg_recs, seg_bytes, data_bytes; /* data_bytes: where the footer begins */
    int64_t max_segs, nsegs;                 /* segments allowed; in the file now   */
    uint32_t *where;                         /* [rows] newest record, or NONE       */
    int32_t *live;                           /* [max_segs] live records             */
    int64_t *free_segs;                      /* [max_segs] segments with none live  */
    int64_t nfree;
    ssd_log_buf buf[SSD_LOG_BUFS];
    int open;                                /* the buffer appended to, or -1       */
    char *scratch;                           /* a segment read for compaction       */
    /* the writer */
    pthread_t thread;
    int started, stop;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int queue[SSD_LOG_BUFS], qhead, qn;      /* buffers to write, in order          */
    int writing;                             /* the writer holds a buffer           */
    /* failure injection (tests): writes from the k-th on fail with fail_err */
    int64_t fail_in;
    int fail_err;
    /* counters */
    int64_t appended, moved, seg_writes, bytes_written;
} ssd_log;

/* Sets the log up over fd (empty past the marker block) for rows records
 * of rec_bytes, and starts the writer.  0, or an errno (ENOMEM, EAGAIN). */
int ssd_log_init(ssd_log *l, int fd, int direct, int64_t rows, int64_t rec_bytes);
/* Stops the writer (after the queued writes) and frees everything. */
void ssd_log_free(ssd_log *l);

static inline int ssd_log_written(const ssd_log *l, uint32_t row) { return l->where[row] != SSD_LOG_NONE; }
/* The newest record of row when it is still in a buffer (not yet known to
 * be in the file), else NULL. */
const char *ssd_log_buffered(const ssd_log *l, uint32_t row);
/* Its place in the file (bytes); the row must be written. */
int64_t ssd_log_offset(const ssd_log *l, uint32_t row);

/* Appends row's record (values: vbytes, then state: sbytes); the record it
 * had dies.  May wait for the writer, and may compact a segment (one read).
 * 0, or an errno when no buffer can be had (a write failed and its retry
 * too, or the compaction read failed): nothing changed then. */
int ssd_log_append(ssd_log *l, uint32_t row, const void *values, int64_t vbytes, const void *state,
                   int64_t sbytes);
/* Retries buffers whose write failed (on this thread).  0, or the errno of
 * the first that failed again. */
int ssd_log_check(ssd_log *l);
/* Writes everything appended so far (the open buffer too) and waits; a
 * write that fails is tried once more.  0, or the errno of a failed write
 * (its buffer is kept for a later retry). */
int ssd_log_sync(ssd_log *l);

/* Waits until the writer has no queued buffer left. */
void ssd_log_wait(ssd_log *l);

/* Test hook: the k-th segment write from now and every later one fail with
 * err; k = 0: off. */
void ssd_log_inject_failure(ssd_log *l, int64_t k, int err);

#endif
