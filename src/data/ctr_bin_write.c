/*
 * ctr_bin_write.c: the writer of ember's binary CTR format (ctr_bin_format.h,
 * docs/ctr-format.md), behind ctr_convert_tsv (`ember convert`).
 *
 * The TSV is read as rank 0 of 1 in batches of block_samples, each batch
 * written as one block (feature-major bags turned sample-major), then the
 * index, then the real header over the zeroed one written first.  A file
 * whose features all have rows >= 1 is written as version 1, byte for byte
 * what earlier versions of ember wrote and read; a feature with rows 0
 * (64-bit keys, for a dynamic table) makes it version 2.
 *
 * Design choice: nothing half-done.  The file is written as an output of
 * core/safe_file.h (never through a link; unnamed until complete, fsync'd,
 * named or renamed over a regular file at path, its folder fsync'd); on
 * any failure nothing is left and path is as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "core/safe_file.h"
#include "data/ctr_bin_format.h"
#include "data/data_io.h"

typedef struct cb_writer {
    FILE *f;                  /* out's stream                       */
    safe_out out;
    const char *tmp;          /* the path, for messages             */
    cb_layout lay;
    unsigned char *buf;       /* one block                          */
    size_t cap;
    int64_t *offs, nblocks, cap_offs;
    int64_t pos, N;           /* bytes and samples written so far   */
    int64_t K;                /* samples per block                  */
} cb_writer;

/* Writes n bytes, or fails naming the file. */
static int cb_write(cb_writer *w, const void *p, size_t n, char *err, size_t errlen)
{
    if (n > 0 && fwrite(p, 1, n, w->f) != n)
        return ctr_fail(err, errlen, "cannot write %s: %s", w->tmp, strerror(errno));
    return 0;
}

/* Row ids (m), keys (q) and weights (w) of a batch. */
static void count_ids(const cb_layout *l, const ctr_batch *b, int64_t *m, int64_t *q, int64_t *w)
{
    *m = *q = *w = 0;
    for (int64_t f = 0; f < l->S; f++)
        for (int64_t i = 0; i < b->batch_size; i++) {
            int64_t len = b->sparse.lengths[f * b->batch_size + i];
            *(l->keyed[f] ? q : m) += len;
            if (l->weighted[f])
                *w += len;
        }
}

/* The sample-major columns of a batch from `at` on: labels, dense, bag
 * lengths, row ids, keys.  -1 with err for a bag the format cannot hold. */
static int fill_columns(const cb_layout *l, const ctr_schema *sc, const ctr_batch *b, int64_t m, int64_t q,
                        unsigned char *at, const char *path, char *err, size_t errlen)
{
    const int64_t n = b->batch_size, D = l->D, S = l->S;
    unsigned char *lab = at, *dense = lab + n * l->label_bytes, *len = dense + 4 * n * D, *ids = len + 2 * n * S,
                  *keys = ids + 4 * m, *wts = keys + 8 * q;
    int64_t off[CTR_MAX_FEATURES], acc = 0, k = 0, kq = 0, kw = 0;
    for (int64_t f = 0; f < S; f++) {
        off[f] = acc;
        for (int64_t i = 0; i < n; i++)
            acc += b->sparse.lengths[f * n + i];
    }
    for (int64_t i = 0; i < n; i++) {
        if (l->float_label) {
            uint32_t bits;
            memcpy(&bits, &b->label[i], 4);
            put_u32(lab + 4 * i, bits);
        } else {
            lab[i] = b->label[i] != 0.0f;
        }
        for (int64_t j = 0; j < D; j++) {
            uint32_t bits;
            memcpy(&bits, &b->dense[i * D + j], 4);
            put_u32(dense + 4 * (i * D + j), bits);
        }
        for (int64_t f = 0; f < S; f++) {
            int32_t bag = b->sparse.lengths[f * n + i];
            if (bag > CB_MAX_BAG)
                return ctr_fail(err, errlen, "%s: sample %lld: %s: a bag of %d ids, the format holds at most %d",
                                path, (long long)(b->first_sample + i), sc->names[f], (int)bag, CB_MAX_BAG);
            put_u16(len + 2 * (i * S + f), (uint16_t)bag);
            for (int32_t j = 0; j < bag; j++) {
                if (l->weighted[f]) {
                    uint32_t bits;
                    memcpy(&bits, &b->sparse.weights[off[f]], 4);
                    put_u32(wts + 4 * kw++, bits);
                }
                int64_t id = b->sparse.ids[off[f]++];
                if (l->keyed[f])
                    put_u64(keys + 8 * kq++, (uint64_t)id);
                else
                    put_u32(ids + 4 * k++, (uint32_t)id);
            }
        }
    }
    return 0;
}

/* One block from a batch, its offset remembered for the index. */
static int cb_write_block(cb_writer *w, const ctr_schema *sc, const ctr_batch *b, char *err, size_t errlen)
{
    const cb_layout *l = &w->lay;
    int64_t m, q, nw;
    count_ids(l, b, &m, &q, &nw);
    int64_t size = cb_block_size(l, b->batch_size, m, q, nw);
    if ((size_t)size > w->cap) {
        unsigned char *p = realloc(w->buf, (size_t)size);
        if (!p)
            return ctr_fail(err, errlen, "%s: out of memory for a block of %lld bytes", w->tmp, (long long)size);
        w->buf = p;
        w->cap = (size_t)size;
    }
    if (w->nblocks == w->cap_offs) {
        int64_t cap = w->cap_offs ? 2 * w->cap_offs : 64, *p = realloc(w->offs, (size_t)cap * sizeof *p);
        if (!p)
            return ctr_fail(err, errlen, "%s: out of memory", w->tmp);
        w->offs = p;
        w->cap_offs = cap;
    }
    unsigned char *p = w->buf;
    put_u32(p, CB_MARKER);
    put_u32(p + 4, (uint32_t)b->batch_size);
    put_u64(p + 8, (uint64_t)m);
    if (l->version >= CB_VERSION_WEIGHTS) {
        put_u64(p + 16, (uint64_t)q);
        put_u64(p + 24, (uint64_t)nw);
        put_u64(p + 32, l->key_mask);
        put_u64(p + 40, l->weight_mask);
    } else if (l->version >= CB_VERSION_KEYS) {
        put_u64(p + 16, (uint64_t)q);
        put_u64(p + 24, l->key_mask);
    }
    if (fill_columns(l, sc, b, m, q, p + l->block_fixed, w->tmp, err, errlen))
        return EMBER_EINVAL;
    put_u64(p + size - 8, XXH64(p, (size_t)size - 8, 0));
    if (cb_write(w, p, (size_t)size, err, errlen))
        return EMBER_EINVAL;
    w->offs[w->nblocks++] = w->pos;
    w->pos += size;
    w->N += b->batch_size;
    return 0;
}

/* The block offsets and their checksum. */
static int cb_write_index(cb_writer *w, char *err, size_t errlen)
{
    unsigned char e[8];
    XXH64_state_t *h = XXH64_createState();
    if (!h)
        return ctr_fail(err, errlen, "%s: out of memory", w->tmp);
    XXH64_reset(h, 0);
    for (int64_t b = 0; b < w->nblocks; b++) {
        put_u64(e, (uint64_t)w->offs[b]);
        XXH64_update(h, e, 8);
        if (cb_write(w, e, 8, err, errlen)) {
            XXH64_freeState(h);
            return EMBER_EINVAL;
        }
    }
    put_u64(e, XXH64_digest(h));
    XXH64_freeState(h);
    return cb_write(w, e, 8, err, errlen);
}

/* The real header, over the zeroed one at the start of the file. */
static int cb_write_header(cb_writer *w, const ctr_schema *sc, char *err, size_t errlen)
{
    const int64_t S = w->lay.S, H = cb_header_size(w->lay.version, S);
    unsigned char *head = calloc(1, (size_t)H);
    if (!head)
        return ctr_fail(err, errlen, "%s: out of memory", w->tmp);
    memcpy(head, CB_MAGIC, 8);
    put_u32(head + 8, w->lay.version);
    put_u32(head + 12, w->lay.float_label ? CB_FLAG_FLOAT_LABEL : 0);
    put_u32(head + 16, (uint32_t)w->lay.D);
    put_u32(head + 20, (uint32_t)S);
    put_u64(head + 24, (uint64_t)w->N);
    put_u32(head + 32, (uint32_t)w->K);
    put_u32(head + 36, 0);
    put_u64(head + 40, (uint64_t)w->nblocks);
    put_u64(head + 48, (uint64_t)w->pos);
    for (int64_t f = 0; f < S; f++) {
        put_u64(head + CB_HEADER_FIXED + 8 * f, (uint64_t)sc->rows[f]);
        memcpy(head + CB_HEADER_FIXED + 8 * S + 32 * f, sc->names[f], 32);
    }
    if (w->lay.version >= CB_VERSION_WEIGHTS)
        put_u64(head + H - 16, w->lay.weight_mask);
    put_u64(head + H - 8, XXH64(head, (size_t)H - 8, 0));
    int rc = fseeko(w->f, 0, SEEK_SET) != 0 ? ctr_fail(err, errlen, "cannot write %s: %s", w->tmp, strerror(errno))
                                            : cb_write(w, head, (size_t)H, err, errlen);
    free(head);
    return rc;
}

/* The schema's rows as the format holds them; the least version that
 * holds the data (2: keys, 3: weights or float labels). */
static int check_rows(const ctr_schema *sc, const char *path, uint32_t *version, char *err, size_t errlen)
{
    *version = CB_VERSION_ROWS;
    for (int32_t f = 0; f < sc->num_sparse; f++) {
        if (sc->rows[f] > CB_MAX_ROWS)
            return ctr_fail(err, errlen, "%s: rows of %s = %lld, the binary format holds at most 2^32 (or 0: "
                            "64-bit keys)", path, sc->names[f], (long long)sc->rows[f]);
        if (sc->rows[f] == 0 && *version < CB_VERSION_KEYS)
            *version = CB_VERSION_KEYS;
    }
    if (sc->float_label || ctr_schema_weighted(sc))
        *version = CB_VERSION_WEIGHTS;
    return 0;
}

/* Every block of the source's next `limit` samples (INT64_MAX: all), the
 * index and the header into w (path.tmp). */
static int write_all(cb_writer *w, ctr_source *src, const ctr_schema *sc, int64_t limit, char *err,
                     size_t errlen)
{
    const int64_t H = cb_header_size(w->lay.version, sc->num_sparse);
    unsigned char zero[CB_HEADER_FIXED + 40 * CTR_MAX_FEATURES + 16] = {0};
    if (cb_write(w, zero, (size_t)H, err, errlen)) /* the real header comes last */
        return EMBER_EINVAL;
    w->pos = H;
    for (int64_t done = 0; done < limit;) {
        ctr_batch b;
        int64_t want = limit - done < w->K ? limit - done : w->K;
        int64_t n = ctr_source_next(src, (int32_t)want, &b, err, errlen);
        if (n < 0)
            return EMBER_EINVAL;
        if (n == 0)
            break;
        if (cb_write_block(w, sc, &b, err, errlen))
            return EMBER_EINVAL;
        done += n;
    }
    return cb_write_index(w, err, errlen) || cb_write_header(w, sc, err, errlen) ? -1 : 0;
}

int ctr_convert_source(ctr_source *src, const char *bin_path, ctr_stats *stats, char *err, size_t errlen)
{
    return ctr_convert_source_n(src, bin_path, INT64_MAX, stats, err, errlen);
}

int ctr_convert_source_n(ctr_source *src, const char *bin_path, int64_t max_samples, ctr_stats *stats,
                         char *err, size_t errlen)
{
    return ctr_convert_source_blocks(src, bin_path, max_samples, CB_BLOCK_SAMPLES, stats, err, errlen);
}

int ctr_convert_source_blocks(ctr_source *src, const char *bin_path, int64_t max_samples, int32_t block_samples,
                              ctr_stats *stats, char *err, size_t errlen)
{
    cb_writer w;
    memset(&w, 0, sizeof w);
    w.K = block_samples;
    w.out = (safe_out)SAFE_OUT_INIT;
    w.tmp = bin_path;
    uint32_t version;
    int rc = EMBER_EINVAL;
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (!src || !bin_path || max_samples < 0 || block_samples < 1)
        return ctr_fail(err, errlen, "ctr_convert_source: source and path must not be NULL, the limit >= 0, "
                        "block_samples >= 1");
    const ctr_schema *sc = ctr_source_schema(src);
    if (check_rows(sc, bin_path, &version, err, errlen))
        goto done;
    cb_layout_init(&w.lay, version, sc->num_dense, sc->num_sparse, sc->rows);
    if (version >= CB_VERSION_WEIGHTS) {
        uint64_t wmask = 0;
        for (int32_t f = 0; f < sc->num_sparse; f++)
            wmask |= (uint64_t)(sc->weighted[f] != 0) << f;
        cb_layout_weights(&w.lay, wmask, sc->float_label);
    }
    if (safe_out_open_path(&w.out, bin_path, 0, err, errlen) != EMBER_OK)
        goto done;
    if (!(w.f = safe_out_stdio(&w.out))) {
        ctr_fail(err, errlen, "%s: out of memory", bin_path);
        goto done;
    }
    if (write_all(&w, src, sc, max_samples, err, errlen))
        goto done;
    rc = safe_out_commit(&w.out, err, errlen) == EMBER_OK ? 0 : -1; /* names the file and the reason */
done:
    safe_out_abort(&w.out); /* after a commit: nothing */
    if (stats)
        ctr_source_stats(src, stats);
    free(w.buf);
    free(w.offs);
    return rc;
}

int ctr_convert_tsv(const char *tsv_path, const char *bin_path, const int64_t *rows, ctr_bad_policy policy,
                    ctr_stats *stats, char *err, size_t errlen)
{
    ctr_source *src = NULL;
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (!tsv_path || !bin_path || !rows)
        return ctr_fail(err, errlen, "ctr_convert_tsv: paths and rows must not be NULL");
    if (ctr_source_tsv(tsv_path, rows, policy, 0, 1, &src, err, errlen))
        return EMBER_EINVAL;
    int rc = ctr_convert_source(src, bin_path, stats, err, errlen);
    ctr_source_destroy(src);
    return rc;
}
