/*
 * api.c: the trainer of include/ember-train.h: open, run, close, and the
 * order of everything in between (run.h):
 *
 *   open   overrides checked; the config read (agreed: a file one rank
 *          cannot read fails every rank); settings; sources, tables, dense
 *          model and CTR model (src/model/); train.epochs made steps; the
 *          checkpoint folder prepared; with resume, the newest checkpoint
 *          restored
 *   run    "start" (and "resume"), the loop, the summary
 *   close  everything freed; a checkpoint folder open made is removed
 *          again when nothing was saved in it
 *
 * The handle exists from the first moment, so a failed open still has its
 * message for the caller.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/collect.h"
#include "dense/dense.h"
#include "train/run.h"

/* The process's thread settings a run changes: OpenMP's of the calling
 * thread (the synthetic data's loops, set-up) and OpenBLAS's (process-wide,
 * so that the dense model's GEMMs find the run's count already set and
 * change nothing per step).  Open and run apply the run's own and put the
 * caller's back on every return, so that neither the caller nor another
 * trainer sees them; the model's handles carry their own counts
 * (model_create). */
typedef struct thread_state {
    int omp;
    int32_t blas;
} thread_state;

static void threads_save(thread_state *saved)
{
    saved->omp = omp_get_max_threads();
    saved->blas = dense_blas_threads();
}

static void threads_apply(const ember_trainer *s)
{
    omp_set_num_threads(s->threads);
    dense_set_blas_threads(s->blas_threads > 0 ? s->blas_threads : s->threads);
}

static void threads_restore(const thread_state *saved)
{
    omp_set_num_threads(saved->omp);
    dense_set_blas_threads(saved->blas);
}

/* The overrides with their strings copied into s (the caller's may go). */
static int copy_overrides(ember_trainer *s, const ember_train_overrides *o, ember_train_overrides *out)
{
    if (o)
        *out = *o;
    else
        ember_train_overrides_init(out);
    const char **strs[] = {&out->train_file, &out->eval_file, &out->checkpoint_dir, &out->metrics,
                           &out->plot,       &out->schedule,  &out->lr_decay,  &out->precision, &out->rounding,
                           &out->state_precision, &out->reader};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (*strs[i] && !(*strs[i] = s->owned[i] = strdup(*strs[i])))
            return EMBER_ENOMEM;
    return 0;
}

/* Everything of open after the handle: 0, or a status with s->errmsg.
 * The overrides, the config and the settings are one agreement: a rank
 * that failed there alone (out of memory, a config it cannot read) stops
 * the others before the first collective of the set-up. */
static int open_run(ember_trainer *s, const char *config_path, const ember_train_overrides *given)
{
    char err[1024] = "";
    ember_train_overrides o;
    int st = EMBER_OK, named = 0; /* named: this rank's own failure */
    train_settings set;
    if (copy_overrides(s, given, &o)) {
        st = EMBER_ENOMEM, named = 1;
        snprintf(err, sizeof err, "out of memory");
    } else if (train_overrides_check(&o, err, sizeof err)) {
        st = EMBER_EINVAL;
    } else if (config_path && config_file_load(config_path, &s->cf, err, sizeof err) != 0) {
        st = EMBER_EFORMAT, named = 1;
    } else {
        st = train_settings_make(s->cf, config_path, &o, s->size, &set, err, sizeof err);
    }
    if (run_agree_open(s, st != EMBER_OK, st, err, named))
        return s->status;
    s->t = set.t;
    s->name = set.name;
    s->threads = set.threads;
    s->blas_threads = set.blas_threads;
    s->resume = set.resume;
    threads_apply(s); /* the synthetic data's loops, too; undone by open */
    if (train_setup_open(s) || train_epochs_to_steps(s) || (s->t.checkpoint_dir && train_ckpt_prepare(s)) ||
        (s->resume && train_ckpt_resume(s)))
        return s->status;
    return EMBER_OK;
}

int ember_trainer_open(const char *config_path, const ember_train_overrides *o, ember_world *world,
                       ember_train_event_fn on_event, void *ctx, ember_trainer **out)
{
    if (!out)
        return ember_fail_create(EMBER_EINVAL, "ember_trainer_open: out is NULL");
    ember_trainer *s = *out = calloc(1, sizeof *s);
    if (!s) { /* the others wait in open's agreement: join it */
        int st;
        int32_t rank;
        char msg[64];
        run_agree_world(world, 1, EMBER_ENOMEM, "out of memory", 1, &st, &rank, msg, sizeof msg);
        return ember_fail_create(EMBER_ENOMEM, "out of memory");
    }
    ember_handle_begin(&s->head, s->errmsg, sizeof s->errmsg);
    s->world = world;
    s->rank = ember_world_rank(world);
    s->size = ember_world_size(world);
    s->local_ranks = ember_comm_local_ranks(world);
    s->on_event = on_event;
    s->event_ctx = ctx;
    thread_state saved;
    threads_save(&saved);
    int st = open_run(s, config_path, o);
    threads_restore(&saved);
    if (st == EMBER_OK)
        s->state = RUN_OPEN;
    return st;
}

int ember_trainer_info(const ember_trainer *s, ember_train_info *out)
{
    if (!s || !out || s->state == RUN_FAILED)
        return s && out ? EMBER_ESTATE : EMBER_EINVAL;
    memset(out, 0, sizeof *out);
    out->name = s->name;
    out->metrics = s->t.metrics ? s->t.metrics : "";
    out->plot = s->t.plot ? s->t.plot : "";
    out->checkpoint_dir = s->t.checkpoint_dir;
    out->steps = s->t.steps;
    out->resumed = s->rs.resumed;
    out->rank = s->rank;
    out->world = s->size;
    return EMBER_OK;
}

int ember_trainer_run(ember_trainer *s)
{
    if (!s)
        return EMBER_EINVAL;
    if (s->state == RUN_FAILED || s->state == RUN_STOPPED)
        return EMBER_ESTATE; /* open's or run's failure stays the message and status */
    if (s->state != RUN_OPEN)
        return run_fail(s, EMBER_ESTATE, "ember_trainer_run: the trainer has run already");
    s->state = RUN_STOPPED; /* once, whatever happens */
    thread_state saved;
    threads_save(&saved);
    threads_apply(s);
    train_event_start(s);
    if (s->resume)
        train_event_resume(s);
    int st = EMBER_OK;
    if (train_loop(s) || train_summary(s))
        st = s->status;
    threads_restore(&saved);
    if (st != EMBER_OK)
        return st;
    if (s->rank == 0 && s->on_event)
        s->on_event(s->event_ctx, s->summary);
    s->state = RUN_DONE;
    return EMBER_OK;
}

const char *ember_trainer_summary(const ember_trainer *s)
{
    return s && s->state == RUN_DONE ? s->summary : NULL;
}

void ember_trainer_close(ember_trainer *s)
{
    if (!s)
        return;
    train_ckpt_unprepare(s); /* no empty folder left behind (steps 0 saves nothing) */
    train_setup_close(s);
    for (size_t i = 0; i < sizeof s->owned / sizeof s->owned[0]; i++)
        free(s->owned[i]);
    free(s->summary);
    ember_handle_end(&s->head);
    free(s);
}
