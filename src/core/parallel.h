/*
 * parallel.h: the one parallel pattern the step repeats: keep some of n
 * items, in order, writing the kept ones densely (keys of kept entries,
 * starts of runs).  Static chunks count what they keep, a prefix sum gives
 * each chunk its first slot, then each chunk writes its own: the output is
 * the same for any thread count.  keep and emit are constant functions at
 * every call site, so GCC inlines them into the loops.
 */
#ifndef EMBER_CORE_PARALLEL_H
#define EMBER_CORE_PARALLEL_H

#include <omp.h>
#include <stdint.h>

#define EMBER_COMPACT_MAX_CHUNKS 64

/* The other pattern: segments (bags) [g0, g1) split over nt threads by
 * their entries, whole segments only (start[g] = segment g's first entry,
 * start[g1] = the end).  Thread t gets [split(t), split(t + 1)): the first
 * segment whose first entry is at or past t/nt of the entries.  Every
 * segment goes to one thread, in a split that depends only on the counts,
 * so each output is summed in the same order whatever nt is. */
static inline int64_t ember_split_segments(const int64_t *start, int64_t g0, int64_t g1, int t, int nt)
{
    if (t <= 0)
        return g0;
    if (t >= nt)
        return g1;
    int64_t e = start[g0] + (start[g1] - start[g0]) * t / nt;
    while (g0 < g1) { /* the first segment starting at or after e */
        int64_t mid = g0 + (g1 - g0) / 2;
        if (start[mid] < e)
            g0 = mid + 1;
        else
            g1 = mid;
    }
    return g0;
}

/* For i in [0, n) in order: if keep(ctx, i), emit(ctx, i, next slot).
 * Returns the number kept.  Runs on one thread below min_parallel items. */
static inline int64_t ember_parallel_compact(int64_t n, int threads, int64_t min_parallel, void *ctx,
                                             int (*keep)(const void *, int64_t),
                                             void (*emit)(void *, int64_t, int64_t))
{
    int64_t count[EMBER_COMPACT_MAX_CHUNKS + 1] = {0};
    int used = 1;
    if (n < min_parallel || threads < 1)
        threads = 1;
    if (threads > EMBER_COMPACT_MAX_CHUNKS)
        threads = EMBER_COMPACT_MAX_CHUNKS;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = n * t / nt, hi = n * (t + 1) / nt, k = 0;
        for (int64_t i = lo; i < hi; i++)
            k += keep(ctx, i);
        count[t + 1] = k;
#pragma omp barrier
#pragma omp single
        {
            used = nt;
            for (int u = 1; u <= nt; u++)
                count[u] += count[u - 1];
        }
        k = count[t];
        for (int64_t i = lo; i < hi; i++)
            if (keep(ctx, i))
                emit(ctx, i, k++);
    }
    return count[used];
}

#endif
