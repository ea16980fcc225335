/*
 * test_bad_input.c: bad batches and non-finite numbers fail cleanly.
 *   - a negative length, lengths that do not sum to num_ids, an id < 0 or
 *     >= rows under bounds = error, a NaN or Inf weight, a num_features that
 *     differs from the config: EMBER_EINPUT, and ember_errmsg names the
 *     feature, the sample and (for ids) the id;
 *   - after any failed call every table and its state are bit-identical to
 *     before, a backward is EMBER_ESTATE (also when a good forward preceded
 *     the failed one), and the handle still works for a good batch;
 *   - debug_checks: a looked-up row holding NaN or Inf is EMBER_ENUMERIC
 *     naming the table and row; a NaN in d_pooled is EMBER_ENUMERIC in
 *     backward with tables unchanged; without debug_checks the same NaN row
 *     is no error (the check is opt-in).
 * No tolerances: every check is an exact status, a substring or a memcmp.
 */
#include "util.h"

#define B 40

/* tables "users" (100 x 4) and "items" (50 x 3); features user_id (SUM on
 * users), item_hist (MEAN on items), item_seq (NONE on items) */
static test_config *config(int debug)
{
    test_config *tc = test_config_new(2, 3);
    snprintf(tc->table_names[0], 32, "users");
    snprintf(tc->table_names[1], 32, "items");
    tc->tables[0].dim = 4;
    tc->tables[1].rows = 50;
    tc->tables[1].dim = 3;
    tc->tables[1].optimizer = ember_optimizer_default(EMBER_OPT_ADAM);
    snprintf(tc->feature_names[0], 32, "user_id");
    snprintf(tc->feature_names[1], 32, "item_hist");
    snprintf(tc->feature_names[2], 32, "item_seq");
    tc->features[1].table = 1;
    tc->features[1].combiner = EMBER_COMBINER_MEAN;
    tc->features[2].table = 1;
    tc->features[2].combiner = EMBER_COMBINER_NONE;
    tc->cfg.debug_checks = debug;
    return tc;
}

/* A good batch: every bag 1..3 valid ids, weights in [0.5, 1.5). */
static void good_batch(test_rng *r, const test_config *tc, test_batch *tb)
{
    int32_t len[3 * B];
    int64_t n = 0;
    for (int i = 0; i < 3 * B; i++)
        n += len[i] = (int32_t)test_range(r, 1, 4);
    test_batch_alloc(tb, B, 3, n, 1);
    memcpy(tb->lengths, len, sizeof len);
    for (int64_t k = 0, i = 0; i < 3 * B; i++)
        for (int p = 0; p < len[i]; p++, k++) {
            tb->ids[k] = test_range(r, 0, tc->tables[tc->features[i / B].table].rows);
            tb->weights[k] = test_float(r, 0.5f, 1.5f);
        }
}

/* index of the first id of bag (f, s) */
static int64_t bag_start(const test_batch *tb, int f, int s)
{
    int64_t k = 0;
    for (int i = 0; i < f * B + s; i++)
        k += tb->lengths[i];
    return k;
}

/* 1 when msg holds v as a whole number (not part of a longer one) */
static int has_number(const char *msg, long long v)
{
    char want[32];
    snprintf(want, sizeof want, "%lld", v);
    for (const char *p = msg; (p = strstr(p, want)) != NULL; p++) {
        int digit_before = p > msg && (p[-1] >= '0' && p[-1] <= '9');
        int minus_before = v >= 0 && p > msg && p[-1] == '-';
        char after = p[strlen(want)];
        if (!digit_before && !minus_before && !(after >= '0' && after <= '9'))
            return 1;
    }
    return 0;
}

typedef struct snapshot {
    float *t[4];
} snapshot;

static snapshot snap(const ember_collection *c, const test_config *tc)
{
    snapshot s;
    for (int i = 0; i < 4; i++)
        s.t[i] = test_read_table(c, &tc->cfg, i / 2, i % 2);
    return s;
}

static int snap_same(const ember_collection *c, const test_config *tc, snapshot *s)
{
    int same = 1;
    snapshot now = snap(c, tc);
    for (int i = 0; i < 4; i++) {
        const ember_table_config *t = &tc->tables[i / 2];
        int64_t per = i % 2 ? ember_state_floats(t->optimizer.kind, t->dim) : t->dim;
        same &= now.t[i] && s->t[i] && memcmp(now.t[i], s->t[i], (size_t)(t->rows * per) * 4) == 0;
        free(now.t[i]);
    }
    return same;
}

static void snap_free(snapshot *s)
{
    for (int i = 0; i < 4; i++)
        free(s->t[i]);
}

static float pooled[B * 7], seqbuf[B * 3 * 3 + 1], dp[B * 7], dseq[B * 3 * 3 + 1];

/* Runs a good step, then the bad batch (expect status and message parts),
 * then checks tables, ESTATE, and that a good step still works. */
static void expect_fail(ember_collection *c, const test_config *tc, const test_batch *good,
                        const ember_batch *bad, int status, const char *name, const char *feature,
                        long long sample, int check_id, long long id)
{
    int rc = ember_forward(c, &good->b, pooled, seqbuf);
    CHECK_MSG(rc == EMBER_OK, "%s: good forward: %s", name, ember_errmsg(c));
    snapshot before = snap(c, tc);
    rc = ember_forward(c, bad, pooled, seqbuf);
    const char *msg = ember_errmsg(c);
    printf("%s: status %d (%s), message: %s\n", name, rc, ember_status_str(rc), msg ? msg : "NULL");
    CHECK_MSG(rc == status, "%s: status %d, want %d", name, rc, status);
    if (msg) {
        if (feature)
            CHECK_MSG(strstr(msg, feature) != NULL, "%s: message lacks feature %s", name, feature);
        if (sample >= 0)
            CHECK_MSG(has_number(msg, sample), "%s: message lacks sample %lld", name, sample);
        if (check_id)
            CHECK_MSG(has_number(msg, id), "%s: message lacks id %lld", name, id);
    } else {
        CHECK_MSG(0, "%s: no message", name);
    }
    CHECK_MSG(ember_backward(c, dp, dseq) == EMBER_ESTATE,
              "%s: backward after a failed forward is not EMBER_ESTATE", name);
    CHECK_MSG(snap_same(c, tc, &before), "%s: tables changed", name);
    snap_free(&before);
    rc = ember_forward(c, &good->b, pooled, seqbuf);
    CHECK_MSG(rc == EMBER_OK, "%s: good forward after failure: %s", name, ember_errmsg(c));
    rc = ember_backward(c, dp, dseq);
    CHECK_MSG(rc == EMBER_OK, "%s: good backward after failure: %s", name, ember_errmsg(c));
}

/* a private copy of a good batch to break */
static void clone(const test_batch *src, test_batch *dst)
{
    test_batch_alloc(dst, B, 3, src->b.num_ids, 1);
    memcpy(dst->lengths, src->lengths, 3 * B * sizeof *dst->lengths);
    memcpy(dst->ids, src->ids, (size_t)src->b.num_ids * sizeof *dst->ids);
    memcpy(dst->weights, src->weights, (size_t)src->b.num_ids * sizeof *dst->weights);
}

static void bad_batches(test_rng *r)
{
    test_config *tc = config(0);
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    if (!c)
        return;
    test_batch good, bad;
    good_batch(r, tc, &good);
    test_fill(r, dp, B * 7, -1, 1);
    test_fill(r, dseq, B * 9, -1, 1);
    CHECK(ember_backward(c, dp, dseq) == EMBER_ESTATE); /* no forward yet */

    /* negative length at (item_hist, 37); the next bag takes its id so the
     * sum still matches num_ids */
    clone(&good, &bad);
    bad.lengths[1 * B + 38] += bad.lengths[1 * B + 37] + 1;
    bad.lengths[1 * B + 37] = -1;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "negative length", "item_hist", 37, 0, 0);
    test_batch_free(&bad);

    /* lengths sum != num_ids */
    clone(&good, &bad);
    bad.b.num_ids -= 1;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "num_ids mismatch", NULL, -1, 0, 0);
    test_batch_free(&bad);

    /* id >= rows at (item_hist, 29) and id < 0 at (user_id, 13) */
    clone(&good, &bad);
    bad.ids[bag_start(&bad, 1, 29) + bad.lengths[B + 29] - 1] = 987;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "id >= rows", "item_hist", 29, 1, 987);
    test_batch_free(&bad);
    clone(&good, &bad);
    bad.ids[bag_start(&bad, 0, 13)] = -4242;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "id < 0", "user_id", 13, 1, -4242);
    test_batch_free(&bad);
    clone(&good, &bad); /* the last id of the batch, a NONE feature */
    bad.ids[bad.b.num_ids - 1] = 50;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "id == rows", "item_seq", B - 1, 1, 50);
    test_batch_free(&bad);

    /* NaN and Inf weights at (item_seq, 21) and (user_id, 3) */
    clone(&good, &bad);
    bad.weights[bag_start(&bad, 2, 21)] = NAN;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "NaN weight", "item_seq", 21, 0, 0);
    test_batch_free(&bad);
    clone(&good, &bad);
    bad.weights[bag_start(&bad, 0, 3)] = -INFINITY;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "Inf weight", "user_id", 3, 0, 0);
    test_batch_free(&bad);

    /* num_features differs from the config */
    clone(&good, &bad);
    bad.b.num_features = 2;
    expect_fail(c, tc, &good, &bad.b, EMBER_EINPUT, "num_features", NULL, -1, 0, 0);
    test_batch_free(&bad);

    /* bounds = drop: the same out-of-range id is skipped, not an error */
    test_config *drop = test_config_copy(tc);
    drop->cfg.bounds = EMBER_BOUNDS_DROP;
    ember_collection *cd = NULL;
    CHECK(ember_collection_create(&drop->cfg, &cd) == EMBER_OK);
    clone(&good, &bad);
    bad.ids[bag_start(&bad, 1, 29)] = 987;
    if (cd) {
        CHECK(ember_forward(cd, &bad.b, pooled, seqbuf) == EMBER_OK);
        ember_stats st;
        ember_collection_stats(cd, &st);
        CHECK(st.dropped_bounds == 1);
        CHECK(ember_backward(cd, dp, dseq) == EMBER_OK);
    }
    test_batch_free(&bad);
    ember_collection_destroy(cd);
    test_config_free(drop);

    test_batch_free(&good);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void numeric(test_rng *r)
{
    for (int debug = 0; debug < 2; debug++) {
        test_config *tc = config(debug);
        ember_collection *c = NULL;
        CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
        if (!c)
            return;
        test_batch good;
        good_batch(r, tc, &good);
        test_fill(r, dp, B * 7, -1, 1);
        test_fill(r, dseq, B * 9, -1, 1);
        /* row 43 of items holds NaN (then Inf); (item_hist, 31) looks it up */
        int64_t at = bag_start(&good, 1, 31);
        good.ids[at] = 43;
        for (int64_t i = 0; i < good.b.num_ids; i++)
            if (i != at && i >= bag_start(&good, 1, 0) && good.ids[i] == 43)
                good.ids[i] = 42;
        float row[3], bad_row[3] = {0.5f, NAN, 0.25f};
        CHECK(ember_table_read(c, 1, 43, 1, row) == EMBER_OK);
        for (int k = 0; k < 2; k++) {
            bad_row[1] = k ? INFINITY : NAN;
            CHECK(ember_table_write(c, 1, 43, 1, bad_row) == EMBER_OK);
            snapshot before = snap(c, tc);
            int rc = ember_forward(c, &good.b, pooled, seqbuf);
            const char *msg = ember_errmsg(c);
            if (debug) {
                printf("NaN row: status %d, message: %s\n", rc, msg ? msg : "NULL");
                CHECK_MSG(rc == EMBER_ENUMERIC, "%s row: status %d, want EMBER_ENUMERIC",
                          k ? "Inf" : "NaN", rc);
                CHECK(msg && strstr(msg, "items") && has_number(msg, 43));
                CHECK(ember_backward(c, dp, dseq) == EMBER_ESTATE);
            } else {
                CHECK_MSG(rc == EMBER_OK, "without debug_checks a NaN row is no error: %d", rc);
                CHECK(ember_backward(c, dp, dseq) == EMBER_OK);
                snap_free(&before);
                before = snap(c, tc);
            }
            CHECK(snap_same(c, tc, &before));
            snap_free(&before);
        }
        CHECK(ember_table_write(c, 1, 43, 1, row) == EMBER_OK);

        /* NaN in d_pooled at (item_hist, 17), a non-empty bag */
        if (debug) {
            CHECK(ember_forward(c, &good.b, pooled, seqbuf) == EMBER_OK);
            snapshot before = snap(c, tc);
            float saved = dp[17 * 7 + 4 + 1];
            dp[17 * 7 + 4 + 1] = NAN;
            int rc = ember_backward(c, dp, dseq);
            const char *msg = ember_errmsg(c);
            printf("NaN d_pooled: status %d, message: %s\n", rc, msg ? msg : "NULL");
            CHECK_MSG(rc == EMBER_ENUMERIC, "NaN d_pooled: status %d, want EMBER_ENUMERIC", rc);
            CHECK(msg && strstr(msg, "items"));
            CHECK_MSG(msg && has_number(msg, 17), "NaN d_pooled: message lacks sample 17");
            CHECK(snap_same(c, tc, &before));
            snap_free(&before);
            dp[17 * 7 + 4 + 1] = saved;
            CHECK(ember_forward(c, &good.b, pooled, seqbuf) == EMBER_OK);
            CHECK(ember_backward(c, dp, dseq) == EMBER_OK);
        }
        test_batch_free(&good);
        ember_collection_destroy(c);
        test_config_free(tc);
    }
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    bad_batches(&r);
    numeric(&r);
    return check_report("test_bad_input");
}
