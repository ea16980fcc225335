/*
 * limit_setup.h: what forward_limit.c and backward_limit.c share: the
 * workload's flags (W1 by default) and the collection of T tables of R x D,
 * one feature each, stacked into one physical table, with ember_synth
 * drawing its batches.  Each program adds its own flags through `extra`.
 */
#ifndef EMBER_BENCH_LIMIT_SETUP_H
#define EMBER_BENCH_LIMIT_SETUP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collection/collection.h"

typedef struct limit_shape {
    int32_t T, D, B, P, N, threads;
    int64_t R;
    int zipf;
    double alpha;
    unsigned long long seed;
    const char *workload;
    ember_row_precision precision; /* every table's rows (--precision)      */
} limit_shape;

/* Parses --tables --rows --dim --batch --pooling --dist --batches --threads
 * --alpha --seed --workload --precision (fp32, fp16, bf16); any other flag goes to extra(key, value, arg),
 * which returns 0 if it knows it.  Returns 0, or 2 after a message naming
 * the program. */
static inline int limit_parse(const char *prog, int argc, char **argv, limit_shape *sh,
                              int (*extra)(const char *, const char *, void *), void *arg)
{
    *sh = (limit_shape){8, 64, 4096, 20, 20, 1, 1000000, 1, 1.05, 0, "", EMBER_PRECISION_FP32};
    int bad_precision = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--tables")) sh->T = atoi(v);
        else if (!strcmp(k, "--rows")) sh->R = atoll(v);
        else if (!strcmp(k, "--dim")) sh->D = atoi(v);
        else if (!strcmp(k, "--batch")) sh->B = atoi(v);
        else if (!strcmp(k, "--pooling")) sh->P = atoi(v);
        else if (!strcmp(k, "--dist")) sh->zipf = !strcmp(v, "zipf");
        else if (!strcmp(k, "--batches")) sh->N = atoi(v);
        else if (!strcmp(k, "--threads")) sh->threads = atoi(v);
        else if (!strcmp(k, "--alpha")) sh->alpha = atof(v);
        else if (!strcmp(k, "--seed")) sh->seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--workload")) sh->workload = v;
        else if (!strcmp(k, "--precision")) {
            sh->precision = !strcmp(v, "fp16") ? EMBER_PRECISION_FP16 : !strcmp(v, "bf16") ? EMBER_PRECISION_BF16
                                                                                            : EMBER_PRECISION_FP32;
            bad_precision |= sh->precision == EMBER_PRECISION_FP32 && strcmp(v, "fp32");
        }
        else if (!extra || extra(k, v, arg)) {
            fprintf(stderr, "%s: unknown option %s\n", prog, k);
            return 2;
        }
    }
    const int32_t D = sh->D;
    if (sh->T < 1 || sh->R < 1 || (D != 16 && D != 32 && D != 64 && D != 128 && D != 256) || sh->B < 1 ||
        sh->P < 1 || sh->N < 4 || sh->threads < 1 || !(sh->alpha > 0) || bad_precision || strlen(sh->workload) > 64 ||
        strpbrk(sh->workload, "\"\\")) {
        fprintf(stderr, "%s: bad arguments (dim 16, 32, 64, 128 or 256; batches >= 4; threads >= 1; "
                        "alpha > 0; precision fp32, fp16 or bf16; workload: at most 64 characters, no quote or backslash)\n", prog);
        return 2;
    }
    return 0;
}

/* The shape's collection (every table with optimizer opt) and its id
 * stream; returns 0, or 1 after a message. */
static inline int limit_open(const char *prog, const limit_shape *sh, ember_optimizer opt, ember_collection **c,
                             ember_synth **s)
{
    const int32_t T = sh->T;
    ember_table_config *tc = calloc((size_t)T, sizeof *tc);
    ember_feature_config *fc = calloc((size_t)T, sizeof *fc);
    char (*names)[32] = calloc((size_t)T * 2, 32);
    for (int32_t t = 0; t < T; t++) {
        tc[t] = ember_table_config_default();
        snprintf(names[t], 32, "t%d", t);
        snprintf(names[T + t], 32, "f%d", t);
        tc[t].name = names[t], tc[t].rows = sh->R, tc[t].dim = sh->D, tc[t].optimizer = opt;
        tc[t].precision = sh->precision;
        fc[t] = (ember_feature_config){names[T + t], t, EMBER_COMBINER_SUM};
    }
    ember_collection_config cfg = ember_collection_config_default();
    cfg.tables = tc, cfg.num_tables = T, cfg.features = fc, cfg.num_features = T, cfg.threads = sh->threads;
    int st = ember_collection_create(&cfg, c); /* copies the names */
    free(tc), free(fc), free(names);
    if (st != EMBER_OK) {
        fprintf(stderr, "%s: %s\n", prog, ember_errmsg(NULL));
        return 1;
    }
    ember_synth_config sc = ember_synth_config_default();
    sc.tables = T, sc.rows = sh->R, sc.batch_size = sh->B, sc.pooling = sh->P, sc.zipf = sh->zipf;
    sc.alpha = sh->alpha, sc.seed = sh->seed;
    if (ember_synth_create(&sc, s) != EMBER_OK) {
        fprintf(stderr, "%s: cannot create the id generator\n", prog);
        ember_collection_destroy(*c);
        return 1;
    }
    return 0;
}

#endif
