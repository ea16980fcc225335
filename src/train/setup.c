/*
 * setup.c: a training run from settings to a running model (run.h): the
 * data sources of this rank, the embedding tables (the config file's, or
 * one per sparse feature of the data for the built-in student), the dense
 * model and the CTR model (src/model/); and train.epochs made into steps.
 *
 * The data decides the shape: the model takes the schema's dense and
 * sparse counts, and the tables must hold every id the data can produce
 * (rows >= the schema's rows per feature); a feature whose data carries
 * 64-bit keys (schema rows 0) needs a dynamic table, and a dynamic table
 * needs keys.  Failures that only some ranks
 * see (a file one rank cannot open) are agreed before any collective call,
 * with the lowest failing rank's message (run_error.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collection/config.h"
#include "comm/collect.h"
#include "comm/comm.h"
#include "config/data_open.h"
#include "config/train_settings.h"
#include "train/run.h"

/* The evaluation data must fit the training data's model: the same shape,
 * keys where the training data has keys, and ids inside its rows. */
static int check_eval_shape(const cfg_train *t, const ctr_schema *tr, const ctr_schema *e, char *err, size_t errlen)
{
    if (e->num_dense != tr->num_dense || e->num_sparse != tr->num_sparse) {
        snprintf(err, errlen, "%s and %s: the evaluation data does not fit the training data's shape (dense %d vs "
                 "%d, sparse %d vs %d)", t->train_file, t->eval_file, (int)e->num_dense, (int)tr->num_dense,
                 (int)e->num_sparse, (int)tr->num_sparse);
        return EMBER_EINVAL;
    }
    for (int f = 0; f < e->num_sparse; f++) {
        if ((e->rows[f] == 0) != (tr->rows[f] == 0)) {
            snprintf(err, errlen, "%s and %s: feature %s carries %s in the evaluation data but %s in the training "
                     "data", t->train_file, t->eval_file, e->names[f], e->rows[f] ? "row numbers" : "64-bit keys",
                     tr->rows[f] ? "row numbers" : "64-bit keys");
            return EMBER_EINVAL;
        }
        if (e->weighted[f] != tr->weighted[f]) {
            snprintf(err, errlen, "%s and %s: feature %s %s weights in the evaluation data, %s in the training data",
                     t->train_file, t->eval_file, e->names[f], e->weighted[f] ? "carries" : "carries no",
                     tr->weighted[f] ? "it carries them" : "none");
            return EMBER_EINVAL;
        }
        if (e->rows[f] > tr->rows[f]) {
            snprintf(err, errlen, "%s and %s: feature %s has %lld rows in the evaluation data, %lld in the training "
                     "data", t->train_file, t->eval_file, e->names[f], (long long)e->rows[f], (long long)tr->rows[f]);
            return EMBER_EINVAL;
        }
    }
    return 0;
}

/* The training and evaluation data's share: a rank's own, or with
 * pipeline stages its replica group's (every stage of a group reads the
 * same samples). */
static void train_share(const ember_trainer *s, int32_t *r, int32_t *w)
{
    const int32_t S = s->t.pipe_stages > 1 ? s->t.pipe_stages : 1;
    *r = s->rank / S;
    *w = s->size / S;
}

/* A text evaluation file's first lines read once at open (the evaluation
 * rewinds before it reads), so that one past the bad-line limit
 * (data.max_bad_fraction, max_bad_lines) stops the run before it is spent,
 * not at the first evaluation.  The training file's first batch is read at
 * the first step. */
static int probe_eval(ember_trainer *s, char *err, size_t errlen)
{
    ctr_batch b;
    if (!s->eval_src || !s->t.eval_file || ctr_file_is_binary(s->t.eval_file) || s->t.bad_lines != CTR_BAD_SKIP)
        return 0; /* under "fail" the evaluation meets its first bad line, if it reads that far */
    /* no further than the evaluation reads: a bad line past eval_samples was never the run's business */
    int64_t n = s->t.eval_samples < CTR_BAD_JUDGE_LINES ? s->t.eval_samples : CTR_BAD_JUDGE_LINES;
    if (n > 0 && ctr_source_next(s->eval_src, (int32_t)n, &b, err, errlen) < 0)
        return EMBER_EIO;
    ctr_source_rewind(s->eval_src);
    return 0;
}

static int open_sources(ember_trainer *s, char *err, size_t errlen)
{
    const cfg_train *t = &s->t;
    int32_t tr, tw;
    if (t->pipe_stages > 1 && s->size % t->pipe_stages) {
        snprintf(err, errlen, "train.pipeline.stages %d does not divide the world of %d", (int)t->pipe_stages,
                 (int)s->size);
        return EMBER_EINVAL;
    }
    train_share(s, &tr, &tw);
    switch (t->source) {
    case CFG_SOURCE_SYNTHETIC:
        if (ctr_source_synth(&t->synth, 0, tr, tw, &s->train_src, err, errlen) ||
            ctr_source_synth(&t->synth, 1, tr, tw, &s->eval_src, err, errlen))
            return EMBER_EINVAL;
        break;
    default:
        if (data_open_file(s->cf, t, t->train_file, DATA_FILE_TRAIN, NULL, tr, tw, &s->train_src, err, errlen) ||
            (t->eval_file &&
             data_open_file(s->cf, t, t->eval_file, DATA_FILE_EVAL, s->train_src, tr, tw, &s->eval_src, err, errlen)))
            return EMBER_EINVAL;
        break;
    }
    if (data_shuffle_train(t, s->train_src, err, errlen) || probe_eval(s, err, errlen))
        return EMBER_EINVAL;
    s->schema = *ctr_source_schema(s->train_src);
    if (data_input_schema(s->cf, t, t->train_file, s->train_src, &s->input_kind, &s->input_cols, &s->input_schema, err,
                          errlen) != EMBER_OK)
        return EMBER_EINVAL;
    return s->eval_src && t->eval_file ? check_eval_shape(t, &s->schema, ctr_source_schema(s->eval_src), err, errlen) : 0;
}

/* Feature f of the config against the data: a dynamic table takes 64-bit
 * keys (schema rows 0: TSV with the table's rows 0, a binary file of format
 * version 2 converted with --rows 0 for the feature), a fixed table row
 * numbers below its rows. */
static int check_feature(const ember_trainer *s, int32_t f, char *err, size_t errlen)
{
    const config_file *cf = s->cf;
    const ember_table_config *tb = &cf->tables[cf->features[f].table];
    const int64_t rows = s->schema.rows[f];
    const char *data = s->t.train_file ? s->t.train_file : "the synthetic data", *name = s->schema.names[f];
    const int dynamic = tb->kind == EMBER_TABLE_DYNAMIC;
    if (dynamic && rows != 0) {
        snprintf(err, errlen, "%s:%d: feature \"%s\": table \"%s\" is dynamic but the data's ids are row numbers "
                 "(%s: %s has %lld rows; `ember convert` with --rows 0 for %s keeps its 64-bit keys)", cf->path,
                 cf->feature_extra[f].line, cf->features[f].name, tb->name, data, name, (long long)rows, name);
        return EMBER_EINVAL;
    }
    if (!dynamic && rows == 0) {
        snprintf(err, errlen, "%s:%d: feature \"%s\": table \"%s\" is fixed but the data's ids are 64-bit keys "
                 "(%s: %s has rows 0)", cf->path, cf->feature_extra[f].line, cf->features[f].name, tb->name, data,
                 name);
        return EMBER_EINVAL;
    }
    if ((s->schema.weighted[f] != 0) != (cf->feature_extra[f].weighted != 0)) {
        snprintf(err, errlen, "%s:%d: feature \"%s\": the data's ids %s weights, the feature is %s (weighted = %s)",
                 cf->path, cf->feature_extra[f].line, cf->features[f].name, s->schema.weighted[f] ? "carry" : "carry no",
                 cf->feature_extra[f].weighted ? "weighted" : "not weighted",
                 s->schema.weighted[f] ? "true" : "false");
        return EMBER_EINVAL;
    }
    if (!dynamic && tb->rows < rows) {
        snprintf(err, errlen, "%s:%d: feature \"%s\": the data's ids go up to %lld, table \"%s\" has %lld rows",
                 cf->path, cf->feature_extra[f].line, cf->features[f].name, (long long)rows - 1, tb->name,
                 (long long)tb->rows);
        return EMBER_EINVAL;
    }
    return 0;
}

/* --precision, --rounding, --state-precision: every table's (the last:
 * every table with per-element state), its own setting too (the file's
 * tables copied first: the config stays as read). */
static int force_precision(ember_trainer *s, char *err, size_t errlen)
{
    if (!s->t.precision_all && !s->t.rounding_all && !s->t.state_precision_all)
        return 0;
    int32_t n = s->cc.num_tables;
    if (s->cc.tables != s->tables) {
        if (n > CTR_MAX_FEATURES) {
            snprintf(err, errlen, "--precision/--rounding/--state-precision: %d tables, at most %d here", (int)n,
                     CTR_MAX_FEATURES);
            return EMBER_EINVAL;
        }
        memcpy(s->tables, s->cc.tables, sizeof *s->tables * (size_t)n);
        s->cc.tables = s->tables;
    }
    for (int32_t t = 0; t < n; t++) {
        if (s->t.precision_all)
            s->tables[t].precision = s->t.emb_precision;
        if (s->t.rounding_all)
            s->tables[t].rounding = s->t.emb_rounding;
        if (s->t.state_precision_all && ember_element_state(s->tables[t].optimizer.kind))
            s->tables[t].state_precision = s->t.emb_state_precision;
    }
    return 0;
}

/* The dense model against the machine and the budget, before anything is
 * allocated (a model that cannot fit would otherwise grow until the kernel
 * kills the process): every rank of the node holds its blocks (held), a
 * sharded optimizer state its share (rounded up).  train.dense_memory_mb
 * caps a rank's parameters, gradients and optimizer state.  Agreed. */
static int check_dense_memory(ember_trainer *s, model_config *tc, const uint8_t *held, char *err, size_t errlen)
{
    const cfg_train *t = &s->t;
    const int32_t shards = t->optimizer_shards > 0 ? t->optimizer_shards : 1;
    const int32_t state = (dense_optim_state_floats(t->dense_optim.kind) + shards - 1) / shards;
    const int64_t need = dlrm_memory_bytes(&t->model, held, t->micro_batch, state);
    /* the budget's figure: what model_get_memory will report, sharded state as dense_sync divides it */
    const int32_t S = t->pipe_stages > 1 ? t->pipe_stages : 1;
    model_memory mm = {0, 0, 0, 0};
    char perr[300];
    const int64_t params = model_plan_memory(tc, &t->model, s->rank % S, s->size / S, &mm, perr, sizeof perr) == 0
                               ? mm.params + mm.grads + mm.state
                               : dlrm_memory_bytes(&t->model, held, 0, state);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    int failed = need > 0 && ram > 0 && (double)need * s->local_ranks > ram;
    if (failed)
        snprintf(err, errlen, "the dense model needs %.1f GiB of this machine (parameters, gradients, optimizer "
                 "state and the activations of a micro-batch of %d, times its %d ranks), more than its %.1f GiB of "
                 "memory: make its layers narrower or the micro-batch smaller, or cut it into pipeline stages",
                 (double)need * s->local_ranks / 1073741824.0, (int)t->micro_batch, (int)s->local_ranks,
                 ram / 1073741824.0);
    int64_t worst = params; /* the same on every rank, so that each names the busiest */
    if (ember_comm_reduce_i64(s->world, &worst, 1, EMBER_REDUCE_MAX) != EMBER_OK)
        worst = params;
    if (!failed && t->dense_memory_mb > 0 && worst > t->dense_memory_mb * 1048576) {
        failed = 1;
        snprintf(err, errlen, "train.dense_memory_mb: the dense model's parameters, gradients and optimizer state "
                 "take %.1f MiB on %s rank, more than the %lld MiB allowed%s", (double)worst / 1048576.0,
                 t->pipe_stages > 1 ? "its busiest" : "every", (long long)t->dense_memory_mb,
                 t->pipe_stages > 1 ? ": more pipeline stages hold less each (train.pipeline.stages)"
                 : shards > 1       ? ": cut it into pipeline stages (train.pipeline.stages)"
                                    : ": cut it into pipeline stages (train.pipeline.stages) or shard its optimizer "
                                      "state (train.optimizer_shards)");
    }
    return run_agree(s, failed, EMBER_ENOMEM, err);
}

/* The collection config: the file's tables, or one table per feature. */
static int build_tables(ember_trainer *s, char *err, size_t errlen)
{
    const ctr_schema *sc = &s->schema;
    const config_file *cf = s->cf;
    if (cf && cf->num_features) {
        if (cf->num_features != sc->num_sparse) {
            snprintf(err, errlen, "%s: %d features, but the data has %d sparse features", cf->path,
                     cf->num_features, sc->num_sparse);
            return EMBER_EINVAL;
        }
        for (int32_t f = 0; f < cf->num_features; f++)
            if (check_feature(s, f, err, errlen))
                return EMBER_EINVAL;
        s->cc = cf->coll;
        return force_precision(s, err, errlen);
    }
    s->cc = ember_collection_config_default();
    for (int32_t f = 0; f < sc->num_sparse; f++)
        if (sc->rows[f] == 0) {
            snprintf(err, errlen, "%s: feature %s carries 64-bit keys (rows 0): train it with a config whose "
                     "table for it is dynamic (docs/dynamic.md)", s->t.train_file ? s->t.train_file : "data",
                     sc->names[f]);
            return EMBER_EINVAL;
        }
    for (int32_t f = 0; f < sc->num_sparse; f++) {
        char *tn = s->names[0][f], *fn = s->names[1][f];
        if (sc->names[f][0])
            snprintf(fn, sizeof s->names[1][f], "%.31s", sc->names[f]);
        else
            snprintf(fn, sizeof s->names[1][f], "f%d", (int)f);
        snprintf(tn, sizeof s->names[0][f], "emb_%.31s", fn);
        ember_table_config *tb = &s->tables[f];
        *tb = ember_table_config_default();
        tb->name = tn;
        tb->rows = sc->rows[f];
        tb->dim = s->t.model.emb_dim;
        tb->init = EMBER_INIT_UNIFORM;
        tb->init_value = s->t.emb_init_value;
        tb->optimizer = s->t.emb_optimizer;
        tb->precision = s->t.emb_precision;
        tb->rounding = s->t.emb_rounding;
        if (ember_element_state(tb->optimizer.kind))
            tb->state_precision = s->t.emb_state_precision;
        s->features[f].name = fn;
        s->features[f].table = f;
        s->features[f].combiner = EMBER_COMBINER_SUM;
    }
    s->cc.tables = s->tables;
    s->cc.num_tables = sc->num_sparse;
    s->cc.features = s->features;
    s->cc.num_features = sc->num_sparse;
    s->cc.seed = s->t.model.seed;
    if (cf) { /* the file's SSD tier rules apply to the built-in tables too */
        s->cc.ssd_min_bytes = cf->coll.ssd_min_bytes;
        s->cc.memory_budget = cf->coll.memory_budget;
        s->cc.ssd_dir = cf->coll.ssd_dir;
        s->cc.ssd_cache_bytes = cf->coll.ssd_cache_bytes;
        s->cc.ssd_policy = cf->coll.ssd_policy;
        s->cc.lookahead = cf->coll.lookahead;
        s->cc.lookahead_max = cf->coll.lookahead_max;
        s->cc.io_threads = cf->coll.io_threads;
    }
    return force_precision(s, err, errlen);
}

int train_setup_open(ember_trainer *s)
{
    char err[768] = "";
    int failed = open_sources(s, err, sizeof err);
    if (run_agree(s, failed, EMBER_EIO, err))
        return 1;
    /* the data, the same on every rank, decides the shape */
    failed = build_tables(s, err, sizeof err);
    if (run_agree(s, failed, EMBER_EFORMAT, err))
        return 1;
    s->t.model.num_dense = s->schema.num_dense;
    s->t.model.num_sparse = s->schema.num_sparse;
    failed = train_plan_tables(s, train_global_batch(s), err, sizeof err);
    if (run_agree(s, failed, EMBER_EFORMAT, err))
        return 1;
    s->cc.world = s->world;
    s->cc.threads = s->threads;
    s->cc.schedule = s->t.schedule;
    failed = s->t.pipe_stages > 1 && s->t.schedule != EMBER_SCHEDULE_BLOCKING;
    if (failed)
        snprintf(err, sizeof err, "train.pipeline needs the blocking schedule (train.schedule = \"%s\")",
                 config_schedule_name(s->t.schedule));
    if (run_agree(s, failed, EMBER_EFORMAT, err))
        return 1;
    model_config tc = {s->t.micro_batch, s->t.accumulate, s->t.dense_optim, s->threads, s->blas_threads,
                       s->t.optimizer_shards, s->t.pipe_stages, s->t.pipe_schedule, s->t.pipe_virtual,
                       s->t.pipe_recompute, s->t.pipe_num_cuts, {0}, s->t.pipe_balance_memory};
    memcpy(tc.pipe_cuts, s->t.pipe_cuts, sizeof tc.pipe_cuts);
    /* the blocks this rank holds (its pipeline stage's; the balance rule measures here) */
    uint8_t held[DENSE_MAX_BLOCKS];
    int st = model_plan_dense(&tc, &s->t.model, s->world, held, err, sizeof err);
    if (run_agree(s, st != EMBER_OK, st, err))
        return 1;
    memcpy(s->t.pipe_cuts, tc.pipe_cuts, sizeof tc.pipe_cuts); /* the balanced cuts, for the start event */
    s->t.pipe_num_cuts = tc.pipe_num_cuts;
    if (check_dense_memory(s, &tc, held, err, sizeof err))
        return 1;
    st = ember_collection_create(&s->cc, &s->coll);
    snprintf(err, sizeof err, "%s", st == EMBER_OK ? "" : ember_errmsg(NULL));
    if (run_agree(s, st != EMBER_OK, st, err))
        return 1;
    failed = dlrm_create_part(&s->t.model, held, &s->dense, err, sizeof err) != 0;
    if (run_agree(s, failed, EMBER_EFORMAT, err))
        return 1;
    st = model_create(&tc, s->coll, s->dense, &s->model, err, sizeof err);
    if (run_agree(s, st != EMBER_OK, st, err) || train_limits_open(s))
        return 1;
    failed = train_replan_open(s, err, sizeof err) != 0;
    if (run_agree(s, failed, EMBER_EFORMAT, err))
        return 1;
    /* every rank's dense memory, for the start event */
    model_memory mm;
    model_get_memory(s->model, &mm);
    int64_t mine[4] = {mm.params, mm.grads, mm.state, mm.activations}, n = 0;
    st = ember_comm_gather_i64(s->world, mine, 4, &s->dense_memory, &n);
    return run_agree(s, st != EMBER_OK, st, "out of memory");
}

void train_setup_close(ember_trainer *s)
{
    train_limits_close(s);
    train_replan_close(s);
    model_destroy(s->model);
    dlrm_destroy(s->dense);
    ember_collection_destroy(s->coll);
    ctr_source_destroy(s->train_src);
    ctr_source_destroy(s->eval_src);
    config_file_free(s->cf);
    free(s->input_cols);
    free(s->dense_memory);
    s->dense_memory = NULL;
    s->input_cols = NULL;
    s->model = NULL;
    s->dense = NULL;
    s->coll = NULL;
    s->train_src = s->eval_src = NULL;
    s->cf = NULL;
}

int64_t train_global_batch(const ember_trainer *s)
{
    int32_t r, w;
    train_share(s, &r, &w);
    return (int64_t)s->t.micro_batch * s->t.accumulate * w;
}

int train_epochs_to_steps(ember_trainer *s)
{
    cfg_train *t = &s->t;
    ctr_position pos;
    ctr_source_tell(s->train_src, &pos);
    /* the largest share (a rank whose share runs out first rewinds, as
     * always), and the file's samples for the summary's epoch count */
    int64_t share[2] = {pos.end - pos.begin, pos.end - pos.begin}; /* max, sum */
    int cst = ember_comm_reduce_i64(s->world, &share[0], 1, EMBER_REDUCE_MAX);
    if (cst == EMBER_OK)
        cst = ember_comm_reduce_i64(s->world, &share[1], 1, EMBER_REDUCE_SUM);
    if (run_agree(s, cst != EMBER_OK, EMBER_ECOMM, cst != EMBER_OK ? s->world->errmsg : ""))
        return 1;
    /* every stage of a pipeline's replica group reads the same share */
    s->file_samples = t->source == CFG_SOURCE_SYNTHETIC ? 0 : share[1] / (t->pipe_stages > 1 ? t->pipe_stages : 1);
    if (t->epochs <= 0 && !t->steps_set && t->source != CFG_SOURCE_SYNTHETIC && share[0] > 0) {
        t->epochs = TRAIN_DEFAULT_EPOCHS; /* a file's size says how long, not the built-in task's 3000 steps */
        s->epochs_default = 1;
    }
    if (t->epochs <= 0)
        return 0;
    if (t->source == CFG_SOURCE_SYNTHETIC || share[0] == 0) {
        run_fail_rank(s, 0, EMBER_EFORMAT, "train.epochs needs a training file with samples (the built-in task is "
                      "an endless stream: give train.steps)");
        return 1;
    }
    int64_t kb = (int64_t)t->micro_batch * t->accumulate;
    t->steps = t->epochs * ((share[0] + kb - 1) / kb);
    if (s->epochs_default && !t->eval_every_set) /* the default length: its one evaluation, at the end */
        t->eval_every = 0;
    return 0;
}
