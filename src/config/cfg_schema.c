/*
 * cfg_schema.c: the config file's data.schema (docs/data.md, "The schema"):
 * a CSV or TSV file's columns, each a label, a dense value with its
 * transform, a categorical or multi-hot feature with its encoding and
 * table, or ignored; checked once more by the text reader's own plan, so
 * a schema the reader would refuse is refused here, with its line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"
#include "data/text_parse.h"

static const char *const TYPES[] = {"ignore", "label", "int", "float", "categorical", "multi_hot", NULL};

/* One column of data.schema being read: its group, and the key of its
 * member last named ("data.schema.columns[2].type"). */
typedef struct column_entry {
    cfg_reader *r;
    const config_setting_t *c;
    char where[64], key[96];
} column_entry;

/* The key of member k (kept in n->key until the next call). */
static const char *colkey(column_entry *n, const char *k)
{
    snprintf(n->key, sizeof n->key, "%s.%s", n->where, k);
    return n->key;
}

/* name and type; 0, or -1. */
static int read_name_type(column_entry *n, ctr_column *k)
{
    const config_setting_t *m;
    const char *s = NULL;
    int e;
    if (!(m = config_setting_get_member(n->c, "name")))
        return cfg_fail_at(n->r, n->c, colkey(n, "name"), "missing");
    if (cfg_get_string(n->r, m, colkey(n, "name"), &s))
        return EMBER_EINVAL;
    if (!s[0] || strlen(s) >= sizeof k->name)
        return cfg_fail_at(n->r, m, n->key, "must be 1 to %d bytes", (int)sizeof k->name - 1);
    strcpy(k->name, s);
    if (!(m = config_setting_get_member(n->c, "type")))
        return cfg_fail_at(n->r, n->c, colkey(n, "type"), "missing (label, int, float, categorical, multi_hot or "
                           "ignore)");
    if (cfg_get_enum(n->r, m, colkey(n, "type"), TYPES, &e))
        return EMBER_EINVAL;
    k->type = (ctr_col_type)e;
    return 0;
}

/* The keys the column's type allows: transforms for dense columns,
 * encoding and table for sparse ones, separator and weights for multi-hot
 * ones, label for the label. */
static int check_type_keys(column_entry *n, const ctr_column *k)
{
    static const char *const ONLY_DENSE[] = {"transform", "min", "max", "mean", "std", NULL};
    static const char *const ONLY_SPARSE[] = {"encoding", "table", "rows", NULL};
    const config_setting_t *c = n->c;
    const int dense = k->type == CTR_COL_INT || k->type == CTR_COL_FLOAT;
    const int sparse = k->type == CTR_COL_CATEGORICAL || k->type == CTR_COL_MULTI_HOT;
    for (int j = 0; ONLY_DENSE[j]; j++)
        if (!dense && config_setting_get_member(c, ONLY_DENSE[j]))
            return cfg_fail_at(n->r, config_setting_get_member(c, ONLY_DENSE[j]), colkey(n, ONLY_DENSE[j]),
                               "only for int and float columns (column \"%s\" is %s)", k->name, TYPES[k->type]);
    for (int j = 0; ONLY_SPARSE[j]; j++)
        if (!sparse && config_setting_get_member(c, ONLY_SPARSE[j]))
            return cfg_fail_at(n->r, config_setting_get_member(c, ONLY_SPARSE[j]), colkey(n, ONLY_SPARSE[j]),
                               "only for categorical and multi_hot columns (column \"%s\" is %s)", k->name,
                               TYPES[k->type]);
    if (k->type != CTR_COL_MULTI_HOT &&
        (config_setting_get_member(c, "separator") || config_setting_get_member(c, "weights")))
        return cfg_fail_at(n->r, c, colkey(n, "separator"), "separator and weights are only for multi_hot columns");
    if (k->type != CTR_COL_LABEL && config_setting_get_member(c, "label"))
        return cfg_fail_at(n->r, c, colkey(n, "label"), "only for the label column");
    return 0;
}

/* label's kind; a dense column's transform, with clip's min and max or
 * standardize's mean and std. */
static int read_label_transform(column_entry *n, ctr_column *k)
{
    static const char *const LABELS[] = {"binary", "float", NULL};
    static const char *const TRANSFORMS[] = {"none", "log1p", "clip", "standardize", NULL};
    const config_setting_t *c = n->c, *m;
    cfg_reader *r = n->r;
    int e;
    if ((m = config_setting_get_member(c, "label"))) {
        if (cfg_get_enum(r, m, colkey(n, "label"), LABELS, &e))
            return EMBER_EINVAL;
        k->float_label = e;
    }
    if ((m = config_setting_get_member(c, "transform"))) {
        if (cfg_get_enum(r, m, colkey(n, "transform"), TRANSFORMS, &e))
            return EMBER_EINVAL;
        k->transform = (ctr_transform)e;
    }
    int has_min = config_setting_get_member(c, "min") != NULL, has_max = config_setting_get_member(c, "max") != NULL;
    if ((has_min || has_max) != (k->transform == CTR_TF_CLIP) || has_min != has_max)
        return cfg_fail_at(r, c, colkey(n, "transform"), "clip takes min and max, other transforms neither");
    if (has_min && (cfg_get_double(r, config_setting_get_member(c, "min"), colkey(n, "min"), -1e300, 1e300, &k->min) ||
                    cfg_get_double(r, config_setting_get_member(c, "max"), colkey(n, "max"), k->min, 1e300, &k->max)))
        return EMBER_EINVAL;
    int has_mean = config_setting_get_member(c, "mean") != NULL, has_std = config_setting_get_member(c, "std") != NULL;
    if ((has_mean || has_std) && (k->transform != CTR_TF_STANDARDIZE || has_mean != has_std))
        return cfg_fail_at(r, c, colkey(n, "mean"), "mean and std go together, with transform = \"standardize\"");
    if (has_mean &&
        (cfg_get_double(r, config_setting_get_member(c, "mean"), colkey(n, "mean"), -1e300, 1e300, &k->mean) ||
         cfg_get_double(r, config_setting_get_member(c, "std"), colkey(n, "std"), 1e-300, 1e300, &k->std)))
        return EMBER_EINVAL;
    k->has_stats = has_mean;
    return 0;
}

/* A sparse column's encoding, separator and weights (multi-hot), rows
 * (hash_rows unless given) and table (kept in *table). */
static int read_sparse(column_entry *n, ctr_column *k, int64_t hash_rows, const char **table)
{
    static const char *const ENCODINGS[] = {"string", "int", "hex", NULL};
    const config_setting_t *c = n->c, *m;
    cfg_reader *r = n->r;
    const char *s = NULL;
    int e;
    if ((m = config_setting_get_member(c, "encoding"))) {
        if (cfg_get_enum(r, m, colkey(n, "encoding"), ENCODINGS, &e))
            return EMBER_EINVAL;
        k->encoding = (ctr_encoding)e;
    }
    k->separator = '|';
    if ((m = config_setting_get_member(c, "separator"))) {
        if (cfg_get_string(r, m, colkey(n, "separator"), &s))
            return EMBER_EINVAL;
        if (strlen(s) != 1)
            return cfg_fail_at(r, m, n->key, "must be one character, got \"%s\"", s);
        k->separator = s[0];
    }
    if ((m = config_setting_get_member(c, "weights")) && cfg_get_bool(r, m, colkey(n, "weights"), &k->weighted))
        return EMBER_EINVAL;
    k->rows = k->type == CTR_COL_CATEGORICAL || k->type == CTR_COL_MULTI_HOT ? hash_rows : 0;
    if ((m = config_setting_get_member(c, "rows")) &&
        cfg_get_int64(r, m, colkey(n, "rows"), 0, INT64_C(1) << 40, &k->rows))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(c, "table"))) {
        if (cfg_get_string(r, m, colkey(n, "table"), &s))
            return EMBER_EINVAL;
        if (!(*table = cfg_keep(r, s)))
            return cfg_fail_at(r, m, n->key, "out of memory");
    }
    return 0;
}

/* Column i of the list into t->schema_cols[i] (and its table). */
static int read_column(cfg_reader *r, const config_setting_t *cols, int i, cfg_train *t)
{
    static const char *const COL_KEYS[] = {"name", "type", "label", "transform", "min", "max", "mean", "std",
                                           "encoding", "separator", "weights", "table", "rows", NULL};
    column_entry n = {r, config_setting_get_elem(cols, (unsigned)i), "", ""};
    ctr_column *k = &t->schema_cols[i];
    snprintf(n.where, sizeof n.where, "data.schema.columns[%d]", i);
    if (config_setting_type(n.c) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, n.c, n.where, "must be a group { name = ...; type = ...; }");
    if (cfg_check_keys(r, n.c, n.where, COL_KEYS) || read_name_type(&n, k) || check_type_keys(&n, k) ||
        read_label_transform(&n, k) || read_sparse(&n, k, t->hash_rows, &t->schema_tables[i]))
        return EMBER_EINVAL;
    return 0;
}

/* data.schema's own settings: format (the delimiter), header, max_line. */
static int read_format(cfg_reader *r, const config_setting_t *g, cfg_train *t)
{
    static const char *const FORMATS[] = {"csv", "tsv", NULL};
    const config_setting_t *m;
    int e;
    int64_t v;
    t->schema_line = (int)config_setting_source_line(g);
    t->schema.delimiter = ',';
    t->schema.max_line = 65536;
    if ((m = config_setting_get_member(g, "format"))) {
        if (cfg_get_enum(r, m, "data.schema.format", FORMATS, &e))
            return EMBER_EINVAL;
        t->schema.delimiter = e ? '\t' : ',';
    }
    if ((m = config_setting_get_member(g, "header")) && cfg_get_bool(r, m, "data.schema.header", &t->schema.header))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "max_line"))) {
        if (cfg_get_int64(r, m, "data.schema.max_line", 1, CTR_TEXT_MAX_LINE_LIMIT, &v))
            return EMBER_EINVAL;
        t->schema.max_line = (int32_t)v;
    }
    return 0;
}

/* data.schema (docs/data.md, "The schema"). */
int cfg_read_schema(cfg_reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"format", "header", "columns", "max_line", NULL};
    cfg_train *t = &r->cf->train;
    const config_setting_t *cols;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "data.schema", "must be a group { format = ...; columns = (...); }");
    if (cfg_check_keys(r, g, "data.schema", KEYS) || read_format(r, g, t))
        return EMBER_EINVAL;
    if (!(cols = config_setting_get_member(g, "columns")))
        return cfg_fail_at(r, g, "data.schema.columns", "missing (a list: columns = ( { name = ...; type = ...; } "
                           ");)");
    if (config_setting_type(cols) != CONFIG_TYPE_LIST || config_setting_length(cols) < 1 ||
        config_setting_length(cols) > CTR_MAX_COLUMNS)
        return cfg_fail_at(r, cols, "data.schema.columns", "must be a list of 1 to %d groups", CTR_MAX_COLUMNS);
    int n = config_setting_length(cols);
    t->schema_cols = calloc((size_t)n, sizeof *t->schema_cols);
    t->schema_tables = calloc((size_t)n, sizeof *t->schema_tables);
    if (!t->schema_cols || !t->schema_tables)
        return cfg_fail_at(r, cols, "data.schema.columns", "out of memory");
    for (int i = 0; i < n; i++)
        if (read_column(r, cols, i, t))
            return EMBER_EINVAL;
    t->schema.num_columns = n;
    t->schema.columns = t->schema_cols;
    char err[400];
    text_plan plan;
    if (text_plan_init(&plan, &t->schema, "data.schema", err, sizeof err))
        return cfg_fail_at(r, g, "data.schema", "%s", err + strlen("data.schema: "));
    text_plan_free(&plan);
    return 0;
}
