/*
 * events.c: what a training run tells its caller (run.h, ember-train.h):
 * one JSON object per event, handed to the callback on rank 0.  These are
 * the lines of `ember train --json` and of its metrics file, so their
 * fields and their order are a format: fields may be added, never renamed
 * or removed.  Reals have 8 significant digits; a non-finite one is null.
 *
 * Fields for the text `ember train` prints and the JSON lines never had
 * (the start event's tables, bottom, top, dense_optimizer, dense_lr,
 * placement and evaluation) come after the older ones.  "progress" is the
 * one event the JSON lines leave out: one per step that is not logged, for
 * a progress bar.
 */
#include <math.h>
#include <stdlib.h>

#include <jansson.h>

#include "model/dense_sync.h"
#include "model/pipeline.h"
#include "config/train_settings.h"
#include "config/cfg_read.h"
#include "train/run.h"
#include "train/run_json.h"

/* o[key] += 1 */
static void count(json_t *o, const char *key)
{
    json_object_set_new(o, key, json_integer(json_integer_value(json_object_get(o, key)) + 1));
}

/* How many tables train in each row precision, how many keep half
 * optimizer state, and how the tables with half rows or state round:
 * {"fp32": 2, "fp16": 24, "state": {"bf16": 24}, "rounding": {"stochastic":
 * 24}} (only the precisions and roundings some table has). */
static json_t *row_precision(const ember_collection_config *cc)
{
    json_t *o = json_object(), *rd = json_object(), *state = json_object();
    for (int32_t t = 0; t < cc->num_tables; t++) {
        const ember_table_config *tb = &cc->tables[t];
        count(o, ember_precision_name(tb->precision));
        if (tb->state_precision != EMBER_PRECISION_FP32)
            count(state, ember_precision_name(tb->state_precision));
        if (tb->precision != EMBER_PRECISION_FP32 || tb->state_precision != EMBER_PRECISION_FP32)
            count(rd, ember_rounding_name(tb->rounding));
    }
    if (json_object_size(state))
        json_object_set_new(o, "state", state);
    else
        json_decref(state);
    if (json_object_size(rd))
        json_object_set_new(o, "rounding", rd);
    else
        json_decref(rd);
    return o;
}

/* Rank 0, with a callback: anything else has no use for the event. */
static int wanted(const ember_trainer *s) { return s->rank == 0 && s->on_event; }

void train_event_emit(ember_trainer *s, void *event)
{
    json_t *j = event;
    char *text = run_json_dumps(j);
    json_decref(j);
    if (text)
        s->on_event(s->event_ctx, text);
    free(text);
}

static json_t *widths(int32_t k, const int32_t *w)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < k; i++)
        json_array_append_new(a, json_integer(w[i]));
    return a;
}

void train_event_start(ember_trainer *s)
{
    if (!wanted(s))
        return;
    const cfg_train *t = &s->t;
    const dlrm_config *m = &t->model;
    int64_t rows = 0, global_batch = train_global_batch(s);
    for (int32_t i = 0; i < s->cc.num_tables; i++)
        rows += s->cc.tables[i].rows;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("start"));
    json_object_set_new(j, "name", run_json_string(s->name));
    json_object_set_new(j, "source", json_string(config_source_name(t->source)));
    if (t->train_file)
        json_object_set_new(j, "train_file", run_json_string(t->train_file));
    if (t->eval_file)
        json_object_set_new(j, "eval_file", run_json_string(t->eval_file));
    json_object_set_new(j, "world", json_integer(s->size));
    json_object_set_new(j, "threads", json_integer(s->threads));
    json_object_set_new(j, "micro_batch", json_integer(t->micro_batch));
    json_object_set_new(j, "accumulate", json_integer(t->accumulate));
    json_object_set_new(j, "global_batch", json_integer(global_batch));
    json_object_set_new(j, "steps", json_integer(t->steps));
    if (s->file_samples > 0) { /* how many passes over the file the steps are, and who said so */
        json_object_set_new(j, "file_samples", json_integer(s->file_samples));
        json_object_set_new(j, "passes", json_real((double)t->steps * (double)global_batch / (double)s->file_samples));
        json_object_set_new(j, "steps_from", json_string(s->epochs_default ? "default_epochs"
                                                         : t->epochs > 0 ? "epochs" : "steps"));
        json_object_set_new(j, "many_passes", json_integer(TRAIN_MANY_PASSES));
    }
    json_object_set_new(j, "eval_every", json_integer(t->eval_every));
    json_object_set_new(j, "eval_samples", !s->eval_src ? json_integer(0)
                                           : t->eval_samples >= CFG_EVAL_ALL ? json_string("all")
                                                                             : json_integer(t->eval_samples));
    json_object_set_new(j, "dense_features", json_integer(m->num_dense));
    json_object_set_new(j, "sparse_features", json_integer(m->num_sparse));
    json_object_set_new(j, "emb_dim", json_integer(m->emb_dim));
    json_object_set_new(j, "embedding_rows", json_integer(rows));
    json_object_set_new(j, "dense_params", json_integer(dlrm_full_params(s->dense)));
    json_object_set_new(j, "optimizer_shards", json_integer(t->optimizer_shards));
    json_object_set_new(j, "dense_optimizer_bytes_per_rank",
                        json_integer(dense_sync_state_bytes(model_dense_sync(s->model))));
    json_object_set_new(j, "schedule", json_string(config_schedule_name(t->schedule)));
    json_object_set_new(j, "reader", json_string(CFG_READERS[t->reader]));
    if (t->pipe_stages > 1) {
        json_t *p = json_object();
        json_object_set_new(p, "stages", json_integer(t->pipe_stages));
        json_object_set_new(p, "schedule", json_string(pipe_schedule_name((pipe_schedule)t->pipe_schedule)));
        json_object_set_new(p, "virtual", json_integer(t->pipe_virtual));
        json_object_set_new(p, "recompute", json_boolean(t->pipe_recompute));
        json_object_set_new(p, "balance", json_string(t->pipe_balance_memory ? "memory" : "time"));
        json_object_set_new(p, "cuts", widths(t->pipe_num_cuts, t->pipe_cuts));
        json_object_set_new(j, "pipeline", p);
    }
    json_t *lr = json_object();
    json_object_set_new(lr, "warmup", json_integer(t->lr.warmup));
    json_object_set_new(lr, "decay", json_string(config_lr_decay_name(t->lr.decay)));
    json_object_set_new(lr, "final", json_real(t->lr.final));
    json_object_set_new(lr, "every", json_integer(t->lr.every));
    json_object_set_new(lr, "gamma", json_real(t->lr.gamma));
    json_object_set_new(j, "lr_schedule", lr);
    json_object_set_new(j, "interaction", json_string(dense_interaction_name(m->interaction)));
    if (m->interaction == DENSE_INTERACT_DCN) {
        json_object_set_new(j, "cross_layers", json_integer(m->num_cross));
        json_object_set_new(j, "cross_rank", json_integer(m->cross_rank));
    }
    json_object_set_new(j, "activation", json_string(dense_activation_name(m->activation)));
    json_object_set_new(j, "tables", json_integer(s->cc.num_tables));
    json_object_set_new(j, "row_precision", row_precision(&s->cc));
    json_object_set_new(j, "bottom", widths(m->num_bottom, m->bottom));
    json_object_set_new(j, "top", widths(m->num_top, m->top));
    json_object_set_new(j, "blas_core", json_string(dense_blas_core()));
    json_object_set_new(j, "dense_optimizer", json_string(dense_optim_name(t->dense_optim.kind)));
    json_object_set_new(j, "dense_lr", json_real(t->dense_optim.lr));
    if (s->plan_note[0])
        json_object_set_new(j, "placement", run_json_string(s->plan_note));
    json_object_set_new(j, "evaluation", json_boolean(s->eval_src != NULL));
    if (s->dense_memory) { /* bytes per rank: a pipeline stage holds its own pieces */
        static const char *const KEYS[] = {"params", "grads", "state", "activations"};
        json_t *mem = json_object();
        for (int k = 0; k < 4; k++) {
            json_t *a = json_array();
            for (int32_t r = 0; r < s->size; r++)
                json_array_append_new(a, json_integer(s->dense_memory[4 * r + k]));
            json_object_set_new(mem, KEYS[k], a);
        }
        json_object_set_new(j, "dense_bytes_per_rank", mem);
    }
    train_event_emit(s, j);
}

void train_event_resume(ember_trainer *s)
{
    if (!wanted(s))
        return;
    const train_resume *rs = &s->rs;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("resume"));
    json_object_set_new(j, "step", json_integer(rs->step));
    json_object_set_new(j, "samples", json_integer(rs->samples));
    json_object_set_new(j, "checkpoint", rs->resumed ? run_json_string(rs->path) : json_null());
    if (rs->note[0])
        json_object_set_new(j, "differences", run_json_string(rs->note));
    train_event_emit(s, j);
}

void train_event_step(ember_trainer *s, int64_t step, int64_t samples, double seconds, int logged, double loss)
{
    if (!wanted(s))
        return;
    if (!logged) { /* a progress bar redraws ten times a second at most: no JSON for every step */
        if (seconds - s->progress_at < 0.1 && step < s->t.steps)
            return;
        s->progress_at = seconds;
    }
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string(logged ? "train" : "progress"));
    json_object_set_new(j, "step", json_integer(step));
    if (logged) {
        /* rates count from where a resumed run started */
        double rate = seconds > 0 ? (double)(samples - s->rs.samples) / seconds : 0;
        json_object_set_new(j, "samples", json_integer(samples));
        json_object_set_new(j, "loss", run_json_num(loss));
        json_object_set_new(j, "samples_per_s", run_json_num(rate));
    } else {
        json_object_set_new(j, "steps", json_integer(s->t.steps));
        json_object_set_new(j, "samples", json_integer(samples));
    }
    json_object_set_new(j, "seconds", run_json_num(seconds));
    train_event_emit(s, j);
}

void train_event_eval(ember_trainer *s, int64_t step, const train_eval_result *e)
{
    if (!wanted(s))
        return;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("eval"));
    json_object_set_new(j, "step", json_integer(step));
    json_object_set_new(j, "samples", json_integer(e->samples));
    json_object_set_new(j, "auc", run_json_num(e->auc));
    json_object_set_new(j, "logloss", run_json_num(e->logloss));
    json_object_set_new(j, "teacher_auc", run_json_num(e->teacher_auc));
    json_object_set_new(j, "teacher_logloss", run_json_num(e->teacher_logloss));
    json_object_set_new(j, "seconds", run_json_num(e->seconds));
    train_event_emit(s, j);
}

void train_event_checkpoint(ember_trainer *s, const train_ckpt_saved *c)
{
    if (!wanted(s))
        return;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("checkpoint"));
    json_object_set_new(j, "step", json_integer(c->step));
    json_object_set_new(j, "path", run_json_string(c->path));
    json_object_set_new(j, "mb", run_json_num((double)c->bytes / 1e6));
    json_object_set_new(j, "seconds", run_json_num(c->seconds));
    train_event_emit(s, j);
}
