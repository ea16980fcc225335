/*
 * cfg_features.c: the config file's `features` list (docs/config.md): each
 * feature's table, combiner, pooling and weights; or, without a list, one
 * feature per sparse column of data.schema, and with both, the list must
 * follow the schema's sparse columns in order.  Names must be distinct,
 * and every table a feature names must exist.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"

static const char *feature_name_of(const config_file *cf, int32_t i) { return cf->features[i].name; }

/* The features of list's n entries into cf->features (room for all made);
 * entry[k]: the list entry of feature k.  Duplicates are checked after. */
static int read_feature_entries(cfg_reader *r, const config_setting_t *list, int n,
                                const cfg_name_index *tables_sorted, int *entry)
{
    config_file *cf = r->cf;
    int32_t k = 0;
    for (int i = 0; i < n; i++) {
        char where[64], nm[256], tn[256], key[160];
        snprintf(where, sizeof where, "features[%d]", i);
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i), *m;
        int64_t count;
        const char *pattern = NULL, *tpattern = NULL;
        cfg_entry_count_name(r, e, where, &count, &pattern);
        ember_combiner comb = EMBER_COMBINER_SUM;
        double pooling = 1;
        int weighted = 0, c;
        snprintf(key, sizeof key, "%s.table", where);
        if (!(m = config_setting_get_member(e, "table")))
            return cfg_fail_at(r, e, key, "missing (the name of a table)");
        if (cfg_get_string(r, m, key, &tpattern))
            return EMBER_EINVAL;
        const config_setting_t *tset = m;
        snprintf(key, sizeof key, "%s.combiner", where);
        if ((m = config_setting_get_member(e, "combiner"))) {
            if (cfg_get_enum(r, m, key, CFG_COMBINERS, &c))
                return EMBER_EINVAL;
            comb = (ember_combiner)c;
        }
        snprintf(key, sizeof key, "%s.pooling", where);
        if ((m = config_setting_get_member(e, "pooling")) &&
            cfg_get_double(r, m, key, 0, 1e6, &pooling))
            return EMBER_EINVAL;
        snprintf(key, sizeof key, "%s.weighted", where);
        if ((m = config_setting_get_member(e, "weighted")) && cfg_get_bool(r, m, key, &weighted))
            return EMBER_EINVAL;
        for (int64_t j = 0; j < count; j++, k++) {
            snprintf(key, sizeof key, "%s.name", where);
            if (cfg_expand_name(r, config_setting_get_member(e, "name"), key, pattern, count, j, nm,
                            sizeof nm))
                return EMBER_EINVAL;
            snprintf(key, sizeof key, "%s.table", where);
            if (strstr(tpattern, "%d") ? cfg_expand_name(r, tset, key, tpattern, count, j, tn, sizeof tn)
                                       : (snprintf(tn, sizeof tn, "%s", tpattern), 0))
                return EMBER_EINVAL;
            cfg_name_index want = {tn, 0};
            const cfg_name_index *hit = cf->num_tables == 0 ? NULL
                : bsearch(&want, tables_sorted, (size_t)cf->num_tables, sizeof want, cfg_name_only_cmp);
            if (!hit)
                return cfg_fail_at(r, tset, key, "no table named \"%s\"", tn);
            int32_t t = hit->index;
            entry[k] = i;
            cf->features[k].table = t;
            cf->features[k].combiner = comb;
            cf->feature_extra[k] = (cfg_feature_extra){pooling, weighted,
                                                       (int)config_setting_source_line(e)};
            if (!(cf->features[k].name = cfg_keep(r, nm)))
                return cfg_fail_at(r, NULL, where, "out of memory");
        }
    }
    cf->num_features = k;
    return 0;
}

/* Without `features`: one per sparse column of data.schema, reading the
 * column's table, weighted as the column (docs/data.md). */
static int features_from_schema(cfg_reader *r)
{
    config_file *cf = r->cf;
    const cfg_train *t = &cf->train;
    int32_t n = 0;
    for (int32_t c = 0; c < t->schema.num_columns; c++)
        n += t->schema_cols[c].type == CTR_COL_CATEGORICAL || t->schema_cols[c].type == CTR_COL_MULTI_HOT;
    cf->features = calloc((size_t)n, sizeof *cf->features);
    cf->feature_extra = calloc((size_t)n, sizeof *cf->feature_extra);
    if (!cf->features || !cf->feature_extra)
        return cfg_fail_at(r, NULL, "features", "out of memory");
    int32_t k = 0;
    for (int32_t c = 0; c < t->schema.num_columns; c++) {
        const ctr_column *col = &t->schema_cols[c];
        if (col->type != CTR_COL_CATEGORICAL && col->type != CTR_COL_MULTI_HOT)
            continue;
        if (!t->schema_tables[c]) {
            snprintf(r->err, r->errlen, "%s:%d: data.schema: column \"%s\" names no table (table = ...), and there "
                     "is no features list", r->path, t->schema_line, col->name);
            return EMBER_EINVAL;
        }
        int32_t tb = -1;
        for (int32_t i = 0; i < cf->num_tables; i++)
            if (!strcmp(cf->tables[i].name, t->schema_tables[c]))
                tb = i;
        if (tb < 0) {
            snprintf(r->err, r->errlen, "%s:%d: data.schema: column \"%s\": no table named \"%s\"", r->path,
                     t->schema_line, col->name, t->schema_tables[c]);
            return EMBER_EINVAL;
        }
        cf->features[k].name = col->name;
        cf->features[k].table = tb;
        cf->features[k].combiner = EMBER_COMBINER_SUM;
        cf->feature_extra[k] = (cfg_feature_extra){1, col->type == CTR_COL_MULTI_HOT && col->weighted, t->schema_line};
        k++;
    }
    cf->num_features = k;
    return 0;
}

static int read_features_list(cfg_reader *r, const config_setting_t *list)
{
    config_file *cf = r->cf;
    static const char *const KEYS[] = {"name", "count", "table", "combiner", "pooling",
                                       "weighted", NULL};
    if (!list)
        return cfg_fail_at(r, NULL, "features", "missing (a list: features = ( { name = ...; "
                                            "table = ...; } );)");
    if (config_setting_type(list) != CONFIG_TYPE_LIST)
        return cfg_fail_at(r, list, "features", "must be a list ( { ... }, ... )");
    int n = config_setting_length(list);
    int64_t total;
    if (cfg_entries_total(r, list, "features", "feature", "{ name = ...; table = ...; }", KEYS, &total))
        return EMBER_EINVAL;
    cf->features = calloc((size_t)total, sizeof *cf->features);
    cf->feature_extra = calloc((size_t)total, sizeof *cf->feature_extra);
    if (!cf->features || !cf->feature_extra)
        return cfg_fail_at(r, NULL, "features", "out of memory");
    cfg_name_index *tables_sorted = NULL, *sorted = NULL;
    int *entry = malloc((size_t)total * sizeof *entry);
    int rc = EMBER_EINVAL;
    int32_t q, d;
    if (!entry || cfg_name_index_build(cfg_table_name_of, cf, cf->num_tables, &tables_sorted)) {
        cfg_fail_at(r, NULL, "features", "out of memory");
        goto done;
    }
    if (read_feature_entries(r, list, n, tables_sorted, entry))
        goto done;
    if (cfg_name_index_build(feature_name_of, cf, cf->num_features, &sorted)) {
        cfg_fail_at(r, NULL, "features", "out of memory");
        goto done;
    }
    if (cfg_name_index_duplicate(sorted, cf->num_features, &q, &d)) {
        char where[64];
        snprintf(where, sizeof where, "features[%d]", entry[d]);
        cfg_fail_at(r, config_setting_get_member(config_setting_get_elem(list, (unsigned)entry[d]), "name"), where,
                "feature \"%s\" is defined twice (also on line %d)", cf->features[d].name,
                cf->feature_extra[q].line);
        goto done;
    }
    rc = 0;
done:
    free(entry);
    free(tables_sorted);
    free(sorted);
    return rc;
}

int cfg_read_features(cfg_reader *r, const config_setting_t *list)
{
    config_file *cf = r->cf;
    if (!list && cf->train.schema.num_columns)
        return features_from_schema(r);
    if (cf->train.schema.num_columns) { /* a list beside a schema: its sparse columns, one for one */
        int rc = read_features_list(r, list);
        if (rc)
            return rc;
        int32_t f = 0;
        const cfg_train *t = &cf->train;
        for (int32_t c = 0; c < t->schema.num_columns; c++) {
            const ctr_column *col = &t->schema_cols[c];
            if (col->type != CTR_COL_CATEGORICAL && col->type != CTR_COL_MULTI_HOT)
                continue;
            if (f >= cf->num_features || strcmp(cf->features[f].name, col->name) ||
                (t->schema_tables[c] && strcmp(cf->tables[cf->features[f].table].name, t->schema_tables[c]))) {
                snprintf(r->err, r->errlen, "%s:%d: features: feature %d must be the schema's sparse column \"%s\"%s%s "
                         "(the features follow data.schema's categorical and multi_hot columns in order), got %s%s%s",
                         r->path, f < cf->num_features ? cf->feature_extra[f].line : t->schema_line, (int)f, col->name,
                         t->schema_tables[c] ? " of table " : "", t->schema_tables[c] ? t->schema_tables[c] : "",
                         f < cf->num_features ? "\"" : "none", f < cf->num_features ? cf->features[f].name : "",
                         f < cf->num_features ? "\"" : "");
                return EMBER_EINVAL;
            }
            f++;
        }
        if (f != cf->num_features) {
            snprintf(r->err, r->errlen, "%s: features: %d features, data.schema has %d categorical and multi_hot "
                     "columns", r->path, (int)cf->num_features, (int)f);
            return EMBER_EINVAL;
        }
        return 0;
    }
    return read_features_list(r, list);
}
