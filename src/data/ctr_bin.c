/*
 * ctr_bin.c: ember's binary CTR format (docs/ctr-format.md): the reader
 * behind ctr_source_binary and the writer behind ctr_convert_tsv.
 *
 * A file is a header (shape, rows and names of the sparse features, sample
 * count, XXH64), blocks of up to block_samples samples stored sample-major
 * (labels, dense floats, bag lengths, ids, XXH64 of the block), and an index
 * of the blocks' byte offsets (XXH64) at the end.  Little-endian, no
 * padding.
 *
 * Design choices.  The reader maps the file (mmap) and checks the header and
 * index at open, against the file's size before anything is believed; a
 * block is checked (checksum, lengths, labels, ids < rows) when this rank
 * first enters it, so a rank reads and verifies only its own share, rank r
 * of W taking samples [r*N/W, (r+1)*N/W).  Fixed-count blocks make the
 * share's first block a division, and the index its offset.  The writer
 * writes path.tmp, fsyncs it, renames it over path and fsyncs the folder.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "data/ctr_impl.h"
#include "data/data_io.h"

#define CB_MAGIC "EMBERCTR"
#define CB_VERSION 1u
#define CB_MARKER 0x4B4C4243u         /* "CBLK" as little-endian bytes */
#define CB_HEADER_FIXED 56
#define CB_BLOCK_FIXED 16             /* marker, n, num_ids            */
#define CB_MAX_DENSE 4096
#define CB_MAX_ROWS (INT64_C(1) << 32)
#define CB_BLOCK_SAMPLES 4096         /* what ctr_convert_tsv writes   */

static inline int64_t cb_header_size(int64_t S)
{
    return CB_HEADER_FIXED + 40 * S + 8;
}

/* Bytes of a block of n samples holding m ids. */
static inline int64_t cb_block_size(int64_t n, int64_t m, int64_t D, int64_t S)
{
    return CB_BLOCK_FIXED + n + 4 * n * D + 2 * n * S + 4 * m + 8;
}

/* ------------------------------------------------------------ reader */

typedef struct bin_impl {
    char *path;
    const unsigned char *map;
    int64_t size;
    int32_t D, S;
    int64_t N, K, nblocks;
    const unsigned char *index;  /* u64 offsets [nblocks]                  */
    int64_t begin, end, cur;     /* this rank's samples, the next one      */
    int64_t block;               /* the block cur lies in, verified; -1 none */
    const unsigned char *lab, *dense, *len, *ids; /* its columns           */
    int64_t ids_pos;             /* ids of samples before cur in the block */
} bin_impl;

static int64_t block_offset(const bin_impl *m, int64_t b)
{
    return (int64_t)get_u64(m->index + 8 * b);
}

/* Checks block b entirely and points the column pointers into it. */
static int bin_load_block(ctr_source *s, bin_impl *m, int64_t b, char *err, size_t errlen)
{
    const int64_t D = m->D, S = m->S;
    int64_t off = block_offset(m, b);
    int64_t stop = b + 1 < m->nblocks ? block_offset(m, b + 1) : (int64_t)(m->index - m->map);
    int64_t want_n = b + 1 < m->nblocks ? m->K : m->N - b * m->K;
    const unsigned char *p = m->map + off;
    if (stop - off < CB_BLOCK_FIXED + 8)
        return ctr_fail(err, errlen, "%s: block %lld (byte %lld): %lld bytes, too short for a block", m->path,
                        (long long)b, (long long)off, (long long)(stop - off));
    if (get_u32(p) != CB_MARKER)
        return ctr_fail(err, errlen, "%s: block %lld (byte %lld): bad block marker 0x%08x", m->path, (long long)b,
                        (long long)off, get_u32(p));
    int64_t n = get_u32(p + 4);
    uint64_t nids = get_u64(p + 8);
    if (n != want_n)
        return ctr_fail(err, errlen, "%s: block %lld (byte %lld): %lld samples, the header says %lld", m->path,
                        (long long)b, (long long)off, (long long)n, (long long)want_n);
    if (nids > (uint64_t)(stop - off) / 4 || cb_block_size(n, (int64_t)nids, D, S) != stop - off)
        return ctr_fail(err, errlen,
                        "%s: block %lld (byte %lld): %lld samples with %llu ids do not fill its %lld bytes "
                        "(corrupt count or truncated file)",
                        m->path, (long long)b, (long long)off, (long long)n, (unsigned long long)nids,
                        (long long)(stop - off));
    int64_t body = stop - off - 8;
    uint64_t want = XXH64(p, (size_t)body, 0), got = get_u64(p + body);
    if (want != got)
        return ctr_fail(err, errlen,
                        "%s: block %lld (byte %lld): checksum mismatch (stored %016llx, computed %016llx): the "
                        "data is corrupt",
                        m->path, (long long)b, (long long)off, (unsigned long long)got, (unsigned long long)want);
    const unsigned char *lab = p + CB_BLOCK_FIXED, *dense = lab + n, *len = dense + 4 * n * D,
                        *ids = len + 2 * n * S;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t sample = b * m->K + i;
        if (lab[i] > 1)
            return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): label %u is not 0 or 1", m->path,
                            (long long)sample, (long long)b, (long long)(lab + i - m->map), lab[i]);
        for (int64_t f = 0; f < S; f++) {
            int64_t l = get_u16(len + 2 * (i * S + f));
            if (k + l > (int64_t)nids)
                return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): bag lengths exceed the "
                                "block's %llu ids", m->path, (long long)sample, (long long)b,
                                (long long)(len + 2 * (i * S + f) - m->map), (unsigned long long)nids);
            for (int64_t j = k; j < k + l; j++) {
                uint32_t id = get_u32(ids + 4 * j);
                if ((int64_t)id >= s->schema.rows[f])
                    return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): %s id %u outside "
                                    "[0, %lld)", m->path, (long long)sample, (long long)b,
                                    (long long)(ids + 4 * j - m->map), s->schema.names[f], id,
                                    (long long)s->schema.rows[f]);
            }
            k += l;
        }
    }
    if (k != (int64_t)nids)
        return ctr_fail(err, errlen, "%s: block %lld (byte %lld): bag lengths sum to %lld, the block has %llu ids",
                        m->path, (long long)b, (long long)off, (long long)k, (unsigned long long)nids);
    m->block = b;
    m->lab = lab;
    m->dense = dense;
    m->len = len;
    m->ids = ids;
    m->ids_pos = 0;
    return 0;
}

/* Enters the block of sample m->cur (checking it) and finds its ids. */
static int bin_seek(ctr_source *s, bin_impl *m, char *err, size_t errlen)
{
    int64_t b = m->cur / m->K;
    if (b == m->block)
        return 0;
    if (bin_load_block(s, m, b, err, errlen))
        return -1;
    for (int64_t i = 0; i < m->cur - b * m->K; i++)
        for (int64_t f = 0; f < m->S; f++)
            m->ids_pos += get_u16(m->len + 2 * (i * m->S + f));
    return 0;
}

static int64_t bin_next(ctr_source *s, int32_t max, char *err, size_t errlen)
{
    bin_impl *m = s->impl;
    const int64_t D = m->D, S = m->S;
    int64_t n = m->end - m->cur < max ? m->end - m->cur : max;
    if (n <= 0)
        return 0;
    if (ctr_buf_reserve(s, (int32_t)n, 1))
        return ctr_fail(err, errlen, "%s: out of memory for %lld samples", m->path, (long long)n);
    int64_t nids = 0;
    s->batch_first = m->cur;
    for (int64_t b = 0; b < n; b++, m->cur++) {
        if (bin_seek(s, m, err, errlen))
            return -1;
        int64_t i = m->cur - m->block * m->K;
        s->label[b] = (float)m->lab[i];
        for (int64_t j = 0; j < D; j++) {
            uint32_t bits = get_u32(m->dense + 4 * (i * D + j));
            memcpy(&s->dense[b * D + j], &bits, 4);
        }
        int64_t l = 0;
        for (int64_t f = 0; f < S; f++) {
            int32_t len = get_u16(m->len + 2 * (i * S + f));
            s->stage_len[b * S + f] = len;
            l += len;
        }
        if (ctr_buf_reserve_ids(s, nids + l, 1))
            return ctr_fail(err, errlen, "%s: out of memory", m->path);
        for (int64_t j = 0; j < l; j++)
            s->stage_ids[nids + j] = get_u32(m->ids + 4 * (m->ids_pos + j));
        m->ids_pos += l;
        nids += l;
    }
    if (ctr_buf_transpose(s, (int32_t)n, nids))
        return ctr_fail(err, errlen, "%s: out of memory for %lld ids", m->path, (long long)nids);
    return n;
}

static void bin_rewind(ctr_source *s)
{
    bin_impl *m = s->impl;
    m->cur = m->begin;
    m->block = -1;
}

static void bin_destroy(ctr_source *s)
{
    bin_impl *m = s->impl;
    if (!m)
        return;
    if (m->map)
        munmap((void *)m->map, (size_t)m->size);
    free(m->path);
    free(m);
}

static void bin_tell(const ctr_source *s, ctr_position *out)
{
    const bin_impl *m = s->impl;
    out->next = m->cur;
    out->begin = m->begin;
    out->end = m->end;
}

/* The block is entered (and checked) by the next read, as after rewind. */
static int bin_seek_to(ctr_source *s, int64_t next, char *err, size_t errlen)
{
    bin_impl *m = s->impl;
    if (next < m->begin || next > m->end)
        return ctr_fail(err, errlen, "%s: position: sample %lld is outside this rank's samples [%lld, %lld)",
                        m->path, (long long)next, (long long)m->begin, (long long)m->end);
    m->cur = next;
    m->block = -1;
    return 0;
}

static const ctr_source_ops BIN_OPS = {bin_next, bin_rewind, bin_destroy, bin_tell, bin_seek_to};

/* The header and index of docs/ctr-format.md, in the order it lists. */
static int bin_check(bin_impl *m, ctr_schema *sc, char *err, size_t errlen)
{
    const unsigned char *p = m->map;
    const char *path = m->path;
    if (m->size < CB_HEADER_FIXED || memcmp(p, CB_MAGIC, 8) != 0)
        return ctr_fail(err, errlen, "%s: byte 0: not an ember CTR file (%s)", path,
                        m->size < 8 ? "shorter than the magic" : m->size < CB_HEADER_FIXED ? "truncated header"
                                                                                             : "bad magic");
    uint32_t version = get_u32(p + 8), flags = get_u32(p + 12);
    if (version != CB_VERSION)
        return ctr_fail(err, errlen, "%s: byte 8: version %u, this reader reads version %u", path, version,
                        CB_VERSION);
    if (flags != 0)
        return ctr_fail(err, errlen, "%s: byte 12: flags 0x%08x, must be 0 in version %u", path, flags, CB_VERSION);
    uint32_t D = get_u32(p + 16), S = get_u32(p + 20);
    if (D > CB_MAX_DENSE)
        return ctr_fail(err, errlen, "%s: byte 16: num_dense = %u, at most %d", path, D, CB_MAX_DENSE);
    if (S < 1 || S > CTR_MAX_FEATURES)
        return ctr_fail(err, errlen, "%s: byte 20: num_sparse = %u, must be in [1, %d]", path, S, CTR_MAX_FEATURES);
    int64_t H = cb_header_size(S);
    if (m->size < H)
        return ctr_fail(err, errlen, "%s: the header needs %lld bytes, the file has %lld (truncated)", path,
                        (long long)H, (long long)m->size);
    uint64_t want = XXH64(p, (size_t)H - 8, 0), got = get_u64(p + H - 8);
    if (want != got)
        return ctr_fail(err, errlen,
                        "%s: byte %lld: header checksum mismatch (stored %016llx, computed %016llx): the data is "
                        "corrupt",
                        path, (long long)H - 8, (unsigned long long)got, (unsigned long long)want);
    uint64_t N = get_u64(p + 24), K = get_u32(p + 32), nb = get_u64(p + 40), ix = get_u64(p + 48);
    if (get_u32(p + 36) != 0)
        return ctr_fail(err, errlen, "%s: byte 36: reserved field is not 0", path);
    if (K < 1)
        return ctr_fail(err, errlen, "%s: byte 32: block_samples = 0, must be >= 1", path);
    if (N > (uint64_t)INT64_MAX / 2 || nb != (N + K - 1) / K)
        return ctr_fail(err, errlen, "%s: byte 40: num_blocks = %llu, %llu samples in blocks of %llu need %llu",
                        path, (unsigned long long)nb, (unsigned long long)N, (unsigned long long)K,
                        (unsigned long long)((N + K - 1) / K));
    if (ix < (uint64_t)H || ix > (uint64_t)m->size || (uint64_t)m->size - ix < 8 ||
        ((uint64_t)m->size - ix - 8) / 8 != nb || ((uint64_t)m->size - ix - 8) % 8 != 0)
        return ctr_fail(err, errlen,
                        "%s: byte 48: index at byte %llu with %llu blocks does not end the %lld-byte file "
                        "(truncated or corrupt)",
                        path, (unsigned long long)ix, (unsigned long long)nb, (long long)m->size);
    memset(sc, 0, sizeof *sc);
    sc->num_dense = (int32_t)D;
    sc->num_sparse = (int32_t)S;
    for (uint32_t f = 0; f < S; f++) {
        int64_t rows = (int64_t)get_u64(p + CB_HEADER_FIXED + 8 * f);
        const unsigned char *name = p + CB_HEADER_FIXED + 8 * S + 32 * f;
        if (rows < 1 || rows > CB_MAX_ROWS)
            return ctr_fail(err, errlen, "%s: byte %lld: rows of feature %u = %lld, must be in [1, 2^32]", path,
                            (long long)(CB_HEADER_FIXED + 8 * f), f, (long long)rows);
        if (!memchr(name, '\0', 32))
            return ctr_fail(err, errlen, "%s: byte %lld: name of feature %u is not NUL-terminated", path,
                            (long long)(name - p), f);
        sc->rows[f] = rows;
        memcpy(sc->names[f], name, 32);
    }
    m->index = p + ix;
    want = XXH64(m->index, (size_t)(8 * nb), 0);
    got = get_u64(m->index + 8 * nb);
    if (want != got)
        return ctr_fail(err, errlen,
                        "%s: byte %llu: index checksum mismatch (stored %016llx, computed %016llx): the data is "
                        "corrupt",
                        path, (unsigned long long)(ix + 8 * nb), (unsigned long long)got, (unsigned long long)want);
    int64_t prev = H;
    for (uint64_t b = 0; b < nb; b++) {
        int64_t off = (int64_t)get_u64(m->index + 8 * b);
        if (b == 0 ? off != H : off <= prev || off > (int64_t)ix)
            return ctr_fail(err, errlen, "%s: byte %llu: block %llu at byte %lld, out of order or outside the "
                            "blocks [%lld, %llu)", path, (unsigned long long)(ix + 8 * b),
                            (unsigned long long)b, (long long)off, (long long)H, (unsigned long long)ix);
        prev = off;
    }
    if (nb == 0 && ix != (uint64_t)H)
        return ctr_fail(err, errlen, "%s: byte 48: no blocks, but the index is at byte %llu, not %lld", path,
                        (unsigned long long)ix, (long long)H);
    m->D = (int32_t)D;
    m->S = (int32_t)S;
    m->N = (int64_t)N;
    m->K = (int64_t)K;
    m->nblocks = (int64_t)nb;
    return 0;
}

int ctr_source_binary(const char *path, int32_t rank, int32_t world, ctr_source **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return ctr_fail(err, errlen, "ctr_source_binary: path and out must not be NULL");
    if (ctr_check_world(path, rank, world, err, errlen))
        return -1;
    bin_impl *m = calloc(1, sizeof *m);
    ctr_schema sc;
    memset(&sc, 0, sizeof sc);
    int fd = -1;
    if (!m || !(m->path = malloc(strlen(path) + 1))) {
        free(m);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    strcpy(m->path, path);
    m->block = -1;
    struct stat st;
    fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0) {
        ctr_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    m->size = (int64_t)st.st_size;
    if (m->size < CB_HEADER_FIXED) {
        ctr_fail(err, errlen, "%s: byte 0: not an ember CTR file (%lld bytes, shorter than a header)", path,
                 (long long)m->size);
        goto fail;
    }
    void *map = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        ctr_fail(err, errlen, "%s: mmap: %s", path, strerror(errno));
        goto fail;
    }
    m->map = map;
    close(fd);
    fd = -1;
    if (bin_check(m, &sc, err, errlen))
        goto fail;
    m->begin = m->cur = ctr_share_begin(m->N, rank, world);
    m->end = ctr_share_begin(m->N, rank + 1, world);
    ctr_source *s = ctr_source_alloc(&BIN_OPS, m, &sc);
    if (!s) {
        ctr_fail(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    if (m->map)
        munmap((void *)m->map, (size_t)m->size);
    free(m->path);
    free(m);
    return -1;
}

/* ------------------------------------------------------------ writer */

/* Writes n bytes, or fails naming the file. */
static int cb_write(FILE *f, const void *p, size_t n, const char *path, char *err, size_t errlen)
{
    if (n > 0 && fwrite(p, 1, n, f) != n)
        return ctr_fail(err, errlen, "%s: write: %s", path, strerror(errno));
    return 0;
}

/* One block from a batch: feature-major bags to sample-major records. */
static int cb_write_block(FILE *f, const ctr_batch *b, unsigned char **buf, size_t *cap, const char *path,
                          char *err, size_t errlen)
{
    const int64_t n = b->batch_size, D = b->num_dense, S = b->num_sparse, m = b->sparse.num_ids;
    int64_t size = cb_block_size(n, m, D, S);
    if ((size_t)size > *cap) {
        unsigned char *q = realloc(*buf, (size_t)size);
        if (!q)
            return ctr_fail(err, errlen, "%s: out of memory for a block of %lld bytes", path, (long long)size);
        *buf = q;
        *cap = (size_t)size;
    }
    unsigned char *p = *buf;
    int64_t off[CTR_MAX_FEATURES], acc = 0;
    for (int64_t fi = 0; fi < S; fi++) {
        off[fi] = acc;
        for (int64_t i = 0; i < n; i++)
            acc += b->sparse.lengths[fi * n + i];
    }
    put_u32(p, CB_MARKER);
    put_u32(p + 4, (uint32_t)n);
    put_u64(p + 8, (uint64_t)m);
    unsigned char *lab = p + CB_BLOCK_FIXED, *dense = lab + n, *len = dense + 4 * n * D, *ids = len + 2 * n * S;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        lab[i] = b->label[i] != 0.0f;
        for (int64_t j = 0; j < D; j++) {
            uint32_t bits;
            memcpy(&bits, &b->dense[i * D + j], 4);
            put_u32(dense + 4 * (i * D + j), bits);
        }
        for (int64_t fi = 0; fi < S; fi++) {
            int32_t l = b->sparse.lengths[fi * n + i];
            if (l > 65535)
                return ctr_fail(err, errlen, "%s: sample %lld: bag of %d ids, the format holds at most 65535",
                                path, (long long)(b->first_sample + i), (int)l);
            put_u16(len + 2 * (i * S + fi), (uint16_t)l);
            for (int32_t j = 0; j < l; j++)
                put_u32(ids + 4 * k++, (uint32_t)b->sparse.ids[off[fi]++]);
        }
    }
    put_u64(p + size - 8, XXH64(p, (size_t)size - 8, 0));
    return cb_write(f, p, (size_t)size, path, err, errlen);
}

int ctr_convert_tsv(const char *tsv_path, const char *bin_path, const int64_t *rows, ctr_bad_policy policy,
                    ctr_stats *stats, char *err, size_t errlen)
{
    ctr_source *src = NULL;
    FILE *f = NULL;
    char *tmp = NULL;
    unsigned char *buf = NULL, *head = NULL;
    size_t cap = 0;
    int64_t *offs = NULL, nblocks = 0, cap_offs = 0, N = 0;
    int rc = -1;
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (!tsv_path || !bin_path || !rows)
        return ctr_fail(err, errlen, "ctr_convert_tsv: paths and rows must not be NULL");
    if (ctr_source_tsv(tsv_path, rows, policy, 0, 1, &src, err, errlen))
        return -1;
    const ctr_schema *sc = ctr_source_schema(src);
    const int64_t S = sc->num_sparse, H = cb_header_size(S);
    for (int64_t fi = 0; fi < S; fi++)
        if (sc->rows[fi] > CB_MAX_ROWS) {
            ctr_fail(err, errlen, "%s: rows of %s = %lld, the binary format holds at most 2^32", bin_path,
                     sc->names[fi], (long long)sc->rows[fi]);
            goto done;
        }
    tmp = malloc(strlen(bin_path) + 5);
    head = calloc(1, (size_t)H);
    if (!tmp || !head) {
        ctr_fail(err, errlen, "%s: out of memory", bin_path);
        goto done;
    }
    sprintf(tmp, "%s.tmp", bin_path);
    f = fopen(tmp, "wb");
    if (!f) {
        ctr_fail(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    if (cb_write(f, head, (size_t)H, tmp, err, errlen)) /* the real header comes last */
        goto done;
    int64_t pos = H;
    for (;;) {
        ctr_batch b;
        int64_t n = ctr_source_next(src, CB_BLOCK_SAMPLES, &b, err, errlen);
        if (n < 0)
            goto done;
        if (n == 0)
            break;
        if (nblocks == cap_offs) {
            int64_t *q = realloc(offs, (size_t)(cap_offs ? 2 * cap_offs : 64) * sizeof *q);
            if (!q) {
                ctr_fail(err, errlen, "%s: out of memory", bin_path);
                goto done;
            }
            offs = q;
            cap_offs = cap_offs ? 2 * cap_offs : 64;
        }
        offs[nblocks++] = pos;
        if (cb_write_block(f, &b, &buf, &cap, tmp, err, errlen))
            goto done;
        pos += cb_block_size(n, b.sparse.num_ids, sc->num_dense, S);
        N += n;
    }
    /* index, then the header with the counts and its checksum */
    XXH64_state_t *h = XXH64_createState();
    if (!h) {
        ctr_fail(err, errlen, "%s: out of memory", bin_path);
        goto done;
    }
    XXH64_reset(h, 0);
    for (int64_t b = 0; b < nblocks; b++) {
        unsigned char e[8];
        put_u64(e, (uint64_t)offs[b]);
        XXH64_update(h, e, 8);
        if (cb_write(f, e, 8, tmp, err, errlen)) {
            XXH64_freeState(h);
            goto done;
        }
    }
    unsigned char e[8];
    put_u64(e, XXH64_digest(h));
    XXH64_freeState(h);
    if (cb_write(f, e, 8, tmp, err, errlen))
        goto done;
    memcpy(head, CB_MAGIC, 8);
    put_u32(head + 8, CB_VERSION);
    put_u32(head + 12, 0);
    put_u32(head + 16, (uint32_t)sc->num_dense);
    put_u32(head + 20, (uint32_t)S);
    put_u64(head + 24, (uint64_t)N);
    put_u32(head + 32, CB_BLOCK_SAMPLES);
    put_u32(head + 36, 0);
    put_u64(head + 40, (uint64_t)nblocks);
    put_u64(head + 48, (uint64_t)pos);
    for (int64_t fi = 0; fi < S; fi++) {
        put_u64(head + CB_HEADER_FIXED + 8 * fi, (uint64_t)sc->rows[fi]);
        memcpy(head + CB_HEADER_FIXED + 8 * S + 32 * fi, sc->names[fi], 32);
    }
    put_u64(head + H - 8, XXH64(head, (size_t)H - 8, 0));
    if (fseeko(f, 0, SEEK_SET) != 0 || cb_write(f, head, (size_t)H, tmp, err, errlen))
        goto done;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        ctr_fail(err, errlen, "%s: flush/fsync: %s", tmp, strerror(errno));
        goto done;
    }
    int cr = fclose(f);
    f = NULL;
    if (cr != 0) {
        ctr_fail(err, errlen, "%s: close: %s", tmp, strerror(errno));
        goto done;
    }
    if (rename(tmp, bin_path) != 0) {
        ctr_fail(err, errlen, "%s: rename from '%s': %s", bin_path, tmp, strerror(errno));
        goto done;
    }
    if (ember_data_fsync_parent(bin_path) != 0) {
        ctr_fail(err, errlen, "%s: fsync of its folder: %s", bin_path, strerror(errno));
        rc = -1;
        goto out;
    }
    rc = 0;
    goto out;
done:
    if (f)
        fclose(f);
    if (tmp)
        unlink(tmp);
out:
    if (stats && src)
        ctr_source_stats(src, stats);
    ctr_source_destroy(src);
    free(tmp);
    free(head);
    free(buf);
    free(offs);
    return rc;
}
