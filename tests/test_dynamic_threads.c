/*
 * test_dynamic_threads.c: dynamic tables trained at 1, 2 and 3 threads are
 * bit-identical, and every admitted key's fresh row is the naive initializer
 * (ref_init_row: one generator call per value, src/ref/ref_dyn.c).
 *
 * Admissions run in batch order within a table, and the step parallelises
 * around them (step/dynamic_keys.c): tables resolve side by side when there
 * are at least as many dynamic tables as threads, otherwise one after the
 * other with the finds, the resets of the new rows (in blocks,
 * ember_init_rows) and the commit over the threads.  test_dynamic.c checks
 * small batches against the full reference; this test takes batches large
 * enough to cross the parallel thresholds (16,384 ids a table for the finds,
 * 2,048 resets for the resets), on fresh random keys from the seed:
 *   - three dynamic tables (LRU, LFU, TTL; admit_after 1 and 2; dims 5, 16
 *     and 67; uniform and normal) beside a fixed table: 1, 2 and 3 threads
 *     (side by side at 2 and 3);
 *   - one dynamic table (LRU, dim 37): 1 and 2 threads (one table on every
 *     thread).
 * After every forward: outputs equal; the keys resident equal; each key
 * that became resident has the naive initial row (uniform tables, bit for
 * bit) and zero state.  After every backward (the same gradient everywhere):
 * every resident key's row and state and the counters equal across threads.
 */
#include "dyn_util.h"

#define MAX_THREADS 3

typedef struct setup {
    int32_t tables, dynamic; /* tables 0..dynamic-1 are dynamic          */
    int32_t threads;         /* runs at 1..threads                       */
    int32_t batch, max_len;
    int64_t keys;            /* distinct keys drawn per dynamic table     */
} setup;

static test_config *make_config(test_rng *r, const setup *u)
{
    static const ember_evict_policy evict[3] = {EMBER_EVICT_LRU, EMBER_EVICT_LFU, EMBER_EVICT_TTL};
    static const int32_t dims[3] = {5, 16, 67};
    test_config *tc = test_config_new(u->tables, u->tables);
    tc->cfg.seed = test_next(r);
    for (int32_t t = 0; t < u->dynamic; t++) {
        ember_table_config *d = &tc->tables[t];
        d->kind = EMBER_TABLE_DYNAMIC;
        d->rows = 0;
        d->capacity = u->keys * 2 / 3;
        d->dim = u->dynamic == 1 ? 37 : dims[t % 3];
        d->evict = u->dynamic == 1 ? EMBER_EVICT_LRU : evict[t % 3];
        d->ttl_steps = d->evict == EMBER_EVICT_TTL ? 2 : 0;
        d->admit_after = t == 1 ? 2 : 1;
        d->init = t == 2 ? EMBER_INIT_NORMAL : EMBER_INIT_UNIFORM;
        d->init_value = test_float(r, 0.01f, 0.5f);
        d->optimizer = test_optimizer_random(r, (ember_optimizer_kind)test_range(r, 0, TEST_NUM_OPT));
        test_init_for_optimizer(d);
        tc->features[t].combiner = t % 2 ? EMBER_COMBINER_MEAN : EMBER_COMBINER_SUM;
    }
    for (int32_t t = u->dynamic; t < u->tables; t++) { /* a fixed table beside them */
        tc->tables[t].rows = 500;
        tc->tables[t].dim = 8;
    }
    return tc;
}

/* Keys of a dynamic table: a pool of fresh random 64-bit keys per table,
 * drawn with a skew (low indices often), so batches repeat some keys and
 * bring new ones. */
static void make_batch_big(test_rng *r, const setup *u, uint64_t *const *pool, test_batch *tb)
{
    int32_t B = u->batch, F = u->tables;
    int64_t n = 0;
    int32_t *len = malloc(sizeof(int32_t) * (size_t)(F * B));
    for (int32_t i = 0; i < F * B; i++)
        n += len[i] = (int32_t)test_range(r, 0, u->max_len + 1);
    test_batch_alloc(tb, B, F, n, 0);
    memcpy(tb->lengths, len, sizeof(int32_t) * (size_t)(F * B));
    for (int64_t k = 0, i = 0; i < F * B; i++)
        for (int32_t p = 0; p < len[i]; p++, k++) {
            int32_t f = (int32_t)(i / B);
            double x = test_uniform(r);
            tb->ids[k] = f < u->dynamic ? (int64_t)pool[f][(int64_t)((double)u->keys * x * x)] : test_range(r, 0, 500);
        }
    free(len);
}

static int bits_equal(const float *a, const float *b, int64_t n)
{
    return n == 0 || memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

/* Resident keys of table t, ascending (*n of them; caller frees). */
static int64_t *resident(const ember_collection *c, int32_t t, int64_t cap, int64_t *n)
{
    int64_t *k = malloc(sizeof *k * (size_t)(cap + 1));
    CHECK(ember_dynamic_keys(c, t, cap, k, n) == EMBER_OK);
    return k;
}

static void run(test_rng *r, const setup *u, const char *name)
{
    test_config *tc = make_config(r, u);
    ember_collection *A[MAX_THREADS] = {NULL};
    for (int32_t k = 0; k < u->threads; k++) {
        tc->cfg.threads = k + 1;
        CHECK_MSG(ember_collection_create(&tc->cfg, &A[k]) == EMBER_OK, "%s", ember_errmsg(NULL));
    }
    uint64_t *pool[TEST_MAX_TABLES];
    for (int32_t t = 0; t < u->dynamic; t++) {
        pool[t] = malloc(sizeof *pool[t] * (size_t)u->keys);
        for (int64_t i = 0; i < u->keys; i++)
            pool[t][i] = test_next(r);
    }
    int64_t pw = ember_pooled_width(A[0]);
    int bad = 0;
    for (int step = 1; step <= 8 && !bad; step++) {
        test_batch g;
        make_batch_big(r, u, pool, &g);
        int32_t B = g.b.batch_size;
        int64_t *before[TEST_MAX_TABLES], nbefore[TEST_MAX_TABLES];
        for (int32_t t = 0; t < u->dynamic; t++)
            before[t] = resident(A[0], t, tc->tables[t].capacity, &nbefore[t]);
        float *out[MAX_THREADS];
        for (int32_t k = 0; k < u->threads; k++) {
            out[k] = calloc((size_t)(B * pw + 1), sizeof(float));
            CHECK_MSG(ember_forward(A[k], &g.b, out[k], NULL) == EMBER_OK, "%s step %d, %d threads: %s", name, step,
                      k + 1, ember_errmsg(A[k]));
            if (k > 0)
                bad += !bits_equal(out[0], out[k], B * pw);
        }
        CHECK_MSG(!bad, "%s step %d: outputs differ across thread counts", name, step);
        for (int32_t t = 0; t < u->dynamic && !bad; t++) {
            const ember_table_config *tb = &tc->tables[t];
            int64_t n = 0, *keys = resident(A[0], t, tb->capacity, &n);
            for (int32_t k = 1; k < u->threads; k++) {
                int64_t m = 0, *other = resident(A[k], t, tb->capacity, &m);
                bad += m != n || memcmp(keys, other, sizeof *keys * (size_t)n);
                free(other);
            }
            CHECK_MSG(!bad, "%s step %d table %d: resident keys differ across thread counts", name, step, t);
            /* the keys that became resident: the naive initial row, zero state */
            int32_t dim = tb->dim, sf = ember_state_floats(tb->optimizer.kind, dim);
            int64_t nn = 0, *fresh = malloc(sizeof *fresh * (size_t)(n + 1));
            for (int64_t i = 0, j = 0; i < n; i++) {
                while (j < nbefore[t] && before[t][j] < keys[i])
                    j++;
                if (j == nbefore[t] || before[t][j] != keys[i])
                    fresh[nn++] = keys[i];
            }
            float *v = malloc(sizeof(float) * (size_t)(nn * dim + 1)), *st = malloc(sizeof(float) * (size_t)(nn * sf + 1));
            float *want = malloc(sizeof(float) * (size_t)dim);
            int8_t *found = malloc((size_t)nn + 1);
            CHECK(ember_dynamic_read(A[u->threads - 1], t, fresh, nn, v, sf ? st : NULL, found) == EMBER_OK);
            int64_t wrong = 0;
            for (int64_t i = 0; i < nn; i++) {
                ref_init_row(tb, tc->cfg.seed, fresh[i], want);
                if (tb->init == EMBER_INIT_UNIFORM) /* normal: the formula within ulps; test_init checks it */
                    wrong += !bits_equal(want, v + i * dim, dim);
                for (int32_t s = 0; s < sf; s++)
                    wrong += st[i * sf + s] != 0.0f;
                wrong += !found[i];
            }
            CHECK_MSG(wrong == 0 && (step > 1 || nn > 0), "%s step %d table %d: %lld of %lld new rows not fresh", name,
                      step, t, (long long)wrong, (long long)nn);
            bad += wrong != 0;
            free(v);
            free(st);
            free(want);
            free(found);
            free(fresh);
            free(keys);
        }
        float *grad = malloc(sizeof(float) * (size_t)(B * pw + 1));
        test_fill(r, grad, B * pw, -1, 1);
        for (int32_t k = 0; k < u->threads; k++)
            CHECK(ember_backward(A[k], grad, NULL) == EMBER_OK);
        /* every resident row and its state, and the counters */
        for (int32_t t = 0; t < u->dynamic && !bad; t++) {
            const ember_table_config *tb = &tc->tables[t];
            int32_t dim = tb->dim, sf = ember_state_floats(tb->optimizer.kind, dim);
            int64_t n = 0, *keys = resident(A[0], t, tb->capacity, &n);
            float *v[MAX_THREADS], *st[MAX_THREADS];
            ember_dynamic_stats ds[MAX_THREADS];
            for (int32_t k = 0; k < u->threads; k++) {
                v[k] = malloc(sizeof(float) * (size_t)(n * dim + 1));
                st[k] = malloc(sizeof(float) * (size_t)(n * sf + 1));
                CHECK(ember_dynamic_read(A[k], t, keys, n, v[k], sf ? st[k] : NULL, NULL) == EMBER_OK);
                CHECK(ember_table_dynamic_stats(A[k], t, &ds[k]) == EMBER_OK);
                if (k > 0)
                    bad += !bits_equal(v[0], v[k], n * dim) || !bits_equal(st[0], st[k], n * sf) ||
                           memcmp(&ds[0], &ds[k], sizeof ds[0]) != 0;
            }
            CHECK_MSG(!bad, "%s step %d table %d: rows, state or counters differ across thread counts", name, step, t);
            for (int32_t k = 0; k < u->threads; k++) {
                free(v[k]);
                free(st[k]);
            }
            free(keys);
        }
        for (int32_t t = 0; t < u->dynamic; t++)
            free(before[t]);
        for (int32_t k = 0; k < u->threads; k++)
            free(out[k]);
        free(grad);
        test_batch_free(&g);
    }
    for (int32_t t = 0; t < u->dynamic; t++)
        free(pool[t]);
    for (int32_t k = 0; k < u->threads; k++)
        ember_collection_destroy(A[k]);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    setup side = {4, 3, 3, 1024, 40, 30000};  /* three dynamic tables and a fixed one, 1..3 threads */
    setup one = {1, 1, 2, 1536, 40, 60000};   /* one dynamic table on every thread */
    run(&r, &side, "three tables");
    run(&r, &one, "one table");
    return check_report("test_dynamic_threads");
}
