/*
 * loop.c: the steps of a training run (run.h; docs/training.md, "The
 * loop"):
 *
 *   for step = rs.step + 1 .. steps:
 *       this rank's k*b samples, read ahead by a thread  (prefetch.c)
 *       model_step: embeddings, dense model, replication (trainer.c)
 *       every log_every steps: the loss, reduced over ranks -> "train" event
 *       every eval_every steps: evaluation on held-out samples (evaluate.c),
 *         judged for early stopping and keep_best
 *       every checkpoint_every steps and at the end: a checkpoint (checkpoint.c)
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
#include "train/run.h"

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

/* A checkpoint after `step` steps when one is due. */
static int maybe_save(ember_trainer *s, train_prefetch *pf, int64_t step)
{
    const cfg_train *t = &s->t;
    if (!t->checkpoint_dir || !((t->checkpoint_every > 0 && step % t->checkpoint_every == 0) || step == t->steps ||
                                step == s->ls.stopped_at))
        return 0;
    return save_to(s, pf, t->checkpoint_dir, t->checkpoint_keep, step);
}

/* An evaluation at `step` against the best so far: 1 when it is better
 * (by more than min_delta), and then with keep_best its checkpoint in
 * checkpoint_dir/best; sets ls->stopped_at when patience ran out.  0 or
 * 1 as *better; the return value is 1 on failure. */
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

int train_loop(ember_trainer *s)
{
    const cfg_train *t = &s->t;
    const train_resume *rs = &s->rs;
    train_loop_stats *ls = &s->ls;
    const int32_t kb = t->micro_batch * t->accumulate, W = s->size;
    const int synthetic = t->source == CFG_SOURCE_SYNTHETIC;
    const int64_t steps = t->steps, log_every = t->log_every > 0 ? t->log_every : (steps / 200 > 1 ? steps / 200 : 1);
    char err[1024] = "";
    double t0 = ember_now(), window_loss = 0;
    int64_t logged_samples = 0; /* samples up to the last logged step */
    memset(ls, 0, sizeof *ls);
    ls->steps = rs->step;
    ls->best = rs->best; /* a resumed run's verdicts so far */
    if (rs->resumed && t->patience > 0 && ls->best.have && ls->best.bad >= t->patience && rs->step < steps)
        ls->stopped_at = rs->step; /* it had stopped there: it stays stopped */
    ls->samples = logged_samples = rs->samples;
    train_prefetch *pf = NULL;
    /* a reader thread needs a core of its own: see src/train/prefetch.c */
    int threaded = omp_get_num_procs() > s->local_ranks * s->threads;
    /* the SSD tier's lookahead: the batches of the next K steps are read
     * ahead and announced after each embedding forward */
    const int32_t ahead = ember_prefetch_depth(s->coll);
    /* tables with hot rows: refreshed from the counts every hot_refresh_every steps */
    int hot = 0;
    for (int32_t i = 0; i < s->cc.num_tables; i++)
        hot |= s->cc.tables[i].hot_rows > 0;
    /* a pipelined schedule looks one batch ahead too */
    const int32_t peek = ahead > 0 ? ahead : t->schedule != EMBER_SCHEDULE_BLOCKING;
    int failed = train_prefetch_start(s->train_src, kb, s->threads, threaded, peek, &pf) != 0;
    if (run_agree(s, failed, EMBER_ENOMEM, "cannot start the reader thread")) {
        train_prefetch_stop(pf);
        return 1;
    }
    int status = 0;
    for (int64_t step = rs->step + 1; step <= steps && !ls->stopped_at; step++) {
        double d0 = ember_now();
        ctr_batch b;
        int64_t n = train_prefetch_next(pf, &b, err, sizeof err);
        failed = n < 0;
        int why = EMBER_EIO; /* the status of this rank's failure */
        if (n <= 0) { /* keep in step with the other ranks: an empty batch */
            ctr_batch_empty(&s->schema, &b);
            n = 0;
        }
        ls->data_seconds += ember_now() - d0;
        /* pipeline stages: the S ranks of a replica group hold the same samples */
        const int32_t S = t->pipe_stages > 1 ? t->pipe_stages : 1;
        int64_t global = synthetic ? (int64_t)kb * (W / S) : n;
        if (!synthetic && ember_comm_reduce_i64(s->world, &global, 1, EMBER_REDUCE_SUM) == EMBER_OK)
            global /= S;
        else if (!synthetic) {
            if (!failed) { /* fatal: no step on a count the ranks may not share */
                snprintf(err, sizeof err, "%s", s->world->errmsg);
                why = EMBER_ECOMM;
            }
            failed = 1;
            global = 0;
        }
        if (global == 0 && !failed) {
            snprintf(err, sizeof err, "%s: no training samples", t->train_file ? t->train_file : "data");
            failed = 1;
        }
        double loss = 0;
        ctr_batch next[64];
        const ember_batch *announce[64];
        int32_t na = 0;
        for (int32_t j = step == rs->step + 1 ? 1 : ahead; ahead > 0 && j <= ahead; j++, na++) {
            if (train_prefetch_peek(pf, j, &next[na]) <= 0) /* collective: an empty one in its place */
                ctr_batch_empty(&s->schema, &next[na]);
            announce[na] = &next[na].sparse;
        }
        model_announce(s->model, announce, na);
        /* the next batch is begun ahead within a run of steps: not across
         * a checkpoint, an evaluation or a hot-row refresh step (a resumed
         * run starts such a run the same way), nor after the last step */
        ctr_batch ahead_b;
        /* every hot_refresh_every steps is a boundary whether or not a
         * table has hot rows: stale runs then read alike with and without */
        int refresh_step = t->hot_refresh_every > 0 && step % t->hot_refresh_every == 0;
        int refresh = hot && refresh_step;
        int boundary = step == steps || refresh_step ||
                       (t->checkpoint_dir && t->checkpoint_every > 0 && step % t->checkpoint_every == 0) ||
                       (s->eval_src && t->eval_every > 0 && step % t->eval_every == 0);
        if (t->schedule != EMBER_SCHEDULE_BLOCKING && !boundary) {
            double p0 = ember_now(); /* reading ahead is data time too */
            if (train_prefetch_peek(pf, 1, &ahead_b) <= 0) /* collective: an empty one in its place */
                ctr_batch_empty(&s->schema, &ahead_b);
            ls->data_seconds += ember_now() - p0;
            model_set_next(s->model, &ahead_b.sparse);
        }
        if (t->lr.warmup > 0 || t->lr.decay != LR_DECAY_NONE) /* the same on every rank: a function of the step */
            model_set_lr_scale(s->model, lr_schedule_scale(&t->lr, step, steps));
        if (global > 0) { /* collective: a rank whose read failed takes part with no samples */
            char serr[512] = "";
            int st = model_step(s->model, &b, global, &loss, serr, sizeof serr);
            if (st != EMBER_OK && !failed) {
                snprintf(err, sizeof err, "%s", serr);
                failed = 1;
                why = st;
            }
        }
        char msg[1100];
        snprintf(msg, sizeof msg, "step %lld: %s", (long long)step, err);
        if (run_agree(s, failed, why, msg)) {
            status = 1;
            break;
        }
        int rst = refresh && step < steps ? ember_refresh_hot_rows(s->coll) : EMBER_OK; /* collective */
        if (rst != EMBER_OK) { /* agreed: every rank has the same error */
            run_fail_rank(s, 0, rst == EMBER_EINVAL ? EMBER_EFORMAT : rst, "step %lld: %s", (long long)step,
                          ember_errmsg(s->coll));
            status = 1;
            break;
        }
        ls->steps = step;
        ls->samples += global;
        ls->run_samples += global;
        ls->run_steps++;
        window_loss += loss;
        if (step % log_every == 0 || step == steps) {
            double v[1] = {window_loss};
            int64_t window_samples = ls->samples - logged_samples;
            logged_samples = ls->samples;
            ember_comm_reduce_double(s->world, v, 1, EMBER_REDUCE_SUM);
            window_loss = 0;
            train_event_step(s, step, ls->samples, ember_now() - t0 - ls->eval_seconds - ls->ckpt_seconds, 1,
                             window_samples > 0 ? v[0] / (double)window_samples : NAN);
        } else {
            train_event_step(s, step, ls->samples, ember_now() - t0 - ls->eval_seconds - ls->ckpt_seconds, 0, NAN);
        }
        /* the evaluation first (every eval_every steps, and the last): a
         * checkpoint of this step then holds its verdict */
        int periodic = t->eval_every > 0 && step % t->eval_every == 0;
        if (s->eval_src && (periodic || step == steps)) {
            /* judged (early stopping, keep_best) on the periodic schedule alone, so that a
             * run extended with --resume sees the verdicts an uninterrupted run would */
            train_eval_result e;
            if (train_evaluate(s, &e) || ((periodic || t->eval_every == 0) && judge(s, pf, step, &e))) {
                status = 1;
                break;
            }
            ls->eval_seconds += e.seconds;
            train_event_eval(s, step, &e);
            if (ls->stopped_at == step || step == steps) { /* the run's last evaluation */
                ls->eval = e;
                ls->have_eval = 1;
            }
        }
        if (maybe_save(s, pf, step)) {
            status = 1;
            break;
        }
        if (ls->stopped_at == step)
            break;
    }
    if (status) {
        train_prefetch_stop(pf);
        return status;
    }
    if (s->eval_src && !ls->have_eval) { /* no step ran (a resumed run already done or stopped): score it */
        if (train_evaluate(s, &ls->eval)) {
            train_prefetch_stop(pf);
            return 1;
        }
        ls->eval_seconds += ls->eval.seconds;
        ls->have_eval = 1;
        train_event_eval(s, ls->steps, &ls->eval);
    }
    train_prefetch_stop(pf); /* the source is ours again (its statistics) */
    ls->seconds = ember_now() - t0;
    return 0;
}
