/*
 * test_scorer_reload.c: the library's model swap (include/ember-serve.h,
 * ember_scorer_reload; src/serve/reload.c), without HTTP.  Two small models
 * of one shape, A and B, are trained with different seeds and exported;
 * ember_predictor_score gives each one's reference scores for a fixed set
 * of requests, and A and B disagree on every sample, so a request's scores
 * say which model gave them.  Then, on a scorer of two scoring threads:
 *
 *   drain     a model pinned (as a request in flight holds it) keeps the
 *             reload that replaces it from returning; requests that start
 *             meanwhile already get the new model's scores; the pin's
 *             release lets the reload return, with the old model closed
 *   refused   a bundle with a flipped byte, and a missing path: refused with
 *             the file named, the version and the scores unchanged, the
 *             status counting the failure with its reason
 *   load      four threads score while the main thread reloads A and B in
 *             turn: every request succeeds, and every request's scores are
 *             wholly A's or wholly B's
 *   edges     a scorer over the caller's predictor takes one scoring thread,
 *             reloads only a named path, and never closes that predictor;
 *             a stopped scorer refuses reloads; the latency histogram is
 *             cumulative and counts every request
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember-serve.h"
#include "ember-train.h"
#include "util.h"

#define NREQ 8   /* requests, of SPR samples each */
#define SPR 6
#define TOL 1e-6

static char root[256], body[NREQ][4096];
static float ref[2][NREQ][SPR]; /* A's, B's */

static void train(const char *name, int seed, int steps)
{
    char cfg[400], ck[400], out[400];
    snprintf(cfg, sizeof cfg, "%s/%s.cfg", root, name);
    snprintf(ck, sizeof ck, "%s/ck%s", root, name);
    snprintf(out, sizeof out, "%s/%s", root, name);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "seed = %d;\ndata = { synthetic = { num_dense = 2; num_sparse = 3; rows = 40; }; };\n"
               "train = { steps = %d; micro_batch = 64; eval_samples = 64; };\n"
               "model = { bottom = [8, 4]; top = [8]; emb_dim = 4; seed = %d; };\n", seed, steps, seed);
    fclose(f);
    test_train_config(cfg, ck);
    CHECK_MSG(ember_bundle_write(ck, out, "fp32", NULL, 0) == EMBER_OK, "%s", ember_errmsg(NULL));
}

/* The requests as JSON bodies, and each model's scores for them (one
 * request at a time, as the scorer's micro-batches may not be). */
static void requests(test_rng *r)
{
    ember_predictor *p[2] = {NULL, NULL};
    char path[2][400];
    for (int m = 0; m < 2; m++) {
        snprintf(path[m], sizeof path[m], "%s/%s", root, m ? "B" : "A");
        CHECK_MSG(ember_predictor_open(path[m], NULL, &p[m]) == EMBER_OK, "%s", ember_errmsg(NULL));
    }
    const ember_collection_config *cc = ember_predictor_config(p[0]);
    for (int q = 0; q < NREQ; q++) {
        float dense[SPR * 2];
        int32_t lengths[3 * SPR];
        int64_t ids[3 * SPR];
        int at = snprintf(body[q], sizeof body[q], "{\"dense\": [");
        for (int s = 0; s < SPR; s++) {
            dense[2 * s] = test_float(r, -1, 1);
            dense[2 * s + 1] = test_float(r, -1, 1);
            at += snprintf(body[q] + at, sizeof body[q] - (size_t)at, "%s[%.9g, %.9g]", s ? ", " : "",
                           (double)dense[2 * s], (double)dense[2 * s + 1]);
        }
        at += snprintf(body[q] + at, sizeof body[q] - (size_t)at, "], \"sparse\": {");
        for (int f = 0; f < 3; f++) {
            at += snprintf(body[q] + at, sizeof body[q] - (size_t)at, "%s\"%s\": [", f ? ", " : "",
                           cc->features[f].name);
            for (int s = 0; s < SPR; s++) {
                lengths[f * SPR + s] = 1;
                ids[f * SPR + s] = test_range(r, 0, 40);
                at += snprintf(body[q] + at, sizeof body[q] - (size_t)at, "%s%lld", s ? ", " : "",
                               (long long)ids[f * SPR + s]);
            }
            at += snprintf(body[q] + at, sizeof body[q] - (size_t)at, "]");
        }
        snprintf(body[q] + at, sizeof body[q] - (size_t)at, "}}");
        ember_batch b = {SPR, 3, lengths, ids, NULL, 3 * SPR};
        for (int m = 0; m < 2; m++)
            CHECK(ember_predictor_score(p[m], SPR, dense, &b, ref[m][q]) == EMBER_OK);
        int apart = 0; /* a request is told apart by the samples on which A and B differ (most of them) */
        for (int s = 0; s < SPR; s++)
            apart += fabsf(ref[0][q][s] - ref[1][q][s]) > 100 * TOL;
        CHECK_MSG(apart >= 1, "A and B agree on every sample of request %d", q);
    }
    ember_predictor_close(p[0]);
    ember_predictor_close(p[1]);
}

/* Scores request q: 0 for A's scores, 1 for B's, -1 for neither (or a
 * failure), -2 for a mix. */
static int score(ember_scorer *s, int q)
{
    float *got = NULL;
    int32_t n = 0;
    ember_score_timing t;
    int st = ember_scorer_score(s, body[q], strlen(body[q]), EMBER_BODY_JSON, &got, &n, &t);
    ember_scorer_record(s, st != EMBER_OK, t.decode + t.wait + t.score, st == EMBER_OK ? &t : NULL);
    int which[2] = {st == EMBER_OK && n == SPR, st == EMBER_OK && n == SPR};
    for (int i = 0; i < SPR && st == EMBER_OK && n == SPR; i++)
        for (int m = 0; m < 2; m++)
            which[m] &= fabs(got[i] - ref[m][q][i]) <= TOL;
    free(got);
    return which[0] ? 0 : which[1] ? 1 : -1;
}

static int64_t version_of(ember_scorer *s)
{
    ember_model_info mi;
    ember_scorer_model *m = ember_scorer_model_acquire(s, NULL);
    ember_scorer_model_info(m, &mi);
    ember_scorer_model_release(s, m);
    return mi.version;
}

typedef struct reloader {
    ember_scorer *s;
    const char *path;
    int status;
    atomic_int done;
} reloader;

static void *reload_thread(void *arg)
{
    reloader *r = arg;
    r->status = ember_scorer_reload(r->s, r->path);
    atomic_store(&r->done, 1);
    return NULL;
}

/* A pinned model holds the reload that replaces it; new requests go to the
 * new model meanwhile. */
static void drain(ember_scorer *s, const char *to, int want)
{
    ember_reload_status before;
    ember_scorer_model *pin = ember_scorer_model_acquire(s, &before);
    ember_model_info old;
    ember_scorer_model_info(pin, &old);
    reloader r = {s, to, -100, 0};
    pthread_t th;
    pthread_create(&th, NULL, reload_thread, &r);
    int64_t v = old.version;
    for (int i = 0; i < 500 && v == old.version; i++, usleep(10000))
        v = version_of(s);
    CHECK_MSG(v == old.version + 1, "the swap happened while the old model was pinned (version %lld)", (long long)v);
    for (int q = 0; q < NREQ; q++)
        CHECK_MSG(score(s, q) == want, "request %d, started after the swap, got the new model's scores", q);
    usleep(100000);
    CHECK_MSG(!atomic_load(&r.done), "the reload waited for the pinned old model");
    ember_model_info again;
    ember_scorer_model_info(pin, &again);
    CHECK(again.version == old.version && !strcmp(again.path, old.path));
    ember_scorer_model_release(s, pin);
    pthread_join(th, NULL);
    CHECK_MSG(r.status == EMBER_OK, "reload %s: %s", to, ember_errmsg(NULL));
    ember_reload_status after;
    ember_scorer_model *m = ember_scorer_model_acquire(s, &after);
    ember_scorer_model_release(s, m);
    CHECK(after.ok == before.ok + 1 && after.last_ok && !strcmp(after.last_path, to) && !after.last_note[0]);
}

static void refused(ember_scorer *s, const char *path, const char *needle, int want)
{
    int64_t v = version_of(s);
    int st = ember_scorer_reload(s, path);
    CHECK_MSG(st != EMBER_OK && strstr(ember_errmsg(NULL), needle), "reload %s: %d %s", path, st,
              ember_errmsg(NULL));
    ember_reload_status r;
    ember_scorer_model *m = ember_scorer_model_acquire(s, &r);
    ember_scorer_model_release(s, m);
    CHECK(!r.last_ok && r.failed >= 1 && strstr(r.last_error, needle) && !strcmp(r.last_path, path));
    CHECK(version_of(s) == v);
    for (int q = 0; q < NREQ; q++)
        CHECK_MSG(score(s, q) == want, "request %d after a refused reload: the old model's scores", q);
}

typedef struct loader {
    ember_scorer *s;
    atomic_int *stop;
    int counts[4]; /* A, B, neither, mix */
    int id;
} loader;

static void *load_thread(void *arg)
{
    loader *l = arg;
    for (int k = 0; !atomic_load(l->stop); k++) {
        int w = score(l->s, (k + l->id) % NREQ);
        l->counts[w >= 0 ? w : 2]++;
    }
    return NULL;
}

static void under_load(ember_scorer *s, const char *a, const char *b)
{
    atomic_int stop = 0;
    loader l[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        l[i] = (loader){s, &stop, {0, 0, 0, 0}, i};
        pthread_create(&th[i], NULL, load_thread, &l[i]);
    }
    for (int k = 0; k < 10; k++) {
        usleep(20000);
        CHECK_MSG(ember_scorer_reload(s, k % 2 ? a : b) == EMBER_OK, "%s", ember_errmsg(NULL));
    }
    usleep(20000);
    atomic_store(&stop, 1);
    int total[3] = {0, 0, 0};
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < 3; k++)
            total[k] += l[i].counts[k];
    }
    CHECK_MSG(total[2] == 0 && total[0] > 20 && total[1] > 20, "under reloads: %d of A, %d of B, %d neither",
              total[0], total[1], total[2]);
}

static void caller_predictor(const char *a, const char *b)
{
    ember_predictor *p = NULL;
    CHECK(ember_predictor_open(a, NULL, &p) == EMBER_OK);
    ember_scorer_config c = ember_scorer_config_default();
    ember_scorer *s = NULL;
    c.scorers = 2;
    CHECK(ember_scorer_create(p, &c, &s) == EMBER_EINVAL && !s && strstr(ember_errmsg(NULL), "ember_scorer_open"));
    c.scorers = 1;
    CHECK(ember_scorer_create(p, &c, &s) == EMBER_OK);
    CHECK(score(s, 0) == 0);
    CHECK(ember_scorer_reload(s, NULL) == EMBER_EINVAL && strstr(ember_errmsg(NULL), "name the model to load"));
    CHECK_MSG(ember_scorer_reload(s, b) == EMBER_OK, "%s", ember_errmsg(NULL)); /* p is not closed: ASan */
    CHECK(score(s, 0) == 1 && version_of(s) == 2);
    ember_scorer_stop(s);
    CHECK(ember_scorer_reload(s, a) == EMBER_ESTATE && strstr(ember_errmsg(NULL), "shutting down"));
    ember_scorer_destroy(s);
    float d[2] = {0, 0}, out = 0;
    int32_t len[3] = {0, 0, 0};
    int64_t none = 0;
    ember_batch empty = {1, 3, len, &none, NULL, 0};
    CHECK(ember_predictor_score(p, 1, d, &empty, &out) == EMBER_OK); /* still the caller's, still open */
    ember_predictor_close(p);
}

static void histogram(ember_scorer *s)
{
    ember_serve_stats st;
    ember_scorer_stats(s, &st);
    int ok = st.scorers == 2 && st.requests > 0 && st.latency_le[EMBER_SERVE_LATENCY_BUCKETS - 1] <= st.requests;
    for (int i = 1; i < EMBER_SERVE_LATENCY_BUCKETS; i++)
        ok &= st.latency_bound[i] > st.latency_bound[i - 1] && st.latency_le[i] >= st.latency_le[i - 1];
    CHECK_MSG(ok, "the latency histogram: %lld requests, %lld within %g s", (long long)st.requests,
              (long long)st.latency_le[EMBER_SERVE_LATENCY_BUCKETS - 1],
              st.latency_bound[EMBER_SERVE_LATENCY_BUCKETS - 1]);
    ember_scorer_record(s, 0, 1e9, NULL); /* beyond every bound: counted, in no bucket */
    ember_serve_stats after;
    ember_scorer_stats(s, &after);
    CHECK(after.requests == st.requests + 1 && after.latency_le[EMBER_SERVE_LATENCY_BUCKETS - 1] ==
          st.latency_le[EMBER_SERVE_LATENCY_BUCKETS - 1]);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    snprintf(root, sizeof root, "/tmp/ember-reload-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    train("A", 1, 3);
    train("B", 7, 6);
    requests(&r);
    char a[400], b[400], bad[400], missing[400], cmd[1400];
    snprintf(a, sizeof a, "%s/A", root);
    snprintf(b, sizeof b, "%s/B", root);
    snprintf(bad, sizeof bad, "%s/Bad", root);
    snprintf(missing, sizeof missing, "%s/nowhere", root);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && printf '\\377' | dd of='%s/table-0001.rows' bs=1 seek=7 "
             "conv=notrunc 2>/dev/null", b, bad, bad);
    CHECK(system(cmd) == 0);

    ember_scorer_config c = ember_scorer_config_default();
    c.scorers = 2;
    ember_predictor_options po = {NULL, 1};
    ember_scorer *s = NULL;
    CHECK_MSG(ember_scorer_open(a, &po, &c, &s) == EMBER_OK, "%s", ember_errmsg(NULL));
    if (s) {
        for (int q = 0; q < NREQ; q++)
            CHECK_MSG(score(s, q) == 0, "request %d: A's scores", q);
        drain(s, b, 1);
        refused(s, bad, "Bad/table-0001.rows: checksum mismatch", 1);
        refused(s, missing, "nowhere: No such file or directory", 1);
        drain(s, a, 0);
        under_load(s, a, b);
        histogram(s);
        ember_scorer_destroy(s);
    }
    caller_predictor(a, b);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (check_failed_ == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_report("test_scorer_reload");
}
