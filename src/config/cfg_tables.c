/*
 * cfg_tables.c: the config file's `tables` list (docs/config.md): each
 * entry's settings (rows, dim, init, optimizer, limits, placement pins,
 * the id law of the synthetic data, the SSD tier, dynamic tables,
 * simulated quantization, hot rows), applied to every table the entry
 * expands to; names must be distinct.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "config/cfg_read.h"

#define CFG_ADAMW (EMBER_OPT_LAST + 1) /* CFG_OPTIMIZERS' "adamw" */

/* The defaults of a kind named in CFG_OPTIMIZERS ("adamw": Adam with
 * decoupled weight decay). */
static ember_optimizer optimizer_named(int kind)
{
    ember_optimizer o = ember_optimizer_default(kind == CFG_ADAMW ? EMBER_OPT_ADAM : (ember_optimizer_kind)kind);
    if (kind == CFG_ADAMW)
        o.weight_decay_mode = EMBER_DECAY_DECOUPLED;
    return o;
}

int cfg_read_optimizer(cfg_reader *r, const config_setting_t *s, const char *key,
                          ember_optimizer *o)
{
    int kind;
    if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        if (cfg_get_enum(r, s, key, CFG_OPTIMIZERS, &kind))
            return EMBER_EINVAL;
        *o = optimizer_named(kind);
        return 0;
    }
    if (config_setting_type(s) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, s, key, "must be a kind (\"adagrad\") or a group { kind = ...; lr = ...; }");
    static const char *const KEYS[] = {"kind", "lr", "eps", "weight_decay", "weight_decay_mode", "beta1", "beta2",
                                       "momentum", "nesterov", "beta", "l1", "l2", "lr_power", "clip_value",
                                       "clip_norm", "eta", NULL};
    if (cfg_check_keys(r, s, key, KEYS))
        return EMBER_EINVAL;
    const config_setting_t *k = config_setting_get_member(s, "kind");
    char sub[160];
    snprintf(sub, sizeof sub, "%.120s.kind", key);
    if (!k)
        return cfg_fail_at(r, s, sub, "missing (one of: sgd, adagrad, rowwise_adagrad, adam, momentum, ftrl, rowwise_adam, lamb, "
                           "lars, adamw)");
    if (cfg_get_enum(r, k, sub, CFG_OPTIMIZERS, &kind))
        return EMBER_EINVAL;
    *o = optimizer_named(kind);
    struct { const char *name; float *dst; double lo, hi; } f[] = {
        {"lr", &o->lr, 0, 1e6}, {"eps", &o->eps, 0, 1}, {"weight_decay", &o->weight_decay, 0, 1e6},
        {"beta1", &o->beta1, 0, 1}, {"beta2", &o->beta2, 0, 1}, {"momentum", &o->momentum, 0, 1},
        {"beta", &o->beta, 0, 1e6}, {"l1", &o->l1, 0, 1e6}, {"l2", &o->l2, 0, 1e6}, {"lr_power", &o->lr_power, -10, 0},
        {"clip_value", &o->clip_value, 0, 1e30}, {"clip_norm", &o->clip_norm, 0, 1e30}, {"eta", &o->eta, 0, 1e6},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const config_setting_t *m = config_setting_get_member(s, f[i].name);
        double v;
        snprintf(sub, sizeof sub, "%.120s.%s", key, f[i].name);
        if (m) {
            if (cfg_get_double(r, m, sub, f[i].lo, f[i].hi, &v))
                return EMBER_EINVAL;
            *f[i].dst = (float)v;
        }
    }
    static const char *const MODES[] = {"l2", "decoupled", NULL};
    const config_setting_t *md = config_setting_get_member(s, "weight_decay_mode");
    snprintf(sub, sizeof sub, "%.120s.weight_decay_mode", key);
    int mode;
    if (md) {
        if (cfg_get_enum(r, md, sub, MODES, &mode))
            return EMBER_EINVAL;
        o->weight_decay_mode = (ember_decay_mode)mode;
    }
    const config_setting_t *nv = config_setting_get_member(s, "nesterov");
    snprintf(sub, sizeof sub, "%.120s.nesterov", key);
    if (nv) {
        int b;
        if (cfg_get_bool(r, nv, sub, &b))
            return EMBER_EINVAL;
        o->nesterov = b;
    }
    return 0;
}

static int read_limits(cfg_reader *r, const config_setting_t *s, const char *key,
                       ember_table_config *t)
{
    static const char *const KEYS[] = {"max_ids_per_partition", "max_unique_ids_per_partition",
                                       "policy", NULL};
    char sub[160];
    if (config_setting_type(s) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, s, key, "must be a group { max_ids_per_partition = ...; }");
    if (cfg_check_keys(r, s, key, KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    if ((m = config_setting_get_member(s, "max_ids_per_partition"))) {
        snprintf(sub, sizeof sub, "%.120s.max_ids_per_partition", key);
        if (cfg_get_int64(r, m, sub, 0, INT64_MAX, &t->max_ids_per_partition))
            return EMBER_EINVAL;
    }
    if ((m = config_setting_get_member(s, "max_unique_ids_per_partition"))) {
        snprintf(sub, sizeof sub, "%.120s.max_unique_ids_per_partition", key);
        if (cfg_get_int64(r, m, sub, 0, INT64_MAX, &t->max_unique_ids_per_partition))
            return EMBER_EINVAL;
    }
    if ((m = config_setting_get_member(s, "policy"))) {
        int p;
        snprintf(sub, sizeof sub, "%.120s.policy", key);
        if (cfg_get_enum(r, m, sub, CFG_POLICIES, &p))
            return EMBER_EINVAL;
        t->limit_policy = (ember_limit_policy)p;
    }
    return 0;
}

/* quantization = { num_buckets = 256; low = -0.5; high = 0.5; }: simulated
 * quantization of the table's forward reads (docs/inference.md). */
static int read_quantization(cfg_reader *r, const config_setting_t *s, const char *key, ember_table_config *t)
{
    static const char *const KEYS[] = {"num_buckets", "low", "high", NULL};
    char sub[160];
    if (config_setting_type(s) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, s, key, "must be a group { num_buckets = 256; low = -0.5; high = 0.5; }");
    if (cfg_check_keys(r, s, key, KEYS))
        return EMBER_EINVAL;
    const char *names[3] = {"num_buckets", "low", "high"};
    double v[3];
    for (int i = 0; i < 3; i++) {
        const config_setting_t *m = config_setting_get_member(s, names[i]);
        snprintf(sub, sizeof sub, "%.120s.%s", key, names[i]);
        if (!m)
            return cfg_fail_at(r, s, sub, "missing (quantization needs num_buckets, low and high)");
        if (i == 0) {
            int64_t n;
            if (cfg_get_int64(r, m, sub, 2, 1 << 24, &n))
                return EMBER_EINVAL;
            v[0] = (double)n;
        } else if (cfg_get_double(r, m, sub, -1e30, 1e30, &v[i])) {
            return EMBER_EINVAL;
        }
    }
    if (!(v[1] < v[2]))
        return cfg_fail_at(r, s, key, "low (%g) must be below high (%g)", v[1], v[2]);
    t->quant_buckets = (int32_t)v[0];
    t->quant_low = (float)v[1];
    t->quant_high = (float)v[2];
    return 0;
}

/* One entry of the tables list being read: its member k's key
 * ("tables[3].dim") is built in key as the member is looked up. */
typedef struct table_entry {
    cfg_reader *r;
    const config_setting_t *e;
    const char *where;
    char key[160];
} table_entry;

static const config_setting_t *member(table_entry *n, const char *k)
{
    snprintf(n->key, sizeof n->key, "%s.%s", n->where, k);
    return config_setting_get_member(n->e, k);
}

/* rows (none for a dynamic table: capacity and keys size it) and dim. */
static int read_shape(table_entry *n, ember_table_config *t)
{
    const config_setting_t *m, *km = config_setting_get_member(n->e, "kind");
    const char *kind = NULL;
    int64_t v;
    int dynamic = km && config_setting_type(km) == CONFIG_TYPE_STRING && (kind = config_setting_get_string(km)) &&
                  !strcmp(kind, "dynamic");
    if (!(m = member(n, "rows")) && !dynamic)
        return cfg_fail_at(n->r, n->e, n->key, "missing");
    if (m && cfg_get_int64(n->r, m, n->key, 1, (INT64_C(1) << 53), &t->rows))
        return EMBER_EINVAL;
    if (!(m = member(n, "dim")))
        return cfg_fail_at(n->r, n->e, n->key, "missing");
    if (cfg_get_int64(n->r, m, n->key, 1, 1024, &v))
        return EMBER_EINVAL;
    t->dim = (int32_t)v;
    return 0;
}

/* init, init_value, optimizer, limits, precision, rounding, state
 * precision (model.emb_state_precision's where the optimizer keeps state per
 * element and the table says nothing). */
static int read_training(table_entry *n, ember_table_config *t)
{
    const config_setting_t *m;
    if ((m = member(n, "init"))) {
        int k;
        if (cfg_get_enum(n->r, m, n->key, CFG_INITS, &k))
            return EMBER_EINVAL;
        t->init = (ember_init_kind)k;
    }
    if ((m = member(n, "init_value"))) {
        double d;
        if (cfg_get_double(n->r, m, n->key, -1e30, 1e30, &d))
            return EMBER_EINVAL;
        t->init_value = (float)d;
    }
    if ((m = member(n, "optimizer")) && cfg_read_optimizer(n->r, m, n->key, &t->optimizer))
        return EMBER_EINVAL;
    if ((m = member(n, "limits")) && read_limits(n->r, m, n->key, t))
        return EMBER_EINVAL;
    int k;
    if ((m = member(n, "precision"))) {
        if (cfg_get_enum(n->r, m, n->key, CFG_PRECISIONS, &k))
            return EMBER_EINVAL;
        t->precision = (ember_row_precision)k;
    }
    if ((m = member(n, "rounding"))) {
        if (cfg_get_enum(n->r, m, n->key, CFG_ROUNDINGS, &k))
            return EMBER_EINVAL;
        t->rounding = (ember_rounding)k;
    }
    if ((m = member(n, "state_precision"))) {
        if (cfg_get_enum(n->r, m, n->key, CFG_PRECISIONS, &k))
            return EMBER_EINVAL;
        t->state_precision = (ember_row_precision)k;
    } else if (ember_element_state(t->optimizer.kind)) {
        t->state_precision = n->r->cf->train.emb_state_precision;
    }
    return 0;
}

/* placement ("auto" leaves it to the planner), hot_rows, owner, exchange. */
static int read_placement(table_entry *n, ember_table_config *t, cfg_table_extra *x)
{
    const config_setting_t *m;
    const char *s = NULL;
    int64_t v;
    if ((m = member(n, "placement"))) {
        if (cfg_get_string(n->r, m, n->key, &s))
            return EMBER_EINVAL;
        if (strcmp(s, "auto")) {
            if (cfg_get_enum(n->r, m, n->key, CFG_PLACEMENTS, &x->placement_pin))
                return EMBER_EINVAL;
            t->placement = (ember_placement)x->placement_pin;
        }
    }
    if ((m = member(n, "hot_rows"))) {
        if (cfg_get_int64(n->r, m, n->key, 0, INT64_C(1) << 32, &v))
            return EMBER_EINVAL;
        t->hot_rows = v;
    }
    if ((m = member(n, "owner"))) {
        if (cfg_get_int64(n->r, m, n->key, 0, INT32_MAX, &v))
            return EMBER_EINVAL;
        if (x->placement_pin != EMBER_PLACE_TABLE)
            return cfg_fail_at(n->r, m, n->key, "an owner needs placement = \"table\"");
        x->owner_pin = (int32_t)v;
        t->owner = (int32_t)v;
    }
    if ((m = member(n, "exchange"))) {
        if (cfg_get_string(n->r, m, n->key, &s))
            return EMBER_EINVAL;
        if (strcmp(s, "auto")) {
            if (cfg_get_enum(n->r, m, n->key, CFG_EXCHANGES, &x->exchange_pin))
                return EMBER_EINVAL;
            t->exchange = (ember_exchange)x->exchange_pin;
        }
    }
    return 0;
}

/* The synthetic data's id law (dist, alpha); the SSD tier (storage,
 * cache_bytes, cache_policy, path). */
static int read_law_and_storage(table_entry *n, ember_table_config *t, cfg_table_extra *x)
{
    const config_setting_t *m;
    int k;
    if ((m = member(n, "dist")) && cfg_get_enum(n->r, m, n->key, CFG_DISTS, &x->zipf))
        return EMBER_EINVAL;
    if ((m = member(n, "alpha")) && cfg_get_double(n->r, m, n->key, 1e-6, 100, &x->alpha))
        return EMBER_EINVAL;
    if ((m = member(n, "storage"))) {
        if (cfg_get_enum(n->r, m, n->key, CFG_STORAGES, &k))
            return EMBER_EINVAL;
        t->storage = (ember_storage)k;
    }
    if ((m = member(n, "cache_bytes")) && cfg_get_bytes(n->r, m, n->key, &t->cache_bytes))
        return EMBER_EINVAL;
    if ((m = member(n, "cache_policy"))) {
        if (cfg_get_enum(n->r, m, n->key, CFG_CACHE_POLICIES, &k))
            return EMBER_EINVAL;
        t->cache_policy = (ember_cache_policy)k;
    }
    if ((m = member(n, "path"))) {
        if (cfg_read_path(n->r, m, n->key, &t->path))
            return EMBER_EINVAL;
        x->path_line = (int)config_setting_source_line(m);
    }
    return 0;
}

/* kind, the synthetic data's distinct keys, and a dynamic table's
 * capacity, admission, eviction and sketch (docs/dynamic.md). */
static int read_dynamic(table_entry *n, ember_table_config *t, cfg_table_extra *x)
{
    const config_setting_t *m;
    int64_t v;
    int k;
    if ((m = member(n, "kind"))) {
        if (cfg_get_enum(n->r, m, n->key, CFG_KINDS, &k))
            return EMBER_EINVAL;
        t->kind = (ember_table_kind)k;
    }
    if ((m = member(n, "keys")) && cfg_get_int64(n->r, m, n->key, 1, INT64_C(1) << 53, &x->vocab))
        return EMBER_EINVAL;
    if (t->kind == EMBER_TABLE_DYNAMIC && t->rows)
        return cfg_fail_at(n->r, n->e, n->where, "a dynamic table takes any key: no rows (capacity sizes it, keys "
                           "sets the synthetic data's distinct keys)");
    if ((m = member(n, "capacity")) && cfg_get_int64(n->r, m, n->key, 1, (int64_t)UINT32_MAX - 2, &t->capacity))
        return EMBER_EINVAL;
    if ((m = member(n, "capacity_bytes")) && cfg_get_bytes(n->r, m, n->key, &t->capacity_bytes))
        return EMBER_EINVAL;
    if ((m = member(n, "admit_after"))) {
        if (cfg_get_int64(n->r, m, n->key, 0, 65535, &v))
            return EMBER_EINVAL;
        t->admit_after = (int32_t)v;
    }
    if ((m = member(n, "evict"))) {
        if (cfg_get_enum(n->r, m, n->key, CFG_EVICTS, &k))
            return EMBER_EINVAL;
        t->evict = (ember_evict_policy)k;
    }
    if ((m = member(n, "ttl_steps"))) {
        if (cfg_get_int64(n->r, m, n->key, 1, INT32_MAX, &v))
            return EMBER_EINVAL;
        t->ttl_steps = (int32_t)v;
    }
    if ((m = member(n, "sketch_bytes")) && cfg_get_bytes(n->r, m, n->key, &t->sketch_bytes))
        return EMBER_EINVAL;
    return 0;
}

/* The settings of one table entry, applied to every table it expands to. */
static int read_table_entry(cfg_reader *r, const config_setting_t *e, const char *where,
                            ember_table_config *t, cfg_table_extra *x)
{
    static const char *const KEYS[] = {"name", "count", "rows", "dim", "init", "init_value",
                                       "optimizer", "limits", "placement", "owner", "exchange",
                                       "dist", "alpha", "storage", "cache_bytes", "cache_policy",
                                       "path", "keys", "kind", "capacity", "capacity_bytes", "admit_after", "evict",
                                       "ttl_steps", "sketch_bytes", "quantization", "hot_rows", "precision",
                                       "rounding", "state_precision", NULL};
    if (config_setting_type(e) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, e, where, "must be a group { name = ...; rows = ...; dim = ...; }");
    if (cfg_check_keys(r, e, where, KEYS))
        return EMBER_EINVAL;
    *t = ember_table_config_default();
    t->optimizer = r->cf->train.emb_optimizer; /* one default for every table: model.emb_optimizer's */
    t->precision = r->cf->train.emb_precision; /* and model.emb_precision's, emb_rounding's */
    t->rounding = r->cf->train.emb_rounding;
    x->placement_pin = -1;
    x->owner_pin = -1;
    x->exchange_pin = -1;
    x->vocab = 0;
    x->zipf = r->cf->data.zipf;
    x->alpha = r->cf->data.alpha;
    x->line = (int)config_setting_source_line(e);
    x->path_line = 0;
    x->entry = atoi(where + strlen("tables["));
    table_entry n = {r, e, where, ""};
    const config_setting_t *m;
    if (read_shape(&n, t) || read_training(&n, t) || read_placement(&n, t, x) || read_law_and_storage(&n, t, x) ||
        read_dynamic(&n, t, x) || ((m = member(&n, "quantization")) && read_quantization(r, m, n.key, t)))
        return EMBER_EINVAL;
    return 0;
}

int cfg_read_tables(cfg_reader *r, const config_setting_t *list)
{
    config_file *cf = r->cf;
    if (!list)
        return cfg_fail_at(r, NULL, "tables", "missing: a list of tables, tables = ( { ... } ); (a file with a "
                       "train = { ... } or model = { ... } group and no tables trains the built-in task's)");
    if (config_setting_type(list) != CONFIG_TYPE_LIST)
        return cfg_fail_at(r, list, "tables", "must be a list ( { ... }, ... )");
    int n = config_setting_length(list);
    int64_t total;
    if (cfg_entries_total(r, list, "tables", "table", "{ name = ...; rows = ...; dim = ...; }", NULL, &total))
        return EMBER_EINVAL;
    cf->tables = calloc((size_t)total, sizeof *cf->tables);
    cf->table_extra = calloc((size_t)total, sizeof *cf->table_extra);
    if (!cf->tables || !cf->table_extra)
        return cfg_fail_at(r, NULL, "tables", "out of memory");
    int32_t k = 0;
    int *entry = malloc((size_t)total * sizeof *entry); /* list entry of each table */
    if (!entry)
        return cfg_fail_at(r, NULL, "tables", "out of memory");
    for (int i = 0; i < n; i++) {
        char where[64], nm[256], key[160];
        snprintf(where, sizeof where, "tables[%d]", i);
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        int64_t count;
        const char *pattern;
        cfg_entry_count_name(r, e, where, &count, &pattern);
        ember_table_config t;
        cfg_table_extra x;
        if (read_table_entry(r, e, where, &t, &x))
            goto fail;
        snprintf(key, sizeof key, "%s.name", where);
        for (int64_t j = 0; j < count; j++, k++) {
            if (cfg_expand_name(r, config_setting_get_member(e, "name"), key, pattern, count, j, nm,
                            sizeof nm))
                goto fail;
            cf->tables[k] = t;
            cf->table_extra[k] = x;
            entry[k] = i;
            if (!(cf->tables[k].name = cfg_keep(r, nm))) {
                cfg_fail_at(r, NULL, key, "out of memory");
                goto fail;
            }
        }
    }
    cf->num_tables = k;
    cfg_name_index *sorted;
    int32_t q, d;
    if (cfg_name_index_build(cfg_table_name_of, cf, k, &sorted)) {
        cfg_fail_at(r, NULL, "tables", "out of memory");
        goto fail;
    }
    int dup = cfg_name_index_duplicate(sorted, k, &q, &d);
    free(sorted);
    if (dup) {
        char key[160];
        snprintf(key, sizeof key, "tables[%d].name", entry[d]);
        cfg_fail_at(r, config_setting_get_member(config_setting_get_elem(list, (unsigned)entry[d]), "name"), key,
                "table \"%s\" is defined twice (also on line %d)", cf->tables[d].name, cf->table_extra[q].line);
        goto fail;
    }
    free(entry);
    return 0;
fail:
    free(entry);
    return EMBER_EINVAL;
}
