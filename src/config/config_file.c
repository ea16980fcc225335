/*
 * config_file.c: reads ember's config file with libconfig (config_file.h,
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
#include <sys/stat.h>
#include <unistd.h>

#include <libconfig.h>

#include "config/config_file.h"
#include "data/text_parse.h"
#include "model/pipeline.h"

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
    int32_t n = cf->num_strings;
    if ((n & (n - 1)) == 0) { /* room for 2n: doubling, as a million names must not cost n^2 copies */
        char **v = realloc(cf->strings, sizeof *v * (size_t)(n ? 2 * n : 1));
        if (!v)
            return NULL;
        cf->strings = v;
    }
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

/* A path in the config: a relative one is relative to the config file's
 * folder (the file can move with its data), "" stays "" (none). */
static int read_path(reader *r, const config_setting_t *m, const char *key, const char **out)
{
    const char *s = NULL;
    if (get_string(r, m, key, &s))
        return -1;
    const char *slash = strrchr(r->path, '/');
    if (s[0] && s[0] != '/' && slash) {
        size_t dir = (size_t)(slash - r->path) + 1, n = dir + strlen(s) + 1;
        char *joined = malloc(n);
        if (joined) {
            memcpy(joined, r->path, dir);
            memcpy(joined + dir, s, strlen(s) + 1);
            *out = keep(r, joined);
            free(joined);
        } else {
            *out = NULL;
        }
    } else {
        *out = keep(r, s);
    }
    if (!*out)
        return fail_at(r, NULL, key, "out of memory");
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
static const char *const STORAGES[] = {"auto", "memory", "ssd", NULL};
static const char *const CACHE_POLICIES[] = {"default", "lru", "lfu", "lookahead", NULL};
static const char *const KINDS[] = {"fixed", "dynamic", NULL};
static const char *const CFG_SCHEDULES[] = {"blocking", "overlap", "stale", NULL}; /* ember_schedule order */

int config_schedule_parse(const char *s)
{
    for (int i = 0; s && CFG_SCHEDULES[i]; i++)
        if (!strcmp(s, CFG_SCHEDULES[i]))
            return i;
    return -1;
}

const char *config_schedule_name(ember_schedule s)
{
    return s >= EMBER_SCHEDULE_BLOCKING && s <= EMBER_SCHEDULE_STALE ? CFG_SCHEDULES[s] : "?";
}
static const char *const EVICTS[] = {"lru", "lfu", "ttl", "none", NULL};

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

/* quantization = { num_buckets = 256; low = -0.5; high = 0.5; }: simulated
 * quantization of the table's forward reads (docs/inference.md). */
static int read_quantization(reader *r, const config_setting_t *s, const char *key, ember_table_config *t)
{
    static const char *const KEYS[] = {"num_buckets", "low", "high", NULL};
    char sub[160];
    if (config_setting_type(s) != CONFIG_TYPE_GROUP)
        return fail_at(r, s, key, "must be a group { num_buckets = 256; low = -0.5; high = 0.5; }");
    if (check_keys(r, s, key, KEYS))
        return -1;
    const char *names[3] = {"num_buckets", "low", "high"};
    double v[3];
    for (int i = 0; i < 3; i++) {
        const config_setting_t *m = config_setting_get_member(s, names[i]);
        snprintf(sub, sizeof sub, "%.120s.%s", key, names[i]);
        if (!m)
            return fail_at(r, s, sub, "missing (quantization needs num_buckets, low and high)");
        if (i == 0) {
            int64_t n;
            if (get_int64(r, m, sub, 2, 1 << 24, &n))
                return -1;
            v[0] = (double)n;
        } else if (get_double(r, m, sub, -1e30, 1e30, &v[i])) {
            return -1;
        }
    }
    if (!(v[1] < v[2]))
        return fail_at(r, s, key, "low (%g) must be below high (%g)", v[1], v[2]);
    t->quant_buckets = (int32_t)v[0];
    t->quant_low = (float)v[1];
    t->quant_high = (float)v[2];
    return 0;
}

/* The settings of one table entry, applied to every table it expands to. */
static int read_table_entry(reader *r, const config_setting_t *e, const char *where,
                            ember_table_config *t, cfg_table_extra *x)
{
    static const char *const KEYS[] = {"name", "count", "rows", "dim", "init", "init_value",
                                       "optimizer", "limits", "placement", "owner", "exchange",
                                       "dist", "alpha", "storage", "cache_bytes", "cache_policy",
                                       "path", "keys", "kind", "capacity", "capacity_bytes", "admit_after", "evict",
                                       "ttl_steps", "sketch_bytes", "quantization", "hot_rows", NULL};
    char key[160];
    if (config_setting_type(e) != CONFIG_TYPE_GROUP)
        return fail_at(r, e, where, "must be a group { name = ...; rows = ...; dim = ...; }");
    if (check_keys(r, e, where, KEYS))
        return -1;
    *t = ember_table_config_default();
    t->optimizer = r->cf->train.emb_optimizer; /* one default for every table: model.emb_optimizer's */
    x->placement_pin = -1;
    x->owner_pin = -1;
    x->exchange_pin = -1;
    x->vocab = 0;
    x->zipf = r->cf->data.zipf;
    x->alpha = r->cf->data.alpha;
    x->line = (int)config_setting_source_line(e);
    x->path_line = 0;
    x->entry = atoi(where + strlen("tables["));
    const config_setting_t *m;
    int64_t v;
#define MEMBER(k) (snprintf(key, sizeof key, "%s.%s", where, k), config_setting_get_member(e, k))
    const char *kind = NULL; /* a dynamic table has no rows: capacity and keys size it */
    const config_setting_t *km = config_setting_get_member(e, "kind");
    int dynamic = km && config_setting_type(km) == CONFIG_TYPE_STRING &&
                  (kind = config_setting_get_string(km)) && !strcmp(kind, "dynamic");
    if (!(m = MEMBER("rows")) && !dynamic)
        return fail_at(r, e, key, "missing");
    if (m && get_int64(r, m, key, 1, (INT64_C(1) << 53), &t->rows))
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
    if ((m = MEMBER("hot_rows"))) {
        if (get_int64(r, m, key, 0, INT64_C(1) << 32, &v))
            return -1;
        t->hot_rows = v;
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
    int k;
    if ((m = MEMBER("storage"))) {
        if (get_enum(r, m, key, STORAGES, &k))
            return -1;
        t->storage = (ember_storage)k;
    }
    if ((m = MEMBER("cache_bytes")) && get_bytes(r, m, key, &t->cache_bytes))
        return -1;
    if ((m = MEMBER("cache_policy"))) {
        if (get_enum(r, m, key, CACHE_POLICIES, &k))
            return -1;
        t->cache_policy = (ember_cache_policy)k;
    }
    if ((m = MEMBER("path"))) {
        if (read_path(r, m, key, &t->path))
            return -1;
        x->path_line = (int)config_setting_source_line(m);
    }
    if ((m = MEMBER("kind"))) {
        if (get_enum(r, m, key, KINDS, &k))
            return -1;
        t->kind = (ember_table_kind)k;
    }
    if ((m = MEMBER("keys")) && get_int64(r, m, key, 1, INT64_C(1) << 53, &x->vocab))
        return -1;
    if (t->kind == EMBER_TABLE_DYNAMIC) {
        if (t->rows)
            return fail_at(r, e, where, "a dynamic table takes any key: no rows (capacity sizes it, keys sets "
                                        "the synthetic data's distinct keys)");
    }
    if ((m = MEMBER("capacity")) && get_int64(r, m, key, 1, (int64_t)UINT32_MAX - 2, &t->capacity))
        return -1;
    if ((m = MEMBER("capacity_bytes")) && get_bytes(r, m, key, &t->capacity_bytes))
        return -1;
    if ((m = MEMBER("admit_after"))) {
        if (get_int64(r, m, key, 0, 65535, &v))
            return -1;
        t->admit_after = (int32_t)v;
    }
    if ((m = MEMBER("evict"))) {
        if (get_enum(r, m, key, EVICTS, &k))
            return -1;
        t->evict = (ember_evict_policy)k;
    }
    if ((m = MEMBER("ttl_steps"))) {
        if (get_int64(r, m, key, 1, INT32_MAX, &v))
            return -1;
        t->ttl_steps = (int32_t)v;
    }
    if ((m = MEMBER("sketch_bytes")) && get_bytes(r, m, key, &t->sketch_bytes))
        return -1;
    if ((m = MEMBER("quantization")) && read_quantization(r, m, key, t))
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

/* Names sorted with their index, so that duplicates and look-ups cost
 * n log n: a group of a million tables (count = 1000000) must not take
 * n^2 string compares. */
typedef struct name_index {
    const char *name;
    int32_t index;
} name_index;

static int name_index_cmp(const void *a, const void *b)
{
    const name_index *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int name_only_cmp(const void *a, const void *b)
{
    return strcmp(((const name_index *)a)->name, ((const name_index *)b)->name);
}

/* names[0, n) sorted into *out (NULL on n == 0); -1 when out of memory. */
static int name_index_build(const char *(*name_of)(const config_file *, int32_t), const config_file *cf,
                            int32_t n, name_index **out)
{
    *out = NULL;
    if (n == 0)
        return 0;
    name_index *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return -1;
    for (int32_t i = 0; i < n; i++)
        v[i] = (name_index){name_of(cf, i), i};
    qsort(v, (size_t)n, sizeof *v, name_index_cmp);
    *out = v;
    return 0;
}

/* The first name (in index order) that an earlier one repeats: its index
 * in *later and the earliest one's in *first; 0 when all are distinct. */
static int name_index_duplicate(const name_index *v, int32_t n, int32_t *first, int32_t *later)
{
    int found = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        if (!strcmp(v[i].name, v[i + 1].name) && (i == 0 || strcmp(v[i - 1].name, v[i].name)) &&
            (!found || v[i + 1].index < *later)) {
            *first = v[i].index; /* the run's first entry: the earliest index */
            *later = v[i + 1].index;
            found = 1;
        }
    return found;
}

static const char *table_name_of(const config_file *cf, int32_t i) { return cf->tables[i].name; }
static const char *feature_name_of(const config_file *cf, int32_t i) { return cf->features[i].name; }

static int read_tables(reader *r, const config_setting_t *list)
{
    config_file *cf = r->cf;
    if (!list)
        return fail_at(r, NULL, "tables", "missing: a list of tables, tables = ( { ... } ); (a file with a "
                       "train = { ... } or model = { ... } group and no tables trains the built-in task's)");
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
    int *entry = malloc((size_t)total * sizeof *entry); /* list entry of each table */
    if (!entry)
        return fail_at(r, NULL, "tables", "out of memory");
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
            goto fail;
        snprintf(key, sizeof key, "%s.name", where);
        for (int64_t j = 0; j < count; j++, k++) {
            if (expand_name(r, config_setting_get_member(e, "name"), key, pattern, count, j, nm,
                            sizeof nm))
                goto fail;
            cf->tables[k] = t;
            cf->table_extra[k] = x;
            entry[k] = i;
            if (!(cf->tables[k].name = keep(r, nm))) {
                fail_at(r, NULL, key, "out of memory");
                goto fail;
            }
        }
    }
    cf->num_tables = k;
    name_index *sorted;
    int32_t q, d;
    if (name_index_build(table_name_of, cf, k, &sorted)) {
        fail_at(r, NULL, "tables", "out of memory");
        goto fail;
    }
    int dup = name_index_duplicate(sorted, k, &q, &d);
    free(sorted);
    if (dup) {
        char key[160];
        snprintf(key, sizeof key, "tables[%d].name", entry[d]);
        fail_at(r, config_setting_get_member(config_setting_get_elem(list, (unsigned)entry[d]), "name"), key,
                "table \"%s\" is defined twice (also on line %d)", cf->tables[d].name, cf->table_extra[q].line);
        goto fail;
    }
    free(entry);
    return 0;
fail:
    free(entry);
    return -1;
}

/* The features of list's n entries into cf->features (room for all made);
 * entry[k]: the list entry of feature k.  Duplicates are checked after. */
static int read_feature_entries(reader *r, const config_setting_t *list, int n,
                                const name_index *tables_sorted, int *entry)
{
    config_file *cf = r->cf;
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
            name_index want = {tn, 0};
            const name_index *hit = cf->num_tables == 0 ? NULL
                : bsearch(&want, tables_sorted, (size_t)cf->num_tables, sizeof want, name_only_cmp);
            if (!hit)
                return fail_at(r, tset, key, "no table named \"%s\"", tn);
            int32_t t = hit->index;
            entry[k] = i;
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

/* Without `features`: one per sparse column of data.schema, reading the
 * column's table, weighted as the column (docs/data.md). */
static int features_from_schema(reader *r)
{
    config_file *cf = r->cf;
    const cfg_train *t = &cf->train;
    int32_t n = 0;
    for (int32_t c = 0; c < t->schema.num_columns; c++)
        n += t->schema_cols[c].type == CTR_COL_CATEGORICAL || t->schema_cols[c].type == CTR_COL_MULTI_HOT;
    cf->features = calloc((size_t)n, sizeof *cf->features);
    cf->feature_extra = calloc((size_t)n, sizeof *cf->feature_extra);
    if (!cf->features || !cf->feature_extra)
        return fail_at(r, NULL, "features", "out of memory");
    int32_t k = 0;
    for (int32_t c = 0; c < t->schema.num_columns; c++) {
        const ctr_column *col = &t->schema_cols[c];
        if (col->type != CTR_COL_CATEGORICAL && col->type != CTR_COL_MULTI_HOT)
            continue;
        if (!t->schema_tables[c]) {
            snprintf(r->err, r->errlen, "%s:%d: data.schema: column \"%s\" names no table (table = ...), and there "
                     "is no features list", r->path, t->schema_line, col->name);
            return -1;
        }
        int32_t tb = -1;
        for (int32_t i = 0; i < cf->num_tables; i++)
            if (!strcmp(cf->tables[i].name, t->schema_tables[c]))
                tb = i;
        if (tb < 0) {
            snprintf(r->err, r->errlen, "%s:%d: data.schema: column \"%s\": no table named \"%s\"", r->path,
                     t->schema_line, col->name, t->schema_tables[c]);
            return -1;
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

static int read_features_list(reader *r, const config_setting_t *list);

static int read_features(reader *r, const config_setting_t *list)
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
                return -1;
            }
            f++;
        }
        if (f != cf->num_features) {
            snprintf(r->err, r->errlen, "%s: features: %d features, data.schema has %d categorical and multi_hot "
                     "columns", r->path, (int)cf->num_features, (int)f);
            return -1;
        }
        return 0;
    }
    return read_features_list(r, list);
}

static int read_features_list(reader *r, const config_setting_t *list)
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
    name_index *tables_sorted = NULL, *sorted = NULL;
    int *entry = malloc((size_t)total * sizeof *entry);
    int rc = -1;
    int32_t q, d;
    if (!entry || name_index_build(table_name_of, cf, cf->num_tables, &tables_sorted)) {
        fail_at(r, NULL, "features", "out of memory");
        goto done;
    }
    if (read_feature_entries(r, list, n, tables_sorted, entry))
        goto done;
    if (name_index_build(feature_name_of, cf, cf->num_features, &sorted)) {
        fail_at(r, NULL, "features", "out of memory");
        goto done;
    }
    if (name_index_duplicate(sorted, cf->num_features, &q, &d)) {
        char where[64];
        snprintf(where, sizeof where, "features[%d]", entry[d]);
        fail_at(r, config_setting_get_member(config_setting_get_elem(list, (unsigned)entry[d]), "name"), where,
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

static const char *const SOURCES[] = {"synthetic", "tsv", "binary", "text", NULL};

const char *config_source_name(cfg_source s)
{
    return (unsigned)s < sizeof SOURCES / sizeof SOURCES[0] - 1 ? SOURCES[s] : "?";
}
static const char *const BAD_LINES[] = {"skip", "fail", NULL};
static const char *const INTERACTIONS[] = {"dot", "cat", "dcn", NULL};
static const char *const ACTIVATIONS[] = {"relu", "gelu", "silu", "tanh", "none", NULL};

/* The built-in student (docs/training.md, "The loop").  Measured on the
 * default task (one rank, micro-batch 2048): DOT gets within 0.01 AUC of the
 * teacher after about 1.5M samples and to about 0.007 after 3M; the 6M
 * samples of the 3000 default steps leave room for a noisy evaluation.
 * One thread per rank: with batches this small, spinning OpenMP and
 * OpenBLAS workers cost more than they bring on a shared 2-core machine
 * (the reader thread of src/train/prefetch.c uses the other core). */
void cfg_train_default(cfg_train *t)
{
    memset(t, 0, sizeof *t);
    t->source = CFG_SOURCE_SYNTHETIC;
    t->bad_lines = CTR_BAD_SKIP;
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
    t->eval_samples = 1 << 16;
    t->dense_optim = dense_optim_config_default(DENSE_ADAM);
    t->dense_optim.lr = 0.004f;
    t->metrics = "ember-train-metrics.jsonl";
    t->plot = "ember-train.png";
}

/* data.synthetic: the teacher task's shape.  num_sparse, rows, alpha and
 * pooling are one value for every feature, and only without `tables`. */
static int read_synthetic(reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"num_dense", "num_sparse", "rows", "alpha", "pooling",
                                       "teacher_dim", "teacher_hidden", "teacher_scale",
                                       "ctr_rate", NULL};
    ctr_synth_config *c = &r->cf->train.synth;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "data.synthetic", "must be a group { num_sparse = ...; }");
    if (check_keys(r, g, "data.synthetic", KEYS))
        return -1;
    const config_setting_t *m;
    int64_t v = 0;
    double d = 0;
#define SYN(k) (m = config_setting_get_member(g, k))
    if (SYN("num_dense")) {
        if (get_int64(r, m, "data.synthetic.num_dense", 0, 1024, &v))
            return -1;
        c->num_dense = (int32_t)v;
    }
    if (SYN("num_sparse")) {
        if (get_int64(r, m, "data.synthetic.num_sparse", 1, CTR_MAX_FEATURES, &v))
            return -1;
        c->num_sparse = (int32_t)v;
    }
    for (int k = 0; k < 3; k++) { /* per-feature values, set for all */
        static const char *const NAMES[] = {"rows", "alpha", "pooling"};
        char key[64];
        snprintf(key, sizeof key, "data.synthetic.%s", NAMES[k]);
        if (!SYN(NAMES[k]))
            continue;
        if (k == 0 ? get_int64(r, m, key, 1, INT64_C(1) << 40, &v)
                   : get_double(r, m, key, k == 1 ? 0 : 1, k == 1 ? 100 : 1e4, &d))
            return -1;
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
        if (get_int64(r, m, "data.synthetic.teacher_dim", 1, 1024, &v))
            return -1;
        c->teacher_dim = (int32_t)v;
    }
    if (SYN("teacher_hidden")) {
        if (get_int64(r, m, "data.synthetic.teacher_hidden", 1, 65536, &v))
            return -1;
        c->teacher_hidden = (int32_t)v;
    }
    if (SYN("teacher_scale") && get_double(r, m, "data.synthetic.teacher_scale", 0, 1e3, &c->teacher_scale))
        return -1;
    if (SYN("ctr_rate") && get_double(r, m, "data.synthetic.ctr_rate", 1e-4, 1 - 1e-4, &c->ctr_rate))
        return -1;
#undef SYN
    return 0;
}

/* data.schema (docs/data.md, "The schema"). */
static int read_schema(reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"format", "header", "columns", "max_line", NULL};
    static const char *const COL_KEYS[] = {"name", "type", "label", "transform", "min", "max", "mean", "std",
                                           "encoding", "separator", "weights", "table", "rows", NULL};
    static const char *const FORMATS[] = {"csv", "tsv", NULL};
    static const char *const TYPES[] = {"ignore", "label", "int", "float", "categorical", "multi_hot", NULL};
    static const char *const LABELS[] = {"binary", "float", NULL};
    static const char *const TRANSFORMS[] = {"none", "log1p", "clip", "standardize", NULL};
    static const char *const ENCODINGS[] = {"string", "int", "hex", NULL};
    cfg_train *t = &r->cf->train;
    const config_setting_t *m, *cols;
    int e;
    int64_t v;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "data.schema", "must be a group { format = ...; columns = (...); }");
    if (check_keys(r, g, "data.schema", KEYS))
        return -1;
    t->schema_line = (int)config_setting_source_line(g);
    t->schema.delimiter = ',';
    t->schema.max_line = 65536;
    if ((m = config_setting_get_member(g, "format"))) {
        if (get_enum(r, m, "data.schema.format", FORMATS, &e))
            return -1;
        t->schema.delimiter = e ? '\t' : ',';
    }
    if ((m = config_setting_get_member(g, "header")) && get_bool(r, m, "data.schema.header", &t->schema.header))
        return -1;
    if ((m = config_setting_get_member(g, "max_line"))) {
        if (get_int64(r, m, "data.schema.max_line", 1, CTR_TEXT_MAX_LINE_LIMIT, &v))
            return -1;
        t->schema.max_line = (int32_t)v;
    }
    if (!(cols = config_setting_get_member(g, "columns")))
        return fail_at(r, g, "data.schema.columns", "missing (a list: columns = ( { name = ...; type = ...; } );)");
    if (config_setting_type(cols) != CONFIG_TYPE_LIST || config_setting_length(cols) < 1 ||
        config_setting_length(cols) > CTR_MAX_COLUMNS)
        return fail_at(r, cols, "data.schema.columns", "must be a list of 1 to %d groups", CTR_MAX_COLUMNS);
    int n = config_setting_length(cols);
    t->schema_cols = calloc((size_t)n, sizeof *t->schema_cols);
    t->schema_tables = calloc((size_t)n, sizeof *t->schema_tables);
    if (!t->schema_cols || !t->schema_tables)
        return fail_at(r, cols, "data.schema.columns", "out of memory");
    for (int i = 0; i < n; i++) {
        const config_setting_t *c = config_setting_get_elem(cols, (unsigned)i);
        ctr_column *k = &t->schema_cols[i];
        char where[64], key[96];
        const char *s = NULL;
        snprintf(where, sizeof where, "data.schema.columns[%d]", i);
        if (config_setting_type(c) != CONFIG_TYPE_GROUP)
            return fail_at(r, c, where, "must be a group { name = ...; type = ...; }");
        if (check_keys(r, c, where, COL_KEYS))
            return -1;
#define COLKEY(k_) (snprintf(key, sizeof key, "%s.%s", where, k_), key)
        if (!(m = config_setting_get_member(c, "name")))
            return fail_at(r, c, COLKEY("name"), "missing");
        if (get_string(r, m, COLKEY("name"), &s))
            return -1;
        if (!s[0] || strlen(s) >= sizeof k->name)
            return fail_at(r, m, key, "must be 1 to %d bytes", (int)sizeof k->name - 1);
        strcpy(k->name, s);
        if (!(m = config_setting_get_member(c, "type")))
            return fail_at(r, c, COLKEY("type"), "missing (label, int, float, categorical, multi_hot or ignore)");
        if (get_enum(r, m, COLKEY("type"), TYPES, &e))
            return -1;
        k->type = (ctr_col_type)e;
        const int dense = k->type == CTR_COL_INT || k->type == CTR_COL_FLOAT;
        const int sparse = k->type == CTR_COL_CATEGORICAL || k->type == CTR_COL_MULTI_HOT;
        static const char *const ONLY_DENSE[] = {"transform", "min", "max", "mean", "std", NULL};
        static const char *const ONLY_SPARSE[] = {"encoding", "table", "rows", NULL};
        for (int j = 0; ONLY_DENSE[j]; j++)
            if (!dense && config_setting_get_member(c, ONLY_DENSE[j]))
                return fail_at(r, config_setting_get_member(c, ONLY_DENSE[j]), COLKEY(ONLY_DENSE[j]),
                               "only for int and float columns (column \"%s\" is %s)", k->name, TYPES[k->type]);
        for (int j = 0; ONLY_SPARSE[j]; j++)
            if (!sparse && config_setting_get_member(c, ONLY_SPARSE[j]))
                return fail_at(r, config_setting_get_member(c, ONLY_SPARSE[j]), COLKEY(ONLY_SPARSE[j]),
                               "only for categorical and multi_hot columns (column \"%s\" is %s)", k->name,
                               TYPES[k->type]);
        if (k->type != CTR_COL_MULTI_HOT && (config_setting_get_member(c, "separator") ||
                                             config_setting_get_member(c, "weights")))
            return fail_at(r, c, COLKEY("separator"), "separator and weights are only for multi_hot columns");
        if (k->type != CTR_COL_LABEL && config_setting_get_member(c, "label"))
            return fail_at(r, c, COLKEY("label"), "only for the label column");
        if ((m = config_setting_get_member(c, "label"))) {
            if (get_enum(r, m, COLKEY("label"), LABELS, &e))
                return -1;
            k->float_label = e;
        }
        if ((m = config_setting_get_member(c, "transform"))) {
            if (get_enum(r, m, COLKEY("transform"), TRANSFORMS, &e))
                return -1;
            k->transform = (ctr_transform)e;
        }
        int has_min = config_setting_get_member(c, "min") != NULL, has_max = config_setting_get_member(c, "max") != NULL;
        if ((has_min || has_max) != (k->transform == CTR_TF_CLIP) || has_min != has_max)
            return fail_at(r, c, COLKEY("transform"), "clip takes min and max, other transforms neither");
        if (has_min && (get_double(r, config_setting_get_member(c, "min"), COLKEY("min"), -1e300, 1e300, &k->min) ||
                        get_double(r, config_setting_get_member(c, "max"), COLKEY("max"), k->min, 1e300, &k->max)))
            return -1;
        int has_mean = config_setting_get_member(c, "mean") != NULL, has_std = config_setting_get_member(c, "std") != NULL;
        if ((has_mean || has_std) && (k->transform != CTR_TF_STANDARDIZE || has_mean != has_std))
            return fail_at(r, c, COLKEY("mean"), "mean and std go together, with transform = \"standardize\"");
        if (has_mean && (get_double(r, config_setting_get_member(c, "mean"), COLKEY("mean"), -1e300, 1e300, &k->mean) ||
                         get_double(r, config_setting_get_member(c, "std"), COLKEY("std"), 1e-300, 1e300, &k->std)))
            return -1;
        k->has_stats = has_mean;
        if ((m = config_setting_get_member(c, "encoding"))) {
            if (get_enum(r, m, COLKEY("encoding"), ENCODINGS, &e))
                return -1;
            k->encoding = (ctr_encoding)e;
        }
        k->separator = '|';
        if ((m = config_setting_get_member(c, "separator"))) {
            if (get_string(r, m, COLKEY("separator"), &s))
                return -1;
            if (strlen(s) != 1)
                return fail_at(r, m, key, "must be one character, got \"%s\"", s);
            k->separator = s[0];
        }
        if ((m = config_setting_get_member(c, "weights")) && get_bool(r, m, COLKEY("weights"), &k->weighted))
            return -1;
        k->rows = sparse ? t->hash_rows : 0;
        if ((m = config_setting_get_member(c, "rows")) && get_int64(r, m, COLKEY("rows"), 0, INT64_C(1) << 40, &k->rows))
            return -1;
        if ((m = config_setting_get_member(c, "table"))) {
            if (get_string(r, m, COLKEY("table"), &s))
                return -1;
            if (!(t->schema_tables[i] = keep(r, s)))
                return fail_at(r, m, key, "out of memory");
        }
#undef COLKEY
    }
    t->schema.num_columns = n;
    t->schema.columns = t->schema_cols;
    char err[400];
    text_plan plan;
    if (text_plan_init(&plan, &t->schema, "data.schema", err, sizeof err))
        return fail_at(r, g, "data.schema", "%s", err + strlen("data.schema: "));
    text_plan_free(&plan);
    return 0;
}

static int read_data(reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"batch_size", "dist", "alpha", "seed", "source",
                                       "train_file", "eval_file", "bad_lines", "hash_rows",
                                       "synthetic", "shuffle", "schema", NULL};
    cfg_data *d = &r->cf->data;
    cfg_train *t = &r->cf->train;
    if (!g)
        return 0;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "data", "must be a group { batch_size = ...; }");
    if (check_keys(r, g, "data", KEYS))
        return -1;
    const config_setting_t *m;
    int64_t v;
    int e;
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
        t->synth.seed = (uint64_t)v;
    }
    if ((m = config_setting_get_member(g, "source"))) {
        if (get_enum(r, m, "data.source", SOURCES, &e))
            return -1;
        t->source = (cfg_source)e;
        t->file_source_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "train_file"))) {
        if (read_path(r, m, "data.train_file", &t->train_file))
            return -1;
        t->train_file_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "eval_file"))) {
        if (read_path(r, m, "data.eval_file", &t->eval_file))
            return -1;
        t->eval_file_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "shuffle"))) {
        if (config_setting_type(m) != CONFIG_TYPE_BOOL)
            return fail_at(r, m, "data.shuffle", "must be true or false");
        t->shuffle = config_setting_get_bool(m);
    }
    if ((m = config_setting_get_member(g, "bad_lines"))) {
        if (get_enum(r, m, "data.bad_lines", BAD_LINES, &e))
            return -1;
        t->bad_lines = (ctr_bad_policy)e;
    }
    if ((m = config_setting_get_member(g, "hash_rows")) &&
        get_int64(r, m, "data.hash_rows", 1, INT64_C(1) << 40, &t->hash_rows))
        return -1;
    if ((m = config_setting_get_member(g, "synthetic")) && read_synthetic(r, m))
        return -1;
    if ((m = config_setting_get_member(g, "schema")) && read_schema(r, m))
        return -1;
    if (t->schema.num_columns && !config_setting_get_member(g, "source")) {
        t->source = CFG_SOURCE_TEXT; /* a schema says what the data is */
        t->file_source_line = t->schema_line;
    }
    t->file_source = t->source;
    if (t->source == CFG_SOURCE_TEXT && !t->schema.num_columns)
        return fail_at(r, g, "data.schema", "missing (data.source = \"text\" reads a file by its schema)");
    if (t->source == CFG_SOURCE_SYNTHETIC && (t->train_file || t->eval_file))
        return fail_at(r, config_setting_get_member(g, t->train_file ? "train_file" : "eval_file"),
                       t->train_file ? "data.train_file" : "data.eval_file",
                       "needs data.source = \"text\", \"tsv\" or \"binary\"");
    if (t->source != CFG_SOURCE_SYNTHETIC && t->source != CFG_SOURCE_TEXT && !t->train_file)
        return fail_at(r, g, "data.train_file", "missing (data.source = \"%s\" reads a file)",
                       SOURCES[t->source]); /* a schema also serves ember convert: its files come from the command line */
    if (t->source != CFG_SOURCE_SYNTHETIC && config_setting_get_member(g, "synthetic"))
        return fail_at(r, config_setting_get_member(g, "synthetic"), "data.synthetic",
                       "only with data.source = \"synthetic\"");
    return 0;
}

/* An array of 1..DENSE_MAX_LAYERS widths. */
static int read_widths(reader *r, const config_setting_t *s, const char *key, int32_t *n, int32_t *w)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
        return fail_at(r, s, key, "must be an array of layer widths, e.g. [64, 16]");
    int len = config_setting_length(s);
    if (len < 1 || len > DENSE_MAX_LAYERS)
        return fail_at(r, s, key, "must hold 1..%d widths, got %d", DENSE_MAX_LAYERS, len);
    for (int i = 0; i < len; i++) {
        char sub[96];
        int64_t v = 0;
        snprintf(sub, sizeof sub, "%s[%d]", key, i);
        if (get_int64(r, config_setting_get_elem(s, (unsigned)i), sub, 1, 65536, &v))
            return -1;
        w[i] = (int32_t)v;
    }
    *n = len;
    return 0;
}

/* model: the dense half, and the built-in tables' optimizer and init. */
static int read_model(reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"emb_dim", "bottom", "top", "interaction", "dcn", "activation", "seed",
                                       "emb_optimizer", "emb_init_value", NULL};
    static const char *const DCN_KEYS[] = {"layers", "rank", NULL};
    cfg_train *t = &r->cf->train;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "model", "must be a group { bottom = [...]; top = [...]; }");
    if (check_keys(r, g, "model", KEYS))
        return -1;
    const config_setting_t *m;
    int64_t v;
    int e;
    dlrm_config *mc = &t->model;
    if ((m = config_setting_get_member(g, "emb_dim"))) {
        if (get_int64(r, m, "model.emb_dim", 1, 1024, &v))
            return -1;
        mc->emb_dim = (int32_t)v;
        if (!config_setting_get_member(g, "bottom"))
            mc->bottom[mc->num_bottom - 1] = mc->emb_dim;
    }
    if ((m = config_setting_get_member(g, "bottom")) && read_widths(r, m, "model.bottom", &mc->num_bottom, mc->bottom))
        return -1;
    if ((m = config_setting_get_member(g, "top")) && read_widths(r, m, "model.top", &mc->num_top, mc->top))
        return -1;
    if ((m = config_setting_get_member(g, "interaction"))) {
        if (get_enum(r, m, "model.interaction", INTERACTIONS, &e))
            return -1;
        mc->interaction = (dense_interaction)e;
    }
    mc->num_cross = mc->interaction == DENSE_INTERACT_DCN ? 3 : 0; /* DCN's default: 3 full cross layers */
    mc->cross_rank = 0;
    if ((m = config_setting_get_member(g, "dcn"))) {
        if (mc->interaction != DENSE_INTERACT_DCN)
            return fail_at(r, m, "model.dcn", "needs interaction = \"dcn\"");
        if (config_setting_type(m) != CONFIG_TYPE_GROUP)
            return fail_at(r, m, "model.dcn", "must be a group { layers = 3; rank = 0; }");
        if (check_keys(r, m, "model.dcn", DCN_KEYS))
            return -1;
        const config_setting_t *x;
        if ((x = config_setting_get_member(m, "layers"))) {
            if (get_int64(r, x, "model.dcn.layers", 1, DENSE_MAX_CROSS, &v))
                return -1;
            mc->num_cross = (int32_t)v;
        }
        if ((x = config_setting_get_member(m, "rank"))) {
            if (get_int64(r, x, "model.dcn.rank", 0, 65536, &v))
                return -1;
            mc->cross_rank = (int32_t)v;
        }
    }
    if ((m = config_setting_get_member(g, "activation"))) {
        if (get_enum(r, m, "model.activation", ACTIVATIONS, &e))
            return -1;
        mc->activation = (dense_activation)e;
    }
    if ((m = config_setting_get_member(g, "seed"))) {
        if (get_int64(r, m, "model.seed", 0, INT64_MAX, &v))
            return -1;
        mc->seed = (uint64_t)v;
    }
    if ((m = config_setting_get_member(g, "emb_optimizer")) &&
        read_optimizer(r, m, "model.emb_optimizer", &t->emb_optimizer))
        return -1;
    if ((m = config_setting_get_member(g, "emb_init_value"))) {
        double d;
        if (get_double(r, m, "model.emb_init_value", 0, 1e3, &d))
            return -1;
        t->emb_init_value = (float)d;
    }
    return 0;
}

static const char *const LR_DECAYS[] = {"none", "linear", "cosine", "step", NULL}; /* lr_decay order */

/* train.lr_schedule = { warmup = N; decay = "cosine"; final = X; every = N; gamma = X; } */
static int read_lr_schedule(reader *r, const config_setting_t *g, lr_schedule *out)
{
    static const char *const KEYS[] = {"warmup", "decay", "final", "every", "gamma", NULL};
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "train.lr_schedule", "must be a group { warmup = ...; decay = ...; }");
    if (check_keys(r, g, "train.lr_schedule", KEYS))
        return -1;
    lr_schedule s = {0, LR_DECAY_NONE, 0.0f, 1, 0.5f};
    const config_setting_t *m;
    int k;
    double d;
    if ((m = config_setting_get_member(g, "warmup")) &&
        get_int64(r, m, "train.lr_schedule.warmup", 0, INT64_C(1) << 40, &s.warmup))
        return -1;
    if ((m = config_setting_get_member(g, "decay"))) {
        if (get_enum(r, m, "train.lr_schedule.decay", LR_DECAYS, &k))
            return -1;
        s.decay = (lr_decay)k;
    }
    if ((m = config_setting_get_member(g, "final"))) {
        if (get_double(r, m, "train.lr_schedule.final", 0, 1e6, &d))
            return -1;
        s.final = (float)d;
    }
    if ((m = config_setting_get_member(g, "every")) &&
        get_int64(r, m, "train.lr_schedule.every", 1, INT64_C(1) << 40, &s.every))
        return -1;
    if ((m = config_setting_get_member(g, "gamma"))) {
        if (get_double(r, m, "train.lr_schedule.gamma", 0, 1e6, &d))
            return -1;
        s.gamma = (float)d;
    }
    *out = s;
    return 0;
}

const char *config_lr_decay_name(lr_decay d)
{
    return d >= LR_DECAY_NONE && d <= LR_DECAY_STEP ? LR_DECAYS[d] : "?";
}

/* train: the loop. */
static int read_train(reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"micro_batch", "accumulate", "optimizer_shards", "schedule", "hot_refresh_every",
                                       "lr_schedule", "early_stop", "keep_best", "epochs",
                                       "steps", "eval_every",
                                       "eval_samples", "log_every", "optimizer", "metrics",
                                       "plot", "checkpoint_dir", "checkpoint_every", "checkpoint_keep",
                                       "plan", "pipeline", NULL};
    static const char *const DENSE_OPT[] = {"sgd", "adam", NULL};
    static const char *const PIPE_KEYS[] = {"stages", "schedule", "virtual", "recompute", "cuts", NULL};
    static const char *const PIPE_SCHEDULES[] = {"fill-drain", "1f1b", "interleaved", NULL}; /* pipe_schedule */
    cfg_train *t = &r->cf->train;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "train", "must be a group { steps = ...; }");
    if (check_keys(r, g, "train", KEYS))
        return -1;
    const config_setting_t *m;
    int64_t v;
    if ((m = config_setting_get_member(g, "pipeline"))) { /* docs/training.md, "Pipeline stages" */
        if (config_setting_type(m) != CONFIG_TYPE_GROUP)
            return fail_at(r, m, "train.pipeline", "must be a group { stages = 2; schedule = \"1f1b\"; }");
        if (check_keys(r, m, "train.pipeline", PIPE_KEYS))
            return -1;
        const config_setting_t *x;
        int e;
        t->pipe_stages = 2, t->pipe_schedule = PIPE_1F1B, t->pipe_virtual = 1;
        if ((x = config_setting_get_member(m, "stages"))) {
            if (get_int64(r, x, "train.pipeline.stages", 1, 64, &v))
                return -1;
            t->pipe_stages = (int32_t)v;
        }
        if ((x = config_setting_get_member(m, "schedule"))) {
            if (get_enum(r, x, "train.pipeline.schedule", PIPE_SCHEDULES, &e))
                return -1;
            t->pipe_schedule = e;
            t->pipe_virtual = pipe_config_default((pipe_schedule)e).virtual_stages;
        }
        if ((x = config_setting_get_member(m, "virtual"))) {
            if (get_int64(r, x, "train.pipeline.virtual", 1, 64, &v))
                return -1;
            if (v > 1 && t->pipe_schedule != PIPE_INTERLEAVED)
                return fail_at(r, x, "train.pipeline.virtual", "more than 1 needs schedule = \"interleaved\"");
            t->pipe_virtual = (int32_t)v;
        }
        if ((x = config_setting_get_member(m, "recompute"))) {
            if (get_bool(r, x, "train.pipeline.recompute", &t->pipe_recompute))
                return -1;
        }
        if ((x = config_setting_get_member(m, "cuts"))) {
            int n = config_setting_length(x);
            if (config_setting_type(x) != CONFIG_TYPE_ARRAY || n < 1 || n > 63)
                return fail_at(r, x, "train.pipeline.cuts", "must be an array of 1..63 block numbers");
            for (int i = 0; i < n; i++) {
                if (get_int64(r, config_setting_get_elem(x, (unsigned)i), "train.pipeline.cuts", 1, 1 << 20, &v))
                    return -1;
                t->pipe_cuts[i] = (int32_t)v;
            }
            t->pipe_num_cuts = n;
        }
    }
    if ((m = config_setting_get_member(g, "micro_batch"))) {
        if (get_int64(r, m, "train.micro_batch", 1, 1 << 24, &v))
            return -1;
        t->micro_batch = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "accumulate"))) {
        if (get_int64(r, m, "train.accumulate", 1, 1 << 16, &v))
            return -1;
        t->accumulate = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "optimizer_shards"))) {
        if (get_int64(r, m, "train.optimizer_shards", 0, 1 << 20, &v))
            return -1;
        t->optimizer_shards = (int32_t)v;
        t->optimizer_shards_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "schedule"))) {
        int kind;
        if (get_enum(r, m, "train.schedule", CFG_SCHEDULES, &kind))
            return -1;
        t->schedule = (ember_schedule)kind;
    }
    if ((int64_t)t->micro_batch * t->accumulate > (1 << 24))
        return fail_at(r, g, "train", "micro_batch x accumulate = %lld samples per rank and step is too "
                       "many (at most 16777216)", (long long)t->micro_batch * t->accumulate);
    if ((m = config_setting_get_member(g, "steps")) && get_int64(r, m, "train.steps", 0, INT64_C(1) << 40, &t->steps))
        return -1;
    if ((m = config_setting_get_member(g, "hot_refresh_every")) &&
        get_int64(r, m, "train.hot_refresh_every", 0, INT64_C(1) << 40, &t->hot_refresh_every))
        return -1;
    if ((m = config_setting_get_member(g, "eval_every")) &&
        get_int64(r, m, "train.eval_every", 0, INT64_C(1) << 40, &t->eval_every))
        return -1;
    if ((m = config_setting_get_member(g, "eval_samples"))) {
        if (get_int64(r, m, "train.eval_samples", 0, INT64_C(1) << 30, &t->eval_samples))
            return -1;
        t->eval_samples_set = 1;
    }
    if ((m = config_setting_get_member(g, "log_every")) &&
        get_int64(r, m, "train.log_every", 0, INT64_C(1) << 40, &t->log_every))
        return -1;
    if ((m = config_setting_get_member(g, "lr_schedule")) && read_lr_schedule(r, m, &t->lr))
        return -1;
    if ((m = config_setting_get_member(g, "epochs")) &&
        get_int64(r, m, "train.epochs", 1, INT64_C(1) << 30, &t->epochs))
        return -1;
    if ((m = config_setting_get_member(g, "early_stop"))) {
        static const char *const EKEYS[] = {"patience", "metric", "min_delta", NULL};
        static const char *const METRICS[] = {"auc", "logloss", NULL};
        const config_setting_t *x;
        int k;
        if (config_setting_type(m) != CONFIG_TYPE_GROUP)
            return fail_at(r, m, "train.early_stop", "must be a group { patience = ...; metric = \"auc\"; }");
        if (check_keys(r, m, "train.early_stop", EKEYS))
            return -1;
        /* the group turns early stopping on: patience 0 would be a group that does nothing */
        if (!(x = config_setting_get_member(m, "patience")))
            return fail_at(r, m, "train.early_stop.patience", "missing: the evaluations in a row without a better "
                           "metric before the run stops, 1 or more (leave train.early_stop out to train without "
                           "early stopping)");
        if (get_int64(r, x, "train.early_stop.patience", 0, INT64_C(1) << 40, &t->patience))
            return -1;
        if (t->patience == 0)
            return fail_at(r, x, "train.early_stop.patience", "must be in 1..1099511627776, got 0 (leave "
                           "train.early_stop out to train without early stopping)");
        if ((x = config_setting_get_member(m, "metric"))) {
            if (get_enum(r, x, "train.early_stop.metric", METRICS, &k))
                return -1;
            t->stop_metric_logloss = k;
        }
        if ((x = config_setting_get_member(m, "min_delta")) &&
            get_double(r, x, "train.early_stop.min_delta", 0, 1, &t->min_delta))
            return -1;
    }
    if ((m = config_setting_get_member(g, "plan")) && read_path(r, m, "train.plan", &t->plan_file))
        return -1;
    if ((m = config_setting_get_member(g, "keep_best"))) {
        if (config_setting_type(m) != CONFIG_TYPE_BOOL)
            return fail_at(r, m, "train.keep_best", "must be true or false");
        t->keep_best = config_setting_get_bool(m);
        t->keep_best_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "optimizer"))) {
        /* the dense optimizer: a kind, or a group as a table's optimizer */
        const config_setting_t *k = m;
        int kind;
        if (config_setting_type(m) == CONFIG_TYPE_GROUP) {
            static const char *const OKEYS[] = {"kind", "lr", "eps", "weight_decay", "beta1", "beta2", NULL};
            if (check_keys(r, m, "train.optimizer", OKEYS))
                return -1;
            if (!(k = config_setting_get_member(m, "kind")))
                return fail_at(r, m, "train.optimizer.kind", "missing (one of: sgd, adam)");
        }
        if (get_enum(r, k, k == m ? "train.optimizer" : "train.optimizer.kind", DENSE_OPT, &kind))
            return -1;
        t->dense_optim = dense_optim_config_default((dense_optim_kind)kind);
        if (config_setting_type(m) == CONFIG_TYPE_GROUP) {
            struct { const char *name; float *dst; double lo, hi; } f[] = {
                {"lr", &t->dense_optim.lr, 0, 1e6}, {"eps", &t->dense_optim.eps, 0, 1},
                {"weight_decay", &t->dense_optim.weight_decay, 0, 1e6},
                {"beta1", &t->dense_optim.beta1, 0, 1}, {"beta2", &t->dense_optim.beta2, 0, 1},
            };
            for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
                const config_setting_t *x = config_setting_get_member(m, f[i].name);
                char sub[64];
                double d;
                snprintf(sub, sizeof sub, "train.optimizer.%s", f[i].name);
                if (x) {
                    if (get_double(r, x, sub, f[i].lo, f[i].hi, &d))
                        return -1;
                    *f[i].dst = (float)d;
                }
            }
        }
    }
    if ((m = config_setting_get_member(g, "metrics")) && read_path(r, m, "train.metrics", &t->metrics))
        return -1;
    if ((m = config_setting_get_member(g, "plot")) && read_path(r, m, "train.plot", &t->plot))
        return -1;
    if ((m = config_setting_get_member(g, "checkpoint_dir"))) {
        if (read_path(r, m, "train.checkpoint_dir", &t->checkpoint_dir))
            return -1;
        t->checkpoint_dir_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "checkpoint_every")) &&
        get_int64(r, m, "train.checkpoint_every", 0, INT64_C(1) << 40, &t->checkpoint_every))
        return -1;
    if ((m = config_setting_get_member(g, "checkpoint_keep"))) {
        if (get_int64(r, m, "train.checkpoint_keep", 0, 1 << 20, &v))
            return -1;
        t->checkpoint_keep = (int32_t)v;
    }
    return 0;
}

/* With tables: the task and the model follow them (after read_features). */
static int train_from_tables(reader *r, config_t *c)
{
    config_file *cf = r->cf;
    cfg_train *t = &cf->train;
    const config_setting_t *syn = config_lookup(c, "data.synthetic"), *m;
    if (!cf->num_features)
        return 0;
    if ((m = config_lookup(c, "model.emb_init_value")))
        return fail_at(r, m, "model.emb_init_value", "only without `tables` (each table sets its own init)");
    static const char *const PER_FEATURE[] = {"num_sparse", "rows", "alpha", "pooling", NULL};
    for (int i = 0; syn && PER_FEATURE[i]; i++)
        if ((m = config_setting_get_member(syn, PER_FEATURE[i]))) {
            char key[64];
            snprintf(key, sizeof key, "data.synthetic.%s", PER_FEATURE[i]);
            return fail_at(r, m, key, "only without `tables` (the tables and features set it)");
        }
    if (cf->num_features > CTR_MAX_FEATURES)
        return fail_at(r, config_lookup(c, "features"), "features",
                       "ember train takes at most %d features, got %d", CTR_MAX_FEATURES, cf->num_features);
    int32_t dim = cf->tables[cf->features[0].table].dim;
    for (int32_t f = 0; f < cf->num_features; f++) {
        const ember_table_config *tb = &cf->tables[cf->features[f].table];
        if (tb->dim != dim || cf->features[f].combiner == EMBER_COMBINER_NONE) {
            snprintf(r->err, r->errlen, "%s:%d: features: feature \"%s\": ember train needs every feature "
                     "pooled (not combiner none) from tables of one dim (%d here, %d for \"%s\")", r->path,
                     cf->feature_extra[f].line, cf->features[f].name, tb->dim, dim, cf->features[0].name);
            return -1;
        }
        if (cf->feature_extra[f].weighted && cf->train.source == CFG_SOURCE_SYNTHETIC) {
            snprintf(r->err, r->errlen, "%s:%d: features: feature \"%s\": the synthetic data has no weights (a "
                     "weighted multi_hot column of data.schema has)",
                     r->path, cf->feature_extra[f].line, cf->features[f].name);
            return -1;
        }
        int64_t vocab = cf->table_extra[cf->features[f].table].vocab;
        t->synth.keyed[f] = tb->kind == EMBER_TABLE_DYNAMIC;
        if (t->synth.keyed[f] && !vocab && t->source == CFG_SOURCE_SYNTHETIC) /* files bring their own keys */
            return fail_at(r, config_lookup(c, "tables"), "tables",
                           "dynamic table \"%s\": set keys (the synthetic data's distinct keys)", tb->name);
        t->synth.rows[f] = vocab ? vocab : tb->rows;
        t->synth.hash_rows[f] = !t->synth.keyed[f] && vocab ? tb->rows : 0;
        t->synth.alpha[f] = cf->table_extra[cf->features[f].table].zipf
                                ? cf->table_extra[cf->features[f].table].alpha : 0.0;
        t->synth.pooling[f] = cf->feature_extra[f].pooling < 1 ? 1 : cf->feature_extra[f].pooling;
    }
    t->synth.num_sparse = cf->num_features;
    if ((m = config_lookup(c, "model.emb_dim")) && t->model.emb_dim != dim)
        return fail_at(r, m, "model.emb_dim", "%d, but the tables' dim is %d", t->model.emb_dim, dim);
    if (!config_lookup(c, "model.bottom"))
        t->model.bottom[t->model.num_bottom - 1] = dim;
    t->model.emb_dim = dim;
    return 0;
}

/* The model's shape after everything is read. */
static int train_finish(reader *r, config_t *c)
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
        return fail_at(r, m ? m : config_lookup(c, "model"), "model.bottom",
                       "the last width must equal the embedding dim %d, got %d", mc->emb_dim,
                       mc->bottom[mc->num_bottom - 1]);
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

/* ssd = { dir; min_bytes; memory_budget; cache_bytes; policy; lookahead;
 * io_threads; }: the collection's SSD tier rules (docs/tiers.md). */
static int read_ssd(reader *r, const config_setting_t *g, ember_collection_config *cc)
{
    static const char *const KEYS[] = {"dir", "min_bytes", "memory_budget", "cache_bytes", "policy",
                                       "lookahead", "io_threads", NULL};
    if (!g)
        return 0;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return fail_at(r, g, "ssd", "must be a group { dir = ...; cache_bytes = ...; }");
    if (check_keys(r, g, "ssd", KEYS))
        return -1;
    const config_setting_t *m;
    int64_t v;
    int k;
    if ((m = config_setting_get_member(g, "dir"))) {
        if (read_path(r, m, "ssd.dir", &cc->ssd_dir))
            return -1;
        r->cf->ssd_dir_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "min_bytes")) && get_bytes(r, m, "ssd.min_bytes", &cc->ssd_min_bytes))
        return -1;
    if ((m = config_setting_get_member(g, "memory_budget")) &&
        get_bytes(r, m, "ssd.memory_budget", &cc->memory_budget))
        return -1;
    if ((m = config_setting_get_member(g, "cache_bytes")) &&
        get_bytes(r, m, "ssd.cache_bytes", &cc->ssd_cache_bytes))
        return -1;
    if ((m = config_setting_get_member(g, "policy"))) {
        if (get_enum(r, m, "ssd.policy", CACHE_POLICIES, &k))
            return -1;
        cc->ssd_policy = (ember_cache_policy)k;
    }
    if ((m = config_setting_get_member(g, "lookahead"))) {
        if (get_int64(r, m, "ssd.lookahead", 1, 63, &v))
            return -1;
        cc->lookahead = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "io_threads"))) {
        if (get_int64(r, m, "ssd.io_threads", 1, 256, &v))
            return -1;
        cc->io_threads = (int32_t)v;
    }
    return 0;
}

static int read_top(reader *r, config_t *c)
{
    static const char *const KEYS[] = {"name", "seed", "stack_tables", "dedup", "debug_checks",
                                       "bounds", "num_shards", "threads", "tables", "features",
                                       "data", "planner", "train", "model", "ssd", NULL};
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
        read_ssd(r, config_lookup(c, "ssd"), cc))
        return -1;
    /* the tables' default optimizer, before the tables */
    const config_setting_t *eo = config_lookup(c, "model.emb_optimizer");
    if (eo && read_optimizer(r, eo, "model.emb_optimizer", &cf->train.emb_optimizer))
        return -1;
    /* a file for `ember train` may leave the tables to the tool */
    const config_setting_t *tg = config_lookup(c, "train"), *mg = config_lookup(c, "model");
    cf->train.present = tg || mg;
    if ((!cf->train.present && !cf->train.schema.num_columns) || config_lookup(c, "tables") ||
        config_lookup(c, "features")) /* a schema alone serves ember convert */
        if (read_tables(r, config_lookup(c, "tables")) || read_features(r, config_lookup(c, "features")))
            return -1;
    if ((mg && read_model(r, mg)) || (tg && read_train(r, tg)))
        return -1;
    if (cf->train.present) {
        if (train_from_tables(r, c) || train_finish(r, c))
            return -1;
    } else { /* a file for other commands: what keeps it from `ember train` is kept for it */
        reader quiet = *r;
        quiet.err = cf->train.error;
        quiet.errlen = sizeof cf->train.error;
        if (train_from_tables(&quiet, c) == 0)
            train_finish(&quiet, c);
    }
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
    cfg_train_default(&cf->train);
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
    free(cf->train.schema_cols);
    free(cf->train.schema_tables);
    free(cf->path);
    free(cf->name);
    free(cf);
}

/* dir, named by key at line: an existing folder files can be created in.
 * 0, or -1 with err. */
static int check_folder(const config_file *cf, const char *key, int line, const char *dir, char *err, size_t errlen)
{
    struct stat sb;
    const char *why = NULL;
    char buf[200];
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT)
            why = "does not exist";
        else
            snprintf(buf, sizeof buf, "cannot be reached: %s", strerror(errno)), why = buf;
    } else if (!S_ISDIR(sb.st_mode)) {
        why = "is not a folder";
    } else if (access(dir, W_OK | X_OK) != 0) {
        snprintf(buf, sizeof buf, "is a folder this process cannot create files in: %s", strerror(errno));
        why = buf;
    }
    if (!why)
        return 0;
    if (line)
        snprintf(err, errlen, "%s:%d: %s: \"%s\" %s", cf->path, line, key, dir, why);
    else
        snprintf(err, errlen, "%s: %s: \"%s\" %s", cf->path, key, dir, why);
    return -1;
}

int config_file_check_folders(const config_file *cf, char *err, size_t errlen)
{
    if (cf->coll.ssd_dir && check_folder(cf, "ssd.dir", cf->ssd_dir_line, cf->coll.ssd_dir, err, errlen))
        return -1;
    for (int32_t t = 0; t < cf->num_tables; t++) {
        const cfg_table_extra *x = &cf->table_extra[t];
        char key[64];
        snprintf(key, sizeof key, "tables[%d].path", x->entry);
        if (cf->tables[t].path && x->path_line &&
            (t == 0 || cf->table_extra[t - 1].path_line != x->path_line) && /* an entry's tables share it */
            check_folder(cf, key, x->path_line, cf->tables[t].path, err, errlen))
            return -1;
    }
    return 0;
}

int config_file_weighted(const config_file *cf)
{
    for (int32_t f = 0; f < cf->num_features; f++)
        if (cf->feature_extra[f].weighted)
            return 1;
    return 0;
}

int config_file_text_schema(const config_file *cf, ctr_column *cols, ctr_text_schema *out)
{
    const cfg_train *t = &cf->train;
    *out = t->schema;
    if (!t->schema.num_columns)
        return -1;
    memcpy(cols, t->schema_cols, (size_t)t->schema.num_columns * sizeof *cols);
    out->columns = cols;
    int32_t f = 0;
    for (int32_t c = 0; c < t->schema.num_columns; c++) {
        if (cols[c].type != CTR_COL_CATEGORICAL && cols[c].type != CTR_COL_MULTI_HOT)
            continue;
        if (f < cf->num_features)
            cols[c].rows = config_feature_rows(cf, f);
        f++;
    }
    return 0;
}

int64_t config_feature_rows(const config_file *cf, int32_t f)
{
    const ember_table_config *tb = &cf->tables[cf->features[f].table];
    return tb->kind == EMBER_TABLE_DYNAMIC ? 0 : tb->rows;
}
