/*
 * test_route_parallel.c: the parallel router on batches big enough to be
 * split over threads (>= 32768 entries per physical table), with every
 * feature that makes chunks compact: dedup merges, ids dropped by bounds,
 * limit drops, NONE features, weights.
 *
 * Checks: forward output, stats, and tables and optimizer state after
 * backward are bit-identical for 1, 2 and 3 threads (memcmp), and the
 * forward equals the naive reference (rtol 1e-5, atol 1e-6: the reference
 * sums in the same order, so only vectorised float rounding differs).
 */
#include <string.h>

#include "util.h"

#define STEPS 2

typedef struct run_result {
    float *pooled, *seq, *tables;
    ember_stats stats;
    int status;
} run_result;

static void run(const test_config *tc, const test_batch *tb, int threads, const float *grad,
                int64_t width, int64_t seqn, run_result *out)
{
    ember_collection *c;
    memset(out, 0, sizeof *out);
    if (ember_collection_create(&tc->cfg, &c) != EMBER_OK) {
        fprintf(stderr, "create: %s\n", ember_errmsg(NULL));
        out->status = -100;
        return;
    }
    ember_collection_set_threads(c, threads);
    int64_t B = tb->b.batch_size;
    out->pooled = calloc((size_t)(B * width + 1), sizeof(float));
    out->seq = calloc((size_t)(seqn + 1), sizeof(float));
    for (int s = 0; s < STEPS && out->status == EMBER_OK; s++) {
        out->status = ember_forward(c, &tb->b, out->pooled, out->seq);
        if (out->status == EMBER_OK)
            out->status = ember_backward(c, grad, grad + B * width);
    }
    if (out->status == EMBER_OK)
        out->status = ember_forward(c, &tb->b, out->pooled, out->seq);
    if (out->status != EMBER_OK)
        fprintf(stderr, "threads %d: %s\n", threads, ember_errmsg(c));
    ember_collection_stats(c, &out->stats);
    int64_t total = 0;
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        const ember_table_config *tb2 = &tc->cfg.tables[t];
        total += tb2->rows * (tb2->dim + ember_state_floats(tb2->optimizer.kind, tb2->dim));
    }
    out->tables = malloc(sizeof(float) * (size_t)total);
    float *p = out->tables;
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        const ember_table_config *tb2 = &tc->cfg.tables[t];
        ember_table_read(c, t, 0, tb2->rows, p);
        p += tb2->rows * tb2->dim;
        ember_table_read_state(c, t, 0, tb2->rows, p);
        p += tb2->rows * ember_state_floats(tb2->optimizer.kind, tb2->dim);
    }
    ember_collection_destroy(c);
}

static void free_result(run_result *r)
{
    free(r->pooled);
    free(r->seq);
    free(r->tables);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    test_rng rng = {seed};
    for (int trial = 0; trial < 6; trial++) {
        test_config *tc = test_config_random(&rng, 3, 4, 50, 3000);
        for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
            tc->tables[t].dim = (int32_t)test_range(&rng, 1, 9); /* keep it quick */
            if (trial % 2 == 1 && test_range(&rng, 0, 2)) {       /* drop-policy limits */
                tc->tables[t].max_unique_ids_per_partition = test_range(&rng, 20, 200);
                tc->tables[t].limit_policy = EMBER_LIMIT_DROP;
            }
        }
        tc->cfg.bounds = EMBER_BOUNDS_DROP;
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = 4096;
        o.max_len = 24;
        o.weighted = (int)test_range(&rng, 0, 2);
        o.id_range = test_range(&rng, 0, 2) ? 40 : 0; /* many repeats in a bag */
        o.invalid_frac = 0.03;
        o.empty_frac = 0.1;
        test_batch tb;
        test_batch_make(&rng, &tc->cfg, &o, &tb);
        int64_t width = test_pooled_width(&tc->cfg), seqn = test_sequence_size(&tc->cfg, &tb.b);
        int64_t gn = (int64_t)o.batch_size * width + seqn;
        float *grad = malloc(sizeof(float) * (size_t)(gn + 1));
        test_fill(&rng, grad, gn, -1.0f, 1.0f);
        printf("trial %d: %d tables, %d features, %lld ids, dedup %d, stack %d, shards %d\n", trial,
               tc->cfg.num_tables, tc->cfg.num_features, (long long)tb.b.num_ids, tc->cfg.dedup,
               tc->cfg.stack_tables, tc->cfg.num_shards);

        run_result r1, r2, r3;
        run(tc, &tb, 1, grad, width, seqn, &r1);
        run(tc, &tb, 2, grad, width, seqn, &r2);
        run(tc, &tb, 3, grad, width, seqn, &r3);
        CHECK(r1.status == EMBER_OK && r2.status == EMBER_OK && r3.status == EMBER_OK);
        if (r1.status == EMBER_OK && r2.status == EMBER_OK && r3.status == EMBER_OK) {
            size_t pb = sizeof(float) * (size_t)(o.batch_size * width), sb = sizeof(float) * (size_t)seqn;
            CHECK(!memcmp(r1.pooled, r2.pooled, pb) && !memcmp(r1.pooled, r3.pooled, pb));
            CHECK(!memcmp(r1.seq, r2.seq, sb) && !memcmp(r1.seq, r3.seq, sb));
            CHECK(r1.stats.dropped_bounds == r2.stats.dropped_bounds &&
                  r1.stats.dropped_bounds == r3.stats.dropped_bounds);
            CHECK(r1.stats.dropped_limit == r2.stats.dropped_limit &&
                  r1.stats.dropped_limit == r3.stats.dropped_limit);
            CHECK(r1.stats.dropped_bounds == (STEPS + 1) * tb.invalid);
            int64_t total = 0;
            for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
                const ember_table_config *tb2 = &tc->cfg.tables[t];
                total += tb2->rows * (tb2->dim + ember_state_floats(tb2->optimizer.kind, tb2->dim));
            }
            CHECK(!memcmp(r1.tables, r2.tables, sizeof(float) * (size_t)total));
            CHECK(!memcmp(r1.tables, r3.tables, sizeof(float) * (size_t)total));

            /* Forward against the reference, on fresh tables, no limits. */
            test_config *plain = test_config_copy(tc);
            for (int32_t t = 0; t < plain->cfg.num_tables; t++)
                plain->tables[t].max_unique_ids_per_partition = 0;
            ember_collection *c;
            ref_model m;
            if (ember_collection_create(&plain->cfg, &c) == EMBER_OK && ref_model_init(&m, &plain->cfg) == 0) {
                ember_collection_set_threads(c, 2);
                float *want = calloc((size_t)(o.batch_size * width + seqn + 1), sizeof(float));
                CHECK(ember_forward(c, &tb.b, r1.pooled, r1.seq) == EMBER_OK);
                ref_forward(&m, &tb.b, NULL, want, want + o.batch_size * width);
                CHECK_CLOSE(r1.pooled, want, o.batch_size * width, 1e-5, 1e-6, "pooled vs ref");
                CHECK_CLOSE(r1.seq, want + o.batch_size * width, seqn, 1e-5, 1e-6, "sequence vs ref");
                free(want);
                ref_model_free(&m);
                ember_collection_destroy(c);
            } else {
                CHECK_MSG(0, "create: %s", ember_errmsg(NULL));
            }
            test_config_free(plain);
        }
        free_result(&r1);
        free_result(&r2);
        free_result(&r3);
        free(grad);
        test_batch_free(&tb);
        test_config_free(tc);
    }
    return check_report("test_route_parallel");
}
