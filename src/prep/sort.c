/*
 * sort.c: stable parallel LSD radix sort of 64-bit keys by a bit range.
 *
 * Backward aggregation and limit counting sort (row << 32 | entry) keys by
 * row.  Each pass splits the keys into equal contiguous chunks per thread,
 * histograms them, and scatters with offsets ordered by (digit, chunk): the
 * classic stable parallel counting sort.  Stability makes the output a pure
 * function of the input, whatever the thread count.  Digits are up to 11
 * bits so a pass's histogram (2048 x 8 bytes per thread) stays in L1/L2.
 * ember_route_sort_rows builds a route's keys and sorts them.
 */
#include <omp.h>
#include <string.h>

#include "core/parallel.h"
#include "prep/route.h"

void ember_radix_sort(uint64_t *keys, uint64_t *tmp, int64_t *hist, int64_t n, int lo_bit,
                      int hi_bit, int threads)
{
    if (n <= 1 || hi_bit <= lo_bit)
        return;
    int bits = hi_bit - lo_bit;
    int passes = (bits + EMBER_SORT_DIGIT_BITS - 1) / EMBER_SORT_DIGIT_BITS;
    int digit_bits = (bits + passes - 1) / passes;
    int64_t buckets = (int64_t)1 << digit_bits;
    if (threads < 1)
        threads = 1;
    if (threads > EMBER_SORT_MAX_THREADS)
        threads = EMBER_SORT_MAX_THREADS;
    if (n < 4096)
        threads = 1;
    uint64_t *src = keys, *dst = tmp;
    for (int p = 0; p < passes; p++) {
        int shift = lo_bit + p * digit_bits;
        uint64_t mask = (uint64_t)buckets - 1;
#pragma omp parallel num_threads(threads)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
            int64_t *h = hist + (int64_t)t * buckets;
            memset(h, 0, sizeof(int64_t) * (size_t)buckets);
            for (int64_t i = lo; i < hi; i++)
                h[(src[i] >> shift) & mask]++;
#pragma omp barrier
#pragma omp single
            {
                int64_t sum = 0;
                for (int64_t d = 0; d < buckets; d++)
                    for (int tt = 0; tt < nt; tt++) {
                        int64_t c = hist[(int64_t)tt * buckets + d];
                        hist[(int64_t)tt * buckets + d] = sum;
                        sum += c;
                    }
            }
            for (int64_t i = lo; i < hi; i++) {
                uint64_t k = src[i];
                dst[h[(k >> shift) & mask]++] = k;
            }
        }
        uint64_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != keys)
        memcpy(keys, src, sizeof(uint64_t) * (size_t)n);
}

void ember_route_sort_rows(ember_route *r, int64_t rows, int all, int64_t *hist, int threads)
{
    if (r->nkeys > 0 && r->sorted_all == all)
        return;
    /* entry e gets a key if kept, and (all, or the first of its id in its bag) */
    const uint32_t *row = r->row;
    const int32_t *leader = r->leader;
    uint64_t *keys = r->keys;
    EMBER_PARALLEL_COMPACT(&r->nkeys, r->n, threads, 65536,
                           row[i] != EMBER_ROW_DROPPED && (all || leader[i] == (int32_t)i),
                           keys[k] = (uint64_t)row[i] << 32 | (uint64_t)i);
    r->sorted_all = all;
    r->sources_ready = 0;
    int bits = rows > 1 ? 64 - __builtin_clzll((unsigned long long)(rows - 1)) : 0;
    ember_radix_sort(r->keys, r->keys_tmp, hist, r->nkeys, 32, 32 + bits, threads);
}
