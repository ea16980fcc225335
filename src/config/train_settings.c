/*
 * train_settings.c: a run's settings (train_settings.h): the config's train
 * group, or the built-in task's (cfg_train_default), then the overrides.
 *
 * The overrides win over the config (steps over its epochs too).  A
 * training file named by an override is read by its first bytes (binary,
 * else text by the config's data.schema, else Criteo TSV); evaluation on a
 * file takes all of it unless told otherwise.  Combinations that cannot
 * make a run (an eval file without training data, checkpoint options
 * without a folder, too many samples per step) are refused here, before
 * anything is opened.
 */
#include <stdio.h>
#include <string.h>

#include "config/cfg_read.h"
#include "config/train_settings.h"

/* The overrides of the schedule, the learning rates and the batch. */
static void apply_step_overrides(cfg_train *t, const ember_train_overrides *o)
{
    if (o->steps >= 0) { /* the command line wins over the config's epochs too */
        t->steps = o->steps;
        t->steps_set = 1;
        t->epochs = 0;
    }
    if (o->micro_batch >= 0)
        t->micro_batch = o->micro_batch;
    if (o->accumulate >= 0)
        t->accumulate = o->accumulate;
    if (o->optimizer_shards >= 0)
        t->optimizer_shards = o->optimizer_shards;
    if (o->schedule)
        t->schedule = (ember_schedule)config_schedule_parse(o->schedule);
    if (o->reader)
        t->reader = config_name_parse(CFG_READERS, o->reader);
    if (o->lr_warmup >= 0)
        t->lr.warmup = o->lr_warmup;
    if (o->precision) {
        t->emb_precision = (ember_row_precision)config_name_parse(CFG_PRECISIONS, o->precision);
        t->precision_all = 1;
    }
    if (o->state_precision) {
        t->emb_state_precision = (ember_row_precision)config_name_parse(CFG_PRECISIONS, o->state_precision);
        t->state_precision_all = 1;
    }
    if (o->rounding) {
        t->emb_rounding = (ember_rounding)config_name_parse(CFG_ROUNDINGS, o->rounding);
        t->rounding_all = 1;
    }
    if (o->lr_decay)
        t->lr.decay = !strcmp(o->lr_decay, "linear")   ? LR_DECAY_LINEAR
                      : !strcmp(o->lr_decay, "cosine") ? LR_DECAY_COSINE
                                                       : LR_DECAY_NONE;
}

/* The data files and evaluation.  0, or a status with err. */
static int apply_data_overrides(cfg_train *t, const char *config_path, const ember_train_overrides *o, char *err,
                                size_t errlen)
{
    if (o->train_file || o->eval_file) { /* files for the config's data, or the built-in Criteo layout's */
        if (o->train_file) {
            t->train_file = o->train_file;
            t->train_file_line = 0; /* the command line's: read by its first bytes */
        }
        if (o->eval_file) {
            t->eval_file = o->eval_file;
            t->eval_file_line = 0;
        }
        if (!t->train_file) {
            snprintf(err, errlen, "--eval-file needs training data too (--train-file, or a config's "
                                  "data.train_file)");
            return EMBER_EINVAL;
        }
        if (o->train_file || t->source == CFG_SOURCE_SYNTHETIC) /* by the file's first bytes */
            t->source = ctr_file_is_binary(t->train_file) ? CFG_SOURCE_BINARY
                        : t->schema.num_columns          ? CFG_SOURCE_TEXT
                                                         : CFG_SOURCE_TSV;
    }
    if (t->source != CFG_SOURCE_SYNTHETIC && !t->train_file) { /* a schema alone serves ember convert */
        if (t->file_source_line)
            snprintf(err, errlen, "%s:%d: data.train_file: missing (data.source = \"%s\" reads a file): set it, or "
                     "give --train-file", config_path ? config_path : "the config", t->file_source_line,
                     config_source_name(t->source));
        else
            snprintf(err, errlen, "%s: data.train_file: missing (data.source = \"%s\" reads a file): set it, or "
                     "give --train-file", config_path ? config_path : "the config", config_source_name(t->source));
        return EMBER_EFORMAT;
    }
    if (o->eval_every >= 0) {
        t->eval_every = o->eval_every;
        t->eval_every_set = 1;
    }
    if (o->eval_samples >= 0)
        t->eval_samples = o->eval_samples;
    else if (t->source != CFG_SOURCE_SYNTHETIC && !t->eval_samples_set)
        t->eval_samples = CFG_EVAL_ALL; /* a file: all of it, unless told otherwise */
    if (o->metrics)
        t->metrics = strcmp(o->metrics, "none") ? o->metrics : "";
    if (o->plot)
        t->plot = strcmp(o->plot, "none") ? o->plot : "";
    return 0;
}

/* Checkpoints.  0, or a status with err: EMBER_EINVAL when the command
 * line is at fault, EMBER_EFORMAT when the config is. */
static int apply_checkpoint_overrides(cfg_train *t, const char *config_path, const ember_train_overrides *o,
                                      char *err, size_t errlen)
{
    if (o->checkpoint_dir)
        t->checkpoint_dir = o->checkpoint_dir;
    if (t->checkpoint_dir && !t->checkpoint_dir[0])
        t->checkpoint_dir = NULL;
    if (t->keep_best && !t->checkpoint_dir) { /* keep_best comes from the config alone */
        const char *cfg = config_path ? config_path : "the config";
        if (o->checkpoint_dir) { /* --checkpoint-dir '' took the config's folder away */
            snprintf(err, errlen, "--checkpoint-dir '': no checkpoint folder, but train.keep_best (%s:%d) needs one",
                     cfg, t->keep_best_line);
            return EMBER_EINVAL;
        }
        t->checkpoint_dir = t->keep_best_dir; /* in the working folder, as the metrics and the plot */
    }
    if (o->checkpoint_every >= 0)
        t->checkpoint_every = o->checkpoint_every;
    if (o->keep >= 0)
        t->checkpoint_keep = o->keep;
    if (!t->checkpoint_dir && (o->resume || o->checkpoint_every >= 0 || o->keep >= 0)) {
        snprintf(err, errlen, "%s needs --checkpoint-dir (or train.checkpoint_dir in the config)",
                 o->resume ? "--resume" : o->keep >= 0 ? "--keep" : "--checkpoint-every");
        return EMBER_EINVAL;
    }
    return 0;
}

/* The dense optimizer's shard groups against the world: named by the
 * option or by the config's key. */
static int check_optimizer_shards(const cfg_train *t, const char *config_path, const ember_train_overrides *o,
                                  int32_t world, char *err, size_t errlen)
{
    const int32_t g = t->optimizer_shards, S = t->pipe_stages > 1 ? t->pipe_stages : 1;
    if (g <= 0 || world % S || (world / S) % g == 0)
        return 0; /* stages that do not divide the world are the pipeline's to name */
    char what[160]; /* what g must divide */
    if (S > 1)
        snprintf(what, sizeof what, "the %d replicas of each of the %d pipeline stages (a world of %d; 0: replicated "
                 "state)", (int)(world / S), (int)S, (int)world);
    else
        snprintf(what, sizeof what, "the world of %d rank%s (0: replicated state)", (int)world, world == 1 ? "" : "s");
    if (o->optimizer_shards >= 0) {
        snprintf(err, errlen, "--optimizer-shards %d: groups of %d ranks do not divide %s",
                 (int)g, (int)g, what);
        return EMBER_EINVAL;
    }
    snprintf(err, errlen, "%s:%d: train.optimizer_shards: groups of %d ranks do not divide %s",
             config_path ? config_path : "the config", t->optimizer_shards_line, (int)g, what);
    return EMBER_EFORMAT;
}

int train_settings_make(config_file *cf, const char *config_path, const ember_train_overrides *o, int32_t world,
                        train_settings *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (cf) {
        if (cf->train.error[0]) {
            snprintf(err, errlen, "%s", cf->train.error);
            return EMBER_EFORMAT;
        }
        if (config_file_check_folders(cf, err, errlen)) /* before any store file is created */
            return EMBER_EFORMAT;
        s->t = cf->train;
        s->name = cf->name;
    } else {
        cfg_train_default(&s->t);
        s->name = "synthetic";
    }
    cfg_train *t = &s->t;
    apply_step_overrides(t, o);
    char lerr[200];
    if (lr_schedule_check(&t->lr, lerr, sizeof lerr)) {
        snprintf(err, errlen, "%s", lerr);
        return EMBER_EINVAL;
    }
    int st = apply_data_overrides(t, config_path, o, err, errlen);
    if (!st)
        st = apply_checkpoint_overrides(t, config_path, o, err, errlen);
    if (!st)
        st = check_optimizer_shards(t, config_path, o, world, err, errlen);
    if (st)
        return st;
    s->resume = o->resume;
    if (o->seed >= 0) {
        t->model.seed = (uint64_t)o->seed;
        t->synth.seed = (uint64_t)o->seed;
        if (cf)
            cf->coll.seed = (uint64_t)o->seed;
    }
    if ((int64_t)t->micro_batch * t->accumulate > (1 << 24)) {
        snprintf(err, errlen, "micro-batch %d x accumulate %d is too many samples per rank and step",
                 (int)t->micro_batch, (int)t->accumulate);
        return EMBER_EINVAL;
    }
    /* one thread unless asked: see cfg_train_default */
    s->threads = o->threads;
    if (s->threads < 1 && cf && cf->coll.threads > 0)
        s->threads = cf->coll.threads;
    if (s->threads < 1)
        s->threads = 1;
    s->blas_threads = o->blas_threads > 0 ? o->blas_threads : 1;
    return 0;
}
