/*
 * fuzz_tsv.c: libFuzzer target for the Criteo TSV reader (ctr_source_tsv,
 * src/data/ctr_text.c and text_parse.c, the built-in Criteo schema).
 *
 * Input: one options byte, then the file's bytes.  The options byte picks
 * the bad-line policy (bit 0: skip or fail), the batch size (bits 1-3: 1..8
 * samples, so lines land at every position of a batch), the world (bits
 * 4-5: 1..3 ranks) and the rank (bits 6-7, modulo the world).  The target
 * opens the file, reads every batch of its share, rewinds, reads it again,
 * and requires: every call returns samples or -1 with a message, never a
 * crash, UB, leak or hang; each batch is well formed (labels 0/1, finite
 * dense values, ids inside the hashed vocabulary, lengths 0 or 1 that add
 * up to num_ids); without a failure both passes return the same samples,
 * and in a world of one they are the samples that a plain reference parser
 * of docs/ctr-format.md's rules (below, strtoll for the integers) finds.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>

#include <xxhash.h>

#include "data/ctr.h"
#include "fuzz_util.h"

static fuzz_file file;

/* Vocabularies per categorical: tiny, odd, and one near the format's limit. */
static void make_rows(int64_t rows[26])
{
    for (int f = 0; f < 26; f++)
        rows[f] = 1 + (f * 37) % 101;
    rows[25] = INT64_C(1) << 40;
}

static void check_batch(const ctr_batch *b, int32_t max, const int64_t rows[26])
{
    FUZZ_REQUIRE(b->batch_size >= 1 && b->batch_size <= max, "batch_size %d", (int)b->batch_size);
    FUZZ_REQUIRE(b->num_dense == 13 && b->num_sparse == 26, "shape %d/%d", (int)b->num_dense,
                 (int)b->num_sparse);
    FUZZ_REQUIRE(b->sparse.num_features == 26 && b->sparse.batch_size == b->batch_size,
                 "sparse shape");
    for (int32_t i = 0; i < b->batch_size; i++) {
        FUZZ_REQUIRE(b->label[i] == 0.0f || b->label[i] == 1.0f, "label %g", b->label[i]);
        for (int j = 0; j < 13; j++)
            FUZZ_REQUIRE(isfinite(b->dense[i * 13 + j]) && b->dense[i * 13 + j] >= 0.0f, "dense %g",
                         b->dense[i * 13 + j]);
    }
    int64_t k = 0;
    for (int f = 0; f < 26; f++)
        for (int32_t i = 0; i < b->batch_size; i++) {
            int32_t l = b->sparse.lengths[(int64_t)f * b->batch_size + i];
            FUZZ_REQUIRE(l == 0 || l == 1, "length %d", (int)l);
            for (int32_t j = 0; j < l; j++, k++)
                FUZZ_REQUIRE(b->sparse.ids[k] >= 0 && b->sparse.ids[k] < rows[f], "id %lld of C%d",
                             (long long)b->sparse.ids[k], f + 1);
        }
    FUZZ_REQUIRE(k == b->sparse.num_ids, "lengths sum to %lld, num_ids %lld", (long long)k,
                 (long long)b->sparse.num_ids);
}

/* Order-free digest of samples, as read and as the reference parses them. */
typedef struct digest {
    uint64_t labels, ids, dense;
} digest;

/* Reads the whole share; the number of samples, or -1 after a failure.
 * *sum folds the labels and ids so that two passes can be compared; *dg
 * digests them for the reference. */
static int64_t read_pass(ctr_source *s, int32_t max, const int64_t rows[26], uint64_t *sum, digest *dg)
{
    char err[512];
    int64_t total = 0;
    *sum = 0;
    memset(dg, 0, sizeof *dg);
    for (int calls = 0;; calls++) {
        FUZZ_REQUIRE(calls < 1000000, "no end after %d batches", calls);
        ctr_batch b;
        err[0] = '\0';
        int64_t n = ctr_source_next(s, max, &b, err, sizeof err);
        if (n < 0) {
            FUZZ_REQUIRE(err[0] != '\0', "failure without a message");
            /* a failure sticks, with the same message */
            char again[512];
            FUZZ_REQUIRE(ctr_source_next(s, max, &b, again, sizeof again) < 0 && !strcmp(err, again),
                         "failure did not stick: \"%s\" then \"%s\"", err, again);
            return -1;
        }
        if (n == 0)
            return total;
        FUZZ_REQUIRE(n == b.batch_size, "returned %lld, batch of %d", (long long)n, (int)b.batch_size);
        check_batch(&b, max, rows);
        for (int32_t i = 0; i < b.batch_size; i++)
            *sum = *sum * 31 + (b.label[i] != 0.0f);
        for (int64_t i = 0; i < b.sparse.num_ids; i++)
            *sum = *sum * 1000003 + (uint64_t)b.sparse.ids[i];
        for (int32_t i = 0; i < b.batch_size; i++) {
            dg->labels += (uint64_t)(b.label[i] != 0.0f);
            for (int j = 0; j < 13; j++) {
                uint32_t bits;
                memcpy(&bits, &b.dense[i * 13 + j], 4);
                dg->dense += bits;
            }
        }
        int64_t k = 0;
        for (int f = 0; f < 26; f++)
            for (int32_t i = 0; i < b.batch_size; i++)
                if (b.sparse.lengths[(int64_t)f * b.batch_size + i])
                    dg->ids += (uint64_t)f * 0x9E3779B97F4A7C15u ^ (uint64_t)b.sparse.ids[k++];
        total += n;
    }
}

/* ------------------------------------------------------------ reference
 * docs/ctr-format.md's rules written again, plainly (strtoll for the
 * integers), for a world of one: the samples the reader must return, in
 * order, folded like read_pass folds them, plus the dense values' sum. */
static int ref_hex(const char *s, size_t n, uint32_t *v)
{
    if (n < 1 || n > 8)
        return -1;
    char buf[9];
    memcpy(buf, s, n);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF", buf[i]))
            return -1;
    *v = (uint32_t)strtoul(buf, NULL, 16);
    return 0;
}

/* An integer field: [+-]?[0-9]+ in int64, or [+-]?[0-9]+\.0+ (a point and
 * zeros, "84.0") whose integer lies strictly inside (-2^53, 2^53). */
static int ref_int(const char *s, size_t n, long long *v)
{
    if (n == 0)
        return *v = 0, 0;
    char *buf = malloc(n + 1);
    FUZZ_REQUIRE(buf != NULL, "out of memory");
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *dot = strchr(buf, '.');
    int point = dot != NULL;
    if (point) {
        int zeros = dot[1] != '\0';
        for (const char *z = dot + 1; *z; z++)
            zeros = zeros && *z == '0';
        *dot = '\0'; /* the integer before the point */
        if (!zeros) {
            free(buf);
            return -1;
        }
    }
    size_t i = buf[0] == '-' || buf[0] == '+';
    int ok = buf[i] != '\0';
    for (; buf[i]; i++)
        ok = ok && buf[i] >= '0' && buf[i] <= '9';
    if (ok) {
        errno = 0;
        *v = strtoll(buf, NULL, 10); /* any number of leading zeros */
        ok = !errno; /* the reader takes every int64, INT64_MIN..INT64_MAX */
    }
    if (ok && point)
        ok = *v < (1LL << 53) && *v > -(1LL << 53); /* from 2^53 on, the float it was printed from may be rounded */
    free(buf);
    return ok ? 0 : -1;
}

/* Parses one line (without its newline); 1 and the sample folded into
 * *sum / *dsum, or 0 for a bad line. */
static int ref_line(const char *p, size_t n, const int64_t rows[26], digest *dg)
{
    if (n > 4096)
        return 0;
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (memchr(p, '\0', n))
        return 0;
    const char *f[41];
    size_t fl[41];
    int nf = 0;
    const char *q = p, *e = p + n;
    for (;;) {
        const char *t = memchr(q, '\t', (size_t)(e - q));
        if (nf == 41)
            return 0;
        f[nf] = q;
        fl[nf++] = (size_t)((t ? t : e) - q);
        if (!t)
            break;
        q = t + 1;
    }
    if (nf != 40 || fl[0] != 1 || (f[0][0] != '0' && f[0][0] != '1'))
        return 0;
    uint64_t d = 0;
    for (int k = 1; k <= 13; k++) {
        long long v;
        if (ref_int(f[k], fl[k], &v))
            return 0;
        float x = (float)log1p((double)(v > 0 ? v : 0));
        uint32_t bits;
        memcpy(&bits, &x, 4);
        d += bits;
    }
    uint64_t h = 0;
    for (int c = 0; c < 26; c++) {
        uint32_t v;
        if (fl[14 + c] == 0)
            continue;
        if (ref_hex(f[14 + c], fl[14 + c], &v))
            return 0;
        unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                              (unsigned char)(v >> 24)};
        h += (uint64_t)c * 0x9E3779B97F4A7C15u ^ (XXH64(b, 4, (XXH64_hash_t)c) % (uint64_t)rows[c]);
    }
    dg->labels += (uint64_t)(f[0][0] == '1');
    dg->ids += h;
    dg->dense += d;
    return 1;
}

/* The reference's samples of the whole file: their number and digest. */
static int64_t ref_file(const uint8_t *p, size_t n, const int64_t rows[26], digest *dg)
{
    int64_t samples = 0;
    memset(dg, 0, sizeof *dg);
    size_t start = n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf ? 3 : 0; /* a byte-order mark is skipped */
    for (size_t at = start; at < n;) {
        const uint8_t *nl = memchr(p + at, '\n', n - at);
        size_t len = nl ? (size_t)(nl - (p + at)) : n - at;
        samples += ref_line((const char *)p + at, len, rows, dg);
        at += len + 1;
    }
    return samples;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fuzz_file_init(&file, "fuzz.tsv");
    uint8_t opt = data[0];
    ctr_bad_policy policy = (opt & 1) ? CTR_BAD_FAIL : CTR_BAD_SKIP;
    int32_t max = 1 + ((opt >> 1) & 7);
    int32_t world = 1 + ((opt >> 4) & 3) % 3;
    int32_t rank = (opt >> 6) % world;
    fuzz_file_set(&file, data + 1, size - 1);

    int64_t rows[26];
    make_rows(rows);
    ctr_source *s = NULL;
    char err[512] = "";
    if (ctr_source_tsv(file.path, rows, policy, rank, world, &s, err, sizeof err) != 0) {
        FUZZ_REQUIRE(s == NULL && err[0] != '\0', "failed open without a message");
        return 0;
    }
    uint64_t sum1, sum2;
    digest d1, d2, dref;
    int64_t n1 = read_pass(s, max, rows, &sum1, &d1);
    if (world == 1 && n1 >= 0) {
        int64_t nref = ref_file(data + 1, size - 1, rows, &dref);
        FUZZ_REQUIRE(n1 == nref && !memcmp(&d1, &dref, sizeof d1),
                     "the reader returned %lld samples, the reference parses %lld (labels %llu/%llu, ids %s, "
                     "dense %s)", (long long)n1, (long long)nref, (unsigned long long)d1.labels,
                     (unsigned long long)dref.labels, d1.ids == dref.ids ? "same" : "differ",
                     d1.dense == dref.dense ? "same" : "differ");
    }
    ctr_stats st;
    ctr_source_stats(s, &st);
    FUZZ_REQUIRE(st.bad_lines <= st.lines, "%lld bad of %lld lines", (long long)st.bad_lines,
                 (long long)st.lines);
    FUZZ_REQUIRE(n1 < 0 || st.samples == n1, "stats say %lld samples, read %lld",
                 (long long)st.samples, (long long)n1);
    FUZZ_REQUIRE(n1 < 0 || st.samples + st.bad_lines == st.lines, "%lld samples + %lld bad != %lld lines",
                 (long long)st.samples, (long long)st.bad_lines, (long long)st.lines);
    FUZZ_REQUIRE((st.bad_lines > 0) == (st.first_bad[0] != '\0'), "first_bad \"%s\" with %lld bad lines",
                 st.first_bad, (long long)st.bad_lines);
    ctr_source_rewind(s);
    int64_t n2 = read_pass(s, max, rows, &sum2, &d2);
    if (n1 >= 0)
        FUZZ_REQUIRE(n2 == n1 && sum2 == sum1, "second pass: %lld samples (first %lld)", (long long)n2,
                     (long long)n1);
    ctr_source_stats(s, &st);
    if (n1 >= 0)
        FUZZ_REQUIRE(st.samples == 2 * n1, "stats after two passes: %lld samples", (long long)st.samples);
    ctr_source_destroy(s);
    return 0;
}
