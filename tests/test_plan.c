/*
 * test_plan.c: the planner and its cost model (src/plan/), without MPI.
 *
 * 1. The model against an exact count.  A synthetic global batch (the
 *    generator of src/data/synth.c, one stream per feature) is split into W
 *    local batches, rank r holding samples [r*B/W, (r+1)*B/W), and a naive
 *    counter written from docs/distributed.md's wire-format table adds up,
 *    for every ordered pair src != dst, what src sends: segments with at
 *    least one entry at dst, entries, distinct rows, rows / partial sums /
 *    column slices back, gradients, row-wise Adagrad partial sums.  The
 *    model's bytes sent and received per rank must be within 10% of the
 *    count (mean of 3 batches) for W in {2, 3, 4, 8}, both exchanges, all
 *    four placements, three workload shapes (Zipf with stacking, a NONE
 *    feature and a table with fewer rows than ranks; uniform with weights,
 *    dedup and debug checks; row-wise Adagrad on a column-wise table).
 * 2. The distinct-rows law against the generator (within 2%).
 * 3. The planner: plans fit the budget, or fail naming the table; pins are
 *    honoured; small tables are replicated where that is cheapest; the
 *    table-wise bin packing is within 4/3 of a brute-force optimum (and
 *    LPT's bound); the W1 plan goes table-wise at 8 ranks and not at 64;
 *    a 1024-rank plan of 200 tables takes milliseconds (under 3 s even
 *    in a sanitizer build).
 * 4. Dynamic tables: D(n) of their keys and the keys per owner against the
 *    real generator (`ember train`'s synthetic keys); the model against the
 *    exact count of the rows they resolve to plus the key exchange; Che's
 *    keys without a row against a naive LRU; their memory (rows, state and
 *    key index) against a real collection, and a budget that fits the rows
 *    but not the index.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "collection/config.h"
#include "data/ctr.h"
#include "dyn/dyn.h"
#include "ember.h"
#include "plan/plan.h"

/* ------------------------------------------------------------ a workload */

#define MAX_T 8
#define MAX_F 8

typedef struct workload {
    ember_collection_config cfg;
    ember_table_config tables[MAX_T];
    ember_feature_config features[MAX_F];
    double pooling[MAX_F];
    int zipf[MAX_T];
    plan_id_stats *stats; /* [MAX_T] */
    int64_t B;
    int weighted;
} workload;

static void wl_init(workload *w, int64_t B)
{
    memset(w, 0, sizeof *w);
    w->cfg = ember_collection_config_default();
    w->cfg.tables = w->tables;
    w->cfg.features = w->features;
    w->B = B;
    w->stats = calloc(MAX_T, sizeof *w->stats);
}

static void wl_table(workload *w, const char *name, int64_t rows, int32_t dim, int zipf,
                     ember_optimizer_kind opt)
{
    ember_table_config *t = &w->tables[w->cfg.num_tables];
    *t = ember_table_config_default();
    t->name = name;
    t->rows = rows;
    t->dim = dim;
    t->optimizer = ember_optimizer_default(opt);
    w->zipf[w->cfg.num_tables] = zipf;
    if (zipf)
        plan_stats_zipf(rows, 1.05, &w->stats[w->cfg.num_tables]);
    else
        plan_stats_uniform(rows, &w->stats[w->cfg.num_tables]);
    w->cfg.num_tables++;
}

static void wl_feature(workload *w, const char *name, int32_t table, int32_t pooling,
                       ember_combiner comb)
{
    int32_t f = w->cfg.num_features++;
    w->features[f] = (ember_feature_config){name, table, comb};
    w->pooling[f] = pooling;
}

static void wl_place(workload *w, ember_placement p, ember_exchange x, int32_t owner)
{
    for (int32_t t = 0; t < w->cfg.num_tables; t++) {
        w->tables[t].placement = p;
        w->tables[t].exchange = x;
        w->tables[t].owner = owner;
    }
}

static plan_workload wl_plan(const workload *w)
{
    plan_workload p = {&w->cfg, w->B, w->pooling, w->weighted, w->stats};
    return p;
}

/* The global batch: feature-major, every bag exactly pooling[f] ids. */
typedef struct gbatch {
    int32_t *len;
    int64_t *ids;
    int64_t *off; /* [F * B + 1] start of each bag */
} gbatch;

static void make_batch(const workload *w, int64_t n, gbatch *g)
{
    int32_t F = w->cfg.num_features;
    int64_t B = w->B, total = 0;
    for (int32_t f = 0; f < F; f++)
        total += B * (int64_t)w->pooling[f];
    g->len = malloc(sizeof *g->len * (size_t)(F * B));
    g->ids = malloc(sizeof *g->ids * (size_t)(total + 1));
    g->off = malloc(sizeof *g->off * (size_t)(F * B + 1));
    int64_t k = 0;
    for (int32_t f = 0; f < F; f++) {
        int32_t t = w->features[f].table;
        ember_synth_config sc = ember_synth_config_default();
        sc.tables = 1;
        sc.rows = w->tables[t].rows;
        sc.batch_size = (int32_t)B;
        sc.pooling = (int32_t)w->pooling[f];
        sc.zipf = w->zipf[t];
        sc.seed = 1000 * (uint64_t)n + 17 * (uint64_t)f + 5;
        ember_synth *s = NULL;
        ember_batch b;
        if (ember_synth_create(&sc, &s) != EMBER_OK || ember_synth_next(s, &b) != EMBER_OK)
            abort();
        memcpy(g->ids + k, b.ids, sizeof *g->ids * (size_t)b.num_ids);
        for (int64_t i = 0; i < B; i++) {
            g->len[f * B + i] = sc.pooling;
            g->off[f * B + i] = k + i * sc.pooling;
        }
        k += b.num_ids;
        ember_synth_destroy(s);
    }
    g->off[F * B] = k;
}

static void free_batch(gbatch *g)
{
    free(g->len);
    free(g->ids);
    free(g->off);
}

/* ------------------------------------------------ the exact wire count */

static int same_group(const ember_table_config *a, const ember_table_config *b)
{
    return a->dim == b->dim && !memcmp(&a->optimizer, &b->optimizer, sizeof a->optimizer) &&
           a->placement == b->placement && a->exchange == b->exchange &&
           (a->placement != EMBER_PLACE_TABLE || a->owner == b->owner);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Distinct values of v[0..n) (sorts v). */
static int64_t count_distinct(uint64_t *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += i == 0 || v[i] != v[i - 1];
    return d;
}

/* Adds into sent[W] and recv[W] (all-to-all plus all-gather) the bytes of
 * one step of the global batch, message by message per docs/distributed.md. */
static void exact_bytes(const workload *w, const gbatch *g, int32_t W, double *sent,
                        double *recv)
{
    const ember_collection_config *cfg = &w->cfg;
    int32_t T = cfg->num_tables, F = cfg->num_features;
    int64_t B = w->B;
    double h = 8 + (cfg->debug_checks ? 8 : 0), x = 4 + (w->weighted || cfg->dedup ? 4 : 0);
    int32_t group[MAX_T], first[MAX_T], ng = 0;
    int64_t offset[MAX_T], grows[MAX_T];
    for (int32_t t = 0; t < T; t++) {
        int32_t gi = -1;
        for (int32_t q = 0; q < ng && cfg->stack_tables && gi < 0; q++)
            if (same_group(&cfg->tables[first[q]], &cfg->tables[t]))
                gi = q;
        if (gi < 0) {
            gi = ng++;
            first[gi] = t;
            grows[gi] = 0;
        }
        group[t] = gi;
        offset[t] = grows[gi];
        grows[gi] += cfg->tables[t].rows;
    }
    double *M = calloc((size_t)W * W, sizeof *M); /* M[s*W+d]: bytes s -> d */
    int64_t maxbag = 0;
    for (int32_t f = 0; f < F; f++)
        if ((int64_t)w->pooling[f] > maxbag)
            maxbag = (int64_t)w->pooling[f];
    uint64_t *bag = malloc(sizeof *bag * (size_t)(maxbag + 1));
    uint64_t *keys = malloc(sizeof *keys * (size_t)(g->off[F * B] + 1));
    for (int32_t gi = 0; gi < ng; gi++) {
        const ember_table_config *tb = &cfg->tables[first[gi]];
        int32_t dim = tb->dim, c = (dim + W - 1) / W;
        int rows_mode = tb->exchange == EMBER_EXCHANGE_ROWS;
        int64_t U = 0, nglob = 0;
        for (int32_t s = 0; s < W; s++) {
            int64_t s0 = (int64_t)s * B / W, s1 = (int64_t)(s + 1) * B / W;
            double *segs = calloc((size_t)W, sizeof(double)), *ents = calloc((size_t)W, sizeof(double));
            int64_t nk = 0;
            double segs_all = 0, ents_all = 0;
            for (int64_t b = s0; b < s1; b++) /* sample-major, features in order */
                for (int32_t f = 0; f < F; f++) {
                    int32_t t = cfg->features[f].table;
                    if (group[t] != gi)
                        continue;
                    int none = cfg->features[f].combiner == EMBER_COMBINER_NONE;
                    int64_t lo = g->off[f * B + b], n = g->len[f * B + b], m = 0;
                    for (int64_t i = 0; i < n; i++) {
                        uint64_t row = (uint64_t)(offset[t] + g->ids[lo + i]);
                        int dup = 0;
                        for (int64_t j = 0; j < m && cfg->dedup && !none; j++)
                            dup |= bag[j] == row;
                        if (!dup)
                            bag[m++] = row;
                    }
                    segs_all += none ? (double)m : 1;
                    ents_all += (double)m;
                    /* ROW / TABLE: segments and entries per owner */
                    if (tb->placement == EMBER_PLACE_ROW || tb->placement == EMBER_PLACE_TABLE) {
                        int32_t seen_owner[64];
                        int ns = 0;
                        for (int64_t j = 0; j < m; j++) {
                            int32_t d = tb->placement == EMBER_PLACE_ROW ? (int32_t)(bag[j] % W)
                                                                         : tb->owner;
                            ents[d] += 1;
                            keys[nk++] = (uint64_t)d << 40 | bag[j];
                            if (none) {
                                segs[d] += 1;
                                continue;
                            }
                            int had = 0;
                            for (int q = 0; q < ns; q++)
                                had |= seen_owner[q] == d;
                            if (!had)
                                seen_owner[ns++] = d;
                        }
                        for (int q = 0; q < ns; q++)
                            segs[seen_owner[q]] += 1;
                    }
                }
            if (tb->placement == EMBER_PLACE_ROW || tb->placement == EMBER_PLACE_TABLE) {
                /* distinct rows per (s, d): keys sorted by (d, row) */
                double *uq = calloc((size_t)W, sizeof(double));
                qsort(keys, (size_t)nk, sizeof *keys, cmp_u64);
                for (int64_t i = 0; i < nk; i++)
                    if (i == 0 || keys[i] != keys[i - 1])
                        uq[keys[i] >> 40] += 1;
                for (int32_t d = 0; d < W; d++) {
                    if (d == s)
                        continue;
                    M[s * W + d] += h * segs[d] + x * ents[d] + (rows_mode ? 4 * uq[d] : 0) +
                                    4.0 * dim * segs[d];
                    /* rows go back as the owner holds them: 2 bytes per element in half precision */
                    double row = (tb->precision == EMBER_PRECISION_FP32 ? 4.0 : 2.0) * dim;
                    M[d * W + s] += rows_mode ? row * uq[d] : 4.0 * dim * segs[d];
                }
                free(uq);
            } else {
                for (int32_t d = 0; d < W; d++) {
                    if (d == s)
                        continue;
                    if (tb->placement == EMBER_PLACE_COLUMN) {
                        M[s * W + d] += h * segs_all + x * ents_all + 4.0 * c * segs_all;
                        M[d * W + s] += 4.0 * c * segs_all;
                    } else {
                        M[s * W + d] += h * segs_all + x * ents_all + 4.0 * dim * segs_all;
                    }
                }
            }
            free(segs);
            free(ents);
        }
        /* row-wise Adagrad on a column table: distinct rows updated, all-gathered */
        if (tb->placement == EMBER_PLACE_COLUMN && tb->optimizer.kind == EMBER_OPT_ROWWISE_ADAGRAD) {
            for (int32_t f = 0; f < F; f++) {
                int32_t t = cfg->features[f].table;
                if (group[t] != gi)
                    continue;
                for (int64_t i = g->off[f * B]; i < g->off[f * B + B]; i++)
                    keys[nglob++] = (uint64_t)(offset[t] + g->ids[i]);
            }
            U = count_distinct(keys, nglob);
            for (int32_t s = 0; s < W; s++)
                for (int32_t d = 0; d < W; d++)
                    if (s != d)
                        M[s * W + d] += 4.0 * (double)U;
        }
    }
    for (int32_t s = 0; s < W; s++)
        for (int32_t d = 0; d < W; d++) {
            sent[s] += M[s * W + d];
            recv[d] += M[s * W + d];
        }
    free(M);
    free(bag);
    free(keys);
}

/* -------------------------------------------------- model vs exact count */

static double worst_err; /* largest relative error seen, reported */
static char worst_case[256];

static void check_model_case(workload *w, const char *shape, int batches)
{
    static const int32_t worlds[] = {2, 3, 4, 8};
    gbatch g[4];
    for (int n = 0; n < batches; n++)
        make_batch(w, n, &g[n]);
    for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++) {
        int32_t W = worlds[wi];
        for (int p = 0; p < 4; p++)
            for (int xm = 0; xm < 2; xm++) {
                if ((p == EMBER_PLACE_COLUMN || p == EMBER_PLACE_REPLICATED) && xm == 1)
                    continue; /* the exchange does not apply */
                wl_place(w, (ember_placement)p, (ember_exchange)xm, 1 % W);
                double sent[8] = {0}, recv[8] = {0};
                for (int n = 0; n < batches; n++)
                    exact_bytes(w, &g[n], W, sent, recv);
                plan_rank_cost pc[8];
                plan_workload pw = wl_plan(w);
                CHECK(plan_predict(&pw, W, pc, NULL) == EMBER_OK);
                for (int32_t r = 0; r < W; r++) {
                    double es = sent[r] / batches, er = recv[r] / batches;
                    double ps = pc[r].a2a_sent + pc[r].ag_sent, pr = pc[r].a2a_recv + pc[r].ag_recv;
                    double pb = plan_predict_bytes_sent(&pw, W, r);
                    CHECK_MSG(fabs(ps - es) <= 0.10 * es + 64 && fabs(pr - er) <= 0.10 * er + 64,
                              "%s W=%d placement %d exchange %d rank %d: sent model %.0f exact "
                              "%.0f (%+.1f%%), received model %.0f exact %.0f (%+.1f%%)",
                              shape, W, p, xm, r, ps, es, 100 * (ps - es) / (es > 0 ? es : 1),
                              pr, er, 100 * (pr - er) / (er > 0 ? er : 1));
                    CHECK(fabs(pb - ps) <= 1e-6 * (ps + 1));
                    double e1 = fabs(ps - es) / (es > 0 ? es : 1), e2 = fabs(pr - er) / (er > 0 ? er : 1);
                    if (e1 > worst_err || e2 > worst_err) {
                        worst_err = e1 > e2 ? e1 : e2;
                        snprintf(worst_case, sizeof worst_case,
                                 "%s W=%d placement %d exchange %d rank %d: sent %.0f vs %.0f, "
                                 "received %.0f vs %.0f", shape, W, p, xm, r, ps, es, pr, er);
                    }
                }
            }
    }
    for (int n = 0; n < batches; n++)
        free_batch(&g[n]);
}

static void test_model_exact(void)
{
    workload w;
    /* A: Zipf, two stacked tables, a NONE feature, feature stacking, a
     * table of 5 rows (fewer than 8 ranks) */
    wl_init(&w, 2048);
    wl_table(&w, "big", 100000, 64, 1, EMBER_OPT_ADAGRAD);
    wl_table(&w, "mid", 20000, 64, 1, EMBER_OPT_ADAGRAD);
    wl_table(&w, "tiny", 5, 16, 1, EMBER_OPT_SGD);
    wl_feature(&w, "f_big", 0, 20, EMBER_COMBINER_SUM);
    wl_feature(&w, "f_mid", 1, 5, EMBER_COMBINER_MEAN);
    wl_feature(&w, "f_tiny", 2, 2, EMBER_COMBINER_SUM);
    wl_feature(&w, "f_seq", 0, 3, EMBER_COMBINER_NONE);
    check_model_case(&w, "zipf", 3);
    free(w.stats);
    /* B: uniform, weights, dedup, debug checks, long bags */
    wl_init(&w, 1024);
    wl_table(&w, "u", 1000000, 128, 0, EMBER_OPT_SGD);
    wl_table(&w, "v", 3000, 32, 0, EMBER_OPT_ADAM);
    wl_feature(&w, "fu", 0, 10, EMBER_COMBINER_SUM);
    wl_feature(&w, "fv", 1, 30, EMBER_COMBINER_SQRTN);
    w.weighted = 1;
    w.cfg.dedup = 1;
    w.cfg.debug_checks = 1;
    check_model_case(&w, "uniform+dedup", 3);
    free(w.stats);
    /* C: row-wise Adagrad (column-wise all-gathers partial sums), Zipf with
     * dedup on short bags, no stacking */
    wl_init(&w, 1536);
    wl_table(&w, "r", 50000, 48, 1, EMBER_OPT_ROWWISE_ADAGRAD);
    wl_table(&w, "s", 800, 8, 1, EMBER_OPT_ROWWISE_ADAGRAD);
    wl_feature(&w, "fr", 0, 4, EMBER_COMBINER_SUM);
    wl_feature(&w, "fs", 1, 6, EMBER_COMBINER_MEAN);
    w.cfg.dedup = 1;
    w.cfg.stack_tables = 0;
    check_model_case(&w, "rowwise", 3);
    free(w.stats);
    /* D: half-precision rows (fp16, bf16) beside fp32: ROWS sends them as held */
    wl_init(&w, 1024);
    wl_table(&w, "h", 60000, 32, 1, EMBER_OPT_ROWWISE_ADAGRAD);
    wl_table(&w, "g", 4000, 32, 0, EMBER_OPT_ADAGRAD);
    wl_table(&w, "f", 4000, 16, 1, EMBER_OPT_SGD);
    w.tables[0].precision = EMBER_PRECISION_FP16;
    w.tables[1].precision = EMBER_PRECISION_BF16;
    wl_feature(&w, "fh", 0, 8, EMBER_COMBINER_SUM);
    wl_feature(&w, "fg", 1, 3, EMBER_COMBINER_MEAN);
    wl_feature(&w, "ff", 2, 2, EMBER_COMBINER_SUM);
    check_model_case(&w, "half", 3);
    free(w.stats);
    printf("model vs exact count: largest error %.2f%% (%s)\n", 100 * worst_err, worst_case);
}

/* --------------------------------------------- the distinct-rows law */

static void test_distinct_law(void)
{
    static const struct { int64_t rows; int zipf; int32_t n; } cases[] = {
        {1000000, 1, 200000}, {100000, 1, 40960}, {5000, 1, 20000},
        {10000000, 0, 81920}, {3000, 0, 30000}, {50, 1, 20},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ember_synth_config sc = ember_synth_config_default();
        sc.tables = 1;
        sc.rows = cases[i].rows;
        sc.zipf = cases[i].zipf;
        sc.batch_size = cases[i].n / 20 > 0 ? cases[i].n / 20 : 1;
        sc.pooling = cases[i].n / sc.batch_size;
        double got = 0, want = 0;
        plan_id_stats st;
        CHECK(plan_stats_synth(&sc, &st) == EMBER_OK);
        for (int rep = 0; rep < 4; rep++) {
            sc.seed = 77 + rep;
            ember_synth *s = NULL;
            ember_batch b;
            CHECK(ember_synth_create(&sc, &s) == EMBER_OK && ember_synth_next(s, &b) == EMBER_OK);
            uint64_t *v = malloc(sizeof *v * (size_t)b.num_ids);
            for (int64_t k = 0; k < b.num_ids; k++)
                v[k] = (uint64_t)b.ids[k];
            got += (double)count_distinct(v, b.num_ids);
            want += plan_stats_distinct(&st, (double)b.num_ids);
            free(v);
            ember_synth_destroy(s);
        }
        CHECK_MSG(fabs(got - want) <= 0.02 * got + 1, "rows %lld %s n %d: measured %.1f, law %.1f",
                  (long long)cases[i].rows, cases[i].zipf ? "zipf" : "uniform", cases[i].n,
                  got / 4, want / 4);
    }
    /* the builder on the same stream agrees with the law */
    ember_synth_config sc = ember_synth_config_default();
    sc.tables = 1;
    sc.rows = 200000;
    sc.batch_size = 4096;
    sc.pooling = 10;
    plan_stats_builder *bl = NULL;
    CHECK(plan_stats_builder_create(sc.rows, &bl) == EMBER_OK);
    ember_synth *s = NULL;
    ember_batch b;
    CHECK(ember_synth_create(&sc, &s) == EMBER_OK);
    for (int n = 0; n < 4; n++) {
        CHECK(ember_synth_next(s, &b) == EMBER_OK);
        CHECK(plan_stats_builder_add(bl, b.ids, b.num_ids) == EMBER_OK);
    }
    plan_id_stats meas, law;
    CHECK(plan_stats_builder_finish(bl, &meas) == EMBER_OK);
    CHECK(plan_stats_zipf(sc.rows, sc.alpha, &law) == EMBER_OK);
    for (double n = 10; n <= 160000; n *= 4) {
        double a = plan_stats_distinct(&meas, n), c = plan_stats_distinct(&law, n);
        CHECK_MSG(fabs(a - c) <= 0.05 * c + 2, "builder n=%.0f: measured %.1f law %.1f", n, a, c);
    }
    CHECK(meas.hot > 100 && meas.hot_row[0] == 0 && fabs(meas.hot_p[0] - law.hot_p[0]) < 0.01);
    ember_synth_destroy(s);
    plan_stats_builder_destroy(bl);
}

/* ------------------------------------------------------------- the planner */

static uint64_t rng_state = 12345;
static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

static int64_t table_mem(const ember_table_config *t)
{
    return t->rows * (int64_t)(t->dim + ember_state_floats(t->optimizer.kind, t->dim)) * 4;
}

static int64_t rank_mem(const plan_rank_cost *c) { return c->row_bytes + c->state_bytes; }

/* Plans fit the budget, or fail naming a table. */
static void test_budget(void)
{
    static char names[MAX_T][16];
    static const char *tn[] = {"ta", "tb", "tc", "td", "te", "tf", "tg", "th"};
    int fitted = 0, refused = 0;
    for (int trial = 0; trial < 60; trial++) {
        workload w;
        wl_init(&w, 512 * (1 + (int64_t)(rnd() % 8)));
        int32_t T = 1 + (int32_t)(rnd() % MAX_T);
        int64_t total = 0;
        for (int32_t t = 0; t < T; t++) {
            snprintf(names[t], sizeof names[t], "%s", tn[t]);
            int64_t rows = (int64_t)pow(10, 2 + 5 * rnd_unit());
            int32_t dim = 4 << (rnd() % 6);
            wl_table(&w, names[t], rows, dim, (int)(rnd() % 2), (ember_optimizer_kind)(rnd() % 4));
            wl_feature(&w, names[t], t, 1 + (int32_t)(rnd() % 20), EMBER_COMBINER_SUM);
            total += table_mem(&w.tables[t]);
        }
        plan_options o = plan_options_default();
        o.world = 2 + (int32_t)(rnd() % 15);
        o.memory_per_rank = (int64_t)((double)total / o.world * (0.3 + 1.7 * rnd_unit())) + 1;
        plan_workload pw = wl_plan(&w);
        plan_result res;
        int rc = plan_make(&pw, NULL, &o, &res);
        if (rc == EMBER_OK) {
            fitted++;
            for (int32_t r = 0; r < o.world; r++)
                CHECK_MSG(rank_mem(&res.ranks[r]) <= o.memory_per_rank,
                          "trial %d: rank %d holds %lld bytes, budget %lld", trial, r,
                          (long long)rank_mem(&res.ranks[r]), (long long)o.memory_per_rank);
        } else {
            refused++;
            int named = 0;
            for (int32_t t = 0; t < T; t++)
                named |= strstr(res.error, names[t]) != NULL;
            CHECK_MSG(rc == EMBER_EINVAL && named && strstr(res.error, "nothing fits"),
                      "trial %d: %s", trial, res.error);
        }
        plan_result_free(&res);
        free(w.stats);
    }
    CHECK_MSG(fitted > 5 && refused > 5, "budget cases: %d fitted, %d refused", fitted, refused);
    /* one table that fits nowhere is named */
    workload w;
    wl_init(&w, 4096);
    wl_table(&w, "huge", 1000000000, 128, 1, EMBER_OPT_ADAGRAD);
    wl_table(&w, "small", 1000, 16, 1, EMBER_OPT_SGD);
    wl_feature(&w, "a", 0, 1, EMBER_COMBINER_SUM);
    wl_feature(&w, "b", 1, 1, EMBER_COMBINER_SUM);
    plan_options o = plan_options_default();
    o.world = 8;
    o.memory_per_rank = INT64_C(1) << 30;
    plan_workload pw = wl_plan(&w);
    plan_result res;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_EINVAL);
    CHECK_MSG(strstr(res.error, "'huge'") && strstr(res.error, "per rank"), "%s", res.error);
    plan_result_free(&res);
    o.world = 512; /* 1.0e12 bytes over 512 ranks: 1.9 GiB each; over 1024: 0.93 GiB */
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_EINVAL);
    plan_result_free(&res);
    o.world = 1024;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_OK);
    CHECK(res.placement && res.placement[0] == EMBER_PLACE_ROW);
    plan_result_free(&res);
    free(w.stats);
}

static void test_pins(void)
{
    static const char *nm[] = {"p0", "p1", "p2", "p3", "p4", "p5"};
    workload w;
    wl_init(&w, 4096);
    for (int32_t t = 0; t < 6; t++) {
        wl_table(&w, nm[t], 10000 * (t + 1), 32, 1, EMBER_OPT_ADAGRAD);
        wl_feature(&w, nm[t], t, 4, EMBER_COMBINER_SUM);
    }
    plan_pin pins[6] = {
        {EMBER_PLACE_TABLE, 3, -1}, {EMBER_PLACE_COLUMN, -1, -1},
        {EMBER_PLACE_ROW, -1, EMBER_EXCHANGE_POOLED}, {EMBER_PLACE_REPLICATED, -1, -1},
        {EMBER_PLACE_TABLE, -1, EMBER_EXCHANGE_ROWS}, {-1, -1, -1},
    };
    plan_options o = plan_options_default();
    o.world = 4;
    plan_workload pw = wl_plan(&w);
    plan_result res;
    CHECK(plan_make(&pw, pins, &o, &res) == EMBER_OK);
    if (res.placement) {
        CHECK(res.placement[0] == EMBER_PLACE_TABLE && res.owner[0] == 3);
        CHECK(res.placement[1] == EMBER_PLACE_COLUMN);
        CHECK(res.placement[2] == EMBER_PLACE_ROW && res.exchange[2] == EMBER_EXCHANGE_POOLED);
        CHECK(res.placement[3] == EMBER_PLACE_REPLICATED);
        CHECK(res.placement[4] == EMBER_PLACE_TABLE && res.owner[4] >= 0 && res.owner[4] < 4 &&
              res.exchange[4] == EMBER_EXCHANGE_ROWS);
        CHECK(strstr(res.reason[0], "pinned") && strstr(res.reason[4], "pinned"));
    }
    plan_result_free(&res);
    pins[0].owner = 4; /* not a rank of 4 */
    CHECK(plan_make(&pw, pins, &o, &res) == EMBER_EINVAL);
    CHECK_MSG(strstr(res.error, "'p0'") != NULL, "%s", res.error);
    plan_result_free(&res);
    free(w.stats);
}

/* A small table with long bags: at 2 ranks replication costs what
 * column-wise does and its forward sends nothing, so it is replicated; at 8
 * ranks it costs (W-1) x the gradients and is not; over the threshold it is
 * never replicated. */
static void test_replicate(void)
{
    workload w;
    wl_init(&w, 64);
    wl_table(&w, "small", 4000, 64, 0, EMBER_OPT_SGD);
    wl_table(&w, "large", 400000, 64, 0, EMBER_OPT_SGD);
    wl_feature(&w, "fs", 0, 20, EMBER_COMBINER_SUM);
    wl_feature(&w, "fl", 1, 20, EMBER_COMBINER_SUM);
    plan_options o = plan_options_default();
    o.world = 2;
    plan_workload pw = wl_plan(&w);
    plan_result res;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_OK);
    CHECK_MSG(res.placement && res.placement[0] == EMBER_PLACE_REPLICATED, "small: %s",
              res.reason ? res.reason[0] : res.error);
    CHECK_MSG(res.placement && res.placement[1] != EMBER_PLACE_REPLICATED, "large: %s",
              res.reason ? res.reason[1] : res.error);
    plan_result_free(&res);
    o.world = 8;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_OK);
    CHECK(res.placement && res.placement[0] != EMBER_PLACE_REPLICATED);
    plan_result_free(&res);
    o.world = 2;
    o.replicate_threshold = 1000;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_OK);
    CHECK(res.placement && res.placement[0] != EMBER_PLACE_REPLICATED);
    plan_result_free(&res);
    free(w.stats);
}

/* LPT against the optimum of every assignment, tiny cases. */
static void test_pack(void)
{
    for (int trial = 0; trial < 300; trial++) {
        int32_t n = 1 + (int32_t)(rnd() % 8), W = 2 + (int32_t)(rnd() % 2);
        double load[8], bin_load[3] = {0}, best = INFINITY;
        int64_t mem[8], bin_free[3], cap = 1 + (int64_t)(rnd() % 40);
        int32_t of[8];
        int with_mem = trial % 2;
        for (int32_t i = 0; i < n; i++) {
            load[i] = rnd_unit() < 0.3 ? 1.0 : 0.1 + 9.9 * rnd_unit();
            mem[i] = 1 + (int64_t)(rnd() % 20);
        }
        for (int32_t b = 0; b < W; b++)
            bin_free[b] = with_mem ? cap : INT64_MAX;
        int32_t failed = plan_pack(n, load, mem, W, bin_load, bin_free, of);
        /* brute force: every assignment, the best feasible max load */
        int64_t combos = 1;
        for (int32_t i = 0; i < n; i++)
            combos *= W;
        for (int64_t c = 0; c < combos; c++) {
            double l[3] = {0};
            int64_t m[3] = {0};
            int64_t x = c;
            for (int32_t i = 0; i < n; i++, x /= W) {
                l[x % W] += load[i];
                m[x % W] += mem[i];
            }
            double mx = 0;
            int ok = 1;
            for (int32_t b = 0; b < W; b++) {
                mx = l[b] > mx ? l[b] : mx;
                ok &= !with_mem || m[b] <= cap;
            }
            if (ok && mx < best)
                best = mx;
        }
        if (failed >= 0) {
            CHECK(with_mem); /* without memory everything fits */
            continue;
        }
        double mx = 0;
        int64_t used[3] = {0};
        for (int32_t i = 0; i < n; i++)
            used[of[i]] += mem[i];
        for (int32_t b = 0; b < W; b++) {
            mx = bin_load[b] > mx ? bin_load[b] : mx;
            CHECK(!with_mem || used[b] <= cap);
        }
        if (!with_mem) /* Graham: LPT <= (4/3 - 1/(3W)) OPT */
            CHECK_MSG(mx <= (4.0 / 3 - 1.0 / (3 * W)) * best + 1e-9,
                      "trial %d: LPT %.3f, optimum %.3f", trial, mx, best);
        CHECK(isfinite(best) && mx >= best - 1e-9);
    }
}

/* The planner's table-wise packing against every owner assignment: tables
 * pinned table-wise (owner free), the plan's busiest rank within 4/3 of
 * the best assignment's. */
static void test_pack_planner(void)
{
    static const char *nm[] = {"a", "b", "c", "d", "e", "f", "g"};
    for (int trial = 0; trial < 6; trial++) {
        workload w;
        wl_init(&w, 1024);
        int32_t T = 5 + trial % 3, W = 3;
        plan_pin pins[MAX_T];
        for (int32_t t = 0; t < T; t++) {
            wl_table(&w, nm[t], 20000 + (int64_t)(rnd() % 400000), 16 << (rnd() % 3), 1,
                     EMBER_OPT_ADAGRAD);
            wl_feature(&w, nm[t], t, 1 + (int32_t)(rnd() % 30), EMBER_COMBINER_SUM);
            pins[t] = (plan_pin){EMBER_PLACE_TABLE, -1, -1};
        }
        plan_options o = plan_options_default();
        o.world = W;
        plan_workload pw = wl_plan(&w);
        plan_result res;
        CHECK(plan_make(&pw, pins, &o, &res) == EMBER_OK);
        if (!res.placement)
            continue;
        double planned = 0, best = INFINITY;
        for (int32_t r = 0; r < W; r++) {
            double c = plan_rank_weight(&res.ranks[r], 1.0);
            planned = c > planned ? c : planned;
        }
        int64_t combos = 1;
        for (int32_t t = 0; t < T; t++)
            combos *= W;
        plan_rank_cost pc[3];
        for (int64_t c = 0; c < combos; c++) {
            int64_t x = c;
            for (int32_t t = 0; t < T; t++, x /= W) {
                w.tables[t].placement = EMBER_PLACE_TABLE;
                w.tables[t].owner = (int32_t)(x % W);
                w.tables[t].exchange = res.exchange[t];
            }
            CHECK(plan_predict(&pw, W, pc, NULL) == EMBER_OK);
            double mx = 0;
            for (int32_t r = 0; r < W; r++) {
                double v = plan_rank_weight(&pc[r], 1.0);
                mx = v > mx ? v : mx;
            }
            best = mx < best ? mx : best;
        }
        CHECK_MSG(planned <= 4.0 / 3 * best * 1.0001, "trial %d: planned busiest %.0f, best %.0f",
                  trial, planned, best);
        plan_result_free(&res);
        free(w.stats);
    }
}

/* W1: table-wise at 8 ranks (one table per rank), row- or column-wise at 64. */
static void test_w1(void)
{
    static const char *nm[] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"};
    workload w;
    wl_init(&w, 4096);
    for (int32_t t = 0; t < 8; t++) {
        wl_table(&w, nm[t], 1000000, 64, 1, EMBER_OPT_ADAGRAD);
        wl_feature(&w, nm[t], t, 20, EMBER_COMBINER_SUM);
    }
    plan_options o = plan_options_default();
    o.world = 8;
    o.memory_per_rank = INT64_C(16) << 30;
    plan_workload pw = wl_plan(&w);
    plan_result res;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_OK);
    int owners = 0;
    for (int32_t t = 0; t < 8 && res.placement; t++) {
        CHECK(res.placement[t] == EMBER_PLACE_TABLE);
        owners |= 1 << res.owner[t];
    }
    CHECK(owners == 0xff);
    plan_result_free(&res);
    o.world = 64;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_OK);
    for (int32_t t = 0; t < 8 && res.placement; t++)
        CHECK(res.placement[t] != EMBER_PLACE_TABLE);
    plan_result_free(&res);
    o.world = 16; /* a budget below one table: nothing table-wise */
    o.memory_per_rank = table_mem(&w.tables[0]) - 1;
    CHECK(plan_make(&pw, NULL, &o, &res) == EMBER_OK);
    for (int32_t t = 0; t < 8 && res.placement; t++)
        CHECK(res.placement[t] != EMBER_PLACE_TABLE);
    plan_result_free(&res);
    free(w.stats);
}

/* 200 tables on 1024 ranks, planned in well under a second. */
static void test_large(void)
{
    enum { NT = 200 };
    static char names[NT][16];
    ember_table_config *tabs = calloc(NT, sizeof *tabs);
    ember_feature_config *feats = calloc(NT, sizeof *feats);
    double *pool = calloc(NT, sizeof *pool);
    plan_id_stats *st = calloc(NT, sizeof *st);
    for (int32_t t = 0; t < NT; t++) {
        snprintf(names[t], sizeof names[t], "t%d", t);
        tabs[t] = ember_table_config_default();
        tabs[t].name = names[t];
        tabs[t].rows = t < 3 ? 500000000 : t < 40 ? 5000000 : 10000 + t;
        tabs[t].dim = t < 3 ? 128 : 32;
        tabs[t].optimizer = ember_optimizer_default(EMBER_OPT_ADAGRAD);
        feats[t] = (ember_feature_config){names[t], t, EMBER_COMBINER_SUM};
        pool[t] = t % 7 + 1;
        if (t > 0 && tabs[t].rows == tabs[t - 1].rows)
            st[t] = st[t - 1];
        else
            plan_stats_zipf(tabs[t].rows, 1.05, &st[t]);
        if (st[t].rows != tabs[t].rows) /* rows differ by one: recompute */
            plan_stats_zipf(tabs[t].rows, 1.05, &st[t]);
    }
    ember_collection_config cfg = ember_collection_config_default();
    cfg.tables = tabs;
    cfg.num_tables = NT;
    cfg.features = feats;
    cfg.num_features = NT;
    plan_workload pw = {&cfg, 262144, pool, 0, st};
    plan_options o = plan_options_default();
    o.world = 1024;
    o.memory_per_rank = INT64_C(8) << 30;
    plan_result res;
    CHECK_MSG(plan_make(&pw, NULL, &o, &res) == EMBER_OK, "%s", res.error);
    /* 66 ms in a Release build; the margin is for sanitizer builds */
    CHECK_MSG(res.seconds < 3.0, "1024 ranks, %d tables: %.3f s", NT, res.seconds);
    printf("1024 ranks, %d tables: planned in %.1f ms\n", NT, 1e3 * res.seconds);
    for (int32_t r = 0; r < o.world && res.ranks; r++)
        CHECK(rank_mem(&res.ranks[r]) <= o.memory_per_rank);
    plan_result_free(&res);
    free(tabs);
    free(feats);
    free(pool);
    free(st);
}

/* ------------------------------------------------------- dynamic tables */

/* The synthetic task of `ember train` with nf keyed features of `keys`
 * keys each (a dynamic table read by all of them), as a world of one. */
static ctr_source *keyed_source(int64_t keys, double alpha, int32_t nf, const double *pooling, uint64_t seed)
{
    ctr_synth_config sc = ctr_synth_config_default();
    sc.num_sparse = nf;
    sc.seed = seed;
    for (int32_t f = 0; f < nf; f++) {
        sc.rows[f] = keys;
        sc.alpha[f] = alpha;
        sc.pooling[f] = pooling[f];
        sc.keyed[f] = 1;
    }
    ctr_source *src = NULL;
    char err[256];
    if (ctr_source_synth(&sc, 0, 0, 1, &src, err, sizeof err))
        abort();
    return src;
}

/* A workload of one dynamic table read by nf features, with the keyed
 * statistics of keyed_source(). */
static void wl_dynamic(workload *w, int64_t B, int64_t keys, double alpha, int32_t nf, const double *pooling,
                       uint64_t seed, int64_t capacity)
{
    wl_init(w, B);
    ember_table_config *t = &w->tables[0];
    *t = ember_table_config_default();
    t->name = "user";
    t->kind = EMBER_TABLE_DYNAMIC;
    t->rows = 0;
    t->capacity = capacity;
    t->admit_after = 2;
    t->evict = EMBER_EVICT_LFU;
    t->dim = 16;
    t->optimizer = ember_optimizer_default(EMBER_OPT_ADAGRAD);
    w->cfg.num_tables = 1;
    int32_t feat[MAX_F];
    for (int32_t f = 0; f < nf; f++) {
        static const char *names[] = {"k0", "k1", "k2", "k3"};
        wl_feature(w, names[f], 0, 1, EMBER_COMBINER_SUM);
        w->pooling[f] = pooling[f];
        feat[f] = f;
    }
    CHECK(plan_stats_synth_keys(keys, alpha, seed, nf, feat, pooling, &w->stats[0]) == EMBER_OK);
}

/* Distinct keys among v[0..n) in total and per owner of W (sorts v). */
static int64_t distinct_keys(uint64_t *v, int64_t n, int32_t W, int64_t *per_owner)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    int64_t d = 0;
    memset(per_owner, 0, sizeof *per_owner * (size_t)W);
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || v[i] != v[i - 1]) {
            d++;
            per_owner[ember_dyn_owner((int64_t)v[i], W)]++;
        }
    return d;
}

/* D(n) of a dynamic table's keys, and the distinct keys of its busiest
 * owner over 1 to 64 steps (plan_dynamic_keys), against the real generator
 * (within 2%; per owner 3% plus three standard deviations of the hash's
 * split of the keys); the keyed builder counts the same by owner. */
static void test_dynamic_law(void)
{
    static const struct { int64_t keys; double alpha; int32_t nf; double pooling[2]; } cases[] = {
        {400000, 1.1, 1, {1, 0}}, {50000, 0, 1, {3, 0}}, {100000, 1.05, 2, {1, 2}},
    };
    const int64_t B = 4096;
    const int32_t W = 4;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        workload w;
        wl_dynamic(&w, B, cases[c].keys, cases[c].alpha, cases[c].nf, cases[c].pooling, 11, 1000);
        plan_workload pw = wl_plan(&w);
        ctr_source *src = keyed_source(cases[c].keys, cases[c].alpha, cases[c].nf, cases[c].pooling, 11);
        plan_stats_builder *bl = NULL;
        CHECK(plan_stats_builder_create(0, &bl) == EMBER_OK);
        int64_t n = 0, cap = 1 << 16;
        uint64_t *all = malloc(sizeof *all * (size_t)cap), *tmp = NULL;
        for (int32_t step = 1; step <= 64; step++) {
            ctr_batch cb;
            char err[256];
            CHECK(ctr_source_next(src, (int32_t)B, &cb, err, sizeof err) == B);
            if (n + cb.sparse.num_ids > cap) {
                cap = 2 * (n + cb.sparse.num_ids);
                all = realloc(all, sizeof *all * (size_t)cap);
            }
            for (int64_t i = 0; i < cb.sparse.num_ids; i++)
                all[n + i] = (uint64_t)cb.sparse.ids[i];
            CHECK(plan_stats_builder_add(bl, cb.sparse.ids, cb.sparse.num_ids) == EMBER_OK);
            n += cb.sparse.num_ids;
            if (step != 1 && step != 8 && step != 64)
                continue;
            tmp = realloc(tmp, sizeof *tmp * (size_t)n);
            memcpy(tmp, all, sizeof *tmp * (size_t)n);
            int64_t owner[4], built[4];
            double got = (double)distinct_keys(tmp, n, W, owner), want = plan_stats_distinct(&w.stats[0], (double)n);
            CHECK_MSG(fabs(got - want) <= 0.02 * got + 1, "keys %lld alpha %g features %d, %lld draws: measured "
                      "%.0f distinct keys, law %.1f", (long long)cases[c].keys, cases[c].alpha, cases[c].nf,
                      (long long)n, got, want);
            plan_dynamic d;
            CHECK(plan_dynamic_keys(&pw, 0, W, step, &d) == EMBER_OK);
            /* the tail keys split over owners as hashes do: 3 sd of that binomial allowed too */
            double on = (double)owner[d.busiest], sd = sqrt(got * (W - 1)) / W;
            CHECK_MSG(fabs(on - d.keys_horizon) <= 0.03 * on + 3 * sd, "keys %lld alpha %g, %d steps, owner %d of %d: "
                      "measured %.0f distinct keys, predicted %.1f", (long long)cases[c].keys, cases[c].alpha,
                      step, d.busiest, W, on, d.keys_horizon);
            CHECK(plan_stats_builder_distinct(bl) == (int64_t)got);
            CHECK(plan_stats_builder_owners(bl, W, built) == EMBER_OK && !memcmp(built, owner, sizeof owner));
        }
        plan_stats_builder_destroy(bl);
        ctr_source_destroy(src);
        free(all);
        free(tmp);
        free(w.stats);
    }
}

/* A global batch of one key per sample as the rows the keys resolve to:
 * slot * W + owner, a key's slot the number of its owner's keys first used
 * before it.  Adds each rank's key exchange to sent and recv: a key to a
 * remote owner 8 bytes, its slot back 4 bytes. */
static void keys_to_rows(const int64_t *keys, int64_t B, int32_t W, gbatch *g, double *sent, double *recv)
{
    g->len = malloc(sizeof *g->len * (size_t)B);
    g->ids = malloc(sizeof *g->ids * (size_t)B);
    g->off = malloc(sizeof *g->off * (size_t)(B + 1));
    int64_t *seen = malloc(sizeof *seen * (size_t)B), *slot = malloc(sizeof *slot * (size_t)B);
    int64_t next[8] = {0}, ns = 0;
    int32_t s = 0; /* rank r holds samples [r*B/W, (r+1)*B/W) */
    for (int64_t i = 0; i < B; i++) {
        while (i >= (s + 1) * B / W)
            s++;
        int32_t o = (int32_t)ember_dyn_owner(keys[i], W);
        int64_t j = 0;
        while (j < ns && seen[j] != keys[i])
            j++;
        if (j == ns) {
            seen[ns] = keys[i];
            slot[ns++] = next[o]++;
        }
        g->ids[i] = slot[j] * W + o;
        g->len[i] = 1;
        g->off[i] = i;
        if (o != s) {
            sent[s] += 8, recv[o] += 8;
            sent[o] += 4, recv[s] += 4;
        }
    }
    g->off[B] = B;
    free(seen);
    free(slot);
}

/* The model's bytes for a dynamic table against the exact count: the wire
 * count of the row-wise table its keys resolve to, plus the key exchange,
 * within 10% as for fixed tables; plan_predict_bytes_sent includes the key
 * exchange, as ember_stats does. */
static void test_dynamic_wire(void)
{
    const int64_t B = 2048, keys = 100000;
    const double pooling[1] = {1};
    const int batches = 3;
    double worst = 0;
    workload w, fx;
    wl_dynamic(&w, B, keys, 1.05, 1, pooling, 5, 50000);
    static const int32_t worlds[] = {2, 3, 4};
    for (size_t wi = 0; wi < 3; wi++)
        for (int xm = 0; xm < 2; xm++) {
            int32_t W = worlds[wi];
            w.tables[0].exchange = (ember_exchange)xm;
            wl_init(&fx, B);
            wl_table(&fx, "user", w.tables[0].capacity * W, 16, 1, EMBER_OPT_ADAGRAD);
            wl_feature(&fx, "k0", 0, 1, EMBER_COMBINER_SUM);
            wl_place(&fx, EMBER_PLACE_ROW, (ember_exchange)xm, 0);
            ctr_source *src = keyed_source(keys, 1.05, 1, pooling, 5);
            double sent[4] = {0}, recv[4] = {0};
            for (int k = 0; k < batches; k++) {
                ctr_batch cb;
                char err[256];
                gbatch g;
                CHECK(ctr_source_next(src, (int32_t)B, &cb, err, sizeof err) == B);
                keys_to_rows(cb.sparse.ids, B, W, &g, sent, recv);
                exact_bytes(&fx, &g, W, sent, recv);
                free_batch(&g);
            }
            plan_rank_cost pc[4];
            plan_workload pw = wl_plan(&w);
            CHECK(plan_predict(&pw, W, pc, NULL) == EMBER_OK);
            for (int32_t r = 0; r < W; r++) {
                double es = sent[r] / batches, er = recv[r] / batches;
                double ps = pc[r].a2a_sent + pc[r].ag_sent, pr = pc[r].a2a_recv + pc[r].ag_recv;
                CHECK_MSG(fabs(ps - es) <= 0.10 * es + 64 && fabs(pr - er) <= 0.10 * er + 64,
                          "dynamic W=%d exchange %d rank %d: sent model %.0f exact %.0f, received model %.0f "
                          "exact %.0f", W, xm, r, ps, es, pr, er);
                CHECK(pc[r].key_sent > 0 && pc[r].key_sent < ps);
                worst = fmax(worst, fmax(fabs(ps - es) / es, fabs(pr - er) / er));
                CHECK(fabs(plan_predict_bytes_sent(&pw, W, r) - ps) <= 1e-6 * ps);
            }
            ctr_source_destroy(src);
            free(fx.stats);
        }
    printf("dynamic table vs exact count: largest error %.2f%%\n", 100 * worst);
    free(w.stats);
}

/* Keys per step that find no row once a rank's rows are full: Che's
 * estimate (plan_dynamic_keys) against a naive LRU of `capacity` slots on
 * the busiest owner, fed by the generator (every key of a step used, the
 * oldest last use evicted), after a warm-up; within 15%. */
static void test_dynamic_churn(void)
{
    const int64_t B = 4096, keys = 40000, C = 2000;
    const double pooling[1] = {1};
    const int32_t W = 2, warm = 20, steps = 40;
    workload w;
    wl_dynamic(&w, B, keys, 1.1, 1, pooling, 3, C);
    plan_workload pw = wl_plan(&w);
    plan_dynamic d;
    CHECK(plan_dynamic_keys(&pw, 0, W, 100, &d) == EMBER_OK);
    ctr_source *src = keyed_source(keys, 1.1, 1, pooling, 3);
    int64_t *slot_key = malloc(sizeof *slot_key * (size_t)C), *last = malloc(sizeof *last * (size_t)C);
    uint64_t *step_keys = malloc(sizeof *step_keys * (size_t)B);
    int64_t used = 0, misses = 0;
    for (int32_t step = 0; step < warm + steps; step++) {
        ctr_batch cb;
        char err[256];
        CHECK(ctr_source_next(src, (int32_t)B, &cb, err, sizeof err) == B);
        int64_t n = 0;
        for (int64_t i = 0; i < B; i++)
            if ((int32_t)ember_dyn_owner(cb.sparse.ids[i], W) == d.busiest)
                step_keys[n++] = (uint64_t)cb.sparse.ids[i];
        qsort(step_keys, (size_t)n, sizeof *step_keys, cmp_u64);
        for (int64_t i = 0; i < n; i++) {
            if (i && step_keys[i] == step_keys[i - 1])
                continue;
            int64_t k = (int64_t)step_keys[i], j = 0;
            while (j < used && slot_key[j] != k)
                j++;
            if (j == used) { /* no row: a free one, or the oldest not used this step */
                misses += step >= warm;
                if (used < C) {
                    used++;
                } else {
                    int64_t v = -1;
                    for (int64_t q = 0; q < C; q++)
                        if (last[q] < step && (v < 0 || last[q] < last[v]))
                            v = q;
                    if (v < 0)
                        continue; /* every row is used by this step */
                    j = v;
                }
                slot_key[j] = k;
            }
            last[j] = step;
        }
    }
    double got = (double)misses / steps;
    CHECK_MSG(fabs(got - d.miss_step) <= 0.15 * got + 2, "LRU of %lld rows on owner %d: %.1f keys per step find "
              "no row, Che's estimate %.1f", (long long)C, d.busiest, got, d.miss_step);
    CHECK(d.over_horizon && !d.over_step && d.fill_steps > 1 && d.fill_steps < warm);
    printf("dynamic table, LRU of %lld rows: %.1f keys per step find no row, Che's estimate %.1f\n", (long long)C,
           got, d.miss_step);
    ctr_source_destroy(src);
    free(slot_key);
    free(last);
    free(step_keys);
    free(w.stats);
}

/* Memory: a rank holds a dynamic table's rows, state and key index, as a
 * real collection counts them (ember_collection_memory), on every rank of
 * any world.  A budget that fits the rows and state but not the index too
 * moves the table to the SSD tier (its index stays in memory), and fails,
 * naming the table and its index, when the table is pinned to memory. */
static void test_dynamic_memory(void)
{
    const double pooling[2] = {1, 2};
    workload w;
    wl_dynamic(&w, 4096, 400000, 1.1, 1, pooling, 1, 20000);
    wl_table(&w, "small", 1000, 16, 1, EMBER_OPT_ADAGRAD);
    wl_feature(&w, "s0", 1, 2, EMBER_COMBINER_SUM);
    const ember_table_config *dyn = &w.tables[0];
    int64_t rows = 20000 * (16 + 16) * 4, index = ember_dynamic_bytes(dyn) - rows, small = 1000 * 32 * 4;
    CHECK(index > 0 && plan_dynamic_index_bytes(dyn) == index && plan_dynamic_capacity(dyn) == 20000);
    /* a real collection of a world of one */
    ember_collection *coll = NULL;
    CHECK(ember_collection_create(&w.cfg, &coll) == EMBER_OK);
    ember_memory mem;
    ember_collection_memory(coll, &mem);
    ember_collection_destroy(coll);
    plan_workload pw = wl_plan(&w);
    for (int32_t W = 1; W <= 8; W *= 2) {
        plan_rank_cost pc[8];
        plan_table_cost tc[2];
        CHECK(plan_predict(&pw, W, pc, tc) == EMBER_OK);
        if (W == 1)
            CHECK_MSG(pc[0].row_bytes + pc[0].state_bytes == mem.row_bytes + mem.state_bytes &&
                      pc[0].index_bytes == mem.index_bytes, "plan %lld + %lld + %lld, collection %lld + %lld + %lld",
                      (long long)pc[0].row_bytes, (long long)pc[0].state_bytes, (long long)pc[0].index_bytes,
                      (long long)mem.row_bytes, (long long)mem.state_bytes, (long long)mem.index_bytes);
        for (int32_t r = 0; r < W; r++) {
            int64_t share = (1000 / W + (r < 1000 % W)) * 32 * 4;
            CHECK_MSG(pc[r].index_bytes == index && plan_rank_memory(&pc[r]) == rows + index + share,
                      "W=%d rank %d: index %lld, memory %lld, want %lld", W, r, (long long)pc[r].index_bytes,
                      (long long)plan_rank_memory(&pc[r]), (long long)(rows + index + share));
        }
        CHECK(tc[0].max_rank_bytes == rows + index && tc[0].index_bytes == index * W);
    }
    /* the budget: rows + state of both fit, the index does not */
    plan_options o = plan_options_default();
    o.world = 4;
    o.memory_per_rank = rows + small + index / 2;
    ember_table_config tiered[2];
    double hit[2];
    CHECK(plan_tiers(&pw, &o, tiered, hit) == EMBER_OK);
    CHECK(tiered[0].storage == EMBER_STORAGE_SSD && tiered[1].storage == EMBER_STORAGE_MEMORY);
    CHECK(tiered[0].cache_bytes > 0 && tiered[0].cache_bytes <= o.memory_per_rank - index - small / 4);
    CHECK(hit[0] > 0 && hit[0] < 1);
    ember_collection_config cc = w.cfg;
    cc.tables = tiered;
    plan_workload pt = pw;
    pt.cfg = &cc;
    plan_result res;
    CHECK(plan_make(&pt, NULL, &o, &res) == EMBER_OK);
    for (int32_t r = 0; res.ranks && r < o.world; r++)
        CHECK(res.ranks[r].index_bytes == index && plan_rank_memory(&res.ranks[r]) <= o.memory_per_rank &&
              res.ranks[r].ssd_bytes > 0);
    CHECK(res.placement && res.placement[0] == EMBER_PLACE_ROW && strstr(res.reason[0], "dynamic"));
    plan_result_free(&res);
    w.tables[0].storage = EMBER_STORAGE_MEMORY; /* pinned: nothing fits */
    CHECK(plan_tiers(&pw, &o, tiered, hit) == EMBER_OK && tiered[0].storage == EMBER_STORAGE_MEMORY);
    CHECK(plan_make(&pt, NULL, &o, &res) == EMBER_EINVAL);
    CHECK_MSG(strstr(res.error, "'user'") && strstr(res.error, "key index"), "%s", res.error);
    plan_result_free(&res);
    /* without the index the old rows-only count would have fitted */
    CHECK(rows + small <= o.memory_per_rank && rows + index > o.memory_per_rank);
    /* a dynamic table is row-wise, whatever the pin */
    plan_pin pins[2] = {{EMBER_PLACE_TABLE, -1, -1}, {-1, -1, -1}};
    w.tables[0].storage = EMBER_STORAGE_AUTO;
    o.memory_per_rank = 0;
    CHECK(plan_make(&pw, pins, &o, &res) == EMBER_EINVAL && strstr(res.error, "row-wise by key hash"));
    plan_result_free(&res);
    pins[0].placement = -1;
    CHECK(plan_make(&pw, pins, &o, &res) == EMBER_OK && res.placement[0] == EMBER_PLACE_ROW);
    plan_result_free(&res);
    o.world = 1 << 18; /* slot * W + owner must fit 32 bits */
    CHECK(plan_make(&pw, pins, &o, &res) == EMBER_EINVAL && strstr(res.error, "exceeds 2^32-1 rows"));
    plan_result_free(&res);
    free(w.stats);
}

/* SSD caches: the plan counts a cache's DRAM by the rule collection create
 * applies (tier.h, docs/tiers.md "The cache"), so plan_predict's row bytes
 * of a world of one equal a real collection's rows, state and cache
 * bookkeeping: caches that hold part of a table (by policy), one that holds
 * the whole table with bytes to spare, a dynamic table's, and caches of
 * half rows and half state (2 bytes an element of a cached row). */
static void test_ssd_cache_memory(void)
{
    const char *tmp = getenv("TMPDIR");
    char path[300];
    snprintf(path, sizeof path, "%s/ember-test-plan-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(path)) {
        CHECK_MSG(0, "mkdtemp %s", path);
        return;
    }
    static const int64_t caches[] = {5000, 20001, 40000, 1 << 20};
    const double pooling[1] = {1};
    for (int i = 0; i < 7; i++) {
        workload w;
        if (i < 4 || i > 4) {
            wl_init(&w, 64);
            wl_table(&w, "t", 1000, 8, 1, i == 6 ? EMBER_OPT_ROWWISE_ADAGRAD : EMBER_OPT_ADAGRAD);
            wl_feature(&w, "f", 0, 2, EMBER_COMBINER_SUM);
            w.tables[0].cache_bytes = caches[i % 4];
            w.tables[0].cache_policy = (ember_cache_policy)(1 + i % 3);
            w.tables[0].precision = i == 5 ? EMBER_PRECISION_FP16 : i == 6 ? EMBER_PRECISION_BF16 : EMBER_PRECISION_FP32;
            w.tables[0].state_precision = i == 5 ? EMBER_PRECISION_BF16 : EMBER_PRECISION_FP32;
        } else {
            wl_dynamic(&w, 64, 4000, 1.1, 1, pooling, 1, 500);
            w.tables[0].cache_bytes = 9000;
        }
        w.tables[0].storage = EMBER_STORAGE_SSD;
        w.tables[0].path = path;
        w.cfg.io_threads = 1;
        ember_collection *coll = NULL;
        CHECK_MSG(ember_collection_create(&w.cfg, &coll) == EMBER_OK, "%s", ember_errmsg(NULL));
        ember_memory mem = {0};
        ember_tier_stats ts = {0};
        ember_collection_memory(coll, &mem);
        ember_table_tier_stats(coll, 0, &ts);
        ember_collection_destroy(coll);
        plan_workload pw = wl_plan(&w);
        plan_rank_cost pc[1];
        plan_table_cost tc[1];
        CHECK(plan_predict(&pw, 1, pc, tc) == EMBER_OK);
        int64_t dram = mem.row_bytes + mem.state_bytes + mem.cache_meta_bytes;
        CHECK_MSG(pc[0].row_bytes + pc[0].state_bytes == dram && dram <= w.tables[0].cache_bytes &&
                      pc[0].index_bytes == mem.index_bytes,
                  "case %d (cache_bytes %lld, %lld rows cached): plan %lld + %lld, collection %lld", i,
                  (long long)w.tables[0].cache_bytes, (long long)ts.cache_rows, (long long)pc[0].row_bytes,
                  (long long)pc[0].state_bytes, (long long)dram);
        CHECK(tc[0].max_rank_bytes == dram + mem.index_bytes);
        free(w.stats);
    }
    rmdir(path);
}

/* Half-precision rows (fp16, bf16) and state count 2 bytes per element in
 * the plan, encoded inference rows (rows_encoding int8) their encoded bytes
 * and no state, as a real collection holds them, beside an fp32 table and
 * its fp32 state; ROW placement splits them per rank as it splits fp32
 * rows. */
static void test_half_rows_memory(void)
{
    workload w;
    wl_init(&w, 64);
    wl_table(&w, "h16", 3001, 24, 1, EMBER_OPT_ROWWISE_ADAGRAD);
    wl_table(&w, "b16", 777, 16, 0, EMBER_OPT_ADAGRAD);
    wl_table(&w, "f32", 1000, 8, 0, EMBER_OPT_SGD);
    wl_table(&w, "q8", 500, 32, 0, EMBER_OPT_ADAGRAD);
    wl_table(&w, "s16", 400, 8, 0, EMBER_OPT_ADAM);
    w.tables[0].precision = EMBER_PRECISION_FP16;
    w.tables[1].precision = EMBER_PRECISION_BF16;
    w.tables[1].state_precision = EMBER_PRECISION_FP16;
    w.tables[3].rows_encoding = EMBER_ROWS_INT8;
    w.tables[4].state_precision = EMBER_PRECISION_BF16; /* fp32 rows, half state */
    for (int32_t t = 0; t < 5; t++)
        wl_feature(&w, w.tables[t].name, t, 2, EMBER_COMBINER_SUM);
    ember_collection *coll = NULL;
    CHECK_MSG(ember_collection_create(&w.cfg, &coll) == EMBER_OK, "%s", ember_errmsg(NULL));
    ember_memory mem = {0};
    ember_collection_memory(coll, &mem);
    ember_collection_destroy(coll);
    int64_t rows = (3001 * 24 + 777 * 16) * 2 + 1000 * 8 * 4 + 500 * (4 + 32) + 400 * 8 * 4;
    int64_t state = 3001 * 4 + 777 * 16 * 2 + 400 * 16 * 2;
    plan_workload pw = wl_plan(&w);
    plan_rank_cost pc[4];
    plan_table_cost tc[5];
    CHECK(plan_predict(&pw, 1, pc, tc) == EMBER_OK);
    CHECK_MSG(pc[0].row_bytes == rows && mem.row_bytes == rows && pc[0].state_bytes == state &&
                  mem.state_bytes == state,
              "rows: plan %lld, collection %lld, want %lld; state: plan %lld, collection %lld, want %lld",
              (long long)pc[0].row_bytes, (long long)mem.row_bytes, (long long)rows, (long long)pc[0].state_bytes,
              (long long)mem.state_bytes, (long long)state);
    CHECK(tc[0].row_bytes == 3001 * 24 * 2 && tc[0].max_rank_bytes == 3001 * (24 * 2 + 4));
    wl_place(&w, EMBER_PLACE_ROW, EMBER_EXCHANGE_ROWS, 0);
    CHECK(plan_predict(&pw, 4, pc, tc) == EMBER_OK);
    CHECK_MSG(pc[0].row_bytes == 751 * 24 * 2 + 195 * 16 * 2 + 250 * 8 * 4 + 125 * 36 + 100 * 8 * 4 &&
                  tc[0].max_rank_bytes == 751 * (24 * 2 + 4) && tc[4].max_rank_bytes == 100 * (8 * 4 + 16 * 2),
              "ROW over 4 ranks: rank 0 rows %lld, table h16 fullest rank %lld", (long long)pc[0].row_bytes,
              (long long)tc[0].max_rank_bytes);
    CHECK(ember_tier_rank_bytes(&w.tables[0], 4) == 751 * (24 * 2 + 4) && ember_tier_rank_bytes(&w.tables[3], 4) == 125 * 36 &&
          ember_tier_rank_bytes(&w.tables[4], 4) == 100 * (8 * 4 + 16 * 2));
    free(w.stats);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    test_distinct_law();
    test_model_exact();
    test_budget();
    test_pins();
    test_replicate();
    test_pack();
    test_pack_planner();
    test_w1();
    test_large();
    test_dynamic_law();
    test_dynamic_wire();
    test_dynamic_churn();
    test_dynamic_memory();
    test_ssd_cache_memory();
    test_half_rows_memory();
    return check_report("test_plan");
}
