/*
 * loop.c: the steps of a training run (run.h; docs/training.md, "The
 * loop").  train_loop, at the bottom, is the loop itself, one named part
 * per concern:
 *
 *   for step = rs.step + 1 .. steps (until early stopping):
 *       read_batch           this rank's k*b samples, read ahead by a thread
 *                            (prefetch.c), and the step's global count
 *       announce_lookahead   the next batches, for the SSD tier's lookahead
 *       begin_next_batch     overlap/stale schedules: the next batch begun
 *                            during this step, unless the step drains
 *       apply_lr_schedule    the step's learning-rate factor
 *       take_step            model_step (src/model/), agreed over the ranks
 *       refresh_hot_rows     every hot_refresh_every steps
 *       train_limits_step    the limits' figures; every train.limits.every
 *                            steps new limits (limits.c)
 *       train_replan_step    the step's ids kept; every train.replan.every
 *                            steps the tables placed again (replan.c)
 *       count_and_log        the loss, reduced every log_every steps ->
 *                            "train" event
 *       evaluate_and_judge   every eval_every steps and at the end: held-out
 *                            samples (evaluate.c), judged for early stopping
 *                            and keep_best
 *       save_if_due          every checkpoint_every steps and at the end
 *                            (checkpoint.c)
 *
 * A resumed run continues from its checkpoint's step, so N steps then a
 * resume to 2N equal 2N steps straight, bit for bit.  A file source that
 * runs out is rewound (another epoch).  Under a world of R ranks every rank
 * reads its own share and the ranks make the same collective calls in the
 * same order: the step, the loss reduction at logged steps, evaluation,
 * checkpoints.  A failure on one rank (a bad line under bad_lines = "fail")
 * is agreed after the step, so all ranks stop together.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "comm/collect.h"
#include "comm/comm.h"
#include "train/arrange.h"
#include "train/run.h"

#define LOOKAHEAD_MAX 64 /* batches announced ahead at most (ember_prefetch_depth) */

/* What the loop keeps from step to step. */
typedef struct loop_state {
    train_prefetch *pf;          /* the reader of the training data         */
    train_arrange arr;           /* no spare core: step team or reader thread */
    int32_t kb;                  /* samples per step and rank: k * b         */
    int32_t ahead;               /* the SSD tier's lookahead: batches read ahead
                                    (the most its window can be)            */
    int64_t announced;           /* the last step whose batch was announced */
    int hot;                     /* some table has hot rows                  */
    int64_t log_every;
    double t0;                   /* when the loop began                      */
    double window_loss;          /* summed since the last logged step        */
    int64_t logged_samples;      /* samples up to the last logged step       */
    /* batches a step reads through pointers: valid until it returns */
    ctr_batch next[LOOKAHEAD_MAX], begun;
    const ember_batch *announce[LOOKAHEAD_MAX];
} loop_state;

/* One step's batch, and this rank's failure on the way to the step. */
typedef struct step_io {
    ctr_batch batch;
    int64_t global;              /* the step's samples over all ranks        */
    double loss;                 /* this rank's summed loss                  */
    int failed, why;             /* a failure, and its status                */
    char err[1024];
} step_io;

/* ------------------------------------------------- checkpoints, verdicts */

/* Saves a checkpoint of the state after `step` steps under root. */
static int save_to(ember_trainer *s, train_prefetch *pf, const char *root, int32_t keep, int64_t step)
{
    ctr_position pos;
    train_prefetch_position(pf, &pos); /* after the batches the steps consumed */
    train_ckpt_saved c;
    if (train_ckpt_save(s, root, keep, step, s->ls.samples, &pos, &s->ls.best, &c))
        return 1;
    s->ls.ckpt_seconds += c.seconds;
    train_event_checkpoint(s, &c);
    return 0;
}

/* A checkpoint after `step` steps when one is due: every checkpoint_every
 * steps, at the last step, and where the run stops early. */
static int save_if_due(ember_trainer *s, train_prefetch *pf, int64_t step)
{
    const cfg_train *t = &s->t;
    if (!t->checkpoint_dir || !((t->checkpoint_every > 0 && step % t->checkpoint_every == 0) || step == t->steps ||
                                step == s->ls.stopped_at))
        return 0;
    return save_to(s, pf, t->checkpoint_dir, t->checkpoint_keep, step);
}

/* An evaluation at `step` against the best so far: when it is better (by
 * more than min_delta) it becomes the best, and with keep_best its
 * checkpoint goes to checkpoint_dir/best; sets ls.stopped_at when patience
 * ran out.  1 on failure. */
static int judge(ember_trainer *s, train_prefetch *pf, int64_t step, const train_eval_result *e)
{
    const cfg_train *t = &s->t;
    train_best *b = &s->ls.best;
    double m = t->stop_metric_logloss ? e->logloss : e->auc;
    int better = !b->have || (t->stop_metric_logloss ? m < b->metric - t->min_delta : m > b->metric + t->min_delta);
    if (better) {
        b->have = 1;
        b->metric = m;
        b->step = step;
        b->bad = 0;
    } else {
        b->bad++;
    }
    if (better && t->keep_best && t->checkpoint_dir) {
        char root[4200];
        snprintf(root, sizeof root, "%s/best", t->checkpoint_dir);
        if (save_to(s, pf, root, 1, step))
            return 1;
    }
    if (t->patience > 0 && b->bad >= t->patience && step < t->steps)
        s->ls.stopped_at = step;
    return 0;
}

/* The evaluation every eval_every steps and at the last, first of what
 * follows a step (a checkpoint of this step then holds its verdict).  It is
 * judged (early stopping, keep_best) on the periodic schedule alone, so that
 * a run extended with --resume sees the verdicts an uninterrupted run
 * would.  1 on failure. */
static int evaluate_and_judge(ember_trainer *s, const loop_state *L, int64_t step)
{
    const cfg_train *t = &s->t;
    train_loop_stats *ls = &s->ls;
    int periodic = t->eval_every > 0 && step % t->eval_every == 0;
    if (!s->eval_src || !(periodic || step == t->steps))
        return 0;
    train_eval_result e;
    if (train_evaluate(s, &e) || ((periodic || t->eval_every == 0) && judge(s, L->pf, step, &e)))
        return 1;
    ls->eval_seconds += e.seconds;
    train_event_eval(s, step, &e);
    if (ls->stopped_at == step || step == t->steps) { /* the run's last evaluation */
        ls->eval = e;
        ls->have_eval = 1;
    }
    return 0;
}

/* ------------------------------------------------------- a step's parts */

/* The step's batch (an empty one where this rank has none or its read
 * failed: it still takes part in the collectives) and the step's samples
 * over all ranks.  The ranks of a pipeline's replica group hold the same
 * samples, which count once. */
static void read_batch(ember_trainer *s, loop_state *L, step_io *io)
{
    const cfg_train *t = &s->t;
    const int synthetic = t->source == CFG_SOURCE_SYNTHETIC;
    double d0 = ember_now();
    int64_t n = train_prefetch_next(L->pf, &io->batch, io->err, sizeof io->err);
    io->failed = n < 0;
    io->why = EMBER_EIO;
    if (n <= 0) {
        ctr_batch_empty(&s->schema, &io->batch);
        n = 0;
    }
    s->ls.data_seconds += ember_now() - d0;
    const int32_t S = t->pipe_stages > 1 ? t->pipe_stages : 1;
    io->global = synthetic ? (int64_t)L->kb * (s->size / S) : n;
    if (!synthetic && ember_comm_reduce_i64(s->world, &io->global, 1, EMBER_REDUCE_SUM) == EMBER_OK) {
        io->global /= S;
    } else if (!synthetic) {
        if (!io->failed) { /* fatal: no step on a count the ranks may not share */
            snprintf(io->err, sizeof io->err, "%s", s->world->errmsg);
            io->why = EMBER_ECOMM;
        }
        io->failed = 1;
        io->global = 0;
    }
    if (io->global == 0 && !io->failed) {
        snprintf(io->err, sizeof io->err, "%s: no training samples", t->train_file ? t->train_file : "data");
        io->failed = 1;
    }
}

/* The batches of the steps up to this one + the lookahead window, for the
 * SSD tier (ember_prefetch), those not announced before: after the first
 * step the newest only, more when the window grew, none while it shrinks
 * (ember_prefetch_depth, the same on every rank).  Collective: an empty
 * batch where a rank has none. */
static void announce_lookahead(ember_trainer *s, loop_state *L, int64_t step)
{
    int32_t na = 0;
    if (step == s->rs.step + 1)
        L->announced = step; /* the step's own batch is not announced */
    const int32_t window = L->ahead > 0 ? ember_prefetch_depth(s->coll) : 0;
    if (window > 0) {
        s->ls.window_min = s->ls.window_min == 0 || window < s->ls.window_min ? window : s->ls.window_min;
        s->ls.window_max = window > s->ls.window_max ? window : s->ls.window_max;
    }
    for (int64_t b = L->announced + 1; b <= step + window; b++, na++) {
        const int32_t j = (int32_t)(b - step); /* 1 .. window <= L->ahead */
        if (train_prefetch_peek(L->pf, j, &L->next[na]) <= 0)
            ctr_batch_empty(&s->schema, &L->next[na]);
        L->announce[na] = &L->next[na].sparse;
    }
    if (step + window > L->announced)
        L->announced = step + window;
    model_announce(s->model, L->announce, na);
}

/* A step after which the overlap and stale schedules begin nothing ahead,
 * so that the embedding step's work in flight drains: the last step, a
 * checkpoint, an evaluation, a decision of the adaptive limits, a re-plan
 * step, a hot-row refresh step (every hot_refresh_every steps, whether or
 * not a table has hot rows, so that stale runs read alike with and
 * without).  A resumed run starts its run
 * of steps the same way. */
static int drains_after(const ember_trainer *s, int64_t step)
{
    const cfg_train *t = &s->t;
    return step == t->steps || (t->hot_refresh_every > 0 && step % t->hot_refresh_every == 0) ||
           (s->limits && limits_adapt_due(s->limits, step)) || train_replan_due(s, step) ||
           (t->checkpoint_dir && t->checkpoint_every > 0 && step % t->checkpoint_every == 0) ||
           (s->eval_src && t->eval_every > 0 && step % t->eval_every == 0);
}

/* Overlap and stale schedules: the next step's batch, given to the model
 * to begin during this step (reading ahead is data time too). */
static void begin_next_batch(ember_trainer *s, loop_state *L, int64_t step)
{
    if (s->t.schedule == EMBER_SCHEDULE_BLOCKING || drains_after(s, step))
        return;
    double p0 = ember_now();
    if (train_prefetch_peek(L->pf, 1, &L->begun) <= 0) /* collective: an empty one in its place */
        ctr_batch_empty(&s->schema, &L->begun);
    s->ls.data_seconds += ember_now() - p0;
    model_set_next(s->model, &L->begun.sparse);
}

/* The learning rates' factor of this step: a function of the step, the
 * same on every rank. */
static void apply_lr_schedule(ember_trainer *s, int64_t step)
{
    const lr_schedule *lr = &s->t.lr;
    if (lr->warmup > 0 || lr->decay != LR_DECAY_NONE)
        model_set_lr_scale(s->model, lr_schedule_scale(lr, step, s->t.steps));
}

/* The model's step, then every rank's failure so far agreed: 1 on every
 * rank when any failed.  A rank whose read failed takes part with no
 * samples.  A loss that is not finite fails the step too: the model has
 * diverged, and training on would only write it over the checkpoints. */
static int take_step(ember_trainer *s, int64_t step, step_io *io)
{
    io->loss = 0;
    ember_stats before, after;
    ember_collection_stats(s->coll, &before);
    if (io->global > 0) {
        char serr[512] = "";
        int st = model_step(s->model, &io->batch, io->global, &io->loss, serr, sizeof serr);
        if (st == EMBER_OK && !isfinite(io->loss)) {
            snprintf(serr, sizeof serr, "the training loss is %s: the model diverged (a learning rate too high for "
                     "its optimizer, most likely); stopped before its checkpoint", isnan(io->loss) ? "nan" : "infinite");
            st = EMBER_ENUMERIC;
        }
        if (st != EMBER_OK && !io->failed) {
            snprintf(io->err, sizeof io->err, "%s", serr);
            io->failed = 1;
            io->why = st;
        }
    }
    ember_collection_stats(s->coll, &after);
    s->ls.limit_dropped += after.dropped_limit - before.dropped_limit;
    char msg[1100];
    snprintf(msg, sizeof msg, "step %lld: %s", (long long)step, io->err);
    return run_agree(s, io->failed, io->why, msg);
}

/* Tables with hot rows: refreshed from the counts every hot_refresh_every
 * steps but the last.  Collective; its failure is every rank's. */
static int refresh_hot_rows(ember_trainer *s, const loop_state *L, int64_t step)
{
    const cfg_train *t = &s->t;
    if (!L->hot || !(t->hot_refresh_every > 0 && step % t->hot_refresh_every == 0) || step >= t->steps)
        return 0;
    int st = ember_refresh_hot_rows(s->coll);
    if (st == EMBER_OK)
        return 0;
    run_fail_rank(s, 0, st == EMBER_EINVAL ? EMBER_EFORMAT : st, "step %lld: %s", (long long)step,
                  ember_errmsg(s->coll));
    return 1;
}

/* Training time so far: no evaluation, no checkpoints. */
static double training_seconds(const ember_trainer *s, const loop_state *L)
{
    return ember_now() - L->t0 - s->ls.eval_seconds - s->ls.ckpt_seconds;
}

/* The step counted; every log_every steps and at the last, the window's
 * mean loss over all ranks goes out as a "train" event, else a
 * "progress" event (train_event_step decides how often). */
static void count_and_log(ember_trainer *s, loop_state *L, int64_t step, const step_io *io)
{
    train_loop_stats *ls = &s->ls;
    ls->steps = step;
    ls->samples += io->global;
    ls->run_samples += io->global;
    ls->run_steps++;
    ls->ids += io->batch.sparse.num_ids;
    L->window_loss += io->loss;
    if (step % L->log_every != 0 && step != s->t.steps) {
        train_event_step(s, step, ls->samples, training_seconds(s, L), 0, NAN);
        return;
    }
    double v[1] = {L->window_loss};
    int64_t window_samples = ls->samples - L->logged_samples;
    L->logged_samples = ls->samples;
    ember_comm_reduce_double(s->world, v, 1, EMBER_REDUCE_SUM);
    L->window_loss = 0;
    train_event_step(s, step, ls->samples, training_seconds(s, L), 1,
                     window_samples > 0 ? v[0] / (double)window_samples : NAN);
}

/* --------------------------------------------------- before and after */

/* The loop's state, the statistics from the resumed step on (a resumed run
 * that had stopped early stays stopped), and the reader thread.  1 when
 * the thread could not start (agreed). */
static int loop_start(ember_trainer *s, loop_state *L)
{
    const cfg_train *t = &s->t;
    const train_resume *rs = &s->rs;
    train_loop_stats *ls = &s->ls;
    memset(L, 0, sizeof *L);
    L->kb = t->micro_batch * t->accumulate;
    L->log_every = t->log_every > 0 ? t->log_every : (t->steps / 200 > 1 ? t->steps / 200 : 1);
    L->t0 = ember_now();
    memset(ls, 0, sizeof *ls);
    ls->steps = rs->step;
    ls->best = rs->best; /* a resumed run's verdicts so far */
    if (rs->resumed && t->patience > 0 && ls->best.have && ls->best.bad >= t->patience && rs->step < t->steps)
        ls->stopped_at = rs->step; /* it had stopped there: it stays stopped */
    ls->samples = L->logged_samples = rs->samples;
    /* a reader thread needs a core of its own (src/train/prefetch.c); its
     * OpenMP regions get this rank's share of the spare cores */
    const int32_t procs = omp_get_num_procs(), spare = (procs - s->local_ranks * s->threads) / s->local_ranks;
    int threaded = procs > s->local_ranks * s->threads;
    L->ahead = ember_prefetch_depth_max(s->coll);
    for (int32_t i = 0; i < s->cc.num_tables; i++)
        L->hot |= s->cc.tables[i].hot_rows > 0;
    /* a pipelined schedule looks one batch ahead too */
    const int32_t peek = L->ahead > 0 ? L->ahead : t->schedule != EMBER_SCHEDULE_BLOCKING;
    int failed = train_prefetch_start(s->train_src, L->kb, spare < 1 ? 1 : spare < s->threads ? spare : s->threads,
                                      threaded, peek, &L->pf) != 0;
    if (run_agree(s, failed, EMBER_ENOMEM, "cannot start the reader thread")) {
        train_prefetch_stop(L->pf);
        return 1;
    }
    /* no spare core: the step's team reads, or a thread of it becomes the
     * reader, whichever trials find faster (src/train/arrange.c); results
     * do not change with one BLAS thread */
    const int32_t blas = s->blas_threads > 0 ? s->blas_threads : s->threads;
    const int may = !threaded && peek == 0 && t->pipe_stages <= 1 && blas == 1 && t->reader != CFG_READER_TEAM;
    train_arrange_init(&L->arr, s->model, L->pf, s->threads, may ? (t->reader == CFG_READER_THREAD ? 2 : 1) : 0);
    return 0;
}

/* After the steps: a run in which no step evaluated (a resumed run already
 * done or stopped) is scored now; the source is the trainer's again (its
 * statistics).  The loop's status: 1 when it failed. */
static int loop_finish(ember_trainer *s, loop_state *L, int failed)
{
    train_loop_stats *ls = &s->ls;
    train_arrange_end(&L->arr);
    ls->reader_steps = L->arr.reader_steps;
    ls->reader_trials = L->arr.trials;
    if (!failed && s->eval_src && !ls->have_eval) {
        failed = train_evaluate(s, &ls->eval);
        if (!failed) {
            ls->eval_seconds += ls->eval.seconds;
            ls->have_eval = 1;
            train_event_eval(s, ls->steps, &ls->eval);
        }
    }
    train_prefetch_stop(L->pf);
    if (!failed)
        ls->seconds = ember_now() - L->t0;
    return failed;
}

int train_loop(ember_trainer *s)
{
    loop_state L;
    if (loop_start(s, &L))
        return 1;
    int failed = 0;
    for (int64_t step = s->rs.step + 1; step <= s->t.steps && !s->ls.stopped_at && !failed; step++) {
        step_io io;
        io.err[0] = '\0';
        train_arrange_before(&L.arr, step - s->rs.step - 1);
        double t0 = ember_now();
        read_batch(s, &L, &io);
        announce_lookahead(s, &L, step);
        begin_next_batch(s, &L, step);
        apply_lr_schedule(s, step);
        if (take_step(s, step, &io) || refresh_hot_rows(s, &L, step) || train_limits_step(s, step) ||
            train_replan_step(s, step, &io.batch.sparse)) {
            failed = 1;
            break;
        }
        train_arrange_after(&L.arr, step - s->rs.step - 1, ember_now() - t0);
        count_and_log(s, &L, step, &io);
        failed = evaluate_and_judge(s, &L, step) || save_if_due(s, L.pf, step);
    }
    return loop_finish(s, &L, failed);
}
