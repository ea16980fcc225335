/*
 * commands.h: the subcommands of the `ember` tool, one file each.
 * Each takes the tool context (tool_ctx.h: the world it runs in, alone or
 * under mpirun, and where its messages go) and the arguments after its name
 * (argv[0] is the subcommand), and returns the process exit status: 0
 * success, 1 failure, 2 usage error; every rank of a world returns the
 * same one.  Subcommands parse, call the library through its public API
 * (include/ember*.h) and print: they include no header of src/ (the test
 * public_headers checks), and the work each does is a library call.
 */
#ifndef EMBER_TOOLS_COMMANDS_H
#define EMBER_TOOLS_COMMANDS_H

#include "tool_ctx.h"

int cmd_bench(const tool_ctx *ctx, int argc, char **argv);
int cmd_limits(const tool_ctx *ctx, int argc, char **argv);
int cmd_gen(const tool_ctx *ctx, int argc, char **argv);
int cmd_plan(const tool_ctx *ctx, int argc, char **argv);
int cmd_convert(const tool_ctx *ctx, int argc, char **argv);
int cmd_train(const tool_ctx *ctx, int argc, char **argv);
int cmd_inspect(const tool_ctx *ctx, int argc, char **argv);
int cmd_export(const tool_ctx *ctx, int argc, char **argv);
int cmd_predict(const tool_ctx *ctx, int argc, char **argv);
int cmd_serve(const tool_ctx *ctx, int argc, char **argv);

/* `ember inspect --samples N FILE [--config CFG]` (inspect_data.c); N < 0: all. */
int inspect_samples(const tool_ctx *ctx, const char *path, const char *config, int64_t max);

#endif
