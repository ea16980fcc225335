/*
 * ember-serve.h: scoring requests for a server (`ember serve`,
 * docs/inference.md "Serving"): one predictor shared by concurrent
 * requests, each request's body decoded and checked, the requests waiting
 * grouped into micro-batches, and the server's statistics.  The transport
 * (HTTP, a queue, ...) is the caller's: it hands over bodies and answers
 * with the scores or the reason.
 *
 *   ember_scorer_config c = ember_scorer_config_default();
 *   ember_scorer *s = NULL;
 *   ember_scorer_create(predictor, &c, &s);
 *   // in any thread, per request:
 *   float *scores; int32_t n; ember_score_timing t;
 *   int st = ember_scorer_score(s, body, len, EMBER_BODY_JSON, &scores, &n, &t);
 *   // st != EMBER_OK: ember_errmsg(NULL) says why (this thread's message)
 *   ember_scorer_record(s, st != EMBER_OK, seconds_since_the_request_began, st == EMBER_OK ? &t : NULL);
 *   free(scores);
 *   // at the end:
 *   ember_scorer_stop(s);
 *   ember_scorer_destroy(s);
 */
#ifndef EMBER_SERVE_API_H
#define EMBER_SERVE_API_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A scorer: a thread that takes the requests waiting when the first of
 * them has waited max_wait seconds, or as soon as max_batch samples wait,
 * and scores them as one batch with ember_predictor_score (a request
 * larger than max_batch is scored alone, never split), in arrival order.
 * A sample's score depends on its own features only; which samples share
 * a batch can change the last bits of a score through the dense model's
 * matrix products, never more.  The predictor stays the caller's and must
 * outlive the scorer; nothing else may use it meanwhile (it must be a
 * world of one).  Errors: EMBER_EINVAL (a bad config), EMBER_ENOMEM.
 */
typedef struct ember_scorer ember_scorer;
typedef struct ember_scorer_config {
    int32_t max_batch;          /* samples per micro-batch, >= 1; default 512 */
    double max_wait;            /* seconds, >= 0; default 0.0005              */
    int32_t max_samples;        /* per request, >= 1; default 65536           */
} ember_scorer_config;
EMBER_API ember_scorer_config ember_scorer_config_default(void);
/* Errors: EMBER_EINVAL, EMBER_ENOMEM, with ember_errmsg(NULL). */
EMBER_API int ember_scorer_create(ember_predictor *p, const ember_scorer_config *c, ember_scorer **out);
/* Refuses new requests, scores the ones queued, joins the thread. */
EMBER_API void ember_scorer_stop(ember_scorer *s);
EMBER_API void ember_scorer_destroy(ember_scorer *s); /* stops first; accepts NULL */

/* The input a request gives: the model's dense features per sample, and
 * its sparse features by name with their rows (ids in [0, rows); 0: any
 * 64-bit key of a dynamic table).  Names valid while s lives. */
EMBER_API int32_t ember_scorer_num_dense(const ember_scorer *s);
EMBER_API int32_t ember_scorer_num_features(const ember_scorer *s);
EMBER_API const char *ember_scorer_feature(const ember_scorer *s, int32_t f, int64_t *rows);

/*
 * A request's body (docs/inference.md, "Serving"): ids, as a model's
 * features take them, or raw rows, as the training file held them.
 *   JSON    {"dense": [[f, ...], ...], "sparse": {"NAME": [[id, ...], ...],
 *            ...}, "weights": {"NAME": [[w, ...], ...]}}   (weights optional;
 *            a bare integer is a bag of one id)
 *   JSON    {"rows": [{"COLUMN": value, ...}, ...]}: one object per row,
 *            values as the training file holds them (a string, a number,
 *            null for an empty field; a multi_hot column also takes an
 *            array of items); the label and ignored columns may be given
 *            and are not read
 *   CSV, TSV lines as in the training file (its delimiter), a header line
 *            optional (without one, the model's columns in order, the
 *            label's field optional)
 * Raw rows go through the training file's parser with the model's input
 * schema (hashing, transforms and their statistics), so a row scores as
 * the trainer's evaluation scored the same line; a model without an input
 * schema refuses them with the reason.
 *   binary  little-endian, no padding:
 *            0 char[4] "EMBQ"   4 u32 version = 1   8 u32 n (samples)
 *            12 u32 num_dense   16 u32 num_features  20 u32 flags (bit 0: weights)
 *            24 u64 num_ids     32 f32 dense[n*num_dense]
 *            .. i32 lengths[num_features*n] (feature-major)  .. i64 ids[num_ids]
 *            .. f32 weights[num_ids] (flag bit 0)            and nothing after
 * Decoding checks everything a forward would refuse (ids in their rows,
 * finite dense values and weights, at most max_samples samples) and names
 * the sample, the feature and the value at fault: a client's mistake is
 * that client's error, never a failed micro-batch other clients share.
 */
typedef enum ember_body_format {
    EMBER_BODY_JSON = 0,
    EMBER_BODY_BINARY = 1,
    EMBER_BODY_CSV = 2,
    EMBER_BODY_TSV = 3
} ember_body_format;

/* The model's input schema as JSON (the "input_schema" object of its
 * description: what a raw row holds), and its XXH3-64 for a client to
 * cache on; NULL when the model has none (the reason in *why).  Valid
 * while s lives. */
EMBER_API const char *ember_scorer_input_schema(const ember_scorer *s, uint64_t *xxh3, const char **why);

/* Scores the samples of a body (any format above) with the predictor
 * alone, no scorer: what a library user or the Python package calls on
 * raw rows.  The same decoding as a scorer's; the samples are scored in
 * one ember_predictor_score call.  *scores (free() it) and *n as
 * ember_scorer_score's.  Errors: EMBER_EINPUT (the body, named),
 * EMBER_EINVAL (a predictor of a world larger than one), EMBER_ENOMEM, ember_predictor_score's; detail in
 * ember_errmsg(NULL), this thread's message. */
EMBER_API int ember_predictor_score_body(ember_predictor *p, const void *body, size_t len, ember_body_format format,
                                         float **scores, int32_t *n);

/* Where a request's time went, in seconds. */
typedef struct ember_score_timing {
    double decode, wait, score; /* score: its micro-batch's scoring           */
} ember_score_timing;

/*
 * Decodes the body and scores its samples, waiting for their micro-batch.
 * Thread-safe.  *scores (free() it; NULL on failure) gets one score per
 * sample, *n their count (0 for a body of no samples: nothing is scored).
 * Errors, with ember_errmsg(NULL) saying why (this thread's message, since
 * many threads score on one scorer at once):
 *   EMBER_EINPUT   the body is wrong (the client's mistake)
 *   EMBER_ENOMEM   no memory to decode it
 *   EMBER_ESTATE   the scorer is stopping
 *   EMBER_EIO      scoring failed (the predictor's message, or no memory
 *                  for the scores)
 */
EMBER_API int ember_scorer_score(ember_scorer *s, const void *body, size_t len, ember_body_format format, float **scores,
                       int32_t *n, ember_score_timing *t);

/* Counts one answered request: its latency from its first byte to its
 * answer, with an error or not, and its timing (NULL: it never reached
 * the scorer, e.g. a malformed body).  Thread-safe. */
EMBER_API void ember_scorer_record(ember_scorer *s, int error, double latency, const ember_score_timing *t);

/* The statistics: requests answered and errors among them, samples and
 * batches scored, latency and batch-size percentiles over the last 65536
 * requests, and the time spent per phase summed over requests. */
typedef struct ember_serve_stats {
    int64_t requests, errors;
    int64_t samples, batches;
    double latency_p50, latency_p99, latency_mean;   /* seconds               */
    double batch_p50, batch_p99, batch_mean;         /* samples               */
    double seconds_total, seconds_decode, seconds_wait, seconds_score;
} ember_serve_stats;
EMBER_API void ember_scorer_stats(ember_scorer *s, ember_serve_stats *out);

#ifdef __cplusplus
}
#endif
#endif
