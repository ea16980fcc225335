/*
 * model.h: one version of the model a server scores with (docs/inference.md,
 * "Serving", "Reloading a model"): a predictor per scoring thread, all
 * opened from one path, the input a request must fit (its shape), the
 * input schema's JSON, and when it was loaded.
 *
 * A predictor is not safe to use from two threads at once (its collection
 * and dense model keep the batch's buffers), so each scoring thread gets
 * its own, opened from the same path: N scoring threads hold the tables N
 * times.  The path is resolved once (links followed: a link `current`
 * pointing at the version to serve is read once) and every copy opens the
 * resolved path.  Opening checks the model completely before anyone scores with it:
 * the bundle's or checkpoint's checksums (the predictor's open), that the N
 * predictors are the same model (a checkpoint root whose newest step
 * changed between two opens is refused), and one sample of zeros scored
 * on each, which must give the same finite score.
 */
#ifndef EMBER_SERVE_MODEL_H
#define EMBER_SERVE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"
#include "serve/request.h"

typedef struct serve_model {
    char *path;               /* as given; NULL: a predictor of the caller's   */
    char *resolved;           /* the path opened: links resolved (realpath)    */
    int64_t version;          /* 1 for the first, one more per reload           */
    double loaded_at;         /* seconds since the Unix epoch                   */
    int32_t num_predictors;
    ember_predictor **p;      /* [num_predictors]: scoring thread i uses p[i]  */
    int owned;                /* the predictors close with the model            */
    int32_t num_tables;
    serve_shape shape;        /* what a request's body must fit                 */
    serve_shape_store store;  /* the shape's names, rows and input plan         */
    char *schema;             /* the input schema's compact JSON; NULL: none    */
    uint64_t schema_xxh3;
    int refs;                 /* holders (serve_slot's mutex guards it)         */
} serve_model;

/* Opens path n times (each predictor with `threads` OpenMP threads) and
 * checks it as above.  EMBER_OK, or the predictor's error (EMBER_EIO,
 * EMBER_EFORMAT, EMBER_ECORRUPT, EMBER_ENOMEM, ...) or EMBER_EFORMAT for a
 * failed check, with err naming the path and the fault. */
int serve_model_open(const char *path, int32_t n, int32_t threads, int32_t max_samples, serve_model **out, char *err,
                     size_t errlen);
/* A model over the caller's predictor p (one scoring thread; p is not
 * closed with it).  EMBER_OK or EMBER_ENOMEM. */
int serve_model_wrap(ember_predictor *p, int32_t max_samples, serve_model **out);
void serve_model_close(serve_model *m); /* accepts NULL */

/* How b's input differs from a's, for the log ("" when requests fit both
 * alike): the dense count, the features' names and rows, the schema. */
void serve_model_input_change(const serve_model *a, const serve_model *b, char *out, size_t len);

#endif
