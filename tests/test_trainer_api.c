/*
 * test_trainer_api.c: the trainer of include/ember-train.h from a plain
 * program, as the Python package calls it (no `ember` tool, no MPI).
 *
 *   events      a short run of the built-in task: every event one JSON
 *               object, start first, train (logged) and progress steps (at
 *               most ten a second), the evaluations asked for, the summary
 *               last and equal to ember_trainer_summary
 *   repeat      two runs give the same AUC and log loss
 *   resume      4 steps with checkpoints, then resume to 8: the resume
 *               event, and the summary of 8 steps equal to 8 straight
 *   overrides   by name: unknown names, bad values, ranges checked at open,
 *               contradictions (EMBER_EINVAL with the CLI's message)
 *   errors      a missing config names the file and leaves a handle with
 *               the message; run refused on it and run twice; NULLs
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>
#include <jansson.h>
#include <omp.h>

#include "check.h"
#include "ember-data.h"
#include "ember-train.h"

typedef struct events {
    int n, start, train, progress, eval, resume, checkpoint, summary, bad;
    long long last_step; /* of the last train or progress event */
    char first[32], last_event[32];
    char *summary_text;
    int keep_start;              /* keep the start event's text            */
    char *start_text;
} events;

static void on_event(void *ctx, const char *text)
{
    events *e = ctx;
    json_t *j = json_loads(text, 0, NULL);
    const char *ev = json_string_value(json_object_get(j, "event"));
    e->n++;
    if (!json_is_object(j) || !ev) {
        e->bad++;
        json_decref(j);
        return;
    }
    if (e->n == 1)
        snprintf(e->first, sizeof e->first, "%s", ev);
    snprintf(e->last_event, sizeof e->last_event, "%s", ev);
    e->start += !strcmp(ev, "start");
    if (e->keep_start && !strcmp(ev, "start")) {
        free(e->start_text);
        e->start_text = strdup(text);
    }
    e->train += !strcmp(ev, "train");
    e->progress += !strcmp(ev, "progress");
    if (!strcmp(ev, "train") || !strcmp(ev, "progress"))
        e->last_step = (long long)json_integer_value(json_object_get(j, "step"));
    e->eval += !strcmp(ev, "eval");
    e->resume += !strcmp(ev, "resume");
    e->checkpoint += !strcmp(ev, "checkpoint");
    if (!strcmp(ev, "summary")) {
        e->summary++;
        free(e->summary_text);
        e->summary_text = strdup(text);
    }
    json_decref(j);
}

/* A short run of the built-in task; its summary's auc, logloss and steps. */
typedef struct result {
    int status;
    double auc, logloss;
    long long steps;
} result;

static result run(const ember_train_overrides *o, events *e)
{
    result r = {0, NAN, NAN, -1};
    ember_trainer *t = NULL;
    r.status = ember_trainer_open(NULL, o, NULL, on_event, e, &t);
    CHECK_MSG(r.status == EMBER_OK, "open: %s", ember_errmsg(t));
    if (r.status == EMBER_OK)
        r.status = ember_trainer_run(t);
    CHECK_MSG(r.status == EMBER_OK, "run: %s", ember_errmsg(t));
    const char *sm = ember_trainer_summary(t);
    CHECK(r.status != EMBER_OK || sm != NULL);
    json_t *j = sm ? json_loads(sm, 0, NULL) : NULL;
    CHECK(r.status != EMBER_OK || json_is_object(j));
    if (j) {
        r.auc = json_number_value(json_object_get(j, "auc"));
        r.logloss = json_number_value(json_object_get(j, "logloss"));
        r.steps = json_integer_value(json_object_get(j, "steps"));
        CHECK(e->summary_text && !strcmp(e->summary_text, sm));
    }
    json_decref(j);
    ember_trainer_close(t);
    return r;
}

static void quick(ember_train_overrides *o, int64_t steps)
{
    ember_train_overrides_init(o);
    o->steps = steps;
    o->micro_batch = 128;
    o->eval_every = 10;
    o->eval_samples = 1024;
    o->threads = 1;
}

static void test_events_and_repeat(void)
{
    ember_train_overrides o;
    quick(&o, 600); /* a loss logged every third step: progress between */
    o.micro_batch = 32;
    o.eval_every = 300;
    events a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    result ra = run(&o, &a), rb = run(&o, &b);
    CHECK(a.bad == 0 && a.start == 1 && !strcmp(a.first, "start"));
    /* progress at most ten a second: these 400 unlogged steps take far less
     * than 40 s, so fewer events (none when the run is that fast); the last
     * step is always told */
    CHECK_MSG(a.train == 200 && a.progress < 400 && a.last_step == 600,
              "train %d, progress %d, last step %lld", a.train, a.progress, a.last_step);
    CHECK(a.eval == 2 && a.resume == 0 && a.checkpoint == 0);
    CHECK(a.summary == 1 && !strcmp(a.last_event, "summary"));
    CHECK(ra.steps == 600 && ra.auc > 0.5 && ra.auc < 1 && ra.logloss > 0);
    CHECK_MSG(ra.auc == rb.auc && ra.logloss == rb.logloss, "two runs: auc %.9g vs %.9g, logloss %.9g vs %.9g",
              ra.auc, rb.auc, ra.logloss, rb.logloss);
    free(a.summary_text);
    free(b.summary_text);
}

static void test_resume(void)
{
    char dir[] = "/tmp/ember_trainer_api_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char ck[64], ck2[64];
    snprintf(ck, sizeof ck, "%s/a", dir);
    snprintf(ck2, sizeof ck2, "%s/b", dir);
    ember_train_overrides o;
    events e1, e2, e3;
    memset(&e1, 0, sizeof e1);
    memset(&e2, 0, sizeof e2);
    memset(&e3, 0, sizeof e3);
    quick(&o, 8);
    o.checkpoint_dir = ck2;
    result straight = run(&o, &e3);
    quick(&o, 4);
    o.checkpoint_dir = ck;
    run(&o, &e1);
    CHECK(e1.checkpoint == 1);
    quick(&o, 8);
    o.checkpoint_dir = ck;
    o.resume = 1;
    result resumed = run(&o, &e2);
    CHECK(e2.resume == 1 && e2.train + e2.progress >= 1 && e2.train + e2.progress <= 4 && e2.last_step == 8);
    CHECK(resumed.steps == 8 && resumed.auc == straight.auc && resumed.logloss == straight.logloss);
    free(e1.summary_text);
    free(e2.summary_text);
    free(e3.summary_text);
    /* 0 steps save nothing: the folder the run made goes again */
    char ck0[64];
    snprintf(ck0, sizeof ck0, "%s/zero", dir);
    quick(&o, 0);
    o.checkpoint_dir = ck0;
    memset(&e1, 0, sizeof e1);
    run(&o, &e1);
    CHECK_MSG(access(ck0, F_OK) != 0, "%s left behind after 0 steps", ck0);
    free(e1.summary_text);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void test_overrides(void)
{
    ember_train_overrides o;
    ember_train_overrides_init(&o);
    CHECK(o.steps == -1 && o.micro_batch == -1 && o.keep == -1 && !o.train_file && !o.resume);
    CHECK(ember_train_overrides_set(&o, "micro-batch", "64") == EMBER_OK && o.micro_batch == 64);
    CHECK(ember_train_overrides_set(&o, "micro_batch", "0x20") == EMBER_OK && o.micro_batch == 32);
    CHECK(ember_train_overrides_set(&o, "micro-batch", "0") == EMBER_EINVAL && o.micro_batch == 32);
    CHECK(ember_train_overrides_set(&o, "steps", "lots") == EMBER_EINVAL);
    CHECK(ember_train_overrides_set(&o, "steps", NULL) == EMBER_EINVAL);
    CHECK(ember_train_overrides_set(&o, "schedule", "sometimes") == EMBER_EINVAL);
    CHECK(ember_train_overrides_set(&o, "schedule", "stale") == EMBER_OK);
    CHECK(ember_train_overrides_set(&o, "lr-decay", "step") == EMBER_EINVAL);
    CHECK(ember_train_overrides_set(&o, "train-file", "") == EMBER_EINVAL);
    /* whole decimal numbers in int64_t, nothing around them */
    o.seed = 5;
    CHECK(ember_train_overrides_set(&o, "seed", "99999999999999999999") == EMBER_EINVAL && o.seed == 5);
    CHECK(ember_train_overrides_set(&o, "seed", "010") == EMBER_OK && o.seed == 10);
    CHECK(ember_train_overrides_set(&o, "seed", " 7") == EMBER_EINVAL && o.seed == 10);
    CHECK(ember_train_overrides_set(&o, "seed", "7 ") == EMBER_EINVAL && o.seed == 10);
    CHECK(ember_train_overrides_set(&o, "seed", "+7") == EMBER_EINVAL && o.seed == 10);
    CHECK(ember_train_overrides_set(&o, "seed", "0x") == EMBER_EINVAL && o.seed == 10);
    /* "" is none where documented */
    CHECK(ember_train_overrides_set(&o, "metrics", "") == EMBER_OK && !strcmp(o.metrics, ""));
    CHECK(ember_train_overrides_set(&o, "plot", "") == EMBER_OK && !strcmp(o.plot, ""));
    CHECK(ember_train_overrides_set(&o, "checkpoint-dir", "") == EMBER_OK && !strcmp(o.checkpoint_dir, ""));
    /* the message names the option and its range */
    char why[256];
    CHECK(ember_train_overrides_set_msg(&o, "steps", "x", why, sizeof why) == EMBER_EINVAL);
    CHECK_MSG(!strcmp(why, "steps: 'x' is not an integer in 0..1099511627776"), "%s", why);
    CHECK(ember_train_overrides_set_msg(&o, "schedule", "no", why, sizeof why) == EMBER_EINVAL);
    CHECK_MSG(!strcmp(why, "schedule: 'no' is not blocking, overlap or stale"), "%s", why);
    CHECK(ember_train_overrides_set_msg(&o, "steps", "3", why, sizeof why) == EMBER_OK && !why[0]);
    CHECK(ember_train_overrides_set(&o, "resume", "1") == EMBER_OK && o.resume == 1);
    CHECK(ember_train_overrides_set(&o, "colour", "red") == 1);
    CHECK(ember_train_overrides_set(&o, "config", "x.cfg") == 1);

    /* out of range when set by hand: refused at open, naming the field */
    ember_trainer *t = NULL;
    ember_train_overrides_init(&o);
    o.threads = 0;
    CHECK(ember_trainer_open(NULL, &o, NULL, NULL, NULL, &t) == EMBER_EINVAL);
    CHECK_MSG(strstr(ember_errmsg(t), "threads"), "%s", ember_errmsg(t));
    ember_trainer_close(t);
    /* contradictions: the CLI's messages */
    ember_train_overrides_init(&o);
    o.resume = 1;
    CHECK(ember_trainer_open(NULL, &o, NULL, NULL, NULL, &t) == EMBER_EINVAL);
    CHECK(!strcmp(ember_errmsg(t), "--resume needs --checkpoint-dir (or train.checkpoint_dir in the config)"));
    ember_trainer_close(t);
    ember_train_overrides_init(&o);
    o.eval_file = "/nonexistent/test.tsv";
    CHECK(ember_trainer_open(NULL, &o, NULL, NULL, NULL, &t) == EMBER_EINVAL);
    CHECK(strstr(ember_errmsg(t), "eval-file needs training data too") != NULL);
    ember_trainer_close(t);
}

static void test_errors(void)
{
    ember_trainer *t = NULL;
    int st = ember_trainer_open("/nonexistent/dir/missing.cfg", NULL, NULL, NULL, NULL, &t);
    CHECK(st != EMBER_OK && st != EMBER_EINVAL && t != NULL);
    CHECK_MSG(strstr(ember_errmsg(t), "missing.cfg") != NULL, "%s", ember_errmsg(t));
    CHECK(ember_trainer_run(t) == EMBER_ESTATE && ember_trainer_summary(t) == NULL);
    /* open's message stays */
    CHECK_MSG(strstr(ember_errmsg(t), "missing.cfg") != NULL, "after run: %s", ember_errmsg(t));
    ember_train_info info;
    CHECK(ember_trainer_info(t, &info) == EMBER_ESTATE);
    ember_trainer_close(t);

    /* a data file that is not there: named */
    ember_train_overrides o;
    quick(&o, 2);
    o.train_file = "/nonexistent/train.tsv";
    st = ember_trainer_open(NULL, &o, NULL, NULL, NULL, &t);
    CHECK(st != EMBER_OK && strstr(ember_errmsg(t), "/nonexistent/train.tsv") != NULL);
    ember_trainer_close(t);

    /* run once only; info before it */
    quick(&o, 1);
    o.metrics = "none";
    o.plot = "p.png";
    CHECK(ember_trainer_open(NULL, &o, NULL, NULL, NULL, &t) == EMBER_OK);
    CHECK(ember_trainer_info(t, &info) == EMBER_OK);
    CHECK(!strcmp(info.name, "synthetic") && !strcmp(info.metrics, "") && !strcmp(info.plot, "p.png"));
    CHECK(info.steps == 1 && info.world == 1 && info.rank == 0 && !info.resumed && !info.checkpoint_dir);
    CHECK(ember_trainer_run(t) == EMBER_OK && ember_trainer_summary(t) != NULL);
    CHECK(ember_trainer_run(t) == EMBER_ESTATE && ember_trainer_summary(t) != NULL);
    ember_trainer_close(t);
    CHECK(access("p.png", F_OK) != 0); /* the library writes no plot */

    CHECK(ember_trainer_open(NULL, NULL, NULL, NULL, NULL, NULL) == EMBER_EINVAL);
    CHECK(strstr(ember_errmsg(NULL), "out is NULL") != NULL); /* no handle: this thread's message */
    CHECK(ember_trainer_run(NULL) == EMBER_EINVAL);
    ember_trainer_close(NULL);
}

/* Open and run put the caller's thread settings back; a second open
 * trainer does not change the first one's. */
static void test_threads_restored(void)
{
    omp_set_num_threads(3);
    openblas_set_num_threads(3);
    ember_train_overrides o;
    quick(&o, 4);
    o.threads = 1;
    o.blas_threads = 1;
    events e;
    memset(&e, 0, sizeof e);
    ember_trainer *a = NULL, *b = NULL;
    CHECK(ember_trainer_open(NULL, &o, NULL, on_event, &e, &a) == EMBER_OK);
    CHECK_MSG(omp_get_max_threads() == 3 && openblas_get_num_threads() == 3, "after open: omp %d, blas %d",
              omp_get_max_threads(), openblas_get_num_threads());
    o.threads = 2;
    o.blas_threads = 2;
    CHECK(ember_trainer_open(NULL, &o, NULL, NULL, NULL, &b) == EMBER_OK);
    CHECK(ember_trainer_run(a) == EMBER_OK);
    CHECK_MSG(omp_get_max_threads() == 3 && openblas_get_num_threads() == 3, "after run: omp %d, blas %d",
              omp_get_max_threads(), openblas_get_num_threads());
    json_t *j = json_loads(ember_trainer_summary(a) ? ember_trainer_summary(a) : "", 0, NULL);
    CHECK(json_integer_value(json_object_get(j, "steps")) == 4);
    json_decref(j);
    ember_trainer_close(a);
    ember_trainer_close(b);
    CHECK(omp_get_max_threads() == 3 && openblas_get_num_threads() == 3);
    free(e.summary_text);
}

/* A predictor opened on the trainer's checkpoint scores with the caller's
 * thread settings put back after open and after every score. */
static void test_predictor_threads_restored(void)
{
    char dir[] = "/tmp/ember_trainer_api_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    ember_train_overrides o;
    quick(&o, 2);
    o.checkpoint_dir = dir;
    ember_trainer *t = NULL;
    CHECK(ember_trainer_open(NULL, &o, NULL, NULL, NULL, &t) == EMBER_OK && ember_trainer_run(t) == EMBER_OK);
    ember_trainer_close(t);
    omp_set_num_threads(3);
    openblas_set_num_threads(3);
    ember_predictor_options po = {NULL, 2};
    ember_predictor *p = NULL;
    CHECK_MSG(ember_predictor_open(dir, &po, &p) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK_MSG(openblas_get_num_threads() == 3, "after open: blas %d", openblas_get_num_threads());
    ember_reader *r = NULL;
    ember_samples s;
    CHECK_MSG(ember_reader_open(NULL, NULL, 1, 0, 1, &r) == EMBER_OK, "%s", ember_errmsg(NULL));
    if (p && r && ember_reader_next(r, 64, &s) == 64) {
        float scores[64];
        CHECK(ember_predictor_score(p, 64, s.dense, &s.sparse, scores) == EMBER_OK);
        CHECK(scores[0] > 0 && scores[0] < 1);
        CHECK_MSG(openblas_get_num_threads() == 3 && omp_get_max_threads() == 3, "after score: omp %d, blas %d",
                  omp_get_max_threads(), openblas_get_num_threads());
    } else {
        CHECK(!"predictor, reader or samples");
    }
    ember_reader_close(r);
    ember_predictor_close(p);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* A file name that is not UTF-8: the start event's train_file and the
 * summary's first_bad are still there, with the byte as text. */
static void test_not_utf8(void)
{
    char dir[] = "/tmp/ember_trainer_api_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/tr\xff.tsv", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    for (int l = 0; l < 128; l++) { /* 1 bad line of 129: under data.max_bad_fraction */
        if (l == 5)
            fprintf(f, "not a line\n");
        fprintf(f, "%d", l % 2);
        for (int i = 0; i < 13; i++)
            fprintf(f, "\t%d", (l + i) % 7);
        for (int i = 0; i < 26; i++)
            fprintf(f, "\t%08x", (unsigned)(l * 31 + i));
        fprintf(f, "\n");
    }
    fclose(f);
    ember_train_overrides o;
    quick(&o, 2);
    o.micro_batch = 4;
    o.eval_every = 0;
    o.eval_samples = 0;
    o.train_file = path;
    ember_trainer *t = NULL;
    events e;
    memset(&e, 0, sizeof e);
    e.keep_start = 1;
    int st = ember_trainer_open(NULL, &o, NULL, on_event, &e, &t);
    CHECK_MSG(st == EMBER_OK, "open: %s", ember_errmsg(t));
    if (st == EMBER_OK)
        CHECK_MSG(ember_trainer_run(t) == EMBER_OK, "run: %s", ember_errmsg(t));
    json_t *start = e.start_text ? json_loads(e.start_text, 0, NULL) : NULL;
    const char *tf = json_string_value(json_object_get(start, "train_file"));
    CHECK_MSG(tf && strstr(tf, "/tr\\xFF.tsv"), "train_file: %s", tf ? tf : "(none)");
    const char *sm = ember_trainer_summary(t);
    json_t *j = sm ? json_loads(sm, 0, NULL) : NULL;
    const char *fb = json_string_value(json_object_get(j, "first_bad"));
    CHECK_MSG(fb && strstr(fb, "/tr\\xFF.tsv:6"), "first_bad: %s", fb ? fb : "(none)");
    json_decref(j);
    json_decref(start);
    ember_trainer_close(t);
    free(e.summary_text);
    free(e.start_text);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    test_not_utf8();
    test_threads_restored();
    test_predictor_threads_restored();
    test_events_and_repeat();
    test_resume();
    test_overrides();
    test_errors();
    return check_report("test_trainer_api");
}
