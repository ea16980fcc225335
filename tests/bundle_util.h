/*
 * bundle_util.h: a bundle's table files read back naively, and the naive
 * dequantize-and-pool reference over them (tests/test_dynbundle.c,
 * tests/mpi_dynbundle.c; the layout in docs/inference.md, "Bundles").
 * The reference pools as docs/inference.md and include/ember.h state it:
 * per bag, in entry order, acc = fmaf(w, decode(row), acc) (a table trained
 * with simulated quantization reads each decoded value through
 * ref_fake_quant), an id with no row (an unknown key) adds nothing but
 * counts in the divisor: sum 1, mean the sum of weights, sqrtn the square
 * root of the sum of squared weights (0: zeros).
 */
#ifndef EMBER_TESTS_BUNDLE_UTIL_H
#define EMBER_TESTS_BUNDLE_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_impl.h"
#include "quant/quant.h"
#include "ref/ref.h"
#include "util.h"

/* What a bundle's table files hold, read back for the reference. */
typedef struct bundle_table {
    int dynamic, enc;
    int32_t dim;
    int64_t rows, row_bytes;
    unsigned char *data; /* rows x row_bytes */
    int64_t *keys;       /* dynamic: rows keys */
} bundle_table;

static inline void read_bundle(const char *dir, bundle_table *bt, int32_t num_tables)
{
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    long n = 0;
    unsigned char *text = test_read_file(path, &n);
    /* the fields this test needs, by hand: jansson is the library's */
    const char *p = (const char *)text;
    for (int32_t t = 0; t < num_tables; t++) {
        bundle_table *b = &bt[t];
        char want[64];
        snprintf(want, sizeof want, "\"file\": \"table-%04d.rows\"", (int)t);
        const char *at = strstr(p, want);
        CHECK(at != NULL);
        const char *entry = at;
        while (entry > p && *entry != '{')
            entry--;
        char enc[16] = "";
        const char *e = strstr(entry, "\"encoding\": \"");
        sscanf(e + 13, "%15[a-z0-9]", enc);
        b->enc = ember_encoding_parse(enc);
        b->rows = atoll(strstr(entry, "\"rows\": ") + 8);
        b->dim = atoi(strstr(entry, "\"dim\": ") + 7);
        b->row_bytes = atoll(strstr(entry, "\"row_bytes\": ") + 13);
        const char *kind = strstr(entry, "\"kind\": \"");
        b->dynamic = kind && kind < at && !strncmp(kind + 9, "dynamic", 7);
        snprintf(path, sizeof path, "%s/table-%04d.rows", dir, (int)t);
        b->data = test_read_file(path, &n);
        CHECK(n == b->rows * b->row_bytes);
        b->keys = NULL;
        if (b->dynamic) {
            snprintf(path, sizeof path, "%s/table-%04d.keys", dir, (int)t);
            unsigned char *k = test_read_file(path, &n);
            CHECK(n == 8 * b->rows);
            b->keys = malloc(sizeof(int64_t) * (size_t)(b->rows + 1));
            for (int64_t i = 0; i < b->rows; i++)
                b->keys[i] = (int64_t)ckpt_get_u64(k + 8 * i);
            free(k);
        }
    }
    free(text);
}

static inline void free_bundle(bundle_table *bt, int32_t n)
{
    for (int32_t t = 0; t < n; t++)
        free(bt[t].data), free(bt[t].keys);
}

/* Row of key (dynamic) or id (fixed) in the bundle's file, or NULL. */
static inline const unsigned char *bundle_row(const bundle_table *b, int64_t id)
{
    if (!b->dynamic)
        return id >= 0 && id < b->rows ? b->data + id * b->row_bytes : NULL;
    for (int64_t i = 0; i < b->rows; i++) /* naive */
        if (b->keys[i] == id)
            return b->data + i * b->row_bytes;
    return NULL;
}

/* Naive dequantize-and-pool of the bundle's files: pooled [B][F dim]. */
static inline void ref_pool(const ember_collection_config *cc, const bundle_table *bt, const ember_batch *b, float *pooled)
{
    int64_t k = 0, width = 0;
    for (int32_t f = 0; f < cc->num_features; f++)
        width += cc->tables[cc->features[f].table].dim;
    for (int32_t f = 0, col = 0; f < cc->num_features; col += cc->tables[cc->features[f].table].dim, f++) {
        const bundle_table *t = &bt[cc->features[f].table];
        for (int32_t s = 0; s < b->batch_size; s++) {
            float acc[64] = {0}, v[64];
            double sumw = 0, sumw2 = 0;
            for (int32_t i = 0; i < b->lengths[(int64_t)f * b->batch_size + s]; i++, k++) {
                float w = b->weights ? b->weights[k] : 1.0f;
                sumw += w, sumw2 += (double)w * w;
                const unsigned char *row = bundle_row(t, b->ids[k]);
                if (!row)
                    continue; /* an unknown key: a zero row, counted above */
                ref_dequant_row(t->enc, t->dim, row, v);
                const ember_table_config *tc = &cc->tables[cc->features[f].table];
                for (int32_t j = 0; j < t->dim && tc->quant_buckets; j++) /* simulated quantization reads */
                    v[j] = ref_fake_quant(v[j], tc->quant_low, tc->quant_high, tc->quant_buckets);
                for (int32_t j = 0; j < t->dim; j++)
                    acc[j] = fmaf(w, v[j], acc[j]);
            }
            ember_combiner cb = cc->features[f].combiner;
            float dv = cb == EMBER_COMBINER_MEAN ? (float)sumw : cb == EMBER_COMBINER_SQRTN ? (float)sqrt(sumw2) : 1.0f;
            for (int32_t j = 0; j < t->dim; j++)
                pooled[s * width + col + j] = dv == 1.0f ? acc[j] : dv == 0.0f ? 0.0f : acc[j] / dv;
        }
    }
}

#endif
