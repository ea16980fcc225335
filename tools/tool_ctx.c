/*
 * tool_ctx.c: the `ember` tool's world (tool_ctx.h): MPI start and end when
 * launched by mpirun, the output rules of the ranks, and a failure agreed
 * and printed by the rank that saw it.  The collectives themselves are the
 * library's, over the world (ember.h, "world").  Alone, nothing here
 * calls MPI: a run without mpirun needs no MPI at all.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ember-mpi.h"
#include "tool_ctx.h"

int tool_ctx_init(tool_ctx *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->size = 1;
    ctx->local_ranks = 1;
    ctx->err = stderr;
    int initialised = 0, provided = 0;
    int st = ember_world_from_launcher(&ctx->world, &initialised, &provided);
    if (st == EMBER_ECOMM && !initialised) {
        fprintf(stderr, "ember: MPI_Init_thread failed\n");
        return 1;
    }
    ctx->mpi = initialised;
    if (!ctx->mpi)
        return 0; /* alone: no MPI at all */
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ctx->rank = rank;
    ctx->size = size;
    if (rank != 0) {
        /* normal output is rank 0's; messages every rank shares are too */
        /* opened, never created, and never through a link planted at its name */
        int fd = open("/dev/null", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        fflush(stdout);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || !(ctx->err = fdopen(fd, "w"))) {
            if (fd >= 0)
                close(fd);
            ctx->err = stderr; /* better twice than never */
        }
    }
    if (provided < MPI_THREAD_FUNNELED && rank == 0)
        fprintf(stderr, "ember: warning: MPI provides thread level %d, below FUNNELED\n", provided);
    int failed = st != EMBER_OK, any = failed;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD); /* no world to agree over yet */
    if (any) {
        if (failed)
            tool_local_error(ctx, "", "ember_world_from_mpi_comm: %s", ember_status_str(st));
        return 1;
    }
    ctx->local_ranks = ember_world_local_ranks(ctx->world);
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

int tool_agree_fail(const tool_ctx *ctx, const char *cmd, int failed, const char *msg)
{
    int32_t first = -1;
    if (!ember_world_any_failed(ctx->world, failed, &first))
        return 0;
    if (first == ctx->rank || (first < 0 && failed)) /* first < 0: the exchange failed */
        tool_local_error(ctx, cmd, "%s", msg);
    return 1;
}

double tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
