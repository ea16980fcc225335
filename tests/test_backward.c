/*
 * test_backward.c: ember_backward (per-row gradient sums plus the fused
 * optimizer) against ref_backward on fresh random configs and batches, three
 * steps per collection, every optimizer (per-table lr, eps, weight decay and
 * betas differ), every combiner, weights and dedup on/off, empty and
 * duplicate-heavy bags, bags of up to 3000 ids, dims 1..300, B = 1..2048,
 * bounds drop/error.
 * Also: rows not touched by a batch keep their values and state bit for bit
 * (lazy updates), stats.steps counts backward calls, backward follows the
 * last of two forwards, and a backward without a forward since the last
 * backward is EMBER_ESTATE and changes nothing.
 *
 * After each step the library's tables are compared with the reference and
 * then copied into it, so every step is checked from identical values and
 * rounding does not accumulate.  Tolerance, per element of a row's values
 * and state: |got - want| <= rtol |want| + 5e-6 with
 *   rtol = 1e-5 + 4 N 2^-24,   N = the row's occurrences in the batch.
 * The spec fixes the summation order, but a fast path may fuse multiply-adds,
 * associate w*scale*d differently or merge a bag's duplicates first (dedup):
 * a float sum of N terms is off by up to ~N ulps, and repeated equal terms
 * (a hot row in one bag) really do drift that far: one 5209-term row summed
 * in order was 1e-4 off the exact value that the merged sum hit.  The state
 * (g^2) doubles that.  Duplicate-heavy batches draw d in [0, 1), so their
 * sums have no cancellation and N ulps bound the relative error; the other
 * batches draw d in [-1, 1) but use tables of >= 3*B*max_len rows (capped at
 * 20000), so a row sums only a few (<= ~8) terms of mixed sign.  Near g = 0
 * an Adagrad/Adam step has slope lr/eps <= 20 in g (eps >= 1e-2, see
 * util.h), so ~1e-7 in g is <= 2e-6, inside the 5e-6.
 * A lost, doubled or misscaled occurrence, a wrong formula or a wrong step t
 * moves values by >= 1e-3 relative.
 */
#include "util.h"

/* Values and state of every row against the reference, with the row's
 * tolerance (see above); rows the batch did not touch must keep their
 * values and state bit for bit.  Frees before[] (values, state per table). */
static void check_rows(const ember_collection *c, const ref_model *m, int64_t **count,
                       float **before, const char *when)
{
    const ember_collection_config *cfg = &m->cfg;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tab = &cfg->tables[t];
        for (int st = 0; st < 2; st++) {
            int64_t per = st ? ember_state_floats(tab->optimizer.kind, tab->dim) : tab->dim;
            const float *want = st ? m->tables[t].state : m->tables[t].w;
            float *got = test_read_table(c, cfg, t, st), *old = before[2 * t + st];
            int64_t bad = -1, moved = -1;
            for (int64_t i = 0; got && i < tab->rows * per && bad < 0; i++) {
                double rtol = 1e-5 + 4.0 * (double)count[t][i / per] * 0x1p-24;
                if (!(fabs((double)got[i] - want[i]) <= rtol * fabs((double)want[i]) + 5e-6))
                    bad = i;
            }
            for (int64_t row = 0; got && old && row < tab->rows && moved < 0; row++)
                if (!count[t][row] &&
                    memcmp(got + row * per, old + row * per, (size_t)per * sizeof(float)) != 0)
                    moved = row;
            int64_t at = bad >= 0 ? bad / per : 0; /* the failing row */
            CHECK_MSG(got && bad < 0,
                      "%s: table %s %s: row %lld (%lld occurrences) element %lld: got %.9g "
                      "want %.9g",
                      when, tab->name, st ? "state" : "values", (long long)at,
                      (long long)count[t][at], (long long)(bad - at * per),
                      bad >= 0 ? got[bad] : 0.0, bad >= 0 ? want[bad] : 0.0);
            CHECK_MSG(moved < 0, "%s: untouched row %lld of %s changed (%s)", when,
                      (long long)moved, tab->name, st ? "state" : "values");
            free(got);
            free(old);
        }
        free(count[t]);
    }
}

static void random_case(test_rng *r, int trial, int32_t B, int32_t max_len)
{
    int heavy = test_range(r, 0, 3) == 0;
    /* without heavy duplicates (whose d is positive) a row sums few terms
     * of mixed sign: ~6 * B * max_len / 2 / min_rows on average, <= 8 */
    int64_t min_rows = heavy ? 1 : 1 + (int64_t)B * max_len * 3;
    if (min_rows > 20000)
        min_rows = 20000;
    test_config *tc = test_config_random(r, 4, 6, min_rows, min_rows + 3000);
    tc->tables[0].dim = test_dims[trial % 6];
    tc->tables[0].optimizer = test_optimizer_random(r, (ember_optimizer_kind)(trial / 6 % TEST_NUM_OPT));
    int64_t dims = 0;
    for (int32_t f = 0; f < tc->cfg.num_features; f++)
        dims += tc->tables[tc->features[f].table].dim;
    char what[200];
    test_describe(what, sizeof what, trial, B, max_len, tc, heavy);

    ember_collection *c = NULL;
    int rc = ember_collection_create(&tc->cfg, &c);
    CHECK_MSG(rc == EMBER_OK, "%s: create: %s", what, ember_errmsg(NULL));
    ref_model m;
    CHECK(ref_model_init(&m, &tc->cfg) == 0);
    if (rc != EMBER_OK)
        goto done;
    CHECK(ember_backward(c, NULL, NULL) == EMBER_ESTATE); /* no forward yet */
    test_sync_ref(c, &m); /* init is test_init's business; start identical */

    for (int step = 0; step < 3; step++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = step == 1 ? (int32_t)test_range(r, 1, 20) : B;
        o.max_len = (int32_t)test_range(r, 0, max_len + 1);
        if ((int64_t)o.max_len * o.batch_size * dims > 8000000)
            o.max_len = (int32_t)(8000000 / ((int64_t)o.batch_size * dims));
        o.empty_frac = 0.2;
        o.dup_heavy = heavy;
        o.weighted = (int)test_range(r, 0, 2);
        o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch tb;
        test_batch_make(r, &tc->cfg, &o, &tb);
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &tb.b);
        float *pooled = malloc((size_t)(o.batch_size * W + 1) * sizeof(float));
        float *seq = malloc((size_t)(S + 1) * sizeof(float));
        float *dp = malloc((size_t)(o.batch_size * W + 1) * sizeof(float));
        float *ds = malloc((size_t)(S + 1) * sizeof(float));
        test_fill(r, dp, o.batch_size * W, heavy ? 0.0f : -1.0f, 1.0f);
        test_fill(r, ds, S, heavy ? 0.0f : -1.0f, 1.0f);

        /* before: every table's values and state, to check untouched rows */
        float *before[2 * TEST_MAX_TABLES];
        for (int32_t t = 0; t < tc->cfg.num_tables; t++)
            for (int st = 0; st < 2; st++)
                before[2 * t + st] = test_read_table(c, &tc->cfg, t, st);

        if (step == 2) { /* a decoy forward first: backward follows the last forward */
            test_batch decoy;
            test_batch_make(r, &tc->cfg, &o, &decoy);
            int64_t Sd = test_sequence_size(&tc->cfg, &decoy.b);
            float *pd = malloc((size_t)(o.batch_size * W + 1) * sizeof(float));
            float *sd = malloc((size_t)(Sd + 1) * sizeof(float));
            CHECK(ember_forward(c, &decoy.b, pd, sd) == EMBER_OK);
            free(pd);
            free(sd);
            test_batch_free(&decoy);
        }
        rc = ember_forward(c, &tb.b, pooled, seq);
        CHECK_MSG(rc == EMBER_OK, "%s step %d: forward: %s", what, step, ember_errmsg(c));
        rc = ember_backward(c, dp, ds);
        CHECK_MSG(rc == EMBER_OK, "%s step %d: backward: %s", what, step, ember_errmsg(c));
        ref_backward(&m, &tb.b, NULL, dp, ds);
        char when[260];
        snprintf(when, sizeof when, "%s step %d", what, step);
        int64_t *count[TEST_MAX_TABLES];
        test_count_rows(&tc->cfg, &tb.b, count);
        check_rows(c, &m, count, before, when);

        ember_stats stats;
        ember_collection_stats(c, &stats);
        CHECK(stats.steps == step + 1);
        test_sync_ref(c, &m);
        free(pooled);
        free(seq);
        free(dp);
        free(ds);
        test_batch_free(&tb);
    }
    /* a second backward for the same forward is out of order and changes nothing */
    {
        int64_t W = test_pooled_width(&tc->cfg);
        float *dp = calloc((size_t)(B * W + 1), sizeof(float)), ds[1] = {0};
        CHECK(ember_backward(c, dp, ds) == EMBER_ESTATE);
        free(dp);
        test_compare_ref(c, &m, 0, 0, "after EMBER_ESTATE");
    }
done:
    ref_model_free(&m);
    ember_collection_destroy(c);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    static const int32_t sizes[] = {1, 2048, 7, 300, 64};
    for (int trial = 0; trial < 30; trial++)
        random_case(&r, trial, sizes[trial % 5], 24);
    for (int trial = 30; trial < 34; trial++) /* long bags */
        random_case(&r, trial, (int32_t)test_range(&r, 1, 5), 3000);
    return check_report("test_backward");
}
