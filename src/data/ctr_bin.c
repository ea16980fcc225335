/*
 * ctr_bin.c: the reader of ember's binary CTR format (docs/ctr-format.md),
 * behind ctr_source_binary.  The blocks' checks are in ctr_bin_block.c, the
 * writer behind ctr_convert_tsv in ctr_bin_write.c.
 *
 * A file is a header (shape, rows and names of the sparse features, sample
 * count, XXH64), blocks of up to block_samples samples stored sample-major
 * (labels, dense floats, bag lengths, ids, XXH64 of the block), and an index
 * of the blocks' byte offsets (XXH64) at the end.  Little-endian, no
 * padding.  Version 1 holds u32 row ids; version 2 also 64-bit keys, for
 * the features whose rows is 0 (ctr_bin_format.h).  This reader reads both.
 *
 * Design choices.  The reader maps the file (mmap) and checks the header and
 * index at open, against the file's size before anything is believed; a
 * block is checked (checksum, lengths, labels, ids < rows) when this rank
 * first enters it, so a rank reads and verifies only its own share, rank r
 * of W taking samples [r*N/W, (r+1)*N/W).  Fixed-count blocks make the
 * share's first block a division, and the index its offset.  A read that
 * fails leaves the position where the last good batch left it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "data/ctr_bin_block.h"
#include "data/ctr_bin_decode.h"
#include "data/ctr_visits.h"
#include "data/data_io.h"

typedef struct bin_impl {
    char *path;
    const unsigned char *map;
    int64_t size;
    cb_layout lay;
    int64_t N, K, nblocks;
    const unsigned char *index;  /* u64 offsets [nblocks]                  */
    int64_t begin, end, cur;     /* this rank's samples, the next one      */
    cb_block blk;                /* the block cur lies in, checked; index -1: none */
    int64_t pos[3];              /* ids, keys, weights of the samples before cur in it */
    /* shuffled (ctr_source_shuffle): the epoch's order of the share's blocks */
    int shuffled;
    int32_t rank;
    ctr_visits v;
    cb_decoder dec;              /* the batch's runs, decoded in parallel  */
} bin_impl;

static int64_t block_offset(const bin_impl *m, int64_t b)
{
    return (int64_t)get_u64(m->index + 8 * b);
}

/* Enters the block of sample m->cur (checking it) and finds its ids. */
static int bin_enter(ctr_source *s, bin_impl *m, char *err, size_t errlen)
{
    int64_t b = m->cur / m->K;
    if (b == m->blk.index)
        return 0;
    int64_t off = block_offset(m, b);
    int64_t stop = b + 1 < m->nblocks ? block_offset(m, b + 1) : (int64_t)(m->index - m->map);
    int64_t n = b + 1 < m->nblocks ? m->K : m->N - b * m->K;
    if (cb_block_check(&m->lay, &s->schema, m->path, m->map, off, stop, b, b * m->K, n, &m->blk, err, errlen))
        return EMBER_EINVAL;
    cb_block_seek(&m->lay, &m->blk, m->cur - b * m->K, m->pos);
    return 0;
}

/* The batch's n samples as runs of consecutive samples of one block each
 * (entering and checking the blocks in order), then decoded by the calling
 * thread's team (ctr_bin_decode.c); -1 with err, the position moved.  A
 * run in the block read last continues where it stopped (m->pos). */
static int64_t bin_read(ctr_source *s, bin_impl *m, int64_t n, char *err, size_t errlen)
{
    cb_decoder *d = &m->dec;
    d->nruns = 0;
    for (int64_t b = 0; b < n;) {
        int64_t c = m->shuffled ? ctr_visits_item(&m->v) : m->cur, len;
        const int same = c / m->K == m->blk.index;
        m->cur = c;
        if (bin_enter(s, m, err, errlen))
            return EMBER_EINVAL;
        if (cb_decoder_add_run(d))
            return ctr_fail(err, errlen, "%s: out of memory", m->path);
        len = m->shuffled ? ctr_visits_left_in_block(&m->v) : m->blk.first + m->blk.n - c;
        len = len < n - b ? len : n - b;
        cb_run *r = &d->runs[d->nruns++];
        *r = (cb_run){m->blk, c - m->blk.first, len, {m->pos[0], m->pos[1], m->pos[2]}, same && d->nruns > 1};
        m->cur = c + len;
        if (m->shuffled)
            m->v.lpos += len;
        b += len;
    }
    if (cb_decode_runs(d, &m->lay, s, n, m->pos))
        return ctr_fail(err, errlen, "%s: out of memory for a batch of %lld samples", m->path, (long long)n);
    return n;
}

static int64_t bin_next(ctr_source *s, int32_t max, char *err, size_t errlen)
{
    bin_impl *m = s->impl;
    int64_t left = m->shuffled ? (m->end - m->begin) - m->v.lpos : m->end - m->cur;
    int64_t n = left < max ? left : max;
    if (n <= 0)
        return 0;
    if (ctr_buf_reserve(s, (int32_t)n, 0))
        return ctr_fail(err, errlen, "%s: out of memory for %lld samples", m->path, (long long)n);
    const int64_t cur = m->cur, pos[3] = {m->pos[0], m->pos[1], m->pos[2]}, lpos = m->v.lpos, j = m->v.j;
    const cb_block blk = m->blk;
    s->batch_first = m->shuffled ? m->begin + m->v.lpos : m->cur; /* shuffled: the ordinal */
    if (bin_read(s, m, n, err, errlen) < 0) { /* nothing half-done: back to after the last good batch */
        m->cur = cur;
        m->blk = blk;
        memcpy(m->pos, pos, sizeof pos);
        m->v.lpos = lpos;
        m->v.j = j;
        return EMBER_EINVAL;
    }
    return n;
}

static void bin_rewind(ctr_source *s)
{
    bin_impl *m = s->impl;
    m->cur = m->begin;
    m->blk.index = -1;
    if (m->shuffled) /* the new epoch's order (ctr.c counted it first) */
        ctr_visits_start(&m->v, s->epochs, 0);
}

static void bin_destroy(ctr_source *s)
{
    bin_impl *m = s->impl;
    if (!m)
        return;
    if (m->map)
        munmap((void *)m->map, (size_t)m->size);
    free(m->path);
    ctr_visits_free(&m->v);
    cb_decoder_free(&m->dec);
    free(m);
}

static void bin_tell(const ctr_source *s, ctr_position *out)
{
    const bin_impl *m = s->impl;
    out->next = m->shuffled ? m->begin + m->v.lpos : m->cur; /* shuffled: the ordinal in the epoch's order */
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
    m->blk.index = -1;
    if (m->shuffled) /* that epoch's order (ctr.c set it first), from that ordinal */
        ctr_visits_start(&m->v, s->epochs, next - m->begin);
    return 0;
}

static int bin_shuffle(ctr_source *s, uint64_t seed, char *err, size_t errlen)
{
    bin_impl *m = s->impl;
    if (ctr_visits_init(&m->v, seed, m->rank, m->begin, m->end, m->K, s->epochs))
        return ctr_fail(err, errlen, "%s: out of memory for the order of its blocks", m->path);
    m->shuffled = 1; /* the current epoch from its start */
    m->cur = m->begin;
    m->blk.index = -1;
    return 0;
}

static const ctr_source_ops BIN_OPS = {bin_next, bin_rewind, bin_destroy, bin_tell, bin_seek_to, bin_shuffle};

/* ------------------------------------------------------------ open */

/* Magic, version, flags, shape, the header's size and checksum. */
static int check_header(bin_impl *m, char *err, size_t errlen)
{
    const unsigned char *p = m->map;
    const char *path = m->path;
    if (m->size < CB_HEADER_FIXED || memcmp(p, CB_MAGIC, 8) != 0)
        return ctr_fail(err, errlen, "%s: byte 0: not an ember CTR file (%s)", path,
                        m->size < 8 ? "shorter than the magic" : m->size < CB_HEADER_FIXED ? "truncated header"
                                                                                             : "bad magic");
    uint32_t version = get_u32(p + 8), flags = get_u32(p + 12);
    if (version < CB_VERSION_ROWS || version > CB_VERSION_WEIGHTS)
        return ctr_fail(err, errlen, "%s: byte 8: version %u, this reader reads versions %u to %u%s", path, version,
                        CB_VERSION_ROWS, CB_VERSION_WEIGHTS,
                        version > CB_VERSION_WEIGHTS ? " (written by a newer ember: convert the text again)" : "");
    if (version < CB_VERSION_WEIGHTS ? flags != 0 : (flags & ~CB_FLAG_FLOAT_LABEL) != 0)
        return ctr_fail(err, errlen, "%s: byte 12: flags 0x%08x, must be %s in version %u", path, flags,
                        version < CB_VERSION_WEIGHTS ? "0" : "0 or 1", version);
    uint32_t D = get_u32(p + 16), S = get_u32(p + 20);
    if (D > CB_MAX_DENSE)
        return ctr_fail(err, errlen, "%s: byte 16: num_dense = %u, at most %d", path, D, CB_MAX_DENSE);
    if (S < 1 || S > CTR_MAX_FEATURES)
        return ctr_fail(err, errlen, "%s: byte 20: num_sparse = %u, must be in [1, %d]", path, S, CTR_MAX_FEATURES);
    int64_t H = cb_header_size(version, S);
    if (m->size < H)
        return ctr_fail(err, errlen, "%s: the header needs %lld bytes, the file has %lld (truncated)", path,
                        (long long)H, (long long)m->size);
    uint64_t want = XXH64(p, (size_t)H - 8, 0), got = get_u64(p + H - 8);
    if (want != got)
        return ctr_fail(err, errlen,
                        "%s: byte %lld: header checksum mismatch (stored %016llx, computed %016llx): the data is "
                        "corrupt",
                        path, (long long)H - 8, (unsigned long long)got, (unsigned long long)want);
    int64_t rows[CTR_MAX_FEATURES] = {0}; /* the features are read later: a layout of row ids for now */
    for (uint32_t f = 0; f < S; f++)
        rows[f] = 1;
    cb_layout_init(&m->lay, version, D, S, rows);
    if (version >= CB_VERSION_WEIGHTS) {
        uint64_t wmask = get_u64(p + H - 16);
        if (S < 64 && wmask >> S)
            return ctr_fail(err, errlen, "%s: byte %lld: weight mask 0x%016llx names a feature past the file's %u",
                            path, (long long)H - 16, (unsigned long long)wmask, S);
        cb_layout_weights(&m->lay, wmask, (flags & CB_FLAG_FLOAT_LABEL) != 0);
    }
    return 0;
}

/* A file shorter than its index says: the first block the file ends in,
 * found by walking the blocks' own counts from the first (blocks follow
 * each other without gaps), appended to buf as "; block ...".  Nothing
 * when a count on the way is not believable. */
static void find_cut(const bin_impl *m, int64_t H, int64_t ix, char *buf, size_t n)
{
    const cb_layout *l = &m->lay;
    char where[128];
    int64_t off = H;
    buf[0] = '\0';
    for (int64_t b = 0; b < m->nblocks; b++) {
        int64_t first = b * m->K, count = b + 1 < m->nblocks ? m->K : m->N - first, left = m->size - off;
        cb_block_where(where, sizeof where, b, off, first, count);
        if (left < l->block_fixed) {
            snprintf(buf, n, "; %s is cut short: the file ends %lld bytes into it", where, (long long)left);
            return;
        }
        const unsigned char *p = m->map + off;
        uint64_t ids = get_u64(p + 8), keys = l->version >= CB_VERSION_KEYS ? get_u64(p + 16) : 0;
        uint64_t ws = l->version >= CB_VERSION_WEIGHTS ? get_u64(p + 24) : 0;
        if (get_u32(p) != CB_MARKER || get_u32(p + 4) != count || ids > (uint64_t)ix / 8 || keys > (uint64_t)ix / 16 ||
            ws > (uint64_t)ix / 8)
            return;
        int64_t need = cb_block_size(l, count, (int64_t)ids, (int64_t)keys, (int64_t)ws);
        if (need > left) {
            snprintf(buf, n, "; %s is cut short: it needs %lld bytes, the file ends %lld bytes into it", where,
                     (long long)need, (long long)left);
            return;
        }
        off += need;
    }
    if (off == ix)
        snprintf(buf, n, "; the blocks are whole, the index at byte %lld is cut short", (long long)ix);
}

/* block_samples, num_blocks, index_offset with the index ending the file. */
static int check_counts(bin_impl *m, char *err, size_t errlen)
{
    const unsigned char *p = m->map;
    const int64_t H = cb_header_size(m->lay.version, m->lay.S);
    uint64_t N = get_u64(p + 24), K = get_u32(p + 32), nb = get_u64(p + 40), ix = get_u64(p + 48);
    if (get_u32(p + 36) != 0)
        return ctr_fail(err, errlen, "%s: byte 36: reserved field is not 0", m->path);
    if (K < 1)
        return ctr_fail(err, errlen, "%s: byte 32: block_samples = 0, must be >= 1", m->path);
    if (N > (uint64_t)INT64_MAX / 2 || nb != (N + K - 1) / K)
        return ctr_fail(err, errlen, "%s: byte 40: num_blocks = %llu, %llu samples in blocks of %llu need %llu",
                        m->path, (unsigned long long)nb, (unsigned long long)N, (unsigned long long)K,
                        (unsigned long long)((N + K - 1) / K));
    m->N = (int64_t)N;
    m->K = (int64_t)K;
    m->nblocks = (int64_t)nb;
    const uint64_t size = (uint64_t)m->size;
    if (ix < (uint64_t)H || ix > size || size - ix < 8 || (size - ix - 8) / 8 != nb || (size - ix - 8) % 8 != 0) {
        char cut[256] = "";
        if (ix >= (uint64_t)H && ix <= (uint64_t)INT64_MAX / 2 && nb <= (uint64_t)INT64_MAX / 16 &&
            size < ix + 8 * nb + 8)
            find_cut(m, H, (int64_t)ix, cut, sizeof cut);
        return ctr_fail(err, errlen,
                        "%s: byte 48: index at byte %llu with %llu blocks does not end the %lld-byte file "
                        "(truncated or corrupt)%s",
                        m->path, (unsigned long long)ix, (unsigned long long)nb, (long long)m->size, cut);
    }
    m->index = p + ix;
    return 0;
}

/* Names and rows of the sparse features into the schema: rows in [1, 2^32],
 * or 0 (64-bit keys) in version 2. */
static int check_features(bin_impl *m, ctr_schema *sc, char *err, size_t errlen)
{
    const unsigned char *p = m->map;
    const int64_t S = m->lay.S;
    memset(sc, 0, sizeof *sc);
    sc->num_dense = (int32_t)m->lay.D;
    sc->num_sparse = (int32_t)S;
    for (int64_t f = 0; f < S; f++) {
        const unsigned char *name = p + CB_HEADER_FIXED + 8 * S + 32 * f;
        int64_t at = CB_HEADER_FIXED + 8 * f, rows = (int64_t)get_u64(p + at);
        if (!memchr(name, '\0', 32))
            return ctr_fail(err, errlen, "%s: byte %lld: name of feature %lld is not NUL-terminated", m->path,
                            (long long)(name - p), (long long)f);
        memcpy(sc->names[f], name, 32);
        if (rows == 0 && m->lay.version < CB_VERSION_KEYS)
            return ctr_fail(err, errlen, "%s: byte %lld: feature %lld (%s) has rows 0 (64-bit keys), which needs "
                            "format version %u; the file says version %u", m->path, (long long)at, (long long)f,
                            sc->names[f], CB_VERSION_KEYS, m->lay.version);
        if (rows < 0 || rows > CB_MAX_ROWS)
            return ctr_fail(err, errlen, "%s: byte %lld: rows of feature %lld (%s) = %lld, must be in [1, 2^32]%s",
                            m->path, (long long)at, (long long)f, sc->names[f], (long long)rows,
                            m->lay.version >= CB_VERSION_KEYS ? " or 0 (64-bit keys)" : "");
        sc->rows[f] = rows;
    }
    cb_layout wl = m->lay;
    cb_layout_init(&m->lay, m->lay.version, m->lay.D, S, sc->rows);
    cb_layout_weights(&m->lay, wl.weight_mask, wl.float_label);
    for (int64_t f = 0; f < S; f++)
        sc->weighted[f] = m->lay.weighted[f];
    sc->float_label = m->lay.float_label;
    return 0;
}

/* The index: its checksum, block offsets in order inside the blocks. */
static int check_index(bin_impl *m, char *err, size_t errlen)
{
    const int64_t H = cb_header_size(m->lay.version, m->lay.S), ix = m->index - m->map, nb = m->nblocks;
    uint64_t want = XXH64(m->index, (size_t)(8 * nb), 0), got = get_u64(m->index + 8 * nb);
    if (want != got)
        return ctr_fail(err, errlen,
                        "%s: byte %lld: index checksum mismatch (stored %016llx, computed %016llx): the data is "
                        "corrupt",
                        m->path, (long long)(ix + 8 * nb), (unsigned long long)got, (unsigned long long)want);
    int64_t prev = H;
    for (int64_t b = 0; b < nb; b++) {
        int64_t off = block_offset(m, b);
        if (b == 0 ? off != H : off <= prev || off > ix)
            return ctr_fail(err, errlen, "%s: byte %lld: block %lld at byte %lld, out of order or outside the "
                            "blocks [%lld, %lld)", m->path, (long long)(ix + 8 * b), (long long)b, (long long)off,
                            (long long)H, (long long)ix);
        prev = off;
    }
    if (nb == 0 && ix != H)
        return ctr_fail(err, errlen, "%s: byte 48: no blocks, but the index is at byte %lld, not %lld", m->path,
                        (long long)ix, (long long)H);
    return 0;
}

/* The header and index of docs/ctr-format.md, in the order it lists. */
static int bin_check(bin_impl *m, ctr_schema *sc, char *err, size_t errlen)
{
    if (check_header(m, err, errlen) || check_counts(m, err, errlen) || check_features(m, sc, err, errlen) ||
        check_index(m, err, errlen))
        return EMBER_EINVAL;
    return 0;
}

/* Opens and maps path into m; 0, or -1 with err. */
static int bin_map(bin_impl *m, const char *path, char *err, size_t errlen)
{
    struct stat st;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0) {
        ctr_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return EMBER_EINVAL;
    }
    m->size = (int64_t)st.st_size;
    if (m->size < CB_HEADER_FIXED) {
        close(fd);
        return ctr_fail(err, errlen, "%s: byte 0: not an ember CTR file (%lld bytes, shorter than a header)", path,
                        (long long)m->size);
    }
    void *map = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return ctr_fail(err, errlen, "%s: mmap: %s", path, strerror(errno));
    m->map = map;
    return 0;
}

int ctr_file_is_binary(const char *path)
{
    char magic[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f)
        fclose(f);
    return n == sizeof magic && !memcmp(magic, CB_MAGIC, sizeof magic);
}

int ctr_source_binary(const char *path, int32_t rank, int32_t world, ctr_source **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return ctr_fail(err, errlen, "ctr_source_binary: path and out must not be NULL");
    if (ctr_check_world(path, rank, world, err, errlen))
        return EMBER_EINVAL;
    bin_impl *m = calloc(1, sizeof *m);
    ctr_schema sc;
    memset(&sc, 0, sizeof sc);
    if (!m || !(m->path = malloc(strlen(path) + 1))) {
        free(m);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    strcpy(m->path, path);
    m->blk.index = -1;
    if (bin_map(m, path, err, errlen) || bin_check(m, &sc, err, errlen))
        goto fail;
    m->begin = m->cur = ctr_share_begin(m->N, rank, world);
    m->end = ctr_share_begin(m->N, rank + 1, world);
    m->rank = rank;
    ctr_source *s = ctr_source_alloc(&BIN_OPS, m, &sc);
    if (!s) {
        ctr_fail(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (m->map)
        munmap((void *)m->map, (size_t)m->size);
    free(m->path);
    free(m);
    return EMBER_EINVAL;
}
