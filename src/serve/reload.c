/*
 * reload.c: the current model and its replacement (reload.h).
 *
 * Holders are counted under one mutex: the slot itself holds the current
 * model once, each request once more.  A swap moves the slot's pointer and
 * gives up the slot's hold on the old model; the reloader then sleeps on
 * `drained` until the old model's count reaches zero (the last request's
 * release broadcasts it) and closes the old model itself, so no request's
 * thread ever pays for closing a model.  Opening the new model (seconds
 * for large tables) happens outside the mutex: requests go on meanwhile.
 * A second mutex makes reloads take turns (SIGHUP and the admin endpoint
 * may ask at once); neither mutex is held while the other's waiters wait.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "serve/reload.h"

struct serve_slot {
    pthread_mutex_t mu;        /* current, every model's refs, status, stopped */
    pthread_cond_t drained;    /* a retired model's last holder let go         */
    pthread_mutex_t turn;      /* one reload at a time                         */
    serve_model *current;
    int32_t threads, max_samples;
    int stopped;
    ember_reload_status status;
};

int serve_slot_create(serve_model *first, int32_t threads, int32_t max_samples, serve_slot **out)
{
    *out = NULL;
    serve_slot *s = calloc(1, sizeof *s);
    if (!s)
        return EMBER_ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->turn, NULL);
    pthread_cond_init(&s->drained, NULL);
    first->version = 1;
    first->refs = 1; /* the slot's */
    s->current = first;
    s->threads = threads;
    s->max_samples = max_samples;
    *out = s;
    return EMBER_OK;
}

void serve_slot_destroy(serve_slot *s)
{
    if (!s)
        return;
    serve_model_close(s->current);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->turn);
    pthread_cond_destroy(&s->drained);
    free(s);
}

serve_model *serve_slot_acquire(serve_slot *s, ember_reload_status *status)
{
    pthread_mutex_lock(&s->mu);
    serve_model *m = s->current;
    m->refs++;
    if (status)
        *status = s->status;
    pthread_mutex_unlock(&s->mu);
    return m;
}

void serve_slot_release(serve_slot *s, serve_model *m)
{
    pthread_mutex_lock(&s->mu);
    if (--m->refs == 0)
        pthread_cond_broadcast(&s->drained); /* only a retired model gets here: the current has the slot's */
    pthread_mutex_unlock(&s->mu);
}

/* The outcome into the status; under s->mu. */
static void record(serve_slot *s, int ok, const char *path, const char *error, const char *note, double t0)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ember_reload_status *r = &s->status;
    r->ok += ok != 0;
    r->failed += ok == 0;
    r->last_ok = ok != 0;
    r->last_at = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    r->last_seconds = ember_now() - t0;
    snprintf(r->last_path, sizeof r->last_path, "%s", path ? path : "");
    snprintf(r->last_error, sizeof r->last_error, "%s", error);
    snprintf(r->last_note, sizeof r->last_note, "%s", note);
}

/* Makes m current and says so in the status (one critical section: whoever
 * sees the new model sees its reload), waits for the old model's last
 * holder, closes it; the status's seconds then include the drain. */
static void swap_in(serve_slot *s, serve_model *m, const char *path, double t0)
{
    char note[512];
    pthread_mutex_lock(&s->mu);
    serve_model *old = s->current;
    m->version = old->version + 1;
    m->refs = 1; /* the slot's */
    s->current = m;
    old->refs--; /* the slot's hold on it */
    serve_model_input_change(old, m, note, sizeof note);
    record(s, 1, path, "", note, t0);
    while (old->refs > 0)
        pthread_cond_wait(&s->drained, &s->mu);
    pthread_mutex_unlock(&s->mu);
    serve_model_close(old);
    pthread_mutex_lock(&s->mu);
    s->status.last_seconds = ember_now() - t0; /* the reloads take turns: still this one's record */
    pthread_mutex_unlock(&s->mu);
}

int serve_slot_reload(serve_slot *s, const char *path, char *err, size_t errlen)
{
    double t0 = ember_now();
    char *own = NULL;
    int st = EMBER_OK;
    pthread_mutex_lock(&s->turn);
    pthread_mutex_lock(&s->mu);
    if (s->stopped) {
        st = EMBER_ESTATE;
        snprintf(err, errlen, "the server is shutting down: no reload");
    } else if (!path && !s->current->path) {
        st = EMBER_EINVAL;
        snprintf(err, errlen, "the model served is a predictor of the caller's, not a path: name the model to load");
    } else if (!path && !(own = strdup(s->current->path))) {
        st = EMBER_ENOMEM;
        snprintf(err, errlen, "out of memory");
    }
    int32_t n = s->current->num_predictors;
    pthread_mutex_unlock(&s->mu);
    path = path ? path : own;
    serve_model *m = NULL;
    if (st == EMBER_OK)
        st = serve_model_open(path, n, s->threads, s->max_samples, &m, err, errlen);
    pthread_mutex_lock(&s->mu);
    if (st == EMBER_OK && s->stopped) { /* stopped while it opened */
        st = EMBER_ESTATE;
        snprintf(err, errlen, "the server is shutting down: no reload");
    }
    if (st != EMBER_OK)
        record(s, 0, path, err, "", t0);
    pthread_mutex_unlock(&s->mu);
    if (st == EMBER_OK)
        swap_in(s, m, path, t0);
    else
        serve_model_close(m);
    pthread_mutex_unlock(&s->turn);
    free(own);
    return st;
}

void serve_slot_stop(serve_slot *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopped = 1;
    pthread_mutex_unlock(&s->mu);
}

void serve_slot_status(serve_slot *s, ember_reload_status *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->status;
    pthread_mutex_unlock(&s->mu);
}
