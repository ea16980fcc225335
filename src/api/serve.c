/*
 * serve.c: ember_scorer (include/ember-serve.h), the public face of the
 * server's library part (src/serve/): a request body decoded and checked
 * against the model's shape (request.c), then scored in a micro-batch
 * (scorer.c), and the statistics.  `ember serve`'s HTTP layer
 * (tools/serve_http.c) reaches them only through these calls.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "comm/comm.h"
#include "core/status.h"
#include "ember-serve.h"
#include "infer/predictor.h"
#include "serve/request.h"
#include "serve/scorer.h"

struct ember_scorer {
    ember_handle_msg head;   /* first: ember_errmsg's (score, called on many
                                threads at once, uses this thread's) */
    char msg[256];
    serve_scorer *scorer;
    serve_shape shape;
    serve_shape_store store; /* the shape's names, rows and input plan */
    char *schema;            /* the input schema's JSON, NULL: none       */
    uint64_t schema_xxh3;
};

/* The model's input schema as compact JSON (NULL: it has none, or no memory). */
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

/* The body decoded by its format. */
static int decode_body(const serve_shape *shape, const void *body, size_t len, ember_body_format format,
                       serve_batch *b, char *err, size_t errlen)
{
    switch (format) {
    case EMBER_BODY_BINARY:
        return serve_decode_binary(shape, body, len, b, err, errlen);
    case EMBER_BODY_CSV:
    case EMBER_BODY_TSV:
        return serve_decode_text(shape, body ? body : "", len, format == EMBER_BODY_CSV ? ',' : '\t', b, err,
                                 errlen);
    default:
        return serve_decode_json(shape, body ? body : "", len, b, err, errlen);
    }
}


ember_scorer_config ember_scorer_config_default(void)
{
    ember_scorer_config c = {512, 500e-6, 65536};
    return c;
}

int ember_scorer_create(ember_predictor *p, const ember_scorer_config *c, ember_scorer **out)
{
    *out = NULL;
    if (!p || !c || c->max_samples < 1 || c->max_batch < 1 || !(c->max_wait >= 0))
        return ember_fail_create(EMBER_EINVAL, "ember_scorer_create: no predictor or config, or max_samples, "
                                 "max_batch under 1 or max_wait under 0");
    ember_scorer *s = calloc(1, sizeof *s);
    if (!s)
        return ember_fail_create(EMBER_ENOMEM, "out of memory starting the scorer");
    ember_handle_begin(&s->head, s->msg, sizeof s->msg);
    int st = serve_shape_of(p, c->max_samples, &s->store, &s->shape);
    if (st == EMBER_OK && s->shape.plan) {
        s->schema = input_schema_json(p);
        st = s->schema ? EMBER_OK : EMBER_ENOMEM;
        if (s->schema)
            s->schema_xxh3 = XXH3_64bits(s->schema, strlen(s->schema));
    }
    serve_scorer_config sc = {c->max_batch, c->max_wait};
    if (st == EMBER_OK)
        st = serve_scorer_create(p, &sc, &s->scorer);
    if (st != EMBER_OK) {
        serve_shape_store_free(&s->store);
        free(s->schema);
        free(s);
        return ember_fail_create(st, "out of memory starting the scorer");
    }
    *out = s;
    return EMBER_OK;
}

void ember_scorer_stop(ember_scorer *s) { serve_scorer_stop(s->scorer); }

void ember_scorer_destroy(ember_scorer *s)
{
    if (!s)
        return;
    serve_scorer_destroy(s->scorer);
    serve_shape_store_free(&s->store);
    free(s->schema);
    ember_handle_end(&s->head);
    free(s);
}

int32_t ember_scorer_num_dense(const ember_scorer *s) { return s->shape.num_dense; }
int32_t ember_scorer_num_features(const ember_scorer *s) { return s->shape.num_features; }

const char *ember_scorer_feature(const ember_scorer *s, int32_t f, int64_t *rows)
{
    if (f < 0 || f >= s->shape.num_features)
        return NULL;
    if (rows)
        *rows = s->shape.rows[f];
    return s->shape.names[f];
}

const char *ember_scorer_input_schema(const ember_scorer *s, uint64_t *xxh3, const char **why)
{
    if (xxh3)
        *xxh3 = s->schema_xxh3;
    if (why)
        *why = s->schema ? "" : s->shape.no_plan;
    return s->schema;
}

int ember_predictor_score_body(ember_predictor *p, const void *body, size_t len, ember_body_format format,
                               float **scores, int32_t *n)
{
    char *err = ember_thread_msg();
    const size_t errlen = EMBER_THREAD_MSG_SIZE;
    *scores = NULL;
    *n = 0;
    serve_shape_store store;
    serve_shape shape;
    serve_batch b = {0};
    if (ember_world_size(ember_predictor_config(p)->world) > 1) {
        snprintf(err, errlen, "scoring a body takes a predictor of a world of one (this one's world has %d "
                 "processes, which would wait for each other's samples)",
                 (int)ember_world_size(ember_predictor_config(p)->world));
        return EMBER_EINVAL;
    }
    int st = serve_shape_of(p, INT32_MAX, &store, &shape);
    if (st == EMBER_OK)
        st = decode_body(&shape, body, len, format, &b, err, errlen);
    else
        snprintf(err, errlen, "out of memory");
    serve_shape_store_free(&store);
    float *out = st == EMBER_OK ? malloc(sizeof(float) * ((size_t)b.n + 1)) : NULL;
    if (st == EMBER_OK && !out) {
        st = EMBER_ENOMEM;
        snprintf(err, errlen, "out of memory");
    }
    if (st == EMBER_OK && b.n > 0) {
        ember_batch sparse = {b.n, shape.num_features, b.lengths, b.ids, b.weights, b.num_ids};
        st = ember_predictor_score(p, b.n, b.dense, &sparse, out);
        if (st != EMBER_OK)
            snprintf(err, errlen, "%s", ember_errmsg(p));
    }
    if (st == EMBER_OK) {
        *scores = out;
        *n = b.n;
    } else {
        free(out);
    }
    serve_batch_free(&b);
    return st;
}

int ember_scorer_score(ember_scorer *s, const void *body, size_t len, ember_body_format format, float **scores,
                       int32_t *n, ember_score_timing *t)
{
    /* many threads score at once: the message is this thread's */
    char *err = ember_thread_msg();
    const size_t errlen = EMBER_THREAD_MSG_SIZE;
    *scores = NULL;
    *n = 0;
    *t = (ember_score_timing){0, 0, 0};
    serve_batch b;
    double t0 = ember_now();
    int st = decode_body(&s->shape, body, len, format, &b, err, errlen);
    t->decode = ember_now() - t0;
    if (st != 0) {
        serve_batch_free(&b);
        return st == EMBER_ENOMEM ? EMBER_ENOMEM : EMBER_EINPUT;
    }
    float *out = malloc(sizeof(float) * ((size_t)b.n + 1));
    serve_timing tm = {t->decode, 0, 0};
    st = !out ? EMBER_ENOMEM : b.n == 0 ? EMBER_OK : serve_scorer_score(s->scorer, &b, out, &tm, err, errlen);
    *t = (ember_score_timing){tm.decode, tm.wait, tm.score};
    if (!out)
        snprintf(err, errlen, "out of memory");
    *n = b.n;
    serve_batch_free(&b);
    if (st != 0) {
        free(out);
        *n = 0;
        return st == EMBER_ESTATE ? EMBER_ESTATE : EMBER_EIO;
    }
    *scores = out;
    return EMBER_OK;
}

void ember_scorer_record(ember_scorer *s, int error, double latency, const ember_score_timing *t)
{
    serve_timing tm = t ? (serve_timing){t->decode, t->wait, t->score} : (serve_timing){0, 0, 0};
    serve_scorer_record(s->scorer, error, latency, t ? &tm : NULL);
}

void ember_scorer_stats(ember_scorer *s, ember_serve_stats *out)
{
    serve_stats st;
    serve_scorer_stats(s->scorer, &st);
    *out = (ember_serve_stats){st.requests, st.errors, st.samples, st.batches, st.latency_p50, st.latency_p99,
                               st.latency_mean, st.batch_p50, st.batch_p99, st.batch_mean, st.seconds_total,
                               st.seconds_decode, st.seconds_wait, st.seconds_score};
}
