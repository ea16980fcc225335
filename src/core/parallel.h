/*
 * parallel.h: the one parallel pattern the step repeats: keep some of n
 * items, in order, writing the kept ones densely (keys of kept entries,
 * starts of runs).  Static chunks count what they keep, a prefix sum gives
 * each chunk its first slot, then each chunk writes its own: the output is
 * the same for any thread count.
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

/* For i in [0, n) in order: if KEEP (an expression of i), EMIT (a
 * statement of i and the next slot k); the number kept goes to *OUT.  A
 * macro, not a function taking callbacks: GCC outlines an OpenMP region
 * before it inlines, so callbacks passed to a function stay indirect calls,
 * two per item (measured: about 3 ms of a 31 ms W1 backward).  Runs on one thread
 * below MIN_PARALLEL items.  KEEP and EMIT see i and k as int64_t. */
#define EMBER_PARALLEL_COMPACT(OUT, N, THREADS, MIN_PARALLEL, KEEP, EMIT)                     \
    do {                                                                                    \
        int64_t n_ = (N), count_[EMBER_COMPACT_MAX_CHUNKS + 1] = {0};                        \
        int threads_ = (THREADS), used_ = 1;                                                  \
        if (n_ < (MIN_PARALLEL) || threads_ < 1)                                              \
            threads_ = 1;                                                                     \
        if (threads_ > EMBER_COMPACT_MAX_CHUNKS)                                              \
            threads_ = EMBER_COMPACT_MAX_CHUNKS;                                              \
        _Pragma("omp parallel num_threads(threads_)")                                        \
        {                                                                                     \
            int t_ = omp_get_thread_num(), nt_ = omp_get_num_threads();                       \
            int64_t lo_ = n_ * t_ / nt_, hi_ = n_ * (t_ + 1) / nt_, k = 0;                    \
            for (int64_t i = lo_; i < hi_; i++)                                               \
                k += (KEEP) ? 1 : 0;                                                          \
            count_[t_ + 1] = k;                                                               \
            _Pragma("omp barrier")                                                            \
            _Pragma("omp single")                                                             \
            {                                                                                 \
                used_ = nt_;                                                                  \
                for (int u_ = 1; u_ <= nt_; u_++)                                             \
                    count_[u_] += count_[u_ - 1];                                             \
            }                                                                                 \
            k = count_[t_];                                                                   \
            for (int64_t i = lo_; i < hi_; i++)                                               \
                if (KEEP) {                                                                   \
                    EMIT;                                                                     \
                    k++;                                                                      \
                }                                                                             \
        }                                                                                     \
        *(OUT) = count_[used_];                                                               \
    } while (0)

#endif
