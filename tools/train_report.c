/*
 * train_report.c: what `ember train` shows and writes (train_tool.h), all
 * on rank 0 (calls on other ranks do nothing):
 *
 *   stdout    on a terminal a progress bar redrawn in place (step, samples
 *             per second, loss, ETA); on a pipe, or under mpirun, a plain
 *             line every tenth of the run; evaluation lines; the summary; and as the last line
 *             one JSON object {"event":"summary",...}.  With --json, stdout
 *             carries the JSON lines only.
 *   metrics   JSON lines: start, train (every logged step), eval, summary.
 *   plot      a PNG of the training loss and the evaluation's AUC and log
 *             loss over steps, drawn by gnuplot (pngcairo, else png); a
 *             missing gnuplot is a warning, not a failure.
 *
 * The loss and eval history kept for the plot is a few numbers per logged
 * step (at most a few thousand).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "train/dense_sync.h"
#include "train_tool.h"

typedef struct point {
    int64_t step;
    double v[4];
} point;

struct train_report {
    int active;                 /* rank 0                                  */
    int json, tty;
    FILE *metrics;
    char *metrics_path, *plot_path;
    char name[64];
    point *loss, *eval;
    int64_t nloss, capl, neval, cape;
    double last_draw, last_loss;
    int last_tenth;
    int drawn;                  /* a bar is on the line                    */
    int64_t step0, samples0;    /* resumed from: rates count from there    */
};

static int push(point **p, int64_t *n, int64_t *cap, point x)
{
    if (*n == *cap) {
        int64_t c = *cap ? *cap * 2 : 256;
        point *q = realloc(*p, (size_t)c * sizeof *q);
        if (!q)
            return -1;
        *p = q;
        *cap = c;
    }
    (*p)[(*n)++] = x;
    return 0;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* One JSON line to the metrics file and, with --json, to stdout; takes j. */
static void emit(train_report *r, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
    json_decref(j);
    if (!s)
        return;
    if (r->metrics) {
        fprintf(r->metrics, "%s\n", s);
        fflush(r->metrics);
    }
    if (r->json) {
        printf("%s\n", s);
        fflush(stdout);
    }
    free(s);
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
    train_report *r = calloc(1, sizeof *r);
    int failed = !r;
    char msg[512] = "out of memory";
    if (r && ctx->rank == 0) {
        r->active = 1;
        r->json = o->json;
        /* under mpirun rank 0's stdout is often a pseudo-terminal that
         * mpirun forwards to wherever its own output goes: plain lines */
        r->tty = !o->json && !ctx->mpi && isatty(STDOUT_FILENO);
        r->last_tenth = 0;
        r->metrics_path = strdup(o->metrics_path ? o->metrics_path : "");
        r->plot_path = strdup(o->plot_path ? o->plot_path : "");
        failed = !r->metrics_path || !r->plot_path;
        FILE *plot = NULL; /* the plot is drawn at the end: find out now that it can be written */
        int existed = r->plot_path[0] && access(r->plot_path, F_OK) == 0;
        if (!failed && r->plot_path[0] && !(plot = fopen(r->plot_path, "a"))) {
            snprintf(msg, sizeof msg, "%s: cannot write the plot: %m", r->plot_path);
            failed = 1;
        }
        if (plot) {
            fclose(plot);
            if (!existed) /* no empty file left if the run fails */
                remove(r->plot_path);
        }
        if (!failed && r->metrics_path[0] && !(r->metrics = fopen(r->metrics_path, o->append ? "a" : "w"))) {
            snprintf(msg, sizeof msg, "%s: cannot write the metrics: %m", r->metrics_path);
            failed = 1;
        }
    }
    int32_t first = -1;
    if (tool_any_failed(ctx, failed, &first)) {
        if (first == ctx->rank)
            tool_local_error(ctx, "train", "%s", msg);
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
    if (r->metrics)
        fclose(r->metrics);
    free(r->metrics_path);
    free(r->plot_path);
    free(r->loss);
    free(r->eval);
    free(r);
}

void train_report_start(train_report *r, const train_setup *s, int32_t world, int64_t global_batch)
{
    if (!r->active)
        return;
    const cfg_train *t = &s->t;
    const dlrm_config *m = &t->model;
    snprintf(r->name, sizeof r->name, "%s", s->name);
    for (char *c = r->name; *c; c++) /* it goes into the plot's quoted title */
        if (*c == '\'' || *c == '\\' || (unsigned char)*c < ' ')
            *c = ' ';
    int64_t rows = 0;
    for (int32_t i = 0; i < s->cc.num_tables; i++)
        rows += s->cc.tables[i].rows;
    char bottom[128] = "", top[128] = "";
    for (int32_t i = 0; i < m->num_bottom; i++)
        snprintf(bottom + strlen(bottom), sizeof bottom - strlen(bottom), "-%d", m->bottom[i]);
    for (int32_t i = 0; i < m->num_top; i++)
        snprintf(top + strlen(top), sizeof top - strlen(top), "%d-", m->top[i]);
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("start"));
    json_object_set_new(j, "name", json_string(s->name));
    json_object_set_new(j, "source", json_string(config_source_name(t->source)));
    if (t->train_file)
        json_object_set_new(j, "train_file", json_string(t->train_file));
    if (t->eval_file)
        json_object_set_new(j, "eval_file", json_string(t->eval_file));
    json_object_set_new(j, "world", json_integer(world));
    json_object_set_new(j, "threads", json_integer(s->threads));
    json_object_set_new(j, "micro_batch", json_integer(t->micro_batch));
    json_object_set_new(j, "accumulate", json_integer(t->accumulate));
    json_object_set_new(j, "global_batch", json_integer(global_batch));
    json_object_set_new(j, "steps", json_integer(t->steps));
    json_object_set_new(j, "eval_every", json_integer(t->eval_every));
    json_object_set_new(j, "eval_samples", !s->eval_src ? json_integer(0)
                                           : t->eval_samples >= CFG_EVAL_ALL ? json_string("all")
                                                                             : json_integer(t->eval_samples));
    json_object_set_new(j, "dense_features", json_integer(m->num_dense));
    json_object_set_new(j, "sparse_features", json_integer(m->num_sparse));
    json_object_set_new(j, "emb_dim", json_integer(m->emb_dim));
    json_object_set_new(j, "embedding_rows", json_integer(rows));
    json_object_set_new(j, "dense_params", json_integer(dlrm_num_params(s->model)));
    int64_t obytes = dense_sync_state_bytes(trainer_dense_sync(s->tr));
    json_object_set_new(j, "optimizer_shards", json_integer(t->optimizer_shards));
    json_object_set_new(j, "dense_optimizer_bytes_per_rank", json_integer(obytes));
    json_object_set_new(j, "schedule", json_string(config_schedule_name(t->schedule)));
    json_t *lr = json_object();
    json_object_set_new(lr, "warmup", json_integer(t->lr.warmup));
    json_object_set_new(lr, "decay", json_string(config_lr_decay_name(t->lr.decay)));
    json_object_set_new(lr, "final", json_real(t->lr.final));
    json_object_set_new(lr, "every", json_integer(t->lr.every));
    json_object_set_new(lr, "gamma", json_real(t->lr.gamma));
    json_object_set_new(j, "lr_schedule", lr);
    json_object_set_new(j, "interaction", json_string(m->interaction == DENSE_INTERACT_DOT ? "dot" : "cat"));
    emit(r, j);
    if (r->json)
        return;
    printf("ember train: %s (%s data: %d dense + %d sparse features)%s\n", s->name, config_source_name(t->source),
           (int)m->num_dense, (int)m->num_sparse,
           t->source == CFG_SOURCE_SYNTHETIC ? ", labels from a hidden teacher" : "");
    printf("  model: %d tables, %lld rows x %d; dense %d%s | %s | %s1 (%lld parameters), %s lr %g\n",
           (int)s->cc.num_tables, (long long)rows, (int)m->emb_dim, (int)m->num_dense, bottom,
           m->interaction == DENSE_INTERACT_DOT ? "dot" : "cat", top, (long long)dlrm_num_params(s->model),
           t->dense_optim.kind == DENSE_ADAM ? "Adam" : "SGD", (double)t->dense_optim.lr);
    if (s->plan_note[0])
        printf("  placement: %s\n", s->plan_note);
    if (t->schedule != EMBER_SCHEDULE_BLOCKING)
        printf("  schedule: %s (docs/distributed.md)\n", t->schedule == EMBER_SCHEDULE_STALE
               ? "stale: the next batch is looked up before this step's sparse update"
               : "overlap: the next batch's ids travel during the dense model");
    if (t->lr.warmup > 0 || t->lr.decay != LR_DECAY_NONE)
        printf("  learning rates: warm-up over %lld steps, then %s decay%s\n", (long long)t->lr.warmup,
               config_lr_decay_name(t->lr.decay), t->lr.decay == LR_DECAY_LINEAR || t->lr.decay == LR_DECAY_COSINE
                                                     ? " to the final factor" : "");
    if (t->optimizer_shards > 0)
        printf("  dense optimizer state: %.1f KB per rank, sharded over groups of %d ranks\n", (double)obytes / 1e3,
               (int)t->optimizer_shards);
    printf("  batch: %d micro x %d accumulated x %d rank%s = %lld per step; %lld steps; %d thread%s per rank\n",
           (int)t->micro_batch, (int)t->accumulate, (int)world, world > 1 ? "s" : "", (long long)global_batch,
           (long long)t->steps, (int)s->threads, s->threads > 1 ? "s" : "");
    if (s->eval_src) { /* a file may hold fewer: the results say how many were scored */
        char when[64] = "at the end";
        if (t->eval_every > 0)
            snprintf(when, sizeof when, "every %lld steps and at the end", (long long)t->eval_every);
        if (t->eval_samples >= CFG_EVAL_ALL)
            printf("  evaluation: %s, on every sample of %s\n", when, t->eval_file ? t->eval_file : "the eval file");
        else
            printf("  evaluation: %s, on %s%lld held-out samples\n", when,
                   t->source == CFG_SOURCE_SYNTHETIC ? "" : "up to ", (long long)t->eval_samples);
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

void train_report_step(train_report *r, int64_t step, int64_t steps, int64_t samples, double seconds,
                       int logged, double loss)
{
    if (!r->active)
        return;
    double rate = seconds > 0 ? (double)(samples - r->samples0) / seconds : 0;
    double eta = step > r->step0 ? seconds * (double)(steps - step) / (double)(step - r->step0) : -1;
    if (logged) {
        r->last_loss = loss;
        push(&r->loss, &r->nloss, &r->capl, (point){step, {loss, 0, 0, 0}});
        json_t *j = json_object();
        json_object_set_new(j, "event", json_string("train"));
        json_object_set_new(j, "step", json_integer(step));
        json_object_set_new(j, "samples", json_integer(samples));
        json_object_set_new(j, "loss", num(loss));
        json_object_set_new(j, "samples_per_s", num(rate));
        json_object_set_new(j, "seconds", num(seconds));
        emit(r, j);
    }
    if (r->json)
        return;
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

void train_report_eval(train_report *r, int64_t step, const train_eval_result *e)
{
    if (!r->active)
        return;
    push(&r->eval, &r->neval, &r->cape, (point){step, {e->auc, e->teacher_auc, e->logloss, e->teacher_logloss}});
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("eval"));
    json_object_set_new(j, "step", json_integer(step));
    json_object_set_new(j, "samples", json_integer(e->samples));
    json_object_set_new(j, "auc", num(e->auc));
    json_object_set_new(j, "logloss", num(e->logloss));
    json_object_set_new(j, "teacher_auc", num(e->teacher_auc));
    json_object_set_new(j, "teacher_logloss", num(e->teacher_logloss));
    json_object_set_new(j, "seconds", num(e->seconds));
    emit(r, j);
    if (r->json)
        return;
    clear_bar(r);
    if (isfinite(e->teacher_auc))
        printf("eval at step %lld: AUC %.4f (teacher %.4f, gap %.4f), log loss %.4f (teacher %.4f), %lld samples, "
               "%.2f s\n", (long long)step, e->auc, e->teacher_auc, e->teacher_auc - e->auc, e->logloss,
               e->teacher_logloss, (long long)e->samples, e->seconds);
    else
        printf("eval at step %lld: AUC %.4f, log loss %.4f, %lld samples, %.2f s\n", (long long)step, e->auc,
               e->logloss, (long long)e->samples, e->seconds);
    fflush(stdout);
}

void train_report_resume(train_report *r, const char *dir, const train_resume *rs, int64_t steps)
{
    if (!r->active)
        return;
    r->step0 = rs->step;
    r->samples0 = rs->samples;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("resume"));
    json_object_set_new(j, "step", json_integer(rs->step));
    json_object_set_new(j, "samples", json_integer(rs->samples));
    json_object_set_new(j, "checkpoint", rs->resumed ? json_string(rs->path) : json_null());
    if (rs->note[0])
        json_object_set_new(j, "differences", json_string(rs->note));
    emit(r, j);
    if (r->json)
        return;
    if (!rs->resumed)
        printf("resume: no checkpoint under %s: starting from step 0\n", dir);
    else
        printf("resume: from %s (step %lld, %lld samples)\n", rs->path, (long long)rs->step,
               (long long)rs->samples);
    if (rs->note[0])
        printf("resume: note: %s: the tables reshard and the dense model is copied, but the batches differ, so "
               "the result is not bit-identical to an uninterrupted run\n", rs->note);
    if (rs->resumed && rs->step >= steps)
        printf("resume: the checkpoint is at step %lld, --steps is %lld: no steps to take\n", (long long)rs->step,
               (long long)steps);
    fflush(stdout);
}

void train_report_checkpoint(train_report *r, const train_ckpt_saved *c)
{
    if (!r->active)
        return;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("checkpoint"));
    json_object_set_new(j, "step", json_integer(c->step));
    json_object_set_new(j, "path", json_string(c->path));
    json_object_set_new(j, "mb", num((double)c->bytes / 1e6));
    json_object_set_new(j, "seconds", num(c->seconds));
    emit(r, j);
    if (r->json)
        return;
    clear_bar(r);
    printf("checkpoint: step %lld -> %s (%.1f MB, %.2f s)\n", (long long)c->step, c->path, (double)c->bytes / 1e6,
           c->seconds);
    fflush(stdout);
}

/* gnuplot with the given terminal; its exit status (127: not found). */
static int run_gnuplot(const train_report *r, const char *terminal, int quiet)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "gnuplot%s", quiet ? " 2>/dev/null" : "");
    FILE *g = popen(cmd, "w");
    if (!g)
        return -1;
    fprintf(g, "$loss << EOD\n");
    for (int64_t i = 0; i < r->nloss; i++)
        fprintf(g, "%lld %.9g\n", (long long)r->loss[i].step, r->loss[i].v[0]);
    fprintf(g, "EOD\n$eval << EOD\n");
    for (int64_t i = 0; i < r->neval; i++) {
        const point *p = &r->eval[i];
        fprintf(g, "%lld", (long long)p->step);
        for (int k = 0; k < 4; k++) {
            if (isfinite(p->v[k]))
                fprintf(g, " %.9g", p->v[k]);
            else
                fprintf(g, " NaN");
        }
        fprintf(g, "\n");
    }
    fprintf(g, "EOD\n");
    fprintf(g, "set terminal %s size 1000,800 noenhanced\n", terminal);
    fprintf(g, "set output '");
    for (const char *c = r->plot_path; *c; c++) /* a quote in the path: gnuplot's '' */
        fprintf(g, *c == '\'' ? "''" : "%c", *c);
    fprintf(g, "'\nset multiplot layout 2,1 title 'ember train: %s'\n", r->name);
    fprintf(g, "set grid\nset key top right\nset xlabel 'step'\nset ylabel 'log loss'\n");
    int teacher = r->neval > 0 && isfinite(r->eval[r->neval - 1].v[1]);
    fprintf(g, "plot $loss using 1:2 with lines lw 1.5 title 'training loss'");
    if (r->neval > 0)
        fprintf(g, ", $eval using 1:4 with linespoints lw 2 pt 7 title 'eval log loss'");
    if (teacher)
        fprintf(g, ", $eval using 1:5 with lines dt 2 lw 1.5 title 'teacher log loss'");
    fprintf(g, "\nset key bottom right\nset ylabel 'AUC'\n");
    if (r->neval > 0) {
        fprintf(g, "plot $eval using 1:2 with linespoints lw 2 pt 7 title 'eval AUC'");
        if (teacher)
            fprintf(g, ", $eval using 1:3 with lines dt 2 lw 1.5 title 'teacher AUC'");
        fprintf(g, "\n");
    } else {
        fprintf(g, "set label 1 'no evaluation data' at graph 0.5, 0.5 center\nplot NaN notitle\n");
    }
    fprintf(g, "unset multiplot\nset output\n");
    int st = pclose(g);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int plot_with(const train_report *r)
{
    int st = run_gnuplot(r, "pngcairo", 1);
    if (st == 127) {
        fprintf(stderr, "ember train: warning: gnuplot not found: no plot (apt-get install gnuplot-nox)\n");
        return -1;
    }
    if (st != 0)
        st = run_gnuplot(r, "png", 0);
    if (st != 0) {
        fprintf(stderr, "ember train: warning: gnuplot failed (exit %d): no plot at %s\n", st, r->plot_path);
        return -1;
    }
    return 0;
}

/* 0: written; otherwise a warning was printed.  SIGPIPE is ignored
 * meanwhile: a gnuplot that is missing or quits early must not end the run. */
static int plot(const train_report *r)
{
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    int st = plot_with(r);
    signal(SIGPIPE, old);
    return st;
}

void train_report_finish(train_report *r, const train_summary *sm)
{
    if (!r->active)
        return;
    int plotted = r->plot_path[0] && plot(r) == 0;
    float peak = 0;
    for (int32_t i = 0; i < sm->world; i++)
        peak = sm->peak_rss_mb[i] > peak ? sm->peak_rss_mb[i] : peak;
    const train_eval_result *e = &sm->eval;
    double auc = sm->have_eval ? e->auc : NAN;
    if (!r->json) {
        clear_bar(r);
        char rs[32];
        fmt_rate(rs, sizeof rs, sm->samples_per_s);
        if (sm->run_steps == sm->steps)
            printf("done: %lld steps, %lld samples in %.1f s (training %.1f s): %s samples/s\n", (long long)sm->steps,
                   (long long)sm->samples, sm->seconds, sm->train_seconds, rs);
        else /* resumed: the totals are the whole run's, the time and rate this run's */
            printf("done: %lld steps, %lld samples in all; this run %lld steps, %lld samples in %.1f s (training "
                   "%.1f s): %s samples/s\n", (long long)sm->steps, (long long)sm->samples, (long long)sm->run_steps,
                   (long long)sm->run_samples, sm->seconds, sm->train_seconds, rs);
        if (sm->epochs > 0)
            printf("epochs: %.2f passes over the training file\n", sm->epochs);
        if (sm->stopped_at > 0)
            printf("stopped early after step %lld: the %s has not improved since step %lld (%.6g)\n",
                   (long long)sm->stopped_at, sm->best_is_logloss ? "log loss" : "AUC", (long long)sm->best_step,
                   sm->best_metric);
        if (sm->have_eval && isfinite(e->teacher_auc))
            printf("final: AUC %.4f vs the teacher's %.4f (gap %.4f), log loss %.4f vs %.4f, on %lld held-out "
                   "samples\n", e->auc, e->teacher_auc, e->teacher_auc - e->auc, e->logloss, e->teacher_logloss,
                   (long long)e->samples);
        else if (sm->have_eval)
            printf("final: AUC %.4f, log loss %.4f, on %lld held-out samples\n", e->auc, e->logloss,
                   (long long)e->samples);
        else
            printf("final: no evaluation (no data.eval_file)\n");
        if (sm->lines > 0 || sm->bad_lines > 0)
            printf("data: %lld lines read, %lld bad line%s skipped%s%s\n", (long long)sm->lines,
                   (long long)sm->bad_lines, sm->bad_lines == 1 ? "" : "s", sm->first_bad && sm->first_bad[0] ? "; first: " : "",
                   sm->first_bad ? sm->first_bad : "");
        double w = sm->seconds > 0 ? sm->seconds : 1;
        struct { const char *name; double v; } ph[] = {
            {"data", sm->data}, {"embedding forward", sm->emb_forward}, {"exchange", sm->exchange},
            {"dense", sm->dense}, {"embedding backward", sm->emb_backward}, {"dense all-reduce", sm->reduce},
            {"evaluation", sm->evaluation}, {"checkpoints", sm->checkpoint},
        };
        printf("time split%s:", sm->world > 1 ? " (mean over ranks)" : "");
        for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++)
            printf("%s %s %.2f s (%.0f%%)", i ? "," : "", ph[i].name, ph[i].v, 100 * ph[i].v / w);
        if (sm->ssd_stores > 0) {
            const ember_tier_stats *t = &sm->tier;
            int64_t loads = t->demand_loads + t->prefetch_loads, misses = t->demand_loads + t->prefetch_used;
            printf("\nSSD tier: %d store%s, hit rate %.2f%% (%lld loads, %lld read ahead), %.1f MB read, "
                   "%.1f MB written, waited %.2f s, synchronous I/O %.2f s",
                   (int)sm->ssd_stores, sm->ssd_stores == 1 ? "" : "s",
                   t->accesses ? 100.0 * (1.0 - (double)misses / (double)t->accesses) : 0.0, (long long)loads,
                   (long long)t->prefetch_loads, (double)t->bytes_read / 1e6, (double)t->bytes_written / 1e6,
                   t->wait_seconds, t->io_seconds);
        }
        printf("\npeak RSS:");
        for (int32_t i = 0; i < sm->world; i++)
            printf("%s rank %d %.1f MB", i ? "," : "", (int)i, (double)sm->peak_rss_mb[i]);
        printf("\n");
        if (r->metrics_path[0] || plotted)
            printf("metrics: %s%s%s\n", r->metrics_path[0] ? r->metrics_path : "(none)", plotted ? "; plot: " : "",
                   plotted ? r->plot_path : "");
    }
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("summary"));
    json_object_set_new(j, "auc", num(auc));
    json_object_set_new(j, "teacher_auc", num(sm->have_eval ? e->teacher_auc : NAN));
    json_object_set_new(j, "logloss", num(sm->have_eval ? e->logloss : NAN));
    json_object_set_new(j, "teacher_logloss", num(sm->have_eval ? e->teacher_logloss : NAN));
    json_object_set_new(j, "eval_samples", json_integer(sm->have_eval ? e->samples : 0));
    json_object_set_new(j, "samples_per_s", num(sm->samples_per_s));
    json_object_set_new(j, "steps", json_integer(sm->steps));
    json_object_set_new(j, "samples", json_integer(sm->samples));
    json_object_set_new(j, "run_steps", json_integer(sm->run_steps));
    json_object_set_new(j, "run_samples", json_integer(sm->run_samples));
    json_object_set_new(j, "epochs", num(sm->epochs));
    json_object_set_new(j, "stopped_early", sm->stopped_at > 0 ? json_true() : json_false());
    json_object_set_new(j, "best_step", json_integer(sm->best_step));
    json_object_set_new(j, "best_metric", sm->best_step > 0 ? num(sm->best_metric) : json_null());
    json_object_set_new(j, "global_batch", json_integer(sm->global_batch));
    json_object_set_new(j, "world", json_integer(sm->world));
    json_object_set_new(j, "seconds", num(sm->seconds));
    json_t *ts = json_object();
    json_object_set_new(ts, "data", num(sm->data));
    json_object_set_new(ts, "emb_forward", num(sm->emb_forward));
    json_object_set_new(ts, "exchange", num(sm->exchange));
    json_object_set_new(ts, "dense", num(sm->dense));
    json_object_set_new(ts, "emb_backward", num(sm->emb_backward));
    json_object_set_new(ts, "reduce", num(sm->reduce));
    json_object_set_new(ts, "eval", num(sm->evaluation));
    json_object_set_new(ts, "checkpoint", num(sm->checkpoint));
    json_object_set_new(j, "time_s", ts);
    json_t *rss = json_array();
    for (int32_t i = 0; i < sm->world; i++)
        json_array_append_new(rss, json_real(round(10.0 * sm->peak_rss_mb[i]) / 10.0));
    json_object_set_new(j, "peak_rss_mb", json_real(round(10.0 * peak) / 10.0));
    if (sm->ssd_stores > 0) {
        const ember_tier_stats *t = &sm->tier;
        double loads = (double)(t->demand_loads + t->prefetch_used);
        json_object_set_new(j, "ssd_hit_rate", num(t->accesses ? 1.0 - loads / (double)t->accesses : NAN));
        json_object_set_new(j, "ssd_bytes_read", json_integer(t->bytes_read));
        json_object_set_new(j, "ssd_bytes_written", json_integer(t->bytes_written));
        json_object_set_new(j, "ssd_wait_s", num(t->wait_seconds));
    }
    json_object_set_new(j, "peak_rss_mb_per_rank", rss);
    if (sm->lines > 0 || sm->bad_lines > 0) {
        json_object_set_new(j, "lines", json_integer(sm->lines));
        json_object_set_new(j, "bad_lines", json_integer(sm->bad_lines));
    }
    if (r->plot_path[0])
        json_object_set_new(j, "plot", plotted ? json_string(r->plot_path) : json_null());
    /* the last line of stdout in both modes */
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
    if (s && r->metrics) {
        fprintf(r->metrics, "%s\n", s);
        fflush(r->metrics);
    }
    if (s)
        printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(j);
}
