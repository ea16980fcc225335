/*
 * description.c: the model description (description.h) to and from JSON.
 *
 * Layout (docs/inference.md):
 *   {"format": "ember-model", "version": 1 (2 when the dense model uses DCN or an
 *    activation other than ReLU, so that readers that know neither refuse it), "seed": .., "dedup": bool,
 *    "stack_tables": bool, "bounds": .., "num_shards": ..,
 *    "tables":   [{"name", "kind", "rows", "dim", "init", "init_value",
 *                  "optimizer": {kind, lr, eps, weight_decay, beta1, beta2,
 *                                momentum, nesterov, weight_decay_mode;
 *                                FTRL: beta, l1, l2, lr_power; LARS: eta; clipping on:
 *                                clip_value, clip_norm},
 *                  "placement", "owner", "exchange",
 *                  "limits": [max_ids, max_unique, policy],
 *                  "quantization": [buckets, low, high],
 *                  "dynamic": [capacity, admit_after, evict, ttl_steps, sketch_bytes]}],
 *    "features": [{"name", "table", "combiner"}],
 *    "dense":    {num_dense, num_sparse, emb_dim, bottom: [], top: [], interaction, seed,
 *                 and num_cross, cross_rank (dcn only), activation (unless ReLU)},
 *    "chunk":    samples per dense forward, "batch": samples per evaluation call,
 *    "input":    {num_dense, rows: [], names: []},
 *    "synthetic": null or {the generator's settings},
 *    "input_schema": how rows became samples (input_schema.c; absent in
 *                    models written before it)}
 * Enums are written as their numbers (they are ember.h's stable values).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "collection/config.h"
#include "infer/description.h"

int description_make(model_description *m, const ember_collection_config *cc, const dlrm_config *dense,
                     int32_t chunk, int32_t batch, const ctr_schema *input, const ctr_synth_config *synth, char *err,
                     size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (cc->num_tables > DESCRIPTION_MAX || cc->num_features > DESCRIPTION_MAX) {
        snprintf(err, errlen, "model: %d tables and %d features, at most %d of each are described",
                 (int)cc->num_tables, (int)cc->num_features, DESCRIPTION_MAX);
        return EMBER_EINVAL;
    }
    m->num_tables = cc->num_tables;
    m->num_features = cc->num_features;
    for (int32_t i = 0; i < 2; i++)
        for (int32_t t = 0; t < (i ? cc->num_features : cc->num_tables); t++) {
            const char *nm = i ? cc->features[t].name : cc->tables[t].name;
            if (strlen(nm) >= sizeof m->names[i][t]) {
                snprintf(err, errlen, "model: %s name '%s' longer than %d bytes", i ? "feature" : "table", nm,
                         (int)sizeof m->names[i][t] - 1);
                return EMBER_EINVAL;
            }
            snprintf(m->names[i][t], sizeof m->names[i][t], "%s", nm);
            if (i)
                m->features[t] = cc->features[t], m->features[t].name = m->names[1][t];
            else
                m->tables[t] = cc->tables[t], m->tables[t].name = m->names[0][t];
        }
    for (int32_t t = 0; t < m->num_tables; t++) { /* where rows live is the loader's choice */
        ember_table_config *tb = &m->tables[t];
        tb->storage = EMBER_STORAGE_AUTO;
        tb->path = NULL;
        tb->cache_bytes = 0;
        if (tb->kind == EMBER_TABLE_DYNAMIC) { /* rows per rank, however it was sized */
            tb->capacity = ember_dyn_capacity(tb);
            tb->capacity_bytes = 0;
        }
    }
    m->seed = cc->seed;
    m->dedup = cc->dedup;
    m->stack_tables = cc->stack_tables;
    m->bounds = cc->bounds;
    m->num_shards = cc->num_shards;
    m->dense = *dense;
    m->chunk = chunk;
    m->batch = batch;
    m->input = *input;
    m->synthetic = synth != NULL;
    if (synth)
        m->synth = *synth;
    return 0;
}

void description_free(model_description *m) { description_input_free(&m->in); }

ember_collection_config description_collection(const model_description *m)
{
    ember_collection_config cc = ember_collection_config_default();
    cc.tables = m->tables;
    cc.num_tables = m->num_tables;
    cc.features = m->features;
    cc.num_features = m->num_features;
    cc.seed = m->seed;
    cc.dedup = m->dedup;
    cc.stack_tables = m->stack_tables;
    cc.bounds = m->bounds;
    cc.num_shards = m->num_shards;
    return cc;
}

/* ---------------------------------------------------------------- write */

static json_t *ints(const int64_t *v, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *reals(const double *v, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

static json_t *widths(const int32_t *w, int32_t n)
{
    int64_t v[DENSE_MAX_LAYERS];
    for (int32_t i = 0; i < n; i++)
        v[i] = w[i];
    return ints(v, n);
}

static json_t *table_json(const ember_table_config *t)
{
    const ember_optimizer *o = &t->optimizer;
    int64_t limits[3] = {t->max_ids_per_partition, t->max_unique_ids_per_partition, t->limit_policy};
    int64_t dyn[5] = {t->capacity, t->admit_after, t->evict, t->ttl_steps, t->sketch_bytes};
    json_t *opt = json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:I}", "kind", (json_int_t)o->kind, "lr",
                            (double)o->lr, "eps", (double)o->eps, "weight_decay", (double)o->weight_decay, "beta1",
                            (double)o->beta1, "beta2", (double)o->beta2, "momentum", (double)o->momentum,
                            "nesterov", (int)o->nesterov, "weight_decay_mode", (json_int_t)o->weight_decay_mode);
    if (o->clip_value > 0 || o->clip_norm > 0) {
        json_object_set_new(opt, "clip_value", json_real(o->clip_value));
        json_object_set_new(opt, "clip_norm", json_real(o->clip_norm));
    }
    if (o->kind == EMBER_OPT_FTRL) {
        json_object_set_new(opt, "beta", json_real(o->beta));
        json_object_set_new(opt, "l1", json_real(o->l1));
        json_object_set_new(opt, "l2", json_real(o->l2));
        json_object_set_new(opt, "lr_power", json_real(o->lr_power));
    }
    if (o->kind == EMBER_OPT_LARS)
        json_object_set_new(opt, "eta", json_real(o->eta));
    json_t *q = json_pack("[I, f, f]", (json_int_t)t->quant_buckets, (double)t->quant_low, (double)t->quant_high);
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:o, s:I, s:I, s:I, s:o, s:o, s:o}", "name", t->name, "kind",
                     (json_int_t)t->kind, "rows", (json_int_t)t->rows, "dim", (json_int_t)t->dim, "init",
                     (json_int_t)t->init, "init_value", (double)t->init_value, "optimizer", opt, "placement",
                     (json_int_t)t->placement, "owner", (json_int_t)t->owner, "exchange", (json_int_t)t->exchange,
                     "limits", ints(limits, 3), "quantization", q, "dynamic", ints(dyn, 5));
}

static json_t *synth_json(const ctr_synth_config *s)
{
    int64_t rows[CTR_MAX_FEATURES], keyed[CTR_MAX_FEATURES], hash_rows[CTR_MAX_FEATURES];
    for (int32_t f = 0; f < s->num_sparse; f++)
        rows[f] = s->rows[f], keyed[f] = s->keyed[f], hash_rows[f] = s->hash_rows[f];
    json_t *o = json_pack("{s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:f, s:f, s:I, s:I}", "num_dense",
                     (json_int_t)s->num_dense, "num_sparse", (json_int_t)s->num_sparse, "rows",
                     ints(rows, s->num_sparse), "alpha", reals(s->alpha, s->num_sparse), "pooling",
                     reals(s->pooling, s->num_sparse), "keyed", ints(keyed, s->num_sparse), "hash_rows",
                     ints(hash_rows, s->num_sparse), "teacher_dim", (json_int_t)s->teacher_dim, "teacher_hidden",
                     (json_int_t)s->teacher_hidden, "teacher_scale", s->teacher_scale, "ctr_rate", s->ctr_rate,
                     "seed", (json_int_t)s->seed, "eval_offset", (json_int_t)s->eval_offset);
    if (o && s->drift != EMBER_DRIFT_NONE) /* only then: older readers never see it */
        json_object_set_new(o, "drift",
                            json_pack("{s:I, s:I, s:I, s:I, s:I}", "kind", (json_int_t)s->drift, "every",
                                      (json_int_t)s->drift_every, "rows", (json_int_t)s->drift_rows, "features",
                                      (json_int_t)s->drift_features, "start", (json_int_t)s->drift_start));
    return o;
}

char *description_to_json(const model_description *m)
{
    json_t *tables = json_array(), *features = json_array(), *names = json_array();
    for (int32_t t = 0; t < m->num_tables; t++)
        json_array_append_new(tables, table_json(&m->tables[t]));
    for (int32_t f = 0; f < m->num_features; f++)
        json_array_append_new(features, json_pack("{s:s, s:I, s:I}", "name", m->features[f].name, "table",
                                                  (json_int_t)m->features[f].table, "combiner",
                                                  (json_int_t)m->features[f].combiner));
    for (int32_t f = 0; f < m->input.num_sparse; f++)
        json_array_append_new(names, json_string(m->input.names[f]));
    const dlrm_config *d = &m->dense;
    json_t *dense = json_pack("{s:I, s:I, s:I, s:o, s:o, s:I, s:I}", "num_dense", (json_int_t)d->num_dense,
                              "num_sparse", (json_int_t)d->num_sparse, "emb_dim", (json_int_t)d->emb_dim, "bottom",
                              widths(d->bottom, d->num_bottom), "top", widths(d->top, d->num_top), "interaction",
                              (json_int_t)d->interaction, "seed", (json_int_t)d->seed);
    if (d->interaction == DENSE_INTERACT_DCN) { /* written only when used: older readers see their own keys */
        json_object_set_new(dense, "num_cross", json_integer(d->num_cross));
        json_object_set_new(dense, "cross_rank", json_integer(d->cross_rank));
    }
    if (d->activation != DENSE_ACT_RELU)
        json_object_set_new(dense, "activation", json_integer(d->activation));
    json_t *input = json_pack("{s:I, s:o, s:o}", "num_dense", (json_int_t)m->input.num_dense, "rows",
                              ints(m->input.rows, m->input.num_sparse), "names", names);
    const int version = d->interaction == DENSE_INTERACT_DCN || d->activation != DENSE_ACT_RELU ? 2 : 1;
    json_t *root = json_pack("{s:s, s:i, s:I, s:b, s:b, s:I, s:I, s:o, s:o, s:o, s:I, s:I, s:o, s:o}", "format",
                             "ember-model", "version", version, "seed", (json_int_t)m->seed, "dedup", m->dedup,
                             "stack_tables", m->stack_tables, "bounds", (json_int_t)m->bounds, "num_shards",
                             (json_int_t)m->num_shards, "tables", tables, "features", features, "dense", dense,
                             "chunk", (json_int_t)m->chunk, "batch", (json_int_t)m->batch, "input", input,
                             "synthetic", m->synthetic ? synth_json(&m->synth) : json_null());
    if (root && m->in.source != DESC_INPUT_NONE)
        json_object_set_new(root, "input_schema", description_input_json(&m->in));
    char *s = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(root);
    return s;
}

/* ----------------------------------------------------------------- read */

typedef struct reader {
    char *err;
    size_t len;
    int failed;
} reader;

static json_t *member(reader *r, json_t *o, const char *where, const char *key, int type)
{
    json_t *v = json_object_get(o, key);
    if (!r->failed && (!v || (type >= 0 && json_typeof(v) != (json_type)type && !(type == JSON_REAL && json_is_integer(v))))) {
        snprintf(r->err, r->len, "model.json: %s%s%s: %s", where, *where ? "." : "", key,
                 v ? "wrong type" : "missing");
        r->failed = 1;
    }
    return r->failed ? NULL : v;
}

static int64_t get_int(reader *r, json_t *o, const char *where, const char *key, int64_t lo, int64_t hi)
{
    json_t *v = member(r, o, where, key, JSON_INTEGER);
    int64_t x = v ? (int64_t)json_integer_value(v) : 0;
    if (v && (x < lo || x > hi)) {
        snprintf(r->err, r->len, "model.json: %s.%s: %lld outside [%lld, %lld]", where, key, (long long)x,
                 (long long)lo, (long long)hi);
        r->failed = 1;
    }
    return r->failed ? 0 : x;
}

static double get_real(reader *r, json_t *o, const char *where, const char *key)
{
    json_t *v = member(r, o, where, key, JSON_REAL);
    return v ? json_number_value(v) : 0;
}

/* A real member that a float holds finitely (a description is written
 * from floats; a larger value would not write back). */
static float get_float(reader *r, json_t *o, const char *where, const char *key)
{
    double x = get_real(r, o, where, key);
    if (!r->failed && !(fabs(x) <= FLT_MAX)) {
        snprintf(r->err, r->len, "model.json: %s.%s: %g does not fit a float", where, key, x);
        r->failed = 1;
    }
    return r->failed ? 0.0f : (float)x;
}

/* Array member key of exactly n elements (n < 0: any length up to -n). */
static json_t *get_array(reader *r, json_t *o, const char *where, const char *key, int64_t n)
{
    json_t *a = member(r, o, where, key, JSON_ARRAY);
    if (a && (n >= 0 ? (int64_t)json_array_size(a) != n : (int64_t)json_array_size(a) > -n)) {
        snprintf(r->err, r->len, "model.json: %s.%s: %zu elements, %s %lld", where, key, json_array_size(a),
                 n >= 0 ? "expected" : "at most", (long long)(n >= 0 ? n : -n));
        r->failed = 1;
    }
    return r->failed ? NULL : a;
}

static int64_t elem_int(json_t *a, size_t i) { return json_is_integer(json_array_get(a, i)) ? (int64_t)json_integer_value(json_array_get(a, i)) : 0; }
static double elem_real(json_t *a, size_t i) { return json_is_number(json_array_get(a, i)) ? json_number_value(json_array_get(a, i)) : 0; }

static void read_table(reader *r, json_t *o, int32_t t, model_description *m)
{
    char where[32];
    snprintf(where, sizeof where, "tables[%d]", (int)t);
    ember_table_config *tb = &m->tables[t];
    *tb = ember_table_config_default();
    json_t *nm = member(r, o, where, "name", JSON_STRING);
    if (nm)
        snprintf(m->names[0][t], sizeof m->names[0][t], "%s", json_string_value(nm));
    tb->name = m->names[0][t];
    tb->kind = (ember_table_kind)get_int(r, o, where, "kind", 0, EMBER_TABLE_DYNAMIC);
    tb->rows = get_int(r, o, where, "rows", 0, INT64_MAX);
    tb->dim = (int32_t)get_int(r, o, where, "dim", 1, 1024);
    tb->init = (ember_init_kind)get_int(r, o, where, "init", 0, EMBER_INIT_CONSTANT);
    tb->init_value = get_float(r, o, where, "init_value");
    json_t *op = member(r, o, where, "optimizer", JSON_OBJECT);
    if (op) {
        char ow[48];
        snprintf(ow, sizeof ow, "%s.optimizer", where);
        tb->optimizer.kind = (ember_optimizer_kind)get_int(r, op, ow, "kind", 0, EMBER_OPT_LAST);
        tb->optimizer.lr = get_float(r, op, ow, "lr");
        tb->optimizer.eps = get_float(r, op, ow, "eps");
        tb->optimizer.weight_decay = get_float(r, op, ow, "weight_decay");
        tb->optimizer.beta1 = get_float(r, op, ow, "beta1");
        tb->optimizer.beta2 = get_float(r, op, ow, "beta2");
        if (json_object_get(op, "momentum")) { /* absent before momentum */
            tb->optimizer.momentum = get_float(r, op, ow, "momentum");
            tb->optimizer.nesterov = json_is_true(json_object_get(op, "nesterov"));
        }
        if (json_object_get(op, "clip_norm")) { /* when clipping is on */
            tb->optimizer.clip_value = get_float(r, op, ow, "clip_value");
            tb->optimizer.clip_norm = get_float(r, op, ow, "clip_norm");
        }
        if (json_object_get(op, "lr_power")) { /* FTRL's */
            tb->optimizer.beta = get_float(r, op, ow, "beta");
            tb->optimizer.l1 = get_float(r, op, ow, "l1");
            tb->optimizer.l2 = get_float(r, op, ow, "l2");
            tb->optimizer.lr_power = get_float(r, op, ow, "lr_power");
        }
        if (json_object_get(op, "eta")) /* LARS's */
            tb->optimizer.eta = get_float(r, op, ow, "eta");
        if (json_object_get(op, "weight_decay_mode"))
            tb->optimizer.weight_decay_mode =
                (ember_decay_mode)get_int(r, op, ow, "weight_decay_mode", 0, EMBER_DECAY_DECOUPLED);
    }
    tb->placement = (ember_placement)get_int(r, o, where, "placement", 0, EMBER_PLACE_REPLICATED);
    tb->owner = (int32_t)get_int(r, o, where, "owner", 0, INT32_MAX);
    tb->exchange = (ember_exchange)get_int(r, o, where, "exchange", 0, EMBER_EXCHANGE_POOLED);
    json_t *a = get_array(r, o, where, "limits", 3);
    if (a) {
        tb->max_ids_per_partition = elem_int(a, 0);
        tb->max_unique_ids_per_partition = elem_int(a, 1);
        tb->limit_policy = (ember_limit_policy)elem_int(a, 2);
    }
    if ((a = get_array(r, o, where, "quantization", 3))) {
        tb->quant_buckets = (int32_t)elem_int(a, 0);
        tb->quant_low = (float)elem_real(a, 1);
        tb->quant_high = (float)elem_real(a, 2);
        if (!(fabsf(tb->quant_low) <= FLT_MAX && fabsf(tb->quant_high) <= FLT_MAX)) {
            snprintf(r->err, r->len, "model.json: %s.quantization: low and high must fit a float", where);
            r->failed = 1;
        }
    }
    if ((a = get_array(r, o, where, "dynamic", 5))) {
        tb->capacity = elem_int(a, 0);
        tb->admit_after = (int32_t)elem_int(a, 1);
        tb->evict = (ember_evict_policy)elem_int(a, 2);
        tb->ttl_steps = (int32_t)elem_int(a, 3);
        tb->sketch_bytes = elem_int(a, 4);
    }
}

static void read_widths(reader *r, json_t *o, const char *key, int32_t *n, int32_t *w)
{
    json_t *a = get_array(r, o, "dense", key, -DENSE_MAX_LAYERS);
    *n = a ? (int32_t)json_array_size(a) : 0;
    for (int32_t i = 0; i < *n; i++)
        w[i] = (int32_t)elem_int(a, (size_t)i);
}

static void read_synth(reader *r, json_t *o, ctr_synth_config *s)
{
    *s = ctr_synth_config_default();
    s->num_dense = (int32_t)get_int(r, o, "synthetic", "num_dense", 0, 4096);
    s->num_sparse = (int32_t)get_int(r, o, "synthetic", "num_sparse", 1, CTR_MAX_FEATURES);
    const char *keys[5] = {"rows", "alpha", "pooling", "keyed", "hash_rows"};
    for (int k = 0; k < 5 && !r->failed; k++) {
        json_t *a = get_array(r, o, "synthetic", keys[k], s->num_sparse);
        for (int32_t f = 0; a && f < s->num_sparse; f++) {
            if (k == 0)
                s->rows[f] = elem_int(a, (size_t)f);
            else if (k == 1)
                s->alpha[f] = elem_real(a, (size_t)f);
            else if (k == 2)
                s->pooling[f] = elem_real(a, (size_t)f);
            else if (k == 3)
                s->keyed[f] = (int)elem_int(a, (size_t)f);
            else
                s->hash_rows[f] = elem_int(a, (size_t)f);
        }
    }
    s->teacher_dim = (int32_t)get_int(r, o, "synthetic", "teacher_dim", 1, 1024);
    s->teacher_hidden = (int32_t)get_int(r, o, "synthetic", "teacher_hidden", 1, 65536);
    s->teacher_scale = get_real(r, o, "synthetic", "teacher_scale");
    s->ctr_rate = get_real(r, o, "synthetic", "ctr_rate");
    s->seed = (uint64_t)get_int(r, o, "synthetic", "seed", INT64_MIN, INT64_MAX);
    s->eval_offset = (uint64_t)get_int(r, o, "synthetic", "eval_offset", 0, INT64_MAX);
    json_t *d = json_object_get(o, "drift"); /* optional: no drift */
    if (d && !r->failed) {
        s->drift = (ember_drift)get_int(r, d, "synthetic.drift", "kind", EMBER_DRIFT_ROTATE, EMBER_DRIFT_GROW);
        s->drift_every = get_int(r, d, "synthetic.drift", "every", 1, INT64_MAX);
        s->drift_rows = get_int(r, d, "synthetic.drift", "rows", 1, INT64_C(1) << 53);
        s->drift_features = (int32_t)get_int(r, d, "synthetic.drift", "features", 0, s->num_sparse);
        s->drift_start = get_int(r, d, "synthetic.drift", "start", 0, INT64_C(1) << 53);
    }
}

int description_from_json(const char *json, size_t n, model_description *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    json_error_t je;
    json_t *root = json_loadb(json, n, 0, &je);
    if (!root) {
        snprintf(err, errlen, "model.json: line %d: %s", je.line, je.text);
        return EMBER_EINVAL;
    }
    reader r = {err, errlen, 0};
    json_t *f = member(&r, root, "", "format", JSON_STRING);
    if (f && strcmp(json_string_value(f), "ember-model")) {
        snprintf(err, errlen, "model.json: format \"%s\", expected \"ember-model\"", json_string_value(f));
        r.failed = 1;
    }
    get_int(&r, root, "", "version", 1, 2);
    m->seed = (uint64_t)get_int(&r, root, "", "seed", INT64_MIN, INT64_MAX);
    json_t *dd = member(&r, root, "", "dedup", -1);
    m->dedup = dd && json_is_true(dd);
    /* added after version 1 first shipped: absent means the collection's defaults */
    ember_collection_config dflt = ember_collection_config_default();
    json_t *st = json_object_get(root, "stack_tables");
    m->stack_tables = st ? json_is_true(st) : dflt.stack_tables;
    m->bounds = json_object_get(root, "bounds")
                    ? (ember_bounds_policy)get_int(&r, root, "", "bounds", 0, EMBER_BOUNDS_DROP)
                    : dflt.bounds;
    m->num_shards = json_object_get(root, "num_shards") ? (int32_t)get_int(&r, root, "", "num_shards", 0, 1 << 20)
                                                         : dflt.num_shards;
    json_t *tables = get_array(&r, root, "", "tables", -DESCRIPTION_MAX);
    m->num_tables = tables ? (int32_t)json_array_size(tables) : 0;
    for (int32_t t = 0; t < m->num_tables && !r.failed; t++)
        read_table(&r, json_array_get(tables, (size_t)t), t, m);
    json_t *features = get_array(&r, root, "", "features", -DESCRIPTION_MAX);
    m->num_features = features ? (int32_t)json_array_size(features) : 0;
    for (int32_t i = 0; i < m->num_features && !r.failed; i++) {
        json_t *o = json_array_get(features, (size_t)i);
        char where[32];
        snprintf(where, sizeof where, "features[%d]", (int)i);
        json_t *nm = member(&r, o, where, "name", JSON_STRING);
        if (nm)
            snprintf(m->names[1][i], sizeof m->names[1][i], "%s", json_string_value(nm));
        m->features[i].name = m->names[1][i];
        m->features[i].table = (int32_t)get_int(&r, o, where, "table", 0, m->num_tables - 1);
        m->features[i].combiner = (ember_combiner)get_int(&r, o, where, "combiner", 0, EMBER_COMBINER_NONE);
    }
    json_t *d = member(&r, root, "", "dense", JSON_OBJECT);
    if (d) {
        m->dense.num_dense = (int32_t)get_int(&r, d, "dense", "num_dense", 0, 65536);
        m->dense.num_sparse = (int32_t)get_int(&r, d, "dense", "num_sparse", 1, 4096);
        m->dense.emb_dim = (int32_t)get_int(&r, d, "dense", "emb_dim", 1, 1024);
        read_widths(&r, d, "bottom", &m->dense.num_bottom, m->dense.bottom);
        read_widths(&r, d, "top", &m->dense.num_top, m->dense.top);
        m->dense.interaction = (dense_interaction)get_int(&r, d, "dense", "interaction", 0, DENSE_INTERACT_DCN);
        if (m->dense.interaction == DENSE_INTERACT_DCN) {
            m->dense.num_cross = (int32_t)get_int(&r, d, "dense", "num_cross", 1, DENSE_MAX_CROSS);
            m->dense.cross_rank = (int32_t)get_int(&r, d, "dense", "cross_rank", 0, 65536);
        }
        if (json_object_get(d, "activation")) /* absent: ReLU, as every bundle before it */
            m->dense.activation = (dense_activation)get_int(&r, d, "dense", "activation", 0, DENSE_ACT_NONE);
        m->dense.seed = (uint64_t)get_int(&r, d, "dense", "seed", INT64_MIN, INT64_MAX);
    }
    m->chunk = (int32_t)get_int(&r, root, "", "chunk", 1, INT32_MAX);
    m->batch = (int32_t)get_int(&r, root, "", "batch", 1, INT32_MAX);
    json_t *in = member(&r, root, "", "input", JSON_OBJECT);
    if (in) {
        m->input.num_dense = (int32_t)get_int(&r, in, "input", "num_dense", 0, 65536);
        json_t *rows = get_array(&r, in, "input", "rows", -CTR_MAX_FEATURES);
        m->input.num_sparse = rows ? (int32_t)json_array_size(rows) : 0;
        json_t *names = get_array(&r, in, "input", "names", m->input.num_sparse);
        for (int32_t i = 0; rows && names && i < m->input.num_sparse; i++) {
            m->input.rows[i] = elem_int(rows, (size_t)i);
            const char *s = json_string_value(json_array_get(names, (size_t)i));
            snprintf(m->input.names[i], sizeof m->input.names[i], "%s", s ? s : "");
        }
    }
    json_t *sy = member(&r, root, "", "synthetic", -1);
    m->synthetic = sy && json_is_object(sy);
    if (m->synthetic && !r.failed)
        read_synth(&r, sy, &m->synth);
    json_t *is = json_object_get(root, "input_schema");
    if (!r.failed && is && description_input_read(is, &m->input, &m->in, m->in_error, sizeof m->in_error) != EMBER_OK)
        m->in.source = DESC_INPUT_NONE; /* the rest of the model stands without it; in_error says why */
    json_decref(root);
    return r.failed ? EMBER_EINVAL : EMBER_OK;
}
