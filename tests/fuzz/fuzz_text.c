/*
 * fuzz_text.c: libFuzzer target for the schema text reader
 * (ctr_source_text, src/data/ctr_text.c, text_parse.c, text_stream.c).
 *
 * Input: one options byte, then the file's bytes (plain, or gzip or zstd
 * when they begin with the magic).  The options byte picks the bad-line
 * policy (bit 0), a header or not (bit 1: the schema's columns by name,
 * else in order), CSV or TSV (bit 2), the batch size (bits 3-5: 1..8) and
 * the parsing threads (bits 6-7: 1..3; 3 also reads as a file to score,
 * its label and header optional, shuffled when it is plain text: one
 * block of 4096 lines, so the order is still the file's).  The schema has every column
 * kind: a float label, int log1p, float clip, float standardize (its
 * statistics computed at open), a string categorical, a weighted int
 * multi-hot with 64-bit keys, a hex categorical.  Required: open and every
 * read return data or -1 with a message, never a crash, UB, leak or hang;
 * every batch is well formed (labels in [0, 1], finite dense values and
 * weights, ids below their rows, lengths adding up to num_ids); a second
 * pass after rewind and a source with one thread return the same samples.
 * That source reads plain text with a UTF-8 byte-order mark put before it
 * (or the one it begins with taken away), which must change nothing.
 * Compressed inputs that expand past MAX_TEXT bytes are passed over: a few
 * KB of zstd can hold millions of empty lines, three passes over which take
 * seconds under ASan and end a long run on libFuzzer's timeout while
 * exercising nothing a smaller input does not.
 */
#include <math.h>
#include <zlib.h>
#include <zstd.h>

#include "data/ctr.h"
#include "fuzz_util.h"

static fuzz_file file, toggled;
static ctr_column cols[7];

static const uint8_t BOM[3] = {0xef, 0xbb, 0xbf};

enum { MAX_TEXT = 1 << 20 };

static int compressed(const uint8_t *p, size_t n)
{
    return (n >= 2 && p[0] == 0x1f && p[1] == 0x8b) || (n >= 4 && !memcmp(p, "\x28\xb5\x2f\xfd", 4));
}

/* Whether a compressed input expands past MAX_TEXT bytes (gzip members and
 * zstd frames one after another, as the reader takes them; a damaged
 * stream counts what came out before the damage). */
static int expands_too_far(const uint8_t *p, size_t n)
{
    static uint8_t out[1 << 16];
    size_t total = 0;
    if (p[0] == 0x1f) {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 15 + 16) != Z_OK)
            return 0;
        z.next_in = (Bytef *)p;
        z.avail_in = (uInt)n;
        int rc = Z_OK;
        while (total <= MAX_TEXT && (rc == Z_OK || (rc == Z_STREAM_END && z.avail_in > 0))) {
            if (rc == Z_STREAM_END)
                inflateReset(&z);
            z.next_out = out;
            z.avail_out = sizeof out;
            rc = inflate(&z, Z_NO_FLUSH);
            total += sizeof out - z.avail_out;
            if (rc == Z_BUF_ERROR && z.avail_in == 0)
                break;
        }
        inflateEnd(&z);
        return total > MAX_TEXT;
    }
    ZSTD_DCtx *d = ZSTD_createDCtx();
    FUZZ_REQUIRE(d != NULL, "out of memory");
    ZSTD_inBuffer in = {p, n, 0};
    while (total <= MAX_TEXT && in.pos < in.size) {
        ZSTD_outBuffer o = {out, sizeof out, 0};
        size_t before = in.pos, rc = ZSTD_decompressStream(d, &o, &in);
        total += o.pos;
        if (ZSTD_isError(rc) || (o.pos == 0 && in.pos == before))
            break;
    }
    ZSTD_freeDCtx(d);
    return total > MAX_TEXT;
}

/* The file with its byte-order mark toggled: its path, or the input's own
 * path when toggling would change what the text is. */
static const char *toggle_bom(const uint8_t *p, size_t n)
{
    fuzz_file_init(&toggled, "fuzz-bom.csv");
    if (compressed(p, n))
        return file.path;
    if (n >= 3 && !memcmp(p, BOM, 3)) {
        if ((n >= 6 && !memcmp(p + 3, BOM, 3)) || compressed(p + 3, n - 3))
            return file.path;
        fuzz_file_set(&toggled, p + 3, n - 3);
        return toggled.path;
    }
    uint8_t *q = malloc(n + 3);
    FUZZ_REQUIRE(q != NULL, "out of memory");
    memcpy(q, BOM, 3);
    if (n)
        memcpy(q + 3, p, n);
    fuzz_file_set(&toggled, q, n + 3);
    free(q);
    return toggled.path;
}

static void make_schema(int header, int tsv, ctr_text_schema *sc)
{
    static const char *const NAMES[] = {"y", "n", "p", "z", "s", "m", "h"};
    static const ctr_col_type TYPES[] = {CTR_COL_LABEL, CTR_COL_INT, CTR_COL_FLOAT, CTR_COL_FLOAT,
                                         CTR_COL_CATEGORICAL, CTR_COL_MULTI_HOT, CTR_COL_CATEGORICAL};
    memset(cols, 0, sizeof cols);
    for (int c = 0; c < 7; c++) {
        strcpy(cols[c].name, NAMES[c]);
        cols[c].type = TYPES[c];
    }
    cols[0].float_label = 1;
    cols[1].transform = CTR_TF_LOG1P;
    cols[2].transform = CTR_TF_CLIP;
    cols[2].min = -3;
    cols[2].max = 3;
    cols[3].transform = CTR_TF_STANDARDIZE;
    cols[4].rows = 97;
    cols[5].encoding = CTR_ENC_INT;
    cols[5].separator = '|';
    cols[5].weighted = 1;
    cols[5].rows = 0;
    cols[6].encoding = CTR_ENC_HEX;
    cols[6].rows = 1000;
    memset(sc, 0, sizeof *sc);
    sc->delimiter = tsv ? '\t' : ',';
    sc->header = header;
    sc->max_line = 512;
    sc->num_columns = 7;
    sc->columns = cols;
}

static const int64_t ROWS[3] = {97, 0, 1000};

static uint64_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* One pass over the share: the samples read (-1: a read failed), a digest. */
static int64_t read_pass(ctr_source *s, int32_t max, uint64_t *digest)
{
    char err[512];
    int64_t total = 0;
    *digest = 0;
    for (;;) {
        ctr_batch b;
        int64_t n = ctr_source_next(s, max, &b, err, sizeof err);
        if (n < 0) {
            FUZZ_REQUIRE(err[0] != '\0', "a failed read without a message");
            return -1;
        }
        if (n == 0)
            return total;
        FUZZ_REQUIRE(n <= max && b.num_dense == 3 && b.num_sparse == 3, "shape");
        int64_t k = 0;
        for (int32_t i = 0; i < b.batch_size; i++) {
            FUZZ_REQUIRE(b.label[i] >= 0.0f && b.label[i] <= 1.0f, "label %g", b.label[i]);
            for (int j = 0; j < 3; j++)
                FUZZ_REQUIRE(isfinite(b.dense[i * 3 + j]), "dense %g", b.dense[i * 3 + j]);
            FUZZ_REQUIRE(b.dense[i * 3 + 1] >= -3.0f && b.dense[i * 3 + 1] <= 3.0f, "clip %g", b.dense[i * 3 + 1]);
        }
        FUZZ_REQUIRE(b.sparse.weights != NULL, "a weighted feature without weights");
        for (int f = 0; f < 3; f++)
            for (int32_t i = 0; i < b.batch_size; i++) {
                int32_t l = b.sparse.lengths[(int64_t)f * b.batch_size + i];
                FUZZ_REQUIRE(l >= 0 && l <= CTR_MAX_BAG_IDS && (f == 1 || l <= 1), "length %d", (int)l);
                for (int32_t j = 0; j < l; j++, k++) {
                    FUZZ_REQUIRE(ROWS[f] == 0 || (b.sparse.ids[k] >= 0 && b.sparse.ids[k] < ROWS[f]), "id %lld",
                                 (long long)b.sparse.ids[k]);
                    FUZZ_REQUIRE(isfinite(b.sparse.weights[k]) && (f == 1 || b.sparse.weights[k] == 1.0f),
                                 "weight %g", b.sparse.weights[k]);
                }
            }
        FUZZ_REQUIRE(k == b.sparse.num_ids, "lengths sum to %lld, num_ids %lld", (long long)k,
                     (long long)b.sparse.num_ids);
        int64_t at[3], acc = 0; /* the ids sample by sample: a digest that does not depend on the batching */
        for (int f = 0; f < 3; f++) {
            at[f] = acc;
            for (int32_t i = 0; i < b.batch_size; i++)
                acc += b.sparse.lengths[(int64_t)f * b.batch_size + i];
        }
        for (int32_t i = 0; i < b.batch_size; i++) {
            *digest = *digest * 31 + bits(b.label[i]) + bits(b.dense[i * 3]) + bits(b.dense[i * 3 + 1]) +
                      bits(b.dense[i * 3 + 2]);
            for (int f = 0; f < 3; f++)
                for (int32_t j = 0; j < b.sparse.lengths[(int64_t)f * b.batch_size + i]; j++, at[f]++)
                    *digest = *digest * 31 + (uint64_t)b.sparse.ids[at[f]] + bits(b.sparse.weights[at[f]]);
        }
        total += n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || (compressed(data + 1, size - 1) && expands_too_far(data + 1, size - 1)))
        return 0;
    fuzz_file_init(&file, "fuzz.csv");
    uint8_t opt = data[0];
    ctr_bad_policy policy = (opt & 1) ? CTR_BAD_FAIL : CTR_BAD_SKIP;
    int32_t max = 1 + ((opt >> 3) & 7), threads = 1 + (opt >> 6) % 3;
    const int scoring = (opt >> 6) == 3;
    ctr_text_schema sc;
    make_schema((opt >> 1) & 1, (opt >> 2) & 1, &sc);
    sc.label_optional = sc.header_optional = scoring;
    fuzz_file_set(&file, data + 1, size - 1);
    ctr_source *s = NULL, *one = NULL;
    char err[512] = "";
    if (ctr_source_text(file.path, &sc, policy, 0, 1, &s, err, sizeof err) != 0) {
        FUZZ_REQUIRE(s == NULL && err[0] != '\0', "failed open without a message");
        return 0;
    }
    ctr_source_set_threads(s, threads);
    int shuffled = scoring && ctr_source_shuffle(s, opt, err, sizeof err) == 0;
    FUZZ_REQUIRE(!scoring || shuffled || compressed(data + 1, size - 1), "shuffle of plain text: %s", err);
    uint64_t d1, d2, d3;
    int64_t n1 = read_pass(s, max, &d1);
    ctr_stats st;
    ctr_source_stats(s, &st);
    FUZZ_REQUIRE(n1 < 0 || st.samples + st.bad_lines == st.lines, "%lld samples + %lld bad != %lld lines",
                 (long long)st.samples, (long long)st.bad_lines, (long long)st.lines);
    ctr_source_rewind(s);
    int64_t n2 = read_pass(s, max, &d2);
    if (n1 >= 0)
        FUZZ_REQUIRE(n2 == n1 && d2 == d1, "second pass: %lld samples (first %lld)", (long long)n2, (long long)n1);
    const char *other = toggle_bom(data + 1, size - 1);
    FUZZ_REQUIRE(ctr_source_text(other, &sc, policy, 0, 1, &one, err, sizeof err) == 0, "reopen: %s", err);
    FUZZ_REQUIRE(!shuffled || ctr_source_shuffle(one, opt, err, sizeof err) == 0, "shuffle: %s", err);
    int64_t n3 = read_pass(one, 8, &d3);
    FUZZ_REQUIRE(n3 == n1 && (n1 < 0 || d3 == d1),
                 "one thread, batches of 8%s: %lld samples, %d threads: %lld",
                 other == file.path ? "" : ", byte-order mark toggled", (long long)n3, (int)threads, (long long)n1);
    ctr_source_destroy(one);
    ctr_source_destroy(s);
    return 0;
}
