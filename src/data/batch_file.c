/*
 * batch_file.c: the batch file writer and reader of ember.h ("batch files").
 *
 * The format is documented byte by byte in docs/batch-format.md: a header
 * (magic, version, the tables' rows, the features' tables, XXH64), one record
 * per batch (counts, lengths, ids, optional weights, XXH64 of the record), and
 * an end record carrying the number of batches, so that a file cut at a record
 * boundary is still found truncated.  Everything is little-endian.
 *
 * Design choices.  Durability: the writer writes an output of
 * core/safe_file.h (never through a link; unnamed until complete, fsynced,
 * renamed over a regular file at path, the folder fsynced), so a reader sees
 * either the old file or the whole new one.  Distrust on read: every count is
 * checked against the bytes left in the file before anything is allocated
 * (a corrupt count cannot make the reader allocate gigabytes), and every
 * record's checksum is verified before its contents are believed.  Plain
 * buffered stdio: batches are read once, front to back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "core/safe_file.h"
#include "core/status.h"
#include "data/data_error.h"
#include "data/data_io.h"
#include "ember.h"

#define BF_MAGIC "EMBBATCH"
#define BF_MAGIC_LEN 8
#define BF_VERSION 1u
#define BF_REC_BATCH 0x43455242u /* "BREC" as little-endian bytes */
#define BF_REC_END 0x444E4542u   /* "BEND"                        */
#define BF_FLAG_WEIGHTS 1u
#define BF_HEADER_FIXED 24       /* magic, version, flags, T, F    */
#define BF_RECORD_FIXED 20       /* marker, batch_size, num_ids, flags */
#define BF_END_SIZE 20           /* marker, num_batches, checksum  */

/* ------------------------------------------------------- byte order */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define BF_BIG_ENDIAN 1
#else
#define BF_BIG_ENDIAN 0
#endif

/* In-place conversion of n elements of size sz between host and file order
 * (a no-op on little-endian hosts). */
static void swap_elems(void *p, size_t n, size_t sz)
{
#if BF_BIG_ENDIAN
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++, c += sz)
        for (size_t a = 0, b = sz - 1; a < b; a++, b--) {
            unsigned char t = c[a];
            c[a] = c[b];
            c[b] = t;
        }
#else
    (void)p;
    (void)n;
    (void)sz;
#endif
}

/* ------------------------------------------------------------ writer */

struct ember_batch_writer {
    ember_handle_msg head;   /* first: ember_errmsg's, over msg               */
    char msg[EMBER_THREAD_MSG_SIZE];
    char *path;
    safe_out out;
    FILE *f;                 /* NULL once closed or abandoned                 */
    int32_t num_tables, num_features;
    int64_t *table_rows;
    int32_t *feature_table;
    int64_t num_batches;
    int failed;              /* a write failed: the file is abandoned        */
    XXH64_state_t *hash;
    unsigned char *scratch;  /* big-endian hosts: converted array chunks      */
};

/* Writes n bytes and feeds them to the running record hash. */
static int w_emit(ember_batch_writer *w, const void *p, size_t n, const char *what)
{
    if (n == 0)
        return EMBER_OK;
    if (fwrite(p, 1, n, w->f) != n) {
        ember_data_set_error("batch file '%s': batch %lld: writing %s: %s", w->path,
                             (long long)w->num_batches, what, strerror(errno));
        w->failed = 1;
        return EMBER_EIO;
    }
    XXH64_update(w->hash, p, n);
    return EMBER_OK;
}

/* Writes n elements of size sz in file byte order. */
static int w_emit_array(ember_batch_writer *w, const void *p, size_t n, size_t sz,
                        const char *what)
{
#if BF_BIG_ENDIAN
    enum { CHUNK = 4096 };
    const unsigned char *c = p;
    while (n > 0) {
        size_t k = n < CHUNK ? n : CHUNK;
        memcpy(w->scratch, c, k * sz);
        swap_elems(w->scratch, k, sz);
        int rc = w_emit(w, w->scratch, k * sz, what);
        if (rc)
            return rc;
        c += k * sz;
        n -= k;
    }
    return EMBER_OK;
#else
    return w_emit(w, p, n * sz, what);
#endif
}

static int w_emit_hash(ember_batch_writer *w, const char *what)
{
    unsigned char b[8];
    put_u64(b, XXH64_digest(w->hash));
    if (fwrite(b, 1, 8, w->f) != 8) {
        ember_data_set_error("batch file '%s': batch %lld: writing %s: %s", w->path,
                             (long long)w->num_batches, what, strerror(errno));
        w->failed = 1;
        return EMBER_EIO;
    }
    return EMBER_OK;
}

static char *str_dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int ember_batch_writer_create(const char *path, const ember_batch_file_info *info,
                              ember_batch_writer **out)
{
    int rc = EMBER_OK;
    ember_batch_writer *w = NULL;
    if (out)
        *out = NULL;
    if (!path || !info || !out) {
        ember_data_set_error("ember_batch_writer_create: path, info and out must not be NULL");
        return EMBER_EINVAL;
    }
    if (info->num_tables < 1 || info->num_features < 1 || !info->table_rows ||
        !info->feature_table) {
        ember_data_set_error("batch file '%s': info: need num_tables >= 1 and num_features >= 1 "
                             "with their arrays (got %d tables, %d features)",
                             path, (int)info->num_tables, (int)info->num_features);
        return EMBER_EINVAL;
    }
    for (int32_t t = 0; t < info->num_tables; t++)
        if (info->table_rows[t] < 1) {
            ember_data_set_error("batch file '%s': info: table_rows[%d] = %lld, must be >= 1",
                                 path, (int)t, (long long)info->table_rows[t]);
            return EMBER_EINVAL;
        }
    for (int32_t f = 0; f < info->num_features; f++)
        if (info->feature_table[f] < 0 || info->feature_table[f] >= info->num_tables) {
            ember_data_set_error("batch file '%s': info: feature_table[%d] = %d, not a table "
                                 "(0..%d)",
                                 path, (int)f, (int)info->feature_table[f],
                                 (int)info->num_tables - 1);
            return EMBER_EINVAL;
        }

    w = calloc(1, sizeof *w);
    if (!w)
        goto nomem;
    ember_handle_begin(&w->head, w->msg, sizeof w->msg);
    w->out = (safe_out)SAFE_OUT_INIT;
    w->num_tables = info->num_tables;
    w->num_features = info->num_features;
    w->path = str_dup(path);
    w->table_rows = malloc((size_t)info->num_tables * sizeof *w->table_rows);
    w->feature_table = malloc((size_t)info->num_features * sizeof *w->feature_table);
    w->hash = XXH64_createState();
    w->scratch = malloc(4096 * 8);
    if (!w->path || !w->table_rows || !w->feature_table || !w->hash ||
        !w->scratch)
        goto nomem;
    memcpy(w->table_rows, info->table_rows, (size_t)info->num_tables * sizeof *w->table_rows);
    memcpy(w->feature_table, info->feature_table,
           (size_t)info->num_features * sizeof *w->feature_table);

    char why[600] = "out of memory";
    if (safe_out_open_path(&w->out, path, 0, why, sizeof why) != EMBER_OK || !(w->f = safe_out_stdio(&w->out))) {
        ember_data_set_error("batch file '%s': cannot create: %s", path, why);
        rc = EMBER_EIO;
        goto fail;
    }

    unsigned char fixed[BF_HEADER_FIXED];
    memcpy(fixed, BF_MAGIC, BF_MAGIC_LEN);
    put_u32(fixed + 8, BF_VERSION);
    put_u32(fixed + 12, 0);
    put_u32(fixed + 16, (uint32_t)w->num_tables);
    put_u32(fixed + 20, (uint32_t)w->num_features);
    XXH64_reset(w->hash, 0);
    if ((rc = w_emit(w, fixed, sizeof fixed, "header")) ||
        (rc = w_emit_array(w, w->table_rows, (size_t)w->num_tables, 8, "header table_rows")) ||
        (rc = w_emit_array(w, w->feature_table, (size_t)w->num_features, 4,
                           "header feature_table")) ||
        (rc = w_emit_hash(w, "header checksum")))
        goto fail;
    *out = w;
    return EMBER_OK;

nomem:
    ember_data_set_error("batch file '%s': out of memory creating the writer", path);
    rc = EMBER_ENOMEM;
fail:
    ember_batch_writer_destroy(w);
    return rc;
}

/* The batch must be one the reader would accept: EMBER_EINPUT otherwise. */
static int w_check_batch(const ember_batch_writer *w, const ember_batch *b)
{
    long long n = (long long)w->num_batches;
    if (b->num_features != w->num_features) {
        ember_data_set_error("batch file '%s': batch %lld: num_features %d, the file has %d",
                             w->path, n, (int)b->num_features, (int)w->num_features);
        return EMBER_EINPUT;
    }
    if (b->batch_size < 0 || b->num_ids < 0) {
        ember_data_set_error("batch file '%s': batch %lld: negative batch_size %d or num_ids %lld",
                             w->path, n, (int)b->batch_size, (long long)b->num_ids);
        return EMBER_EINPUT;
    }
    int64_t nbags = (int64_t)b->num_features * b->batch_size;
    if ((nbags > 0 && !b->lengths) || (b->num_ids > 0 && !b->ids)) {
        ember_data_set_error("batch file '%s': batch %lld: lengths or ids is NULL", w->path, n);
        return EMBER_EINPUT;
    }
    int64_t off = 0;
    for (int32_t f = 0; f < b->num_features; f++) {
        int64_t rows = w->table_rows[w->feature_table[f]];
        for (int32_t s = 0; s < b->batch_size; s++) {
            int32_t len = b->lengths[(int64_t)f * b->batch_size + s];
            if (len < 0 || off + len > b->num_ids) {
                ember_data_set_error("batch file '%s': batch %lld: lengths[feature %d, sample "
                                     "%d] = %d (negative, or past num_ids %lld)",
                                     w->path, n, (int)f, (int)s, (int)len,
                                     (long long)b->num_ids);
                return EMBER_EINPUT;
            }
            for (int64_t i = off; i < off + len; i++)
                if (b->ids[i] < 0 || b->ids[i] >= rows) {
                    ember_data_set_error("batch file '%s': batch %lld: feature %d, sample %d: "
                                         "id %lld outside [0, %lld)",
                                         w->path, n, (int)f, (int)s, (long long)b->ids[i],
                                         (long long)rows);
                    return EMBER_EINPUT;
                }
            off += len;
        }
    }
    if (off != b->num_ids) {
        ember_data_set_error("batch file '%s': batch %lld: lengths sum to %lld, num_ids is %lld",
                             w->path, n, (long long)off, (long long)b->num_ids);
        return EMBER_EINPUT;
    }
    return EMBER_OK;
}

static int writer_append(ember_batch_writer *w, const ember_batch *batch)
{
    if (!w || !batch) {
        ember_data_set_error("ember_batch_writer_append: writer and batch must not be NULL");
        return EMBER_EINVAL;
    }
    if (!w->f || w->failed) {
        ember_data_set_error("batch file '%s': the writer is closed or an earlier write failed",
                             w->path);
        return w->failed ? EMBER_EIO : EMBER_EINVAL;
    }
    int rc = w_check_batch(w, batch);
    if (rc)
        return rc;
    int weighted = batch->weights != NULL;
    unsigned char fixed[BF_RECORD_FIXED];
    put_u32(fixed, BF_REC_BATCH);
    put_u32(fixed + 4, (uint32_t)batch->batch_size);
    put_u64(fixed + 8, (uint64_t)batch->num_ids);
    put_u32(fixed + 16, weighted ? BF_FLAG_WEIGHTS : 0u);
    size_t nbags = (size_t)batch->num_features * (size_t)batch->batch_size;
    XXH64_reset(w->hash, 0);
    if ((rc = w_emit(w, fixed, sizeof fixed, "record counts")) ||
        (rc = w_emit_array(w, batch->lengths, nbags, 4, "lengths")) ||
        (rc = w_emit_array(w, batch->ids, (size_t)batch->num_ids, 8, "ids")) ||
        (weighted &&
         (rc = w_emit_array(w, batch->weights, (size_t)batch->num_ids, 4, "weights"))) ||
        (rc = w_emit_hash(w, "record checksum")))
        return rc;
    w->num_batches++;
    return EMBER_OK;
}

static int writer_close(ember_batch_writer *w)
{
    int rc = EMBER_OK;
    if (!w) {
        ember_data_set_error("ember_batch_writer_close: writer must not be NULL");
        return EMBER_EINVAL;
    }
    if (!w->f) {
        ember_data_set_error("batch file '%s': the writer is already closed", w->path);
        return EMBER_EINVAL;
    }
    if (w->failed) {
        ember_data_set_error("batch file '%s': an earlier write failed; nothing was written",
                             w->path);
        rc = EMBER_EIO;
        goto fail;
    }
    unsigned char end[BF_END_SIZE - 8];
    put_u32(end, BF_REC_END);
    put_u64(end + 4, (uint64_t)w->num_batches);
    XXH64_reset(w->hash, 0);
    if ((rc = w_emit(w, end, sizeof end, "end record")) ||
        (rc = w_emit_hash(w, "end record checksum")))
        goto fail;
    w->f = NULL; /* the output's own stream: the commit flushes, checks and closes it */
    char why[600];
    if (safe_out_commit(&w->out, why, sizeof why) != EMBER_OK) {
        ember_data_set_error("batch file '%s': %s", w->path, why);
        return EMBER_EIO;
    }
    return EMBER_OK;

fail:
    w->f = NULL;
    safe_out_abort(&w->out); /* nothing left */
    return rc;
}

/* The public calls keep a failure's message on the writer too. */
int ember_batch_writer_append(ember_batch_writer *w, const ember_batch *batch)
{
    return ember_handle_keep(w ? &w->head : NULL, writer_append(w, batch));
}

int ember_batch_writer_close(ember_batch_writer *w)
{
    return ember_handle_keep(w ? &w->head : NULL, writer_close(w));
}

void ember_batch_writer_destroy(ember_batch_writer *w)
{
    if (!w)
        return;
    safe_out_abort(&w->out); /* never closed: nothing left */
    free(w->path);
    free(w->table_rows);
    free(w->feature_table);
    if (w->hash)
        XXH64_freeState(w->hash);
    free(w->scratch);
    ember_handle_end(&w->head);
    free(w);
}

/* ------------------------------------------------------------ reader */

struct ember_batch_reader {
    ember_handle_msg head; /* first: ember_errmsg's, over msg                 */
    char msg[EMBER_THREAD_MSG_SIZE];
    char *path;
    FILE *f;
    int64_t size;          /* bytes in the file                              */
    int64_t pos;           /* bytes consumed                                 */
    int64_t batch_index;   /* index of the next record                       */
    int done;              /* end record read                                */
    int status;            /* < 0: an earlier failure, repeated              */
    char errmsg[512];      /* its message, repeated with it                  */
    ember_batch_file_info info;
    int64_t *table_rows;
    int32_t *feature_table;
    XXH64_state_t *hash;
    int32_t *lengths;      /* grow-only buffers behind the returned batch    */
    int64_t *ids;
    float *weights;
    size_t cap_lengths, cap_ids, cap_weights;
};

/* Reads exactly n bytes at the current position; fails with EFORMAT on a
 * short file and EIO on a read error.  where: "header" or "batch N". */
static int r_read(ember_batch_reader *r, void *p, size_t n, const char *where, const char *field)
{
    if (n == 0)
        return EMBER_OK;
    size_t got = fread(p, 1, n, r->f);
    if (got != n) {
        if (ferror(r->f)) {
            ember_data_set_error("batch file '%s': %s: reading %s at byte %lld: %s", r->path,
                                 where, field, (long long)r->pos, strerror(errno));
            return EMBER_EIO;
        }
        ember_data_set_error("batch file '%s': %s: file ends at byte %lld inside %s "
                             "(truncated)",
                             r->path, where, (long long)(r->pos + (int64_t)got), field);
        return EMBER_EFORMAT;
    }
    r->pos += (int64_t)n;
    return EMBER_OK;
}

/* Reads the stored checksum and compares it with the running hash. */
static int r_check_hash(ember_batch_reader *r, const char *where)
{
    unsigned char b[8];
    uint64_t want = XXH64_digest(r->hash);
    int rc = r_read(r, b, 8, where, "checksum");
    if (rc)
        return rc;
    uint64_t got = get_u64(b);
    if (got != want) {
        ember_data_set_error("batch file '%s': %s: checksum mismatch (stored %016llx, "
                             "computed %016llx): the data is corrupt",
                             r->path, where, (unsigned long long)got, (unsigned long long)want);
        return EMBER_EFORMAT;
    }
    return EMBER_OK;
}

/* Reads n elements of size sz into p, hashing the file bytes, then converts
 * them to host order. */
static int r_read_array(ember_batch_reader *r, void *p, size_t n, size_t sz, const char *where,
                        const char *field)
{
    int rc = r_read(r, p, n * sz, where, field);
    if (rc)
        return rc;
    XXH64_update(r->hash, p, n * sz);
    swap_elems(p, n, sz);
    return EMBER_OK;
}

static int grow(void **p, size_t *cap, size_t want, size_t sz)
{
    if (want <= *cap && *p)
        return 0;
    size_t n = want > 0 ? want : 1;
    void *q = realloc(*p, n * sz);
    if (!q)
        return EMBER_ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

static int r_header(ember_batch_reader *r)
{
    int rc;
    const char *where = "header";
    unsigned char fixed[BF_HEADER_FIXED];
    if (r->size < BF_MAGIC_LEN) {
        ember_data_set_error("batch file '%s': header: file is %lld bytes, too short for the "
                             "magic (not a batch file)",
                             r->path, (long long)r->size);
        return EMBER_EFORMAT;
    }
    if ((rc = r_read(r, fixed, BF_MAGIC_LEN, where, "magic")))
        return rc;
    if (memcmp(fixed, BF_MAGIC, BF_MAGIC_LEN) != 0) {
        ember_data_set_error("batch file '%s': header: bad magic (not a batch file; expected "
                             "\"%s\")",
                             r->path, BF_MAGIC);
        return EMBER_EFORMAT;
    }
    if ((rc = r_read(r, fixed + BF_MAGIC_LEN, BF_HEADER_FIXED - BF_MAGIC_LEN, where,
                     "version and counts")))
        return rc;
    uint32_t version = get_u32(fixed + 8), flags = get_u32(fixed + 12);
    int32_t nt = (int32_t)get_u32(fixed + 16), nf = (int32_t)get_u32(fixed + 20);
    if (version != BF_VERSION) {
        ember_data_set_error("batch file '%s': header: version %u, this reader reads version %u",
                             r->path, version, BF_VERSION);
        return EMBER_EFORMAT;
    }
    if (flags != 0) {
        ember_data_set_error("batch file '%s': header: flags 0x%08x, must be 0 in version %u",
                             r->path, flags, BF_VERSION);
        return EMBER_EFORMAT;
    }
    int64_t left = r->size - r->pos;
    if (nt < 1 || (int64_t)nt * 8 > left) {
        ember_data_set_error("batch file '%s': header: num_tables = %d, need 1 and at most the "
                             "%lld bytes left / 8 (corrupt count or truncated file)",
                             r->path, (int)nt, (long long)left);
        return EMBER_EFORMAT;
    }
    left -= (int64_t)nt * 8;
    if (nf < 1 || (int64_t)nf * 4 > left) {
        ember_data_set_error("batch file '%s': header: num_features = %d, need 1 and at most "
                             "the %lld bytes left / 4 (corrupt count or truncated file)",
                             r->path, (int)nf, (long long)left);
        return EMBER_EFORMAT;
    }
    r->table_rows = malloc((size_t)nt * sizeof *r->table_rows);
    r->feature_table = malloc((size_t)nf * sizeof *r->feature_table);
    if (!r->table_rows || !r->feature_table) {
        ember_data_set_error("batch file '%s': header: out of memory", r->path);
        return EMBER_ENOMEM;
    }
    XXH64_reset(r->hash, 0);
    XXH64_update(r->hash, fixed, sizeof fixed);
    if ((rc = r_read_array(r, r->table_rows, (size_t)nt, 8, where, "table_rows")) ||
        (rc = r_read_array(r, r->feature_table, (size_t)nf, 4, where, "feature_table")) ||
        (rc = r_check_hash(r, where)))
        return rc;
    for (int32_t t = 0; t < nt; t++)
        if (r->table_rows[t] < 1) {
            ember_data_set_error("batch file '%s': header: table_rows[%d] = %lld, must be >= 1",
                                 r->path, (int)t, (long long)r->table_rows[t]);
            return EMBER_EFORMAT;
        }
    for (int32_t f = 0; f < nf; f++)
        if (r->feature_table[f] < 0 || r->feature_table[f] >= nt) {
            ember_data_set_error("batch file '%s': header: feature_table[%d] = %d, not a table "
                                 "(0..%d)",
                                 r->path, (int)f, (int)r->feature_table[f], (int)nt - 1);
            return EMBER_EFORMAT;
        }
    r->info.num_tables = nt;
    r->info.table_rows = r->table_rows;
    r->info.num_features = nf;
    r->info.feature_table = r->feature_table;
    return EMBER_OK;
}

int ember_batch_reader_open(const char *path, ember_batch_reader **out)
{
    int rc;
    ember_batch_reader *r = NULL;
    if (out)
        *out = NULL;
    if (!path || !out) {
        ember_data_set_error("ember_batch_reader_open: path and out must not be NULL");
        return EMBER_EINVAL;
    }
    r = calloc(1, sizeof *r);
    if (r)
        ember_handle_begin(&r->head, r->msg, sizeof r->msg);
    if (!r || !(r->path = str_dup(path)) || !(r->hash = XXH64_createState())) {
        ember_data_set_error("batch file '%s': out of memory opening the reader", path);
        rc = EMBER_ENOMEM;
        goto fail;
    }
    r->f = fopen(path, "rb");
    if (!r->f) {
        ember_data_set_error("batch file '%s': cannot open: %s", path, strerror(errno));
        rc = EMBER_EIO;
        goto fail;
    }
    struct stat st;
    if (fstat(fileno(r->f), &st) != 0 || !S_ISREG(st.st_mode)) {
        ember_data_set_error("batch file '%s': not a regular file", path);
        rc = EMBER_EIO;
        goto fail;
    }
    r->size = (int64_t)st.st_size;
    if ((rc = r_header(r)))
        goto fail;
    *out = r;
    return EMBER_OK;

fail:
    ember_batch_reader_destroy(r);
    return rc;
}

const ember_batch_file_info *ember_batch_reader_info(const ember_batch_reader *r)
{
    return r ? &r->info : NULL;
}

/* The end record: count and checksum, and nothing after it. */
static int r_end(ember_batch_reader *r, const unsigned char *marker, const char *where)
{
    unsigned char b[8];
    int rc = r_read(r, b, 8, where, "end record num_batches");
    if (rc)
        return rc;
    XXH64_reset(r->hash, 0);
    XXH64_update(r->hash, marker, 4);
    XXH64_update(r->hash, b, 8);
    if ((rc = r_check_hash(r, where)))
        return rc;
    int64_t n = (int64_t)get_u64(b);
    if (n != r->batch_index) {
        ember_data_set_error("batch file '%s': end record: num_batches = %lld but %lld batch "
                             "records precede it",
                             r->path, (long long)n, (long long)r->batch_index);
        return EMBER_EFORMAT;
    }
    if (r->pos != r->size) {
        ember_data_set_error("batch file '%s': end record: %lld stray bytes after it",
                             r->path, (long long)(r->size - r->pos));
        return EMBER_EFORMAT;
    }
    r->done = 1;
    return 0;
}

/* Reads and checks one record; 1 with *batch filled, 0 at the end, < 0. */
static int r_next(ember_batch_reader *r, ember_batch *batch)
{
    int rc;
    char where[64];
    snprintf(where, sizeof where, "batch %lld (byte %lld)", (long long)r->batch_index,
             (long long)r->pos);
    unsigned char fixed[BF_RECORD_FIXED];
    if (r->size - r->pos < 4) {
        ember_data_set_error("batch file '%s': %s: file ends without the end record "
                             "(truncated)",
                             r->path, where);
        return EMBER_EFORMAT;
    }
    if ((rc = r_read(r, fixed, 4, where, "record marker")))
        return rc;
    uint32_t marker = get_u32(fixed);
    if (marker == BF_REC_END) {
        snprintf(where, sizeof where, "end record (byte %lld)", (long long)(r->pos - 4));
        return r_end(r, fixed, where);
    }
    if (marker != BF_REC_BATCH) {
        ember_data_set_error("batch file '%s': %s: record marker 0x%08x is neither a batch nor "
                             "the end record",
                             r->path, where, marker);
        return EMBER_EFORMAT;
    }
    if ((rc = r_read(r, fixed + 4, BF_RECORD_FIXED - 4, where, "record counts")))
        return rc;
    int32_t bsz = (int32_t)get_u32(fixed + 4);
    int64_t nids = (int64_t)get_u64(fixed + 8);
    uint32_t flags = get_u32(fixed + 16);
    int32_t nf = r->info.num_features;
    if (flags & ~BF_FLAG_WEIGHTS) {
        ember_data_set_error("batch file '%s': %s: flags 0x%08x has unknown bits", r->path,
                             where, flags);
        return EMBER_EFORMAT;
    }
    int weighted = (flags & BF_FLAG_WEIGHTS) != 0;
    /* every count against the bytes that are left, before allocating */
    int64_t left = r->size - r->pos - 8 /* checksum */;
    if (bsz < 0 || (int64_t)bsz * nf > left / 4) {
        ember_data_set_error("batch file '%s': %s: batch_size = %d needs %lld bytes of lengths, "
                             "%lld are left (corrupt count or truncated file)",
                             r->path, where, (int)bsz, (long long)bsz * nf * 4,
                             (long long)left);
        return EMBER_EFORMAT;
    }
    int64_t nbags = (int64_t)bsz * nf;
    left -= nbags * 4;
    if (nids < 0 || nids > left / (weighted ? 12 : 8)) {
        ember_data_set_error("batch file '%s': %s: num_ids = %lld needs more than the %lld bytes "
                             "left (corrupt count or truncated file)",
                             r->path, where, (long long)nids, (long long)left);
        return EMBER_EFORMAT;
    }
    if (grow((void **)&r->lengths, &r->cap_lengths, (size_t)nbags, 4) ||
        grow((void **)&r->ids, &r->cap_ids, (size_t)nids, 8) ||
        (weighted && grow((void **)&r->weights, &r->cap_weights, (size_t)nids, 4))) {
        ember_data_set_error("batch file '%s': %s: out of memory", r->path, where);
        return EMBER_ENOMEM;
    }
    XXH64_reset(r->hash, 0);
    XXH64_update(r->hash, fixed, sizeof fixed);
    if ((rc = r_read_array(r, r->lengths, (size_t)nbags, 4, where, "lengths")) ||
        (rc = r_read_array(r, r->ids, (size_t)nids, 8, where, "ids")) ||
        (weighted && (rc = r_read_array(r, r->weights, (size_t)nids, 4, where, "weights"))) ||
        (rc = r_check_hash(r, where)))
        return rc;

    /* the checksum held: now the contents must make sense */
    int64_t off = 0;
    for (int32_t f = 0; f < nf; f++) {
        int64_t rows = r->table_rows[r->feature_table[f]];
        for (int32_t s = 0; s < bsz; s++) {
            int32_t len = r->lengths[(int64_t)f * bsz + s];
            if (len < 0 || off + len > nids) {
                ember_data_set_error("batch file '%s': %s: lengths[feature %d, sample %d] = %d "
                                     "(negative, or past num_ids %lld)",
                                     r->path, where, (int)f, (int)s, (int)len,
                                     (long long)nids);
                return EMBER_EFORMAT;
            }
            for (int64_t i = off; i < off + len; i++)
                if (r->ids[i] < 0 || r->ids[i] >= rows) {
                    ember_data_set_error("batch file '%s': %s: ids[%lld] (feature %d, sample "
                                         "%d) = %lld, outside the table's [0, %lld)",
                                         r->path, where, (long long)i, (int)f, (int)s,
                                         (long long)r->ids[i], (long long)rows);
                    return EMBER_EFORMAT;
                }
            off += len;
        }
    }
    if (off != nids) {
        ember_data_set_error("batch file '%s': %s: lengths sum to %lld, num_ids is %lld",
                             r->path, where, (long long)off, (long long)nids);
        return EMBER_EFORMAT;
    }
    batch->batch_size = bsz;
    batch->num_features = nf;
    batch->lengths = r->lengths;
    batch->ids = r->ids;
    batch->weights = weighted ? r->weights : NULL;
    batch->num_ids = nids;
    r->batch_index++;
    return 1;
}

int ember_batch_reader_next(ember_batch_reader *r, ember_batch *batch)
{
    if (!r || !batch) {
        ember_data_set_error("ember_batch_reader_next: reader and batch must not be NULL");
        return EMBER_EINVAL;
    }
    if (r->status < 0) { /* a broken file stays broken, with the same story */
        ember_data_set_error("%s", r->errmsg);
        return ember_handle_keep(&r->head, r->status);
    }
    if (r->done)
        return 0;
    int rc = r_next(r, batch);
    if (rc < 0) {
        r->status = rc;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", ember_errmsg(NULL));
    }
    return ember_handle_keep(&r->head, rc);
}

void ember_batch_reader_destroy(ember_batch_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    if (r->hash)
        XXH64_freeState(r->hash);
    free(r->path);
    free(r->table_rows);
    free(r->feature_table);
    free(r->lengths);
    free(r->ids);
    free(r->weights);
    ember_handle_end(&r->head);
    free(r);
}

