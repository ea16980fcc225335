/*
 * fingerprint.c: the settings a checkpoint of a training run must match to
 * resume (run.h; docs/training.md, "Checkpoints and resume").
 *
 * The fingerprint is text, "key value" per line: the settings that decide
 * the result (data source, seeds, model, batch, dense and embedding
 * optimizers, quantization, learning-rate schedule) and, after a line
 * "soft", those that only change the bits (the world, threads, pipeline
 * stages).  Resume
 * compares this run's with the checkpoint's line by line: a hard
 * difference fails, naming the key and both values; soft ones are a note.
 * Keys that are only written when a feature is on keep older checkpoints'
 * fingerprints equal.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "train/run.h"

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
void train_fingerprint(const ember_trainer *s, char *buf, size_t n)
{
    const cfg_train *t = &s->t;
    const dlrm_config *m = dlrm_get_config(s->dense);
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
        if (c->drift != EMBER_DRIFT_NONE) /* absent without: older checkpoints still match */
            add(buf, n, "synthetic_drift kind %d, every %lld, rows %lld, features %d, start %lld\n", (int)c->drift,
                (long long)c->drift_every, (long long)c->drift_rows, (int)c->drift_features, (long long)c->drift_start);
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
    add(buf, n, "model %d dense, %d sparse, emb_dim %d, %s", (int)m->num_dense, (int)m->num_sparse,
        (int)m->emb_dim, dense_interaction_name(m->interaction));
    if (m->interaction == DENSE_INTERACT_DCN) /* only when used: older fingerprints stay as they were */
        add(buf, n, " %d cross rank %d", (int)m->num_cross, (int)m->cross_rank);
    if (m->activation != DENSE_ACT_RELU)
        add(buf, n, ", activation %s", dense_activation_name(m->activation));
    add(buf, n, "\n");
    add_widths(buf, n, "bottom", m->num_bottom, m->bottom);
    add_widths(buf, n, "top", m->num_top, m->top);
    add(buf, n, "micro_batch %d\n", (int)t->micro_batch);
    add(buf, n, "accumulate %d\n", (int)t->accumulate);
    const dense_optim_config *o = &t->dense_optim;
    char f[5][32];
    add(buf, n, "dense_optimizer %s lr %s, beta1 %s, beta2 %s, eps %s, weight_decay %s\n",
        dense_optim_name(o->kind), flt(o->lr, f[0]), flt(o->beta1, f[1]), flt(o->beta2, f[2]),
        flt(o->eps, f[3]), flt(o->weight_decay, f[4]));
    if (o->kind == DENSE_MOMENTUM) /* only for the kind: older fingerprints stay equal */
        add(buf, n, "dense_optimizer momentum %s%s\n", flt(o->momentum, f[0]), o->nesterov ? " nesterov" : "");
    for (int32_t i = 0; i < s->cc.num_tables; i++) { /* ember_load checks rows, dim and kind only */
        const ember_optimizer *e = &s->cc.tables[i].optimizer;
        add(buf, n, "table.%s optimizer %s lr %s, eps %s, weight_decay %s, beta1 %s, beta2 %s\n",
            s->cc.tables[i].name, ckpt_optimizer_name(e->kind), flt(e->lr, f[0]), flt(e->eps, f[1]),
            flt(e->weight_decay, f[2]), flt(e->beta1, f[3]), flt(e->beta2, f[4]));
        if (e->clip_value > 0 || e->clip_norm > 0) /* only when on */
            add(buf, n, "table.%s clip value %s, norm %s\n", s->cc.tables[i].name, flt(e->clip_value, f[0]),
                flt(e->clip_norm, f[1]));
        if (e->weight_decay_mode == EMBER_DECAY_DECOUPLED) /* only when on, as below */
            add(buf, n, "table.%s weight decay decoupled\n", s->cc.tables[i].name);
        if (e->kind == EMBER_OPT_FTRL)
            add(buf, n, "table.%s ftrl beta %s, l1 %s, l2 %s, lr_power %s\n", s->cc.tables[i].name,
                flt(e->beta, f[0]), flt(e->l1, f[1]), flt(e->l2, f[2]), flt(e->lr_power, f[3]));
        if (e->kind == EMBER_OPT_MOMENTUM) /* only for the kind: older fingerprints stay equal */
            add(buf, n, "table.%s momentum %s%s\n", s->cc.tables[i].name, flt(e->momentum, f[0]),
                e->nesterov ? " nesterov" : "");
        if (e->kind == EMBER_OPT_LARS)
            add(buf, n, "table.%s lars momentum %s, eta %s\n", s->cc.tables[i].name, flt(e->momentum, f[0]),
                flt(e->eta, f[1]));
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
    if (t->replan_every > 0)
        add(buf, n, "replan every %lld, window %d, gain %.17g\n", (long long)t->replan_every, (int)t->replan_window,
            t->replan_gain);
    if (t->limits.mode != LIMITS_ADAPT_OFF) /* absent when off: older checkpoints still match */
        add(buf, n, "limits adapt %s, every %lld, window %lld, quantile %.17g, headroom %.17g, max_bytes %lld\n",
            t->limits.mode == LIMITS_ADAPT_FIRST ? "first" : "running", (long long)t->limits.every, (long long)t->limits.window, t->limits.quantile,
            t->limits.headroom, (long long)t->limits.max_bytes);
    add(buf, n, "soft\n");
    add(buf, n, "world %d\n", (int)s->size);
    add(buf, n, "threads %d\n", (int)s->threads);
    if (t->pipe_stages > 1) /* the replica groups read the data: other stages, other shares, as another world */
        add(buf, n, "pipeline_stages %d\n", (int)t->pipe_stages);
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

int32_t train_fingerprint_stages(const char *fp)
{
    char v[64];
    fp_value(fp, "pipeline_stages", v, sizeof v, NULL);
    const int stages = atoi(v);
    return stages > 1 ? stages : 1;
}

/* Compares this run's fingerprint with the checkpoint's.  0, or -1 with the
 * first hard difference in err; soft differences go to note. */
int train_fingerprint_compare(const char *mine, const char *saved, const char *path, char *err, size_t errlen,
                              char *note, size_t notelen)
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
                    return EMBER_EINVAL;
                }
                add(note, notelen, "%s%s %s, this run %s", note[0] ? "; " : "", key, b, a);
            }
        }
        p += len + (e ? 1 : 0);
    }
    /* written only when on, so compared from the saved side too */
    char a[64], b[64];
    fp_value(mine, "pipeline_stages", a, sizeof a, NULL);
    fp_value(saved, "pipeline_stages", b, sizeof b, NULL);
    if (strcmp(a, b) && !strcmp(a, "(absent)"))
        add(note, notelen, "%spipeline_stages %s, this run 1", note[0] ? "; " : "", b);
    return 0;
}
