/*
 * serve.c: ember_scorer (include/ember-serve.h), the public face of the
 * server's library part (src/serve/): a request body decoded and checked
 * against the model's shape (request.c), then scored in a micro-batch
 * (scorer.c), and the statistics.  `ember serve`'s HTTP layer
 * (tools/serve_http.c) reaches them only through these calls.
 */
#include <stdio.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "core/status.h"
#include "ember-serve.h"
#include "serve/request.h"
#include "serve/scorer.h"

struct ember_scorer {
    ember_handle_msg head;   /* first: ember_errmsg's (score, called on many
                                threads at once, uses this thread's) */
    char msg[256];
    serve_scorer *scorer;
    serve_shape shape;
    serve_shape_store store; /* the shape's names and rows */
};


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
    serve_shape_of(p, c->max_samples, &s->store, &s->shape);
    serve_scorer_config sc = {c->max_batch, c->max_wait};
    int st = serve_scorer_create(p, &sc, &s->scorer);
    if (st != EMBER_OK) {
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
    int st = format == EMBER_BODY_BINARY ? serve_decode_binary(&s->shape, body, len, &b, err, errlen)
                                         : serve_decode_json(&s->shape, body ? body : "", len, &b, err, errlen);
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
