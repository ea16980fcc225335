/*
 * bench.h: the parts of ember_bench_run (include/ember-bench.h), the step
 * benchmark behind `ember bench`, one file each:
 *
 *   bench_measure.c  the measurement from start to end, the config's
 *                    defaults, the line's common fields
 *   bench_batches.c  the collection, and every batch drawn before the clock
 *                    starts (this rank's share kept), d_pooled
 *   bench_loop.c     the timed iterations: forward (or begin / end),
 *                    prefetch, the dense model's stand-in, backward
 *   bench_report.c   reductions over the ranks and the line's fields:
 *                    times, bytes against the cost model, SSD tier and
 *                    Belady, dynamic tables, memory
 */
#ifndef EMBER_API_BENCH_H
#define EMBER_API_BENCH_H

#include <stdint.h>
#include <sys/resource.h>

#include <jansson.h>

#include "ember-bench.h"
#include "ember.h"

typedef struct bench_run {
    const ember_bench_config *c;
    int32_t R, rank;              /* the world                               */
    int train;                    /* ember_backward too                      */
    int nb;                       /* warmup + iters                          */
    int announced;                /* the last batch announced (lookahead)    */
    int32_t window_sum, window_n, window_min, window_max; /* the window's
                                     length over the timed iterations      */
    int64_t ids_per_iter;         /* of the global batch                     */
    int32_t first, local_b;       /* this rank's samples of every batch      */
    int64_t local_ids;
    json_t *j;                    /* the line                                */
    /* the collection */
    ember_table_config *tcfg;
    ember_feature_config *fcfg;
    char *names;
    ember_collection_config ccfg;
    ember_collection *coll;
    /* the batches and buffers */
    int64_t *ids;                 /* [nb][local_ids]                         */
    int32_t *lengths;             /* one lengths array: every bag `pooling`  */
    float *pooled, *pooled_next, *d_pooled;
    double distinct;              /* distinct rows, summed over tables and
                                     batches, of the global batches          */
    double create_ms, gen_ms;
    /* the timed iterations */
    double *t_it;                 /* [4][iters]: step, forward, backward,
                                     exchange seconds                        */
    double *pred;                 /* [2][R]: predicted bytes sent, received  */
    double *by_rank;              /* [R]: measured bytes sent per step       */
    int64_t bytes[2];             /* this rank's bytes sent, received        */
    struct rusage ru0, ru1;
    ember_tier_stats tier0, tier1;/* at the warm-up's end, and at the end    */
    ember_stats stats;
    /* a failure: why (agreed before each collective step) */
    char why[768];
} bench_run;

/* bench_batches.c.  Each: EMBER_OK, or a status with r->why (this rank's
 * own: the caller agrees on it). */
int bench_build_collection(bench_run *r);
int bench_draw_batches(bench_run *r);

/* bench_loop.c: the iterations.  EMBER_OK, or the failing call's status
 * with r->why ("ember_forward: ..."), the same on every rank. */
int bench_iterate(bench_run *r);

/* bench_report.c: the reductions and the line's measured fields. */
void bench_report(bench_run *r);

/* bench_measure.c: the common fields of a line of c (a new object). */
json_t *bench_line_base(const ember_bench_config *c, int32_t ranks);

#endif
