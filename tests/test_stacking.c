/*
 * test_stacking.c: table stacking changes storage, never results.  The same
 * steps with stack_tables = 1 and 0 give bit-identical pooled and sequence
 * outputs, tables, optimizer state and stats (memcmp: a row's values, its
 * occurrences and their order are the same either way, so no rounding may
 * differ).  Also: ember_collection_memory's physical_tables equals the
 * number of (dim, optimizer) groups when stacked and num_tables when not;
 * optimizers that differ in one bit (weight decay -0.0 vs 0.0) do not stack;
 * and ref_stack_offset gives each table the rows of the earlier tables of
 * its group, moved to its position in the group modulo the shards.
 *
 * Each config: six tables, A B C (dim 8, one optimizer), D (dim 8, lr
 * differs), E F (dim 17, another optimizer), of varied rows; eight features
 * over them (so features share tables too), every combiner.
 */
#include "util.h"

#define STEPS 3

static void one_config(test_rng *r, int cfg_ix)
{
    test_config *tc = test_config_new(6, 8);
    ember_optimizer o1 = test_optimizer_random(r, (ember_optimizer_kind)(cfg_ix % 4));
    ember_optimizer o2 = test_optimizer_random(r, (ember_optimizer_kind)((cfg_ix + 1) % 4));
    ember_optimizer o3 = o1;
    o3.lr *= 0.5f;
    const int32_t dims[6] = {8, 8, 8, 8, 17, 17};
    const ember_optimizer *opts[6] = {&o1, &o1, &o1, &o3, &o2, &o2};
    for (int32_t t = 0; t < 6; t++) {
        tc->tables[t].rows = test_range(r, 1, 3000);
        tc->tables[t].dim = dims[t];
        tc->tables[t].optimizer = *opts[t];
        tc->tables[t].init = (ember_init_kind)test_range(r, 0, 2);
    }
    for (int32_t f = 0; f < 8; f++) {
        tc->features[f].table = (int32_t)test_range(r, 0, 6);
        tc->features[f].combiner = (ember_combiner)(f % 4);
    }
    tc->cfg.seed = test_next(r);
    tc->cfg.num_shards = (int32_t)test_range(r, 1, 5);
    tc->cfg.dedup = cfg_ix & 1;
    tc->cfg.bounds = (ember_bounds_policy)(cfg_ix >> 1 & 1);

    /* the reference offsets: the k-th table of a group at the first row at or
     * after the earlier tables' end that is k modulo the shards */
    tc->cfg.stack_tables = 1;
    int64_t ra = tc->tables[0].rows, rb = tc->tables[1].rows, re = tc->tables[4].rows, sh = tc->cfg.num_shards;
    int64_t ob = ra, oc, of = re;
    while (ob % sh != 1 % sh)
        ob++;
    oc = ob + rb;
    while (oc % sh != 2 % sh)
        oc++;
    while (of % sh != 1 % sh)
        of++;
    const int64_t want_off[6] = {0, ob, oc, 0, 0, of};
    int64_t pad_bytes = 4 * (8 * ((ob - ra) + (oc - ob - rb)) + 17 * (of - re)); /* the unused rows' values */
    for (int32_t t = 0; t < 6; t++)
        CHECK(ref_stack_offset(&tc->cfg, t) == want_off[t]);
    test_config *flat = test_config_copy(tc);
    flat->cfg.stack_tables = 0;
    for (int32_t t = 0; t < 6; t++)
        CHECK(ref_stack_offset(&flat->cfg, t) == 0);

    ember_collection *cs = NULL, *cf = NULL;
    CHECK_MSG(ember_collection_create(&tc->cfg, &cs) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK_MSG(ember_collection_create(&flat->cfg, &cf) == EMBER_OK, "%s", ember_errmsg(NULL));
    if (!cs || !cf)
        goto done;
    ember_memory ms, mf;
    ember_collection_memory(cs, &ms);
    ember_collection_memory(cf, &mf);
    CHECK_MSG(ms.physical_tables == 3, "stacked physical_tables %d, want 3", ms.physical_tables);
    CHECK_MSG(mf.physical_tables == 6, "flat physical_tables %d, want 6", mf.physical_tables);
    CHECK_MSG(ms.row_bytes == mf.row_bytes + pad_bytes, "row bytes %lld stacked, %lld flat + %lld of padding",
              (long long)ms.row_bytes, (long long)mf.row_bytes, (long long)pad_bytes);
    CHECK_MSG(test_tables_identical(cs, cf, &tc->cfg), "config %d: init differs", cfg_ix);

    for (int s = 0; s < STEPS; s++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = s == 1 ? 1 : 1024;
        o.max_len = 12;
        o.empty_frac = 0.1;
        o.dup_heavy = s == 2;
        o.weighted = 1;
        o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch tb;
        test_batch_make(r, &tc->cfg, &o, &tb);
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &tb.b);
        size_t pn = (size_t)(o.batch_size * W + 1), sn = (size_t)(S + 1);
        float *p1 = calloc(pn, 4), *p2 = calloc(pn, 4), *s1 = calloc(sn, 4), *s2 = calloc(sn, 4);
        float *dp = calloc(pn, 4), *ds = calloc(sn, 4);
        test_fill(r, dp, (int64_t)pn, -1, 1);
        test_fill(r, ds, (int64_t)sn, -1, 1);
        CHECK(ember_forward(cs, &tb.b, p1, s1) == EMBER_OK);
        CHECK(ember_forward(cf, &tb.b, p2, s2) == EMBER_OK);
        CHECK_MSG(memcmp(p1, p2, pn * 4) == 0, "config %d step %d: pooled differs", cfg_ix, s);
        CHECK_MSG(memcmp(s1, s2, sn * 4) == 0, "config %d step %d: sequence differs", cfg_ix, s);
        CHECK(ember_backward(cs, dp, ds) == EMBER_OK);
        CHECK(ember_backward(cf, dp, ds) == EMBER_OK);
        CHECK_MSG(test_tables_identical(cs, cf, &tc->cfg), "config %d step %d: tables differ",
                  cfg_ix, s);
        free(p1), free(p2), free(s1), free(s2), free(dp), free(ds);
        test_batch_free(&tb);
    }
    ember_stats a, b;
    ember_collection_stats(cs, &a);
    ember_collection_stats(cf, &b);
    CHECK(a.steps == STEPS && b.steps == STEPS);
    CHECK(a.dropped_bounds == b.dropped_bounds);
done:
    ember_collection_destroy(cs);
    ember_collection_destroy(cf);
    test_config_free(flat);
    test_config_free(tc);
}

/* "every field bitwise equal": weight decay -0.0 and 0.0 compare equal as
 * floats but differ in a bit, so they are two physical tables. */
static void bitwise_rule(void)
{
    test_config *tc = test_config_new(3, 1);
    tc->tables[1].optimizer.weight_decay = -0.0f;
    tc->tables[2].dim = 4;
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    if (c) {
        ember_memory mem;
        ember_collection_memory(c, &mem);
        CHECK_MSG(mem.physical_tables == 3, "physical_tables %d, want 3", mem.physical_tables);
    }
    CHECK(ref_stack_offset(&tc->cfg, 1) == 0);
    ember_collection_destroy(c);
    tc->tables[1].optimizer.weight_decay = 0.0f;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    if (c) {
        ember_memory mem;
        ember_collection_memory(c, &mem);
        CHECK_MSG(mem.physical_tables == 2, "physical_tables %d, want 2", mem.physical_tables);
    }
    CHECK(ref_stack_offset(&tc->cfg, 1) == 100);
    ember_collection_destroy(c);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    bitwise_rule();
    for (int i = 0; i < 8; i++)
        one_config(&r, i);
    return check_report("test_stacking");
}
