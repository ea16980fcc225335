/*
 * manifest.c: decoding and checking of a checkpoint's manifest.json.
 *
 * The manifest is untrusted input (a fuzzer feeds it): after its checksum,
 * every field is type- and range-checked, and every data file's section list
 * and size are recomputed from the tables' geometry (ckpt_impl.h) and must
 * equal what the manifest says.  Offsets are never taken from the text
 * without that check, so later reads of the mapped files stay in bounds.
 * Names (tables, blobs) point into the parsed JSON document, kept on ck.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "collection/config.h"
#include "ckpt/ckpt_impl.h"
#include "data/data_error.h"

#define MAX_FILE_BYTES (INT64_C(1) << 56)

typedef struct dec {
    const char *where; /* the manifest's path, for messages */
    char ctx[96];      /* "tables[3]." and the like        */
} dec;

static int bad(const dec *d, const char *key, const char *why)
{
    ember_data_set_error("%s: field \"%s%s\": %s", d->where, d->ctx, key, why);
    return EMBER_EFORMAT;
}

static int get_int(const dec *d, json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        return bad(d, key, v ? "expected an integer" : "missing");
    int64_t x = (int64_t)json_integer_value(v);
    if (x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof why, "%lld outside [%lld, %lld]", (long long)x, (long long)lo, (long long)hi);
        return bad(d, key, why);
    }
    *out = x;
    return EMBER_OK;
}

static int get_str(const dec *d, json_t *o, const char *key, const char **out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        return bad(d, key, v ? "expected a string" : "missing");
    *out = json_string_value(v);
    return EMBER_OK;
}

static int get_float(const dec *d, json_t *o, const char *key, float *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return bad(d, key, v ? "expected a number" : "missing");
    double x = json_number_value(v);
    if (!(x >= -FLT_MAX && x <= FLT_MAX))
        return bad(d, key, "not a finite float");
    *out = (float)x;
    return EMBER_OK;
}

static int get_hex(const dec *d, json_t *o, const char *key, uint64_t *out)
{
    const char *s;
    int st = get_str(d, o, key, &s);
    if (st != EMBER_OK)
        return st;
    uint64_t x = 0;
    if (strlen(s) != 16)
        return bad(d, key, "expected 16 hex digits");
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return bad(d, key, "expected 16 hex digits");
        x = x << 4 | (uint64_t)v;
    }
    *out = x;
    return EMBER_OK;
}

static int get_enum(const dec *d, json_t *o, const char *key, const char *(*name)(int), int n, int *out)
{
    const char *s;
    int st = get_str(d, o, key, &s);
    if (st != EMBER_OK)
        return st;
    for (int i = 0; i < n; i++)
        if (strcmp(s, name(i)) == 0) {
            *out = i;
            return EMBER_OK;
        }
    return bad(d, key, "unknown name");
}

static const char *placement_i(int i) { return ckpt_placement_name((ember_placement)i); }
static const char *optimizer_i(int i) { return ckpt_optimizer_name((ember_optimizer_kind)i); }
static const char *init_i(int i) { return ckpt_init_name((ember_init_kind)i); }
static const char *evict_i(int i) { return ckpt_evict_name((ember_evict_policy)i); }
static const char *precision_i(int i) { return ckpt_precision_name((ember_row_precision)i); }

#define TRY(x)                                                                                               \
    do {                                                                                                     \
        if ((st = (x)) != EMBER_OK)                                                                          \
            return st;                                                                                       \
    } while (0)

static int decode_table(dec *d, json_t *o, int32_t world, ckpt_table_info *t)
{
    int st, e;
    int64_t x;
    if (!json_is_object(o))
        return bad(d, "", "expected an object");
    TRY(get_str(d, o, "name", &t->name));
    if (!t->name[0])
        return bad(d, "name", "empty");
    TRY(get_int(d, o, "rows", 1, INT64_C(1) << 32, &t->rows));
    TRY(get_int(d, o, "dim", 1, 1024, &x));
    t->dim = (int32_t)x;
    json_t *opt = json_object_get(o, "optimizer"), *init = json_object_get(o, "init");
    if (!json_is_object(opt))
        return bad(d, "optimizer", "expected an object");
    if (!json_is_object(init))
        return bad(d, "init", "expected an object");
    size_t n = strlen(d->ctx);
    snprintf(d->ctx + n, sizeof d->ctx - n, "optimizer.");
    TRY(get_enum(d, opt, "kind", optimizer_i, EMBER_OPT_LAST + 1, &e));
    t->opt.kind = (ember_optimizer_kind)e;
    TRY(get_float(d, opt, "lr", &t->opt.lr));
    TRY(get_float(d, opt, "eps", &t->opt.eps));
    TRY(get_float(d, opt, "weight_decay", &t->opt.weight_decay));
    TRY(get_float(d, opt, "beta1", &t->opt.beta1));
    TRY(get_float(d, opt, "beta2", &t->opt.beta2));
    t->opt.clip_value = t->opt.clip_norm = 0.0f; /* written when on */
    if (json_object_get(opt, "clip_value"))
        TRY(get_float(d, opt, "clip_value", &t->opt.clip_value));
    if (json_object_get(opt, "clip_norm"))
        TRY(get_float(d, opt, "clip_norm", &t->opt.clip_norm));
    t->opt.weight_decay_mode = EMBER_DECAY_L2; /* written when decoupled */
    json_t *mode = json_object_get(opt, "weight_decay_mode");
    if (mode) {
        if (!json_is_string(mode) || strcmp(json_string_value(mode), "decoupled") != 0)
            return bad(d, "weight_decay_mode", "expected \"decoupled\"");
        t->opt.weight_decay_mode = EMBER_DECAY_DECOUPLED;
    }
    t->opt.beta = 1.0f;
    t->opt.l1 = t->opt.l2 = 0.0f;
    t->opt.lr_power = -0.5f;
    if (t->opt.kind == EMBER_OPT_FTRL) {
        TRY(get_float(d, opt, "beta", &t->opt.beta));
        TRY(get_float(d, opt, "l1", &t->opt.l1));
        TRY(get_float(d, opt, "l2", &t->opt.l2));
        TRY(get_float(d, opt, "lr_power", &t->opt.lr_power));
    }
    t->opt.momentum = 0.9f; /* the keys of the kind that has them */
    t->opt.nesterov = 0;
    if (t->opt.kind == EMBER_OPT_MOMENTUM) {
        TRY(get_float(d, opt, "momentum", &t->opt.momentum));
        json_t *nv = json_object_get(opt, "nesterov");
        if (!json_is_boolean(nv))
            return bad(d, "nesterov", "expected true or false");
        t->opt.nesterov = json_is_true(nv);
    }
    t->opt.eta = 0.001f;
    if (t->opt.kind == EMBER_OPT_LARS) {
        TRY(get_float(d, opt, "momentum", &t->opt.momentum));
        TRY(get_float(d, opt, "eta", &t->opt.eta));
    }
    snprintf(d->ctx + n, sizeof d->ctx - n, "init.");
    TRY(get_enum(d, init, "kind", init_i, 4, &e));
    t->init = (ember_init_kind)e;
    TRY(get_float(d, init, "value", &t->init_value));
    d->ctx[n] = 0;
    TRY(get_hex(d, o, "rng_key", &t->rng_key));
    TRY(get_int(d, o, "state_floats", 0, 2048, &x));
    if (x != ember_state_floats(t->opt.kind, t->dim))
        return bad(d, "state_floats", "does not match the optimizer and dim");
    t->state_floats = (int32_t)x;
    TRY(get_enum(d, o, "placement", placement_i, 4, &e));
    t->placement = (ember_placement)e;
    TRY(get_int(d, o, "world", world, world, &x));
    t->world = world;
    TRY(get_int(d, o, "owner", 0, world - 1, &x));
    t->owner = (int32_t)x;
    TRY(get_int(d, o, "offset", 0, (INT64_C(1) << 32) - t->rows, &t->offset));
    int64_t ld = t->placement == EMBER_PLACE_COLUMN ? (t->dim + world - 1) / world : t->dim;
    TRY(get_int(d, o, "local_dim", ld, ld, &x));
    t->local_dim = (int32_t)x;
    t->precision = EMBER_PRECISION_FP32; /* absent in checkpoints of builds without half rows */
    if (json_object_get(o, "precision")) {
        TRY(get_enum(d, o, "precision", precision_i, 3, &e));
        t->precision = (ember_row_precision)e;
    }
    t->state_precision = EMBER_PRECISION_FP32; /* absent before half state */
    if (json_object_get(o, "state_precision")) {
        TRY(get_enum(d, o, "state_precision", precision_i, 3, &e));
        t->state_precision = (ember_row_precision)e;
    }
    t->kind = EMBER_TABLE_FIXED;
    const char *kind = json_string_value(json_object_get(o, "kind"));
    if (!kind || strcmp(kind, "fixed") == 0)
        return EMBER_OK; /* tables of checkpoints without "kind" are fixed */
    if (strcmp(kind, "dynamic") != 0)
        return bad(d, "kind", "not fixed or dynamic");
    t->kind = EMBER_TABLE_DYNAMIC;
    TRY(get_int(d, o, "capacity", 1, UINT32_MAX - 1, &t->capacity));
    if (t->rows != t->capacity * world || t->placement != EMBER_PLACE_ROW || t->offset != 0)
        return bad(d, "capacity", "a dynamic table has rows = capacity x world, placement row, offset 0");
    TRY(get_int(d, o, "admit_after", 0, 65535, &x));
    t->admit_after = (int32_t)x;
    TRY(get_enum(d, o, "evict", evict_i, 4, &e));
    t->evict = (ember_evict_policy)e;
    TRY(get_int(d, o, "ttl_steps", 0, INT32_MAX, &x));
    t->ttl_steps = (int32_t)x;
    TRY(get_int(d, o, "sketch_width", 0, INT64_C(1) << 31, &t->sketch_width));
    if ((t->sketch_width & (t->sketch_width - 1)) || (t->sketch_width && t->sketch_width < 8))
        return bad(d, "sketch_width", "not 0 or a power of two of at least 8");
    /* absent in checkpoints of builds whose sketch was stored row by row:
     * that sketch is not read (docs/checkpoint-format.md) */
    json_t *layout = json_object_get(o, "sketch_layout");
    if (layout && (!json_is_string(layout) || strcmp(json_string_value(layout), "lines")))
        return bad(d, "sketch_layout", "not \"lines\"");
    t->sketch_lines = layout != NULL;
    return EMBER_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* Names must be unique: sort pointers to them and compare neighbours. */
static int check_unique(dec *d, const char *key, const char **names, size_t stride, int32_t n)
{
    const char ***p = malloc(sizeof *p * ((size_t)n + 1));
    if (!p) {
        ember_data_set_error("%s: out of memory", d->where);
        return EMBER_ENOMEM;
    }
    for (int32_t i = 0; i < n; i++)
        p[i] = (const char **)((const char *)names + stride * (size_t)i);
    qsort(p, (size_t)n, sizeof *p, cmp_names);
    int st = EMBER_OK;
    for (int32_t i = 1; i < n && st == EMBER_OK; i++)
        if (strcmp(*p[i - 1], *p[i]) == 0)
            st = bad(d, key, "a name appears twice");
    free(p);
    return st;
}

static int decode_names(dec *d, json_t *m, const char *key, int32_t *n, const char ***out)
{
    json_t *a = json_object_get(m, key);
    if (!json_is_array(a))
        return bad(d, key, "expected an array");
    if (json_array_size(a) > CKPT_MAX_BLOBS)
        return bad(d, key, "too many blobs");
    *n = (int32_t)json_array_size(a);
    *out = calloc((size_t)*n + 1, sizeof **out);
    if (!*out)
        return bad(d, key, "out of memory");
    for (int32_t i = 0; i < *n; i++) {
        const char *s = json_string_value(json_array_get(a, (size_t)i));
        if (!s || !ckpt_blob_name_ok(s))
            return bad(d, key, "a blob name is not 1 to 63 of [A-Za-z0-9_.-]");
        (*out)[i] = s;
    }
    return check_unique(d, key, *out, sizeof **out, *n);
}

int ckpt_expected_sections(const ember_checkpoint *ck, int32_t r, ckpt_section *out)
{
    int32_t n = 0;
    for (int32_t t = 0; t < ck->num_tables; t++) {
        const ckpt_table_info *ti = &ck->tables[t];
        int64_t held = ckpt_held_rows(ti, r) * (int64_t)sizeof(float);
        if (out)
            out[n] = (ckpt_section){CKPT_VALUES, (uint32_t)t, 0, held * ckpt_value_width(ti, r), 0};
        n++;
        if (ti->state_floats > 0) {
            if (out)
                out[n] = (ckpt_section){CKPT_STATE, (uint32_t)t, 0, held * ckpt_state_width(ti, r), 0};
            n++;
        }
        if (ti->kind == EMBER_TABLE_DYNAMIC) {
            if (out)
                out[n] = (ckpt_section){CKPT_KEYS, (uint32_t)t, 0, ckpt_keys_bytes(ti->capacity, ti->sketch_width), 0};
            n++;
        }
    }
    for (int32_t b = 0; r == 0 && b < ck->num_blobs; b++, n++)
        if (out)
            out[n] = (ckpt_section){CKPT_BLOB, (uint32_t)b, 0, -1, 0};
    for (int32_t b = 0; b < ck->num_rank_blobs; b++, n++)
        if (out)
            out[n] = (ckpt_section){CKPT_RANK_BLOB, (uint32_t)b, 0, -1, 0};
    return n;
}

static int decode_file(dec *d, ember_checkpoint *ck, json_t *o, int32_t r)
{
    static const char *const whats[] = {"", "values", "state", "blob", "rank_blob", "keys"};
    int st;
    ckpt_file *f = &ck->files[r];
    const char *name;
    if (!json_is_object(o))
        return bad(d, "", "expected an object");
    ckpt_file_name_of(f->name, r, ck->world);
    TRY(get_str(d, o, "name", &name));
    if (strcmp(name, f->name) != 0)
        return bad(d, "name", "not the name of this rank's file");
    json_t *secs = json_object_get(o, "sections");
    if (!json_is_array(secs))
        return bad(d, "sections", "expected an array");
    int32_t n = ckpt_expected_sections(ck, r, NULL);
    if ((int64_t)json_array_size(secs) != n)
        return bad(d, "sections", "not the expected number of sections");
    f->num_sections = n;
    f->sections = calloc((size_t)n + 1, sizeof *f->sections);
    if (!f->sections)
        return bad(d, "sections", "out of memory");
    ckpt_expected_sections(ck, r, f->sections);
    size_t base = strlen(d->ctx);
    int64_t at = CKPT_HEADER_BYTES;
    for (int32_t i = 0; i < n; i++) {
        ckpt_section *s = &f->sections[i];
        json_t *j = json_array_get(secs, (size_t)i);
        const char *what, *label, *want;
        snprintf(d->ctx + base, sizeof d->ctx - base, "sections[%d].", (int)i);
        if (!json_is_object(j))
            return bad(d, "", "expected an object");
        TRY(get_str(d, j, "what", &what));
        if (strcmp(what, whats[s->what]) != 0)
            return bad(d, "what", "not the expected section here");
        if (s->what == CKPT_VALUES || s->what == CKPT_STATE || s->what == CKPT_KEYS) {
            want = ck->tables[s->index].name;
            TRY(get_str(d, j, "table", &label));
        } else {
            want = s->what == CKPT_BLOB ? ck->blob_names[s->index] : ck->rank_blob_names[s->index];
            TRY(get_str(d, j, "name", &label));
        }
        if (strcmp(label, want) != 0)
            return bad(d, s->what <= CKPT_STATE || s->what == CKPT_KEYS ? "table" : "name",
                       "not the expected section here");
        if (s->bytes < 0)
            TRY(get_int(d, j, "bytes", 0, MAX_FILE_BYTES, &s->bytes));
        else
            TRY(get_int(d, j, "bytes", s->bytes, s->bytes, &s->bytes));
        TRY(get_int(d, j, "offset", at, at, &s->offset));
        TRY(get_hex(d, j, "checksum", &s->checksum));
        at = ckpt_align(at + s->bytes);
        if (at > MAX_FILE_BYTES)
            return bad(d, "bytes", "the file would be too large");
    }
    d->ctx[base] = 0;
    int64_t total = at + (int64_t)n * CKPT_ENTRY_BYTES + CKPT_TRAILER_BYTES;
    TRY(get_int(d, o, "bytes", total, total, &f->bytes));
    TRY(get_hex(d, o, "checksum", &f->checksum));
    return EMBER_OK;
}

static int decode_top(dec *d, ember_checkpoint *ck, json_t *m)
{
    int st;
    const char *s;
    int64_t x;
    TRY(get_str(d, m, "format", &s));
    if (strcmp(s, CKPT_FORMAT_NAME) != 0)
        return bad(d, "format", "not \"" CKPT_FORMAT_NAME "\"");
    TRY(get_int(d, m, "version", CKPT_VERSION, CKPT_VERSION, &x));
    TRY(get_str(d, m, "ember_version", &s));
    TRY(get_int(d, m, "step", 0, INT64_C(999999999999), &ck->step));
    TRY(get_int(d, m, "world", 1, CKPT_MAX_WORLD, &x));
    ck->world = (int32_t)x;
    TRY(get_hex(d, m, "seed", &ck->seed));
    TRY(get_int(d, m, "optimizer_steps", 0, INT64_MAX, &ck->opt_steps));
    json_t *tables = json_object_get(m, "tables");
    if (!json_is_array(tables))
        return bad(d, "tables", "expected an array");
    if (json_array_size(tables) > CKPT_MAX_TABLES)
        return bad(d, "tables", "too many tables");
    ck->num_tables = (int32_t)json_array_size(tables);
    ck->tables = calloc((size_t)ck->num_tables + 1, sizeof *ck->tables);
    if (!ck->tables)
        return bad(d, "tables", "out of memory");
    for (int32_t t = 0; t < ck->num_tables; t++) {
        snprintf(d->ctx, sizeof d->ctx, "tables[%d].", (int)t);
        TRY(decode_table(d, json_array_get(tables, (size_t)t), ck->world, &ck->tables[t]));
    }
    d->ctx[0] = 0;
    TRY(check_unique(d, "tables", &ck->tables[0].name, sizeof *ck->tables, ck->num_tables));
    TRY(decode_names(d, m, "blobs", &ck->num_blobs, &ck->blob_names));
    TRY(decode_names(d, m, "rank_blobs", &ck->num_rank_blobs, &ck->rank_blob_names));
    json_t *files = json_object_get(m, "files");
    if (!json_is_array(files))
        return bad(d, "files", "expected an array");
    if ((int64_t)json_array_size(files) != ck->world)
        return bad(d, "files", "not one file per rank of the world");
    ck->files = calloc((size_t)ck->world, sizeof *ck->files);
    if (!ck->files)
        return bad(d, "files", "out of memory");
    for (int32_t r = 0; r < ck->world; r++) {
        snprintf(d->ctx, sizeof d->ctx, "files[%d].", (int)r);
        TRY(decode_file(d, ck, json_array_get(files, (size_t)r), r));
    }
    d->ctx[0] = 0;
    return EMBER_OK;
}

int ckpt_manifest_decode(ember_checkpoint *ck, const char *text, int64_t bytes, const char *where)
{
    dec d = {where, ""};
    int st = ckpt_json_seal_check(text, bytes, d.where);
    if (st != EMBER_OK)
        return st;
    json_error_t err;
    json_t *m = json_loadb(text, (size_t)bytes, JSON_REJECT_DUPLICATES, &err);
    if (!m) {
        ember_data_set_error("%s:%d: not JSON: %s", where, err.line, err.text);
        return EMBER_EFORMAT;
    }
    ck->doc = m;
    if (!json_is_object(m))
        return bad(&d, "", "the manifest is not a JSON object");
    return decode_top(&d, ck, m);
}

void ckpt_free_parts(ember_checkpoint *ck)
{
    for (int32_t r = 0; ck->files && r < ck->world; r++)
        free(ck->files[r].sections);
    free(ck->files);
    free(ck->tables);
    free(ck->blob_names);
    free(ck->rank_blob_names);
    free(ck->tv);
    free(ck->ts);
    free(ck->tk);
    if (ck->doc)
        json_decref((json_t *)ck->doc);
    ck->files = NULL;
    ck->tables = NULL;
    ck->blob_names = ck->rank_blob_names = NULL;
    ck->tv = ck->ts = ck->tk = NULL;
    ck->doc = NULL;
}
