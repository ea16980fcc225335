/*
 * format.c: encoding of a checkpoint's bytes: the data-file header and
 * section layout, and the manifest (JSON via jansson) with its checksum.
 *
 * Integers in data files are little-endian, written byte by byte, so the
 * format does not depend on the host.  The manifest is protected by its last
 * field: the text up to and including `"manifest_xxh3": "` is hashed with
 * XXH3-64, and the 16 hex digits that follow must match, so every flipped
 * byte (even in whitespace or a float's last digit) is detected.  Decoding
 * and checking is in manifest.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "ckpt/ckpt_impl.h"
#include "collection/config.h"
#include "data/data_error.h"

void ckpt_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void ckpt_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t ckpt_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

uint64_t ckpt_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Header: magic u64 | version u32 | header bytes u32 | rank i32 | world i32 |
 * step i64 | sections u32 | 0 u32 | table offset u64 | file bytes u64 |
 * XXH3-64 of bytes [0, 56). */
void ckpt_header_encode(uint8_t out[CKPT_HEADER_BYTES], int32_t rank, int32_t world, int64_t step,
                        uint32_t n, int64_t table_offset, int64_t file_bytes)
{
    memset(out, 0, CKPT_HEADER_BYTES);
    ckpt_put_u64(out, CKPT_MAGIC);
    ckpt_put_u32(out + 8, CKPT_VERSION);
    ckpt_put_u32(out + 12, CKPT_HEADER_BYTES);
    ckpt_put_u32(out + 16, (uint32_t)rank);
    ckpt_put_u32(out + 20, (uint32_t)world);
    ckpt_put_u64(out + 24, (uint64_t)step);
    ckpt_put_u32(out + 32, n);
    ckpt_put_u64(out + 40, (uint64_t)table_offset);
    ckpt_put_u64(out + 48, (uint64_t)file_bytes);
    ckpt_put_u64(out + 56, XXH3_64bits(out, 56));
}

int64_t ckpt_layout(ckpt_file *f)
{
    int64_t at = CKPT_HEADER_BYTES;
    for (int32_t i = 0; i < f->num_sections; i++) {
        f->sections[i].offset = at;
        at = ckpt_align(at + f->sections[i].bytes);
    }
    f->bytes = at + (int64_t)f->num_sections * CKPT_ENTRY_BYTES + CKPT_TRAILER_BYTES;
    return at;
}

void ckpt_file_name_of(char out[64], int32_t rank, int32_t world)
{
    snprintf(out, 64, "rank-%05d-of-%05d.bin", (int)rank, (int)world);
}

static const char *const placement_names[] = {"row", "column", "table", "replicated"};
static const char *const optimizer_names[] = {"sgd", "adagrad", "rowwise_adagrad", "adam", "momentum", "ftrl",
                                               "rowwise_adam", "lamb", "lars"};
static const char *const init_names[] = {"uniform", "normal", "zeros", "constant"};

const char *ckpt_placement_name(ember_placement p) { return (unsigned)p < 4 ? placement_names[p] : "?"; }
const char *ckpt_optimizer_name(ember_optimizer_kind k) { return (unsigned)k <= EMBER_OPT_LAST ? optimizer_names[k] : "?"; }
const char *ckpt_init_name(ember_init_kind k) { return (unsigned)k < 4 ? init_names[k] : "?"; }
const char *ckpt_evict_name(ember_evict_policy e)
{
    static const char *const names[] = {"lru", "lfu", "ttl", "none"};
    return (unsigned)e < 4 ? names[e] : "?";
}

const char *ckpt_precision_name(ember_row_precision p)
{
    static const char *const names[] = {"fp32", "fp16", "bf16"};
    return (unsigned)p < 3 ? names[p] : "?";
}

int ckpt_blob_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

static json_t *hex64(uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%016llx", (unsigned long long)v);
    return json_string(s);
}

static const char *section_what(uint32_t what)
{
    switch (what) {
    case CKPT_VALUES: return "values";
    case CKPT_STATE: return "state";
    case CKPT_BLOB: return "blob";
    case CKPT_KEYS: return "keys";
    default: return "rank_blob";
    }
}

static json_t *table_json(const ckpt_table_info *t)
{
    json_t *o = json_object(), *opt = json_object(), *init = json_object();
    json_object_set_new(opt, "kind", json_string(ckpt_optimizer_name(t->opt.kind)));
    json_object_set_new(opt, "lr", json_real(t->opt.lr));
    json_object_set_new(opt, "eps", json_real(t->opt.eps));
    json_object_set_new(opt, "weight_decay", json_real(t->opt.weight_decay));
    json_object_set_new(opt, "beta1", json_real(t->opt.beta1));
    json_object_set_new(opt, "beta2", json_real(t->opt.beta2));
    if (t->opt.clip_value > 0)
        json_object_set_new(opt, "clip_value", json_real(t->opt.clip_value));
    if (t->opt.clip_norm > 0)
        json_object_set_new(opt, "clip_norm", json_real(t->opt.clip_norm));
    if (t->opt.weight_decay_mode == EMBER_DECAY_DECOUPLED)
        json_object_set_new(opt, "weight_decay_mode", json_string("decoupled"));
    if (t->opt.kind == EMBER_OPT_FTRL) {
        json_object_set_new(opt, "beta", json_real(t->opt.beta));
        json_object_set_new(opt, "l1", json_real(t->opt.l1));
        json_object_set_new(opt, "l2", json_real(t->opt.l2));
        json_object_set_new(opt, "lr_power", json_real(t->opt.lr_power));
    }
    if (t->opt.kind == EMBER_OPT_MOMENTUM) {
        json_object_set_new(opt, "momentum", json_real(t->opt.momentum));
        json_object_set_new(opt, "nesterov", json_boolean(t->opt.nesterov));
    }
    if (t->opt.kind == EMBER_OPT_LARS) {
        json_object_set_new(opt, "momentum", json_real(t->opt.momentum));
        json_object_set_new(opt, "eta", json_real(t->opt.eta));
    }
    json_object_set_new(init, "kind", json_string(ckpt_init_name(t->init)));
    json_object_set_new(init, "value", json_real(t->init_value));
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "rows", json_integer(t->rows));
    json_object_set_new(o, "dim", json_integer(t->dim));
    json_object_set_new(o, "optimizer", opt);
    json_object_set_new(o, "init", init);
    json_object_set_new(o, "rng_key", hex64(t->rng_key));
    json_object_set_new(o, "state_floats", json_integer(t->state_floats));
    json_object_set_new(o, "placement", json_string(ckpt_placement_name(t->placement)));
    json_object_set_new(o, "owner", json_integer(t->owner));
    json_object_set_new(o, "world", json_integer(t->world));
    json_object_set_new(o, "offset", json_integer(t->offset));
    json_object_set_new(o, "local_dim", json_integer(t->local_dim));
    json_object_set_new(o, "precision", json_string(ckpt_precision_name(t->precision)));
    if (t->state_precision != EMBER_PRECISION_FP32) /* readers that predate it see what they know */
        json_object_set_new(o, "state_precision", json_string(ckpt_precision_name(t->state_precision)));
    if (t->kind == EMBER_TABLE_DYNAMIC) {
        json_object_set_new(o, "kind", json_string("dynamic"));
        json_object_set_new(o, "capacity", json_integer(t->capacity));
        json_object_set_new(o, "admit_after", json_integer(t->admit_after));
        json_object_set_new(o, "evict", json_string(ckpt_evict_name(t->evict)));
        json_object_set_new(o, "ttl_steps", json_integer(t->ttl_steps));
        json_object_set_new(o, "sketch_width", json_integer(t->sketch_width));
        json_object_set_new(o, "sketch_layout", json_string("lines"));
    }
    return o;
}

static json_t *file_json(const ember_checkpoint *ck, const ckpt_file *f)
{
    json_t *o = json_object(), *secs = json_array();
    for (int32_t i = 0; i < f->num_sections; i++) {
        const ckpt_section *s = &f->sections[i];
        json_t *j = json_object();
        json_object_set_new(j, "what", json_string(section_what(s->what)));
        if (s->what == CKPT_VALUES || s->what == CKPT_STATE || s->what == CKPT_KEYS)
            json_object_set_new(j, "table", json_string(ck->tables[s->index].name));
        else
            json_object_set_new(j, "name", json_string(s->what == CKPT_BLOB ? ck->blob_names[s->index]
                                                                             : ck->rank_blob_names[s->index]));
        json_object_set_new(j, "offset", json_integer(s->offset));
        json_object_set_new(j, "bytes", json_integer(s->bytes));
        json_object_set_new(j, "checksum", hex64(s->checksum));
        json_array_append_new(secs, j);
    }
    json_object_set_new(o, "name", json_string(f->name));
    json_object_set_new(o, "bytes", json_integer(f->bytes));
    json_object_set_new(o, "checksum", hex64(f->checksum));
    json_object_set_new(o, "sections", secs);
    return o;
}

char *ckpt_manifest_encode(const ember_checkpoint *ck)
{
    json_t *m = json_object(), *tables = json_array(), *files = json_array();
    json_t *blobs = json_array(), *rblobs = json_array();
    json_object_set_new(m, "format", json_string(CKPT_FORMAT_NAME));
    json_object_set_new(m, "version", json_integer(CKPT_VERSION));
    json_object_set_new(m, "ember_version", json_string(ember_version()));
    json_object_set_new(m, "step", json_integer(ck->step));
    json_object_set_new(m, "world", json_integer(ck->world));
    json_object_set_new(m, "seed", hex64(ck->seed));
    json_object_set_new(m, "optimizer_steps", json_integer(ck->opt_steps));
    for (int32_t t = 0; t < ck->num_tables; t++)
        json_array_append_new(tables, table_json(&ck->tables[t]));
    for (int32_t b = 0; b < ck->num_blobs; b++)
        json_array_append_new(blobs, json_string(ck->blob_names[b]));
    for (int32_t b = 0; b < ck->num_rank_blobs; b++)
        json_array_append_new(rblobs, json_string(ck->rank_blob_names[b]));
    for (int32_t r = 0; r < ck->world; r++)
        json_array_append_new(files, file_json(ck, &ck->files[r]));
    json_object_set_new(m, "tables", tables);
    json_object_set_new(m, "blobs", blobs);
    json_object_set_new(m, "rank_blobs", rblobs);
    json_object_set_new(m, "files", files);
    char *text = ckpt_json_sealed(m);
    json_decref(m);
    return text;
}

char *ckpt_json_sealed(const void *json)
{
    char *body = json_dumps((const json_t *)json, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!body)
        return NULL;
    /* body ends with the object's own "\n}": replace that by the checksum
     * field (a last field that is an object keeps its own brace) */
    size_t n = strlen(body);
    while (n > 0 && body[n - 1] != '}')
        n--;
    if (n > 0)
        n--;
    while (n > 0 && (body[n - 1] == '\n' || body[n - 1] == ' '))
        n--;
    if (n < 2 || body[n - 1] == '{') { /* an empty object: no field to follow */
        free(body);
        return NULL;
    }
    static const char key[] = ",\n  \"manifest_xxh3\": \"";
    char *out = malloc(n + sizeof key + 16 + 8);
    if (!out) {
        free(body);
        return NULL;
    }
    memcpy(out, body, n);
    memcpy(out + n, key, sizeof key - 1);
    size_t prefix = n + sizeof key - 1;
    snprintf(out + prefix, 16 + 8, "%016llx\"\n}\n", (unsigned long long)XXH3_64bits(out, prefix));
    free(body);
    return out;
}

int ckpt_json_seal_check(const char *text, int64_t bytes, const char *where)
{
    static const char key[] = "\"manifest_xxh3\": \"", end[] = "\"\n}\n";
    int64_t kl = (int64_t)sizeof key - 1, el = (int64_t)sizeof end - 1;
    if (bytes < kl + 16 + el || memcmp(text + bytes - el, end, (size_t)el) != 0 ||
        memcmp(text + bytes - el - 16 - kl, key, (size_t)kl) != 0) {
        ember_data_set_error("%s: does not end with the \"manifest_xxh3\" field", where);
        return EMBER_EFORMAT;
    }
    int64_t prefix = bytes - el - 16;
    uint64_t want = 0;
    for (int i = 0; i < 16; i++) {
        char c = text[prefix + i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) {
            ember_data_set_error("%s: field \"manifest_xxh3\": expected 16 hex digits", where);
            return EMBER_EFORMAT;
        }
        want = want << 4 | (uint64_t)v;
    }
    uint64_t got = XXH3_64bits(text, (size_t)prefix);
    if (got != want) {
        ember_data_set_error("%s: checksum mismatch (manifest_xxh3 %016llx, contents %016llx)", where,
                             (unsigned long long)want, (unsigned long long)got);
        return EMBER_ECORRUPT;
    }
    return EMBER_OK;
}
