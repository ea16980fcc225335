/*
 * bundle.c: inference bundles read (bundle.h; docs/inference.md,
 * "Bundles"): the manifest's own checksum, every file's size and XXH3-64,
 * and every table entry against the model description, are checked when a
 * bundle is opened, so one flipped byte anywhere is refused with the file
 * named.  The files are mapped, and their pages given back to the page
 * cache once read.  A bundle loads at any world size: every rank reads
 * every table file and ember_table_write keeps each rank's part; a table
 * the predictor holds encoded (rows_encoding) gets the bundle's rows as
 * they are, any other is decoded to fp32.  A dynamic table's keys file is
 * checked to ascend (no key twice); every rank keeps the keys it owns, their
 * rows copied the same way, so an int8 table is never fp32 in memory.  The
 * writer is bundle_write.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt/ckpt_impl.h"
#include "dyn/dyn.h"
#include "infer/bundle.h"
#include "infer/description.h"
#include "quant/quant.h"
#include "step/dynamic_load.h"
#include "step/rows.h"

struct ember_bundle {
    char dir[4096];
    json_t *manifest;
    char *model_json;
    int32_t num_tables;
    struct bundle_file {
        const uint8_t *map;
        int64_t bytes;
    } files[DESCRIPTION_MAX + 1]; /* tables, then dense.params */
    struct bundle_file keys[DESCRIPTION_MAX]; /* dynamic tables: their keys */
    int dynamic[DESCRIPTION_MAX];
    ember_encoding enc[DESCRIPTION_MAX];
    int64_t row_bytes[DESCRIPTION_MAX], rows[DESCRIPTION_MAX]; /* a dynamic table: rows = keys */
    int32_t dim[DESCRIPTION_MAX];
};

int bundle_is(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    const char *f = j ? json_string_value(json_object_get(j, "format")) : NULL;
    int is = f && !strcmp(f, "ember-bundle");
    json_decref(j);
    return is;
}

/* Maps dir/name and checks its size and checksum against entry. */
/* The file's pages leave this process (they stay in the page cache): a
 * bundle's tables are read twice (checksum, load), and without this every
 * file would count in the process's memory until the bundle closes. */
static void forget_range(const uint8_t *p, int64_t bytes)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(page - 1); /* the pages it touches */
    if (bytes > 0)
        madvise((void *)a, (size_t)((uintptr_t)p + (uintptr_t)bytes - a), MADV_DONTNEED);
}

static void forget_pages(const struct bundle_file *f) { forget_range(f->map, f->bytes); }

/* path opened for reading, its size in *sb: the descriptor, or -1 with err
 * naming the path and the reason. */
static int open_read(const char *path, struct stat *sb, char *err, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, sb) == 0)
        return fd;
    snprintf(err, len, "%s: cannot open: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

static int map_file(ember_bundle *b, struct bundle_file *f, json_t *entry, char *err, size_t len)
{
    const char *name = json_string_value(json_object_get(entry, "file"));
    json_t *jb = json_object_get(entry, "bytes"), *jx = json_object_get(entry, "xxh3");
    if (!name || strchr(name, '/') || !json_is_integer(jb) || !json_is_integer(jx)) {
        snprintf(err, len, "%s/manifest.json: a file entry without file, bytes or xxh3", b->dir);
        return EMBER_EFORMAT;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", b->dir, name);
    struct stat sb;
    int fd = open_read(path, &sb, err, len);
    if (fd < 0)
        return EMBER_EIO;
    f->bytes = (int64_t)sb.st_size;
    if (f->bytes != (int64_t)json_integer_value(jb)) {
        close(fd);
        snprintf(err, len, "%s: %lld bytes, the manifest says %lld", path, (long long)f->bytes,
                 (long long)json_integer_value(jb));
        return EMBER_ECORRUPT;
    }
    f->map = f->bytes ? mmap(NULL, (size_t)f->bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (f->bytes && f->map == MAP_FAILED) {
        f->map = NULL;
        snprintf(err, len, "%s: cannot map: %s", path, strerror(errno));
        return EMBER_EIO;
    }
    if ((json_int_t)XXH3_64bits(f->map, (size_t)f->bytes) != json_integer_value(jx)) {
        snprintf(err, len, "%s: checksum mismatch (the file is corrupt)", path);
        return EMBER_ECORRUPT;
    }
    forget_pages(f);
    return EMBER_OK;
}

/* Reads, checks and parses the manifest: its checksum first, so nothing
 * in it is trusted before every byte is known to be the one written. */
static int read_manifest(ember_bundle *b, const char *path, char *err, size_t len)
{
    struct stat sb;
    int fd = open_read(path, &sb, err, len);
    if (fd < 0)
        return EMBER_EIO;
    if (!S_ISREG(sb.st_mode) || sb.st_size > (64 << 20)) {
        close(fd);
        snprintf(err, len, "%s: not a bundle manifest (%s)", path, S_ISREG(sb.st_mode) ? "over 64 MiB" : "not a file");
        return EMBER_EFORMAT;
    }
    char *text = malloc((size_t)sb.st_size + 1);
    ssize_t got = 0, n = 1;
    while (text && got < (ssize_t)sb.st_size && (n = pread(fd, text + got, (size_t)(sb.st_size - got), got)) != 0)
        if (n > 0)
            got += n;
        else if (errno != EINTR)
            break;
    int e = n < 0 ? errno : 0;
    close(fd);
    if (got != (ssize_t)sb.st_size) {
        free(text);
        snprintf(err, len, "%s: cannot read: %s", path, !text ? "out of memory" : e ? strerror(e) : "it changed while read");
        return EMBER_EIO;
    }
    text[got] = 0;
    json_error_t je;
    json_t *j = json_loadb(text, (size_t)got, 0, &je);
    json_int_t version = json_integer_value(json_object_get(j, "version"));
    const char *format = json_string_value(json_object_get(j, "format"));
    int st = EMBER_OK;
    if (j && format && !strcmp(format, "ember-bundle") && version == 1) {
        st = EMBER_EFORMAT;
        snprintf(err, len, "%s: a version 1 bundle, whose manifest has no checksum of its own: export it again from "
                 "its checkpoint", path);
    } else if ((st = ckpt_json_seal_check(text, got, path)) != EMBER_OK) { /* any flipped byte, whitespace too */
        snprintf(err, len, "%s", ember_errmsg(NULL));
    } else if (!j) {
        st = EMBER_EFORMAT;
        snprintf(err, len, "%s: line %d: %s", path, je.line, je.text);
    } else if (!format || strcmp(format, "ember-bundle") || version < BUNDLE_VERSION_FIXED ||
               version > BUNDLE_VERSION) {
        st = EMBER_EFORMAT;
        snprintf(err, len, "%s: not a version %d or %d bundle manifest (format, version)", path,
                 BUNDLE_VERSION_FIXED, BUNDLE_VERSION);
    }
    free(text);
    if (st == EMBER_OK)
        b->manifest = j;
    else
        json_decref(j);
    return st;
}

/* A dynamic table's keys file: 8 bytes a key (little-endian int64), one
 * per row, strictly ascending (so no key twice).  Checked after its
 * checksum, which a bundle put together by hand could still satisfy. */
static int check_keys(const ember_bundle *b, int32_t t, const char *file, char *err, size_t len)
{
    const struct bundle_file *k = &b->keys[t];
    if (k->bytes != 8 * b->rows[t]) {
        snprintf(err, len, "%s/%s: %lld bytes for %lld keys of 8", b->dir, file, (long long)k->bytes,
                 (long long)b->rows[t]);
        return EMBER_EFORMAT;
    }
    for (int64_t i = 1; i < b->rows[t]; i++)
        if ((int64_t)ckpt_get_u64(k->map + 8 * i) <= (int64_t)ckpt_get_u64(k->map + 8 * (i - 1))) {
            snprintf(err, len, "%s/%s: key %lld (number %lld) does not follow %lld: keys must ascend", b->dir, file,
                     (long long)ckpt_get_u64(k->map + 8 * i), (long long)i,
                     (long long)ckpt_get_u64(k->map + 8 * (i - 1)));
            return EMBER_EFORMAT;
        }
    forget_pages(k);
    return EMBER_OK;
}

/* Table entry t of the manifest: its encoding, dim, rows and kind, its
 * file (and a dynamic table's keys file) mapped and verified. */
static int read_entry(ember_bundle *b, int32_t t, json_t *e, json_int_t version, const char *path, char *err,
                      size_t len)
{
    int enc = ember_encoding_parse(json_string_value(json_object_get(e, "encoding")));
    json_t *dim = json_object_get(e, "dim"), *rows = json_object_get(e, "rows"), *kind = json_object_get(e, "kind");
    const char *k = kind ? json_string_value(kind) : "fixed"; /* version 2 entries have no kind */
    int dynamic = k && !strcmp(k, "dynamic");
    if (!k || (!dynamic && strcmp(k, "fixed"))) {
        snprintf(err, len, "%s: tables[%d]: kind %s (expected \"fixed\" or \"dynamic\")", path, (int)t,
                 k ? k : "that is not a string");
        return EMBER_EFORMAT;
    }
    if (dynamic && version < BUNDLE_VERSION) {
        snprintf(err, len, "%s: tables[%d]: a dynamic table in a version %d manifest (they came with version %d)",
                 path, (int)t, (int)version, BUNDLE_VERSION);
        return EMBER_EFORMAT;
    }
    if (enc < 0 || !json_is_integer(dim) || !json_is_integer(rows) || json_integer_value(dim) < 1 ||
        json_integer_value(dim) > 1024 || json_integer_value(rows) < !dynamic ||
        json_integer_value(rows) > ((json_int_t)1 << 40)) {
        snprintf(err, len, "%s: tables[%d]: encoding, dim or rows missing, unknown or out of range", path, (int)t);
        return EMBER_EFORMAT;
    }
    b->dynamic[t] = dynamic;
    b->enc[t] = (ember_encoding)enc;
    b->dim[t] = (int32_t)json_integer_value(dim);
    b->rows[t] = (int64_t)json_integer_value(rows);
    b->row_bytes[t] = ember_quant_row_bytes(b->enc[t], b->dim[t]);
    int st = map_file(b, &b->files[t], e, err, len);
    if (st != EMBER_OK || !dynamic)
        return st;
    json_t *keys = json_object_get(e, "keys");
    if (!json_is_object(keys)) {
        snprintf(err, len, "%s: tables[%d]: a dynamic table without its keys file", path, (int)t);
        return EMBER_EFORMAT;
    }
    if ((st = map_file(b, &b->keys[t], keys, err, len)) != EMBER_OK)
        return st;
    return check_keys(b, t, json_string_value(json_object_get(keys, "file")), err, len);
}

int bundle_open(const char *dir, ember_bundle **out, char *err, size_t len)
{
    *out = NULL;
    ember_bundle *b = calloc(1, sizeof *b);
    if (!b)
        return snprintf(err, len, "out of memory"), EMBER_ENOMEM;
    snprintf(b->dir, sizeof b->dir, "%s", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    int st = read_manifest(b, path, err, len);
    json_t *tables = b->manifest ? json_object_get(b->manifest, "tables") : NULL;
    json_t *model = b->manifest ? json_object_get(b->manifest, "model") : NULL;
    if (st == EMBER_OK &&
        (!json_is_array(tables) || !json_is_object(model) || json_array_size(tables) > DESCRIPTION_MAX)) {
        st = EMBER_EFORMAT;
        snprintf(err, len, "%s: not a bundle manifest (tables, model)", path);
    } else if (st == EMBER_OK && !(b->model_json = json_dumps(model, JSON_COMPACT | JSON_REAL_PRECISION(17)))) {
        st = EMBER_ENOMEM;
        snprintf(err, len, "out of memory");
    }
    b->num_tables = tables ? (int32_t)json_array_size(tables) : 0;
    json_int_t version = b->manifest ? json_integer_value(json_object_get(b->manifest, "version")) : 0;
    for (int32_t t = 0; t < b->num_tables && st == EMBER_OK; t++)
        st = read_entry(b, t, json_array_get(tables, (size_t)t), version, path, err, len);
    if (st == EMBER_OK)
        st = map_file(b, &b->files[b->num_tables], json_object_get(b->manifest, "dense"), err, len);
    if (st != EMBER_OK) {
        bundle_close(b);
        return st;
    }
    *out = b;
    return EMBER_OK;
}

void bundle_close(ember_bundle *b)
{
    if (!b)
        return;
    for (int32_t i = 0; i <= b->num_tables; i++) {
        if (b->files[i].map)
            munmap((void *)b->files[i].map, (size_t)b->files[i].bytes);
        if (i < b->num_tables && b->keys[i].map)
            munmap((void *)b->keys[i].map, (size_t)b->keys[i].bytes);
    }
    free(b->model_json);
    json_decref(b->manifest);
    free(b);
}

const void *bundle_manifest(const ember_bundle *b) { return b->manifest; }

const char *bundle_model_json(const ember_bundle *b) { return b->model_json; }

const float *bundle_dense(const ember_bundle *b, int64_t *bytes)
{
    *bytes = b->files[b->num_tables].bytes;
    return (const float *)b->files[b->num_tables].map;
}

int bundle_check(const ember_bundle *b, const ember_collection_config *cc, char *err, size_t len)
{
    if (b->num_tables != cc->num_tables) {
        snprintf(err, len, "%s: %d table files for %d tables", b->dir, (int)b->num_tables, (int)cc->num_tables);
        return EMBER_EFORMAT;
    }
    for (int32_t t = 0; t < cc->num_tables; t++)
        if (b->dynamic[t] != (cc->tables[t].kind == EMBER_TABLE_DYNAMIC)) {
            snprintf(err, len, "%s: table '%s': the manifest's entry is a %s table, the model's is %s", b->dir,
                     cc->tables[t].name, b->dynamic[t] ? "dynamic" : "fixed",
                     b->dynamic[t] ? "fixed" : "dynamic");
            return EMBER_EFORMAT;
        } else if (b->dynamic[t] ? b->dim[t] != cc->tables[t].dim
                                 : b->dim[t] != cc->tables[t].dim || b->rows[t] != cc->tables[t].rows) {
            snprintf(err, len, "%s: table '%s': the manifest's entry has %lld rows of dim %d, the model %lld of %d",
                     b->dir, cc->tables[t].name, (long long)b->rows[t], (int)b->dim[t], (long long)cc->tables[t].rows,
                     (int)cc->tables[t].dim);
            return EMBER_EFORMAT;
        } else if (b->files[t].bytes != b->rows[t] * b->row_bytes[t]) {
            snprintf(err, len, "%s: table '%s': %lld bytes for %lld rows of %lld", b->dir, cc->tables[t].name,
                     (long long)b->files[t].bytes, (long long)b->rows[t], (long long)b->row_bytes[t]);
            return EMBER_EFORMAT;
        }
    return EMBER_OK;
}

int bundle_encoding(const ember_bundle *b, int32_t t) { return (int)b->enc[t]; }

int64_t bundle_dynamic_capacity(const ember_bundle *b, int32_t t, int32_t world)
{
    if (!b->dynamic[t])
        return 0;
    int64_t *owned = calloc((size_t)world, sizeof *owned), most = 1;
    if (!owned)
        return -1;
    for (int64_t i = 0; i < b->rows[t]; i++)
        owned[ember_dyn_owner((int64_t)ckpt_get_u64(b->keys[t].map + 8 * i), world)]++;
    for (int32_t r = 0; r < world; r++)
        most = owned[r] > most ? owned[r] : most;
    free(owned);
    forget_pages(&b->keys[t]);
    return most;
}

/* Dynamic table t from its keys and rows files: each rank keeps the keys it
 * owns (step/dynamic_load.h), rows copied encoded or decoded. */
static int load_dynamic(const ember_bundle *b, ember_collection *coll, int32_t t)
{
    enum { CHUNK = 1024 };
    int64_t keys[CHUNK], rb = b->row_bytes[t];
    const uint8_t *km = b->keys[t].map, *rows = b->files[t].map;
    int st = ember_dyn_load_begin(coll, t);
    for (int64_t i0 = 0; i0 < b->rows[t] && st == EMBER_OK; i0 += CHUNK) {
        int64_t n = b->rows[t] - i0 < CHUNK ? b->rows[t] - i0 : CHUNK;
        for (int64_t i = 0; i < n; i++)
            keys[i] = (int64_t)ckpt_get_u64(km + 8 * (i0 + i));
        st = ember_dyn_load_rows(coll, t, keys, n, rows + i0 * rb, (int)b->enc[t], rb);
        forget_range(km + 8 * i0, 8 * n);
        forget_range(rows + i0 * rb, n * rb);
    }
    if (st == EMBER_OK)
        ember_dyn_load_end(coll, t);
    return st;
}

int bundle_load_tables(const ember_bundle *b, ember_collection *coll, const ember_collection_config *cc,
                       float *scratch)
{
    int st = EMBER_OK;
    for (int32_t t = 0; t < cc->num_tables && st == EMBER_OK; t++) {
        int32_t dim = cc->tables[t].dim;
        if (b->dynamic[t]) {
            st = load_dynamic(b, coll, t);
            continue;
        }
        if (cc->tables[t].rows_encoding != EMBER_ROWS_FP32) { /* held as the bundle holds them: copied */
            const struct bundle_file *f = &b->files[t];
            int64_t rb = b->row_bytes[t], step = (16 << 20) / rb + 1; /* ~16 MiB of the file at a time */
            for (int64_t r0 = 0; r0 < cc->tables[t].rows && st == EMBER_OK; r0 += step) {
                int64_t n = cc->tables[t].rows - r0 < step ? cc->tables[t].rows - r0 : step;
                st = ember_dist_write_encoded(coll, t, r0, n, f->map + r0 * rb, rb);
                forget_range(f->map + r0 * rb, n * rb);
            }
            continue;
        }
        for (int64_t r0 = 0; r0 < cc->tables[t].rows && st == EMBER_OK; r0 += BUNDLE_CHUNK_ROWS) {
            int64_t n = cc->tables[t].rows - r0 < BUNDLE_CHUNK_ROWS ? cc->tables[t].rows - r0 : BUNDLE_CHUNK_ROWS;
            for (int64_t i = 0; i < n; i++)
                ember_dequant_row(b->enc[t], dim, b->files[t].map + (r0 + i) * b->row_bytes[t], scratch + i * dim);
            st = ember_table_write(coll, t, r0, n, scratch);
            forget_range(b->files[t].map + r0 * b->row_bytes[t], n * b->row_bytes[t]);
        }
    }
    return st;
}
