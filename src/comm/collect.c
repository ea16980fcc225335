/*
 * collect.c: the small collectives of collect.h, on the world's own
 * operations (comm.h) without its byte counters.
 *
 * Reductions are all-gathers of the ranks' values, combined on every rank
 * in rank order, a chunk at a time (the scratch stays small whatever the
 * array).  The gather to rank 0 goes in rounds of one alltoallv in which
 * every rank sends rank 0 its next chunk: displacements stay within MPI's
 * int counts however many values rank 0 collects.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/collect.h"
#include "comm/comm.h"

#define SCRATCH_BYTES 32768           /* reductions: gathered values per chunk */
#define GATHER_ROUND_BYTES (64 << 20) /* gather: rank 0's staging per round    */

int ember_comm_any_failed(ember_world *w, int failed, int32_t *first)
{
    int32_t low = failed ? ember_world_rank(w) : INT32_MAX;
    if (w && w->size > 1) {
        int32_t all[w->size], mine = low;
        if (w->ops->allgather(w, &mine, sizeof mine, all) != EMBER_OK) {
            if (first)
                *first = -1; /* no root every rank would agree on */
            return 1;
        } else {
            for (int32_t r = 0; r < w->size; r++)
                low = all[r] < low ? all[r] : low;
        }
    }
    if (first)
        *first = low == INT32_MAX ? -1 : low;
    return low != INT32_MAX;
}

int ember_comm_agree_max(ember_world *w, int status)
{
    int64_t v = status;
    if (ember_comm_reduce_i64(w, &v, 1, EMBER_REDUCE_MAX) != EMBER_OK && v < 1)
        v = 1;
    return (int)v;
}

/* The reductions: a chunk of k values at a time is all-gathered into
 * all[W][k] and combined in rank order. */
typedef void (*combine_fn)(void *v, const void *all, int32_t W, int64_t k, ember_reduce_op op);

/* One combine_fn per type: acc over ranks 0, 1, ..., W-1 for each value. */
#define COMBINE(name, type)                                                                        \
    static void name(void *v, const void *all, int32_t W, int64_t k, ember_reduce_op op)           \
    {                                                                                              \
        type *x = v;                                                                               \
        const type *a = all;                                                                       \
        for (int64_t i = 0; i < k; i++) {                                                          \
            type acc = a[i];                                                                       \
            for (int32_t r = 1; r < W; r++) {                                                      \
                type y = a[r * k + i];                                                             \
                acc = op == EMBER_REDUCE_SUM ? acc + y : y > acc ? y : acc;                        \
            }                                                                                      \
            x[i] = acc;                                                                            \
        }                                                                                          \
    }
COMBINE(combine_i64, int64_t)
COMBINE(combine_double, double)

static int reduce(ember_world *w, void *v, int64_t n, size_t size, ember_reduce_op op, combine_fn combine)
{
    if (!w || w->size == 1 || n <= 0)
        return EMBER_OK;
    const int32_t W = w->size;
    int64_t chunk = SCRATCH_BYTES / ((int64_t)size * W);
    chunk = chunk < 1 ? 1 : chunk > n ? n : chunk;
    /* the same chunks on every rank (n is the same): a local decision */
    _Alignas(8) char stack[SCRATCH_BYTES];
    size_t bytes = (size_t)chunk * size * (size_t)W;
    char *all = bytes <= sizeof stack ? stack : malloc(bytes); /* a world of thousands of ranks */
    int st = EMBER_OK;
    int32_t first = -1;
    /* the heap's scratch, agreed (bytes is the same on every rank): a rank
     * without it must not leave the others in the all-gathers below */
    if (bytes > sizeof stack && ember_comm_any_failed(w, !all, &first)) {
        if (first >= 0)
            snprintf(w->errmsg, sizeof w->errmsg, "reduction on rank %d: out of memory", (int)first);
        st = EMBER_ECOMM;
    }
    for (int64_t at = 0; st == EMBER_OK && at < n; at += chunk) {
        int64_t k = n - at < chunk ? n - at : chunk;
        char *x = (char *)v + (size_t)at * size;
        if ((st = w->ops->allgather(w, x, k * (int64_t)size, all)) == EMBER_OK)
            combine(x, all, W, k, op);
    }
    if (all != stack)
        free(all);
    return st;
}

int ember_comm_reduce_i64(ember_world *w, int64_t *v, int64_t n, ember_reduce_op op)
{
    return reduce(w, v, n, sizeof *v, op, combine_i64);
}

int ember_comm_reduce_double(ember_world *w, double *v, int64_t n, ember_reduce_op op)
{
    return reduce(w, v, n, sizeof *v, op, combine_double);
}

/* Rank 0 gets every rank's n elements of `size` bytes, in rounds of one
 * alltoallv: in round j every rank sends its elements [j c, j c + c) and
 * rank 0 receives them into staging[W][c], then moves them into place. */
static int gather(ember_world *w, const void *v, int64_t n, size_t size, void **out, int64_t *total)
{
    *out = NULL;
    *total = n;
    if (!w || w->size == 1) {
        if (!(*out = malloc((size_t)(n + 1) * size)))
            return ember_handle_fail(w ? &w->head : NULL, EMBER_ENOMEM, "gather: out of memory for %lld values",
                                     (long long)n);
        if (n > 0)
            memcpy(*out, v, (size_t)n * size);
        return EMBER_OK;
    }
    const int32_t W = w->size, rank = w->rank;
    int64_t counts[W], scount[W], sdispl[W], rcount[W], rdispl[W], most = 0, sum = 0;
    int st = w->ops->allgather(w, &n, sizeof n, counts);
    if (st != EMBER_OK)
        return st;
    for (int32_t r = 0; r < W; r++) {
        sum += counts[r];
        most = counts[r] > most ? counts[r] : most;
    }
    *total = sum;
    int64_t c = GATHER_ROUND_BYTES / ((int64_t)size * W);
    c = c < 1 ? 1 : c > most ? most : c;
    char *all = NULL, *staging = NULL;
    int64_t ok = 1;
    if (rank == 0) {
        all = malloc((size_t)(sum + 1) * size);
        staging = malloc((size_t)(c * W + 1) * size);
        ok = all && staging;
    }
    if ((st = w->ops->bcast(w, &ok, sizeof ok, 0)) != EMBER_OK || !ok) {
        free(all);
        free(staging);
        return st != EMBER_OK ? st : ember_handle_fail(&w->head, EMBER_ENOMEM, "gather: rank 0 is out of memory "
                                                       "for %lld values", (long long)sum);
    }
    for (int64_t at = 0; at < most && st == EMBER_OK; at += c) {
        int64_t mine = n - at < c ? n - at : c; /* this rank's elements this round */
        mine = mine < 0 ? 0 : mine;
        for (int32_t r = 0; r < W; r++) {
            int64_t k = counts[r] - at < c ? counts[r] - at : c;
            scount[r] = r == 0 ? mine * (int64_t)size : 0;
            sdispl[r] = 0;
            rcount[r] = rank == 0 && k > 0 ? k * (int64_t)size : 0;
            rdispl[r] = rank == 0 ? (int64_t)r * c * (int64_t)size : 0;
        }
        const char *send = mine > 0 ? (const char *)v + (size_t)at * size : v;
        st = w->ops->alltoallv(w, send, scount, sdispl, staging, rcount, rdispl);
        for (int64_t r = 0, off = 0; rank == 0 && st == EMBER_OK && r < W; off += counts[r++])
            if (rcount[r] > 0)
                memcpy(all + (size_t)(off + at) * size, staging + (size_t)rdispl[r], (size_t)rcount[r]);
    }
    free(staging);
    if (st != EMBER_OK) {
        free(all);
        return st;
    }
    *out = all;
    return EMBER_OK;
}

int ember_comm_gather_floats(ember_world *w, const float *v, int64_t n, float **out, int64_t *total)
{
    return gather(w, v, n, sizeof *v, (void **)out, total);
}

int ember_comm_gather_i64(ember_world *w, const int64_t *v, int64_t n, int64_t **out, int64_t *total)
{
    return gather(w, v, n, sizeof *v, (void **)out, total);
}

int ember_comm_barrier(ember_world *w)
{
    if (!w || w->size == 1)
        return EMBER_OK;
    char mine = 0, all[w->size];
    return w->ops->allgather(w, &mine, 1, all);
}

int32_t ember_comm_local_ranks(const ember_world *w)
{
    int32_t size = ember_world_size(w);
    if (size == 1)
        return 1;
    if (w->local_size > 0) /* MPI_COMM_TYPE_SHARED, where the world was made */
        return w->local_size;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    return local && atoi(local) > 0 ? (int32_t)atoi(local) : size;
}
