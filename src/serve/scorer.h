/*
 * scorer.h: concurrent requests grouped into micro-batches and scored by
 * a pool of scoring threads (docs/inference.md, "Serving").
 *
 * Requests wait in one queue; each of the `threads` scoring threads takes
 * the requests waiting when the first of them has waited max_wait, or as
 * soon as max_batch samples wait, whichever comes first, and scores them as
 * one batch (a request larger than max_batch is scored alone, never split).
 * Requests are taken in arrival order.  A request comes with the model
 * version it was decoded for (model.h); a micro-batch holds requests of one
 * version only, and scoring thread i scores with that version's predictor
 * i, so no predictor is used by two threads at once.  Each sample's score
 * depends on its own features only; which samples share a batch can change
 * the last bits of a score through the dense model's matrix products (BLAS
 * blocks by batch size), never more.
 *
 * The scorer also keeps the server's statistics: requests, errors,
 * latency percentiles over the last SERVE_WINDOW requests, batch sizes, and
 * where the time went (decoding, waiting, scoring, the rest is HTTP).
 */
#ifndef EMBER_SERVE_SCORER_H
#define EMBER_SERVE_SCORER_H

#include <stdint.h>

#include "ember.h"
#include "serve/model.h"
#include "serve/request.h"

#define SERVE_WINDOW 65536
/* Latency histogram: upper bounds in seconds (a last bucket, +Inf, is
 * every request). */
#define SERVE_LATENCY_BUCKETS 14
#define SERVE_LATENCY_BOUNDS {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}

typedef struct serve_scorer serve_scorer;

typedef struct serve_scorer_config {
    int32_t max_batch;  /* samples per micro-batch, >= 1                         */
    double max_wait;    /* seconds the oldest request waits for others, >= 0     */
    int32_t threads;    /* scoring threads, >= 1; every model version served
                           has as many predictors                              */
} serve_scorer_config;

/* Where a request's time went, in seconds. */
typedef struct serve_timing {
    double decode, wait, score; /* score: its micro-batch's scoring           */
} serve_timing;

typedef struct serve_stats {
    int64_t requests, errors;    /* answered, and of those with an error       */
    int64_t samples, batches;    /* scored                                     */
    double latency_p50, latency_p99, latency_mean;   /* seconds, last window   */
    double batch_p50, batch_p99, batch_mean;         /* samples, last window   */
    double seconds_total, seconds_decode, seconds_wait, seconds_score; /* sums over requests */
    int64_t latency_le[SERVE_LATENCY_BUCKETS]; /* requests answered within SERVE_LATENCY_BOUNDS[i] */
} serve_stats;

/* Starts the scoring threads, and sets OpenBLAS's process-wide thread count
 * to blas_threads (the predictors' dense models', one) for the scorer's
 * life.  EMBER_EINVAL, EMBER_ENOMEM. */
int serve_scorer_create(const serve_scorer_config *c, int32_t blas_threads, serve_scorer **out);
/* Scores req (req->n samples, decoded for m, which the caller holds until
 * this returns) into scores, waiting for its micro-batch.  Thread-safe.
 * EMBER_OK; EMBER_EINVAL when scoring failed (err has why); EMBER_ESTATE
 * when the scorer is stopping. */
int serve_scorer_score(serve_scorer *s, serve_model *m, const serve_batch *req, float *scores, serve_timing *t,
                       char *err, size_t errlen);
/* Refuses new requests, scores the ones queued, joins the threads. */
void serve_scorer_stop(serve_scorer *s);
void serve_scorer_destroy(serve_scorer *s);

/* Counts one answered request: its latency from first byte to answer, and
 * its timing (NULL: it never reached the scorer, e.g. a malformed body). */
void serve_scorer_record(serve_scorer *s, int error, double latency, const serve_timing *t);
void serve_scorer_stats(serve_scorer *s, serve_stats *out);

#endif
