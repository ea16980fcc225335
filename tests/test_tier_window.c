/*
 * test_tier_window.c: the SSD tier's lookahead window that follows the data
 * (docs/tiers.md, "A window that follows the data").
 *
 *   results   a collection whose window follows the data (lookahead 1,
 *             lookahead_max 32) trains 240 steps of Zipf batches with a
 *             cache of a few steps' rows, announcing the batches up to the
 *             current step + ember_prefetch_depth; a memory collection
 *             trains the same steps: every output and, at the end, every
 *             row and its optimizer state are bit-identical (memcmp).
 *   moves     the window grew past where it started, never left [1, 32],
 *             changed only at steps that are multiples of 8, and
 *             ember_prefetch_depth_max is 32; its hit rate is at least the
 *             fixed window of 1's on the same steps.
 *   fixed     without lookahead_max the window stays (depth = depth_max =
 *             lookahead every step).
 *   refused   lookahead_max below lookahead or past 63.
 *   counters  cold_reloads, the estimate of loads of rows evicted cold, is
 *             at most the loads and positive here; a memory table has none.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier/ssd_size.h"
#include "util.h"

enum { STEPS = 240, ROWS = 20000, DIM = 8, B = 256, POOL = 8 };

static char root[256];

typedef struct run_out {
    float *out[STEPS];
    int32_t depth[STEPS];
    ember_tier_stats ts;
} run_out;

static test_config *config(int32_t lookahead, int32_t lookahead_max, int ssd, const char *dir)
{
    test_config *tc = test_config_new(1, 1);
    tc->cfg.seed = 11;
    tc->cfg.threads = 1;
    tc->tables[0].rows = ROWS;
    tc->tables[0].dim = DIM;
    tc->tables[0].optimizer = ember_optimizer_default(EMBER_OPT_ADAGRAD);
    if (ssd) {
        tc->cfg.ssd_dir = dir;
        tc->cfg.ssd_policy = EMBER_CACHE_LOOKAHEAD;
        tc->cfg.lookahead = lookahead;
        tc->cfg.lookahead_max = lookahead_max;
        tc->cfg.ssd_buffered = 1;
        tc->cfg.io_threads = 2;
        tc->tables[0].storage = EMBER_STORAGE_SSD;
        tc->tables[0].cache_bytes = ember_ssd_cache_bytes_for(3 * 1400, ROWS, test_ssd_record_bytes(&tc->tables[0]),
                                                              EMBER_CACHE_LOOKAHEAD);
    }
    return tc;
}

/* The steps on c, announcing up to step + depth; outputs and depths. */
static int run(ember_collection *c, const ember_synth_config *sc, run_out *ro)
{
    ember_synth *syn = NULL, *ahead = NULL; /* the batches, and the same stream read ahead */
    CHECK(ember_synth_create(sc, &syn) == EMBER_OK && ember_synth_create(sc, &ahead) == EMBER_OK);
    if (!syn || !ahead)
        return EMBER_ENOMEM;
    float *grad = malloc(sizeof(float) * B * DIM);
    test_rng gr = {99};
    int64_t announced = 0; /* batches 1..announced announced (batch 0 is the first step's) */
    ember_batch skip;
    CHECK(ember_synth_next(ahead, &skip) == EMBER_OK); /* ahead: batch 1 next */
    int st = EMBER_OK;
    for (int s = 0; s < STEPS && st == EMBER_OK; s++) {
        ember_batch b;
        ember_synth_next(syn, &b);
        ro->out[s] = malloc(sizeof(float) * B * DIM);
        st = ember_forward(c, &b, ro->out[s], NULL);
        CHECK_MSG(st == EMBER_OK, "forward %d: %s", s, ember_errmsg(c));
        int32_t depth = ember_prefetch_depth(c);
        ro->depth[s] = depth;
        for (; st == EMBER_OK && announced < s + depth && announced + 1 < STEPS; announced++) {
            ember_batch nx;
            ember_synth_next(ahead, &nx);
            st = ember_prefetch(c, &nx);
            CHECK_MSG(st == EMBER_OK, "prefetch: %s", ember_errmsg(c));
        }
        test_fill(&gr, grad, B * DIM, -1, 1);
        if (st == EMBER_OK) {
            st = ember_backward(c, grad, NULL);
            CHECK_MSG(st == EMBER_OK, "backward %d: %s", s, ember_errmsg(c));
        }
    }
    ember_collection_tier_stats(c, &ro->ts);
    free(grad);
    ember_synth_destroy(syn);
    ember_synth_destroy(ahead);
    return st;
}

static void free_out(run_out *ro)
{
    for (int s = 0; s < STEPS; s++)
        free(ro->out[s]);
}

static double hit_rate(const ember_tier_stats *t)
{
    return t->accesses ? 1.0 - (double)(t->demand_loads + t->prefetch_used) / (double)t->accesses : 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/ember-test-window-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    ember_synth_config sc = ember_synth_config_default();
    sc.tables = 1;
    sc.rows = ROWS;
    sc.batch_size = B;
    sc.pooling = POOL;
    sc.alpha = 1.05;
    sc.seed = 5;

    char da[300], df[300]; /* a store file's folder per collection */
    snprintf(da, sizeof da, "%s/a", root);
    snprintf(df, sizeof df, "%s/f", root);
    CHECK(mkdir(da, 0700) == 0 && mkdir(df, 0700) == 0);
    test_config *mc = config(0, 0, 0, root), *ac = config(1, 32, 1, da), *fc = config(1, 0, 1, df);
    ember_collection *mem = NULL, *ad = NULL, *fx = NULL;
    CHECK(ember_collection_create(&mc->cfg, &mem) == EMBER_OK);
    CHECK_MSG(ember_collection_create(&ac->cfg, &ad) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK_MSG(ember_collection_create(&fc->cfg, &fx) == EMBER_OK, "%s", ember_errmsg(NULL));
    run_out rm = {0}, ra = {0}, rf = {0};
    if (mem && ad && fx && run(mem, &sc, &rm) == EMBER_OK && run(ad, &sc, &ra) == EMBER_OK &&
        run(fx, &sc, &rf) == EMBER_OK) {
        /* results */
        int same = 1;
        for (int s = 0; s < STEPS && same; s++)
            CHECK_MSG((same = !memcmp(rm.out[s], ra.out[s], sizeof(float) * B * DIM)), "step %d: outputs differ", s);
        float *wm = test_read_table(mem, &mc->cfg, 0, 0), *wa = test_read_table(ad, &ac->cfg, 0, 0);
        float *sm = test_read_table(mem, &mc->cfg, 0, 1), *sa = test_read_table(ad, &ac->cfg, 0, 1);
        CHECK(wm && wa && !memcmp(wm, wa, sizeof(float) * ROWS * DIM));
        CHECK(sm && sa && !memcmp(sm, sa, sizeof(float) * ROWS * DIM));
        free(wm), free(wa), free(sm), free(sa);
        /* moves */
        int32_t top = 0;
        for (int s = 0; s < STEPS; s++) {
            top = ra.depth[s] > top ? ra.depth[s] : top;
            CHECK_MSG(ra.depth[s] >= 1 && ra.depth[s] <= 32, "step %d: window %d", s, ra.depth[s]);
            if (s > 0 && ra.depth[s] != ra.depth[s - 1])
                CHECK_MSG(s % 8 == 0, "the window moved after step %d, not a multiple of 8", s);
        }
        CHECK_MSG(top > 1, "the window never grew (it stayed %d)", top);
        CHECK(ember_prefetch_depth_max(ad) == 32);
        CHECK_MSG(hit_rate(&ra.ts) >= hit_rate(&rf.ts), "hit rate %.4f following the data, %.4f at window 1",
                  hit_rate(&ra.ts), hit_rate(&rf.ts));
        printf("window: up to %d; hit rate %.4f following the data, %.4f at window 1\n", top, hit_rate(&ra.ts),
               hit_rate(&rf.ts));
        /* fixed */
        for (int s = 0; s < STEPS; s++)
            CHECK_MSG(rf.depth[s] == 1, "fixed window: %d at step %d", rf.depth[s], s);
        CHECK(ember_prefetch_depth_max(fx) == 1);
        /* counters */
        int64_t loads = ra.ts.demand_loads + ra.ts.prefetch_loads;
        CHECK_MSG(ra.ts.cold_reloads > 0 && ra.ts.cold_reloads <= loads, "cold reloads %lld of %lld loads",
                  (long long)ra.ts.cold_reloads, (long long)loads);
        CHECK(ember_prefetch_depth(mem) == 0 && ember_prefetch_depth_max(mem) == 0);
    }
    free_out(&rm), free_out(&ra), free_out(&rf);
    ember_collection_destroy(mem);
    ember_collection_destroy(ad);
    ember_collection_destroy(fx);
    /* refused */
    test_config *bad = config(8, 4, 1, root);
    ember_collection *x = NULL;
    CHECK(ember_collection_create(&bad->cfg, &x) == EMBER_EINVAL && !x);
    CHECK(strstr(ember_errmsg(NULL), "lookahead_max 4 outside [lookahead = 8, 63]") != NULL);
    bad->cfg.lookahead_max = 64;
    CHECK(ember_collection_create(&bad->cfg, &x) == EMBER_EINVAL && !x);
    test_config_free(bad);
    test_config_free(mc);
    test_config_free(ac);
    test_config_free(fc);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    return check_report("test_tier_window");
}
