/*
 * tool_ctx.c: the `ember` tool's world (tool_ctx.h): MPI start and end when
 * launched by mpirun, and the tool's own small collectives over
 * MPI_COMM_WORLD (status agreement, reductions of statistics).  ember's
 * world duplicates MPI_COMM_WORLD, so these never mix with its messages.
 * Alone, nothing here calls MPI: a run without mpirun needs no MPI at all.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember-mpi.h"
#include "tool_ctx.h"

/* Launched by mpirun (or another MPI launcher) rather than from a shell. */
static int launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int tool_ctx_init(tool_ctx *ctx, int *argc, char ***argv)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->size = 1;
    ctx->local_ranks = 1;
    ctx->err = stderr;
    if (!launched_by_mpirun())
        return 0;

    int provided = 0, rank = 0, size = 1;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "ember: MPI_Init_thread failed\n");
        return 1;
    }
    ctx->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ctx->rank = rank;
    ctx->size = size;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    ctx->local_ranks = local && atoi(local) > 0 ? atoi(local) : size;
    if (rank != 0) {
        /* normal output is rank 0's; messages every rank shares are too */
        if (!freopen("/dev/null", "w", stdout) || !(ctx->err = fopen("/dev/null", "w")))
            ctx->err = stderr; /* better twice than never */
    }
    if (provided < MPI_THREAD_FUNNELED && rank == 0)
        fprintf(stderr, "ember: warning: MPI provides thread level %d, below FUNNELED\n", provided);
    int st = ember_world_from_mpi_comm(MPI_COMM_WORLD, &ctx->world);
    if (tool_any_failed(ctx, st != EMBER_OK, NULL)) {
        if (st != EMBER_OK)
            tool_local_error(ctx, "", "ember_world_from_mpi_comm: %s", ember_status_str(st));
        return 1;
    }
    return 0;
}

void tool_ctx_finish(tool_ctx *ctx)
{
    ember_world_destroy(ctx->world);
    ctx->world = NULL;
    if (ctx->err && ctx->err != stderr)
        fclose(ctx->err);
    ctx->err = stderr;
    if (ctx->mpi) {
        fflush(stdout);
        MPI_Finalize();
        ctx->mpi = 0;
    }
}

void tool_local_error(const tool_ctx *ctx, const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char rank[32] = "";
    if (ctx->size > 1)
        snprintf(rank, sizeof rank, "rank %d: ", (int)ctx->rank);
    fprintf(stderr, "ember%s%s: %s%s\n", *cmd ? " " : "", cmd, rank, msg);
    fflush(stderr);
}

int tool_agree_status(const tool_ctx *ctx, int status)
{
    if (!ctx->mpi)
        return status;
    int all = status;
    MPI_Allreduce(&status, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

int tool_any_failed(const tool_ctx *ctx, int failed, int32_t *first)
{
    int mine = failed ? (int)ctx->rank : INT_MAX, low = mine;
    if (ctx->mpi)
        MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first)
        *first = low == INT_MAX ? -1 : low;
    return low != INT_MAX;
}

/* MPI counts are int: large arrays go in chunks. */
static void reduce(const tool_ctx *ctx, void *v, int64_t n, MPI_Datatype type, size_t size,
                   tool_reduce op)
{
    if (!ctx->mpi)
        return;
    for (int64_t at = 0; at < n;) {
        int k = n - at > INT_MAX ? INT_MAX : (int)(n - at);
        MPI_Allreduce(MPI_IN_PLACE, (char *)v + (size_t)at * size, k, type,
                      op == TOOL_MAX ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
        at += k;
    }
}

void tool_reduce_i64(const tool_ctx *ctx, int64_t *v, int64_t n, tool_reduce op)
{
    reduce(ctx, v, n, MPI_INT64_T, sizeof *v, op);
}

void tool_reduce_double(const tool_ctx *ctx, double *v, int64_t n, tool_reduce op)
{
    reduce(ctx, v, n, MPI_DOUBLE, sizeof *v, op);
}

void tool_barrier(const tool_ctx *ctx)
{
    if (ctx->mpi)
        MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 gets every rank's n elements of `size` bytes (MPI type t). */
static int gather(const tool_ctx *ctx, const void *v, int64_t n, size_t size, MPI_Datatype t, void **out,
                  int64_t *total)
{
    *out = NULL;
    *total = n;
    if (!ctx->mpi || ctx->size == 1) {
        *out = malloc((size_t)(n + 1) * size);
        if (!*out)
            return -1;
        memcpy(*out, v, (size_t)n * size);
        return 0;
    }
    int mine = n > INT_MAX ? INT_MAX : (int)n, ranks = ctx->size;
    int *counts = calloc((size_t)ranks * 2, sizeof *counts), *displ = counts ? counts + ranks : NULL;
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int64_t sum = 0;
    if (ctx->rank == 0 && counts)
        for (int r = 0; r < ranks; r++) {
            displ[r] = (int)sum;
            sum += counts[r];
        }
    int ok = ctx->rank != 0 || (counts && sum <= INT_MAX && (*out = malloc((size_t)(sum + 1) * size)));
    tool_reduce_i64(ctx, &sum, 1, TOOL_SUM); /* only rank 0's is non-zero: everyone learns the total */
    int64_t bad = !ok;
    tool_reduce_i64(ctx, &bad, 1, TOOL_MAX);
    if (!bad)
        MPI_Gatherv(v, mine, t, *out, counts, displ, t, 0, MPI_COMM_WORLD);
    free(counts);
    *total = sum;
    if (bad) {
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int tool_gather_floats(const tool_ctx *ctx, const float *v, int64_t n, float **out, int64_t *total)
{
    return gather(ctx, v, n, sizeof(float), MPI_FLOAT, (void **)out, total);
}

int tool_gather_i64(const tool_ctx *ctx, const int64_t *v, int64_t n, int64_t **out, int64_t *total)
{
    return gather(ctx, v, n, sizeof(int64_t), MPI_INT64_T, (void **)out, total);
}

int tool_agree_fail(const tool_ctx *ctx, const char *cmd, int failed, const char *msg)
{
    int32_t first = -1;
    if (!tool_any_failed(ctx, failed, &first))
        return 0;
    if (first == ctx->rank)
        tool_local_error(ctx, cmd, "%s", msg);
    return 1;
}

double tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
