/*
 * tool_ctx.h: what every subcommand of `ember` gets besides its arguments:
 * the world it runs in, and the rules of its output under MPI.
 *
 * Every subcommand runs alone and under `mpirun -np N`.  Launched by mpirun
 * (Open MPI sets OMPI_COMM_WORLD_SIZE; PMI_SIZE or PMIX_RANK for other
 * launchers), main() initialises MPI (MPI_THREAD_FUNNELED: ember calls MPI
 * only from the calling thread) and makes a world over MPI_COMM_WORLD;
 * alone it never touches MPI and the world is NULL (a world of one).
 *
 * Output rules under MPI: normal output (JSON lines, tables) is rank 0's
 * only (main points stdout of the other ranks at /dev/null, so a subcommand
 * may print unconditionally); a message every rank would print alike (a
 * usage error, the agreed status of a collective ember call, whose message
 * already names the failing rank) goes to ctx->err, which is stderr on rank
 * 0 and a sink elsewhere; an error only this rank saw goes through
 * tool_local_error(), "ember CMD: rank R: ..." on stderr.  Exit codes are
 * agreed (the largest over ranks), so every rank exits with the same one.
 *
 * A rank must never leave the others waiting in a collective call: before
 * each collective step a subcommand agrees on its local failures with
 * ember_world_any_failed() (ember.h, over ctx->world, like the reductions
 * and gathers of statistics) and all ranks bail out together.
 */
#ifndef EMBER_TOOLS_TOOL_CTX_H
#define EMBER_TOOLS_TOOL_CTX_H

#include <stdint.h>
#include <stdio.h>

#include "ember.h"

typedef struct tool_ctx {
    ember_world *world;  /* collections' cfg.world: NULL alone (a world of one) */
    int32_t rank, size;  /* 0 and 1 alone                                       */
    int mpi;             /* 1: launched by mpirun, MPI initialised by main()    */
    int32_t local_ranks; /* ranks on this node (ember_world_local_ranks)        */
    FILE *err;           /* messages every rank would print alike: stderr on
                            rank 0, a sink on the others                        */
} tool_ctx;

/* Detects mpirun, initialises MPI and the world (collective), points stdout
 * of ranks other than 0 at /dev/null.  0, or 1 after printing the problem. */
int tool_ctx_init(tool_ctx *ctx);
/* Destroys the world and finalises MPI (when tool_ctx_init started it). */
void tool_ctx_finish(tool_ctx *ctx);

/* "ember CMD: rank R: <message>\n" on this rank's stderr ("rank R: " only
 * in a world of more than one). */
void tool_local_error(const tool_ctx *ctx, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ember_world_any_failed, and the lowest failing rank prints msg as cmd's
 * error: 1 on every rank when any failed, else 0. */
int tool_agree_fail(const tool_ctx *ctx, const char *cmd, int failed, const char *msg);

/* Seconds on a monotonic clock (CLOCK_MONOTONIC). */
double tool_now(void);

#endif
