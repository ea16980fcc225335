/*
 * ember-train.h: the trainer behind `ember train` as a library call: a
 * DLRM-style CTR model trained from a config file (docs/config.md), or the
 * built-in synthetic task, with evaluation, checkpoints, --resume and early
 * stopping (docs/training.md).  The `ember` tool and the Python package are
 * two shells over it; docs/training.md, "The trainer's C API", has an
 * example.
 *
 *   ember_train_overrides o;
 *   ember_train_overrides_init(&o);
 *   o.steps = 100;
 *   ember_trainer *t = NULL;
 *   int st = ember_trainer_open("my.cfg", &o, NULL, on_event, ctx, &t);
 *   if (st == EMBER_OK)
 *       st = ember_trainer_run(t);
 *   if (st != EMBER_OK)
 *       fprintf(stderr, "%s\n", ember_errmsg(t));
 *   ember_trainer_close(t);
 *
 * Nothing here prints, exits or installs a signal handler: what the run
 * does is told through events (one JSON object each, the lines of
 * `ember train --json`), errors through the status and ember_errmsg(t).
 * The trainer sets the run's thread counts (OpenMP's of the calling
 * thread, OpenBLAS's, which is process-wide) during ember_trainer_open and
 * ember_trainer_run only, and puts the caller's back before either returns:
 * after them the process has the thread settings it had before, and two
 * open trainers do not change each other's.  Do not run BLAS or OpenMP work
 * on other threads of the process during those calls.
 *
 * MPI: with a world of R ranks (include/ember-mpi.h) every rank opens and
 * runs the trainer with the same arguments; each reads its own share of the
 * data.  Open and run are collective, and failures are agreed: every rank
 * returns the same status together, and the same message, which names the
 * failing rank ("rank 2: ...") when it is one rank's.  Events are emitted on
 * rank 0 only; the summary is every rank's.
 */
#ifndef EMBER_TRAIN_API_H
#define EMBER_TRAIN_API_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ember_trainer ember_trainer;

/* What a caller overrides in the config (the options of `ember train
 * --help`).  Unset: NULL strings, -1 numbers, 0 resume.  Strings are
 * copied by ember_trainer_open.  Ranges (EMBER_EINVAL outside them):
 *   steps, eval_every, lr_warmup, checkpoint_every  0 .. 2^40
 *   seed 0 .. INT64_MAX;  eval_samples 0 .. 2^30;  micro_batch 1 .. 2^24
 *   threads, blas_threads 1 .. 4096;  accumulate 1 .. 2^16
 *   optimizer_shards, keep 0 .. 2^20 */
typedef struct ember_train_overrides {
    const char *train_file;      /* train on this file (binary, text by the
                                    config's data.schema, else Criteo TSV)   */
    const char *eval_file;       /* evaluate on it (needs training data)     */
    const char *checkpoint_dir;  /* "": none                                 */
    const char *metrics, *plot;  /* "none" or "": none.  The library writes
                                    neither: ember_trainer_info returns them
                                    for the caller's own output              */
    const char *schedule;        /* "blocking", "overlap" or "stale"         */
    const char *lr_decay;        /* "none", "linear" or "cosine"             */
    const char *precision;       /* every table's rows: "fp32", "fp16" or
                                    "bf16" (docs/precision.md)               */
    const char *rounding;        /* every table's: "stochastic" or "nearest" */
    int64_t steps;               /* also replaces the config's train.epochs */
    int64_t seed;                /* tables, dense model, synthetic data      */
    int64_t eval_every, eval_samples, lr_warmup, checkpoint_every;
    int32_t threads, blas_threads, micro_batch, accumulate, optimizer_shards;
    int32_t keep;                /* checkpoints kept (0: all)                */
    int resume;                  /* 1: continue from the newest checkpoint
                                    under checkpoint_dir                     */
    const char *reader;          /* with no spare core: "auto", "team" or
                                    "thread" (train.reader, docs/training.md) */
    const char *state_precision; /* the optimizer state of every table whose
                                    optimizer keeps it per element (Adagrad,
                                    Adam): "fp32", "fp16" or "bf16"          */
} ember_train_overrides;

/* Every field unset. */
EMBER_API void ember_train_overrides_init(ember_train_overrides *o);
/* Sets one override from text, by its `ember train` option name without the
 * dashes ("micro-batch" or "micro_batch", "train-file", "resume": "1"/"0").
 * value is kept, not copied.  Numbers are whole decimal integers ("0x"
 * before one: hexadecimal), with nothing before or after them; "" is a
 * value for checkpoint-dir, metrics and plot only (none).  EMBER_OK;
 * EMBER_EINVAL when the value is bad for it (missing, not a number, out of
 * range, not a schedule); 1 when name is not an override (nothing
 * changed). */
EMBER_API int ember_train_overrides_set(ember_train_overrides *o, const char *name, const char *value);
/* The same; on EMBER_EINVAL err (errlen bytes, may be NULL) says why,
 * naming the option and what it takes ("steps: 'x' is not an integer in
 * 0..1099511627776"); else err is "". */
EMBER_API int ember_train_overrides_set_msg(ember_train_overrides *o, const char *name, const char *value, char *err,
                                  size_t errlen);
/* The same; on EMBER_EINVAL reason (len bytes, may be NULL) says what is
 * wrong with the value as a fact of its own, naming neither the option nor
 * the value, for a caller that words its own message: "a value is
 * needed", "not an integer in 0..1099511627776", "not blocking, overlap or
 * stale"; else reason is "".  (set_msg's err is "NAME: REASON", or "NAME:
 * 'VALUE' is REASON" when a value was given.) */
EMBER_API int ember_train_overrides_set_reason(ember_train_overrides *o, const char *name, const char *value, char *reason,
                                     size_t len);

/* One event, one JSON object text (valid during the call only):
 *   start       the run's shape, at the beginning of ember_trainer_run
 *   resume      after start when resuming: the step it continues from
 *   train       every logged step: loss over the steps since the last one
 *   progress    a step not logged, at most ten a second of training (and
 *               the last step): {"event","step","steps","samples",
 *               "seconds"} (for a progress bar; not a line of --json)
 *   eval        an evaluation on the held-out data
 *   checkpoint  a checkpoint was saved
 *   summary     the last one: ember_trainer_summary
 * Emitted on rank 0 only, from the thread that calls run.  The callback
 * must not call the trainer. */
typedef void (*ember_train_event_fn)(void *ctx, const char *json_object);

/* Reads the config (NULL: the built-in synthetic task), applies the
 * overrides (NULL: none), opens the data, places the "auto" tables, builds
 * tables, dense model and trainer, prepares the checkpoint folder and, with
 * resume, restores the newest checkpoint.  world NULL: alone.  on_event may
 * be NULL.  Collective.
 * *out is set even on failure, for ember_errmsg(*out) (NULL only when
 * even that could not be allocated: EMBER_ENOMEM, and ember_errmsg(NULL)
 * says so); close it either way.
 * Errors: EMBER_EINVAL the overrides contradict the config or each other
 * (`ember train` exits 2); any other status: the run could not be set up
 * (a config, data or checkpoint error; exit 1). */
EMBER_API int ember_trainer_open(const char *config_path, const ember_train_overrides *o, ember_world *world,
                       ember_train_event_fn on_event, void *ctx, ember_trainer **out);

/* What the open run resolved, for the caller's own output; the strings
 * are valid until close. */
typedef struct ember_train_info {
    const char *name;            /* the config's name, or "synthetic"        */
    const char *metrics, *plot;  /* paths, "" none (the caller writes them)  */
    const char *checkpoint_dir;  /* NULL: none                               */
    int64_t steps;               /* the run's last step (epochs made steps)  */
    int resumed;                 /* a checkpoint was restored                */
    int32_t rank, world;
} ember_train_info;
EMBER_API int ember_trainer_info(const ember_trainer *t, ember_train_info *out);

/* Trains to the last step, or until early stopping, with evaluations and
 * checkpoints as configured.  Once per trainer.  Collective.  On a trainer
 * whose open or run failed: EMBER_ESTATE, and ember_errmsg(t) still
 * tells that failure. */
EMBER_API int ember_trainer_run(ember_trainer *t);
/* After a successful run, the "summary" event's JSON object (on every
 * rank); else NULL. */
EMBER_API const char *ember_trainer_summary(const ember_trainer *t);
/* Frees everything; a checkpoint folder this run created and left empty
 * (a failure, or steps 0) goes too.  Accepts NULL.  Not collective. */
EMBER_API void ember_trainer_close(ember_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
