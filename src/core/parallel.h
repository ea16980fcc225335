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
