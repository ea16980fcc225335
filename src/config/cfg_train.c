/*
 * cfg_train.c: the config file's `train` group (docs/training.md, "The
 * loop"): batch and accumulation, steps or epochs, evaluation, logging,
 * the dense optimizer, the learning-rate schedule, early stopping,
 * checkpoints, the embedding schedule and pipeline stages; the built-in
 * task's defaults; and, once every group is read, the task and the model
 * made to follow the tables.
 */
#include <stdio.h>
#include <string.h>

#include "config/cfg_read.h"
#include "model/pipeline.h"

/* The built-in student (docs/training.md, "The loop").  Measured on the
 * default task (one rank, micro-batch 2048): DOT gets within 0.01 AUC of the
 * teacher after about 1.5M samples and to about 0.007 after 3M; the 6M
 * samples of the 3000 default steps leave room for a noisy evaluation.
 * One thread per rank: with batches this small, spinning OpenMP and
 * OpenBLAS workers cost more than they bring on a shared 2-core machine
 * (the cfg_reader thread of src/train/prefetch.c uses the other core). */
void cfg_train_default(cfg_train *t)
{
    memset(t, 0, sizeof *t);
    t->source = CFG_SOURCE_SYNTHETIC;
    t->bad_lines = CTR_BAD_SKIP;
    t->max_bad_fraction = 0.01;
    t->max_bad_lines = -1;
    t->hash_rows = 100000;
    t->synth = ctr_synth_config_default();
    dlrm_config *m = &t->model;
    m->num_dense = t->synth.num_dense;
    m->num_sparse = t->synth.num_sparse;
    m->emb_dim = 16;
    m->num_bottom = 2;
    m->bottom[0] = 64;
    m->bottom[1] = 16;
    m->num_top = 1;
    m->top[0] = 64;
    m->interaction = DENSE_INTERACT_DOT;
    t->emb_optimizer = ember_optimizer_default(EMBER_OPT_ADAGRAD);
    t->emb_optimizer.lr = 0.1f;
    t->emb_init_value = 0.05f;
    t->micro_batch = 2048;
    t->accumulate = 1;
    t->steps = 3000;
    t->eval_every = 500;
    t->hot_refresh_every = 100;
    t->limits = limits_adapt_config_default();
    t->eval_samples = 1 << 16;
    t->dense_optim = dense_optim_config_default(DENSE_ADAM);
    t->dense_optim.lr = 0.004f;
    t->metrics = "ember-train-metrics.jsonl";
    t->plot = "ember-train.png";
}

/* train.lr_schedule = { warmup = N; decay = "cosine"; final = X; every = N; gamma = X; } */
static int read_lr_schedule(cfg_reader *r, const config_setting_t *g, lr_schedule *out)
{
    static const char *const KEYS[] = {"warmup", "decay", "final", "every", "gamma", NULL};
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "train.lr_schedule", "must be a group { warmup = ...; decay = ...; }");
    if (cfg_check_keys(r, g, "train.lr_schedule", KEYS))
        return EMBER_EINVAL;
    lr_schedule s = {0, LR_DECAY_NONE, 0.0f, 1, 0.5f};
    const config_setting_t *m;
    int k;
    double d;
    if ((m = config_setting_get_member(g, "warmup")) &&
        cfg_get_int64(r, m, "train.lr_schedule.warmup", 0, INT64_C(1) << 40, &s.warmup))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "decay"))) {
        if (cfg_get_enum(r, m, "train.lr_schedule.decay", CFG_LR_DECAYS, &k))
            return EMBER_EINVAL;
        s.decay = (lr_decay)k;
    }
    if ((m = config_setting_get_member(g, "final"))) {
        if (cfg_get_double(r, m, "train.lr_schedule.final", 0, 1e6, &d))
            return EMBER_EINVAL;
        s.final = (float)d;
    }
    if ((m = config_setting_get_member(g, "every")) &&
        cfg_get_int64(r, m, "train.lr_schedule.every", 1, INT64_C(1) << 40, &s.every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "gamma"))) {
        if (cfg_get_double(r, m, "train.lr_schedule.gamma", 0, 1e6, &d))
            return EMBER_EINVAL;
        s.gamma = (float)d;
    }
    *out = s;
    return 0;
}

/* train.pipeline = { stages; schedule; virtual; recompute; cuts; balance; }
 * (docs/pipeline.md). */
static int read_pipeline(cfg_reader *r, const config_setting_t *m, cfg_train *t)
{
    static const char *const PIPE_KEYS[] = {"stages", "schedule", "virtual", "recompute", "cuts", "balance", NULL};
    static const char *const PIPE_BALANCE[] = {"time", "memory", NULL}; /* pipe_balance_memory */
    static const char *const PIPE_SCHEDULES[] = {"fill-drain", "1f1b", "interleaved", NULL}; /* pipe_schedule */
    if (config_setting_type(m) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, m, "train.pipeline", "must be a group { stages = 2; schedule = \"1f1b\"; }");
    if (cfg_check_keys(r, m, "train.pipeline", PIPE_KEYS))
        return EMBER_EINVAL;
    const config_setting_t *x;
    int64_t v;
    int e;
    t->pipe_stages = 2, t->pipe_schedule = PIPE_1F1B, t->pipe_virtual = 1;
    if ((x = config_setting_get_member(m, "stages"))) {
        if (cfg_get_int64(r, x, "train.pipeline.stages", 1, 64, &v))
            return EMBER_EINVAL;
        t->pipe_stages = (int32_t)v;
    }
    if ((x = config_setting_get_member(m, "schedule"))) {
        if (cfg_get_enum(r, x, "train.pipeline.schedule", PIPE_SCHEDULES, &e))
            return EMBER_EINVAL;
        t->pipe_schedule = e;
        t->pipe_virtual = pipe_config_default((pipe_schedule)e).virtual_stages;
    }
    if ((x = config_setting_get_member(m, "virtual"))) {
        if (cfg_get_int64(r, x, "train.pipeline.virtual", 1, 64, &v))
            return EMBER_EINVAL;
        if (v > 1 && t->pipe_schedule != PIPE_INTERLEAVED)
            return cfg_fail_at(r, x, "train.pipeline.virtual", "more than 1 needs schedule = \"interleaved\"");
        t->pipe_virtual = (int32_t)v;
    }
    if ((x = config_setting_get_member(m, "recompute")) &&
        cfg_get_bool(r, x, "train.pipeline.recompute", &t->pipe_recompute))
        return EMBER_EINVAL;
    if ((x = config_setting_get_member(m, "cuts"))) {
        int n = config_setting_length(x);
        if (config_setting_type(x) != CONFIG_TYPE_ARRAY || n < 1 || n > 63)
            return cfg_fail_at(r, x, "train.pipeline.cuts", "must be an array of 1..63 block numbers");
        for (int i = 0; i < n; i++) {
            if (cfg_get_int64(r, config_setting_get_elem(x, (unsigned)i), "train.pipeline.cuts", 1, 1 << 20, &v))
                return EMBER_EINVAL;
            t->pipe_cuts[i] = (int32_t)v;
        }
        t->pipe_num_cuts = n;
    }
    if ((x = config_setting_get_member(m, "balance"))) {
        if (cfg_get_enum(r, x, "train.pipeline.balance", PIPE_BALANCE, &e))
            return EMBER_EINVAL;
        if (t->pipe_num_cuts)
            return cfg_fail_at(r, x, "train.pipeline.balance", "picks the cuts: give it or cuts, not both");
        t->pipe_balance_memory = e;
    }
    return 0;
}

/* A step's samples per rank (micro_batch, accumulate), the dense
 * optimizer's sharding, the dense model's memory budget and the embedding
 * forward's schedule. */
static int read_step_shape(cfg_reader *r, const config_setting_t *g, cfg_train *t)
{
    const config_setting_t *m;
    int64_t v;
    if ((m = config_setting_get_member(g, "micro_batch"))) {
        if (cfg_get_int64(r, m, "train.micro_batch", 1, 1 << 24, &v))
            return EMBER_EINVAL;
        t->micro_batch = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "accumulate"))) {
        if (cfg_get_int64(r, m, "train.accumulate", 1, 1 << 16, &v))
            return EMBER_EINVAL;
        t->accumulate = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "optimizer_shards"))) {
        if (cfg_get_int64(r, m, "train.optimizer_shards", 0, 1 << 20, &v))
            return EMBER_EINVAL;
        t->optimizer_shards = (int32_t)v;
        t->optimizer_shards_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "dense_memory_mb"))) {
        if (cfg_get_int64(r, m, "train.dense_memory_mb", 0, (int64_t)1 << 40, &v))
            return EMBER_EINVAL;
        t->dense_memory_mb = v;
    }
    if ((m = config_setting_get_member(g, "schedule"))) {
        int kind;
        if (cfg_get_enum(r, m, "train.schedule", CFG_SCHEDULES, &kind))
            return EMBER_EINVAL;
        t->schedule = (ember_schedule)kind;
    }
    if ((m = config_setting_get_member(g, "reader"))) {
        int kind;
        if (cfg_get_enum(r, m, "train.reader", CFG_READERS, &kind))
            return EMBER_EINVAL;
        t->reader = kind;
    }
    if ((int64_t)t->micro_batch * t->accumulate > (1 << 24))
        return cfg_fail_at(r, g, "train", "micro_batch x accumulate = %lld samples per rank and step is too "
                           "many (at most 16777216)", (long long)t->micro_batch * t->accumulate);
    return 0;
}

/* train.limits = { adapt = "running" | "first" | "off"; every; window;
 * quantile; headroom; max_bytes; }: per-partition limits that follow the
 * data (docs/adaptive.md). */
static int read_limits_adapt(cfg_reader *r, const config_setting_t *g, cfg_train *t)
{
    static const char *const KEYS[] = {"adapt", "every", "window", "quantile", "headroom", "max_bytes", NULL};
    static const char *const MODES[] = {"off", "first", "running", NULL}; /* limits_adapt_mode */
    limits_adapt_config *c = &t->limits;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "train.limits", "must be a group { adapt = \"running\"; every = 100; }");
    if (cfg_check_keys(r, g, "train.limits", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    const int64_t most = INT64_C(1) << 30;
    int e;
    if ((m = config_setting_get_member(g, "adapt"))) {
        if (cfg_get_enum(r, m, "train.limits.adapt", MODES, &e))
            return EMBER_EINVAL;
        c->mode = (limits_adapt_mode)e;
    } else {
        c->mode = LIMITS_ADAPT_RUNNING;
    }
    if ((m = config_setting_get_member(g, "every")) && cfg_get_int64(r, m, "train.limits.every", 1, most, &c->every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "window")) && cfg_get_int64(r, m, "train.limits.window", 1, 1 << 20, &c->window))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "quantile")) &&
        cfg_get_double(r, m, "train.limits.quantile", 0, 1, &c->quantile))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "headroom")) &&
        cfg_get_double(r, m, "train.limits.headroom", 0, 100, &c->headroom))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "max_bytes")) && cfg_get_bytes(r, m, "train.limits.max_bytes", &c->max_bytes))
        return EMBER_EINVAL;
    t->limits_line = (int)config_setting_source_line(g);
    return 0;
}

/* train.replan = { every = 200; window = 4; gain = 0.1; }: the "auto"
 * tables placed again while training (docs/adaptive.md). */
static int read_replan(cfg_reader *r, const config_setting_t *g, cfg_train *t)
{
    static const char *const KEYS[] = {"every", "window", "gain", NULL};
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "train.replan", "must be a group { every = 200; window = 4; gain = 0.1; }");
    if (cfg_check_keys(r, g, "train.replan", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    int64_t v;
    t->replan_every = 200;
    t->replan_window = 4;
    t->replan_gain = 0.1;
    if ((m = config_setting_get_member(g, "every")) &&
        cfg_get_int64(r, m, "train.replan.every", 1, INT64_C(1) << 40, &t->replan_every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "window"))) {
        if (cfg_get_int64(r, m, "train.replan.window", 1, 64, &v))
            return EMBER_EINVAL;
        t->replan_window = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "gain")) && cfg_get_double(r, m, "train.replan.gain", 0, 1, &t->replan_gain))
        return EMBER_EINVAL;
    if (t->replan_window > t->replan_every)
        return cfg_fail_at(r, g, "train.replan", "window %d is longer than every %lld: the statistics read the steps "
                           "since the last re-plan", (int)t->replan_window, (long long)t->replan_every);
    t->replan_line = (int)config_setting_source_line(g);
    return 0;
}

/* How long the run is and what happens every so many steps: steps, hot-row
 * refreshes, evaluations, logging, the learning-rate schedule, epochs. */
static int read_run_length(cfg_reader *r, const config_setting_t *g, cfg_train *t)
{
    const config_setting_t *m;
    const int64_t most = INT64_C(1) << 40;
    if ((m = config_setting_get_member(g, "steps")) && (t->steps_set = 1) &&
        cfg_get_int64(r, m, "train.steps", 0, most, &t->steps))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "hot_refresh_every")) &&
        cfg_get_int64(r, m, "train.hot_refresh_every", 0, most, &t->hot_refresh_every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "eval_every")) && (t->eval_every_set = 1) &&
        cfg_get_int64(r, m, "train.eval_every", 0, most, &t->eval_every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "eval_samples"))) {
        if (cfg_get_int64(r, m, "train.eval_samples", 0, INT64_C(1) << 30, &t->eval_samples))
            return EMBER_EINVAL;
        t->eval_samples_set = 1;
    }
    if ((m = config_setting_get_member(g, "log_every")) &&
        cfg_get_int64(r, m, "train.log_every", 0, most, &t->log_every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "lr_schedule")) && read_lr_schedule(r, m, &t->lr))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "epochs")) &&
        cfg_get_int64(r, m, "train.epochs", 1, INT64_C(1) << 30, &t->epochs))
        return EMBER_EINVAL;
    return 0;
}

/* train.early_stop = { patience; metric; min_delta; }: the group turns
 * early stopping on, so patience is required and at least 1. */
static int read_early_stop(cfg_reader *r, const config_setting_t *m, cfg_train *t)
{
    static const char *const EKEYS[] = {"patience", "metric", "min_delta", NULL};
    static const char *const METRICS[] = {"auc", "logloss", NULL};
    const config_setting_t *x;
    int k;
    if (config_setting_type(m) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, m, "train.early_stop", "must be a group { patience = ...; metric = \"auc\"; }");
    if (cfg_check_keys(r, m, "train.early_stop", EKEYS))
        return EMBER_EINVAL;
    if (!(x = config_setting_get_member(m, "patience")))
        return cfg_fail_at(r, m, "train.early_stop.patience", "missing: the evaluations in a row without a better "
                           "metric before the run stops, 1 or more (leave train.early_stop out to train without "
                           "early stopping)");
    if (cfg_get_int64(r, x, "train.early_stop.patience", 0, INT64_C(1) << 40, &t->patience))
        return EMBER_EINVAL;
    if (t->patience == 0)
        return cfg_fail_at(r, x, "train.early_stop.patience", "must be in 1..1099511627776, got 0 (leave "
                           "train.early_stop out to train without early stopping)");
    if ((x = config_setting_get_member(m, "metric"))) {
        if (cfg_get_enum(r, x, "train.early_stop.metric", METRICS, &k))
            return EMBER_EINVAL;
        t->stop_metric_logloss = k;
    }
    if ((x = config_setting_get_member(m, "min_delta")) &&
        cfg_get_double(r, x, "train.early_stop.min_delta", 0, 1, &t->min_delta))
        return EMBER_EINVAL;
    return 0;
}

/* train.optimizer: the dense optimizer, a kind or a group as a table's
 * optimizer (sgd, adam, momentum or adamw). */
static int read_dense_optimizer(cfg_reader *r, const config_setting_t *m, cfg_train *t)
{
    static const char *const DENSE_OPT[] = {"sgd", "adam", "momentum", "adamw", NULL};
    const config_setting_t *k = m;
    int kind;
    if (config_setting_type(m) == CONFIG_TYPE_GROUP) {
        static const char *const OKEYS[] = {"kind", "lr", "eps", "weight_decay", "beta1", "beta2", "momentum",
                                            "nesterov", NULL};
        if (cfg_check_keys(r, m, "train.optimizer", OKEYS))
            return EMBER_EINVAL;
        if (!(k = config_setting_get_member(m, "kind")))
            return cfg_fail_at(r, m, "train.optimizer.kind", "missing (one of: sgd, adam, momentum, adamw)");
    }
    if (cfg_get_enum(r, k, k == m ? "train.optimizer" : "train.optimizer.kind", DENSE_OPT, &kind))
        return EMBER_EINVAL;
    t->dense_optim = dense_optim_config_default((dense_optim_kind)kind);
    if (config_setting_type(m) != CONFIG_TYPE_GROUP)
        return 0;
    struct { const char *name; float *dst; double lo, hi; } f[] = {
        {"lr", &t->dense_optim.lr, 0, 1e6}, {"eps", &t->dense_optim.eps, 0, 1},
        {"weight_decay", &t->dense_optim.weight_decay, 0, 1e6},
        {"beta1", &t->dense_optim.beta1, 0, 1}, {"beta2", &t->dense_optim.beta2, 0, 1},
        {"momentum", &t->dense_optim.momentum, 0, 0.999999},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const config_setting_t *x = config_setting_get_member(m, f[i].name);
        char sub[64];
        double d;
        snprintf(sub, sizeof sub, "train.optimizer.%s", f[i].name);
        if (x) {
            if (cfg_get_double(r, x, sub, f[i].lo, f[i].hi, &d))
                return EMBER_EINVAL;
            *f[i].dst = (float)d;
        }
    }
    const config_setting_t *nv = config_setting_get_member(m, "nesterov");
    if (nv && cfg_get_bool(r, nv, "train.optimizer.nesterov", &t->dense_optim.nesterov))
        return EMBER_EINVAL;
    return 0;
}

/* What the run writes: the metrics' JSON lines, the plot, checkpoints (how
 * often, how many kept). */
static int read_outputs(cfg_reader *r, const config_setting_t *g, cfg_train *t)
{
    const config_setting_t *m;
    int64_t v;
    if ((m = config_setting_get_member(g, "metrics")) && cfg_read_path(r, m, "train.metrics", &t->metrics))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "plot")) && cfg_read_path(r, m, "train.plot", &t->plot))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "checkpoint_dir"))) {
        if (cfg_read_path(r, m, "train.checkpoint_dir", &t->checkpoint_dir))
            return EMBER_EINVAL;
        t->checkpoint_dir_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "checkpoint_every")) &&
        cfg_get_int64(r, m, "train.checkpoint_every", 0, INT64_C(1) << 40, &t->checkpoint_every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "checkpoint_keep"))) {
        if (cfg_get_int64(r, m, "train.checkpoint_keep", 0, 1 << 20, &v))
            return EMBER_EINVAL;
        t->checkpoint_keep = (int32_t)v;
    }
    return 0;
}

/* train: the loop, part by part in the order its messages come. */
int cfg_read_train(cfg_reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"micro_batch", "accumulate", "optimizer_shards", "dense_memory_mb", "schedule",
                                       "reader", "hot_refresh_every",
                                       "lr_schedule", "early_stop", "keep_best", "epochs",
                                       "steps", "eval_every",
                                       "eval_samples", "log_every", "optimizer", "metrics",
                                       "plot", "checkpoint_dir", "checkpoint_every", "checkpoint_keep",
                                       "plan", "pipeline", "limits", "replan", NULL};
    cfg_train *t = &r->cf->train;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "train", "must be a group { steps = ...; }");
    if (cfg_check_keys(r, g, "train", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    if (((m = config_setting_get_member(g, "pipeline")) && read_pipeline(r, m, t)) || read_step_shape(r, g, t) ||
        read_run_length(r, g, t) || ((m = config_setting_get_member(g, "early_stop")) && read_early_stop(r, m, t)))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "limits")) && read_limits_adapt(r, m, t))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "replan")) && read_replan(r, m, t))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "plan")) && cfg_read_path(r, m, "train.plan", &t->plan_file))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "keep_best"))) {
        if (config_setting_type(m) != CONFIG_TYPE_BOOL)
            return cfg_fail_at(r, m, "train.keep_best", "must be true or false");
        t->keep_best = config_setting_get_bool(m);
        t->keep_best_line = (int)config_setting_source_line(m);
        /* its folder when none is named: this config's own under the working folder */
        char dir[300];
        snprintf(dir, sizeof dir, "%s/%s", TRAIN_DEFAULT_CHECKPOINT_DIR, r->cf->name);
        if (!(t->keep_best_dir = cfg_keep(r, dir)))
            return cfg_fail_at(r, m, "train.keep_best", "out of memory");
    }
    if ((m = config_setting_get_member(g, "optimizer")) && read_dense_optimizer(r, m, t))
        return EMBER_EINVAL;
    return read_outputs(r, g, t);
}

/* With tables: the task and the model follow them (after cfg_read_features). */
int cfg_train_from_tables(cfg_reader *r, config_t *c)
{
    config_file *cf = r->cf;
    cfg_train *t = &cf->train;
    const config_setting_t *syn = config_lookup(c, "data.synthetic"), *m;
    if (!cf->num_features)
        return 0;
    if ((m = config_lookup(c, "model.emb_init_value")))
        return cfg_fail_at(r, m, "model.emb_init_value", "only without `tables` (each table sets its own init)");
    static const char *const PER_FEATURE[] = {"num_sparse", "rows", "alpha", "pooling", NULL};
    for (int i = 0; syn && PER_FEATURE[i]; i++)
        if ((m = config_setting_get_member(syn, PER_FEATURE[i]))) {
            char key[64];
            snprintf(key, sizeof key, "data.synthetic.%s", PER_FEATURE[i]);
            return cfg_fail_at(r, m, key, "only without `tables` (the tables and features set it)");
        }
    if (cf->num_features > CTR_MAX_FEATURES)
        return cfg_fail_at(r, config_lookup(c, "features"), "features",
                       "ember train takes at most %d features, got %d", CTR_MAX_FEATURES, cf->num_features);
    int32_t dim = cf->tables[cf->features[0].table].dim;
    for (int32_t f = 0; f < cf->num_features; f++) {
        const ember_table_config *tb = &cf->tables[cf->features[f].table];
        if (tb->dim != dim || cf->features[f].combiner == EMBER_COMBINER_NONE) {
            snprintf(r->err, r->errlen, "%s:%d: features: feature \"%s\": ember train needs every feature "
                     "pooled (not combiner none) from tables of one dim (%d here, %d for \"%s\")", r->path,
                     cf->feature_extra[f].line, cf->features[f].name, tb->dim, dim, cf->features[0].name);
            return EMBER_EINVAL;
        }
        if (cf->feature_extra[f].weighted && cf->train.source == CFG_SOURCE_SYNTHETIC) {
            snprintf(r->err, r->errlen, "%s:%d: features: feature \"%s\": the synthetic data has no weights (a "
                     "weighted multi_hot column of data.schema has)",
                     r->path, cf->feature_extra[f].line, cf->features[f].name);
            return EMBER_EINVAL;
        }
        int64_t vocab = cf->table_extra[cf->features[f].table].vocab;
        t->synth.keyed[f] = tb->kind == EMBER_TABLE_DYNAMIC;
        if (t->synth.keyed[f] && !vocab && t->source == CFG_SOURCE_SYNTHETIC) /* files bring their own keys */
            return cfg_fail_at(r, config_lookup(c, "tables"), "tables",
                           "dynamic table \"%s\": set keys (the synthetic data's distinct keys)", tb->name);
        t->synth.rows[f] = vocab ? vocab : tb->rows;
        t->synth.hash_rows[f] = !t->synth.keyed[f] && vocab ? tb->rows : 0;
        t->synth.alpha[f] = cf->table_extra[cf->features[f].table].zipf
                                ? cf->table_extra[cf->features[f].table].alpha : 0.0;
        t->synth.pooling[f] = cf->feature_extra[f].pooling < 1 ? 1 : cf->feature_extra[f].pooling;
    }
    t->synth.num_sparse = cf->num_features;
    if ((m = config_lookup(c, "model.emb_dim")) && t->model.emb_dim != dim)
        return cfg_fail_at(r, m, "model.emb_dim", "%d, but the tables' dim is %d", t->model.emb_dim, dim);
    if (!config_lookup(c, "model.bottom"))
        t->model.bottom[t->model.num_bottom - 1] = dim;
    t->model.emb_dim = dim;
    return 0;
}

/* The model's shape after everything is read. */
int cfg_train_finish(cfg_reader *r, config_t *c)
{
    cfg_train *t = &r->cf->train;
    dlrm_config *mc = &t->model;
    mc->num_sparse = t->synth.num_sparse;
    mc->num_dense = t->synth.num_dense;
    if (r->cf->num_features)
        mc->num_sparse = r->cf->num_features;
    if (t->source == CFG_SOURCE_TSV)
        mc->num_dense = 13; /* Criteo; the features are checked against 26 at run time */
    if (mc->bottom[mc->num_bottom - 1] != mc->emb_dim) {
        const config_setting_t *m = config_lookup(c, "model.bottom");
        return cfg_fail_at(r, m ? m : config_lookup(c, "model"), "model.bottom",
                       "the last width must equal the embedding dim %d, got %d", mc->emb_dim,
                       mc->bottom[mc->num_bottom - 1]);
    }
    return 0;
}
