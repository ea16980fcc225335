/*
 * fuzz_batch_file.c: libFuzzer target for the batch file reader
 * (ember_batch_reader_open / _next, src/data/batch_file.c;
 * docs/batch-format.md).
 *
 * Input: the file's bytes.  Each input is read twice: as it is, and with the
 * checksum of the header and of every record recomputed (walking the records
 * by their own counts), so that the fuzzer also reaches the checks behind
 * the checksums (lengths, ids against the tables' rows, the end record's
 * count, stray bytes).  Required: open and every next return success or a
 * negative status with a message in ember_errmsg(NULL), never a crash, UB,
 * leak or hang; a failure repeats; every batch handed out is well formed
 * (the header's feature count, lengths >= 0 that add up to num_ids, each id
 * inside its feature's table).
 */
#include <xxhash.h>

#include "ember.h"
#include "fuzz_util.h"

static fuzz_file file;

static void fix_checksums(unsigned char *p, size_t size)
{
    if (size < 24 || memcmp(p, "EMBBATCH", 8) != 0)
        return;
    uint64_t T = fz_get_u32(p + 16), F = fz_get_u32(p + 20);
    uint64_t pos = 24 + 8 * T + 4 * F; /* < 2^36: no overflow */
    if (pos + 8 > size)
        return;
    fz_put_u64(p + pos, XXH64(p, (size_t)pos, 0));
    pos += 8;
    for (;;) {
        if (size - pos < 4)
            return;
        uint32_t marker = fz_get_u32(p + pos);
        if (marker == 0x444E4542u) { /* end record */
            if (size - pos >= 20)
                fz_put_u64(p + pos + 12, XXH64(p + pos, 12, 0));
            return;
        }
        if (marker != 0x43455242u || size - pos < 20)
            return;
        uint64_t bsz = fz_get_u32(p + pos + 4), nids = fz_get_u64(p + pos + 8);
        uint32_t flags = fz_get_u32(p + pos + 16);
        uint64_t left = size - pos - 20;
        if (bsz * F > left / 4) /* bsz, F < 2^32 */
            return;
        left -= 4 * bsz * F;
        uint64_t per_id = (flags & 1) ? 12 : 8;
        if (nids > left / per_id)
            return;
        uint64_t len = 20 + 4 * bsz * F + per_id * nids;
        if (size - pos - len < 8)
            return;
        fz_put_u64(p + pos + len, XXH64(p + pos, (size_t)len, 0));
        pos += len + 8;
    }
}

static void run(const unsigned char *p, size_t size)
{
    fuzz_file_set(&file, p, size);
    ember_batch_reader *r = NULL;
    int rc = ember_batch_reader_open(file.path, &r);
    if (rc != EMBER_OK) {
        FUZZ_REQUIRE(rc < 0 && r == NULL && ember_errmsg(NULL)[0] != '\0', "open: status %d, no message",
                     rc);
        return;
    }
    const ember_batch_file_info *info = ember_batch_reader_info(r);
    FUZZ_REQUIRE(info->num_tables >= 1 && info->num_features >= 1, "info counts");
    for (int32_t f = 0; f < info->num_features; f++)
        FUZZ_REQUIRE(info->feature_table[f] >= 0 && info->feature_table[f] < info->num_tables,
                     "feature_table[%d] = %d", (int)f, (int)info->feature_table[f]);
    for (int32_t t = 0; t < info->num_tables; t++)
        FUZZ_REQUIRE(info->table_rows[t] >= 1, "table_rows[%d]", (int)t);
    for (int calls = 0;; calls++) {
        FUZZ_REQUIRE(calls < 1000000, "no end after %d batches", calls);
        ember_batch b;
        memset(&b, 0, sizeof b);
        rc = ember_batch_reader_next(r, &b);
        if (rc < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ember_errmsg(NULL));
            FUZZ_REQUIRE(msg[0] != '\0', "next: status %d without a message", rc);
            FUZZ_REQUIRE(ember_batch_reader_next(r, &b) == rc && !strcmp(msg, ember_errmsg(NULL)),
                         "failure did not repeat");
            break;
        }
        if (rc == 0) {
            FUZZ_REQUIRE(ember_batch_reader_next(r, &b) == 0, "end did not repeat");
            break;
        }
        FUZZ_REQUIRE(rc == 1, "next returned %d", rc);
        FUZZ_REQUIRE(b.num_features == info->num_features && b.batch_size >= 0 && b.num_ids >= 0,
                     "batch shape");
        int64_t k = 0;
        for (int32_t f = 0; f < b.num_features; f++) {
            int64_t rows = info->table_rows[info->feature_table[f]];
            for (int32_t s = 0; s < b.batch_size; s++) {
                int32_t l = b.lengths[(int64_t)f * b.batch_size + s];
                FUZZ_REQUIRE(l >= 0 && k + l <= b.num_ids, "length %d", (int)l);
                for (int32_t j = 0; j < l; j++, k++)
                    FUZZ_REQUIRE(b.ids[k] >= 0 && b.ids[k] < rows, "id %lld", (long long)b.ids[k]);
            }
        }
        FUZZ_REQUIRE(k == b.num_ids, "lengths sum to %lld, num_ids %lld", (long long)k, (long long)b.num_ids);
        volatile float w = 0; /* weights must be readable */
        for (int64_t i = 0; b.weights && i < b.num_ids; i++)
            w += b.weights[i];
        (void)w;
    }
    ember_batch_reader_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file_init(&file, "fuzz.batches");
    fuzz_as_is_and_fixed(data, size, run, fix_checksums);
    return 0;
}
