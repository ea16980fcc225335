/*
 * train_ckpt.c: `ember train`'s checkpoints and --resume (train_tool.h;
 * docs/training.md, "Checkpoints and resume").
 *
 * A checkpoint is ember_save's (the tables, their optimizer state and step
 * count) plus blobs with the rest of the run's state, so that a resumed run
 * takes exactly the steps the uninterrupted run would have taken:
 *
 *   train.fingerprint  text, "key value" per line: the settings that decide
 *                      the result (data source, seeds, model, batch, dense
 *                      optimizer) and, marked soft, the world and threads
 *   train.state        int64[8]: magic, version, step, samples so far, dense
 *                      parameters, dense optimizer step, its state floats, 0
 *   dense.params       the dense model's parameters (dlrm_params)
 *   model.json         the model description (src/infer/model.h): what the
 *                      predictor builds its collection and dense model from
 *   dense.optim        the dense optimizer's state (Adam: m then v), if any
 *   data.position      per rank: int64[6]: magic, version, then ctr_position
 *                      (next, epochs, begin, end) after the last batch a
 *                      step consumed (train_prefetch_position: the reader
 *                      thread's read-ahead does not count)
 *
 * The dense model and optimizer are replicated, so rank 0 saves them once.
 * The synthetic source has no other state (a sample is a function of the
 * seed and its global index) and neither has evaluation (its source starts
 * from the beginning each time).
 *
 * Resume: the newest complete checkpoint under the folder is opened (every
 * file's checksum verified), its fingerprint compared line by line with this
 * run's (a difference fails, naming the key and both values; a different
 * world or thread count is allowed with a note, since the result then is
 * not bit-identical), then ember_load, the dense blobs and the data
 * position.  Each rank opens the checkpoint itself; failures are agreed
 * before every collective call.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "infer/model.h"
#include "train/dense_sync.h"
#include "train_tool.h"

#define STATE_MAGIC 0x4e49415254424d45LL /* "EMBTRAIN" little-endian */
#define POS_MAGIC 0x50415441444d4245LL   /* "EBMDATAP" little-endian */
#define BEST_MAGIC 0x5453454254424d45LL  /* "EMBTBEST" little-endian */
#define BLOB_VERSION 1

/* ------------------------------------------------------------ fingerprint */

static void add(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

/* The shortest decimal that reads back as x (readable fingerprints). */
static const char *flt(float x, char buf[32])
{
    for (int prec = 6; prec < 9; prec++) {
        snprintf(buf, 32, "%.*g", prec, (double)x);
        if (strtof(buf, NULL) == x)
            return buf;
    }
    snprintf(buf, 32, "%.9g", (double)x);
    return buf;
}

static void add_widths(char *buf, size_t n, const char *key, int32_t k, const int32_t *w)
{
    add(buf, n, "%s ", key);
    for (int32_t i = 0; i < k; i++)
        add(buf, n, "%s%d", i ? "-" : "", (int)w[i]);
    add(buf, n, "%s\n", k ? "" : "none");
}

/* The run's fingerprint: "key value\n" lines; keys after "soft" only warn. */
static void fingerprint(const tool_ctx *ctx, const train_setup *s, char *buf, size_t n)
{
    const cfg_train *t = &s->t;
    const dlrm_config *m = dlrm_get_config(s->model);
    buf[0] = '\0';
    add(buf, n, "source %s\n", config_source_name(t->source));
    if (t->source == CFG_SOURCE_SYNTHETIC) {
        const ctr_synth_config *c = &t->synth;
        add(buf, n, "data_seed %llu\n", (unsigned long long)c->seed);
        add(buf, n, "synthetic_features %d dense, %d sparse\n", (int)c->num_dense, (int)c->num_sparse);
        add(buf, n, "synthetic_rows");
        for (int32_t f = 0; f < c->num_sparse; f++)
            add(buf, n, "%s%lld", f ? "," : " ", (long long)c->rows[f]);
        add(buf, n, "\nsynthetic_alpha");
        for (int32_t f = 0; f < c->num_sparse; f++)
            add(buf, n, "%s%.17g", f ? "," : " ", c->alpha[f]);
        add(buf, n, "\nsynthetic_pooling");
        for (int32_t f = 0; f < c->num_sparse; f++)
            add(buf, n, "%s%.17g", f ? "," : " ", c->pooling[f]);
        add(buf, n, "\nsynthetic_teacher dim %d, hidden %d, scale %.17g, ctr %.17g\n", (int)c->teacher_dim,
            (int)c->teacher_hidden, c->teacher_scale, c->ctr_rate);
    } else {
        add(buf, n, "train_file %s\n", t->train_file ? t->train_file : "");
        if (t->source == CFG_SOURCE_TSV)
            add(buf, n, "tsv bad_lines %s, hash_rows %lld\n", t->bad_lines == CTR_BAD_FAIL ? "fail" : "skip",
                (long long)t->hash_rows);
        if (t->source == CFG_SOURCE_TEXT) { /* what the schema makes of each column */
            add(buf, n, "text bad_lines %s, format %s, header %d, max_line %d\n",
                t->bad_lines == CTR_BAD_FAIL ? "fail" : "skip", t->schema.delimiter == ',' ? "csv" : "tsv",
                t->schema.header, (int)t->schema.max_line);
            for (int32_t c = 0; c < t->schema.num_columns; c++) {
                const ctr_column *k = &t->schema_cols[c];
                add(buf, n, "column %s type %d label %d transform %d min %.17g max %.17g stats %d mean %.17g std "
                    "%.17g encoding %d separator %d weighted %d rows %lld\n", k->name, (int)k->type, k->float_label,
                    (int)k->transform, k->min, k->max, k->has_stats, k->mean, k->std, (int)k->encoding,
                    (int)k->separator, k->weighted, (long long)k->rows);
            }
        }
        if (t->shuffle) /* only when on: a shuffled position is an ordinal, not a sample (older ones stay equal) */
            add(buf, n, "shuffle on\n");
    }
    add(buf, n, "seed %llu\n", (unsigned long long)m->seed);
    add(buf, n, "model %d dense, %d sparse, emb_dim %d, %s\n", (int)m->num_dense, (int)m->num_sparse,
        (int)m->emb_dim, m->interaction == DENSE_INTERACT_DOT ? "dot" : "cat");
    add_widths(buf, n, "bottom", m->num_bottom, m->bottom);
    add_widths(buf, n, "top", m->num_top, m->top);
    add(buf, n, "micro_batch %d\n", (int)t->micro_batch);
    add(buf, n, "accumulate %d\n", (int)t->accumulate);
    const dense_optim_config *o = &t->dense_optim;
    char f[5][32];
    add(buf, n, "dense_optimizer %s lr %s, beta1 %s, beta2 %s, eps %s, weight_decay %s\n",
        o->kind == DENSE_ADAM ? "adam" : "sgd", flt(o->lr, f[0]), flt(o->beta1, f[1]), flt(o->beta2, f[2]),
        flt(o->eps, f[3]), flt(o->weight_decay, f[4]));
    for (int32_t i = 0; i < s->cc.num_tables; i++) { /* ember_load checks rows, dim and kind only */
        const ember_optimizer *e = &s->cc.tables[i].optimizer;
        add(buf, n, "table.%s optimizer %s lr %s, eps %s, weight_decay %s, beta1 %s, beta2 %s\n",
            s->cc.tables[i].name, ckpt_optimizer_name(e->kind), flt(e->lr, f[0]), flt(e->eps, f[1]),
            flt(e->weight_decay, f[2]), flt(e->beta1, f[3]), flt(e->beta2, f[4]));
        const ember_table_config *q = &s->cc.tables[i];
        if (q->quant_buckets) /* only when on: older checkpoints' fingerprints stay equal */
            add(buf, n, "table.%s.quantization %d buckets over [%s, %s]\n", q->name, (int)q->quant_buckets,
                flt(q->quant_low, f[0]), flt(q->quant_high, f[1]));
    }
    if (t->lr.warmup > 0 || t->lr.decay != LR_DECAY_NONE) /* only when on, as above */
        add(buf, n, "lr_schedule warmup %lld, decay %s, final %s, every %lld, gamma %s\n", (long long)t->lr.warmup,
            config_lr_decay_name(t->lr.decay), flt(t->lr.final, f[0]), (long long)t->lr.every, flt(t->lr.gamma, f[1]));
    if (t->patience > 0 || t->keep_best) /* the saved verdicts are of this metric */
        add(buf, n, "early_stop metric %s\n", t->stop_metric_logloss ? "logloss" : "auc");
    add(buf, n, "soft\n");
    add(buf, n, "world %d\n", (int)ctx->size);
    add(buf, n, "threads %d\n", (int)s->threads);
}

/* The value of key in a fingerprint, into out ("(absent)" when missing);
 * *soft: the key comes after "soft". */
static void fp_value(const char *fp, const char *key, char *out, size_t n, int *soft)
{
    size_t klen = strlen(key);
    int in_soft = 0;
    snprintf(out, n, "(absent)");
    for (const char *p = fp; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 4 && !strncmp(p, "soft", 4))
            in_soft = 1;
        else if (len > klen && !strncmp(p, key, klen) && p[klen] == ' ') {
            snprintf(out, n, "%.*s", (int)(len - klen - 1), p + klen + 1);
            if (soft)
                *soft = in_soft;
            return;
        }
        p += len + (e ? 1 : 0);
    }
}

/* Compares this run's fingerprint with the checkpoint's.  0, or -1 with the
 * first hard difference in err; soft differences go to note. */
static int fp_compare(const char *mine, const char *saved, const char *path, char *err, size_t errlen, char *note,
                      size_t notelen)
{
    note[0] = '\0';
    for (const char *p = mine; *p;) {
        const char *e = strchr(p, '\n'), *sp;
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char key[64], a[1024], b[1024];
        sp = memchr(p, ' ', len);
        if (sp && (size_t)(sp - p) < sizeof key) {
            snprintf(key, sizeof key, "%.*s", (int)(sp - p), p);
            int soft = 0;
            fp_value(mine, key, a, sizeof a, &soft);
            fp_value(saved, key, b, sizeof b, NULL);
            if (strcmp(a, b)) {
                if (!soft) {
                    snprintf(err, errlen, "checkpoint %s: %s %.300s, this run %.300s (resume with the settings "
                             "that saved it, or another --checkpoint-dir)", path, key, b, a);
                    return -1;
                }
                add(note, notelen, "%s%s %s, this run %s", note[0] ? "; " : "", key, b, a);
            }
        }
        p += len + (e ? 1 : 0);
    }
    return 0;
}

/* ------------------------------------------------------------------ save */

int train_ckpt_prepare(const tool_ctx *ctx, train_setup *s)
{
    const char *dir = s->t.checkpoint_dir;
    char msg[1024] = "";
    int failed = 0;
    struct stat sb;
    if (ctx->rank == 0) {
        if (mkdir(dir, 0777) == 0) {
            s->ckpt_dir_made = 1;
        } else if (errno != EEXIST) {
            snprintf(msg, sizeof msg, "%s: cannot create the checkpoint folder: %s", dir, strerror(errno));
            failed = 1;
        } else if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            snprintf(msg, sizeof msg, "%s: the checkpoint folder is an existing file, not a folder", dir);
            failed = 1;
        } else if (access(dir, W_OK | X_OK) != 0) {
            snprintf(msg, sizeof msg, "%s: cannot write checkpoints there: %s", dir, strerror(errno));
            failed = 1;
        }
    }
    return tool_agree_fail(ctx, "train", failed, msg);
}

void train_ckpt_unprepare(const tool_ctx *ctx, const train_setup *s)
{
    if (ctx->rank == 0 && s->ckpt_dir_made && s->t.checkpoint_dir)
        rmdir(s->t.checkpoint_dir); /* only when empty: anything saved stays */
}

/* Agrees a collective library call's status st: 1 on every rank when any
 * failed.  msg is printed by a rank that saw the cause, not by one that only
 * saw another rank fail (EMBER_ECOMM). */
static int agree_status(const tool_ctx *ctx, int st, const char *msg)
{
    return tool_agree_fail(ctx, "train", st != EMBER_OK && st != EMBER_ECOMM, msg) ||
           tool_agree_fail(ctx, "train", st != EMBER_OK, msg);
}

/* Bytes of the files in a folder (rank 0's view). */
static int64_t folder_bytes(const char *path)
{
    DIR *d = opendir(path);
    int64_t total = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[4400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            total += (int64_t)st.st_size;
    }
    closedir(d);
    return total;
}

int train_ckpt_save(const tool_ctx *ctx, train_setup *s, const char *root, int32_t keep, int64_t step,
                    int64_t samples, const ctr_position *pos, const train_best *best, train_ckpt_saved *out)
{
    double t0 = tool_now();
    char fp[16384];
    fingerprint(ctx, s, fp, sizeof fp);
    dense_sync *ds = trainer_dense_sync(s->tr);
    int64_t nparams = dlrm_num_params(s->model), floats = dense_sync_state_floats(ds), ostep = dense_sync_steps(ds);
    /* the optimizer state whole: its own buffer when replicated, else
     * gathered to rank 0 (shared blobs are written from rank 0's alone, so
     * the other ranks only name one) */
    static const float not_read;
    const float *whole = dense_sync_state_whole(ds);
    float *gathered = floats > 0 && !whole && ctx->rank == 0 ? malloc(sizeof(float) * (size_t)(floats * nparams))
                                                              : NULL;
    int ost = floats > 0 && !whole && ctx->rank == 0 && !gathered ? EMBER_ENOMEM : EMBER_OK;
    if (agree_status(ctx, ost, "out of memory for the dense optimizer state"))
        return 1; /* agreed before the gather, so no rank waits in it */
    char oerr[256] = "";
    if (floats > 0 && !whole && agree_status(ctx, dense_sync_gather_state(ds, gathered, oerr, sizeof oerr), oerr)) {
        free(gathered);
        return 1;
    }
    const float *ostate = whole ? whole : gathered ? gathered : &not_read;
    int64_t state[8] = {STATE_MAGIC, BLOB_VERSION, step, samples, nparams, ostep, floats * nparams, 0};
    int64_t position[6] = {POS_MAGIC, BLOB_VERSION, pos->next, pos->epochs, pos->begin, pos->end};
    /* the model description, for predictions (docs/inference.md); a model it
     * cannot describe (over 1024 tables, names of 64 bytes or more, names
     * that are not UTF-8) is still checkpointed, without one: the predictor
     * then says so */
    char merr[256] = "";
    ember_model *model = malloc(sizeof *model);
    char *mjson = NULL;
    int describable = model && ember_model_make(model, &s->cc, &s->t.model, s->t.micro_batch,
                                                s->t.micro_batch * s->t.accumulate, &s->schema,
                                                s->t.source == CFG_SOURCE_SYNTHETIC ? &s->t.synth : NULL, merr,
                                                sizeof merr) == 0;
    if (describable)
        mjson = ember_model_to_json(model);
    free(model);
    int64_t best_blob[6] = {BEST_MAGIC, BLOB_VERSION, best->have, 0, best->step, best->bad};
    memcpy(&best_blob[3], &best->metric, sizeof(double));
    ember_blob blobs[6] = {
        {"train.fingerprint", fp, (int64_t)strlen(fp)},
        {"train.state", state, (int64_t)sizeof state},
        {"dense.params", dlrm_params(s->model), nparams * (int64_t)sizeof(float)},
        {"train.best", best_blob, (int64_t)sizeof best_blob},
        {EMBER_MODEL_BLOB, mjson, mjson ? (int64_t)strlen(mjson) : 0},
        {"dense.optim", ostate, floats * nparams * (int64_t)sizeof(float)},
    };
    ember_blob rank_blob = {"data.position", position, (int64_t)sizeof position};
    if (!mjson) /* dense.optim takes its place */
        blobs[4] = blobs[5];
    ember_save_options o = {step, keep, blobs, (ostate && floats > 0 ? 6 : 5) - !mjson, &rank_blob, 1};
    int st = ember_save(s->coll, root, &o); /* without a description if none could be made */
    free(mjson);
    free(gathered);
    char msg[1024];
    snprintf(msg, sizeof msg, "checkpoint at step %lld: %s", (long long)step,
             st == EMBER_OK ? "" : ember_errmsg(s->coll));
    if (agree_status(ctx, st, msg))
        return 1;
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s/step-%012lld", root, (long long)step);
    out->step = step;
    out->seconds = tool_now() - t0;
    out->bytes = ctx->rank == 0 ? folder_bytes(out->path) : 0;
    return 0;
}

/* ---------------------------------------------------------------- resume */

static const void *blob(const ember_checkpoint *ck, int32_t rank, const char *name, int64_t want, char *err,
                        size_t errlen)
{
    int64_t bytes = -1;
    const void *p = ember_checkpoint_blob(ck, rank, name, &bytes);
    if (!p && want != 0)
        snprintf(err, errlen, "checkpoint %s: no blob \"%s\"%s (not saved by ember train?)",
                 ember_checkpoint_path(ck), name, rank >= 0 ? " of rank 0" : "");
    else if (p && want >= 0 && bytes != want)
        snprintf(err, errlen, "checkpoint %s: blob \"%s\" has %lld bytes, this run needs %lld",
                 ember_checkpoint_path(ck), name, (long long)bytes, (long long)want);
    else
        return p ? p : "";
    return NULL;
}

/* Checks the checkpoint against this run and restores the dense model,
 * its optimizer and the counters (this rank only).  0 or -1 with err. */
static int restore_dense(const tool_ctx *ctx, train_setup *s, const ember_checkpoint *ck, train_resume *rs,
                         char *err, size_t errlen)
{
    char mine[16384];
    fingerprint(ctx, s, mine, sizeof mine);
    int64_t fplen = 0;
    const char *fpb = ember_checkpoint_blob(ck, -1, "train.fingerprint", &fplen);
    if (!fpb) {
        snprintf(err, errlen, "checkpoint %s: no blob \"train.fingerprint\" (not saved by ember train?)",
                 ember_checkpoint_path(ck));
        return -1;
    }
    char *saved = malloc((size_t)fplen + 1);
    if (!saved) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(saved, fpb, (size_t)fplen);
    saved[fplen] = '\0';
    int rc = fp_compare(mine, saved, ember_checkpoint_path(ck), err, errlen, rs->note, sizeof rs->note);
    free(saved);
    if (rc)
        return -1;
    const int64_t *state = blob(ck, -1, "train.state", 8 * (int64_t)sizeof(int64_t), err, errlen);
    if (!state)
        return -1;
    dense_sync *ds = trainer_dense_sync(s->tr);
    int64_t nparams = dlrm_num_params(s->model), floats = dense_sync_state_floats(ds);
    if (state[0] != STATE_MAGIC || state[1] != BLOB_VERSION || state[2] < 0 || state[3] < 0 ||
        state[4] != nparams || state[6] != floats * nparams) {
        snprintf(err, errlen, "checkpoint %s: blob \"train.state\": bad magic or version, or %lld dense parameters "
                 "(%lld optimizer floats) where this run has %lld (%lld)", ember_checkpoint_path(ck),
                 (long long)state[4], (long long)state[6], (long long)nparams, (long long)(floats * nparams));
        return -1;
    }
    const float *params = blob(ck, -1, "dense.params", nparams * (int64_t)sizeof(float), err, errlen);
    if (!params)
        return -1;
    const float *om = NULL;
    if (floats > 0 && !(om = blob(ck, -1, "dense.optim", floats * nparams * (int64_t)sizeof(float), err, errlen)))
        return -1;
    memcpy(dlrm_params(s->model), params, (size_t)nparams * sizeof(float));
    dense_sync_set_state(ds, om, state[5]); /* this rank's shard of it, when sharded */
    rs->step = state[2];
    rs->samples = state[3];
    return 0;
}

/* The data position this rank continues from.  The same world: its own;
 * another world: rank 0's, moved to this rank's share (docs/training.md). */
static int restore_position(const tool_ctx *ctx, train_setup *s, const ember_checkpoint *ck, char *err,
                            size_t errlen)
{
    int32_t W = ember_checkpoint_world(ck), from = W == ctx->size ? ctx->rank : 0;
    const int64_t *p = blob(ck, from, "data.position", 6 * (int64_t)sizeof(int64_t), err, errlen);
    if (!p)
        return -1;
    if (p[0] != POS_MAGIC || p[1] != BLOB_VERSION) {
        snprintf(err, errlen, "checkpoint %s: blob \"data.position\" of rank %d: bad magic or version",
                 ember_checkpoint_path(ck), (int)from);
        return -1;
    }
    ctr_position saved = {p[2], p[3], p[4], p[5]}, here, to;
    ctr_source_tell(s->train_src, &here);
    to = saved;
    if (W != ctx->size && s->t.source != CFG_SOURCE_SYNTHETIC) {
        /* the same fraction of this rank's share as rank 0 had done of its own */
        int64_t done = saved.next - saved.begin, len = saved.end - saved.begin, mylen = here.end - here.begin;
        to.next = here.begin + (len > 0 && done > 0
                                    ? (int64_t)((unsigned __int128)done * (uint64_t)mylen / (uint64_t)len)
                                    : 0);
    }
    char serr[512];
    if (ctr_source_seek(s->train_src, &to, serr, sizeof serr)) {
        snprintf(err, errlen, "checkpoint %s: data position: %s", ember_checkpoint_path(ck), serr);
        return -1;
    }
    return 0;
}

int train_ckpt_resume(const tool_ctx *ctx, train_setup *s, train_resume *rs)
{
    const char *dir = s->t.checkpoint_dir;
    char err[1536] = "";
    memset(rs, 0, sizeof rs[0]);
    int64_t *steps = NULL, have = ckpt_list_steps(dir, &steps) > 0;
    free(steps);
    tool_reduce_i64(ctx, &have, 1, TOOL_MAX);
    if (!have)
        return 0; /* from scratch; the caller says so */
    ember_checkpoint *ck = NULL;
    int failed = 0, status = 1;
    if (ember_checkpoint_open(dir, &ck) != EMBER_OK) {
        snprintf(err, sizeof err, "--resume: %s", ember_data_errmsg());
        failed = 1;
    }
    if (!failed)
        failed = restore_dense(ctx, s, ck, rs, err, sizeof err) != 0;
    if (tool_agree_fail(ctx, "train", failed, err))
        goto out;
    int st = ember_load(s->coll, ck); /* collective */
    snprintf(err, sizeof err, "checkpoint %s: %s", ember_checkpoint_path(ck),
             st == EMBER_OK ? "" : ember_errmsg(s->coll));
    if (agree_status(ctx, st, err))
        goto out;
    failed = restore_position(ctx, s, ck, err, sizeof err) != 0;
    if (tool_agree_fail(ctx, "train", failed, err))
        goto out;
    int64_t bytes = -1; /* the best evaluation so far; absent from checkpoints before early stopping */
    const int64_t *b = ember_checkpoint_blob(ck, -1, "train.best", &bytes);
    if (b && bytes == 6 * (int64_t)sizeof(int64_t) && b[0] == BEST_MAGIC && b[1] == BLOB_VERSION) {
        rs->best.have = b[2];
        memcpy(&rs->best.metric, &b[3], sizeof(double));
        rs->best.step = b[4];
        rs->best.bad = b[5];
    }
    rs->resumed = 1;
    rs->saved_world = ember_checkpoint_world(ck);
    snprintf(rs->path, sizeof rs->path, "%s", ember_checkpoint_path(ck));
    status = 0;
out:
    ember_checkpoint_close(ck);
    return status;
}
