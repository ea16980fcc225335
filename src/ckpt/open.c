/*
 * open.c: ember_checkpoint_open, which finds, maps and verifies a checkpoint.
 *
 * Every data file is mapped read-only (mmap, MAP_PRIVATE) and stays mapped
 * until ember_checkpoint_close; nothing is copied.  Verification reads every
 * byte once per checksum: the manifest's own checksum, each section's
 * XXH3-64 (so a mismatch names the table or blob), then the whole file's.
 * Every size and offset was recomputed from the manifest's tables before a
 * file is touched (manifest.c), so any byte sequence gives a status, never a
 * read out of bounds.  A file truncated by someone else *while* it is open
 * can still raise SIGBUS, as with any mapping.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt/ckpt_impl.h"
#include "data/data_error.h"
#include "dyn/dyn.h"

#define MAX_MANIFEST_BYTES (INT64_C(1) << 28)

static int io_error(const char *what, const char *path)
{
    ember_data_set_error("%s %s: %s", what, path, strerror(errno));
    return EMBER_EIO;
}

/* The step folder that path names: itself when it has a manifest, else its
 * newest complete checkpoint. */
static int find_folder(const char *path, char **out)
{
    char buf[4096];
    struct stat sb;
    snprintf(buf, sizeof buf, "%s/" CKPT_MANIFEST, path);
    if (stat(buf, &sb) == 0) {
        *out = strdup(path);
        return *out ? EMBER_OK : EMBER_ENOMEM;
    }
    if (stat(path, &sb) != 0)
        return io_error("cannot open", path);
    int64_t *steps;
    int64_t n = ckpt_list_steps(path, &steps);
    if (n < 0)
        return io_error("cannot read folder", path);
    if (n == 0) {
        ember_data_set_error("%s: no checkpoint here (no step-* folder with a " CKPT_MANIFEST ")", path);
        return EMBER_EIO;
    }
    snprintf(buf, sizeof buf, "%s/step-%012lld", path, (long long)steps[n - 1]);
    free(steps);
    *out = strdup(buf);
    return *out ? EMBER_OK : EMBER_ENOMEM;
}

static int read_manifest(ember_checkpoint *ck, const char *file, int64_t *bytes)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return io_error("cannot open", file);
    struct stat sb;
    int st = EMBER_OK;
    if (fstat(fd, &sb) != 0) {
        st = io_error("cannot stat", file);
    } else if (sb.st_size > MAX_MANIFEST_BYTES) {
        ember_data_set_error("%s: %lld bytes, more than a manifest can have", file, (long long)sb.st_size);
        st = EMBER_EFORMAT;
    } else if (!(ck->manifest = malloc((size_t)sb.st_size + 1))) {
        ember_data_set_error("%s: out of memory", file);
        st = EMBER_ENOMEM;
    }
    int64_t got = 0;
    while (st == EMBER_OK && got < sb.st_size) {
        ssize_t n = read(fd, ck->manifest + got, (size_t)(sb.st_size - got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            st = n < 0 ? io_error("cannot read", file) : EMBER_ECORRUPT;
        got += n > 0 ? n : 0;
    }
    if (st == EMBER_ECORRUPT)
        ember_data_set_error("%s: shorter than it was a moment ago", file);
    if (st == EMBER_OK) {
        ck->manifest[got] = 0;
        int64_t z = 0;
        while (z < got && ck->manifest[z] == 0)
            z++;
        if (got == 0 || z == got) { /* space reserved, never written: say so, not which field is missing */
            if (got)
                ember_data_set_error("%s: all %lld bytes are zero (a file not written whole?): not a manifest", file,
                                     (long long)got);
            else
                ember_data_set_error("%s: empty (0 bytes; a file not written whole?): not a manifest", file);
            st = EMBER_ECORRUPT;
        }
    }
    *bytes = got;
    close(fd);
    return st;
}

static const char *section_label(const ember_checkpoint *ck, const ckpt_section *s, char *buf, size_t cap)
{
    switch (s->what) {
    case CKPT_VALUES: snprintf(buf, cap, "table \"%s\" values", ck->tables[s->index].name); break;
    case CKPT_STATE: snprintf(buf, cap, "table \"%s\" optimizer state", ck->tables[s->index].name); break;
    case CKPT_BLOB: snprintf(buf, cap, "blob \"%s\"", ck->blob_names[s->index]); break;
    case CKPT_KEYS: snprintf(buf, cap, "table \"%s\" keys", ck->tables[s->index].name); break;
    default: snprintf(buf, cap, "rank blob \"%s\"", ck->rank_blob_names[s->index]); break;
    }
    return buf;
}

/* Header, section table, trailer and checksums of file r, mapped at m. */
static int verify_file(const ember_checkpoint *ck, int32_t r, const uint8_t *m, const char *file)
{
    const ckpt_file *f = &ck->files[r];
    int64_t table_at = f->bytes - CKPT_TRAILER_BYTES - (int64_t)f->num_sections * CKPT_ENTRY_BYTES;
    char label[160];
    if (ckpt_get_u64(m) != CKPT_MAGIC) {
        int64_t z = 0;
        while (z < f->bytes && m[z] == 0)
            z++;
        if (z == f->bytes)
            ember_data_set_error("%s: all %lld bytes are zero (a file not written whole?): not an ember checkpoint "
                                 "file", file, (long long)f->bytes);
        else
            ember_data_set_error("%s: not an ember checkpoint file (bad magic number)", file);
        return z == f->bytes ? EMBER_ECORRUPT : EMBER_EFORMAT;
    }
    if (ckpt_get_u32(m + 8) != CKPT_VERSION) {
        ember_data_set_error("%s: format version %u, this ember reads %d", file, ckpt_get_u32(m + 8),
                             CKPT_VERSION);
        return EMBER_EFORMAT;
    }
    if (XXH3_64bits(m, 56) != ckpt_get_u64(m + 56)) {
        ember_data_set_error("%s: header: checksum mismatch", file);
        return EMBER_ECORRUPT;
    }
    const char *field = ckpt_get_u32(m + 12) != CKPT_HEADER_BYTES      ? "header bytes"
                        : (int32_t)ckpt_get_u32(m + 16) != r             ? "rank"
                        : (int32_t)ckpt_get_u32(m + 20) != ck->world     ? "world"
                        : (int64_t)ckpt_get_u64(m + 24) != ck->step      ? "step"
                        : ckpt_get_u32(m + 32) != (uint32_t)f->num_sections ? "sections"
                        : (int64_t)ckpt_get_u64(m + 40) != table_at      ? "section table offset"
                        : (int64_t)ckpt_get_u64(m + 48) != f->bytes      ? "file bytes"
                                                                         : NULL;
    if (field) {
        ember_data_set_error("%s: header field \"%s\" does not match the manifest", file, field);
        return EMBER_EFORMAT;
    }
    for (int32_t i = 0; i < f->num_sections; i++) {
        const ckpt_section *s = &f->sections[i];
        const uint8_t *e = m + table_at + (int64_t)i * CKPT_ENTRY_BYTES;
        if (ckpt_get_u32(e) != s->what || ckpt_get_u32(e + 4) != s->index ||
            (int64_t)ckpt_get_u64(e + 8) != s->offset || (int64_t)ckpt_get_u64(e + 16) != s->bytes ||
            ckpt_get_u64(e + 24) != s->checksum) {
            ember_data_set_error("%s: section table entry %d (%s) does not match the manifest", file, (int)i,
                                 section_label(ck, s, label, sizeof label));
            return EMBER_ECORRUPT;
        }
        if (XXH3_64bits(m + s->offset, (size_t)s->bytes) != s->checksum) {
            ember_data_set_error("%s: %s: checksum mismatch", file, section_label(ck, s, label, sizeof label));
            return EMBER_ECORRUPT;
        }
    }
    if (ckpt_get_u64(m + f->bytes - 16) != CKPT_END_MAGIC || ckpt_get_u64(m + f->bytes - 8) != f->checksum ||
        XXH3_64bits(m, (size_t)(f->bytes - 8)) != f->checksum) {
        ember_data_set_error("%s: file checksum mismatch (header, padding or trailer)", file);
        return EMBER_ECORRUPT;
    }
    return EMBER_OK;
}

static int map_file(ember_checkpoint *ck, int32_t r)
{
    ckpt_file *f = &ck->files[r];
    char file[4096];
    snprintf(file, sizeof file, "%s/%s", ck->path, f->name);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return io_error("cannot open", file);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int st = io_error("cannot stat", file);
        close(fd);
        return st;
    }
    if ((int64_t)sb.st_size != f->bytes) {
        close(fd);
        ember_data_set_error("%s: %lld bytes, the manifest says %lld (%s)", file, (long long)sb.st_size,
                             (long long)f->bytes, sb.st_size < f->bytes ? "truncated" : "extended");
        return EMBER_ECORRUPT;
    }
    void *m = mmap(NULL, (size_t)f->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return io_error("cannot map", file);
    f->map = m;
    madvise(m, (size_t)f->bytes, MADV_SEQUENTIAL);
    return verify_file(ck, r, f->map, file);
}

/* Where each table's data lies in each rank's mapping. */
static int index_tables(ember_checkpoint *ck)
{
    size_t n = (size_t)ck->num_tables * (size_t)ck->world + 1;
    ck->tv = calloc(n, sizeof *ck->tv);
    ck->ts = calloc(n, sizeof *ck->ts);
    ck->tk = calloc(n, sizeof *ck->tk);
    if (!ck->tv || !ck->ts || !ck->tk) {
        ember_data_set_error("%s: out of memory", ck->path);
        return EMBER_ENOMEM;
    }
    for (int32_t r = 0; r < ck->world; r++) {
        const ckpt_file *f = &ck->files[r];
        for (int32_t i = 0; i < f->num_sections; i++) {
            const ckpt_section *s = &f->sections[i];
            size_t at = (size_t)s->index * (size_t)ck->world + (size_t)r;
            if (s->what == CKPT_VALUES)
                ck->tv[at] = f->map + s->offset;
            else if (s->what == CKPT_STATE)
                ck->ts[at] = f->map + s->offset;
            else if (s->what == CKPT_KEYS)
                ck->tk[at] = f->map + s->offset;
        }
    }
    return EMBER_OK;
}

int ember_checkpoint_open(const char *path, ember_checkpoint **out)
{
    ember_data_clear_error();
    if (!out || !path || !path[0] || strlen(path) > 3000) {
        ember_data_set_error("ember_checkpoint_open: a NULL, empty or too long argument");
        return EMBER_EINVAL;
    }
    *out = NULL;
    ember_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck) {
        ember_data_set_error("%s: out of memory opening the checkpoint", path);
        return EMBER_ENOMEM;
    }
    ember_handle_begin(&ck->head, ck->msg, sizeof ck->msg);
    char file[4096];
    int64_t bytes = 0;
    int st = find_folder(path, &ck->path);
    if (st == EMBER_OK) {
        snprintf(file, sizeof file, "%s/" CKPT_MANIFEST, ck->path);
        st = read_manifest(ck, file, &bytes);
    }
    if (st == EMBER_OK)
        st = ckpt_manifest_decode(ck, ck->manifest, bytes, file);
    if (st == EMBER_OK) {
        const char *base = strrchr(ck->path, '/');
        base = base ? base + 1 : ck->path;
        long long named;
        char tail;
        if (sscanf(base, "step-%12lld%c", &named, &tail) == 1 && strlen(base) == 17 && named != ck->step) {
            ember_data_set_error("%s: field \"step\": %lld, but the folder is %s", file, (long long)ck->step,
                                 base);
            st = EMBER_EFORMAT;
        }
    }
    for (int32_t r = 0; st == EMBER_OK && r < ck->world; r++)
        st = map_file(ck, r);
    if (st == EMBER_OK)
        st = index_tables(ck);
    if (st != EMBER_OK) {
        ember_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return EMBER_OK;
}

void ember_checkpoint_close(ember_checkpoint *ck)
{
    if (!ck)
        return;
    for (int32_t r = 0; ck->files && r < ck->world; r++)
        if (ck->files[r].map)
            munmap((void *)ck->files[r].map, (size_t)ck->files[r].bytes);
    ckpt_free_parts(ck);
    free(ck->manifest);
    free(ck->path);
    ember_handle_end(&ck->head);
    free(ck);
}

int ckpt_keep(const ember_checkpoint *ck, int status)
{
    return ember_handle_keep(ck ? &ck->head : NULL, status);
}

int ckpt_fail(const ember_checkpoint *ck, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ember_thread_msg(), EMBER_THREAD_MSG_SIZE, fmt, ap);
    va_end(ap);
    return ckpt_keep(ck, status);
}

int64_t ember_checkpoint_step(const ember_checkpoint *ck) { return ck ? ck->step : -1; }
int32_t ember_checkpoint_world(const ember_checkpoint *ck) { return ck ? ck->world : 0; }
const char *ember_checkpoint_path(const ember_checkpoint *ck) { return ck ? ck->path : NULL; }

const void *ember_checkpoint_blob(const ember_checkpoint *ck, int32_t rank, const char *name, int64_t *bytes)
{
    if (!ck || !name || rank >= ck->world)
        return NULL;
    const ckpt_file *f = &ck->files[rank < 0 ? 0 : rank];
    uint32_t what = rank < 0 ? CKPT_BLOB : CKPT_RANK_BLOB;
    for (int32_t i = 0; i < f->num_sections; i++) {
        const ckpt_section *s = &f->sections[i];
        if (s->what != what)
            continue;
        const char *n = what == CKPT_BLOB ? ck->blob_names[s->index] : ck->rank_blob_names[s->index];
        if (strcmp(n, name) == 0) {
            if (bytes)
                *bytes = s->bytes;
            return f->map + s->offset;
        }
    }
    return NULL;
}

int32_t ember_checkpoint_num_tables(const ember_checkpoint *ck) { return ck ? ck->num_tables : 0; }

int ember_checkpoint_table(const ember_checkpoint *ck, int32_t t, ember_table_config *out)
{
    const ckpt_table_info *in = ckpt_table(ck, t);
    if (!in || !out)
        return ckpt_fail(ck, EMBER_EINVAL, "ember_checkpoint_table: no table %d, or out is NULL", (int)t);
    *out = ember_table_config_default();
    out->name = in->name;
    out->kind = in->kind;
    out->dim = in->dim;
    out->init = in->init;
    out->init_value = in->init_value;
    out->optimizer = in->opt;
    out->placement = in->placement;
    out->owner = in->placement == EMBER_PLACE_TABLE ? in->owner : 0;
    out->precision = in->precision;
    out->state_precision = in->state_precision;
    if (in->kind == EMBER_TABLE_DYNAMIC) {
        out->rows = 0;
        out->capacity = in->capacity;
        out->admit_after = in->admit_after;
        out->evict = in->evict;
        out->ttl_steps = in->ttl_steps;
        out->sketch_bytes = ember_dyn_sketch_bytes(in->sketch_width);
    } else {
        out->rows = in->rows;
    }
    return EMBER_OK;
}

int32_t ckpt_num_tables(const ember_checkpoint *ck) { return ck ? ck->num_tables : 0; }
const ckpt_table_info *ckpt_table(const ember_checkpoint *ck, int32_t t)
{
    return ck && t >= 0 && t < ck->num_tables ? &ck->tables[t] : NULL;
}
int64_t ckpt_optimizer_steps(const ember_checkpoint *ck) { return ck ? ck->opt_steps : 0; }
uint64_t ckpt_seed(const ember_checkpoint *ck) { return ck ? ck->seed : 0; }
int32_t ckpt_num_files(const ember_checkpoint *ck) { return ck ? ck->world : 0; }
static const ckpt_file *file_at(const ember_checkpoint *ck, int32_t i)
{
    return ck && i >= 0 && i < ck->world ? &ck->files[i] : NULL;
}
const char *ckpt_file_name(const ember_checkpoint *ck, int32_t i)
{
    return file_at(ck, i) ? ck->files[i].name : NULL;
}
int64_t ckpt_file_bytes(const ember_checkpoint *ck, int32_t i) { return file_at(ck, i) ? ck->files[i].bytes : 0; }
uint64_t ckpt_file_checksum(const ember_checkpoint *ck, int32_t i)
{
    return file_at(ck, i) ? ck->files[i].checksum : 0;
}
const char *ckpt_manifest_text(const ember_checkpoint *ck) { return ck ? ck->manifest : NULL; }
