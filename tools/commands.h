/*
 * commands.h: the subcommands of the `ember` tool, one file each.
 * Each takes the arguments after its name (argv[0] is the subcommand) and
 * returns the process exit status: 0 success, 1 failure, 2 usage error.
 * Subcommands use only the public API (include/ember.h).
 */
#ifndef EMBER_TOOLS_COMMANDS_H
#define EMBER_TOOLS_COMMANDS_H

int cmd_bench(int argc, char **argv);
int cmd_limits(int argc, char **argv);
int cmd_gen(int argc, char **argv);

#endif
