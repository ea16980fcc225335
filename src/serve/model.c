/*
 * model.c: one version of the served model (model.h): its predictors, one
 * per scoring thread, opened from one path and checked before anyone
 * scores with them.
 *
 * The check that the predictors are one model compares what can differ
 * between two opens of a path whose contents changed meanwhile (a
 * checkpoint root that got a newer step): the dense parameters, bit for
 * bit, and the score of one sample of zeros (every dense value 0, every
 * bag empty), which also runs each predictor's whole forward once, so a
 * model that cannot score (or scores NaN: parameters that are not finite)
 * is refused before it serves.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "infer/predictor.h"
#include "serve/model.h"

static int failf(char *err, size_t errlen, int st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int failf(char *err, size_t errlen, int st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return st;
}

/* The model's input schema as compact JSON (NULL: it has none). */
static char *input_schema_json(const ember_predictor *p)
{
    const model_description *m = predictor_description(p);
    if (m->in.source == DESC_INPUT_NONE || m->in_error[0])
        return NULL;
    json_t *o = description_input_json(&m->in);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    return s;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A model of n predictors (not opened yet), or NULL. */
static serve_model *model_new(int32_t n)
{
    serve_model *m = calloc(1, sizeof *m);
    if (m && !(m->p = calloc((size_t)n, sizeof *m->p))) {
        free(m);
        return NULL;
    }
    if (m)
        m->num_predictors = n;
    return m;
}

/* The shape and schema of m->p[0]. */
static int model_shape(serve_model *m, int32_t max_samples)
{
    m->num_tables = ember_predictor_config(m->p[0])->num_tables;
    int st = serve_shape_of(m->p[0], max_samples, &m->store, &m->shape);
    if (st == EMBER_OK && m->shape.plan) {
        m->schema = input_schema_json(m->p[0]);
        if (!m->schema)
            return EMBER_ENOMEM;
        m->schema_xxh3 = XXH3_64bits(m->schema, strlen(m->schema));
    }
    m->loaded_at = wall_now();
    return st;
}

/* Scores one sample of zeros with p: its score, or NAN when scoring failed
 * (err says why). */
static float score_zeros(ember_predictor *p, const serve_shape *s, char *err, size_t errlen)
{
    float *dense = calloc((size_t)s->num_dense + 1, sizeof *dense), score = NAN;
    int32_t *lengths = calloc((size_t)s->num_features + 1, sizeof *lengths);
    int64_t no_id = 0;
    if (!dense || !lengths) {
        snprintf(err, errlen, "out of memory");
    } else {
        ember_batch b = {1, s->num_features, lengths, &no_id, NULL, 0};
        if (ember_predictor_score(p, 1, dense, &b, &score) != EMBER_OK) {
            snprintf(err, errlen, "%s", ember_errmsg(p));
            score = NAN;
        } else if (!isfinite(score)) {
            snprintf(err, errlen, "the score is %g (are its parameters finite?)", (double)score);
        }
    }
    free(dense);
    free(lengths);
    return score;
}

/* The predictors of m are one model that scores. */
static int model_check(serve_model *m, const char *path, char *err, size_t errlen)
{
    char why[600] = "";
    int64_t n0 = 0;
    const float *d0 = predictor_dense_params(m->p[0], &n0);
    float s0 = score_zeros(m->p[0], &m->shape, why, sizeof why);
    if (!isfinite(s0))
        return failf(err, errlen, EMBER_EFORMAT, "%s: scoring a sample of zeros failed: %s", m->resolved, why);
    for (int32_t i = 1; i < m->num_predictors; i++) {
        int64_t n = 0;
        const float *d = predictor_dense_params(m->p[i], &n);
        float s = score_zeros(m->p[i], &m->shape, why, sizeof why);
        uint32_t a, b;
        memcpy(&a, &s0, sizeof a);
        memcpy(&b, &s, sizeof b);
        if (n != n0 || memcmp(d, d0, sizeof(float) * (size_t)n) || a != b ||
            ember_predictor_num_dense(m->p[i]) != m->shape.num_dense ||
            ember_predictor_config(m->p[i])->num_features != m->shape.num_features)
            return failf(err, errlen, EMBER_EFORMAT, "%s changed while its %d copies were opened (copy %d differs "
                         "from the first: a newer checkpoint step?): load it again", path, (int)m->num_predictors,
                         (int)i + 1);
    }
    return EMBER_OK;
}

int serve_model_open(const char *path, int32_t n, int32_t threads, int32_t max_samples, serve_model **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    serve_model *m = n >= 1 ? model_new(n) : NULL;
    if (!m || !(m->path = strdup(path))) {
        serve_model_close(m);
        return failf(err, errlen, n >= 1 ? EMBER_ENOMEM : EMBER_EINVAL, "%s: %s", path,
                     n >= 1 ? "out of memory" : "no scoring thread to open it for");
    }
    m->owned = 1;
    if (!(m->resolved = realpath(path, NULL))) {
        int e = errno;
        serve_model_close(m);
        return failf(err, errlen, e == ENOMEM ? EMBER_ENOMEM : EMBER_EIO, "%s: %s", path, strerror(e));
    }
    ember_predictor_options po = {NULL, threads};
    int st = EMBER_OK;
    for (int32_t i = 0; i < n && st == EMBER_OK; i++)
        if ((st = ember_predictor_open(m->resolved, &po, &m->p[i])) != EMBER_OK && ember_errmsg(NULL) != err)
            snprintf(err, errlen, "%s", ember_errmsg(NULL)); /* err may be this thread's message itself */
    if (st == EMBER_OK && (st = model_shape(m, max_samples)) != EMBER_OK)
        snprintf(err, errlen, "%s: out of memory", path);
    if (st == EMBER_OK)
        st = model_check(m, m->resolved, err, errlen);
    if (st != EMBER_OK) {
        serve_model_close(m);
        return st;
    }
    *out = m;
    return EMBER_OK;
}

int serve_model_wrap(ember_predictor *p, int32_t max_samples, serve_model **out)
{
    *out = NULL;
    serve_model *m = model_new(1);
    if (!m)
        return EMBER_ENOMEM;
    m->p[0] = p;
    if (model_shape(m, max_samples) != EMBER_OK) {
        serve_model_close(m);
        return EMBER_ENOMEM;
    }
    *out = m;
    return EMBER_OK;
}

void serve_model_close(serve_model *m)
{
    if (!m)
        return;
    serve_shape_store_free(&m->store);
    for (int32_t i = 0; m->owned && i < m->num_predictors; i++)
        ember_predictor_close(m->p[i]);
    free(m->p);
    free(m->schema);
    free(m->path);
    free(m->resolved);
    free(m);
}

void serve_model_input_change(const serve_model *a, const serve_model *b, char *out, size_t len)
{
    const serve_shape *x = &a->shape, *y = &b->shape;
    out[0] = 0;
    if (x->num_dense != y->num_dense) {
        snprintf(out, len, "the input changed: %d dense features, were %d", (int)y->num_dense, (int)x->num_dense);
        return;
    }
    if (x->num_features != y->num_features) {
        snprintf(out, len, "the input changed: %d sparse features, were %d", (int)y->num_features,
                 (int)x->num_features);
        return;
    }
    for (int32_t f = 0; f < x->num_features; f++) {
        if (strcmp(x->names[f], y->names[f])) {
            snprintf(out, len, "the input changed: sparse feature %d is \"%s\", was \"%s\"", (int)f, y->names[f],
                     x->names[f]);
            return;
        }
        if (x->rows[f] != y->rows[f]) {
            snprintf(out, len, "the input changed: feature \"%s\" has %lld rows, had %lld (0: 64-bit keys)",
                     y->names[f], (long long)y->rows[f], (long long)x->rows[f]);
            return;
        }
    }
    if ((a->schema == NULL) != (b->schema == NULL) || (a->schema && strcmp(a->schema, b->schema)))
        snprintf(out, len, "the input changed: the input schema (raw rows) %s",
                 !b->schema ? "is gone" : !a->schema ? "is new" : "differs");
}
