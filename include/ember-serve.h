/*
 * ember-serve.h: scoring requests for a server (`ember serve`,
 * docs/inference.md "Serving"): a model opened once per scoring thread,
 * each request's body decoded and checked, the requests waiting grouped
 * into micro-batches, the model replaced while it serves without dropping
 * a request, and the server's statistics.  The transport (HTTP, a queue,
 * ...) is the caller's: it hands over bodies and answers with the scores
 * or the reason.
 *
 *   ember_scorer_config c = ember_scorer_config_default();
 *   c.scorers = 2;
 *   ember_predictor_options po = {NULL, 1};   // OpenMP threads per predictor
 *   ember_scorer *s = NULL;
 *   ember_scorer_open("model", &po, &c, &s);
 *   // in any thread, per request:
 *   float *scores; int32_t n; ember_score_timing t;
 *   int st = ember_scorer_score(s, body, len, EMBER_BODY_JSON, &scores, &n, &t);
 *   // st != EMBER_OK: ember_errmsg(NULL) says why (this thread's message)
 *   ember_scorer_record(s, st != EMBER_OK, seconds_since_the_request_began, st == EMBER_OK ? &t : NULL);
 *   free(scores);
 *   // in any thread, when a new version is out (requests go on meanwhile):
 *   ember_scorer_reload(s, NULL);             // or a new path
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
 * A scorer: `scorers` threads, each taking the requests waiting when the
 * first of them has waited max_wait seconds, or as soon as max_batch
 * samples wait, and scoring them as one batch with ember_predictor_score
 * (a request larger than max_batch is scored alone, never split), in
 * arrival order.  A predictor may not be used by two threads at once, so
 * each scoring thread has its own, opened from the same path: `scorers`
 * threads hold the model's tables `scorers` times.  A sample's score
 * depends on its own features only; which samples share a batch can change
 * the last bits of a score through the dense model's matrix products,
 * never more, and the number of scoring threads changes nothing else.
 */
typedef struct ember_scorer ember_scorer;
typedef struct ember_scorer_config {
    int32_t max_batch;          /* samples per micro-batch, >= 1; default 512 */
    double max_wait;            /* seconds, >= 0; default 0.0005              */
    int32_t max_samples;        /* per request, >= 1; default 65536           */
    int32_t scorers;            /* scoring threads, each with its own predictor;
                                   >= 1 (0: 1); default 1                     */
} ember_scorer_config;
EMBER_API ember_scorer_config ember_scorer_config_default(void);
/*
 * Opens the model at path (a bundle or a checkpoint, as
 * ember_predictor_open) c->scorers times, with options->threads OpenMP
 * threads each (options NULL: 1; options->world must be NULL: a world of
 * one), checks it as ember_scorer_reload does, and starts the scoring
 * threads.  The scorer owns the predictors; it serves version 1 of the
 * model.  Errors: EMBER_EINVAL (a bad config), ember_predictor_open's
 * (EMBER_EIO, EMBER_EFORMAT, EMBER_ECORRUPT naming the file, ...),
 * EMBER_ENOMEM; detail in ember_errmsg(NULL).
 */
EMBER_API int ember_scorer_open(const char *path, const ember_predictor_options *options, const ember_scorer_config *c,
                                ember_scorer **out);
/* A scorer over the caller's predictor p, with one scoring thread
 * (c->scorers must be 0 or 1).  p stays the caller's and must outlive the
 * scorer (or the reload that replaces it); nothing else may use it
 * meanwhile (it must be a world of one).  Errors: EMBER_EINVAL,
 * EMBER_ENOMEM, with ember_errmsg(NULL). */
EMBER_API int ember_scorer_create(ember_predictor *p, const ember_scorer_config *c, ember_scorer **out);
/* Refuses new requests and reloads, scores the ones queued, joins the
 * threads. */
EMBER_API void ember_scorer_stop(ember_scorer *s);
EMBER_API void ember_scorer_destroy(ember_scorer *s); /* stops first; accepts NULL */

/*
 * Replaces the model while requests go on (docs/inference.md, "Reloading
 * a model"):
 *
 *   new = open path (NULL: the path served now) once per scoring thread,
 *         with the options the scorer was opened with;
 *         check it: the files' checksums, every copy the same model, a
 *         sample of zeros scored on each to a finite score
 *   if anything failed: the old model goes on serving; return the error
 *   swap: requests that start from now on are decoded and scored by new;
 *         those that started before finish on the old model
 *   wait for the old model's last request; close it; return EMBER_OK
 *
 * The new model may take another input (other features, rows, dense
 * count or input schema): a request is decoded and scored by the model that
 * was current when it started, and the change is named in the reload
 * status's note.  Both models are in memory until the old one's last
 * request is answered.  Reloads take turns.  Thread-safe; the outcome goes
 * to ember_scorer_reload_status either way.  Errors: EMBER_EINVAL (no path
 * given to a scorer made by ember_scorer_create), EMBER_ESTATE (the scorer
 * is stopping), ember_predictor_open's, EMBER_EFORMAT (the check failed);
 * detail in ember_errmsg(NULL), this thread's message, naming the path.
 */
EMBER_API int ember_scorer_reload(ember_scorer *s, const char *path);

/* The reloads so far. */
typedef struct ember_reload_status {
    int64_t ok, failed;     /* reloads that replaced the model; refused        */
    double last_at;         /* when the last ended, Unix seconds; 0: never     */
    double last_seconds;    /* how long it took: open, check, swap, and once the
                               old model's last request is answered, the drain */
    int last_ok;
    char last_path[1024];   /* what it loaded (cut at 1023 bytes)              */
    char last_error[1024];  /* why it was refused, naming the file; "" if ok   */
    char last_note[512];    /* how the new model's input differs, or ""        */
} ember_reload_status;
EMBER_API void ember_scorer_reload_status(ember_scorer *s, ember_reload_status *out);

/*
 * The model being served, pinned: it stays open, and what these calls
 * return stays valid, until ember_scorer_model_release (a reload meanwhile
 * waits for it before closing it).  status (NULL: not wanted) gets the
 * reloads as of this model: the last that succeeded is the one that made it
 * current (a later one may have been refused), as a health check wants
 * them.  Acquire never fails; hold it briefly.
 */
typedef struct ember_scorer_model ember_scorer_model;
EMBER_API ember_scorer_model *ember_scorer_model_acquire(ember_scorer *s, ember_reload_status *status);
EMBER_API void ember_scorer_model_release(ember_scorer *s, ember_scorer_model *m);
typedef struct ember_model_info {
    const char *path;       /* as given to open or reload; NULL: the caller's predictor */
    const char *resolved;   /* the path opened, links resolved (a link `current` to the
                               version served names that version here); NULL as path   */
    int64_t version;        /* 1 for the first, one more per reload                     */
    double loaded_at;       /* Unix seconds                                             */
    int32_t num_tables, num_dense, num_features;
} ember_model_info;
EMBER_API void ember_scorer_model_info(const ember_scorer_model *m, ember_model_info *out);

/* The input a request gives: the model's dense features per sample, and
 * its sparse features by name with their rows (ids in [0, rows); 0: any
 * 64-bit key of a dynamic table).  f outside [0, num_features): NULL. */
EMBER_API const char *ember_scorer_model_feature(const ember_scorer_model *m, int32_t f, int64_t *rows);

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
 * cache on; NULL when the model has none (the reason in *why). */
EMBER_API const char *ember_scorer_model_input_schema(const ember_scorer_model *m, uint64_t *xxh3, const char **why);

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
 * Decodes the body and scores its samples, waiting for their micro-batch,
 * with the model current when it is called (through to its scores, even
 * if a reload replaces the model meanwhile).  Thread-safe.  *scores (free() it; NULL on failure) gets one score per
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

/* The statistics, over every model version served: requests answered and
 * errors among them, samples and batches scored, latency and batch-size
 * percentiles over the last 65536 requests, the time spent per phase
 * summed over requests, and a latency histogram since the start
 * (latency_le[i] requests answered within latency_bound[i] seconds;
 * requests is the count of all, latency within any bound). */
#define EMBER_SERVE_LATENCY_BUCKETS 14
typedef struct ember_serve_stats {
    int64_t requests, errors;
    int64_t samples, batches;
    double latency_p50, latency_p99, latency_mean;   /* seconds               */
    double batch_p50, batch_p99, batch_mean;         /* samples               */
    double seconds_total, seconds_decode, seconds_wait, seconds_score;
    int32_t scorers;                                 /* scoring threads       */
    double latency_bound[EMBER_SERVE_LATENCY_BUCKETS];  /* seconds, increasing */
    int64_t latency_le[EMBER_SERVE_LATENCY_BUCKETS];    /* cumulative           */
} ember_serve_stats;
EMBER_API void ember_scorer_stats(ember_scorer *s, ember_serve_stats *out);

#ifdef __cplusplus
}
#endif
#endif
