/*
 * test_exchange_self.c: the exchange code path in a world of one.
 *
 * DESIGN.md: "a world of one process is the same code with trivial
 * exchanges".  A world of one normally skips the exchanges (they would only
 * copy); with the internal flag exchange_always, forward and backward run
 * the whole distributed path (counts, agreement, packing, the owner's
 * received route, rows / partial sums / column slices, gradient exchange)
 * through the world of one's copies.  Every placement and exchange mode
 * must then give bit-identical outputs, tables and optimizer state to the
 * direct path (memcmp): with one rank a POOLED partial is the whole bag and
 * a COLUMN slice is the whole row, summed in the same order.  Random
 * configs cover every optimizer and combiner, weights, dedup, stacking,
 * bounds=drop and the minibatch limit policy (several rounds), with debug
 * checks on half the time.  This runs the exchange code under plain ctest
 * and under ASan without MPI.
 */
#include "collection/collection.h"
#include "util.h"

#define TRIALS 24
#define STEPS 3

static void one_trial(test_rng *r, int trial)
{
    test_config *tc = test_config_random(r, 4, 6, 1, 3000);
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->placement = (ember_placement)test_range(r, 0, 4);
        tb->exchange = (ember_exchange)test_range(r, 0, 2);
        if (test_range(r, 0, 3) == 0) {
            tb->max_ids_per_partition = test_range(r, 40, 400);
            tb->limit_policy = EMBER_LIMIT_MINIBATCH;
        }
    }
    tc->cfg.debug_checks = trial & 1;
    char what[512];
    int at = snprintf(what, sizeof what, "trial %d dedup %d stack %d bounds %d debug %d:", trial, tc->cfg.dedup,
                      tc->cfg.stack_tables, tc->cfg.bounds, tc->cfg.debug_checks);
    for (int32_t t = 0; t < tc->cfg.num_tables && at < (int)sizeof what - 64; t++)
        at += snprintf(what + at, sizeof what - (size_t)at, " [%s %lldx%d opt %d place %d xchg %d mb %lld]",
                       tc->tables[t].name, (long long)tc->tables[t].rows, tc->tables[t].dim,
                       tc->tables[t].optimizer.kind, tc->tables[t].placement, tc->tables[t].exchange,
                       (long long)tc->tables[t].max_ids_per_partition);
    ember_collection *direct = NULL, *xchg = NULL;
    CHECK_MSG(ember_collection_create(&tc->cfg, &direct) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK_MSG(ember_collection_create(&tc->cfg, &xchg) == EMBER_OK, "%s", ember_errmsg(NULL));
    if (!direct || !xchg)
        goto done;
    xchg->exchange_always = 1;
    for (int s = 0; s < STEPS; s++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = (int32_t)test_range(r, 0, 300);
        o.max_len = (int32_t)test_range(r, 1, 20);
        o.empty_frac = 0.1;
        o.dup_heavy = s == 2;
        o.weighted = (int)test_range(r, 0, 2);
        o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch tb;
        test_batch_make(r, &tc->cfg, &o, &tb);
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &tb.b);
        size_t pn = (size_t)(o.batch_size * W + 1), sn = (size_t)(S + 1);
        float *p1 = calloc(pn, 4), *p2 = calloc(pn, 4), *s1 = calloc(sn, 4), *s2 = calloc(sn, 4);
        float *dp = calloc(pn, 4), *ds = calloc(sn, 4);
        test_fill(r, dp, (int64_t)pn, -1, 1);
        test_fill(r, ds, (int64_t)sn, -1, 1);
        int st1 = ember_forward(direct, &tb.b, p1, s1), st2 = ember_forward(xchg, &tb.b, p2, s2);
        CHECK_MSG(st1 == st2, "%s step %d: forward %d vs %d (%s)", what, s, st1, st2, ember_errmsg(xchg));
        if (st1 == EMBER_OK && st2 == EMBER_OK) {
            CHECK_MSG(memcmp(p1, p2, pn * 4) == 0, "%s step %d: pooled differs", what, s);
            CHECK_MSG(memcmp(s1, s2, sn * 4) == 0, "%s step %d: sequence differs", what, s);
            CHECK(ember_backward(direct, dp, ds) == EMBER_OK);
            CHECK_MSG(ember_backward(xchg, dp, ds) == EMBER_OK, "%s", ember_errmsg(xchg));
            CHECK_MSG(test_tables_identical(direct, xchg, &tc->cfg), "%s step %d: tables differ", what,
                      s);
            ember_stats a;
            ember_collection_stats(xchg, &a);
            CHECK_MSG(a.last_bytes_sent == 0, "a world of one sent %lld bytes", (long long)a.last_bytes_sent);
        }
        free(p1), free(p2), free(s1), free(s2), free(dp), free(ds);
        test_batch_free(&tb);
    }
done:
    ember_collection_destroy(direct);
    ember_collection_destroy(xchg);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    for (int t = 0; t < TRIALS; t++)
        one_trial(&r, t);
    return check_report("test_exchange_self");
}
