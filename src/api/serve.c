/*
 * serve.c: ember_scorer (include/ember-serve.h), the public face of the
 * server's library part (src/serve/): the model being served and its
 * reload (reload.c, model.c), a request body decoded and checked against
 * that model's shape (request.c), then scored in a micro-batch by one of
 * the scoring threads (scorer.c), and the statistics.  `ember serve`'s
 * HTTP layer (tools/serve_http.c) reaches them only through these calls.
 * An ember_scorer_model is a serve_model held in the slot (reload.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/status.h"
#include "ember-serve.h"
#include "infer/predictor.h"
#include "serve/reload.h"
#include "serve/request.h"
#include "serve/scorer.h"

struct ember_scorer {
    ember_handle_msg head;   /* first: ember_errmsg's (score and reload, called
                                on many threads at once, use this thread's) */
    char msg[256];
    serve_scorer *scorer;
    serve_slot *slot;        /* the model served, and its reloads */
    int32_t scorers;
};

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
    ember_scorer_config c = {512, 500e-6, 65536, 1};
    return c;
}

static int config_ok(const ember_scorer_config *c)
{
    return c && c->max_samples >= 1 && c->max_batch >= 1 && c->max_wait >= 0 && c->scorers >= 0;
}

/* The scorer over model m (which it owns from here on, even on failure). */
static int scorer_start(serve_model *m, int32_t threads, const ember_scorer_config *c, ember_scorer **out)
{
    ember_scorer *s = calloc(1, sizeof *s);
    if (!s) {
        serve_model_close(m);
        return ember_fail_create(EMBER_ENOMEM, "out of memory starting the scorer");
    }
    ember_handle_begin(&s->head, s->msg, sizeof s->msg);
    s->scorers = m->num_predictors;
    serve_scorer_config sc = {c->max_batch, c->max_wait, s->scorers};
    int st = serve_slot_create(m, threads, c->max_samples, &s->slot);
    if (st != EMBER_OK)
        serve_model_close(m);
    if (st == EMBER_OK)
        st = serve_scorer_create(&sc, predictor_blas_threads(m->p[0]), &s->scorer);
    if (st != EMBER_OK) {
        ember_scorer_destroy(s);
        return ember_fail_create(st, "out of memory starting the scorer");
    }
    *out = s;
    return EMBER_OK;
}

int ember_scorer_open(const char *path, const ember_predictor_options *o, const ember_scorer_config *c,
                      ember_scorer **out)
{
    *out = NULL;
    if (!path || !config_ok(c) || (o && o->world))
        return ember_fail_create(EMBER_EINVAL, "ember_scorer_open: no path or config, max_samples or max_batch "
                                 "under 1, max_wait or scorers under 0, or a world given (a scorer's predictors "
                                 "are each a world of one)");
    int32_t threads = o && o->threads > 0 ? o->threads : 1;
    serve_model *m = NULL;
    char *err = ember_thread_msg();
    int st = serve_model_open(path, c->scorers > 0 ? c->scorers : 1, threads, c->max_samples, &m, err,
                              EMBER_THREAD_MSG_SIZE);
    return st == EMBER_OK ? scorer_start(m, threads, c, out) : st;
}

int ember_scorer_create(ember_predictor *p, const ember_scorer_config *c, ember_scorer **out)
{
    *out = NULL;
    if (!p || !config_ok(c) || c->scorers > 1)
        return ember_fail_create(EMBER_EINVAL, "ember_scorer_create: no predictor or config, or max_samples, "
                                 "max_batch under 1, max_wait under 0, or scorers over 1 (more scoring threads "
                                 "need a predictor each: ember_scorer_open)");
    serve_model *m = NULL;
    if (serve_model_wrap(p, c->max_samples, &m) != EMBER_OK)
        return ember_fail_create(EMBER_ENOMEM, "out of memory starting the scorer");
    return scorer_start(m, ember_predictor_config(p)->threads, c, out);
}

void ember_scorer_stop(ember_scorer *s)
{
    serve_slot_stop(s->slot);
    serve_scorer_stop(s->scorer);
}

void ember_scorer_destroy(ember_scorer *s)
{
    if (!s)
        return;
    if (s->slot)
        serve_slot_stop(s->slot);
    serve_scorer_destroy(s->scorer); /* the requests queued are scored first */
    serve_slot_destroy(s->slot);
    ember_handle_end(&s->head);
    free(s);
}

int ember_scorer_reload(ember_scorer *s, const char *path)
{
    return serve_slot_reload(s->slot, path, ember_thread_msg(), EMBER_THREAD_MSG_SIZE);
}

void ember_scorer_reload_status(ember_scorer *s, ember_reload_status *out) { serve_slot_status(s->slot, out); }

ember_scorer_model *ember_scorer_model_acquire(ember_scorer *s, ember_reload_status *status)
{
    return (ember_scorer_model *)serve_slot_acquire(s->slot, status);
}

void ember_scorer_model_release(ember_scorer *s, ember_scorer_model *m)
{
    if (m)
        serve_slot_release(s->slot, (serve_model *)m);
}

void ember_scorer_model_info(const ember_scorer_model *model, ember_model_info *out)
{
    const serve_model *m = (const serve_model *)model;
    *out = (ember_model_info){m->path, m->resolved, m->version, m->loaded_at, m->num_tables, m->shape.num_dense,
                              m->shape.num_features};
}

const char *ember_scorer_model_feature(const ember_scorer_model *model, int32_t f, int64_t *rows)
{
    const serve_model *m = (const serve_model *)model;
    if (f < 0 || f >= m->shape.num_features)
        return NULL;
    if (rows)
        *rows = m->shape.rows[f];
    return m->shape.names[f];
}

const char *ember_scorer_model_input_schema(const ember_scorer_model *model, uint64_t *xxh3, const char **why)
{
    const serve_model *m = (const serve_model *)model;
    if (xxh3)
        *xxh3 = m->schema_xxh3;
    if (why)
        *why = m->schema ? "" : m->shape.no_plan;
    return m->schema;
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
    serve_model *m = serve_slot_acquire(s->slot, NULL); /* decoded and scored by this version, whatever reloads */
    int st = decode_body(&m->shape, body, len, format, &b, err, errlen);
    t->decode = ember_now() - t0;
    if (st != 0) {
        serve_slot_release(s->slot, m);
        serve_batch_free(&b);
        return st == EMBER_ENOMEM ? EMBER_ENOMEM : EMBER_EINPUT;
    }
    float *out = malloc(sizeof(float) * ((size_t)b.n + 1));
    serve_timing tm = {t->decode, 0, 0};
    st = !out ? EMBER_ENOMEM : b.n == 0 ? EMBER_OK : serve_scorer_score(s->scorer, m, &b, out, &tm, err, errlen);
    serve_slot_release(s->slot, m);
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
                               st.seconds_decode, st.seconds_wait, st.seconds_score, s->scorers, {0}, {0}};
    static const double bounds[SERVE_LATENCY_BUCKETS] = SERVE_LATENCY_BOUNDS;
    _Static_assert(SERVE_LATENCY_BUCKETS == EMBER_SERVE_LATENCY_BUCKETS, "one histogram");
    for (int32_t i = 0; i < SERVE_LATENCY_BUCKETS; i++) {
        out->latency_bound[i] = bounds[i];
        out->latency_le[i] = st.latency_le[i];
    }
}
