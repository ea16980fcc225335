/*
 * config_file.c: reads the tools' config file with libconfig (config_file.h,
 * docs/config.md).
 *
 * libconfig parses; this file checks every key against the keys it knows
 * (a typo is an error, never a silently ignored setting), fills an
 * ember_collection_config plus the tool-level extras, and names file, line
 * and key in every message.  Groups of alike tables or features are written
 * once with `count = N` and a "%d" in the name (and a feature's `table`),
 * which makes W2's 26 tables or a cluster's 200 features a few lines.
 *
 * One trap is closed before libconfig sees the file: libconfig 1.5 wraps a
 * decimal integer above 2^31-1 without a word (5000000000 reads as
 * 705032704), so such literals are refused with their line, asking for the
 * L suffix or float notation (5e9).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libconfig.h>

#include "config_file.h"

typedef struct reader {
    const char *path;
    char *err;
    size_t errlen;
    config_file *cf;
} reader;

static int fail_at(reader *r, const config_setting_t *s, const char *key, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    unsigned line = s ? config_setting_source_line(s) : 0;
    if (line)
        snprintf(r->err, r->errlen, "%s:%u: %s: %s", r->path, line, key, msg);
    else
        snprintf(r->err, r->errlen, "%s: %s: %s", r->path, key, msg);
    return -1;
}

static char *keep(reader *r, const char *s)
{
    config_file *cf = r->cf;
    char **v = realloc(cf->strings, sizeof *v * (size_t)(cf->num_strings + 1));
    if (!v)
        return NULL;
    cf->strings = v;
    char *c = strdup(s);
    if (c)
        cf->strings[cf->num_strings++] = c;
    return c;
}

/* ------------------------------------------------------------ values */

static const char *type_name(int type)
{
    switch (type) {
    case CONFIG_TYPE_GROUP: return "a group { }";
    case CONFIG_TYPE_INT: case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a number";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array [ ]";
    case CONFIG_TYPE_LIST: return "a list ( )";
    default: return "something else";
    }
}

/* An integer setting (int, int64, or a float with an integral value). */
static int get_int64(reader *r, const config_setting_t *s, const char *key, int64_t lo,
                     int64_t hi, int64_t *out)
{
    int64_t v;
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        v = config_setting_get_int64(s);
        break;
    case CONFIG_TYPE_FLOAT: {
        double d = config_setting_get_float(s);
        if (!(d == floor(d)) || fabs(d) > 9.0e18)
            return fail_at(r, s, key, "must be a whole number, got %g", d);
        v = (int64_t)d;
        break;
    }
    default:
        return fail_at(r, s, key, "must be an integer, got %s",
                       type_name(config_setting_type(s)));
    }
    if (v < lo || v > hi)
        return fail_at(r, s, key, "must be in %lld..%lld, got %lld", (long long)lo,
                       (long long)hi, (long long)v);
    *out = v;
    return 0;
}

static int get_double(reader *r, const config_setting_t *s, const char *key, double lo,
                      double hi, double *out)
{
    double v;
    int t = config_setting_type(s);
    if (t == CONFIG_TYPE_FLOAT)
        v = config_setting_get_float(s);
    else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
        v = (double)config_setting_get_int64(s);
    else
        return fail_at(r, s, key, "must be a number, got %s", type_name(t));
    if (!(v >= lo && v <= hi))
        return fail_at(r, s, key, "must be in [%g, %g], got %g", lo, hi, v);
    *out = v;
    return 0;
}

static int get_bool(reader *r, const config_setting_t *s, const char *key, int *out)
{
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return fail_at(r, s, key, "must be true or false, got %s",
                       type_name(config_setting_type(s)));
    *out = config_setting_get_bool(s);
    return 0;
}

static int get_string(reader *r, const config_setting_t *s, const char *key, const char **out)
{
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return fail_at(r, s, key, "must be a string, got %s", type_name(config_setting_type(s)));
    *out = config_setting_get_string(s);
    return 0;
}

/* One of names[] (NULL-terminated) -> its index. */
static int get_enum(reader *r, const config_setting_t *s, const char *key,
                    const char *const *names, int *out)
{
    const char *v = NULL;
    if (get_string(r, s, key, &v))
        return -1;
    char known[256] = "";
    for (int i = 0; names[i]; i++) {
        if (!strcmp(v, names[i])) {
            *out = i;
            return 0;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 names[i]);
    }
    return fail_at(r, s, key, "unknown value \"%s\" (one of: %s)", v, known);
}

int config_parse_bytes(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
        return -1;
    while (*end == ' ')
        end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; break;
    case 'M': mul = 1024.0 * 1024; break;
    case 'G': mul = 1024.0 * 1024 * 1024; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
    case 'P': mul = 1024.0 * 1024 * 1024 * 1024 * 1024; break;
    case 'B': case '\0': break;
    default: return -1;
    }
    if (mul > 1) {
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B") || !*end)
            end += strlen(end);
    } else if (toupper((unsigned char)*end) == 'B') {
        end++;
    }
    if (*end || v * mul > 9.0e18)
        return -1;
    *out = (int64_t)llround(v * mul);
    return 0;
}

/* Bytes: an integer, a number, or a string with a unit ("64 GiB"). */
static int get_bytes(reader *r, const config_setting_t *s, const char *key, int64_t *out)
{
    if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        if (config_parse_bytes(config_setting_get_string(s), out))
            return fail_at(r, s, key, "bad size \"%s\" (e.g. 1048576, \"512 MiB\", \"64G\")",
                           config_setting_get_string(s));
        return 0;
    }
    return get_int64(r, s, key, 0, INT64_MAX, out);
}

/* Every member of group g must be one of names[] (NULL-terminated). */
static int check_keys(reader *r, const config_setting_t *g, const char *where,
                      const char *const *names)
{
    int n = config_setting_length(g);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
        const char *k = config_setting_name(m);
        int ok = 0;
        for (int j = 0; names[j] && !ok; j++)
            ok = k && !strcmp(k, names[j]);
        if (!ok) {
            char known[512] = "", key[160];
            for (int j = 0; names[j]; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         j ? ", " : "", names[j]);
            snprintf(key, sizeof key, "%s%s%s", where, *where ? "." : "", k ? k : "?");
            return fail_at(r, m, key, "unknown key (known here: %s)", known);
        }
    }
    return 0;
}

/* "%d" in pattern replaced by i (only that, never a user format). */
static int expand_name(reader *r, const config_setting_t *s, const char *key,
                       const char *pattern, int64_t count, int64_t i, char *out, size_t n)
{
    const char *p = strstr(pattern, "%d");
    if (count > 1 && !p)
        return fail_at(r, s, key, "\"%s\" needs a %%d for the index when count > 1", pattern);
    if (p && strstr(p + 2, "%d"))
        return fail_at(r, s, key, "\"%s\" has more than one %%d", pattern);
    if (!p) {
        snprintf(out, n, "%s", pattern);
    } else {
        snprintf(out, n, "%.*s%lld%s", (int)(p - pattern), pattern, (long long)i, p + 2);
    }
    if (!out[0])
        return fail_at(r, s, key, "must not be empty");
    return 0;
}

/* -------------------------------------------------------------- names */

static const char *const PLACEMENTS[] = {"row", "column", "table", "replicated", NULL};
static const char *const EXCHANGES[] = {"rows", "pooled", NULL};
static const char *const OPTIMIZERS[] = {"sgd", "adagrad", "rowwise_adagrad", "adam", NULL};
static const char *const INITS[] = {"uniform", "normal", "zeros", "constant", NULL};
static const char *const COMBINERS[] = {"sum", "mean", "sqrtn", "none", NULL};
static const char *const POLICIES[] = {"error", "drop", "minibatch", NULL};
static const char *const DISTS[] = {"uniform", "zipf", NULL};

const char *config_placement_name(int p) { return p >= 0 && p < 4 ? PLACEMENTS[p] : "auto"; }
const char *config_exchange_name(int x) { return x >= 0 && x < 2 ? EXCHANGES[x] : "auto"; }
const char *config_optimizer_name(ember_optimizer_kind k)
{
    return (unsigned)k < 4 ? OPTIMIZERS[k] : "?";
}

/* ------------------------------------------------------------- sections */

static int read_optimizer(reader *r, const config_setting_t *s, const char *key,
                          ember_optimizer *o)
{
    int kind;
    if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        if (get_enum(r, s, key, OPTIMIZERS, &kind))
            return -1;
        *o = ember_optimizer_default((ember_optimizer_kind)kind);
        return 0;
    }
    if (config_setting_type(s) != CONFIG_TYPE_GROUP)
        return fail_at(r, s, key, "must be a kind (\"adagrad\") or a group { kind = ...; lr = ...; }");
    static const char *const KEYS[] = {"kind", "lr", "eps", "weight_decay", "beta1", "beta2", NULL};
    if (check_keys(r, s, key, KEYS))
        return -1;
    const config_setting_t *k = config_setting_get_member(s, "kind");
    char sub[160];
    snprintf(sub, sizeof sub, "%.120s.kind", key);
    if (!k)
        return fail_at(r, s, sub, "missing (one of: sgd, adagrad, rowwise_adagrad, adam)");
    if (get_enum(r, k, sub, OPTIMIZERS, &kind))
        return -1;
    *o = ember_optimizer_default((ember_optimizer_kind)kind);
    struct { const char *name; float *dst; double lo, hi; } f[] = {
        {"lr", &o->lr, 0, 1e6}, {"eps", &o->eps, 0, 1}, {"weight_decay", &o->weight_decay, 0, 1e6},
        {"beta1", &o->beta1, 0, 1}, {"beta2", &o->beta2, 0, 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const config_setting_t *m = config_setting_get_member(s, f[i].name);
        double v;
        snprintf(sub, sizeof sub, "%.120s.%s", key, f[i].name);
        if (m) {
            if (get_double(r, m, sub, f[i].lo, f[i].hi, &v))
                return -1;
            *f[i].dst = (float)v;
        }
    }
    return 0;
}

static int read_limits(reader *r, const config_setting_t *s, const char *key,
                       ember_table_config *t)
{
    static const char *const KEYS[] = {"max_ids_per_partition", "max_unique_ids_per_partition",
                                       "policy", NULL};
    char sub[160];
    if (config_setting_type(s) != CONFIG_TYPE_GROUP)
        return fail_at(r, s, key, "must be a group { max_ids_per_partition = ...; }");
    if (check_keys(r, s, key, KEYS))
        return -1;
    const config_setting_t *m;
    if ((m = config_setting_get_member(s, "max_ids_per_partition"))) {
        snprintf(sub, sizeof sub, "%.120s.max_ids_per_partition", key);
        if (get_int64(r, m, sub, 0, INT64_MAX, &t->max_ids_per_partition))
            return -1;
    }
    if ((m = config_setting_get_member(s, "max_unique_ids_per_partition"))) {
        snprintf(sub, sizeof sub, "%.120s.max_unique_ids_per_partition", key);
        if (get_int64(r, m, sub, 0, INT64_MAX, &t->max_unique_ids_per_partition))
            return -1;
    }
    if ((m = config_setting_get_member(s, "policy"))) {
        int p;
        snprintf(sub, sizeof sub, "%.120s.policy", key);
        if (get_enum(r, m, sub, POLICIES, &p))
            return -1;
        t->limit_policy = (ember_limit_policy)p;
    }
    return 0;
}

/* The settings of one table entry, applied to every table it expands to. */
static int read_table_entry(reader *r, const config_setting_t *e, const char *where,
                            ember_table_config *t, cfg_table_extra *x)
{
    static const char *const KEYS[] = {"name", "count", "rows", "dim", "init", "init_value",
                                       "optimizer", "limits", "placement", "owner", "exchange",
                                       "dist", "alpha", NULL};
    char key[160];
    if (config_setting_type(e) != CONFIG_TYPE_GROUP)
        return fail_at(r, e, where, "must be a group { name = ...; rows = ...; dim = ...; }");
    if (check_keys(r, e, where, KEYS))
        return -1;
    *t = ember_table_config_default();
    x->placement_pin = -1;
    x->owner_pin = -1;
    x->exchange_pin = -1;
    x->zipf = r->cf->data.zipf;
    x->alpha = r->cf->data.alpha;
    x->line = (int)config_setting_source_line(e);
    const config_setting_t *m;
    int64_t v;
#define MEMBER(k) (snprintf(key, sizeof key, "%s.%s", where, k), config_setting_get_member(e, k))
    if (!(m = MEMBER("rows")))
        return fail_at(r, e, key, "missing");
    if (get_int64(r, m, key, 1, (INT64_C(1) << 53), &t->rows))
        return -1;
    if (!(m = MEMBER("dim")))
        return fail_at(r, e, key, "missing");
    if (get_int64(r, m, key, 1, 1024, &v))
        return -1;
    t->dim = (int32_t)v;
    if ((m = MEMBER("init"))) {
        int k;
        if (get_enum(r, m, key, INITS, &k))
            return -1;
        t->init = (ember_init_kind)k;
    }
    if ((m = MEMBER("init_value"))) {
        double d;
        if (get_double(r, m, key, -1e30, 1e30, &d))
            return -1;
        t->init_value = (float)d;
    }
    if ((m = MEMBER("optimizer")) && read_optimizer(r, m, key, &t->optimizer))
        return -1;
    if ((m = MEMBER("limits")) && read_limits(r, m, key, t))
        return -1;
    if ((m = MEMBER("placement"))) {
        const char *s = NULL;
        if (get_string(r, m, key, &s))
            return -1;
        if (strcmp(s, "auto")) {
            if (get_enum(r, m, key, PLACEMENTS, &x->placement_pin))
                return -1;
            t->placement = (ember_placement)x->placement_pin;
        }
    }
    if ((m = MEMBER("owner"))) {
        if (get_int64(r, m, key, 0, INT32_MAX, &v))
            return -1;
        if (x->placement_pin != EMBER_PLACE_TABLE)
            return fail_at(r, m, key, "an owner needs placement = \"table\"");
        x->owner_pin = (int32_t)v;
        t->owner = (int32_t)v;
    }
    if ((m = MEMBER("exchange"))) {
        const char *s = NULL;
        if (get_string(r, m, key, &s))
            return -1;
        if (strcmp(s, "auto")) {
            if (get_enum(r, m, key, EXCHANGES, &x->exchange_pin))
                return -1;
            t->exchange = (ember_exchange)x->exchange_pin;
        }
    }
    if ((m = MEMBER("dist"))) {
        if (get_enum(r, m, key, DISTS, &x->zipf))
            return -1;
    }
    if ((m = MEMBER("alpha")) && get_double(r, m, key, 1e-6, 100, &x->alpha))
        return -1;
#undef MEMBER
    return 0;
}

/* count and name of a list entry; *count >= 1. */
static int entry_count_name(reader *r, const config_setting_t *e, const char *where,
                            int64_t *count, const char **name)
{
    char key[160];
    const config_setting_t *m = config_setting_get_member(e, "count");
    *count = 1;
    snprintf(key, sizeof key, "%s.count", where);
    if (m && get_int64(r, m, key, 1, 1000000, count))
        return -1;
    snprintf(key, sizeof key, "%s.name", where);
    m = config_setting_get_member(e, "name");
    if (!m)
        return fail_at(r, e, key, "missing");
    return get_string(r, m, key, name);
}

static int read_tables(reader *r, const config_setting_t *list)
{
    config_file *cf = r->cf;
    if (!list)
        return fail_at(r, NULL, "tables", "missing (a list of tables: tables = ( { ... } );)");
    if (config_setting_type(list) != CONFIG_TYPE_LIST)
        return fail_at(r, list, "tables", "must be a list ( { ... }, ... )");
    int n = config_setting_length(list);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "tables[%d]", i);
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        int64_t count;
        const char *name;
        if (config_setting_type(e) != CONFIG_TYPE_GROUP)
            return fail_at(r, e, where, "must be a group { name = ...; rows = ...; dim = ...; }");
        if (entry_count_name(r, e, where, &count, &name))
            return -1;
        total += count;
    }
    if (total < 1)
        return fail_at(r, list, "tables", "must hold at least one table");
    if (total > 1000000)
        return fail_at(r, list, "tables", "too many tables (%lld)", (long long)total);
    cf->tables = calloc((size_t)total, sizeof *cf->tables);
    cf->table_extra = calloc((size_t)total, sizeof *cf->table_extra);
    if (!cf->tables || !cf->table_extra)
        return fail_at(r, NULL, "tables", "out of memory");
    int32_t k = 0;
    for (int i = 0; i < n; i++) {
        char where[64], nm[256], key[160];
        snprintf(where, sizeof where, "tables[%d]", i);
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        int64_t count;
        const char *pattern;
        entry_count_name(r, e, where, &count, &pattern);
        ember_table_config t;
        cfg_table_extra x;
        if (read_table_entry(r, e, where, &t, &x))
            return -1;
        snprintf(key, sizeof key, "%s.name", where);
        for (int64_t j = 0; j < count; j++, k++) {
            if (expand_name(r, config_setting_get_member(e, "name"), key, pattern, count, j, nm,
                            sizeof nm))
                return -1;
            for (int32_t q = 0; q < k; q++)
                if (!strcmp(cf->tables[q].name, nm))
                    return fail_at(r, config_setting_get_member(e, "name"), key,
                                   "table \"%s\" is defined twice (also on line %d)", nm,
                                   cf->table_extra[q].line);
            cf->tables[k] = t;
            cf->table_extra[k] = x;
            if (!(cf->tables[k].name = keep(r, nm)))
                return fail_at(r, NULL, key, "out of memory");
        }
    }
    cf->num_tables = k;
    return 0;
}

static int read_features(reader *r, const config_setting_t *list)
{
    config_file *cf = r->cf;
    static const char *const KEYS[] = {"name", "count", "table", "combiner", "pooling",
                                       "weighted", NULL};
    if (!list)
        return fail_at(r, NULL, "features", "missing (a list: features = ( { name = ...; "
                                            "table = ...; } );)");
    if (config_setting_type(list) != CONFIG_TYPE_LIST)
        return fail_at(r, list, "features", "must be a list ( { ... }, ... )");
    int n = config_setting_length(list);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "features[%d]", i);
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        int64_t count;
        const char *name;
        if (config_setting_type(e) != CONFIG_TYPE_GROUP)
            return fail_at(r, e, where, "must be a group { name = ...; table = ...; }");
        if (check_keys(r, e, where, KEYS) || entry_count_name(r, e, where, &count, &name))
            return -1;
        total += count;
    }
    if (total < 1)
        return fail_at(r, list, "features", "must hold at least one feature");
    if (total > 1000000)
        return fail_at(r, list, "features", "too many features (%lld)", (long long)total);
    cf->features = calloc((size_t)total, sizeof *cf->features);
    cf->feature_extra = calloc((size_t)total, sizeof *cf->feature_extra);
    if (!cf->features || !cf->feature_extra)
        return fail_at(r, NULL, "features", "out of memory");
    int32_t k = 0;
    for (int i = 0; i < n; i++) {
        char where[64], nm[256], tn[256], key[160];
        snprintf(where, sizeof where, "features[%d]", i);
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i), *m;
        int64_t count;
        const char *pattern = NULL, *tpattern = NULL;
        entry_count_name(r, e, where, &count, &pattern);
        ember_combiner comb = EMBER_COMBINER_SUM;
        double pooling = 1;
        int weighted = 0, c;
        snprintf(key, sizeof key, "%s.table", where);
        if (!(m = config_setting_get_member(e, "table")))
            return fail_at(r, e, key, "missing (the name of a table)");
        if (get_string(r, m, key, &tpattern))
            return -1;
        const config_setting_t *tset = m;
        snprintf(key, sizeof key, "%s.combiner", where);
        if ((m = config_setting_get_member(e, "combiner"))) {
            if (get_enum(r, m, key, COMBINERS, &c))
                return -1;
            comb = (ember_combiner)c;
        }
        snprintf(key, sizeof key, "%s.pooling", where);
        if ((m = config_setting_get_member(e, "pooling")) &&
            get_double(r, m, key, 0, 1e6, &pooling))
            return -1;
        snprintf(key, sizeof key, "%s.weighted", where);
        if ((m = config_setting_get_member(e, "weighted")) && get_bool(r, m, key, &weighted))
            return -1;
        for (int64_t j = 0; j < count; j++, k++) {
            snprintf(key, sizeof key, "%s.name", where);
            if (expand_name(r, config_setting_get_member(e, "name"), key, pattern, count, j, nm,
                            sizeof nm))
                return -1;
            snprintf(key, sizeof key, "%s.table", where);
            if (strstr(tpattern, "%d") ? expand_name(r, tset, key, tpattern, count, j, tn, sizeof tn)
                                       : (snprintf(tn, sizeof tn, "%s", tpattern), 0))
                return -1;
            int32_t t = -1;
            for (int32_t q = 0; q < cf->num_tables && t < 0; q++)
                if (!strcmp(cf->tables[q].name, tn))
                    t = q;
            if (t < 0)
                return fail_at(r, tset, key, "no table named \"%s\"", tn);
            for (int32_t q = 0; q < k; q++)
                if (!strcmp(cf->features[q].name, nm))
                    return fail_at(r, config_setting_get_member(e, "name"), where,
                                   "feature \"%s\" is defined twice (also on line %d)", nm,
                                   cf->feature_extra[q].line);
            cf->features[k].table = t;
            cf->features[k].combiner = comb;
            cf->feature_extra[k] = (cfg_feature_extra){pooling, weighted,
                                                       (int)config_setting_source_line(e)};
            if (!(cf->features[k].name = keep(r, nm)))
                return fail_at(r, NULL, where, "out of memory");
        }
    }
    cf->num_features = k;
    return 0;
}

static int read_data(reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"batch_size", "dist", "alpha", "seed", NULL};
    cfg_data *d = &r->cf->data;
    if (!g)
        return 0;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "data", "must be a group { batch_size = ...; }");
    if (check_keys(r, g, "data", KEYS))
        return -1;
    const config_setting_t *m;
    int64_t v;
    if ((m = config_setting_get_member(g, "batch_size")) &&
        get_int64(r, m, "data.batch_size", 1, INT32_MAX, &d->batch_size))
        return -1;
    if ((m = config_setting_get_member(g, "dist")) && get_enum(r, m, "data.dist", DISTS, &d->zipf))
        return -1;
    if ((m = config_setting_get_member(g, "alpha")) &&
        get_double(r, m, "data.alpha", 1e-6, 100, &d->alpha))
        return -1;
    if ((m = config_setting_get_member(g, "seed"))) {
        if (get_int64(r, m, "data.seed", 0, INT64_MAX, &v))
            return -1;
        d->seed = (uint64_t)v;
    }
    return 0;
}

static int read_planner(reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"world", "memory_per_rank", "replicate_threshold",
                                       "lookup_weight", NULL};
    cfg_planner *p = &r->cf->planner;
    if (!g)
        return 0;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "planner", "must be a group { world = ...; }");
    if (check_keys(r, g, "planner", KEYS))
        return -1;
    const config_setting_t *m;
    int64_t v;
    if ((m = config_setting_get_member(g, "world"))) {
        if (get_int64(r, m, "planner.world", 1, 1 << 20, &v))
            return -1;
        p->world = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "memory_per_rank")) &&
        get_bytes(r, m, "planner.memory_per_rank", &p->memory_per_rank))
        return -1;
    if ((m = config_setting_get_member(g, "replicate_threshold")) &&
        get_bytes(r, m, "planner.replicate_threshold", &p->replicate_threshold))
        return -1;
    if ((m = config_setting_get_member(g, "lookup_weight")) &&
        get_double(r, m, "planner.lookup_weight", 0, 1e6, &p->lookup_weight))
        return -1;
    return 0;
}

static int read_top(reader *r, config_t *c)
{
    static const char *const KEYS[] = {"name", "seed", "stack_tables", "dedup", "debug_checks",
                                       "bounds", "num_shards", "threads", "tables", "features",
                                       "data", "planner", NULL};
    config_file *cf = r->cf;
    const config_setting_t *root = config_root_setting(c), *m;
    if (check_keys(r, root, "", KEYS))
        return -1;
    ember_collection_config *cc = &cf->coll;
    int64_t v = 0;
    int b = 0;
    if ((m = config_lookup(c, "name"))) {
        const char *s = NULL;
        if (get_string(r, m, "name", &s))
            return -1;
        free(cf->name);
        if (!(cf->name = strdup(s)))
            return fail_at(r, NULL, "name", "out of memory");
    }
    if ((m = config_lookup(c, "seed"))) {
        if (get_int64(r, m, "seed", 0, INT64_MAX, &v))
            return -1;
        cc->seed = (uint64_t)v;
    }
    if ((m = config_lookup(c, "stack_tables"))) {
        if (get_bool(r, m, "stack_tables", &b))
            return -1;
        cc->stack_tables = b;
    }
    if ((m = config_lookup(c, "dedup"))) {
        if (get_bool(r, m, "dedup", &b))
            return -1;
        cc->dedup = b;
    }
    if ((m = config_lookup(c, "debug_checks"))) {
        if (get_bool(r, m, "debug_checks", &b))
            return -1;
        cc->debug_checks = b;
    }
    if ((m = config_lookup(c, "bounds"))) {
        static const char *const BOUNDS[] = {"error", "drop", NULL};
        if (get_enum(r, m, "bounds", BOUNDS, &b))
            return -1;
        cc->bounds = (ember_bounds_policy)b;
    }
    if ((m = config_lookup(c, "num_shards"))) {
        if (get_int64(r, m, "num_shards", 0, INT32_MAX, &v))
            return -1;
        cc->num_shards = (int32_t)v;
    }
    if ((m = config_lookup(c, "threads"))) {
        if (get_int64(r, m, "threads", 0, 4096, &v))
            return -1;
        cc->threads = (int32_t)v;
    }
    /* data first: it gives the tables' default id law */
    if (read_data(r, config_lookup(c, "data")) || read_planner(r, config_lookup(c, "planner")) ||
        read_tables(r, config_lookup(c, "tables")) ||
        read_features(r, config_lookup(c, "features")))
        return -1;
    for (int32_t t = 0; t < cf->num_tables; t++) {
        const cfg_table_extra *x = &cf->table_extra[t];
        if (x->owner_pin >= cf->planner.world && config_lookup(c, "planner.world")) {
            snprintf(r->err, r->errlen, "%s:%d: tables: table \"%s\": owner %d is not a rank of "
                     "planner.world = %d", r->path, x->line, cf->tables[t].name, x->owner_pin,
                     cf->planner.world);
            return -1;
        }
    }
    cc->tables = cf->tables;
    cc->num_tables = cf->num_tables;
    cc->features = cf->features;
    cc->num_features = cf->num_features;
    return 0;
}

/* Refuses decimal integer literals above 2^31-1 without an L suffix, which
 * libconfig 1.5 wraps silently.  Skips strings and comments. */
static int scan_big_ints(reader *r, const char *text)
{
    int line = 1;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') {
            line++;
        } else if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1])
                    p++;
                else if (*p == '\n')
                    line++;
            }
            if (!*p)
                return 0; /* libconfig reports the open string */
        } else if (*p == '#' || (*p == '/' && p[1] == '/')) {
            while (p[1] && p[1] != '\n')
                p++;
        } else if (*p == '/' && p[1] == '*') {
            for (p += 2; *p && !(*p == '*' && p[1] == '/'); p++)
                line += *p == '\n';
            if (!*p)
                return 0;
            p++;
        } else if (isdigit((unsigned char)*p) &&
                   (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.'))) {
            const char *q = p;
            if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
                for (q = p + 2; isxdigit((unsigned char)*q); q++)
                    ;
            } else {
                while (isdigit((unsigned char)*q))
                    q++;
                if (*q != '.' && *q != 'e' && *q != 'E' && *q != 'L' &&
                    (q - p > 10 || (q - p == 10 && strncmp(p, "2147483647", 10) > 0))) {
                    snprintf(r->err, r->errlen,
                             "%s:%d: the integer %.*s is too large for libconfig's 32-bit "
                             "integers: write %.*sL (64-bit) or use float notation (5e9)",
                             r->path, line, (int)(q - p), p, (int)(q - p), p);
                    return -1;
                }
            }
            p = q - 1;
        }
    }
    return 0;
}

static char *slurp(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read%s", path, bad ? "" : " (out of memory)");
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

int config_file_load(const char *path, config_file **out, char *err, size_t errlen)
{
    *out = NULL;
    err[0] = '\0';
    config_file *cf = calloc(1, sizeof *cf);
    char *text = NULL;
    config_t c;
    config_init(&c);
    reader r = {path, err, errlen, cf};
    if (!cf) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    cf->path = strdup(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    cf->name = strdup(base);
    if (!cf->path || !cf->name) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    char *dot = strrchr(cf->name, '.');
    if (dot && dot != cf->name)
        *dot = '\0';
    cf->coll = ember_collection_config_default();
    cf->data = (cfg_data){4096, 1, ember_synth_config_default().alpha, 0};
    cf->planner = (cfg_planner){1, 0, INT64_C(1) << 20, 1.0};
    if (!(text = slurp(path, err, errlen)) || scan_big_ints(&r, text))
        goto fail;
    if (!config_read_string(&c, text)) {
        snprintf(err, errlen, "%s:%d: %s", path, config_error_line(&c), config_error_text(&c));
        goto fail;
    }
    if (read_top(&r, &c))
        goto fail;
    config_destroy(&c);
    free(text);
    *out = cf;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "%s: cannot read the config", path);
    config_destroy(&c);
    free(text);
    config_file_free(cf);
    return -1;
}

void config_file_free(config_file *cf)
{
    if (!cf)
        return;
    for (int32_t i = 0; i < cf->num_strings; i++)
        free(cf->strings[i]);
    free(cf->strings);
    free(cf->tables);
    free(cf->features);
    free(cf->table_extra);
    free(cf->feature_extra);
    free(cf->path);
    free(cf->name);
    free(cf);
}

int config_file_weighted(const config_file *cf)
{
    for (int32_t f = 0; f < cf->num_features; f++)
        if (cf->feature_extra[f].weighted)
            return 1;
    return 0;
}
