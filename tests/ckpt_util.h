/*
 * ckpt_util.h: helpers of the checkpoint tests (test_ckpt.c, mpi_ckpt.c,
 * test_ckpt_crash.c): random training steps, snapshots of every table and
 * its optimizer state, comparison against a checkpoint's canonical rows
 * (ckpt_read_rows), temporary folders.  Include util.h first.
 */
#ifndef EMBER_TESTS_CKPT_UTIL_H
#define EMBER_TESTS_CKPT_UTIL_H

#include <dirent.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"

/* One forward and backward of a random batch of B local samples. */
static inline int ckpt_test_step(test_rng *r, ember_collection *c, const ember_collection_config *cfg,
                                 int32_t B)
{
    test_batch_opts o = test_batch_opts_default();
    o.batch_size = B;
    o.max_len = 6;
    o.weighted = (int)test_range(r, 0, 2);
    test_batch tb;
    test_batch_make(r, cfg, &o, &tb);
    int64_t W = test_pooled_width(cfg), S = test_sequence_size(cfg, &tb.b);
    size_t pn = (size_t)((int64_t)B * W + 1), sn = (size_t)(S + 1);
    float *p = calloc(pn, 4), *s = calloc(sn, 4), *dp = calloc(pn, 4), *ds = calloc(sn, 4);
    test_fill(r, dp, (int64_t)pn, -1, 1);
    test_fill(r, ds, (int64_t)sn, -1, 1);
    int st = ember_forward(c, &tb.b, p, s);
    if (st == EMBER_OK)
        st = ember_backward(c, dp, ds);
    if (st != EMBER_OK)
        fprintf(stderr, "training step: %s: %s\n", ember_status_str(st), ember_errmsg(c));
    free(p), free(s), free(dp), free(ds);
    test_batch_free(&tb);
    return st;
}

/* Every table's values and state, concatenated (collective under MPI). */
typedef struct ckpt_snap {
    int32_t n;
    float *v[TEST_MAX_TABLES], *s[TEST_MAX_TABLES];
    int64_t steps;
} ckpt_snap;

static inline void ckpt_snap_take(ckpt_snap *sn, const ember_collection *c, const ember_collection_config *cfg)
{
    ember_stats st;
    sn->n = cfg->num_tables;
    for (int32_t t = 0; t < sn->n; t++) {
        sn->v[t] = test_read_table(c, cfg, t, 0);
        sn->s[t] = test_read_table(c, cfg, t, 1);
    }
    ember_collection_stats(c, &st);
    sn->steps = st.steps;
}

static inline void ckpt_snap_free(ckpt_snap *sn)
{
    for (int32_t t = 0; t < sn->n; t++)
        free(sn->v[t]), free(sn->s[t]);
    sn->n = 0;
}

/* 1 when a and b hold bit-identical tables and state. */
static inline int ckpt_snap_equal(const ckpt_snap *a, const ckpt_snap *b, const ember_collection_config *cfg)
{
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        size_t nv = (size_t)(tc->rows * tc->dim);
        size_t ns = (size_t)(tc->rows * ember_state_floats(tc->optimizer.kind, tc->dim));
        if (!a->v[t] || !b->v[t] || memcmp(a->v[t], b->v[t], nv * 4) != 0) {
            fprintf(stderr, "table \"%s\": values differ\n", tc->name);
            return 0;
        }
        if (ns && (!a->s[t] || !b->s[t] || memcmp(a->s[t], b->s[t], ns * 4) != 0)) {
            fprintf(stderr, "table \"%s\": optimizer state differs\n", tc->name);
            return 0;
        }
    }
    return 1;
}

/* 1 when the snapshot equals the checkpoint's canonical rows (by name). */
static inline int ckpt_snap_matches(const ckpt_snap *a, const ember_checkpoint *ck,
                                    const ember_collection_config *cfg)
{
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        int32_t j = -1;
        for (int32_t k = 0; k < ckpt_num_tables(ck); k++)
            if (strcmp(ckpt_table(ck, k)->name, tc->name) == 0)
                j = k;
        if (j < 0 || ckpt_table(ck, j)->rows != tc->rows || ckpt_table(ck, j)->dim != tc->dim ||
            ckpt_table(ck, j)->opt.kind != tc->optimizer.kind)
            return 0;
        int32_t sf = ember_state_floats(tc->optimizer.kind, tc->dim);
        float *v = malloc((size_t)(tc->rows * tc->dim) * 4 + 4), *s = malloc((size_t)(tc->rows * sf) * 4 + 4);
        int ok = ckpt_read_rows(ck, j, 0, tc->rows, v, s) == EMBER_OK &&
                 memcmp(v, a->v[t], (size_t)(tc->rows * tc->dim) * 4) == 0 &&
                 (sf == 0 || memcmp(s, a->s[t], (size_t)(tc->rows * sf) * 4) == 0);
        free(v), free(s);
        if (!ok) {
            fprintf(stderr, "table \"%s\": checkpoint rows differ\n", tc->name);
            return 0;
        }
    }
    return ckpt_optimizer_steps(ck) == a->steps;
}

static inline void ckpt_rm_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        remove(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *sub = malloc(n);
            snprintf(sub, n, "%s/%s", path, e->d_name);
            ckpt_rm_tree(sub);
            free(sub);
        }
    closedir(d);
    remove(path);
}

/* A fresh folder under $TMPDIR (or /tmp); path has room for 256 bytes. */
static inline void ckpt_tmpdir(char *path, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(path, 256, "%s/ember_%s_XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(path))
        abort();
}

#endif
