/*
 * bench_loop.c: the iterations of ember_bench_run (bench.h).  Each starts
 * after a barrier (untimed, so every rank starts the step together) and
 * is timed from its forward to the end of its backward:
 *
 *   blocking:         ember_forward(n), [prefetch], stand-in, ember_backward(n)
 *   overlap, stale:   begin(n + 1) after n's outputs came from the last
 *                     step's end, [prefetch], stand-in, backward(n), end(n + 1)
 *
 * The dense model's stand-in is a fixed amount of dependent arithmetic
 * (calibrated once to take dense_ms alone), driving the begun batch's
 * exchanges every ~50 us as the trainer's layers do: work, not wall time,
 * so what the progress calls do adds to the step.  Hot rows are chosen
 * from the warm-up's counts when it ends.
 */
#include <stdio.h>

#include "api/bench.h"
#include "comm/collect.h"
#include "comm/comm.h"

static double arith(int64_t n)
{
    volatile double x = 1.0;
    for (int64_t k = 0; k < n; k++)
        x = x * 1.0000001 + 1e-9;
    return x;
}

/* Iterations of arith per microsecond, the same on every rank (the
 * fastest rank's: equal work everywhere, so the ranks stay in step). */
static double standin_rate(ember_world *w)
{
    double t0 = ember_now();
    arith(4000000);
    double rate[1] = {4000000 / ((ember_now() - t0) * 1e6)};
    ember_comm_reduce_double(w, rate, 1, EMBER_REDUCE_MAX);
    return rate[0];
}

static void dense_standin(ember_collection *coll, double ms, double per_us)
{
    int64_t chunk = (int64_t)(50 * per_us) + 1, left = (int64_t)(ms * 1e3 * per_us);
    for (; left > 0; left -= chunk) {
        arith(left < chunk ? left : chunk);
        ember_forward_progress(coll);
    }
}

/* "CALL: STATUS: message" into r->why; returns st. */
static int failed(bench_run *r, const char *call, int st, int with_status)
{
    if (with_status)
        snprintf(r->why, sizeof r->why, "%s: %s: %s", call, ember_status_str(st), ember_errmsg(r->coll));
    else
        snprintf(r->why, sizeof r->why, "%s: %s", call, ember_errmsg(r->coll));
    return st;
}

/* Batch n of this rank. */
static ember_batch batch_at(const bench_run *r, int n)
{
    ember_batch b = {
        .batch_size = r->local_b,
        .num_features = r->c->shape.tables,
        .lengths = r->lengths,
        .ids = r->ids + (size_t)n * r->local_ids,
        .weights = NULL,
        .num_ids = r->local_ids,
    };
    return b;
}

/* Announces the batches after n that the lookahead window holds and that
 * were not announced before (the window's length is the collection's: it
 * may follow the data). */
static int prefetch(bench_run *r, int n)
{
    if (n == 0)
        r->announced = 0;
    const int window = ember_prefetch_depth(r->coll);
    if (n >= r->c->warmup) {
        r->window_sum += window;
        r->window_n++;
        r->window_min = r->window_n == 1 || window < r->window_min ? window : r->window_min;
        r->window_max = window > r->window_max ? window : r->window_max;
    }
    for (int b = r->announced + 1; b <= n + window && b < r->nb; b++) {
        ember_batch nx = batch_at(r, b);
        int st = ember_prefetch(r->coll, &nx);
        if (st != EMBER_OK)
            return failed(r, "ember_prefetch", st, 0);
        r->announced = b;
    }
    return EMBER_OK;
}

/* The warm-up's end: hot rows from its counts, the counters' start. */
static int warmup_end(bench_run *r)
{
    int st;
    if (r->c->hot_rows > 0 && (st = ember_refresh_hot_rows(r->coll)) != EMBER_OK)
        return failed(r, "ember_refresh_hot_rows", st, 0);
    getrusage(RUSAGE_SELF, &r->ru0);
    ember_collection_tier_stats(r->coll, &r->tier0);
    return EMBER_OK;
}

/* One iteration: its forward, backward and (pipelined) next begin and end. */
static int step(bench_run *r, int n, double rate)
{
    const ember_bench_config *c = r->c;
    ember_batch b = batch_at(r, n);
    if (r->R > 1)
        ember_comm_barrier(c->world); /* every rank starts the step together (untimed) */
    double a = ember_now();
    /* pipelined: batch n's outputs came from the last step's end; batch
     * n + 1 is begun now and ended after n's backward */
    const int pipelined = c->schedule != EMBER_SCHEDULE_BLOCKING, ahead = pipelined && n + 1 < r->nb;
    int st = pipelined && n > 0 ? EMBER_OK : ember_forward(r->coll, &b, r->pooled, NULL);
    if (st == EMBER_OK && ahead) {
        ember_batch nx = batch_at(r, n + 1);
        st = ember_forward_begin(r->coll, &nx, r->pooled_next, NULL);
    }
    double m = ember_now();
    if (st != EMBER_OK)
        return failed(r, "ember_forward", st, 1);
    if (c->storage == EMBER_STORAGE_SSD && c->policy == EMBER_CACHE_LOOKAHEAD && (st = prefetch(r, n)) != EMBER_OK)
        return st;
    dense_standin(r->coll, c->dense_ms, rate);
    double dd = ember_now();
    if (r->train && (st = ember_backward(r->coll, r->d_pooled, NULL)) != EMBER_OK)
        return failed(r, "ember_backward", st, 1);
    ember_collection_stats(r->coll, &r->stats); /* batch n's, before n + 1 is ended */
    if (ahead) {
        st = ember_forward_end(r->coll);
        float *p = r->pooled;
        r->pooled = r->pooled_next;
        r->pooled_next = p;
        if (st != EMBER_OK)
            return failed(r, "ember_forward_end", st, 0);
    }
    double e = ember_now();
    if (n >= c->warmup) {
        const int i = n - c->warmup;
        r->t_it[i] = e - a;
        r->t_it[c->iters + i] = m - a;
        r->t_it[2 * c->iters + i] = e - dd;
        r->t_it[3 * c->iters + i] = r->stats.last_comm_seconds;
        r->bytes[0] += r->stats.last_bytes_sent;
        r->bytes[1] += r->stats.last_bytes_received;
    }
    return EMBER_OK;
}

int bench_iterate(bench_run *r)
{
    const double rate = r->c->dense_ms > 0 ? standin_rate(r->c->world) : 0;
    int st = EMBER_OK;
    for (int n = 0; n < r->nb && st == EMBER_OK; n++) {
        if (n == r->c->warmup && (st = warmup_end(r)) != EMBER_OK)
            break;
        st = step(r, n, rate);
    }
    if (st != EMBER_OK)
        return st;
    getrusage(RUSAGE_SELF, &r->ru1);
    ember_collection_tier_stats(r->coll, &r->tier1);
    return EMBER_OK;
}
