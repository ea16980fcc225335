/*
 * train_tool.h: the pieces of `ember train` (docs/training.md, "The
 * loop"), one concern per file:
 *
 *   cmd_train.c     options, the loop, the order of everything
 *   train_setup.c   from settings to a running model: data sources, tables,
 *                   dense model, trainer
 *   src/train/prefetch.c  a reader thread: the next batch while the step runs
 *   train_eval.c    evaluation on the held-out samples, gathered to rank 0
 *   train_report.c  what the user sees: progress, JSON lines, plot, summary
 *   train_ckpt.c    checkpoints of the whole run's state, and --resume
 *
 * Under mpirun every rank runs all of it (setup and evaluation are
 * collective); only rank 0 writes output (train_report ignores calls on
 * other ranks).
 */
#ifndef EMBER_TOOLS_TRAIN_TOOL_H
#define EMBER_TOOLS_TRAIN_TOOL_H

#include <stdint.h>
#include <stdio.h>

#include "config/config_file.h"
#include "tool_ctx.h"
#include "train/prefetch.h"
#include "train/train.h"

/* ------------------------------------------------------------ setup */

/* Everything a run holds.  setup owns it; train_setup_close frees it. */
typedef struct train_setup {
    cfg_train t;                 /* settings after the command line        */
    const char *name;            /* the config's name, or "synthetic"      */
    config_file *cf;             /* NULL: the built-in task                */
    int32_t threads;             /* per rank                               */
    int32_t blas_threads;        /* OpenBLAS threads per rank (default 1)  */
    ctr_source *train_src, *eval_src; /* eval_src NULL: no evaluation      */
    ctr_schema schema;           /* what the sources yield                 */
    ember_collection_config cc;  /* points into tables/features below or cf */
    ember_table_config tables[CTR_MAX_FEATURES];
    ember_feature_config features[CTR_MAX_FEATURES];
    char names[2][CTR_MAX_FEATURES][40];
    ember_collection *coll;
    dlrm *model;
    trainer *tr;
    int resume;                  /* --resume                               */
    int ckpt_dir_made;           /* train_ckpt_prepare created the folder     */
    int64_t file_samples;        /* the training file's samples (lines for a
                                    TSV, bad ones too); 0: the built-in task */
    char plan_note[1024];        /* how "auto" tables were placed; "" none  */
} train_setup;

/* Tables of the config left on "auto" (placement or exchange) placed as
 * `ember plan` would for this run (train_plan.c): its world, its global
 * batch, id statistics measured on the training data's first batches (or
 * the synthetic law), or as a saved `ember plan --json` (train.plan) says.
 * Every rank computes the same plan from the same inputs.  0, or -1 with
 * err. */
int train_plan_tables(const tool_ctx *ctx, train_setup *s, int64_t global_batch, char *err, size_t errlen);

/* Opens the sources and builds collection, model and trainer.  Collective;
 * 0 on every rank, or 1 on every rank after the message was printed. */
int train_setup_open(const tool_ctx *ctx, train_setup *s);
void train_setup_close(train_setup *s);

/* ------------------------------------------------------- checkpoints */

/* train_ckpt.c: the checkpoint folder is t.checkpoint_dir; blobs and the
 * resume contract in docs/training.md, "Checkpoints and resume". */
/* The best evaluation so far, for early stopping and keep_best
 * (cmd_train.c); saved in every checkpoint, so a resumed run stops where
 * the uninterrupted one would. */
typedef struct train_best {
    int64_t have;                /* an evaluation was seen                  */
    double metric;               /* AUC, or log loss (train.early_stop)     */
    int64_t step;                /* its step                                */
    int64_t bad;                 /* evaluations since, none better          */
} train_best;

typedef struct train_resume {
    int resumed;                 /* 0: no checkpoint under the folder       */
    train_best best;             /* as saved (zero in an older checkpoint)  */
    int64_t step, samples;       /* where the run continues                 */
    int32_t saved_world;
    char path[4096];             /* the step folder                         */
    char note[1024];             /* soft differences (world, threads), or "" */
} train_resume;

typedef struct train_ckpt_saved {
    int64_t step, bytes;         /* bytes: rank 0 only                      */
    double seconds;
    char path[4096];
} train_ckpt_saved;

/* Rank 0 creates the folder if needed and checks it can write there.
 * Collective; 0, or 1 on every rank after the message. */
int train_ckpt_prepare(const tool_ctx *ctx, train_setup *s);
/* After a failed run: the folder prepare created goes again if still empty. */
void train_ckpt_unprepare(const tool_ctx *ctx, const train_setup *s);
/* Saves the tables and the run's state after `step` steps (samples: over
 * all ranks so far; pos: this rank's data position after the step's
 * batch).  Collective; 0, or 1 on every rank after the message. */
int train_ckpt_save(const tool_ctx *ctx, train_setup *s, const char *root, int32_t keep, int64_t step,
                    int64_t samples, const ctr_position *pos, const train_best *best, train_ckpt_saved *out);
/* --resume: restores the newest complete checkpoint under the folder
 * (tables, dense model and optimizer, the data position of the training
 * source, which must not be read yet); rs->resumed 0 when there is none.
 * Collective; 0, or 1 on every rank after the message (a corrupt
 * checkpoint, different settings). */
int train_ckpt_resume(const tool_ctx *ctx, train_setup *s, train_resume *rs);

/* -------------------------------------------------------- evaluation */

typedef struct train_eval_result {
    int64_t samples;             /* over all ranks                          */
    double auc, logloss;
    double teacher_auc, teacher_logloss; /* NaN without a teacher          */
    double seconds;
} train_eval_result;

/* Predicts up to t.eval_samples held-out samples (the eval source from its
 * start), gathers scores and labels to rank 0 and scores them there (other
 * ranks get the samples count only).  Collective; 0, or 1 on every rank
 * after the message was printed. */
int train_evaluate(const tool_ctx *ctx, train_setup *s, train_eval_result *out);

/* ------------------------------------------------------------ report */

typedef struct train_report train_report;

typedef struct train_report_opts {
    int json;                    /* stdout: JSON lines only                 */
    const char *metrics_path;    /* "" none                                 */
    const char *plot_path;       /* "" none                                 */
    int append;                  /* append to the metrics file (resume)     */
} train_report_opts;

/* Rank 0 opens the metrics file; 0, or 1 after the message (agreed). */
int train_report_open(const tool_ctx *ctx, const train_report_opts *o, train_report **out);
void train_report_close(train_report *r);

/* The run's shape, once before the first step. */
void train_report_start(train_report *r, const train_setup *s, int32_t world, int64_t global_batch);
/* After a step: redraws the progress bar (a terminal) at most 10 times a
 * second; `logged` marks steps whose loss was just reduced over ranks,
 * which go to the JSON lines (and, on a pipe, every tenth of the run). */
void train_report_step(train_report *r, int64_t step, int64_t steps, int64_t samples, double seconds,
                       int logged, double loss);
void train_report_eval(train_report *r, int64_t step, const train_eval_result *e);
/* --resume: where the run continues (rs->resumed 0: from scratch); rates and
 * the ETA count from there. */
void train_report_resume(train_report *r, const char *dir, const train_resume *rs, int64_t steps);
/* A checkpoint was saved: one line (a JSON line with --json). */
void train_report_checkpoint(train_report *r, const train_ckpt_saved *c);

typedef struct train_summary {
    int64_t steps, samples, global_batch; /* the whole run's, a resumed one's earlier steps too */
    int64_t run_steps, run_samples;       /* this run's: the time and rates are over these    */
    int64_t stopped_at;                   /* > 0: early stopping ended the run after it      */
    int64_t best_step;                    /* the best evaluation's step (0: none)            */
    double best_metric;                   /* its AUC, or log loss with best_is_logloss       */
    int best_is_logloss;
    double epochs;                        /* passes over the training file (0: the built-in task) */
    int32_t world;
    double seconds, train_seconds, samples_per_s;
    double data, emb_forward, exchange, dense, emb_backward, reduce, evaluation; /* mean over ranks */
    double checkpoint;           /* saving checkpoints, mean over ranks     */
    const float *peak_rss_mb;    /* [world] (rank 0)                         */
    int have_eval;
    train_eval_result eval;
    int64_t lines, bad_lines;    /* file sources, summed over ranks         */
    const char *first_bad;
    int32_t ssd_stores;          /* SSD tier stores, summed over ranks      */
    ember_tier_stats tier;       /* their counters, summed over ranks       */
} train_summary;

/* The summary text (not with json), the plot, and the last line: one JSON
 * object {"event":"summary",...}. */
void train_report_finish(train_report *r, const train_summary *sm);

#endif
