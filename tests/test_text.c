/*
 * test_text.c: the schema text reader (ctr_source_text), distinct-key
 * counts and binary format version 3, on fresh random files.
 *
 *   key counts     key_count against a naive sort-and-count, with duplicates,
 *                  key 0 and the limit (exact; "limit + 1" past it).
 *   compression    the same CSV plain, gzip (zlib) and zstd: the same
 *                  samples, statistics and first bad line, bit for bit.
 *   threads        1, 2 and 3 parsing threads: the same samples and counts.
 *   shares, seek   ranks 1..3 partition the good samples in order; a told
 *                  position seeked in a new source continues identically.
 *   version 3      text with weighted multi-hot and float labels converted:
 *                  the binary reader gives the text reader's samples bit for
 *                  bit; a block's weight mask, a float label out of [0, 1],
 *                  a NaN weight and a version-3 flag are caught, naming the
 *                  block or sample.
 * The values themselves (hashes, transforms, quoting, bad lines) are
 * checked against an independent Python reader in tests/data_schema.py.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>

#include "check.h"
#include "data/ctr.h"
#include "data/key_count.h"
#include "util.h"

static char tmpdir[256];

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_key_count(uint64_t seed)
{
    test_rng r = {seed ^ 0x4b43};
    for (int trial = 0; trial < 40; trial++) {
        int64_t n = test_range(&r, 0, 30000), vocab = test_range(&r, 1, 20000);
        int64_t limit = trial % 4 == 0 ? test_range(&r, 1, 5000) : CTR_DISTINCT_CAP;
        int64_t *keys = malloc((size_t)(n + 1) * sizeof *keys);
        uint64_t *sorted = malloc((size_t)(n + 1) * sizeof *sorted);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = test_range(&r, 0, vocab - 1);
            keys[i] = v == 0 ? 0 : (int64_t)XXH64(&v, sizeof v, 1); /* key 0 too */
            sorted[i] = (uint64_t)keys[i];
        }
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_u64);
        int64_t distinct = 0;
        for (int64_t i = 0; i < n; i++)
            distinct += i == 0 || sorted[i] != sorted[i - 1];
        key_count k;
        key_count_init(&k, limit);
        for (int64_t at = 0; at < n;) { /* in pieces, as rounds of a read */
            int64_t m = test_range(&r, 1, 5000);
            if (m > n - at)
                m = n - at;
            CHECK(key_count_add(&k, keys + at, m) == 0);
            at += m;
        }
        int64_t want = distinct > limit ? limit + 1 : distinct;
        CHECK_MSG(key_count_get(&k) == want, "trial %d: %lld distinct of %lld keys (limit %lld): counted %lld", trial,
                  (long long)distinct, (long long)n, (long long)limit, (long long)key_count_get(&k));
        key_count_free(&k);
        free(keys);
        free(sorted);
    }
}

/* A CSV of n lines with a header, weighted multi-hot, strings, a float
 * label, and about 3% bad lines; returns its bytes in *len. */
static char *make_csv(test_rng *r, int64_t n, size_t *len)
{
    size_t cap = 64 + (size_t)n * 200, k = 0;
    char *s = malloc(cap);
    k += (size_t)snprintf(s + k, cap - k, "y,age,name,tags,price,skip\n");
    static const char *const NAMES[] = {"alice", "bob", "\"c,d\"", "\"e\"\"f\"", "", "\xc3\xa9t\xc3\xa9"};
    for (int64_t i = 0; i < n; i++) {
        int bad = test_range(r, 0, 99) < 3;
        int kind = (int)test_range(r, 0, 3);
        k += (size_t)snprintf(s + k, cap - k, "%s,", bad && kind == 0 ? "1.5" : test_range(r, 0, 1) ? "0.25" : "1");
        k += (size_t)snprintf(s + k, cap - k, "%s,", bad && kind == 1 ? "x7" : "");
        if (!(bad && kind == 1))
            k += (size_t)snprintf(s + k - 1, cap - k + 1, "%lld,", (long long)test_range(r, -5, 900)) - 1;
        k += (size_t)snprintf(s + k, cap - k, "%s,", NAMES[test_range(r, 0, 5)]);
        int items = (int)test_range(r, 0, 4);
        for (int j = 0; j < items; j++)
            k += (size_t)snprintf(s + k, cap - k, "%s%lld%s", j ? "|" : "", (long long)test_range(r, 0, 50),
                                  test_range(r, 0, 2) ? "" : ":0.5");
        if (bad && kind == 2)
            k += (size_t)snprintf(s + k, cap - k, "||");
        k += (size_t)snprintf(s + k, cap - k, ",%.3f,zz%s\n", test_uniform(r) * 100, bad && kind == 3 ? ",extra" : "");
    }
    *len = k;
    return s;
}

static ctr_column COLS[6];
static ctr_text_schema SCHEMA;

static void schema_init(void)
{
    memset(COLS, 0, sizeof COLS);
    strcpy(COLS[0].name, "y");
    COLS[0].type = CTR_COL_LABEL;
    COLS[0].float_label = 1;
    strcpy(COLS[1].name, "age");
    COLS[1].type = CTR_COL_INT;
    COLS[1].transform = CTR_TF_LOG1P;
    strcpy(COLS[2].name, "name");
    COLS[2].type = CTR_COL_CATEGORICAL;
    COLS[2].rows = 1000;
    strcpy(COLS[3].name, "tags");
    COLS[3].type = CTR_COL_MULTI_HOT;
    COLS[3].encoding = CTR_ENC_INT;
    COLS[3].separator = '|';
    COLS[3].weighted = 1;
    COLS[3].rows = 0;
    strcpy(COLS[4].name, "price");
    COLS[4].type = CTR_COL_FLOAT;
    COLS[4].transform = CTR_TF_STANDARDIZE;
    strcpy(COLS[5].name, "skip"); /* ignored; the sixth field of a file without a header */
    memset(&SCHEMA, 0, sizeof SCHEMA);
    SCHEMA.delimiter = ',';
    SCHEMA.header = 1;
    SCHEMA.max_line = 4096;
    SCHEMA.num_columns = 5; /* "skip" is in the header only: ignored */
    SCHEMA.columns = COLS;
}

typedef struct dump {
    char *buf;
    size_t n, cap;
    ctr_stats st;
} dump;

static void dump_put(dump *d, const void *p, size_t n)
{
    if (d->n + n > d->cap) {
        d->cap = (d->n + n) * 2;
        d->buf = realloc(d->buf, d->cap);
    }
    memcpy(d->buf + d->n, p, n);
    d->n += n;
}

/* Every sample of s (in batches of `batch`) as bytes, and its stats. */
static int dump_source(ctr_source *s, int32_t batch, dump *d)
{
    char err[512];
    for (;;) {
        ctr_batch b;
        int64_t n = ctr_source_next(s, batch, &b, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "dump: %s\n", err);
            return -1;
        }
        if (n == 0)
            break;
        int64_t at[CTR_MAX_FEATURES], acc = 0; /* feature-major: each feature's ids, sample by sample */
        for (int32_t f = 0; f < b.num_sparse; f++) {
            at[f] = acc;
            for (int64_t i = 0; i < n; i++)
                acc += b.sparse.lengths[f * n + i];
        }
        for (int64_t i = 0; i < n; i++) { /* sample by sample: the same bytes for any batching */
            dump_put(d, &b.label[i], 4);
            dump_put(d, &b.dense[i * b.num_dense], 4 * (size_t)b.num_dense);
            for (int32_t f = 0; f < b.num_sparse; f++) {
                int32_t len = b.sparse.lengths[f * n + i];
                dump_put(d, &len, 4);
                dump_put(d, b.sparse.ids + at[f], 8 * (size_t)len);
                if (b.sparse.weights)
                    dump_put(d, b.sparse.weights + at[f], 4 * (size_t)len);
                at[f] += len;
            }
        }
    }
    ctr_source_stats(s, &d->st);
    return 0;
}

static int quiet; /* an open that is meant to fail prints nothing */

static int dump_file(const char *path, int binary, int32_t threads, int32_t batch, dump *d)
{
    char err[512];
    ctr_source *s = NULL;
    memset(d, 0, sizeof *d);
    int rc = binary ? ctr_source_binary(path, 0, 1, &s, err, sizeof err)
                    : ctr_source_text(path, &SCHEMA, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err);
    if (rc) {
        if (!quiet)
            fprintf(stderr, "open: %s\n", err);
        return -1;
    }
    ctr_source_set_threads(s, threads);
    rc = dump_source(s, batch, d);
    ctr_source_destroy(s);
    return rc;
}

static int dumps_equal(const dump *a, const dump *b)
{
    return a->n == b->n && !memcmp(a->buf, b->buf, a->n) && a->st.samples == b->st.samples &&
           a->st.bad_lines == b->st.bad_lines && a->st.lines == b->st.lines;
}

static void test_compressed_threads(uint64_t seed)
{
    test_rng r = {seed ^ 0x7a7a};
    size_t len;
    char *csv = make_csv(&r, 3000, &len), plain[300], gz[300], zs[300];
    snprintf(plain, sizeof plain, "%s/t.csv", tmpdir);
    snprintf(gz, sizeof gz, "%s/t.csv.gz", tmpdir);
    snprintf(zs, sizeof zs, "%s/t.zst", tmpdir);
    FILE *f = fopen(plain, "wb");
    fwrite(csv, 1, len, f);
    fclose(f);
    gzFile g = gzopen(gz, "wb");
    gzwrite(g, csv, (unsigned)len / 2); /* two members: read through */
    gzclose(g);
    g = gzopen(gz, "ab");
    gzwrite(g, csv + len / 2, (unsigned)(len - len / 2));
    gzclose(g);
    size_t zcap = ZSTD_compressBound(len);
    void *z = malloc(zcap);
    size_t zn = ZSTD_compress(z, zcap, csv, len, 3);
    CHECK(!ZSTD_isError(zn));
    f = fopen(zs, "wb");
    fwrite(z, 1, zn, f);
    fclose(f);
    dump ref, d;
    CHECK(dump_file(plain, 0, 1, 4096, &ref) == 0);
    CHECK_MSG(ref.st.bad_lines > 30 && ref.st.samples > 2700, "bad %lld of %lld", (long long)ref.st.bad_lines,
              (long long)ref.st.lines);
    const char *paths[] = {gz, zs, plain, plain};
    const int32_t threads[] = {1, 2, 3, 2}, batches[] = {512, 999, 4096, 1};
    for (int k = 0; k < 4; k++) {
        CHECK(dump_file(paths[k], 0, threads[k], batches[k], &d) == 0);
        CHECK_MSG(dumps_equal(&ref, &d), "%s with %d threads, batches of %d: other samples", paths[k],
                  (int)threads[k], (int)batches[k]);
        /* the same first bad line and message; only the file name before "FILE:LINE:" differs */
        const char *a = strrchr(ref.st.first_bad, '/'), *b = strrchr(d.st.first_bad, '/');
        a = a ? strchr(a, ':') : NULL;
        b = b ? strchr(b, ':') : NULL;
        CHECK_MSG(a && b && !strcmp(a, b), "first bad line: \"%s\" against \"%s\"", d.st.first_bad,
                  ref.st.first_bad);
        free(d.buf);
    }
    /* a truncated gzip or zstd stream fails, it is not a shorter file */
    long gzn = 0;
    unsigned char *gzb = test_read_file(gz, &gzn);
    CHECK(gzb && gzn > 100);
    test_write_file(gz, gzb, gzn - 30);
    quiet = 1;
    CHECK(dump_file(gz, 0, 1, 4096, &d) != 0);
    free(d.buf);
    test_write_file(gz, gzb, gzn); /* whole again, for the shares below */
    free(gzb);
    f = fopen(zs, "wb");
    fwrite(z, 1, zn - 7, f);
    fclose(f);
    CHECK(dump_file(zs, 0, 1, 4096, &d) != 0);
    quiet = 0;
    free(d.buf);
    /* version 3 */
    char bin[300], err[512];
    snprintf(bin, sizeof bin, "%s/t.bin", tmpdir);
    ctr_source *s;
    ctr_stats st;
    CHECK(ctr_source_text(plain, &SCHEMA, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) == 0);
    ctr_source_set_threads(s, 2);
    CHECK_MSG(ctr_convert_source(s, bin, &st, err, sizeof err) == 0, "%s", err);
    ctr_source_destroy(s);
    CHECK(dump_file(bin, 1, 1, 777, &d) == 0);
    CHECK_MSG(d.n == ref.n && !memcmp(d.buf, ref.buf, ref.n), "binary version 3 differs from the text");
    free(d.buf);
    long n = 0;
    unsigned char *c = test_read_file(bin, &n);
    CHECK(c && c[8] == 3 && c[12] == 1); /* version 3, float labels */
    const int64_t S = 2, H = 56 + 40 * S + 16, B0 = H; /* header: + weight mask, checksum */
    int64_t ix = 0; /* one block (3000 samples): it ends where the index starts */
    for (int b = 0; b < 8; b++)
        ix |= (int64_t)c[48 + b] << (8 * b);
    struct { long at; unsigned char x; const char *want; } cases[] = {
        {12, 2, "byte 12: flags 0x00000003, must be 0 or 1 in version 3"},
        {B0 + 40, 1, "block 0 (byte 152; samples 0..2"},
        {B0 + 48 + 3, 0x7f, "sample 0 (block 0, byte 200): label"},
        {ix - 12, 0, "tags weight nan is not finite"}, /* the last weight set to NaN */
    };
    char bad[300];
    snprintf(bad, sizeof bad, "%s/bad.bin", tmpdir);
    for (int i = 0; i < 4; i++) {
        unsigned char *m = malloc((size_t)n);
        memcpy(m, c, (size_t)n);
        if (cases[i].x)
            m[cases[i].at] ^= cases[i].x;
        else
            memcpy(m + cases[i].at, "\x00\x00\xc0\x7f", 4);
        /* the checksums made right, so the check behind them speaks */
        uint64_t h = XXH64(m, (size_t)H - 8, 0);
        for (int b = 0; b < 8; b++)
            m[H - 8 + b] = (unsigned char)(h >> (8 * b));
        h = XXH64(m + B0, (size_t)(ix - 8 - B0), 0);
        for (int b = 0; b < 8; b++)
            m[ix - 8 + b] = (unsigned char)(h >> (8 * b));
        test_write_file(bad, m, n);
        ctr_source *q = NULL;
        int rc = ctr_source_binary(bad, 0, 1, &q, err, sizeof err);
        if (rc == 0) {
            ctr_batch b;
            rc = ctr_source_next(q, 4096, &b, err, sizeof err) < 0 ? -1 : 0;
        }
        CHECK_MSG(rc == -1 && strstr(err, cases[i].want), "case %d: got \"%s\", want \"%s\"", i, rc ? err : "(read)",
                  cases[i].want);
        ctr_source_destroy(q);
        free(m);
    }
    free(c);
    free(ref.buf);
    free(z);
    free(csv);
}

/* A UTF-8 byte-order mark before the text, as Excel and pandas write it:
 * plain, gzip and zstd, with a header and without one, give the samples,
 * statistics and first bad line of the file without the mark, bit for bit
 * (with every thread count and batch size of test_compressed_threads'
 * cases), and a rank's share seeks alike.  A compressed file cut at its
 * end names the line after the last one read. */
static void test_bom(uint64_t seed)
{
    test_rng r = {seed ^ 0xb0b0};
    size_t len;
    char *csv = make_csv(&r, 700, &len), path[300], err[600];
    const ctr_text_schema saved = SCHEMA;
    for (int header = 1; header >= 0; header--) {
        const char *text = header ? csv : strchr(csv, '\n') + 1;
        const size_t n = len - (size_t)(text - csv);
        const long lines = header ? 701 : 700;
        SCHEMA.header = header;
        SCHEMA.num_columns = header ? 5 : 6;
        snprintf(path, sizeof path, "%s/nobom.csv", tmpdir);
        test_write_file(path, (const unsigned char *)text, (long)n);
        dump ref, d;
        CHECK(dump_file(path, 0, 1, 4096, &ref) == 0);
        CHECK(ref.st.samples > 600 && ref.st.lines == 700);
        unsigned char *b = malloc(n + 3);
        memcpy(b, "\xef\xbb\xbf", 3);
        memcpy(b + 3, text, n);
        /* plain */
        char plain[300], gz[300], zs[300];
        snprintf(plain, sizeof plain, "%s/bom.csv", tmpdir);
        test_write_file(plain, b, (long)n + 3);
        /* gzip, one member */
        snprintf(gz, sizeof gz, "%s/bom.csv.gz", tmpdir);
        gzFile g = gzopen(gz, "wb");
        gzwrite(g, b, (unsigned)n + 3);
        gzclose(g);
        /* zstd with a content checksum, so that a cut of 4 bytes leaves the text whole */
        snprintf(zs, sizeof zs, "%s/bom.csv.zst", tmpdir);
        size_t zcap = ZSTD_compressBound(n + 3);
        void *z = malloc(zcap);
        ZSTD_CCtx *cz = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(cz, ZSTD_c_checksumFlag, 1);
        size_t zn = ZSTD_compress2(cz, z, zcap, b, n + 3);
        ZSTD_freeCCtx(cz);
        CHECK(!ZSTD_isError(zn));
        test_write_file(zs, z, (long)zn);
        const char *paths[] = {plain, gz, zs, plain};
        const int32_t threads[] = {1, 2, 3, 2}, batches[] = {4096, 333, 64, 1};
        for (int k = 0; k < 4; k++) {
            CHECK_MSG(dump_file(paths[k], 0, threads[k], batches[k], &d) == 0, "%s: cannot be read", paths[k]);
            CHECK_MSG(dumps_equal(&ref, &d), "%s (header %d): other samples than without the mark", paths[k], header);
            const char *x = strrchr(ref.st.first_bad, '/'), *y = strrchr(d.st.first_bad, '/');
            x = x ? strchr(x, ':') : NULL;
            y = y ? strchr(y, ':') : NULL;
            CHECK_MSG(x && y && !strcmp(x, y), "first bad line: \"%s\" against \"%s\"", d.st.first_bad,
                      ref.st.first_bad);
            free(d.buf);
        }
        /* the second rank's share, and a told position seeked in a new source: the same as without the mark */
        for (int k = 0; k < 3; k++) {
            dump a = {0}, c = {0};
            ctr_source *s = NULL, *t = NULL;
            SCHEMA.header = header;
            CHECK(ctr_source_text(path, &SCHEMA, CTR_BAD_SKIP, 1, 2, &s, err, sizeof err) == 0);
            CHECK_MSG(ctr_source_text(paths[k], &SCHEMA, CTR_BAD_SKIP, 1, 2, &t, err, sizeof err) == 0, "%s", err);
            CHECK(dump_source(s, 100, &a) == 0 && dump_source(t, 100, &c) == 0);
            CHECK_MSG(a.n == c.n && !memcmp(a.buf, c.buf, a.n), "%s: rank 1 of 2 reads other samples", paths[k]);
            free(a.buf);
            free(c.buf);
            ctr_source_destroy(s);
            ctr_source_destroy(t);
        }
        /* cut at the end: the error names the line after the last one (the text is whole) */
        struct { const char *p; long keep; const char *what; } cuts[] = {
            {gz, 0, "gzip: the file ends inside a member (truncated)"},
            {zs, (long)zn - 4, "zstd: the file ends inside a frame (truncated)"},
        };
        long gzn = 0;
        unsigned char *gzb = test_read_file(gz, &gzn);
        cuts[0].keep = gzn - 8; /* without the CRC and size */
        test_write_file(gz, gzb, cuts[0].keep);
        test_write_file(zs, z, cuts[1].keep);
        for (int k = 0; k < 2; k++) {
            ctr_source *s = NULL;
            char want[400];
            snprintf(want, sizeof want, "%s:%ld: %s", cuts[k].p, lines + 1, cuts[k].what);
            CHECK(ctr_source_text(cuts[k].p, &SCHEMA, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) != 0);
            CHECK_MSG(!strcmp(err, want), "got \"%s\", want \"%s\"", err, want);
        }
        free(gzb);
        free(z);
        free(b);
        free(ref.buf);
    }
    SCHEMA = saved;
    free(csv);
}

/* Ranks' shares partition the samples in order; a told position continues
 * in a new source exactly (the gzip file: a seek reads the stream again). */
static void test_shares_seek(void)
{
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/t.csv.gz", tmpdir);
    dump all, d;
    CHECK(dump_file(path, 0, 1, 4096, &all) == 0);
    for (int32_t W = 2; W <= 3; W++) {
        dump cat = {0};
        for (int32_t rk = 0; rk < W; rk++) {
            ctr_source *s = NULL;
            CHECK(ctr_source_text(path, &SCHEMA, CTR_BAD_SKIP, rk, W, &s, err, sizeof err) == 0);
            memset(&d, 0, sizeof d);
            CHECK(dump_source(s, 4096, &d) == 0);
            cat.st.samples += d.st.samples;
            dump_put(&cat, d.buf, d.n);
            free(d.buf);
            ctr_source_destroy(s);
        }
        /* the dump is sample by sample, so the shares in rank order are the whole file's bytes */
        CHECK_MSG(cat.st.samples == all.st.samples && cat.n == all.n && !memcmp(cat.buf, all.buf, all.n),
                  "W=%d: shares hold %lld of %lld samples, or others", (int)W, (long long)cat.st.samples,
                  (long long)all.st.samples);
        free(cat.buf);
    }
    ctr_source *a = NULL, *b = NULL;
    CHECK(ctr_source_text(path, &SCHEMA, CTR_BAD_SKIP, 0, 1, &a, err, sizeof err) == 0);
    ctr_batch x;
    CHECK(ctr_source_next(a, 1234, &x, err, sizeof err) == 1234);
    ctr_position pos;
    CHECK(ctr_source_tell(a, &pos) == 0);
    CHECK(ctr_source_text(path, &SCHEMA, CTR_BAD_SKIP, 0, 1, &b, err, sizeof err) == 0);
    CHECK_MSG(ctr_source_seek(b, &pos, err, sizeof err) == 0, "%s", err);
    dump da = {0}, db = {0};
    CHECK(dump_source(a, 500, &da) == 0 && dump_source(b, 500, &db) == 0);
    CHECK_MSG(da.n == db.n && !memcmp(da.buf, db.buf, da.n), "a seeked source reads other samples");
    free(da.buf);
    free(db.buf);
    ctr_source_destroy(a);
    ctr_source_destroy(b);
    free(all.buf);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "%s/ember-test-text-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    schema_init();
    test_key_count(seed);
    test_compressed_threads(seed);
    test_shares_seek();
    test_bom(seed);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report("test_text");
}
