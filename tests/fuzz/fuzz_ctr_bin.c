/*
 * fuzz_ctr_bin.c: libFuzzer target for ember's binary CTR reader
 * (ctr_source_binary, src/data/ctr_bin.c; docs/ctr-format.md).
 *
 * Input: the file's bytes.  Each input is read twice: as it is, and with
 * every checksum it holds recomputed (header, each block the index points
 * at, the index), so that the fuzzer also reaches the checks behind the
 * checksums (counts, offsets, bag lengths, labels, ids < rows), which a
 * mutated byte would otherwise never get past.  Each version is opened as
 * rank 0 of 1 and rank 1 of 2, every batch of the share is read (3 samples
 * a call, so batches cross blocks), the source is rewound and read again.
 * Required: success or -1 with a message, never a crash, UB, leak or hang;
 * every batch well formed (labels 0/1, ids inside the header's rows, any
 * 64-bit key for a feature of rows 0 in a version 2 file, lengths that add
 * up to num_ids); without a failure both passes agree.  The seeds hold
 * files of both versions (make_corpus.sh).
 */
#include <xxhash.h>

#include "data/ctr.h"
#include "fuzz_util.h"

static fuzz_file file;

/* Recomputes the checksums of a file laid out as docs/ctr-format.md says,
 * as far as its own fields allow (every offset checked before use).  Both
 * versions: a block's checksum is its last 8 bytes, whatever it holds. */
static void fix_checksums(unsigned char *p, size_t size)
{
    if (size < 56 || memcmp(p, "EMBERCTR", 8) != 0)
        return;
    uint64_t S = fz_get_u32(p + 20);
    if (S < 1 || S > 64)
        return;
    uint64_t H = 56 + 40 * S + 8;
    if (H > size)
        return;
    uint64_t nb = fz_get_u64(p + 40), ix = fz_get_u64(p + 48);
    if (ix >= H && ix <= size && size - ix >= 8 && nb <= (size - ix - 8) / 8) {
        const unsigned char *index = p + ix;
        for (uint64_t b = 0; b < nb; b++) {
            uint64_t off = fz_get_u64(index + 8 * b);
            uint64_t stop = b + 1 < nb ? fz_get_u64(index + 8 * (b + 1)) : ix;
            if (off >= H && off < stop && stop <= ix && stop - off >= 8)
                fz_put_u64(p + stop - 8, XXH64(p + off, (size_t)(stop - off - 8), 0));
        }
        fz_put_u64(p + ix + 8 * nb, XXH64(index, (size_t)(8 * nb), 0));
    }
    fz_put_u64(p + H - 8, XXH64(p, (size_t)(H - 8), 0));
}

static void check_batch(const ctr_batch *b, int32_t max, const ctr_schema *sc)
{
    FUZZ_REQUIRE(b->batch_size >= 1 && b->batch_size <= max, "batch_size %d", (int)b->batch_size);
    FUZZ_REQUIRE(b->num_dense == sc->num_dense && b->num_sparse == sc->num_sparse, "shape");
    for (int32_t i = 0; i < b->batch_size; i++)
        FUZZ_REQUIRE(b->label[i] == 0.0f || b->label[i] == 1.0f, "label %g", b->label[i]);
    int64_t k = 0;
    for (int32_t f = 0; f < sc->num_sparse; f++)
        for (int32_t i = 0; i < b->batch_size; i++) {
            int32_t l = b->sparse.lengths[(int64_t)f * b->batch_size + i];
            FUZZ_REQUIRE(l >= 0 && l <= 65535, "length %d", (int)l);
            for (int32_t j = 0; j < l; j++, k++) /* rows 0: a 64-bit key, any value */
                FUZZ_REQUIRE(sc->rows[f] == 0 || (b->sparse.ids[k] >= 0 && b->sparse.ids[k] < sc->rows[f]),
                             "id %lld of feature %d (rows %lld)", (long long)b->sparse.ids[k], (int)f,
                             (long long)sc->rows[f]);
        }
    FUZZ_REQUIRE(k == b->sparse.num_ids, "lengths sum to %lld, num_ids %lld", (long long)k,
                 (long long)b->sparse.num_ids);
}

static int64_t read_pass(ctr_source *s, int32_t max, uint64_t *sum)
{
    char err[512];
    const ctr_schema *sc = ctr_source_schema(s);
    int64_t total = 0;
    *sum = 0;
    for (int calls = 0;; calls++) {
        FUZZ_REQUIRE(calls < 1000000, "no end after %d batches", calls);
        ctr_batch b;
        err[0] = '\0';
        int64_t n = ctr_source_next(s, max, &b, err, sizeof err);
        if (n < 0) {
            FUZZ_REQUIRE(err[0] != '\0', "failure without a message");
            return -1;
        }
        if (n == 0)
            return total;
        check_batch(&b, max, sc);
        for (int32_t i = 0; i < b.batch_size; i++)
            *sum = *sum * 31 + (b.label[i] != 0.0f);
        for (int64_t i = 0; i < b.sparse.num_ids; i++)
            *sum = *sum * 1000003 + (uint64_t)b.sparse.ids[i];
        total += n;
    }
}

static void run(const unsigned char *p, size_t size)
{
    static const int32_t shares[][2] = {{0, 1}, {1, 2}};
    fuzz_file_set(&file, p, size);
    for (int k = 0; k < 2; k++) {
        ctr_source *s = NULL;
        char err[512] = "";
        if (ctr_source_binary(file.path, shares[k][0], shares[k][1], &s, err, sizeof err) != 0) {
            FUZZ_REQUIRE(s == NULL && err[0] != '\0', "failed open without a message");
            return; /* the header is the same for every share */
        }
        const ctr_schema *sc = ctr_source_schema(s);
        for (int32_t f = 0; f < sc->num_sparse; f++) /* keys only in version 2 */
            FUZZ_REQUIRE(sc->rows[f] > 0 || fz_get_u32(p + 8) == 2, "feature %d: rows 0 in version %u", (int)f,
                         fz_get_u32(p + 8));
        uint64_t sum1, sum2;
        int64_t n1 = read_pass(s, 3, &sum1);
        ctr_source_rewind(s);
        int64_t n2 = read_pass(s, 3, &sum2);
        if (n1 >= 0)
            FUZZ_REQUIRE(n2 == n1 && sum2 == sum1, "second pass: %lld samples (first %lld)", (long long)n2,
                         (long long)n1);
        ctr_source_destroy(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file_init(&file, "fuzz.ctrbin");
    fuzz_as_is_and_fixed(data, size, run, fix_checksums);
    return 0;
}
