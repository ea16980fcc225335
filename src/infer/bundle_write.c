/*
 * bundle_write.c: an inference bundle written from a checkpoint
 * (ember_bundle_write, ember.h; the layout in bundle.h; docs/inference.md,
 * "Bundles").
 *
 * The checkpoint is opened as a predictor of one rank, which holds every
 * row, and read through the predictor's views (predictor.h): its model
 * description, its loaded tables, its dense parameters.  Each table is
 * encoded as asked (--quantize, or its --per-table entry) into a temporary
 * folder of this process (a dynamic table as the keys that hold a row,
 * ascending, and their rows in that order), each file fsynced, then the
 * manifest sealed by
 * its own checksum; the folder is published by a rename that never
 * replaces an existing one (core/safe_file.h: never through a link).  Any
 * failure leaves nothing behind.
 */
#define _GNU_SOURCE /* renameat2 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt/ckpt_impl.h"
#include "data/data_error.h"
#include "infer/bundle.h"
#include "infer/predictor.h"
#include "quant/quant.h"

/* The encoding of table `name`: its --per-table entry "name=enc", or dflt. */
static int encoding_of(const char *name, const char *dflt, const char *const *per, int32_t n, char *err, size_t len)
{
    for (int32_t i = 0; i < n; i++) {
        const char *eq = strchr(per[i], '=');
        if (eq && (size_t)(eq - per[i]) == strlen(name) && !strncmp(per[i], name, (size_t)(eq - per[i]))) {
            int e = ember_encoding_parse(eq + 1);
            if (e < 0)
                snprintf(err, len, "table '%s': encoding '%s' (expected fp32, fp16, int8 or int4)", name, eq + 1);
            return e;
        }
    }
    int e = ember_encoding_parse(dflt);
    if (e < 0)
        snprintf(err, len, "encoding '%s' (expected fp32, fp16, int8 or int4)", dflt ? dflt : "(none)");
    return e;
}

static int write_file(const safe_dir *dir, const char *name, const void *data, int64_t bytes, json_t *entry, char *err,
                      size_t len)
{
    if (ckpt_write_atomic(dir, name, data, bytes, err, len) != EMBER_OK)
        return EMBER_EIO;
    json_object_set_new(entry, "file", json_string(name));
    json_object_set_new(entry, "bytes", json_integer(bytes));
    json_object_set_new(entry, "xxh3", json_integer((json_int_t)XXH3_64bits(data, (size_t)bytes)));
    return EMBER_OK;
}

/* Encodes table t of the collection into one buffer: a fixed table's rows
 * in order; a dynamic table's keys that hold a row (ascending, also into
 * *keys_out as little-endian int64) and their rows in the same order. */
static int encode_table(const ember_collection *coll, int32_t t, const ember_table_config *tc, ember_encoding e,
                        uint8_t **out, int64_t *rows_out, uint8_t **keys_out, char *err, size_t len)
{
    int dynamic = tc->kind == EMBER_TABLE_DYNAMIC;
    int64_t rb = ember_quant_row_bytes(e, tc->dim), rows = tc->rows;
    int64_t *keys = NULL;
    if (dynamic && ember_dynamic_keys(coll, t, 0, NULL, &rows) == EMBER_OK) /* a world of one: every key */
        keys = malloc(sizeof *keys * (size_t)(rows + 1));
    uint8_t *buf = malloc((size_t)(rows * rb + 1)), *kbuf = dynamic ? malloc((size_t)(8 * rows + 1)) : NULL;
    float *chunk = malloc(sizeof(float) * (size_t)BUNDLE_CHUNK_ROWS * (size_t)tc->dim);
    int st = buf && chunk && (!dynamic || (keys && kbuf)) ? EMBER_OK : EMBER_ENOMEM;
    if (st != EMBER_OK)
        snprintf(err, len, "table '%s': out of memory for %lld rows", tc->name, (long long)rows);
    if (st == EMBER_OK && dynamic && (st = ember_dynamic_keys(coll, t, rows, keys, &rows)) != EMBER_OK)
        snprintf(err, len, "table '%s': %s", tc->name, ember_errmsg(coll));
    for (int64_t r0 = 0; r0 < rows && st == EMBER_OK; r0 += BUNDLE_CHUNK_ROWS) {
        int64_t n = rows - r0 < BUNDLE_CHUNK_ROWS ? rows - r0 : BUNDLE_CHUNK_ROWS;
        if ((st = dynamic ? ember_dynamic_read(coll, t, keys + r0, n, chunk, NULL, NULL)
                          : ember_table_read(coll, t, r0, n, chunk)) != EMBER_OK) {
            snprintf(err, len, "table '%s': %s", tc->name, ember_errmsg(coll));
            break;
        }
        for (int64_t i = 0; i < n && st == EMBER_OK; i++) {
            if (dynamic)
                ckpt_put_u64(kbuf + 8 * (r0 + i), (uint64_t)keys[r0 + i]);
            if (ember_quant_row(e, tc->dim, chunk + i * tc->dim, buf + (r0 + i) * rb) != 0) {
                st = EMBER_EINPUT;
                if (dynamic)
                    snprintf(err, len, "table '%s' key %lld: a value that %s cannot hold (not finite, or beyond "
                             "fp16's 65504)", tc->name, (long long)keys[r0 + i], ember_encoding_name(e));
                else
                    snprintf(err, len, "table '%s' row %lld: a value that %s cannot hold (not finite, or beyond "
                             "fp16's 65504)", tc->name, (long long)(r0 + i), ember_encoding_name(e));
            }
        }
    }
    free(chunk);
    free(keys);
    if (st != EMBER_OK) {
        free(buf);
        free(kbuf);
        return st;
    }
    *out = buf;
    *rows_out = rows;
    if (keys_out)
        *keys_out = kbuf;
    return EMBER_OK;
}

/* Renames parent/tmp to parent/name unless name exists, then makes the
 * rename durable. */
static int publish(const safe_dir *parent, const char *tmp, const char *name, char *err, size_t len)
{
    int st = safe_rename_new(parent, tmp, name, err, len);
    if (st == EMBER_EINVAL) {
        char p[4400];
        snprintf(err, len, "%s exists: bundles are not overwritten (remove it, or name another)",
                 safe_path(parent, name, p, sizeof p));
    }
    return st == EMBER_OK ? safe_dir_sync(parent, err, len) : st;
}

/* The bundle's folder from the argument (trailing slashes dropped) into
 * out: its parent opened into *parent (never through a link), the last
 * part into name, which must not exist.  Fails with ember_errmsg. */
static int open_destination(const char *out_arg, char *out, size_t outlen, safe_dir *parent, char *name,
                            size_t namelen)
{
    char err[1024] = "";
    snprintf(out, outlen, "%s", out_arg ? out_arg : "");
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--) /* "b/" is the folder b */
        out[n - 1] = '\0';
    if (!out[0]) {
        ember_data_set_error("export: no bundle folder named");
        return EMBER_EINVAL;
    }
    if (safe_dir_of(parent, out, name, namelen, err, sizeof err) != EMBER_OK) {
        if (strstr(err, "does not exist")) {
            const char *slash = strrchr(out, '/');
            ember_data_set_error("export %s: the folder %.*s does not exist", out, (int)(slash ? slash - out : 1),
                                 slash ? out : ".");
        } else {
            ember_data_set_error("export %s: %s", out, err);
        }
        safe_dir_close(parent);
        return EMBER_EIO;
    }
    if (safe_kind(parent, name) != SAFE_ABSENT) {
        ember_data_set_error("export %s: it exists: bundles are not overwritten (remove it, or name another)", out);
        safe_dir_close(parent);
        return EMBER_EINVAL;
    }
    return EMBER_OK;
}

/* What was asked can be bundled: every --per-table entry names a table of
 * the model. */
static int check_request(const model_description *m, const char *const *per_table, int32_t num_per_table,
                         char *err, size_t len)
{
    for (int32_t i = 0; i < num_per_table; i++) {
        const char *eq = strchr(per_table[i], '=');
        int found = 0;
        for (int32_t t = 0; eq && t < m->num_tables && !found; t++)
            found = strlen(m->tables[t].name) == (size_t)(eq - per_table[i]) &&
                    !strncmp(m->tables[t].name, per_table[i], (size_t)(eq - per_table[i]));
        if (!found) {
            snprintf(err, len, "--per-table %s: %s", per_table[i],
                     eq ? "no table of that name in the checkpoint" : "expected NAME=ENCODING");
            return EMBER_EINVAL;
        }
    }
    return EMBER_OK;
}

/* Every table of the predictor encoded into dir/table-NNNN.rows (and a
 * dynamic table's keys into dir/table-NNNN.keys), its entry appended to
 * tables: "kind" only when the bundle has a dynamic table (version 3), so
 * that a bundle of fixed tables is the version 2 bundle it always was. */
static int write_tables(const safe_dir *dir, const ember_predictor *p, const char *quantize,
                        const char *const *per_table, int32_t num_per_table, int with_kind, json_t *tables,
                        char *err, size_t len)
{
    const ember_collection_config *cc = ember_predictor_config(p);
    int st = EMBER_OK;
    for (int32_t t = 0; t < cc->num_tables && st == EMBER_OK; t++) {
        const ember_table_config *tc = &cc->tables[t];
        int e = encoding_of(tc->name, quantize, per_table, num_per_table, err, len);
        if (e < 0)
            return EMBER_EINVAL;
        uint8_t *buf = NULL, *keys = NULL;
        int64_t rows = 0, rb = ember_quant_row_bytes((ember_encoding)e, tc->dim);
        if ((st = encode_table(predictor_collection(p), t, tc, (ember_encoding)e, &buf, &rows, &keys, err, len)) !=
            EMBER_OK)
            return st;
        int dynamic = tc->kind == EMBER_TABLE_DYNAMIC;
        char file[128];
        snprintf(file, sizeof file, "table-%04d.rows", (int)t);
        json_t *entry = json_pack("{s:s}", "name", tc->name);
        if (with_kind)
            json_object_set_new(entry, "kind", json_string(dynamic ? "dynamic" : "fixed"));
        json_object_set_new(entry, "encoding", json_string(ember_encoding_name((ember_encoding)e)));
        json_object_set_new(entry, "rows", json_integer(rows));
        json_object_set_new(entry, "dim", json_integer(tc->dim));
        json_object_set_new(entry, "row_bytes", json_integer(rb));
        st = write_file(dir, file, buf, rows * rb, entry, err, len);
        if (st == EMBER_OK && dynamic) {
            json_t *k = json_object();
            snprintf(file, sizeof file, "table-%04d.keys", (int)t);
            st = write_file(dir, file, keys, 8 * rows, k, err, len);
            json_object_set_new(entry, "keys", k);
        }
        json_array_append_new(tables, entry);
        free(buf);
        free(keys);
    }
    return st;
}

/* The manifest: the model description (a table trained with simulated
 * quantization keeps it: the forward reads the decoded rows through the
 * same rule, as the dense model learned), the tables' and the dense
 * model's entries, and last its own checksum of every byte before. */
static int write_manifest(const safe_dir *dir, const model_description *m, int version, json_t *tables,
                          json_t *dense, char *err, size_t len)
{
    char *model_json = description_to_json(m);
    json_t *model = model_json ? json_loads(model_json, 0, NULL) : NULL;
    free(model_json);
    if (!model) {
        snprintf(err, len, "out of memory describing the model");
        return EMBER_ENOMEM;
    }
    json_t *man = json_pack("{s:s, s:i, s:o, s:O, s:O}", "format", "ember-bundle", "version", version,
                            "model", model, "tables", tables, "dense", dense);
    char *text = man ? ckpt_json_sealed(man) : NULL;
    int st = text ? ckpt_write_atomic(dir, "manifest.json", text, (int64_t)strlen(text), err, len) : EMBER_ENOMEM;
    free(text);
    json_decref(man);
    return st;
}

int ember_bundle_write(const char *checkpoint, const char *out_arg, const char *quantize, const char *const *per_table,
                       int32_t num_per_table)
{
    char err[1024] = "", out[4096], name[256], tmp[300];
    safe_dir parent = SAFE_DIR_INIT, tmpd = SAFE_DIR_INIT;
    int st = open_destination(out_arg, out, sizeof out, &parent, name, sizeof name);
    if (st != EMBER_OK)
        return st;
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", name, (long)getpid()); /* this process's own */
    ember_predictor *p = NULL;
    if ((st = ember_predictor_open(checkpoint, NULL, &p)) != EMBER_OK) { /* a world of one: every row here */
        safe_dir_close(&parent);
        return st; /* its message is in ember_errmsg(NULL) */
    }
    int created = 0;
    json_t *tables = json_array(), *dense = json_object();
    st = check_request(predictor_description(p), per_table, num_per_table, err, sizeof err);
    if (st == EMBER_OK && (st = safe_mkdir(&parent, tmp, &tmpd, err, sizeof err)) == EMBER_OK)
        created = 1;
    const model_description *m = predictor_description(p);
    int dynamic = 0;
    for (int32_t t = 0; t < m->num_tables; t++)
        dynamic |= m->tables[t].kind == EMBER_TABLE_DYNAMIC;
    int version = dynamic ? BUNDLE_VERSION : BUNDLE_VERSION_FIXED;
    if (st == EMBER_OK)
        st = write_tables(&tmpd, p, quantize, per_table, num_per_table, dynamic, tables, err, sizeof err);
    int64_t nparams = 0;
    const float *params = predictor_dense_params(p, &nparams);
    if (st == EMBER_OK)
        st = write_file(&tmpd, "dense.params", params, nparams * (int64_t)sizeof(float), dense, err, sizeof err);
    if (st == EMBER_OK)
        st = write_manifest(&tmpd, m, version, tables, dense, err, sizeof err);
    safe_dir_close(&tmpd);
    if (st == EMBER_OK)
        st = publish(&parent, tmp, name, err, sizeof err);
    json_decref(tables);
    json_decref(dense);
    if (st != EMBER_OK && created)
        safe_remove_tree(&parent, tmp);
    safe_dir_close(&parent);
    ember_predictor_close(p);
    if (st != EMBER_OK)
        ember_data_set_error("export %s: %s", out, err);
    return st;
}
