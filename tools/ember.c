/*
 * ember.c: entry point of the `ember` command; dispatches to one file per
 * subcommand (tools/cmd_*.c).  Only this tool prints and exits; the library
 * never does.
 *
 * Launched by mpirun, main() starts MPI and the world before anything else
 * and finalises it after the subcommand, whose exit status is agreed over
 * the ranks (tool_ctx.h); alone, MPI is never touched.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ember.h"
#include "tool_ctx.h"

typedef struct command {
    const char *name;
    int (*run)(const tool_ctx *ctx, int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"bench", cmd_bench, "kernel throughput as JSON lines (default: a small W1-shaped run)"},
    {"limits", cmd_limits, "observed per-partition id counts and suggested limits"},
    {"gen", cmd_gen, "write synthetic batches to a batch file"},
    {"plan", cmd_plan, "a placement per table for N ranks, and each rank's bytes per step"},
    {"convert", cmd_convert, "CSV/TSV by a config's schema, or Criteo TSV, to ember's binary CTR format"},
    {"train", cmd_train, "train a DLRM-style CTR model (default: the built-in synthetic task)"},
    {"inspect", cmd_inspect, "what a checkpoint, a bundle or (--samples) a data file holds"},
    {"export", cmd_export, "an inference bundle (quantized tables), or one table as (key, row) records"},
    {"predict", cmd_predict, "one score per sample of a data file read as training read it (the model's schema)"},
    {"serve", cmd_serve, "an HTTP scoring endpoint for a bundle or a checkpoint (micro-batched)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: ember <command> [options]   (ember <command> --help for its options)\n\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(f, "  %-8s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\nEvery command also runs under `mpirun -np N`: data-parallel input (rank r\n"
               "takes samples [r*B/N, (r+1)*B/N) of each global batch), output from rank 0.\n");
    fprintf(f, "\nember %s\n", ember_version());
}

/* The subcommand's status, or the tool's own. */
static int dispatch(const tool_ctx *ctx, int argc, char **argv)
{
    if (argc < 2) {
        usage(ctx->err);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ember %s\n", ember_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name))
            return COMMANDS[i].run(ctx, argc - 1, argv + 1);
    fprintf(ctx->err, "ember: unknown command '%s'\n\n", argv[1]);
    usage(ctx->err);
    return 2;
}

int main(int argc, char **argv)
{
    tool_ctx ctx;
    int status = tool_ctx_init(&ctx);
    if (status == 0) {
        status = dispatch(&ctx, argc, argv);
        fflush(stdout);
        status = ember_world_max_status(ctx.world, status);
    }
    tool_ctx_finish(&ctx);
    return status;
}
