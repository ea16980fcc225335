/*
 * test_init.c: initial table values are a function of (seed, name, row,
 * column) only, as ember.h's formula says.
 *   - every init kind (uniform, normal, zeros, constant) and dims 1, 3, 8, 17,
 *     64, 300 match ref_model_init: uniform, zeros and constant bit for bit
 *     (the formula is exact: 2u-1 is exact in float and one product rounds
 *     once, whatever the precision it is evaluated in); normal within 2 float
 *     ulps (rtol 2.4e-7): evaluating sqrt/log/cos in double and rounding once
 *     to float agrees unless a different but equally valid double evaluation
 *     order lands within an ulp of a float rounding boundary;
 *   - the same rows are bit-identical when the table order in the config,
 *     stacking, shards and threads change; a different seed or name differs;
 *   - uniform values lie in [-value, value) and fill it; normal values have
 *     mean 0 and standard deviation value on a 1.6M-element table (mean
 *     within 5 standard errors, std within 0.5 %, the 1-sigma fraction within
 *     0.5 % of 0.6827: all several times the sampling noise);
 *   - optimizer state starts at zero; table read/write round-trips and
 *     rejects bad tables and ranges with EMBER_EINVAL;
 *   - the blocked rows of ember_init_rows (a dynamic table's admitted keys)
 *     equal the naive per-value formula bit for bit, for random 64-bit rows,
 *     dims 1..300 and random scales (tiny, subnormal, huge, negative); and
 *     the float form it uses for (2u - 1) x scale equals the double one for
 *     every one of the 2^24 values of u.
 */
#include "table/init.h"
#include "util.h"

static test_config *base_config(uint64_t seed)
{
    test_config *tc = test_config_new(8, 8);
    const int32_t dims[8] = {1, 3, 8, 17, 64, 300, 8, 17};
    const int64_t rows[8] = {1, 777, 5000, 1000, 300, 400, 2000, 999};
    const ember_init_kind init[8] = {EMBER_INIT_UNIFORM, EMBER_INIT_NORMAL, EMBER_INIT_UNIFORM,
                                     EMBER_INIT_NORMAL,  EMBER_INIT_ZEROS,  EMBER_INIT_CONSTANT,
                                     EMBER_INIT_NORMAL,  EMBER_INIT_UNIFORM};
    const float value[8] = {0.05f, 0.3f, 1.0f, 0.01f, 0.05f, 0.7f, 2.5f, 0.123f};
    for (int t = 0; t < 8; t++) {
        tc->tables[t].dim = dims[t];
        tc->tables[t].rows = rows[t];
        tc->tables[t].init = init[t];
        tc->tables[t].init_value = value[t];
        tc->tables[t].optimizer = ember_optimizer_default((ember_optimizer_kind)(t % 4));
        snprintf(tc->table_names[t], sizeof tc->table_names[t], "emb_%d_%s", t,
                 t % 2 ? "user" : "item");
    }
    tc->cfg.seed = seed;
    return tc;
}

static float *read_rows(const ember_collection *c, const test_config *tc, int t)
{
    return test_read_table(c, &tc->cfg, t, 0);
}

static void against_ref(uint64_t seed)
{
    test_config *tc = base_config(seed);
    ember_collection *c = NULL;
    CHECK_MSG(ember_collection_create(&tc->cfg, &c) == EMBER_OK, "%s", ember_errmsg(NULL));
    ref_model m;
    CHECK(ref_model_init(&m, &tc->cfg) == 0);
    for (int t = 0; c && t < 8; t++) {
        const ember_table_config *tb = &tc->tables[t];
        float *w = read_rows(c, tc, t);
        int64_t n = tb->rows * tb->dim;
        char what[96];
        snprintf(what, sizeof what, "init of %s (kind %d)", tb->name, tb->init);
        if (w && tb->init == EMBER_INIT_NORMAL)
            CHECK_CLOSE(w, m.tables[t].w, n, 2.4e-7, 0, what);
        else if (w)
            CHECK_MSG(memcmp(w, m.tables[t].w, (size_t)n * sizeof *w) == 0, "%s differs", what);
        /* state starts at zero */
        float *s = test_read_table(c, &tc->cfg, t, 1);
        int64_t sn = tb->rows * ember_state_floats(tb->optimizer.kind, tb->dim), nz = 0;
        for (int64_t i = 0; s && i < sn; i++)
            nz += s[i] != 0.0f;
        CHECK_MSG(s && nz == 0, "%s: %lld nonzero state floats", tb->name, (long long)nz);
        free(w);
        free(s);
    }
    /* the reference itself: zeros/constant exact, uniform within bounds */
    for (int64_t i = 0; i < 400 * 300; i++)
        CHECK(m.tables[5].w[i] == 0.7f);

    /* the same tables reversed, stacking off, 3 shards, 2 threads, one extra
     * table: each table's rows bit-identical, looked up by name */
    test_config *perm = test_config_new(9, 2);
    for (int t = 0; t < 8; t++) {
        perm->tables[t] = tc->tables[7 - t];
        memcpy(perm->table_names[t], tc->table_names[7 - t], sizeof perm->table_names[t]);
    }
    perm->tables[8].dim = 8;
    snprintf(perm->table_names[8], sizeof perm->table_names[8], "extra");
    test_config_repoint(perm);
    perm->cfg.seed = seed;
    perm->cfg.stack_tables = !tc->cfg.stack_tables;
    perm->cfg.num_shards = 3;
    perm->cfg.threads = 2;
    ember_collection *p = NULL;
    CHECK_MSG(ember_collection_create(&perm->cfg, &p) == EMBER_OK, "%s", ember_errmsg(NULL));
    for (int t = 0; c && p && t < 8; t++) {
        float *a = read_rows(c, tc, t), *b = read_rows(p, perm, 7 - t);
        CHECK_MSG(a && b && memcmp(a, b, (size_t)(tc->tables[t].rows * tc->tables[t].dim) * 4) == 0,
                  "table %s differs after reordering / unstacking", tc->tables[t].name);
        free(a);
        free(b);
    }
    ember_collection_destroy(p);

    /* another seed, or another name, gives other values */
    for (int variant = 0; variant < 2; variant++) {
        test_config *o = test_config_copy(tc);
        if (variant == 0)
            o->cfg.seed = seed + 1;
        else
            snprintf(o->table_names[2], sizeof o->table_names[2], "emb_2_itemX");
        CHECK(ember_collection_create(&o->cfg, &p) == EMBER_OK);
        float *a = c ? read_rows(c, tc, 2) : NULL, *b = p ? read_rows(p, o, 2) : NULL;
        int64_t same = 0, n = 5000 * 8;
        for (int64_t i = 0; a && b && i < n; i++)
            same += a[i] == b[i];
        CHECK_MSG(a && b && same < n / 100, "variant %d: %lld of %lld values unchanged", variant,
                  (long long)same, (long long)n);
        free(a);
        free(b);
        ember_collection_destroy(p);
        p = NULL;
        test_config_free(o);
    }
    test_config_free(perm);
    ref_model_free(&m);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void distributions(uint64_t seed)
{
    test_config *tc = test_config_new(2, 1);
    tc->tables[0].rows = 100000;
    tc->tables[0].dim = 16;
    tc->tables[0].init = EMBER_INIT_NORMAL;
    tc->tables[0].init_value = 0.5f;
    tc->tables[1].rows = 100000;
    tc->tables[1].dim = 16;
    tc->tables[1].init = EMBER_INIT_UNIFORM;
    tc->tables[1].init_value = 0.25f;
    tc->cfg.seed = seed;
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    if (!c) {
        test_config_free(tc);
        return;
    }
    const double n = 1600000;
    float *x = read_rows(c, tc, 0);
    double sum = 0, sq = 0, in1 = 0;
    for (int64_t i = 0; x && i < (int64_t)n; i++) {
        sum += x[i];
        sq += (double)x[i] * x[i];
        in1 += fabs(x[i]) < 0.5;
    }
    double mean = sum / n, sd = sqrt(sq / n - mean * mean);
    printf("normal(0.5): mean %.6f sd %.6f within 1 sd %.5f\n", mean, sd, in1 / n);
    CHECK_MSG(fabs(mean) < 5 * 0.5 / sqrt(n), "normal mean %g", mean);
    CHECK_MSG(fabs(sd / 0.5 - 1) < 0.005, "normal sd %g, want 0.5", sd);
    CHECK_MSG(fabs(in1 / n - 0.682689) < 0.005, "normal 1-sigma fraction %g", in1 / n);
    free(x);

    x = read_rows(c, tc, 1);
    float lo = 1, hi = -1;
    sum = sq = 0;
    int64_t outside = 0;
    for (int64_t i = 0; x && i < (int64_t)n; i++) {
        outside += !(x[i] >= -0.25f && x[i] < 0.25f);
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sum += x[i];
        sq += (double)x[i] * x[i];
    }
    printf("uniform(0.25): min %.6f max %.6f mean %.6f var %.6f\n", lo, hi, sum / n, sq / n);
    CHECK_MSG(outside == 0, "%lld uniform values outside [-0.25, 0.25)", (long long)outside);
    CHECK(lo < -0.2499f && hi > 0.2499f);
    /* var of U(-a, a) = a^2/3 = 0.0208333; std error of the mean 0.144/sqrt(n) */
    CHECK_MSG(fabs(sum / n) < 5 * 0.1443 / sqrt(n), "uniform mean %g", sum / n);
    CHECK_MSG(fabs(sq / n / 0.0208333 - 1) < 0.005, "uniform var %g", sq / n);
    free(x);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void read_write(void)
{
    test_config *tc = test_config_new(2, 1);
    tc->tables[1].dim = 3;
    tc->tables[1].rows = 10;
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    if (c) {
        float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, out[9] = {0}, row[3];
        CHECK(ember_table_write(c, 1, 7, 3, in) == EMBER_OK);
        CHECK(ember_table_read(c, 1, 7, 3, out) == EMBER_OK);
        CHECK(memcmp(in, out, sizeof in) == 0);
        CHECK(ember_table_read(c, 1, 8, 3, out) == EMBER_EINVAL);
        CHECK(ember_table_read(c, 1, -1, 1, out) == EMBER_EINVAL);
        CHECK(ember_table_read(c, 2, 0, 1, out) == EMBER_EINVAL);
        CHECK(ember_table_read(c, -1, 0, 1, out) == EMBER_EINVAL);
        CHECK(ember_table_write(c, 1, 10, 1, in) == EMBER_EINVAL);
        CHECK(ember_table_read(c, 1, 6, 1, row) == EMBER_OK); /* row 6 not written */
        CHECK(row[0] != 1 || row[1] != 2 || row[2] != 3);
    }
    ember_collection_destroy(c);
    test_config_free(tc);
}

/* A random float scale: ordinary, tiny, subnormal, huge or negative. */
static float random_scale(test_rng *r)
{
    switch (test_range(r, 0, 5)) {
    case 0:
        return test_float(r, 0.0f, 1.0f);
    case 1:
        return test_float(r, -2.0f, 2.0f) * 1e-30f;
    case 2:
        return test_float(r, 0.0f, 1.0f) * 1e-40f; /* subnormal */
    case 3:
        return test_float(r, 0.0f, 3.0f) * 1e38f;
    default: {
        uint32_t bits = (uint32_t)test_next(r) & 0x7f7fffffu; /* any finite float */
        float v;
        memcpy(&v, &bits, sizeof v);
        return v;
    }
    }
}

static void init_rows_blocked(uint64_t seed)
{
    test_rng r = {seed ^ 0x51ed2701u};
    static const int32_t dims[] = {1, 3, 15, 16, 17, 63, 64, 65, 100, 128, 129, 300};
    static const ember_init_kind kinds[] = {EMBER_INIT_UNIFORM, EMBER_INIT_NORMAL, EMBER_INIT_ZEROS,
                                            EMBER_INIT_CONSTANT};
    for (int trial = 0; trial < 96; trial++) {
        ember_table_config tc = ember_table_config_default();
        tc.dim = dims[trial % 12];
        tc.init = trial < 72 ? EMBER_INIT_UNIFORM : kinds[trial % 4];
        tc.init_value = random_scale(&r);
        uint64_t key = test_next(&r);
        int64_t n = test_range(&r, 1, 70);
        uint64_t *rows = malloc(sizeof *rows * (size_t)n);
        float *got = malloc(sizeof(float) * (size_t)(n * tc.dim)), **out = malloc(sizeof *out * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            rows[i] = trial % 3 ? test_next(&r) : (uint64_t)test_range(&r, 0, 1000); /* keys, or row numbers */
            out[i] = got + i * tc.dim;
        }
        ember_init_rows(tc.init, tc.init_value, tc.dim, key, rows, n, out);
        int64_t bad = 0;
        float row[300];
        for (int64_t i = 0; i < n; i++) {
            /* normal: ember's per-row path (against_ref checks it within 2 ulps of the formula) */
            ember_init_row_values(tc.init, tc.init_value, tc.dim, key, (int64_t)rows[i], row);
            for (int32_t c = 0; c < tc.dim; c++) {
                float want = tc.init == EMBER_INIT_NORMAL ? row[c] : ref_init_value(&tc, key, (int64_t)rows[i], c);
                bad += memcmp(&want, &got[i * tc.dim + c], sizeof want) != 0;
            }
        }
        CHECK_MSG(bad == 0, "trial %d (dim %d, kind %d, scale %a): %lld blocked values differ from the formula", trial,
                  tc.dim, tc.init, (double)tc.init_value, (long long)bad);
        free(rows);
        free(got);
        free(out);
    }
    /* the float form against the double one, every u, a few scales */
    for (int k = 0; k < 4; k++) {
        float scale = k == 0 ? 0.05f : random_scale(&r);
        int64_t bad = 0;
        for (uint32_t m = 0; m < 1u << 24; m++) {
            float u = (float)m * 0x1.0p-24f;
            float want = (float)((2.0 * u - 1.0) * (double)scale);
            float have = (float)((int32_t)(2 * m) - (1 << 24)) * 0x1.0p-24f * scale;
            bad += memcmp(&want, &have, sizeof want) != 0;
        }
        CHECK_MSG(bad == 0, "scale %a: %lld values of u where the float form differs", (double)scale, (long long)bad);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    against_ref(seed);
    against_ref(seed * 0x9e3779b97f4a7c15ULL + 1);
    distributions(seed);
    read_write();
    init_rows_blocked(seed);
    return check_report("test_init");
}
