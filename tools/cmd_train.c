/*
 * cmd_train.c: `ember train`, DLRM-style CTR training end to end
 * (docs/training.md, "The loop"): options, then the loop
 *
 *   for step = 1 .. steps:
 *       this rank's k*b samples, read ahead by a thread  (src/train/prefetch.c)
 *       trainer_step: embeddings, dense model, replication (src/train)
 *       every log_every steps: the loss, reduced over ranks -> progress, JSON
 *       every eval_every steps: evaluation on held-out samples (train_eval.c)
 *       every checkpoint_every steps and at the end: a checkpoint (train_ckpt.c)
 *   final evaluation, summary, plot                      (train_report.c)
 *
 * --resume restores the newest checkpoint before the loop and the loop
 * continues from its step, so N steps then --resume to 2N equal 2N steps
 * straight, bit for bit (docs/training.md, "Checkpoints and resume").
 *
 * Without --config it trains the built-in synthetic task (a hidden teacher
 * labels the samples, so its AUC on the same samples is the best
 * achievable) with the built-in student: cfg_train_default(), tools/
 * config_file.c.  A file source that runs out is rewound (another epoch).
 *
 * Under mpirun every rank reads its own share of the data and the ranks
 * make the same collective calls in the same order: the step, the loss
 * reduction at logged steps, evaluation.  A failure on one rank (a bad TSV
 * line under bad_lines = "fail") is agreed after the step, so all ranks
 * stop together and the failing rank prints its message.
 */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "commands.h"
#include "train_tool.h"

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: ember train [options]\n"
            "  trains a DLRM-style CTR model (docs/training.md); without --config the built-in\n"
            "  synthetic task, whose labels come from a hidden teacher\n\n"
            "  --config FILE        settings: tables, data, model, train (docs/config.md)\n"
            "  --train-file FILE    train on FILE instead of the built-in task or the config's\n"
            "                       data.train_file: an ember binary file, else text by the config's\n"
            "                       data.schema (docs/data.md), else Criteo TSV, by its first bytes\n"
            "  --eval-file FILE     evaluate on FILE (all of it unless --eval-samples says fewer)\n"
            "  --steps N            optimizer steps (default 3000)\n"
            "  --seed S             seed of the tables, the dense model and the synthetic data\n"
            "  --threads T          threads per rank (default 1, or the config's threads)\n"
            "  --blas-threads T     OpenBLAS threads per rank for the dense GEMMs (default 1:\n"
            "                       results then do not depend on --threads)\n"
            "  --micro-batch B      samples per micro-batch per rank (default 2048)\n"
            "  --accumulate K       micro-batches per step (default 1)\n"
            "  --optimizer-shards G the dense optimizer's state sharded over groups of G ranks\n"
            "                       (G divides the world; same results; default 0: every rank\n"
            "                       holds all of it)\n"
            "  --schedule S         blocking (default), overlap (the next batch's ids travel\n"
            "                       while the dense model runs; same results) or stale (the next\n"
            "                       batch is looked up before this step's sparse update: one\n"
            "                       step stale; docs/distributed.md)\n"
            "  --lr-warmup N        learning rates rise linearly over the first N steps (default 0)\n"
            "  --lr-decay D         then none (default), linear or cosine down to\n"
            "                       train.lr_schedule.final (default 0) at the last step\n"
            "  --eval-every N       evaluate every N steps (0: only at the end; default 500)\n"
            "  --eval-samples N     held-out samples per evaluation (default: 65536 of the built-in\n"
            "                       task; all of an eval file)\n"
            "  --metrics FILE       JSON lines (default ember-train-metrics.jsonl; none: off)\n"
            "  --plot FILE          PNG of loss and AUC over steps (default ember-train.png; none: off)\n"
            "  --json               stdout: JSON lines only (no progress)\n"
            "  --checkpoint-dir DIR save checkpoints under DIR (ember inspect reads them)\n"
            "  --checkpoint-every N every N steps (0: only at the end; default 0), and at the end\n"
            "  --keep K             keep the newest K checkpoints (default 0: all)\n"
            "  --resume             continue from the newest checkpoint under --checkpoint-dir\n"
            "                       (none: start from scratch) up to --steps in all\n\n"
            "The last line of stdout is one JSON object: {\"event\":\"summary\",\"auc\":...,\n"
            "\"teacher_auc\":...,\"logloss\":...,\"samples_per_s\":...,\"steps\":...,\"peak_rss_mb\":...}.\n"
            "Under mpirun -np R each rank reads its own share; the global batch is R x K x B.\n");
}

typedef struct train_opts {
    const char *config, *metrics, *plot, *checkpoint_dir, *schedule, *train_file, *eval_file, *lr_decay;
    int64_t steps, seed, threads, blas_threads, micro_batch, accumulate, eval_every, eval_samples; /* -1: not given */
    int64_t optimizer_shards, lr_warmup;                                               /* -1: not given */
    int64_t checkpoint_every, keep;                                                   /* -1: not given */
    int json, resume;
} train_opts;

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    long long v = strtoll(s, &end, 0);
    if (*end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* 0, or the exit status (2: usage; 0 with *done for --help). */
static int parse_args(const tool_ctx *ctx, int argc, char **argv, train_opts *o, int *done)
{
    static const struct { const char *name; int64_t lo, hi; size_t off; } INTS[] = {
        {"--steps", 0, INT64_C(1) << 40, offsetof(train_opts, steps)},
        {"--seed", 0, INT64_MAX, offsetof(train_opts, seed)},
        {"--threads", 1, 4096, offsetof(train_opts, threads)},
        {"--blas-threads", 1, 4096, offsetof(train_opts, blas_threads)},
        {"--micro-batch", 1, 1 << 24, offsetof(train_opts, micro_batch)},
        {"--accumulate", 1, 1 << 16, offsetof(train_opts, accumulate)},
        {"--optimizer-shards", 0, 1 << 20, offsetof(train_opts, optimizer_shards)},
        {"--lr-warmup", 0, INT64_C(1) << 40, offsetof(train_opts, lr_warmup)},
        {"--eval-every", 0, INT64_C(1) << 40, offsetof(train_opts, eval_every)},
        {"--eval-samples", 0, 1 << 30, offsetof(train_opts, eval_samples)},
        {"--checkpoint-every", 0, INT64_C(1) << 40, offsetof(train_opts, checkpoint_every)},
        {"--keep", 0, 1 << 20, offsetof(train_opts, keep)},
    };
    memset(o, 0, sizeof *o);
    for (size_t k = 0; k < sizeof INTS / sizeof INTS[0]; k++)
        *(int64_t *)((char *)o + INTS[k].off) = -1;
    *done = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq = strchr(arg, '=');
        char name[64];
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            train_usage(stdout);
            *done = 1;
            return 0;
        }
        if (!strcmp(arg, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(arg, "--resume")) {
            o->resume = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) || nlen >= sizeof name) {
            fprintf(ctx->err, "ember train: unexpected argument '%s' (ember train --help)\n", arg);
            return 2;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
        int used = 0, bad = 0;
        if (!strcmp(name, "--lr-decay")) {
            used = 1;
            bad = !val || (strcmp(val, "none") && strcmp(val, "linear") && strcmp(val, "cosine"));
            o->lr_decay = val;
        } else if (!strcmp(name, "--train-file") || !strcmp(name, "--eval-file")) {
            used = 1;
            bad = !val || !*val;
            *(name[2] == 't' ? &o->train_file : &o->eval_file) = val;
        } else if (!strcmp(name, "--schedule")) {
            used = 1;
            bad = !val || config_schedule_parse(val) < 0;
            o->schedule = val;
        } else if (!strcmp(name, "--config") || !strcmp(name, "--metrics") || !strcmp(name, "--plot") ||
            !strcmp(name, "--checkpoint-dir")) {
            used = 1;
            bad = !val || !*val;
            const char **dst = !strcmp(name, "--config")  ? &o->config
                               : name[2] == 'c'           ? &o->checkpoint_dir
                               : name[2] == 'm'           ? &o->metrics
                                                          : &o->plot;
            *dst = val;
        }
        for (size_t k = 0; !used && k < sizeof INTS / sizeof INTS[0]; k++)
            if (!strcmp(name, INTS[k].name)) {
                used = 1;
                bad = parse_i64(val, INTS[k].lo, INTS[k].hi, (int64_t *)((char *)o + INTS[k].off)) != 0;
            }
        if (!used) {
            fprintf(ctx->err, "ember train: unknown option '%s' (ember train --help)\n", name);
            return 2;
        }
        if (bad) {
            fprintf(ctx->err, "ember train: bad value for %s: '%s'\n", name, val ? val : "(missing)");
            return 2;
        }
        if (!eq)
            i++;
    }
    return 0;
}

/* Settings: defaults or the file, then the command line. */
static int settings(const tool_ctx *ctx, const train_opts *o, train_setup *s)
{
    char err[1024];
    if (o->config) {
        int failed = config_file_load(o->config, &s->cf, err, sizeof err) != 0;
        int32_t first = -1;
        if (tool_any_failed(ctx, failed, &first)) {
            if (first == ctx->rank)
                tool_local_error(ctx, "train", "%s", err);
            return 1;
        }
        if (s->cf->train.error[0]) {
            fprintf(ctx->err, "ember train: %s\n", s->cf->train.error);
            return 1;
        }
        s->t = s->cf->train;
        s->name = s->cf->name;
    } else {
        cfg_train_default(&s->t);
        s->name = "synthetic";
    }
    cfg_train *t = &s->t;
    if (o->steps >= 0) { /* the command line wins over the config's epochs too */
        t->steps = o->steps;
        t->epochs = 0;
    }
    if (o->micro_batch >= 0)
        t->micro_batch = (int32_t)o->micro_batch;
    if (o->accumulate >= 0)
        t->accumulate = (int32_t)o->accumulate;
    if (o->optimizer_shards >= 0)
        t->optimizer_shards = (int32_t)o->optimizer_shards;
    if (o->schedule)
        t->schedule = (ember_schedule)config_schedule_parse(o->schedule);
    if (o->lr_warmup >= 0)
        t->lr.warmup = o->lr_warmup;
    if (o->lr_decay)
        t->lr.decay = !strcmp(o->lr_decay, "linear") ? LR_DECAY_LINEAR
                      : !strcmp(o->lr_decay, "cosine") ? LR_DECAY_COSINE : LR_DECAY_NONE;
    char lerr[200];
    if (lr_schedule_check(&t->lr, lerr, sizeof lerr)) {
        fprintf(ctx->err, "ember train: %s\n", lerr);
        return 2;
    }
    if (o->train_file || o->eval_file) { /* files for the config's data, or the built-in Criteo layout's */
        if (o->train_file)
            t->train_file = o->train_file;
        if (o->eval_file)
            t->eval_file = o->eval_file;
        if (!t->train_file) {
            fprintf(ctx->err, "ember train: --eval-file needs training data too (--train-file, or a config's "
                              "data.train_file)\n");
            return 2;
        }
        if (o->train_file || t->source == CFG_SOURCE_SYNTHETIC) /* by the file's first bytes */
            t->source = ctr_file_is_binary(t->train_file) ? CFG_SOURCE_BINARY
                        : t->schema.num_columns          ? CFG_SOURCE_TEXT
                                                         : CFG_SOURCE_TSV;
    }
    if (t->source != CFG_SOURCE_SYNTHETIC && !t->train_file) {
        fprintf(ctx->err, "ember train: %s: data.train_file is missing (data.source = \"text\" reads a file): set it, "
                          "or give --train-file\n", o->config ? o->config : "the config");
        return 2;
    }
    if (o->eval_every >= 0)
        t->eval_every = o->eval_every;
    if (o->eval_samples >= 0)
        t->eval_samples = o->eval_samples;
    else if (t->source != CFG_SOURCE_SYNTHETIC && !t->eval_samples_set)
        t->eval_samples = CFG_EVAL_ALL; /* a file: all of it, unless told otherwise */
    if (o->metrics)
        t->metrics = strcmp(o->metrics, "none") ? o->metrics : "";
    if (o->plot)
        t->plot = strcmp(o->plot, "none") ? o->plot : "";
    if (o->checkpoint_dir)
        t->checkpoint_dir = o->checkpoint_dir;
    if (t->checkpoint_dir && !t->checkpoint_dir[0])
        t->checkpoint_dir = NULL;
    if (t->keep_best && !t->checkpoint_dir) {
        fprintf(ctx->err, "ember train: train.keep_best needs a checkpoint folder (--checkpoint-dir or "
                          "train.checkpoint_dir)\n");
        return 2;
    }
    if (o->checkpoint_every >= 0)
        t->checkpoint_every = o->checkpoint_every;
    if (o->keep >= 0)
        t->checkpoint_keep = (int32_t)o->keep;
    s->resume = o->resume;
    if (!t->checkpoint_dir && (o->resume || o->checkpoint_every >= 0 || o->keep >= 0)) {
        fprintf(ctx->err, "ember train: %s needs --checkpoint-dir (or train.checkpoint_dir in the config)\n",
                o->resume ? "--resume" : o->keep >= 0 ? "--keep" : "--checkpoint-every");
        return 2;
    }
    if (o->seed >= 0) {
        t->model.seed = (uint64_t)o->seed;
        t->synth.seed = (uint64_t)o->seed;
        if (s->cf)
            s->cf->coll.seed = (uint64_t)o->seed;
    }
    if ((int64_t)t->micro_batch * t->accumulate > (1 << 24)) {
        fprintf(ctx->err, "ember train: micro-batch %d x accumulate %d is too many samples per rank and step\n",
                (int)t->micro_batch, (int)t->accumulate);
        return 2;
    }
    /* one thread unless asked: see cfg_train_default */
    s->threads = (int32_t)o->threads;
    if (s->threads < 1 && s->cf && s->cf->coll.threads > 0)
        s->threads = s->cf->coll.threads;
    if (s->threads < 1)
        s->threads = 1;
    s->blas_threads = o->blas_threads > 0 ? (int32_t)o->blas_threads : 1;
    omp_set_num_threads(s->threads); /* the synthetic data's loops, too */
    return 0;
}

typedef struct loop_stats {
    int64_t steps, samples;      /* in all, a resumed run's earlier ones too */
    int64_t run_samples, run_steps; /* this run's                            */
    double seconds, eval_seconds, data_seconds, ckpt_seconds;
    int have_eval;
    train_eval_result eval;
    train_best best;             /* early stopping, keep_best               */
    int64_t stopped_at;          /* > 0: stopped early after this step      */
} loop_stats;

/* train.epochs: the steps of that many passes over the training file, from
 * the largest share (a rank whose share runs out first rewinds, as always);
 * also the file's samples, for the summary's epoch count. */
static int epochs_to_steps(const tool_ctx *ctx, train_setup *s)
{
    cfg_train *t = &s->t;
    ctr_position pos;
    ctr_source_tell(s->train_src, &pos);
    int64_t share[2] = {pos.end - pos.begin, pos.end - pos.begin}; /* max, sum */
    tool_reduce_i64(ctx, &share[0], 1, TOOL_MAX);
    tool_reduce_i64(ctx, &share[1], 1, TOOL_SUM);
    s->file_samples = t->source == CFG_SOURCE_SYNTHETIC ? 0 : share[1];
    if (t->epochs <= 0)
        return 0;
    if (t->source == CFG_SOURCE_SYNTHETIC || share[0] == 0) {
        if (ctx->rank == 0)
            tool_local_error(ctx, "train", "train.epochs needs a training file with samples (the built-in task "
                             "is an endless stream: give train.steps)");
        return 1;
    }
    int64_t kb = (int64_t)t->micro_batch * t->accumulate;
    t->steps = t->epochs * ((share[0] + kb - 1) / kb);
    return 0;
}

/* Saves a checkpoint of the state after `step` steps under root. */
static int save_to(const tool_ctx *ctx, train_setup *s, train_report *rep, train_prefetch *pf, const char *root,
                   int32_t keep, int64_t step, loop_stats *ls)
{
    ctr_position pos;
    train_prefetch_position(pf, &pos); /* after the batches the steps consumed */
    train_ckpt_saved c;
    if (train_ckpt_save(ctx, s, root, keep, step, ls->samples, &pos, &ls->best, &c))
        return 1;
    ls->ckpt_seconds += c.seconds;
    train_report_checkpoint(rep, &c);
    return 0;
}

/* A checkpoint after `step` steps when one is due. */
static int maybe_save(const tool_ctx *ctx, train_setup *s, train_report *rep, train_prefetch *pf, int64_t step,
                      loop_stats *ls)
{
    const cfg_train *t = &s->t;
    if (!t->checkpoint_dir || !((t->checkpoint_every > 0 && step % t->checkpoint_every == 0) || step == t->steps ||
                                step == ls->stopped_at))
        return 0;
    return save_to(ctx, s, rep, pf, t->checkpoint_dir, t->checkpoint_keep, step, ls);
}

/* An evaluation at `step` against the best so far: 1 when it is better
 * (by more than min_delta), and then with keep_best its checkpoint in
 * checkpoint_dir/best; sets ls->stopped_at when patience ran out.  0 or
 * 1 as *better; the return value is 1 on failure. */
static int judge(const tool_ctx *ctx, train_setup *s, train_report *rep, train_prefetch *pf, int64_t step,
                 const train_eval_result *e, loop_stats *ls)
{
    const cfg_train *t = &s->t;
    train_best *b = &ls->best;
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
        if (save_to(ctx, s, rep, pf, root, 1, step, ls))
            return 1;
    }
    if (t->patience > 0 && b->bad >= t->patience && step < t->steps)
        ls->stopped_at = step;
    return 0;
}

/* The training loop from step rs->step on.  0, or 1 on every rank after the
 * message. */
static int train_loop(const tool_ctx *ctx, train_setup *s, train_report *rep, const train_resume *rs,
                      loop_stats *ls)
{
    const cfg_train *t = &s->t;
    const int32_t kb = t->micro_batch * t->accumulate, W = ctx->size;
    const int synthetic = t->source == CFG_SOURCE_SYNTHETIC;
    const int64_t steps = t->steps, log_every = t->log_every > 0 ? t->log_every : (steps / 200 > 1 ? steps / 200 : 1);
    char err[1024] = "";
    double t0 = tool_now(), window_loss = 0;
    int64_t logged_samples = 0; /* samples up to the last logged step */
    memset(ls, 0, sizeof *ls);
    ls->steps = rs->step;
    ls->best = rs->best; /* a resumed run's verdicts so far */
    if (rs->resumed && t->patience > 0 && ls->best.have && ls->best.bad >= t->patience && rs->step < steps)
        ls->stopped_at = rs->step; /* it had stopped there: it stays stopped */
    ls->samples = logged_samples = rs->samples;
    train_prefetch *pf = NULL;
    /* a reader thread needs a core of its own: see src/train/prefetch.c */
    int threaded = omp_get_num_procs() > ctx->local_ranks * s->threads;
    /* the SSD tier's lookahead: the batches of the next K steps are read
     * ahead and announced after each embedding forward */
    const int32_t ahead = ember_prefetch_depth(s->coll);
    /* tables with hot rows: refreshed from the counts every hot_refresh_every steps */
    int hot = 0;
    for (int32_t i = 0; i < s->cc.num_tables; i++)
        hot |= s->cc.tables[i].hot_rows > 0;
    /* a pipelined schedule looks one batch ahead too */
    const int32_t peek = ahead > 0 ? ahead : t->schedule != EMBER_SCHEDULE_BLOCKING;
    int64_t bad = train_prefetch_start(s->train_src, kb, s->threads, threaded, peek, &pf) != 0;
    tool_reduce_i64(ctx, &bad, 1, TOOL_MAX);
    if (bad) {
        if (!pf)
            tool_local_error(ctx, "train", "cannot start the reader thread");
        train_prefetch_stop(pf);
        return 1;
    }
    int status = 0;
    for (int64_t step = rs->step + 1; step <= steps && !ls->stopped_at; step++) {
        double d0 = tool_now();
        ctr_batch b;
        int64_t n = train_prefetch_next(pf, &b, err, sizeof err);
        int failed = n < 0;
        if (n <= 0) { /* keep in step with the other ranks: an empty batch */
            ctr_batch_empty(&s->schema, &b);
            n = 0;
        }
        ls->data_seconds += tool_now() - d0;
        int64_t global = synthetic ? (int64_t)kb * W : n;
        if (!synthetic)
            tool_reduce_i64(ctx, &global, 1, TOOL_SUM);
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
        trainer_announce(s->tr, announce, na);
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
            double p0 = tool_now(); /* reading ahead is data time too */
            if (train_prefetch_peek(pf, 1, &ahead_b) <= 0) /* collective: an empty one in its place */
                ctr_batch_empty(&s->schema, &ahead_b);
            ls->data_seconds += tool_now() - p0;
            trainer_set_next(s->tr, &ahead_b.sparse);
        }
        if (t->lr.warmup > 0 || t->lr.decay != LR_DECAY_NONE) /* the same on every rank: a function of the step */
            trainer_set_lr_scale(s->tr, lr_schedule_scale(&t->lr, step, steps));
        if (global > 0) { /* collective: a rank whose read failed takes part with no samples */
            char serr[512] = "";
            if (trainer_step(s->tr, &b, global, &loss, serr, sizeof serr) != EMBER_OK && !failed) {
                snprintf(err, sizeof err, "%s", serr);
                failed = 1;
            }
        }
        int32_t first = -1;
        if (tool_any_failed(ctx, failed, &first)) {
            if (first == ctx->rank)
                tool_local_error(ctx, "train", "step %lld: %s", (long long)step, err);
            status = 1;
            break;
        }
        if (refresh && step < steps && ember_refresh_hot_rows(s->coll) != EMBER_OK) { /* collective */
            if (ctx->rank == 0) /* agreed: every rank has the same error */
                tool_local_error(ctx, "train", "step %lld: %s", (long long)step, ember_errmsg(s->coll));
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
            tool_reduce_double(ctx, v, 1, TOOL_SUM);
            window_loss = 0;
            train_report_step(rep, step, steps, ls->samples, tool_now() - t0 - ls->eval_seconds - ls->ckpt_seconds, 1,
                              window_samples > 0 ? v[0] / (double)window_samples : NAN);
        } else {
            train_report_step(rep, step, steps, ls->samples, tool_now() - t0 - ls->eval_seconds - ls->ckpt_seconds, 0,
                              NAN);
        }
        /* the evaluation first (every eval_every steps, and the last): a
         * checkpoint of this step then holds its verdict */
        int periodic = t->eval_every > 0 && step % t->eval_every == 0;
        if (s->eval_src && (periodic || step == steps)) {
            /* judged (early stopping, keep_best) on the periodic schedule alone, so that a
             * run extended with --resume sees the verdicts an uninterrupted run would */
            train_eval_result e;
            if (train_evaluate(ctx, s, &e) || ((periodic || t->eval_every == 0) && judge(ctx, s, rep, pf, step, &e, ls))) {
                status = 1;
                break;
            }
            ls->eval_seconds += e.seconds;
            train_report_eval(rep, step, &e);
            if (ls->stopped_at == step || step == steps) { /* the run's last evaluation */
                ls->eval = e;
                ls->have_eval = 1;
            }
        }
        if (maybe_save(ctx, s, rep, pf, step, ls)) {
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
        if (train_evaluate(ctx, s, &ls->eval)) {
            train_prefetch_stop(pf);
            return 1;
        }
        ls->eval_seconds += ls->eval.seconds;
        ls->have_eval = 1;
        train_report_eval(rep, ls->steps, &ls->eval);
    }
    train_prefetch_stop(pf); /* the source is ours again (its statistics) */
    ls->seconds = tool_now() - t0;
    return 0;
}

/* Reductions for the summary, and the summary itself. */
static void finish(const tool_ctx *ctx, train_setup *s, train_report *rep, const loop_stats *ls)
{
    trainer_times tt;
    trainer_get_times(s->tr, &tt);
    double v[8] = {ls->data_seconds, tt.emb_forward, tt.exchange, tt.dense, tt.emb_backward, tt.reduce,
                   ls->eval_seconds, ls->ckpt_seconds};
    tool_reduce_double(ctx, v, 8, TOOL_SUM);
    for (int i = 0; i < 8; i++)
        v[i] /= ctx->size;
    ctr_stats cs;
    ctr_source_stats(s->train_src, &cs);
    int64_t lines[2] = {cs.lines, cs.bad_lines};
    tool_reduce_i64(ctx, lines, 2, TOOL_SUM);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    float rss = (float)((double)ru.ru_maxrss / 1024.0), *all = NULL;
    int64_t n = 0;
    tool_gather_floats(ctx, &rss, 1, &all, &n);
    ember_tier_stats ts;
    int64_t ti[9] = {ember_collection_tier_stats(s->coll, &ts), ts.accesses, ts.demand_loads, ts.prefetch_loads,
                     ts.evictions, ts.writes, ts.bytes_read, ts.bytes_written, ts.prefetch_used};
    double td[2] = {ts.wait_seconds, ts.io_seconds};
    tool_reduce_i64(ctx, ti, 9, TOOL_SUM);
    tool_reduce_double(ctx, td, 2, TOOL_SUM);
    double train_s = ls->seconds - ls->eval_seconds - ls->ckpt_seconds;
    train_summary sm = {
        .steps = ls->steps, .samples = ls->samples, .run_steps = ls->run_steps, .run_samples = ls->run_samples,
        .global_batch = (int64_t)s->t.micro_batch * s->t.accumulate * ctx->size, .world = ctx->size,
        .seconds = ls->seconds, .train_seconds = train_s,
        .samples_per_s = train_s > 0 ? (double)ls->run_samples / train_s : 0,
        .data = v[0], .emb_forward = v[1], .exchange = v[2], .dense = v[3], .emb_backward = v[4],
        .reduce = v[5], .evaluation = v[6], .checkpoint = v[7], .peak_rss_mb = all ? all : &rss,
        .have_eval = ls->have_eval, .eval = ls->eval, .lines = lines[0], .bad_lines = lines[1],
        .first_bad = cs.first_bad, .ssd_stores = (int32_t)ti[0], .stopped_at = ls->stopped_at,
        .best_step = ls->best.have ? ls->best.step : 0, .best_metric = ls->best.metric,
        .best_is_logloss = s->t.stop_metric_logloss,
        .epochs = s->file_samples > 0 ? (double)ls->samples / (double)s->file_samples : 0,
    };
    sm.tier.accesses = ti[1], sm.tier.demand_loads = ti[2], sm.tier.prefetch_loads = ti[3];
    sm.tier.evictions = ti[4], sm.tier.writes = ti[5], sm.tier.bytes_read = ti[6], sm.tier.bytes_written = ti[7];
    sm.tier.prefetch_used = ti[8];
    sm.tier.wait_seconds = td[0], sm.tier.io_seconds = td[1];
    if (!all)
        sm.world = 1; /* out of memory for the gather: rank 0's alone */
    train_report_finish(rep, &sm);
    free(all);
}

int cmd_train(const tool_ctx *ctx, int argc, char **argv)
{
    train_opts o;
    int done = 0, st = parse_args(ctx, argc, argv, &o, &done);
    if (st || done)
        return st;
    train_setup s;
    memset(&s, 0, sizeof s);
    train_report *rep = NULL;
    loop_stats ls;
    if ((st = settings(ctx, &o, &s)) != 0)
        goto out;
    st = 1;
    train_resume rs;
    memset(&rs, 0, sizeof rs);
    if (train_setup_open(ctx, &s) || epochs_to_steps(ctx, &s) || (s.t.checkpoint_dir && train_ckpt_prepare(ctx, &s)) ||
        (s.resume && train_ckpt_resume(ctx, &s, &rs)))
        goto out;
    train_report_opts ro = {o.json, s.t.metrics, s.t.plot, rs.resumed};
    if (train_report_open(ctx, &ro, &rep))
        goto out;
    train_report_start(rep, &s, ctx->size, (int64_t)s.t.micro_batch * s.t.accumulate * ctx->size);
    if (s.resume)
        train_report_resume(rep, s.t.checkpoint_dir, &rs, s.t.steps);
    if (train_loop(ctx, &s, rep, &rs, &ls))
        goto out;
    finish(ctx, &s, rep, &ls);
    st = 0;
out:
    if (st != 0)
        train_ckpt_unprepare(ctx, &s); /* no empty folder left behind */
    fflush(stdout);
    train_report_close(rep);
    train_setup_close(&s);
    return st;
}
