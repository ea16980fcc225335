/*
 * scorer.c: micro-batching of concurrent requests over a pool of scoring
 * threads (scorer.h).
 *
 * Requests are jobs on a FIFO list under one mutex.  An idle scoring
 * thread sleeps until a job is queued, then until the oldest job has
 * waited max_wait or max_batch samples wait (another thread may take that
 * job meanwhile: it starts over with the new oldest); it takes jobs from
 * the head while they fit and were decoded for the same model version,
 * merges them into one ember_batch (feature by feature, job by job, which
 * keeps the feature-major layout), scores it with that version's predictor
 * of its own index with the mutex released, and wakes the submitters, each
 * waiting on its own done flag.  Each thread's merge buffers grow to the
 * largest batch it saw and are reused.
 *
 * OpenBLAS's thread count is process-wide: the scorer sets it to the
 * predictors' dense models' (one) when it is created and puts the caller's
 * back when it is destroyed, so that no micro-batch changes it.  With one
 * BLAS thread, OpenBLAS runs each GEMM in the calling thread, so scoring
 * threads never share its buffers.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "dense/dense.h"
#include "serve/scorer.h"

typedef struct job {
    serve_model *model; /* the version req was decoded for */
    const serve_batch *req;
    float *scores;
    double queued;
    serve_timing *t;
    int64_t cursor;     /* merge: the next of its ids to copy */
    int status;         /* 0, -1 failed (msg), set with done */
    int done;
    char *msg;
    size_t msglen;
    struct job *next;
} job;

typedef struct merged {
    float *dense, *weights;
    int32_t *lengths;
    int64_t *ids;
    float *scores;
    int64_t cap_samples, cap_ids;
} merged;

typedef struct worker {
    struct serve_scorer *s;
    int32_t index;      /* scores with a model's predictor p[index] */
    int started;
    pthread_t thread;
    merged m;
} worker;

struct serve_scorer {
    serve_scorer_config c;
    worker *workers;    /* [c.threads] */
    pthread_mutex_t mu;
    pthread_cond_t queued, done;
    job *head, *tail;
    int64_t waiting_samples;
    int stopping, joined;
    /* statistics, under mu */
    serve_stats st;
    double *latency;     /* ring of SERVE_WINDOW */
    int32_t *batch_size; /* ring of SERVE_WINDOW */
    int32_t blas_saved;  /* OpenBLAS's count before the scorer set its own */
};

static void deadline_at(double when, struct timespec *ts)
{
    /* the condition variables use CLOCK_MONOTONIC, as ember_now does */
    ts->tv_sec = (time_t)when;
    ts->tv_nsec = (long)((when - (double)ts->tv_sec) * 1e9);
}

static int grow(merged *m, int64_t samples, int64_t ids, int32_t nd, int32_t nf)
{
    if (samples > m->cap_samples) {
        float *d = realloc(m->dense, sizeof(float) * (size_t)(samples * nd + 1));
        if (d)
            m->dense = d;
        int32_t *l = realloc(m->lengths, sizeof(int32_t) * (size_t)(samples * nf + 1));
        if (l)
            m->lengths = l;
        float *s = realloc(m->scores, sizeof(float) * (size_t)samples);
        if (s)
            m->scores = s;
        if (!d || !l || !s)
            return EMBER_ENOMEM;
        m->cap_samples = samples;
    }
    if (ids > m->cap_ids) {
        int64_t *i = realloc(m->ids, sizeof(int64_t) * (size_t)ids);
        if (i)
            m->ids = i;
        float *w = realloc(m->weights, sizeof(float) * (size_t)ids);
        if (w)
            m->weights = w;
        if (!i || !w)
            return EMBER_ENOMEM;
        m->cap_ids = ids;
    }
    return 0;
}

/* The jobs [first, end) as one batch in *m; *weighted: any job had weights. */
static void merge(merged *m, job *first, job *end, int32_t n, int *weighted)
{
    int32_t nd = first->model->shape.num_dense, nf = first->model->shape.num_features, b0 = 0;
    *weighted = 0;
    for (job *j = first; j != end; j = j->next) {
        memcpy(m->dense + (int64_t)b0 * nd, j->req->dense, sizeof(float) * (size_t)j->req->n * (size_t)nd);
        b0 += j->req->n;
        *weighted |= j->req->weights != NULL;
    }
    /* feature f of every job, in job order; each job's ids of f follow its
     * ids of f - 1, so a cursor per job walks its ids once */
    int64_t at = 0;
    for (job *j = first; j != end; j = j->next)
        j->cursor = 0;
    for (int32_t f = 0; f < nf; f++) {
        int32_t b = 0;
        for (job *j = first; j != end; j = j->next) {
            const serve_batch *r = j->req;
            int64_t cur = j->cursor, k = 0;
            memcpy(m->lengths + (int64_t)f * n + b, r->lengths + (int64_t)f * r->n, sizeof(int32_t) * (size_t)r->n);
            for (int32_t i = 0; i < r->n; i++)
                k += r->lengths[(int64_t)f * r->n + i];
            memcpy(m->ids + at, r->ids + cur, sizeof(int64_t) * (size_t)k);
            for (int64_t i = 0; *weighted && i < k; i++)
                m->weights[at + i] = r->weights ? r->weights[cur + i] : 1.0f;
            at += k;
            j->cursor = cur + k;
            b += r->n;
        }
    }
}

static void score_jobs(worker *w, job *first, job *end, int32_t n, int64_t ids)
{
    serve_scorer *s = w->s;
    merged *m = &w->m;
    const serve_shape *shape = &first->model->shape;
    ember_predictor *p = first->model->p[w->index];
    char err[512] = "";
    int st = grow(m, n, ids, shape->num_dense, shape->num_features);
    int weighted = 0;
    double t0 = ember_now();
    if (st == 0) {
        merge(m, first, end, n, &weighted);
        ember_batch batch = {n, shape->num_features, m->lengths, m->ids, weighted ? m->weights : NULL, ids};
        st = ember_predictor_score(p, n, m->dense, &batch, m->scores);
        if (st != EMBER_OK)
            snprintf(err, sizeof err, "scoring failed: %s", ember_errmsg(p));
    } else {
        snprintf(err, sizeof err, "out of memory merging %d samples", (int)n);
    }
    double seconds = ember_now() - t0;
    pthread_mutex_lock(&s->mu);
    int32_t b = 0;
    for (job *j = first; j != end;) {
        job *next = j->next;
        if (st == 0)
            memcpy(j->scores, m->scores + b, sizeof(float) * (size_t)j->req->n);
        else
            snprintf(j->msg, j->msglen, "%s", err);
        b += j->req->n;
        j->t->score = seconds;
        j->status = st == 0 ? EMBER_OK : EMBER_EINVAL;
        j->done = 1;
        j = next;
    }
    if (st == 0) {
        s->batch_size[s->st.batches % SERVE_WINDOW] = n;
        s->st.batches++;
        s->st.samples += n;
    }
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->mu);
}

static void *run(void *arg)
{
    worker *w = arg;
    serve_scorer *s = w->s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->queued, &s->mu);
        if (!s->head)
            break; /* stopping, and nothing left */
        job *oldest = s->head;
        struct timespec ts;
        deadline_at(oldest->queued + s->c.max_wait, &ts);
        while (s->head == oldest && s->waiting_samples < s->c.max_batch && !s->stopping &&
               pthread_cond_timedwait(&s->queued, &s->mu, &ts) == 0)
            ;
        if (s->head != oldest)
            continue; /* another thread took it: wait for the new oldest */
        /* take jobs of one model version while they fit (the first always) */
        job *first = s->head, *end = s->head;
        int64_t n = 0; /* <= max_batch, or one request's own samples */
        int64_t ids = 0;
        double now = ember_now();
        while (end && end->model == first->model && (end == first || n + end->req->n <= s->c.max_batch)) {
            n += end->req->n;
            ids += end->req->num_ids;
            end->t->wait = now - end->queued;
            end = end->next;
        }
        s->head = end;
        if (!end)
            s->tail = NULL;
        s->waiting_samples -= n;
        if (s->head) /* jobs left: an idle thread takes them */
            pthread_cond_broadcast(&s->queued);
        pthread_mutex_unlock(&s->mu);
        score_jobs(w, first, end, (int32_t)n, ids);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serve_scorer_create(const serve_scorer_config *c, int32_t blas_threads, serve_scorer **out)
{
    *out = NULL;
    if (!c || c->max_batch < 1 || !(c->max_wait >= 0) || c->threads < 1)
        return EMBER_EINVAL;
    serve_scorer *s = calloc(1, sizeof *s);
    if (!s)
        return EMBER_ENOMEM;
    s->latency = malloc(sizeof(double) * SERVE_WINDOW);
    s->batch_size = malloc(sizeof(int32_t) * SERVE_WINDOW);
    s->workers = calloc((size_t)c->threads, sizeof *s->workers);
    if (!s->latency || !s->batch_size || !s->workers) {
        free(s->latency);
        free(s->batch_size);
        free(s->workers);
        free(s);
        return EMBER_ENOMEM;
    }
    s->c = *c;
    s->blas_saved = dense_blas_threads();
    dense_set_blas_threads(blas_threads);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->queued, &ca);
    pthread_cond_init(&s->done, &ca);
    pthread_condattr_destroy(&ca);
    for (int32_t i = 0; i < c->threads; i++) {
        worker *w = &s->workers[i];
        w->s = s;
        w->index = i;
        if (pthread_create(&w->thread, NULL, run, w) != 0) {
            serve_scorer_destroy(s); /* joins the threads started */
            return EMBER_ENOMEM;
        }
        w->started = 1;
    }
    *out = s;
    return EMBER_OK;
}

int serve_scorer_score(serve_scorer *s, serve_model *m, const serve_batch *req, float *scores, serve_timing *t,
                       char *err, size_t errlen)
{
    job j = {m, req, scores, ember_now(), t, 0, 0, 0, err, errlen, NULL};
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        snprintf(err, errlen, "the server is shutting down");
        return EMBER_ESTATE;
    }
    if (s->tail)
        s->tail->next = &j;
    else
        s->head = &j;
    s->tail = &j;
    s->waiting_samples += req->n;
    pthread_cond_signal(&s->queued); /* a first job starts the clock; a full batch ends the wait */
    while (!j.done)
        pthread_cond_wait(&s->done, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return j.status;
}

void serve_scorer_stop(serve_scorer *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    int joined = s->joined;
    s->joined = 1;
    pthread_cond_broadcast(&s->queued);
    pthread_mutex_unlock(&s->mu);
    for (int32_t i = 0; !joined && i < s->c.threads; i++)
        if (s->workers[i].started)
            pthread_join(s->workers[i].thread, NULL);
}

void serve_scorer_destroy(serve_scorer *s)
{
    if (!s)
        return;
    serve_scorer_stop(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->queued);
    pthread_cond_destroy(&s->done);
    for (int32_t i = 0; i < s->c.threads; i++) {
        merged *m = &s->workers[i].m;
        free(m->dense);
        free(m->weights);
        free(m->lengths);
        free(m->ids);
        free(m->scores);
    }
    free(s->workers);
    free(s->latency);
    free(s->batch_size);
    dense_set_blas_threads(s->blas_saved);
    free(s);
}

void serve_scorer_record(serve_scorer *s, int error, double latency, const serve_timing *t)
{
    pthread_mutex_lock(&s->mu);
    s->latency[s->st.requests % SERVE_WINDOW] = latency;
    s->st.requests++;
    s->st.errors += error != 0;
    s->st.seconds_total += latency;
    static const double bounds[SERVE_LATENCY_BUCKETS] = SERVE_LATENCY_BOUNDS;
    for (int32_t i = SERVE_LATENCY_BUCKETS - 1; i >= 0 && latency <= bounds[i]; i--)
        s->st.latency_le[i]++; /* cumulative: every bucket it fits */
    if (t) {
        s->st.seconds_decode += t->decode;
        s->st.seconds_wait += t->wait;
        s->st.seconds_score += t->score;
    }
    pthread_mutex_unlock(&s->mu);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (nearest rank) of the sorted v[0..n). */
static double quantile(double *v, int64_t n, double q)
{
    if (n == 0)
        return 0;
    int64_t k = (int64_t)(q * (double)n + 0.999999);
    return v[(k < 1 ? 1 : k > n ? n : k) - 1];
}

void serve_scorer_stats(serve_scorer *s, serve_stats *out)
{
    double *lat = malloc(sizeof(double) * SERVE_WINDOW), *bs = malloc(sizeof(double) * SERVE_WINDOW);
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    int64_t nl = s->st.requests < SERVE_WINDOW ? s->st.requests : SERVE_WINDOW;
    int64_t nb = s->st.batches < SERVE_WINDOW ? s->st.batches : SERVE_WINDOW;
    for (int64_t i = 0; lat && bs && i < nl; i++)
        lat[i] = s->latency[i];
    for (int64_t i = 0; lat && bs && i < nb; i++)
        bs[i] = s->batch_size[i];
    pthread_mutex_unlock(&s->mu);
    if (lat && bs) {
        double sl = 0, sb = 0;
        for (int64_t i = 0; i < nl; i++)
            sl += lat[i];
        for (int64_t i = 0; i < nb; i++)
            sb += bs[i];
        qsort(lat, (size_t)nl, sizeof *lat, cmp_double);
        qsort(bs, (size_t)nb, sizeof *bs, cmp_double);
        out->latency_p50 = quantile(lat, nl, 0.50);
        out->latency_p99 = quantile(lat, nl, 0.99);
        out->latency_mean = nl ? sl / (double)nl : 0;
        out->batch_p50 = quantile(bs, nb, 0.50);
        out->batch_p99 = quantile(bs, nb, 0.99);
        out->batch_mean = nb ? sb / (double)nb : 0;
    }
    free(lat);
    free(bs);
}
