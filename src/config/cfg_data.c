/*
 * cfg_data.c: the config file's `data` group (docs/config.md, docs/data.md):
 * the planner's synthetic batches (batch_size, id law, seed), the training
 * data's source and files, how bad lines are handled, and the built-in
 * task's shape (data.synthetic); data.schema is cfg_schema.c.
 */
#include <stdio.h>
#include <string.h>

#include "config/cfg_read.h"

/* data.synthetic.drift = { kind = "rotate" | "grow"; every = SAMPLES; rows = R;
 * features = N; start = S; }: the ids drift (docs/adaptive.md, "Drifting ids"). */
static int read_drift(cfg_reader *r, const config_setting_t *g, ctr_synth_config *c)
{
    static const char *const KEYS[] = {"kind", "every", "rows", "features", "start", NULL};
    static const char *const KINDS[] = {"none", "rotate", "grow", NULL};
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "data.synthetic.drift", "must be a group { kind = \"rotate\"; every = 100000; rows = 1000; }");
    if (cfg_check_keys(r, g, "data.synthetic.drift", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    int kind = EMBER_DRIFT_NONE;
    int64_t v = 0;
    if (!(m = config_setting_get_member(g, "kind")))
        return cfg_fail_at(r, g, "data.synthetic.drift.kind", "is required: \"rotate\" or \"grow\"");
    if (cfg_get_enum(r, m, "data.synthetic.drift.kind", KINDS, &kind))
        return EMBER_EINVAL;
    c->drift = (ember_drift)kind;
    c->drift_every = 100000;
    c->drift_rows = 1000;
    c->drift_features = 0;
    if ((m = config_setting_get_member(g, "every")) &&
        cfg_get_int64(r, m, "data.synthetic.drift.every", 1, INT64_C(1) << 62, &c->drift_every))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "rows")) &&
        cfg_get_int64(r, m, "data.synthetic.drift.rows", 1, INT64_C(1) << 53, &c->drift_rows))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "start")) &&
        cfg_get_int64(r, m, "data.synthetic.drift.start", 0, INT64_C(1) << 53, &c->drift_start))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "features"))) {
        if (cfg_get_int64(r, m, "data.synthetic.drift.features", 0, CTR_MAX_FEATURES, &v))
            return EMBER_EINVAL;
        c->drift_features = (int32_t)v;
    }
    return 0;
}

/* data.synthetic: the teacher task's shape.  num_sparse, rows, alpha and
 * pooling are one value for every feature, and only without `tables`. */
static int read_synthetic(cfg_reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"num_dense", "num_sparse", "rows", "alpha", "pooling",
                                       "teacher_dim", "teacher_hidden", "teacher_scale",
                                       "ctr_rate", "drift", NULL};
    ctr_synth_config *c = &r->cf->train.synth;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "data.synthetic", "must be a group { num_sparse = ...; }");
    if (cfg_check_keys(r, g, "data.synthetic", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    int64_t v = 0;
    double d = 0;
#define SYN(k) (m = config_setting_get_member(g, k))
    if (SYN("num_dense")) {
        if (cfg_get_int64(r, m, "data.synthetic.num_dense", 0, 1024, &v))
            return EMBER_EINVAL;
        c->num_dense = (int32_t)v;
    }
    if (SYN("num_sparse")) {
        if (cfg_get_int64(r, m, "data.synthetic.num_sparse", 1, CTR_MAX_FEATURES, &v))
            return EMBER_EINVAL;
        c->num_sparse = (int32_t)v;
    }
    for (int k = 0; k < 3; k++) { /* per-feature values, set for all */
        static const char *const NAMES[] = {"rows", "alpha", "pooling"};
        char key[64];
        snprintf(key, sizeof key, "data.synthetic.%s", NAMES[k]);
        if (!SYN(NAMES[k]))
            continue;
        if (k == 0 ? cfg_get_int64(r, m, key, 1, INT64_C(1) << 40, &v)
                   : cfg_get_double(r, m, key, k == 1 ? 0 : 1, k == 1 ? 100 : 1e4, &d))
            return EMBER_EINVAL;
        for (int f = 0; f < CTR_MAX_FEATURES; f++) {
            if (k == 0)
                c->rows[f] = v;
            else if (k == 1)
                c->alpha[f] = d;
            else
                c->pooling[f] = d;
        }
    }
    if (SYN("teacher_dim")) {
        if (cfg_get_int64(r, m, "data.synthetic.teacher_dim", 1, 1024, &v))
            return EMBER_EINVAL;
        c->teacher_dim = (int32_t)v;
    }
    if (SYN("teacher_hidden")) {
        if (cfg_get_int64(r, m, "data.synthetic.teacher_hidden", 1, 65536, &v))
            return EMBER_EINVAL;
        c->teacher_hidden = (int32_t)v;
    }
    if (SYN("teacher_scale") && cfg_get_double(r, m, "data.synthetic.teacher_scale", 0, 1e3, &c->teacher_scale))
        return EMBER_EINVAL;
    if (SYN("ctr_rate") && cfg_get_double(r, m, "data.synthetic.ctr_rate", 1e-4, 1 - 1e-4, &c->ctr_rate))
        return EMBER_EINVAL;
    if (SYN("drift") && read_drift(r, m, c))
        return EMBER_EINVAL;
#undef SYN
    return 0;
}

int cfg_read_data(cfg_reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"batch_size", "dist", "alpha", "seed", "source",
                                       "train_file", "eval_file", "bad_lines", "max_bad_fraction",
                                       "max_bad_lines", "hash_rows",
                                       "synthetic", "shuffle", "schema", NULL};
    cfg_data *d = &r->cf->data;
    cfg_train *t = &r->cf->train;
    if (!g)
        return 0;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "data", "must be a group { batch_size = ...; }");
    if (cfg_check_keys(r, g, "data", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    int64_t v;
    int e;
    if ((m = config_setting_get_member(g, "batch_size")) &&
        cfg_get_int64(r, m, "data.batch_size", 1, INT32_MAX, &d->batch_size))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "dist")) && cfg_get_enum(r, m, "data.dist", CFG_DISTS, &d->zipf))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "alpha")) &&
        cfg_get_double(r, m, "data.alpha", 1e-6, 100, &d->alpha))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "seed"))) {
        if (cfg_get_int64(r, m, "data.seed", 0, INT64_MAX, &v))
            return EMBER_EINVAL;
        d->seed = (uint64_t)v;
        t->synth.seed = (uint64_t)v;
    }
    if ((m = config_setting_get_member(g, "source"))) {
        if (cfg_get_enum(r, m, "data.source", CFG_SOURCES, &e))
            return EMBER_EINVAL;
        t->source = (cfg_source)e;
        t->file_source_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "train_file"))) {
        if (cfg_read_path(r, m, "data.train_file", &t->train_file))
            return EMBER_EINVAL;
        t->train_file_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "eval_file"))) {
        if (cfg_read_path(r, m, "data.eval_file", &t->eval_file))
            return EMBER_EINVAL;
        t->eval_file_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "shuffle"))) {
        if (config_setting_type(m) != CONFIG_TYPE_BOOL)
            return cfg_fail_at(r, m, "data.shuffle", "must be true or false");
        t->shuffle = config_setting_get_bool(m);
    }
    if ((m = config_setting_get_member(g, "bad_lines"))) {
        if (cfg_get_enum(r, m, "data.bad_lines", CFG_BAD_LINES, &e))
            return EMBER_EINVAL;
        t->bad_lines = (ctr_bad_policy)e;
    }
    if ((m = config_setting_get_member(g, "max_bad_fraction")) &&
        cfg_get_double(r, m, "data.max_bad_fraction", 0, 1, &t->max_bad_fraction))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "max_bad_lines")) &&
        cfg_get_int64(r, m, "data.max_bad_lines", -1, INT64_MAX, &t->max_bad_lines))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "hash_rows")) &&
        cfg_get_int64(r, m, "data.hash_rows", 1, INT64_C(1) << 40, &t->hash_rows))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "synthetic")) && read_synthetic(r, m))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "schema")) && cfg_read_schema(r, m))
        return EMBER_EINVAL;
    if (t->schema.num_columns && !config_setting_get_member(g, "source")) {
        t->source = CFG_SOURCE_TEXT; /* a schema says what the data is */
        t->file_source_line = t->schema_line;
    }
    t->file_source = t->source;
    if (t->source == CFG_SOURCE_TEXT && !t->schema.num_columns)
        return cfg_fail_at(r, g, "data.schema", "missing (data.source = \"text\" reads a file by its schema)");
    if (t->source == CFG_SOURCE_SYNTHETIC && (t->train_file || t->eval_file))
        return cfg_fail_at(r, config_setting_get_member(g, t->train_file ? "train_file" : "eval_file"),
                       t->train_file ? "data.train_file" : "data.eval_file",
                       "needs data.source = \"text\", \"tsv\" or \"binary\"");
    if (t->source != CFG_SOURCE_SYNTHETIC && t->source != CFG_SOURCE_TEXT && !t->train_file)
        return cfg_fail_at(r, g, "data.train_file", "missing (data.source = \"%s\" reads a file)",
                       CFG_SOURCES[t->source]); /* a schema also serves ember convert: its files come from the command line */
    if (t->source != CFG_SOURCE_SYNTHETIC && config_setting_get_member(g, "synthetic"))
        return cfg_fail_at(r, config_setting_get_member(g, "synthetic"), "data.synthetic",
                       "only with data.source = \"synthetic\"");
    return 0;
}
