/*
 * synth_args.c: parsing of the synthetic-workload options shared by
 * `ember gen`, `ember limits --synthetic` and `ember bench` (see synth_args.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth_args.h"

typedef struct synth_preset {
    const char *name;
    int32_t tables;
    int64_t rows;
    int32_t dim, batch, pooling;
    int zipf;
} synth_preset;

/* The benchmark workloads (docs/PERFORMANCE.md); dim is
 * only `ember bench`'s, it does not matter to the ids. */
static const synth_preset PRESETS[] = {
    {"quick", 8, 100000, 64, 1024, 20, 1},
    {"W1", 8, 1000000, 64, 4096, 20, 1},
    {"W2", 26, 100000, 128, 2048, 1, 1},
    {"W3", 1, 10000000, 128, 8192, 10, 0},
};

/* a's preset, NULL if unknown */
static const synth_preset *synth_preset_find(const synth_args *a)
{
    if (!a->preset)
        return &PRESETS[0];
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++)
        if (!strcmp(a->preset, PRESETS[i].name))
            return &PRESETS[i];
    return NULL;
}

void synth_args_init(synth_args *a)
{
    memset(a, 0, sizeof *a);
    a->zipf = -1;
    a->err = stderr;
}

int synth_parse_int64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int synth_args_take(synth_args *a, const char *cmd, const char *name, const char *val,
                    int *used_val)
{
    int64_t v = 0;
    int bad = 0;
    *used_val = 1;
    if (!strcmp(name, "--weighted")) {
        *used_val = 0;
        a->weighted = 1;
        return 1;
    }
    if (strcmp(name, "--preset") && strcmp(name, "--tables") && strcmp(name, "--rows") &&
        strcmp(name, "--batch") && strcmp(name, "--pooling") && strcmp(name, "--dist") &&
        strcmp(name, "--alpha") && strcmp(name, "--seed") && strncmp(name, "--drift", 7))
        return 0;
    if (strncmp(name, "--drift", 7) == 0 && strcmp(name, "--drift") && strcmp(name, "--drift-every") &&
        strcmp(name, "--drift-rows") && strcmp(name, "--drift-tables") && strcmp(name, "--drift-start"))
        return 0;
    if (!val) {
        fprintf(a->err, "ember %s: %s needs a value\n", cmd, name);
        return -1;
    }
    if (!strcmp(name, "--preset")) {
        a->preset = val;
    } else if (!strcmp(name, "--tables")) {
        bad = synth_parse_int64(val, 1, INT32_MAX, &v);
        a->tables = (int32_t)v;
    } else if (!strcmp(name, "--rows")) {
        bad = synth_parse_int64(val, 1, INT64_C(1) << 53, &a->rows);
    } else if (!strcmp(name, "--batch")) {
        bad = synth_parse_int64(val, 1, INT32_MAX, &v);
        a->batch = (int32_t)v;
    } else if (!strcmp(name, "--pooling")) {
        bad = synth_parse_int64(val, 1, INT32_MAX, &v);
        a->pooling = (int32_t)v;
    } else if (!strcmp(name, "--dist")) {
        bad = strcmp(val, "zipf") && strcmp(val, "uniform");
        a->zipf = !strcmp(val, "zipf");
    } else if (!strcmp(name, "--alpha")) {
        char *end;
        a->alpha = strtod(val, &end);
        bad = end == val || *end || !isfinite(a->alpha) || !(a->alpha > 0);
    } else if (!strcmp(name, "--drift")) {
        bad = strcmp(val, "rotate") && strcmp(val, "grow") && strcmp(val, "none");
        a->drift = !strcmp(val, "rotate") ? EMBER_DRIFT_ROTATE : !strcmp(val, "grow") ? EMBER_DRIFT_GROW
                                                                                       : EMBER_DRIFT_NONE;
    } else if (!strcmp(name, "--drift-every")) {
        bad = synth_parse_int64(val, 1, INT64_MAX, &a->drift_every);
    } else if (!strcmp(name, "--drift-rows")) {
        bad = synth_parse_int64(val, 1, INT64_C(1) << 53, &a->drift_rows);
    } else if (!strcmp(name, "--drift-start")) {
        bad = synth_parse_int64(val, 1, INT64_C(1) << 53, &a->drift_start);
    } else if (!strcmp(name, "--drift-tables")) {
        bad = synth_parse_int64(val, 1, INT32_MAX, &v);
        a->drift_tables = (int32_t)v;
    } else { /* --seed */
        bad = synth_parse_int64(val, 0, INT64_MAX, &v);
        a->seed = (uint64_t)v;
        a->seed_given = 1;
    }
    if (bad) {
        fprintf(a->err, "ember %s: bad value '%s' for %s\n", cmd, val, name);
        return -1;
    }
    return 1;
}

int synth_args_config(const synth_args *a, const char *cmd, ember_synth_config *out)
{
    const synth_preset *p = synth_preset_find(a);
    if (!p) {
        fprintf(a->err, "ember %s: unknown preset '%s' (quick, W1, W2, W3)\n", cmd, a->preset);
        return 2;
    }
    ember_synth_config c = ember_synth_config_default();
    c.tables = a->tables ? a->tables : p->tables;
    c.rows = a->rows ? a->rows : p->rows;
    c.batch_size = a->batch ? a->batch : p->batch;
    c.pooling = a->pooling ? a->pooling : p->pooling;
    c.zipf = a->zipf >= 0 ? a->zipf : p->zipf;
    if (a->alpha > 0)
        c.alpha = a->alpha;
    c.weighted = a->weighted;
    if (a->seed_given)
        c.seed = a->seed;
    if ((a->drift_every || a->drift_rows || a->drift_tables || a->drift_start) && a->drift == EMBER_DRIFT_NONE) {
        fprintf(a->err, "ember %s: --drift-every, --drift-rows, --drift-start and --drift-tables need --drift "
                "rotate|grow\n", cmd);
        return 2;
    }
    if (a->drift != EMBER_DRIFT_NONE) { /* every 10 batches, a tenth of the table, by default */
        c.drift = a->drift;
        c.drift_every = a->drift_every ? a->drift_every : 10;
        c.drift_rows = a->drift_rows ? a->drift_rows : (c.rows >= 10 ? c.rows / 10 : 1);
        c.drift_tables = a->drift_tables;
        c.drift_start = a->drift_start;
        if (c.drift_start > c.rows) {
            fprintf(a->err, "ember %s: --drift-start %lld is more than the %lld rows\n", cmd, (long long)c.drift_start,
                    (long long)c.rows);
            return 2;
        }
        if (c.drift_rows > c.rows) {
            fprintf(a->err, "ember %s: --drift-rows %lld is more than the %lld rows\n", cmd, (long long)c.drift_rows,
                    (long long)c.rows);
            return 2;
        }
    }
    *out = c;
    return 0;
}

int32_t synth_args_dim(const synth_args *a)
{
    const synth_preset *p = synth_preset_find(a);
    return p ? p->dim : 0;
}
