/*
 * ember-bench.h: the step benchmark behind `ember bench` (docs/PERFORMANCE.md)
 * as a library call: one measurement of ember_forward (and ember_backward
 * with the optimizer fused) on a synthetic workload, as one JSON object
 * whose fields are the PyTorch peer benchmark's and ember's own.
 *
 *   ember_bench_config c = ember_bench_config_default();
 *   c.optimizer = EMBER_OPT_ADAGRAD;
 *   char *line = NULL;
 *   ember_bench_run(&c, &line);   // EMBER_OK or not, line says what happened
 *   puts(line);
 *   free(line);
 */
#ifndef EMBER_BENCH_API_H
#define EMBER_BENCH_API_H

#include <stdint.h>

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One measurement:
 *   collection = `shape.tables` tables of shape.rows x dim, uniform init,
 *                one SUM feature each, every table with the placement,
 *                exchange, storage, kind and hot rows below; threads
 *   batches    = warmup + iters batches of ember_synth(shape), drawn before
 *                the clock starts (every iteration gets a fresh batch, as
 *                the peer does); a world of W ranks splits each global
 *                batch, rank r keeping samples [r*B/W, (r+1)*B/W)
 *   iteration  = ember_forward, then (unless forward_only) ember_backward
 *                against a fixed random d_pooled; `schedule` overlap or
 *                stale begins the next batch before this one's backward
 *                (ember_forward_begin / _end), and dense_ms of arithmetic
 *                stands in for the dense model between them, calling
 *                ember_forward_progress every 50 us
 *   timing     = per iteration after warmup, the maximum over ranks (each
 *                starts after a barrier): median, min, max, mean; bytes
 *                exchanged per step (ember_stats) beside the cost model's
 *                prediction (docs/planner.md); SSD tier counters, hit rate
 *                and, with belady, Belady's offline optimum for the same
 *                cache and ids (one process); dynamic tables' counters;
 *                memory, page faults, peak RSS
 * A measurement whose rows and optimizer state would pass max_gb (on the
 * rank holding most) is skipped: its line says "skipped".  hot_rows needs
 * the ROW placement, the ROWS exchange, the blocking schedule, warmup >= 1
 * and a training optimizer (the hot rows come from the warm-up's counts,
 * ember_refresh_hot_rows).  Collective over world.
 *
 * *line (free() it) is always set unless out of memory: the measurement's
 * JSON object, compact, one line; or, on failure, the object's common
 * fields and "error" (an agreed failure: the same on every rank).  Returns
 * EMBER_OK (measured or skipped) or the failure's status.
 */
typedef struct ember_bench_config {
    ember_synth_config shape;      /* tables, rows, batch_size, pooling,
                                      zipf, alpha, seed (weighted: unused)  */
    int32_t dim;                   /* row width                              */
    const char *workload;          /* the "workload" field; NULL: made of the
                                      shape, e.g. "t8_r100000_d64_b1024_p20_zipf" */
    int forward_only;              /* 1: ember_forward alone ("optimizer":
                                      "none")                               */
    ember_optimizer_kind optimizer;
    double lr;                     /* default 0.01                           */
    int32_t threads;               /* OpenMP threads; default 1              */
    int32_t iters, warmup;         /* timed and untimed; default 10, 3       */
    double max_gb;                 /* default 20                             */
    ember_placement placement;     /* every table's; TABLE: owner t % W      */
    ember_exchange exchange;
    int64_t hot_rows;              /* every table's                          */
    ember_schedule schedule;
    double dense_ms;               /* the dense model's stand-in, 0..1e4     */
    /* the SSD tier (storage SSD): a store file per table in ssd_dir under a
     * cache of cache_bytes (0: 256 MiB) per table and rank */
    ember_storage storage;         /* MEMORY (default) or SSD                */
    int64_t cache_bytes;
    ember_cache_policy policy;     /* default LOOKAHEAD: batches announced
                                      with ember_prefetch after each forward */
    const char *ssd_dir;           /* default "."                            */
    int32_t lookahead;             /* default 16                             */
    int32_t lookahead_max;         /* > lookahead: the window follows the data
                                      up to this (0: it stays)             */
    int buffered;                  /* 1: through the page cache              */
    int32_t io_threads;            /* 0: the collection's                    */
    int belady;                    /* 1: also Belady's hit rate              */
    /* dynamic tables: keys are the ids scattered by splitmix64, capacity
     * rows / W per rank */
    int dynamic;
    int32_t key_bits;              /* keys from a Zipf law over 2^key_bits
                                      ranks; 0: over rows                    */
    int32_t admit_after;
    ember_evict_policy evict;      /* TTL frees rows unused for 8 steps      */
    ember_row_precision precision; /* every table's rows (default FP32)      */
    ember_rounding rounding;       /* and their rounding (default STOCHASTIC) */
    ember_row_precision state_precision; /* Adagrad's and Adam's state (FP32) */
    ember_world *world;            /* NULL: a world of one                   */
    int written;                   /* SSD tier, fixed tables: 1 writes every
                                      row's initial values to its store before
                                      the clock starts (ember_table_write), as
                                      a table loaded from a checkpoint is, so
                                      that every load reads (0: rows never
                                      written are computed, not read)        */
} ember_bench_config;
/* `ember bench`'s defaults: the quick shape (8 x 100000 x 64, batch 1024,
 * pooling 20, Zipf 1.05), SGD, the rest as noted above. */
EMBER_API ember_bench_config ember_bench_config_default(void);

EMBER_API int ember_bench_run(const ember_bench_config *c, char **line);

/* The fields every line of the measurement c has (its workload and
 * settings), and "error" when error is not NULL: for a caller that runs
 * the measurement elsewhere (`ember bench` runs each in a child process)
 * and reports one that died.  free() it; NULL out of memory. */
EMBER_API char *ember_bench_line(const ember_bench_config *c, const char *error);

#ifdef __cplusplus
}
#endif
#endif
