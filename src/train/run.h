/*
 * run.h: inside the trainer of include/ember-train.h, a whole training run
 * (docs/training.md, "The loop"), one concern per file:
 *
 *   api.c           open, run, close: the order of everything
 *   run_error.c     failures agreed over the world, and their messages
 *   src/config/train_overrides.c  the overrides: set by name, checked
 *   src/config/train_settings.c  the config, then the overrides
 *   setup.c         data sources, tables, dense model, the CTR model; epochs
 *   plan_start.c    the config's "auto" tables placed as `ember plan` would
 *   loop.c          the steps, with evaluations and checkpoints between
 *   prefetch.c      the reader thread: the next batches read while a step runs
 *   arrange.c       no spare core: the step's team reads, or a reader thread
 *   evaluate.c      evaluation on held-out samples, scored on rank 0
 *   checkpoint.c    checkpoints of the run's state, and resume
 *   fingerprint.c   the settings a checkpoint must match to resume
 *   events.c        the JSON events (start, train, progress, eval, ...)
 *   summary.c       the summary's reductions over ranks, and its JSON
 *   run_json.c      the JSON pieces events and summary share
 *
 * Every rank runs all of it, and the collective parts (set-up, the step,
 * evaluation, checkpoints, the summary) in the same order.  A failure is
 * agreed before the next collective call, so every rank stops together
 * with the same status and message (run_error.c).
 */
#ifndef EMBER_TRAIN_RUN_H
#define EMBER_TRAIN_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "config/config_file.h"
#include "config/data_open.h"
#include "config/train_settings.h"
#include "core/status.h"
#include "ember-train.h"
#include "model/lr_schedule.h"
#include "model/metrics.h"
#include "model/model.h"
#include "train/prefetch.h"

/* The best evaluation so far, for early stopping and keep_best; saved in
 * every checkpoint, so a resumed run stops where the uninterrupted one
 * would. */
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
    int32_t saved_stages;        /* pipeline stages that saved it (1: none)  */
    char path[4096];             /* the step folder                         */
    char note[1024];             /* soft differences (world, threads), or "" */
} train_resume;

typedef struct train_eval_result {
    int64_t samples;             /* over all ranks                          */
    double auc, logloss;
    double teacher_auc, teacher_logloss; /* NaN without a teacher          */
    double seconds;
} train_eval_result;

typedef struct train_ckpt_saved {
    int64_t step, bytes;         /* bytes: rank 0 only                      */
    double seconds;
    char path[4096];
} train_ckpt_saved;

/* What the loop counts, for the summary. */
typedef struct train_loop_stats {
    int64_t steps, samples;      /* in all, a resumed run's earlier ones too */
    int64_t run_samples, run_steps; /* this run's                            */
    double seconds, eval_seconds, data_seconds, ckpt_seconds;
    int64_t reader_steps;        /* steps a thread of the step read instead (arrange.c) */
    int64_t reader_trials;       /* trials of the two ways (arrange.c)      */
    int have_eval;
    train_eval_result eval;      /* the run's last evaluation               */
    train_best best;
    int64_t stopped_at;          /* > 0: stopped early after this step      */
    int64_t limit_changes;       /* this run's changes of adaptive limits   */
    int64_t ids;                 /* this run's ids, this rank's share        */
    int64_t limit_dropped;       /* of them, dropped by a limit (no evaluation's) */
    int32_t window_min, window_max; /* the SSD tier's lookahead window over the run */
} train_loop_stats;

enum { RUN_FAILED = 0, RUN_OPEN, RUN_STOPPED, RUN_DONE }; /* open failed, open, run failed, run */

struct ember_trainer {
    ember_handle_msg head;       /* first: ember_errmsg's, over errmsg      */
    ember_world *world;          /* NULL: alone                             */
    int32_t rank, size;
    int32_t local_ranks;         /* ranks on this machine                   */
    ember_train_event_fn on_event;
    void *event_ctx;
    double progress_at;          /* training seconds of the last "progress"  */
    char *owned[11];              /* copies of the overrides' strings        */

    cfg_train t;                 /* settings after the overrides            */
    const char *name;            /* the config's name, or "synthetic"       */
    config_file *cf;             /* NULL: the built-in task                 */
    int32_t threads, blas_threads; /* per rank                              */
    int resume;                  /* resume from the newest checkpoint       */

    ctr_source *train_src, *eval_src; /* eval_src NULL: no evaluation       */
    ctr_schema schema;           /* what the sources yield                  */
    data_input_kind input_kind;  /* how the training rows became samples,   */
    ctr_text_schema input_schema; /* for the model description (its columns */
    ctr_column *input_cols;      /* in input_cols, owned; NULL without)     */
    ember_collection_config cc;  /* points into tables/features below or cf */
    ember_table_config tables[CTR_MAX_FEATURES];
    ember_feature_config features[CTR_MAX_FEATURES];
    char names[2][CTR_MAX_FEATURES][40];
    ember_collection *coll;
    limits_adapt *limits;        /* train.limits; NULL: the config's limits stay */
    int64_t *limits_obs;         /* [4 * tables] a step's figures (limits.c)  */
    struct train_replan *replan; /* train.replan (replan.c); NULL: placed once */
    dlrm *dense;                 /* the dense half of the model             */
    ctr_model *model;            /* coll and dense joined: step and predict */
    int64_t *dense_memory;       /* rank 0: every rank's model_memory (4
                                    int64 each, rank order); NULL elsewhere */
    int ckpt_dir_made;           /* checkpoint_prepare created the folder    */
    int epochs_default;          /* a file and no steps or epochs given: the
                                    steps are TRAIN_DEFAULT_EPOCHS passes    */
    int64_t file_samples;        /* the training file's samples (lines for a
                                    TSV, bad ones too); 0: the built-in task */
    char plan_note[1024];        /* how "auto" tables were placed; "" none  */

    train_resume rs;             /* where the run starts                    */
    train_loop_stats ls;
    int state;                   /* RUN_OPEN: may run                       */
    char *summary;               /* the summary's JSON after the run        */
    int status;                  /* of the last failure                     */
    char errmsg[1100];
};

/* ------------------------------------------------------------ failures */

/* A failure some ranks may have seen alone, agreed (collective): 1 on
 * every rank when any rank failed, which then all hold the lowest failing
 * rank's status and message ("rank R: " before it in a world of more than
 * one); else 0.  EMBER_EINVAL becomes EMBER_EFORMAT (EINVAL is the
 * settings' own, ember-train.h). */
int run_agree(ember_trainer *s, int failed, int status, const char *msg);
/* run_agree for open's settings: the status as it is (EMBER_EINVAL too),
 * and the message without "rank R: " unless named (a failure only that
 * rank can have seen; the settings fail alike on every rank). */
int run_agree_open(ember_trainer *s, int failed, int status, const char *msg, int named);
/* The agreement itself, without a trainer (open before its handle exists):
 * 1 when any rank failed, with the lowest failing rank's status, its rank
 * in *rank_out when named (else -1) and its message; else 0.  When the
 * agreement cannot communicate: EMBER_ECOMM with the world's message, as
 * this rank's.  Collective. */
int run_agree_world(ember_world *w, int failed, int status, const char *msg, int named, int *status_out,
                    int32_t *rank_out, char *msg_out, size_t msglen);
/* A library call's agreed status st: 1 on every rank when any failed.  The
 * message is of a rank that saw the cause, not of one that only saw another
 * rank fail (EMBER_ECOMM). */
int run_agree_status(ember_trainer *s, int st, const char *msg);
/* A failure every rank saw alike: the status, the message as it is. */
int run_fail(ember_trainer *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A failure every rank saw alike, told as rank `rank`'s ("rank R: ..." in
 * a world of more than one).  Returns status. */
int run_fail_rank(ember_trainer *s, int32_t rank, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* -------------------------------------------------------------- set-up */

/* Samples per step over all ranks: micro_batch x accumulate x ranks. */
int64_t train_global_batch(const ember_trainer *s);

/* Opens the sources and builds collection, model and trainer.  Collective;
 * 0, or 1 on every rank (agreed). */
int train_setup_open(ember_trainer *s);
void train_setup_close(ember_trainer *s);
/* train.epochs: the steps of that many passes over the training file; the
 * file's samples.  Collective; 0 or 1. */
int train_epochs_to_steps(ember_trainer *s);
/* The config's "auto" tables placed as `ember plan` would for this run:
 * its world, its global batch, id statistics of the training data's first
 * batches (or the synthetic law), or a saved plan (train.plan).  Every rank
 * computes the same.  0, or -1 with err (local). */
int train_plan_tables(ember_trainer *s, int64_t global_batch, char *err, size_t errlen);

/* ---------------------------------------------- limits that follow data */

/* train.limits (limits.c): the adapter and the collection's observation.
 * Collective; 0 or 1. */
int train_limits_open(ember_trainer *s);
void train_limits_close(ember_trainer *s);
/* After step `step`: its figures in; at a decision step, agreed, decided,
 * set and told ("limits" events).  Collective; 0 or 1. */
int train_limits_step(ember_trainer *s, int64_t step);
/* Forwards that were no step's (evaluation) leave the figures.  Local. */
void train_limits_forget(ember_trainer *s);
/* Before a checkpoint: nothing waits for an agreement.  Collective; 0 or 1. */
int train_limits_sync(ember_trainer *s);
/* A checkpoint's state back, the limits set.  0, or -1 with err (local). */
int train_limits_restore(ember_trainer *s, const void *blob, int64_t bytes, char *err, size_t errlen);

/* ------------------------------------------------- re-planning (replan.c) */

typedef struct train_replan train_replan;
/* train.replan: its state (after the collection).  0, or -1 with err
 * (local: the same on every rank). */
int train_replan_open(ember_trainer *s, char *err, size_t errlen);
void train_replan_close(ember_trainer *s);
/* A re-plan is considered after this step. */
int train_replan_due(const ember_trainer *s, int64_t step);
/* After step `step` (its sparse batch kept): at a re-plan step, gathered,
 * planned, maybe moved, told.  Collective; 0 or 1. */
int train_replan_step(ember_trainer *s, int64_t step, const ember_batch *sparse);
int64_t train_replan_moves(const ember_trainer *s);
/* For checkpoints: the tables' placements in force (int64 [tables][3]:
 * placement, owner, exchange) and this rank's kept batches (NULL and 0 bytes
 * without train.replan); malloc'd. */
int64_t *train_replan_placement_blob(const ember_trainer *s, int64_t *bytes);
int64_t *train_replan_kept_blob(const ember_trainer *s, int64_t *bytes);
/* A checkpoint's: its kept batches (same_world: the world that saved them),
 * and its placements, the rows moved into them when they differ from the
 * collection's.  Collective; 0 or 1 (agreed, err). */
int train_replan_restore(ember_trainer *s, const int64_t *placement, int64_t pbytes, const int64_t *kept,
                         int64_t kbytes, int same_world, char *err, size_t errlen);

/* --------------------------------------------------------- checkpoints */

/* Rank 0 creates the folder if needed and checks it can write there.
 * Collective; 0 or 1. */
int train_ckpt_prepare(ember_trainer *s);
/* After a failed run: the folder prepare created goes again if empty. */
void train_ckpt_unprepare(ember_trainer *s);
/* Saves the tables and the run's state after `step` steps (samples: over
 * all ranks so far; pos: this rank's data position after the step's
 * batch).  Collective; 0 or 1. */
int train_ckpt_save(ember_trainer *s, const char *root, int32_t keep, int64_t step, int64_t samples,
                    const ctr_position *pos, const train_best *best, train_ckpt_saved *out);
/* Restores the newest complete checkpoint under the folder into s->rs
 * (rs.resumed 0 when there is none); the training source must not be read
 * yet.  Collective; 0 or 1. */
int train_ckpt_resume(ember_trainer *s);
/* The run's fingerprint: "key value\n" lines; keys after "soft" only warn. */
void train_fingerprint(const ember_trainer *s, char *buf, size_t n);
/* Compares this run's fingerprint with a checkpoint's.  0, or -1 with the
 * first hard difference in err; soft differences go to note. */
/* The pipeline stages a fingerprint records (1: none). */
int32_t train_fingerprint_stages(const char *fp);
int train_fingerprint_compare(const char *mine, const char *saved, const char *path, char *err, size_t errlen,
                              char *note, size_t notelen);

/* ---------------------------------------------------- loop, evaluation */

/* The steps from s->rs.step on, into s->ls.  Collective; 0 or 1. */
int train_loop(ember_trainer *s);
/* Predicts up to t.eval_samples held-out samples, scored on rank 0; every
 * rank gets rank 0's figures.  Collective; 0 or 1. */
int train_evaluate(ember_trainer *s, train_eval_result *out);

/* -------------------------------------------------------------- events */

void train_event_start(ember_trainer *s);
void train_event_resume(ember_trainer *s);
/* After a step: "train" when logged (loss: the window's mean), else
 * "progress" at most ten times a second of training (nothing is built for
 * the steps between); seconds: training time so far (no evaluation,
 * checkpoints). */
void train_event_step(ember_trainer *s, int64_t step, int64_t samples, double seconds, int logged, double loss);
void train_event_eval(ember_trainer *s, int64_t step, const train_eval_result *e);
void train_event_checkpoint(ember_trainer *s, const train_ckpt_saved *c);
/* Hands one event to the callback (rank 0); takes j (a json_t *). */
void train_event_emit(ember_trainer *s, void *j);
/* Reductions over ranks (collective) and the summary's JSON into
 * s->summary on every rank.  0 or 1. */
int train_summary(ember_trainer *s);

#endif
