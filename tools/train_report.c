/*
 * train_report.c: what `ember train` shows and writes (train_tool.h), all
 * on rank 0, made from the trainer's events (include/ember-train.h):
 *
 *   stdout    on a terminal a progress bar redrawn in place (step, samples
 *             per second, loss, ETA); on a pipe, or under mpirun, a plain
 *             line every tenth of the run; evaluation lines; the summary;
 *             and as the last line one JSON object {"event":"summary",...}.
 *             With --json, stdout carries the JSON lines only.
 *   metrics   JSON lines: start, train (every logged step), eval, summary.
 *   plot      train_plot.c, at the end.
 *
 * The JSON lines are the events as the trainer wrote them ("progress" is
 * for the bar alone); the summary's gets the plot's path.  The loss and
 * eval history kept for the plot is a few numbers per logged step (at most
 * a few thousand).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ember.h"
#include "train_tool.h"

struct train_report {
    int json, tty;
    ember_output *metrics_out;  /* named at open, committed at the end     */
    FILE *metrics;              /* its stream; NULL: none                  */
    char metrics_err[600];      /* the first failed write, said once       */
    char *metrics_path, *plot_path, *checkpoint_dir;
    char name[64];
    train_point *loss, *eval;
    int64_t nloss, capl, neval, cape;
    int64_t steps;              /* the run's last step (the start event)    */
    double last_draw, last_loss;
    int last_tenth;
    int drawn;                  /* a bar is on the line                    */
    int64_t step0, samples0;    /* resumed from: rates count from there    */
};

/* The dense optimizer's name as the header prints it. */
static const char *dense_label(const char *name)
{
    return !strcmp(name, "adam") ? "Adam" : !strcmp(name, "adamw") ? "AdamW" : !strcmp(name, "momentum") ? "momentum"
                                                                                                       : "SGD";
}

static int push(train_point **p, int64_t *n, int64_t *cap, train_point x)
{
    if (*n == *cap) {
        int64_t c = *cap ? *cap * 2 : 256;
        train_point *q = realloc(*p, (size_t)c * sizeof *q);
        if (!q)
            return -1;
        *p = q;
        *cap = c;
    }
    (*p)[(*n)++] = x;
    return 0;
}

/* Fields of an event (a missing or null number: NaN). */
static double num(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
static long long integer(const json_t *j, const char *key) { return json_integer_value(json_object_get(j, key)); }
static const char *str(const json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "";
}

/* A line to the metrics file, flushed (it is read while it grows); the
 * first failure is said at once, and the run ends with status 1. */
static void write_metrics(train_report *r, const char *s)
{
    if (!r->metrics || r->metrics_err[0])
        return;
    fprintf(r->metrics, "%s\n", s);
    if (ember_output_flush(r->metrics_out) != EMBER_OK) { /* "PATH: REASON" */
        snprintf(r->metrics_err, sizeof r->metrics_err, "cannot write the metrics %s", ember_errmsg(r->metrics_out));
        fflush(stdout);
        fprintf(stderr, "ember train: %s (the run goes on, and ends with status 1)\n", r->metrics_err);
    }
}

/* One JSON line to the metrics file and, with --json, to stdout. */
static void write_line(train_report *r, const char *s)
{
    write_metrics(r, s);
    if (r->json) {
        printf("%s\n", s);
        fflush(stdout);
    }
}

static void clear_bar(train_report *r)
{
    if (r->drawn) {
        printf("\r\033[K");
        r->drawn = 0;
    }
}

int train_report_open(const tool_ctx *ctx, const train_report_opts *o, train_report **out)
{
    *out = NULL;
    train_report *r = NULL;
    int failed = 0;
    char msg[1024] = "out of memory";
    if (ctx->rank == 0) {
        r = calloc(1, sizeof *r);
        failed = !r;
    }
    if (r) {
        r->json = o->json;
        /* under mpirun rank 0's stdout is often a pseudo-terminal that
         * mpirun forwards to wherever its own output goes: plain lines */
        r->tty = !o->json && !ctx->mpi && isatty(STDOUT_FILENO);
        r->metrics_path = strdup(o->metrics_path ? o->metrics_path : "");
        r->plot_path = strdup(o->plot_path ? o->plot_path : "");
        r->checkpoint_dir = strdup(o->checkpoint_dir ? o->checkpoint_dir : "");
        failed = !r->metrics_path || !r->plot_path || !r->checkpoint_dir;
        /* the plot is drawn at the end: find out now that it can be written
         * (an output opened and dropped leaves nothing behind) */
        ember_output *probe = NULL;
        if (!failed && r->plot_path[0]) {
            failed = ember_output_open(r->plot_path, 0, &probe) != EMBER_OK;
            if (failed)
                snprintf(msg, sizeof msg, "%s: cannot write the plot: %s", r->plot_path, ember_errmsg(NULL));
            ember_output_abort(probe);
        }
        /* the metrics: named now, since they are read while they grow; a
         * resumed run's begin with the earlier run's lines */
        if (!failed && r->metrics_path[0]) {
            const char *why = NULL;
            if (ember_output_open(r->metrics_path, o->append ? EMBER_OUTPUT_APPEND : 0, &r->metrics_out) != EMBER_OK)
                why = ember_errmsg(NULL);
            else if (ember_output_publish(r->metrics_out) != EMBER_OK)
                why = ember_errmsg(r->metrics_out);
            else if (!(r->metrics = ember_output_stdio(r->metrics_out)))
                why = "out of memory";
            failed = why != NULL;
            if (failed)
                snprintf(msg, sizeof msg, "%s: cannot write the metrics: %s", r->metrics_path, why);
        }
    }
    if (tool_agree_fail(ctx, "train", failed, msg)) {
        train_report_close(r);
        return 1;
    }
    *out = r;
    return 0;
}

void train_report_close(train_report *r)
{
    if (!r)
        return;
    /* a run that failed before finish keeps the lines written up to its
     * failure (what is needed to see why); only a metrics file whose own
     * write failed is taken back */
    if (r->metrics && !r->metrics_err[0]) {
        if (ember_output_commit(r->metrics_out) != EMBER_OK)
            fprintf(stderr, "ember train: %s\n", ember_errmsg(NULL));
        r->metrics_out = NULL;
    }
    ember_output_abort(r->metrics_out); /* taken back */
    free(r->metrics_path);
    free(r->plot_path);
    free(r->checkpoint_dir);
    free(r->loss);
    free(r->eval);
    free(r);
}

/* The header: what the run will do. */
/* How long a file-trained run is in passes over its file: said when the
 * default chose it, and a warning when it is many (start event). */
static void show_passes(const json_t *j)
{
    if (!json_object_get(j, "passes"))
        return;
    double passes = num(j, "passes");
    long long samples = integer(j, "file_samples"), steps = integer(j, "steps");
    if (!strcmp(str(j, "steps_from"), "default_epochs"))
        printf("  length: %lld steps, %.3g pass%s over the training file's %lld samples (neither train.steps "
               "nor train.epochs given: train.epochs = 1)\n", steps, passes, passes == 1 ? "" : "es", samples);
    if (passes > (double)integer(j, "many_passes")) {
        fflush(stdout);
        fprintf(stderr, "ember train: warning: %lld steps are %.1f passes over the training file's %lld samples "
                "(more than %lld): set train.epochs, or train.steps, for a file this size\n", steps, passes, samples,
                integer(j, "many_passes"));
    }
}

/* "  rows: fp16 in 24 tables, fp32 in 2; state bf16 in 24; rounding
 * stochastic in 24" when some table's rows or optimizer state are half
 * precision; nothing when all are fp32. */
static void show_precision(const json_t *p)
{
    const json_t *rd = json_object_get(p, "rounding"), *state = json_object_get(p, "state");
    if (!rd)
        return;
    char line[256] = "";
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)p, k, v)
        if (json_is_integer(v))
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s in %lld", *line ? ", " : "", k,
                     (long long)json_integer_value(v));
    snprintf(line + strlen(line), sizeof line - strlen(line), " tables;%s", state ? " state" : "");
    int first = 1;
    json_object_foreach((json_t *)state, k, v) {
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s %s in %lld", first ? "" : ",", k,
                 (long long)json_integer_value(v));
        first = 0;
    }
    snprintf(line + strlen(line), sizeof line - strlen(line), "%s rounding", state ? ";" : "");
    json_object_foreach((json_t *)rd, k, v)
        snprintf(line + strlen(line), sizeof line - strlen(line), " %s in %lld", k, (long long)json_integer_value(v));
    printf("  rows: %s (docs/precision.md)\n", line);
}

static void show_start(train_report *r, const json_t *j)
{
    snprintf(r->name, sizeof r->name, "%s", str(j, "name"));
    for (char *c = r->name; *c; c++) /* it goes into the plot's quoted title */
        if (*c == '\'' || *c == '\\' || (unsigned char)*c < ' ')
            *c = ' ';
    r->steps = integer(j, "steps");
    if (r->json)
        return;
    const char *source = str(j, "source"), *schedule = str(j, "schedule");
    const json_t *lr = json_object_get(j, "lr_schedule");
    int synthetic = !strcmp(source, "synthetic");
    char bottom[128] = "", top[128] = "";
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(j, "bottom"), i, w)
        snprintf(bottom + strlen(bottom), sizeof bottom - strlen(bottom), "-%lld", json_integer_value(w));
    json_array_foreach(json_object_get(j, "top"), i, w)
        snprintf(top + strlen(top), sizeof top - strlen(top), "%lld-", json_integer_value(w));
    printf("ember train: %s (%s data: %lld dense + %lld sparse features)%s\n", str(j, "name"), source,
           integer(j, "dense_features"), integer(j, "sparse_features"),
           synthetic ? ", labels from a hidden teacher" : "");
    printf("  model: %lld tables, %lld rows x %lld; dense %lld%s | %s | %s1 (%lld parameters), %s lr %g\n",
           integer(j, "tables"), integer(j, "embedding_rows"), integer(j, "emb_dim"), integer(j, "dense_features"),
           bottom, str(j, "interaction"), top, integer(j, "dense_params"),
           dense_label(str(j, "dense_optimizer")), num(j, "dense_lr"));
    show_precision(json_object_get(j, "row_precision"));
    if (json_object_get(j, "placement"))
        printf("  placement: %s\n", str(j, "placement"));
    if (strcmp(schedule, "blocking"))
        printf("  schedule: %s (docs/distributed.md)\n", !strcmp(schedule, "stale")
               ? "stale: the next batch is looked up before this step's sparse update"
               : "overlap: the next batch's ids travel during the dense model");
    const char *decay = str(lr, "decay");
    if (integer(lr, "warmup") > 0 || strcmp(decay, "none"))
        printf("  learning rates: warm-up over %lld steps, then %s decay%s\n", integer(lr, "warmup"), decay,
               !strcmp(decay, "linear") || !strcmp(decay, "cosine") ? " to the final factor" : "");
    long long shards = integer(j, "optimizer_shards"), world = integer(j, "world"), threads = integer(j, "threads");
    if (shards > 0)
        printf("  dense optimizer state: %.1f KB per rank, sharded over groups of %d ranks\n",
               (double)integer(j, "dense_optimizer_bytes_per_rank") / 1e3, (int)shards);
    printf("  batch: %lld micro x %lld accumulated x %lld rank%s = %lld per step; %lld steps; %lld thread%s per "
           "rank\n", integer(j, "micro_batch"), integer(j, "accumulate"), world, world > 1 ? "s" : "",
           integer(j, "global_batch"), (long long)r->steps, threads, threads > 1 ? "s" : "");
    show_passes(j);
    if (json_is_true(json_object_get(j, "evaluation"))) { /* a file may hold fewer: the results say how many */
        char when[64] = "at the end";
        if (integer(j, "eval_every") > 0)
            snprintf(when, sizeof when, "every %lld steps and at the end", integer(j, "eval_every"));
        if (json_is_string(json_object_get(j, "eval_samples")))
            printf("  evaluation: %s, on every sample of %s\n", when,
                   json_object_get(j, "eval_file") ? str(j, "eval_file") : "the eval file");
        else
            printf("  evaluation: %s, on %s%lld held-out samples\n", when, synthetic ? "" : "up to ",
                   integer(j, "eval_samples"));
    }
    fflush(stdout);
}

static void fmt_rate(char *buf, size_t n, double v)
{
    if (v >= 1e6)
        snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
}

static void fmt_time(char *buf, size_t n, double s)
{
    if (!(s >= 0) || s > 1e7)
        snprintf(buf, n, "?");
    else if (s >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", (int)(s / 3600), (int)fmod(s / 60, 60), (int)fmod(s, 60));
    else
        snprintf(buf, n, "%d:%02d", (int)(s / 60), (int)fmod(s, 60));
}

/* After a step ("train" when logged, else "progress"): the progress bar on
 * a terminal at most 10 times a second; on a pipe a line every tenth. */
static void show_step(train_report *r, const json_t *j, int logged)
{
    int64_t step = integer(j, "step"), steps = r->steps, samples = integer(j, "samples");
    double seconds = num(j, "seconds"), loss = num(j, "loss");
    if (logged) {
        r->last_loss = loss;
        push(&r->loss, &r->nloss, &r->capl, (train_point){step, {loss, 0, 0, 0}});
    }
    if (r->json)
        return;
    double rate = seconds > 0 ? (double)(samples - r->samples0) / seconds : 0;
    double eta = step > r->step0 ? seconds * (double)(steps - step) / (double)(step - r->step0) : -1;
    char rs[32], es[32];
    fmt_rate(rs, sizeof rs, rate);
    fmt_time(es, sizeof es, eta);
    if (r->tty) {
        double t = tool_now();
        if (t - r->last_draw < 0.1 && step != steps)
            return;
        r->last_draw = t;
        int width = 30, fill = steps > 0 ? (int)((double)width * (double)step / (double)steps) : width;
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        printf("\r\033[Kstep %lld/%lld [%s] %3d%%  %s samples/s  loss %.4f  ETA %s", (long long)step,
               (long long)steps, bar, steps > 0 ? (int)(100 * step / steps) : 100, rs, r->last_loss, es);
        fflush(stdout);
        r->drawn = 1;
        return;
    }
    int tenth = steps > 0 ? (int)(10 * step / steps) : 10;
    if (tenth > r->last_tenth && logged) {
        r->last_tenth = tenth;
        printf("step %lld/%lld (%d%%): loss %.4f, %s samples/s, %.1f s, ETA %s\n", (long long)step,
               (long long)steps, (int)(100 * step / (steps > 0 ? steps : 1)), loss, rs, seconds, es);
        fflush(stdout);
    }
}

static void show_eval(train_report *r, const json_t *j)
{
    int64_t step = integer(j, "step");
    double auc = num(j, "auc"), tauc = num(j, "teacher_auc"), ll = num(j, "logloss"), tll = num(j, "teacher_logloss");
    push(&r->eval, &r->neval, &r->cape, (train_point){step, {auc, tauc, ll, tll}});
    if (r->json)
        return;
    clear_bar(r);
    if (isfinite(tauc))
        printf("eval at step %lld: AUC %.4f (teacher %.4f, gap %.4f), log loss %.4f (teacher %.4f), %lld samples, "
               "%.2f s\n", (long long)step, auc, tauc, tauc - auc, ll, tll, integer(j, "samples"), num(j, "seconds"));
    else
        printf("eval at step %lld: AUC %.4f, log loss %.4f, %lld samples, %.2f s\n", (long long)step, auc, ll,
               integer(j, "samples"), num(j, "seconds"));
    fflush(stdout);
}

static void show_resume(train_report *r, const json_t *j)
{
    r->step0 = integer(j, "step");
    r->samples0 = integer(j, "samples");
    if (r->json)
        return;
    const json_t *ck = json_object_get(j, "checkpoint");
    const char *note = str(j, "differences");
    if (!json_is_string(ck))
        printf("resume: no checkpoint under %s: starting from step 0\n", r->checkpoint_dir);
    else
        printf("resume: from %s (step %lld, %lld samples)\n", json_string_value(ck), (long long)r->step0,
               (long long)r->samples0);
    if (note[0])
        printf("resume: note: %s: the tables reshard and the dense model is copied, but the batches differ, so "
               "the result is not bit-identical to an uninterrupted run\n", note);
    if (json_is_string(ck) && r->step0 >= r->steps)
        printf("resume: the checkpoint is at step %lld, --steps is %lld: no steps to take\n", (long long)r->step0,
               (long long)r->steps);
    fflush(stdout);
}

static void show_checkpoint(train_report *r, const json_t *j)
{
    if (r->json)
        return;
    clear_bar(r);
    printf("checkpoint: step %lld -> %s (%.1f MB, %.2f s)\n", integer(j, "step"), str(j, "path"), num(j, "mb"),
           num(j, "seconds"));
    fflush(stdout);
}

/* "replan" (a re-plan step: moved or not) and "replan_measured" (the step
 * after a move). */
static void show_replan(train_report *r, const json_t *j)
{
    if (r->json)
        return;
    clear_bar(r);
    long long step = (long long)integer(j, "step");
    if (!strcmp(str(j, "event"), "replan_measured")) {
        printf("replan: step %lld measured the busiest rank's %.0f bytes sent, %.3fx the step before the move\n", step,
               num(j, "busiest_bytes_after"), num(j, "ratio"));
        fflush(stdout);
        return;
    }
    const json_t *c = json_object_get(j, "predicted_cost"), *b = json_object_get(j, "predicted_busiest_bytes");
    double c0 = json_number_value(json_array_get(c, 0)), c1 = json_number_value(json_array_get(c, 1));
    if (!json_is_true(json_object_get(j, "moved"))) {
        printf("replan at step %lld: stays (the planner's placement costs %.3fx the one in force)\n", step,
               c0 > 0 ? c1 / c0 : 1.0);
        fflush(stdout);
        return;
    }
    printf("replan at step %lld: moved", step);
    const json_t *tabs = json_object_get(j, "tables");
    for (size_t i = 0; i < json_array_size(tabs); i++) {
        const json_t *t = json_array_get(tabs, i);
        printf("%s %s %s -> %s", i ? "," : "", str(t, "table"), str(t, "from"), str(t, "to"));
    }
    printf("; predicted cost %.3fx, the busiest rank's bytes %.0f -> %.0f; the move took %.3f s (%.1f steps)\n",
           c0 > 0 ? c1 / c0 : 1.0, json_number_value(json_array_get(b, 0)), json_number_value(json_array_get(b, 1)),
           num(j, "move_seconds"), num(j, "step_seconds") > 0 ? num(j, "move_seconds") / num(j, "step_seconds") : 0.0);
    fflush(stdout);
}

/* "limits": a table's adaptive limits changed. */
static void show_limits(train_report *r, const json_t *j)
{
    if (r->json)
        return;
    clear_bar(r);
    const json_t *was = json_object_get(j, "was");
    long long oi = (long long)json_integer_value(json_array_get(was, 0));
    long long ou = (long long)json_integer_value(json_array_get(was, 1));
    printf("limits at step %lld: table '%s' max_ids_per_partition %lld -> %lld, max_unique_ids_per_partition %lld -> "
           "%lld (%lld ids, %lld unique over the old ones since the last change%s)\n",
           (long long)integer(j, "step"), str(j, "table"), oi, (long long)integer(j, "max_ids_per_partition"), ou,
           (long long)integer(j, "max_unique_ids_per_partition"), (long long)integer(j, "over_ids"),
           (long long)integer(j, "over_unique_ids"),
           json_is_true(json_object_get(j, "capped")) ? "; capped by train.limits.max_bytes: past it the "
                                                       "table's policy applies" : "");
    fflush(stdout);
}

void train_report_event(train_report *r, const char *text)
{
    if (!r)
        return;
    json_t *j = json_loads(text, 0, NULL);
    const char *ev = str(j, "event");
    int progress = !strcmp(ev, "progress");
    if (progress && !r->tty) { /* the bar alone needs it */
        json_decref(j);
        return;
    }
    if (!progress && strcmp(ev, "summary"))
        write_line(r, text);
    if (!strcmp(ev, "start"))
        show_start(r, j);
    else if (!strcmp(ev, "train") || progress)
        show_step(r, j, !progress);
    else if (!strcmp(ev, "eval"))
        show_eval(r, j);
    else if (!strcmp(ev, "resume"))
        show_resume(r, j);
    else if (!strcmp(ev, "checkpoint"))
        show_checkpoint(r, j);
    else if (!strcmp(ev, "limits"))
        show_limits(r, j);
    else if (!strncmp(ev, "replan", 6))
        show_replan(r, j);
    json_decref(j);
}

/* The summary as text: totals, the final evaluation, data, time split,
 * SSD tier, memory, files. */
static void show_summary(const train_report *r, const json_t *j, int plotted, int metrics_ok)
{
    char rs[32];
    fmt_rate(rs, sizeof rs, num(j, "samples_per_s"));
    long long steps = integer(j, "steps"), samples = integer(j, "samples"), run_steps = integer(j, "run_steps");
    double seconds = num(j, "seconds"), train_s = num(j, "train_seconds");
    if (run_steps == steps)
        printf("done: %lld steps, %lld samples in %.1f s (training %.1f s): %s samples/s\n", steps, samples, seconds,
               train_s, rs);
    else /* resumed: the totals are the whole run's, the time and rate this run's */
        printf("done: %lld steps, %lld samples in all; this run %lld steps, %lld samples in %.1f s (training "
               "%.1f s): %s samples/s\n", steps, samples, run_steps, integer(j, "run_samples"), seconds, train_s, rs);
    if (num(j, "epochs") > 0)
        printf("epochs: %.2f passes over the training file\n", num(j, "epochs"));
    if (json_is_true(json_object_get(j, "stopped_early"))) /* it stopped after its last step */
        printf("stopped early after step %lld: the %s has not improved since step %lld (%.6g)\n", steps,
               !strcmp(str(j, "stop_metric"), "logloss") ? "log loss" : "AUC", integer(j, "best_step"),
               num(j, "best_metric"));
    double auc = num(j, "auc"), tauc = num(j, "teacher_auc"), ll = num(j, "logloss"), tll = num(j, "teacher_logloss");
    if (r->neval > 0 && isfinite(tauc))
        printf("final: AUC %.4f vs the teacher's %.4f (gap %.4f), log loss %.4f vs %.4f, on %lld held-out samples\n",
               auc, tauc, tauc - auc, ll, tll, integer(j, "eval_samples"));
    else if (r->neval > 0)
        printf("final: AUC %.4f, log loss %.4f, on %lld held-out samples\n", auc, ll, integer(j, "eval_samples"));
    else
        printf("final: no evaluation (no data.eval_file)\n");
    long long lines = integer(j, "lines"), bad = integer(j, "bad_lines");
    const char *first_bad = str(j, "first_bad");
    if (lines > 0 || bad > 0)
        printf("data: %lld lines read, %lld bad line%s skipped%s%s\n", lines, bad, bad == 1 ? "" : "s",
               first_bad[0] ? "; first: " : "", first_bad);
    const json_t *ts = json_object_get(j, "time_s");
    static const char *const PHASES[][2] = {
        {"data", "data"}, {"embedding forward", "emb_forward"}, {"exchange", "exchange"}, {"dense", "dense"},
        {"embedding backward", "emb_backward"}, {"dense all-reduce", "reduce"}, {"evaluation", "eval"},
        {"checkpoints", "checkpoint"},
    };
    double w = seconds > 0 ? seconds : 1;
    long long world = integer(j, "world");
    printf("time split%s:", world > 1 ? " (mean over ranks)" : "");
    for (size_t i = 0; i < sizeof PHASES / sizeof PHASES[0]; i++)
        printf("%s %s %.2f s (%.0f%%)", i ? "," : "", PHASES[i][0], num(ts, PHASES[i][1]),
               100 * num(ts, PHASES[i][1]) / w);
    long long stores = integer(j, "ssd_stores");
    if (stores > 0) {
        double hit = num(j, "ssd_hit_rate");
        printf("\nSSD tier: %lld store%s, hit rate %.2f%% (%lld loads, %lld read ahead), %.1f MB read, "
               "%.1f MB written, waited %.2f s, synchronous I/O %.2f s", stores, stores == 1 ? "" : "s",
               isfinite(hit) ? 100.0 * hit : 0.0, integer(j, "ssd_loads"), integer(j, "ssd_prefetch_loads"),
               (double)integer(j, "ssd_bytes_read") / 1e6, (double)integer(j, "ssd_bytes_written") / 1e6,
               num(j, "ssd_wait_s"), num(j, "ssd_io_s"));
    }
    printf("\npeak RSS:");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "peak_rss_mb_per_rank"), i, v)
        printf("%s rank %d %.1f MB", i ? "," : "", (int)i, json_number_value(v));
    printf("\n");
    if (metrics_ok || plotted) /* only files that were written */
        printf("metrics: %s%s%s\n", metrics_ok ? r->metrics_path : "(none)", plotted ? "; plot: " : "",
               plotted ? r->plot_path : "");
}

int train_report_finish(train_report *r, const char *summary)
{
    if (!r)
        return 0;
    char plot_err[600] = "", metrics_err[600] = "";
    int plot = r->plot_path[0] ? train_plot(r->plot_path, r->name, r->loss, r->nloss, r->eval, r->neval, plot_err,
                                            sizeof plot_err)
                               : 1;
    int plotted = plot == 0;
    /* the summary's line, the last of stdout in both modes: the trainer's,
     * with the plot */
    char *line = NULL;
    if (r->plot_path[0]) {
        json_t *path = plotted ? json_string(r->plot_path) : json_null();
        char *p = json_dumps(path, JSON_ENCODE_ANY);
        size_t n = strlen(summary);
        json_decref(path);
        if (p && n > 0 && (line = malloc(n + strlen(p) + 16)))
            sprintf(line, "%.*s,\"plot\":%s}", (int)(n - 1), summary, p); /* the object's last field */
        free(p);
    }
    const char *s = line ? line : summary;
    int metrics_ok = 0, metrics_own = 0; /* own: the report's message, which says "metrics" */
    if (r->metrics) {
        write_metrics(r, s);
        r->metrics = NULL;
        if (r->metrics_err[0]) {
            snprintf(metrics_err, sizeof metrics_err, "%s", r->metrics_err);
            metrics_own = 1;
            ember_output_abort(r->metrics_out); /* taken back: no half-written metrics */
        } else {
            metrics_ok = ember_output_commit(r->metrics_out) == EMBER_OK;
            if (!metrics_ok)
                snprintf(metrics_err, sizeof metrics_err, "%s", ember_errmsg(NULL));
        }
        r->metrics_out = NULL;
    }
    json_t *j = json_loads(summary, 0, NULL);
    if (!r->json) {
        clear_bar(r);
        show_summary(r, j, plotted, metrics_ok);
    }
    json_decref(j);
    printf("%s\n", s);
    fflush(stdout);
    free(line);
    int status = 0;
    if (plot < 0) {
        fprintf(stderr, "ember train: no plot: %s\n", plot_err);
        status = 1;
    }
    if (r->metrics_path[0] && !metrics_ok) { /* the message names the path: "metrics" once is enough */
        fprintf(stderr, "ember train: %s%s\n",
                metrics_own || strstr(r->metrics_path, "metrics") ? "" : "cannot write the metrics: ", metrics_err);
        status = 1;
    }
    return status;
}
