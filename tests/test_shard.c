/*
 * test_shard.c: the ROW placement's owner and local row (src/table/shard.h),
 * computed with a multiply instead of a division, against plain % and /.
 *
 * Every W in 1..4100, then random W up to 2^31 - 1 and powers of two; for
 * each, random 32-bit rows plus the edges (0, 1, W - 1, W, W + 1, multiples
 * of W and their neighbours, 2^32 - 2 and 2^32 - 1).  Exact equality: any
 * difference is a wrong owner.  It prints its seed; test_shard SEED reruns.
 */
#include <stdint.h>

#include "check.h"
#include "table/shard.h"
#include "util.h"

static int64_t misses;

static void check_row(int32_t W, uint64_t magic, uint32_t row)
{
    uint32_t q = ember_shard_div(magic, W, row), r = ember_shard_mod(magic, W, row);
    if (q != row / (uint32_t)W || r != row % (uint32_t)W) {
        if (misses++ < 5)
            fprintf(stderr, "W %d row %u: div %u (want %u), mod %u (want %u)\n", W, row, q,
                    row / (uint32_t)W, r, row % (uint32_t)W);
    }
}

static void check_world(test_rng *rng, int32_t W, int random_rows)
{
    uint64_t m = ember_shard_magic(W);
    uint32_t edges[] = {0, 1, (uint32_t)W - 1, (uint32_t)W, (uint32_t)W + 1, UINT32_MAX - 1, UINT32_MAX};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        check_row(W, m, edges[i]);
    for (int i = 0; i < random_rows; i++) {
        uint32_t row = (uint32_t)test_next(rng);
        check_row(W, m, row);
        uint32_t k = row / (uint32_t)W * (uint32_t)W; /* a multiple of W, and its neighbours */
        check_row(W, m, k);
        check_row(W, m, k - 1);
        check_row(W, m, k + 1);
    }
}

int main(int argc, char **argv)
{
    test_rng rng = {test_seed(argc, argv)};
    for (int32_t W = 1; W <= 4100; W++)
        check_world(&rng, W, 200);
    for (int i = 0; i < 2000; i++)
        check_world(&rng, (int32_t)test_range(&rng, 2, INT32_MAX), 200);
    for (int b = 1; b < 31; b++)
        check_world(&rng, (int32_t)1 << b, 1000);
    CHECK_MSG(misses == 0, "%lld rows with a wrong owner or local row", (long long)misses);
    CHECK(ember_shard_magic(1) == 0);
    CHECK(ember_shard_div(0, 1, 12345) == 12345 && ember_shard_mod(0, 1, 12345) == 0);
    return check_report("test_shard");
}
