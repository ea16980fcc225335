/*
 * init.c: initial values, a pure function of (seed, table name, row, column)
 * through the counter-based generator in core/rng.h (include/ember.h,
 * ember_collection_create), so they never depend on sharding, thread count,
 * stacking or creation order.
 * assemble/init.c writes them into a new collection's stores; the SSD tier
 * and a dynamic table's reset rows compute them when a row is first needed
 * (the latter in blocks of rows, ember_init_rows: a step admits up to
 * hundreds of thousands of keys).
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/rng.h"
#include "table/init.h"

/* The uniform kind, the common one, as a loop without branches: the row's
 * half of the mix is computed once and the columns vectorise (a reset of a
 * dynamic table's slot runs this on the training step).  Same values as
 * the general loop below, bit for bit. */
static void init_uniform(uint64_t key, int64_t row, int32_t k0, int32_t n, double scale, float *out)
{
    uint64_t zr = ember_rng_row(key, (uint64_t)row);
    for (int32_t j = 0; j < n; j++) {
        float u = (float)(ember_rng_col(zr, (uint64_t)(k0 + j), 0) >> 40) * 0x1.0p-24f;
        out[j] = (float)((2.0 * u - 1.0) * scale);
    }
}

void ember_init_row(const ember_table_config *tc, uint64_t key, int64_t row, int32_t k0, int32_t width,
                     float *out)
{
    if (tc->init == EMBER_INIT_UNIFORM) {
        int32_t n = tc->dim - k0 < width ? tc->dim - k0 : width;
        n = n < 0 ? 0 : n;
        init_uniform(key, row, k0, n, tc->init_value, out);
        for (int32_t j = n; j < width; j++)
            out[j] = 0.0f;
        return;
    }
    for (int32_t j = 0; j < width; j++) {
        int32_t k = k0 + j;
        if (k >= tc->dim) {
            out[j] = 0.0f;
            continue;
        }
        switch (tc->init) {
        case EMBER_INIT_UNIFORM:
            out[j] = (float)((2.0 * ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 0) - 1.0) *
                             tc->init_value);
            break;
        case EMBER_INIT_NORMAL: {
            double u1 = ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 1);
            double u2 = ember_rng_uniform(key, (uint64_t)row, (uint64_t)k, 2);
            out[j] = (float)(tc->init_value * sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
            break;
        }
        case EMBER_INIT_ZEROS:
            out[j] = 0.0f;
            break;
        case EMBER_INIT_CONSTANT:
            out[j] = tc->init_value;
            break;
        }
    }
}

/* Uniform rows in blocks: the column half of the mix (col x the column
 * constant) is computed once per block of columns for all n rows, and
 * (2u - 1) x scale is computed in float.  That is exact: u has 24 bits, so
 * 2u - 1 = (2m - 2^24) 2^-24 is a float, and its product with the float
 * scale has at most 48 significant bits, exact in double; the double path
 * then rounds it to float once, as a float multiply does.  So these are
 * init_uniform's values bit for bit (tests/test_init.c checks every u). */
#define UNIFORM_BLOCK 64 /* columns whose constants are computed at once */
static void uniform_rows(uint64_t key, const uint64_t *rows, int64_t n, int32_t dim, float scale, float *const *out)
{
    uint64_t colmul[UNIFORM_BLOCK];
    for (int32_t c0 = 0; c0 < dim; c0 += UNIFORM_BLOCK) {
        int32_t w = dim - c0 < UNIFORM_BLOCK ? dim - c0 : UNIFORM_BLOCK;
        for (int32_t j = 0; j < w; j++)
            colmul[j] = (uint64_t)(c0 + j) * 0xabc98388fb8fac03ULL; /* ember_rng_col, stream 0 */
        for (int64_t i = 0; i < n; i++) {
            uint64_t zr = ember_rng_row(key, rows[i]);
            float *o = out[i] + c0;
            for (int32_t j = 0; j < w; j++) {
                uint64_t z = ember_mix64(zr ^ colmul[j]);
                int32_t v = (int32_t)(z >> 39 & ~(uint64_t)1) - (1 << 24); /* 2 (z >> 40) - 2^24 */
                o[j] = (float)v * 0x1.0p-24f * scale;
            }
        }
    }
}

void ember_init_rows(int init_kind, float init_value, int32_t dim, uint64_t rng_key, const uint64_t *rows, int64_t n,
                     float *const *out)
{
    if (init_kind == EMBER_INIT_UNIFORM) {
        uniform_rows(rng_key, rows, n, dim, init_value, out);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        ember_init_row_values(init_kind, init_value, dim, rng_key, (int64_t)rows[i], out[i]);
}

void ember_init_row_values(int init_kind, float init_value, int32_t dim, uint64_t rng_key, int64_t row, float *out)
{
    ember_table_config tc;
    memset(&tc, 0, sizeof tc);
    tc.init = (ember_init_kind)init_kind;
    tc.init_value = init_value;
    tc.dim = dim;
    ember_init_row(&tc, rng_key, row, 0, dim, out);
}
