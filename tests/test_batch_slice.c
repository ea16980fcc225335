/*
 * test_batch_slice.c: the library scans' data-parallel input
 * (src/api/batch_slice.c): rank r of W keeps samples [r*B/W, (r+1)*B/W) of
 * the global batch.
 *
 * On fresh random jagged batches (empty bags included, with and without
 * weights) and every W in 1..9 (more ranks than samples too): the ranges
 * tile [0, B) in rank order and differ by at most one sample; each slice's
 * bags equal the global batch's bags of those samples (checked against a
 * naive per-bag offset table); concatenating the slices per feature gives
 * back the global ids.  Malformed batches (a negative length, lengths past
 * or short of num_ids, a range outside the batch) are refused.  It prints
 * its seed; test_batch_slice SEED reruns a case.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ember.h"
#include "util.h"
#include "api/batch_slice.h"

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* One random trial: a batch of B samples and F features. */
static void trial(int32_t B, int32_t F, int weighted)
{
    int32_t *len = malloc(sizeof(int32_t) * (size_t)(B * F + 1));
    int64_t n = 0;
    for (int32_t i = 0; i < B * F; i++) {
        len[i] = (rnd() % 4 == 0) ? 0 : (int32_t)(rnd() % 7);
        n += len[i];
    }
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(n + 1));
    float *w = malloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        ids[i] = (int64_t)(rnd() % 1000);
        w[i] = (float)i + 0.5f;
    }
    /* naive bag offsets: off[f*B + b] */
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(B * F + 1));
    int64_t at = 0;
    for (int32_t i = 0; i < B * F; i++) {
        off[i] = at;
        at += len[i];
    }
    ember_batch g = {B, F, len, ids, weighted ? w : NULL, n};

    for (int32_t W = 1; W <= 9; W++) {
        int32_t next = 0;
        int64_t *seen = calloc((size_t)F, sizeof(int64_t)); /* ids of feature f so far */
        batch_slice s = {0};
        for (int32_t r = 0; r < W; r++) {
            int32_t first, count;
            batch_slice_range(B, r, W, &first, &count);
            CHECK_MSG(first == next, "W %d rank %d: first %d, want %d", W, r, first, next);
            CHECK(count == B / W || count == B / W + 1);
            next = first + count;
            CHECK(batch_slice_take(&s, &g, r, W) == 0);
            const ember_batch *l = &s.batch;
            CHECK(l->batch_size == count && l->num_features == F);
            CHECK((l->weights != NULL) == (weighted != 0));
            int64_t k = 0, ok = 1;
            for (int32_t f = 0; f < F; f++)
                for (int32_t b = 0; b < count; b++) {
                    int32_t L = l->lengths[(int64_t)f * count + b];
                    ok &= L == len[f * B + first + b];
                    for (int32_t i = 0; i < L && ok; i++, k++) {
                        ok &= l->ids[k] == ids[off[f * B + first + b] + i];
                        if (weighted)
                            ok &= l->weights[k] == w[off[f * B + first + b] + i];
                    }
                    seen[f] += L;
                }
            CHECK_MSG(ok, "W %d rank %d: slice differs from the global bags", W, r);
            CHECK(k == l->num_ids);
        }
        CHECK_MSG(next == B, "W %d: ranges end at %d, want %d", W, next, B);
        int64_t total = 0;
        for (int32_t f = 0; f < F; f++)
            total += seen[f];
        CHECK(total == n);
        batch_slice_free(&s);
        free(seen);
    }

    /* malformed batches and ranges */
    int64_t cnt;
    CHECK(batch_slice_count(&g, 0, B + 1, &cnt) == -1);
    CHECK(batch_slice_count(&g, -1, 1, &cnt) == -1);
    if (B * F > 0) {
        ember_batch bad = g;
        bad.num_ids = n + 1;
        CHECK(batch_slice_count(&bad, 0, B, &cnt) == -1);
        bad.num_ids = n - 1;
        CHECK(batch_slice_count(&bad, 0, B, &cnt) == -1);
        int32_t saved = len[0];
        len[0] = -1;
        batch_slice s = {0};
        CHECK(batch_slice_take(&s, &g, 0, 1) == -1);
        batch_slice_free(&s);
        len[0] = saved;
    }
    free(len);
    free(ids);
    free(w);
    free(off);
}

int main(int argc, char **argv)
{
    rng_state = test_seed(argc, argv);
    const int32_t shapes[][2] = {{1, 1}, {0, 3}, {3, 2}, {7, 1}, {16, 3}, {100, 4}, {1000, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int weighted = 0; weighted < 2; weighted++)
            trial(shapes[i][0], shapes[i][1], weighted);
    return check_report("test_batch_slice");
}
