/*
 * ember.c: entry point of the `ember` command; dispatches to one file per
 * subcommand (tools/cmd_*.c).  Only this tool prints and exits; the library
 * never does.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ember.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"bench", cmd_bench, "kernel throughput as JSON lines (default: a small W1-shaped run)"},
    {"limits", cmd_limits, "observed per-partition id counts and suggested limits"},
    {"gen", cmd_gen, "write synthetic batches to a batch file"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: ember <command> [options]   (ember <command> --help for its options)\n\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(f, "  %-8s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\nember %s\n", ember_version());
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
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
            return COMMANDS[i].run(argc - 1, argv + 1);
    fprintf(stderr, "ember: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
