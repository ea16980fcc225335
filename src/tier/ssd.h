/*
 * ssd.h: the SSD tier's store (ssd.c; docs/tiers.md): rows and optimizer
 * state in a store file, a DRAM cache of slots in front of it, each as the
 * table holds it (fp32, or halves: ssd_half.c).  Its
 * constructor, counters and test hook; the store itself is an ember_store
 * (table/store.h), its sizes ssd_size.h, its insides ssd_impl.h.
 */
#ifndef EMBER_TIER_SSD_H
#define EMBER_TIER_SSD_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"
#include "table/store.h"

typedef void (*ember_row_init_fn)(void *ctx, uint32_t row, float *values);

typedef struct ember_ssd_params {
    const char *dir;          /* folder of the store file                     */
    const char *name;         /* file stem (the first table's name)           */
    const char *label;        /* for messages, e.g. "table 'user'"            */
    int32_t rank;
    int64_t rows;             /* local rows                                   */
    int32_t dim, state_floats;
    int64_t cache_bytes;
    ember_cache_policy policy; /* LRU, LFU or LOOKAHEAD                       */
    int32_t lookahead;        /* window of announced batches, 1..63           */
    int32_t io_threads;
    int buffered;             /* 1: through the page cache; 0: O_DIRECT
                                 where the filesystem allows it          */
    ember_row_init_fn init;   /* values of a row never written (thread-safe)  */
    void *init_ctx;
    int row_enc, state_enc;   /* quant.h's EMBER_ENC_FP16 or _BF16: rows or
                                 state held as halves (store.h's qrows,
                                 qstate); 0: fp32                             */
} ember_ssd_params;

/* Creates the store file <dir>/<name>.rank<rank>.ember-store (locked,
 * space reserved) and the cache.  Errors: EMBER_EIO (missing folder,
 * read-only, in use by another process, too small: named), EMBER_EINVAL (a
 * cache that holds no row), EMBER_ENOMEM; the message goes to err. */
int ember_store_ssd_create(const ember_ssd_params *p, ember_store **out, char *err, size_t errlen);

/* Lookahead: the window of announced batches a store keeps, from now on
 * (1..63; announcements past it are ignored); and the counters the
 * collection's window follows, without the tier stats' dirty-row scan:
 * accesses, misses (demand loads plus prefetched rows used), evictions, and
 * the sampled rows' loads and cold reloads (their ratio estimates the share
 * of loads that are cold reloads). */
void ember_store_ssd_set_lookahead(ember_store *s, int32_t K);
typedef struct ember_ssd_window_counts {
    int64_t accesses, misses, evictions, sample_loads, sample_reloads;
} ember_ssd_window_counts;
void ember_store_ssd_window_counts(const ember_store *s, ember_ssd_window_counts *out);

/* Counters of a store (zeros for the memory tier). */
void ember_store_tier_stats(const ember_store *s, ember_tier_stats *out);

/* Test hook (tests/test_tier.c): the k-th read and the k-th segment write
 * from now and all later ones fail with errno err (writes_only: reads do
 * not); k = 0 turns it off. */
void ember_store_ssd_inject_failure(ember_store *s, int64_t k, int err, int writes_only);
/* Test hook (tests/test_fault_io.c): waits until the store's writer has
 * written (or failed) every segment queued to it; a store of the memory
 * tier: nothing to wait for. */
void ember_store_ssd_wait_writes(ember_store *s);

#endif
