/*
 * synth_args.h: the synthetic-workload options shared by `ember gen`,
 * `ember limits --synthetic` and `ember bench` (--preset, --tables, --rows,
 * --batch, --pooling, --dist, --alpha, --seed, --weighted; bench refuses
 * --weighted; the drift: --drift, --drift-every, --drift-rows,
 * --drift-tables, --drift-start).
 *
 * A preset fills every field first and explicit flags override it, whatever
 * their order on the command line.  The presets, the only table of them, are
 * the benchmark workloads of docs/PERFORMANCE.md (W1, W2, W3) plus "quick",
 * the default; each also carries the row width `ember bench` uses.
 */
#ifndef EMBER_TOOLS_SYNTH_ARGS_H
#define EMBER_TOOLS_SYNTH_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "ember.h"

typedef struct synth_args {
    const char *preset;      /* NULL: "quick"                             */
    int32_t tables, batch, pooling; /* 0: from the preset                  */
    int64_t rows;            /* 0: from the preset                        */
    int zipf;                /* -1: from the preset                       */
    double alpha;            /* 0: ember_synth_config_default()'s         */
    int weighted;
    int seed_given;
    uint64_t seed;
    ember_drift drift;       /* EMBER_DRIFT_NONE: no --drift               */
    int64_t drift_every, drift_rows, drift_start; /* 0: not given          */
    int32_t drift_tables;
    FILE *err;               /* where usage errors go: stderr (init); under
                                MPI the tool's ctx->err, so they print once */
} synth_args;

void synth_args_init(synth_args *a);

/* Tries to take the generator option named `name` with value `val` (NULL
 * when the flag takes none).  Returns 1 if it was one (and was valid), 0 if
 * it is not a generator option, -1 for a bad value (message on a->err,
 * prefixed with cmd).  *used_val says whether val was consumed. */
int synth_args_take(synth_args *a, const char *cmd, const char *name, const char *val,
                    int *used_val);

/* The generator config: preset, then explicit flags.  0, or 2 (usage error,
 * message on a->err) for an unknown preset. */
int synth_args_config(const synth_args *a, const char *cmd, ember_synth_config *out);

/* The preset's row width (`ember bench`'s default --dim); 0 for an unknown
 * preset, which synth_args_config() reports. */
int32_t synth_args_dim(const synth_args *a);

/* Parses a decimal integer in [lo, hi]; 0 on success. */
int synth_parse_int64(const char *s, int64_t lo, int64_t hi, int64_t *out);

#endif
