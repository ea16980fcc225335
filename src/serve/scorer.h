/*
 * scorer.h: one predictor shared by concurrent requests, which are grouped
 * into micro-batches (docs/inference.md, "Serving").
 *
 * Requests wait in a queue; one scoring thread takes the requests waiting
 * when the first of them has waited max_wait, or as soon as max_batch
 * samples wait, whichever comes first, and scores them as one batch (a
 * request larger than max_batch is scored alone, never split).  Requests
 * are taken in arrival order.  Each sample's score depends on its own
 * features only; which samples share a batch can change the last bits of a
 * score through the dense model's matrix products (BLAS blocks by batch
 * size), never more.
 *
 * The scorer also keeps the server's statistics: requests, errors,
 * latency percentiles over the last SERVE_WINDOW requests, batch sizes, and
 * where the time went (decoding, waiting, scoring, the rest is HTTP).
 */
#ifndef EMBER_SERVE_SCORER_H
#define EMBER_SERVE_SCORER_H

#include <stdint.h>

#include "ember.h"
#include "serve/request.h"

#define SERVE_WINDOW 65536

typedef struct serve_scorer serve_scorer;

typedef struct serve_scorer_config {
    int32_t max_batch;  /* samples per micro-batch, >= 1                         */
    double max_wait;    /* seconds the oldest request waits for others, >= 0     */
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
} serve_stats;

/* Starts the scoring thread.  p stays the caller's and must outlive the
 * scorer; nothing else may use it meanwhile.  EMBER_EINVAL, EMBER_ENOMEM. */
int serve_scorer_create(ember_predictor *p, const serve_scorer_config *c, serve_scorer **out);
/* Scores req (req->n samples) into scores, waiting for its micro-batch.
 * Thread-safe.  EMBER_OK; EMBER_EINVAL when scoring failed (err has why);
 * EMBER_ESTATE when the scorer is stopping. */
int serve_scorer_score(serve_scorer *s, const serve_batch *req, float *scores, serve_timing *t, char *err,
                       size_t errlen);
/* Refuses new requests, scores the ones queued, joins the thread. */
void serve_scorer_stop(serve_scorer *s);
void serve_scorer_destroy(serve_scorer *s);

/* Counts one answered request: its latency from first byte to answer, and
 * its timing (NULL: it never reached the scorer, e.g. a malformed body). */
void serve_scorer_record(serve_scorer *s, int error, double latency, const serve_timing *t);
void serve_scorer_stats(serve_scorer *s, serve_stats *out);

#endif
