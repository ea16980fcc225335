/*
 * test_synth.c: the synthetic batch generator (src/data/synth.c).
 *
 * Checks shape (feature-major bags of exactly `pooling` ids, ids in range,
 * weights in [0.5, 1.5)), determinism (same seed and config give the same
 * bytes whatever the thread count; weights never change ids; tables and seeds
 * give different streams) and the distribution against the exact law with a
 * chi-square test: rank k of Zipf(alpha) on 1..n has P(k) = k^-alpha / H(n,
 * alpha), and is found at row ((k-1)*2654435761) % n.  Tolerances: each
 * chi-square statistic must stay below df + 6*sqrt(2*df) (a correct sampler
 * exceeds that with probability < 1e-4; the seeds are fixed, so the test is
 * deterministic), and each of the top ranks must be within 5 binomial sigmas
 * of its expected count.  Drifting ids (ember_drift), against their
 * definition written out: rotate's batch is the undrifted one with each id's
 * rank k moved to ((k-1 + e R) mod rows) + 1 (the same draws, another map);
 * grow's ids of epoch e are rows of ranks <= start + e R, its law over them
 * Zipf again (chi-square); tables past drift_tables and epoch 0 of a full
 * support equal the undrifted batches; bad drift settings are refused.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ember.h"

static int64_t scramble(int64_t k, int64_t n)
{
    return (int64_t)(((unsigned __int128)(uint64_t)(k - 1) * 2654435761ULL) % (uint64_t)n);
}

/* Counts of every row over `nbatches` batches of a one-table generator. */
static int64_t *row_counts(ember_synth_config cfg, int nbatches, int64_t *total)
{
    ember_synth *s = NULL;
    ember_batch b;
    int64_t *cnt = calloc((size_t)cfg.rows, sizeof *cnt);
    int out_of_range = 0;
    *total = 0;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_OK);
    for (int n = 0; n < nbatches && s; n++) {
        CHECK(ember_synth_next(s, &b) == EMBER_OK);
        for (int64_t i = 0; i < b.num_ids; i++) {
            if (b.ids[i] < 0 || b.ids[i] >= cfg.rows)
                out_of_range++;
            else
                cnt[b.ids[i]]++;
        }
        *total += b.num_ids;
    }
    CHECK_MSG(out_of_range == 0, "%d ids outside [0, %lld)", out_of_range, (long long)cfg.rows);
    ember_synth_destroy(s);
    return cnt;
}

/* Chi-square of observed vs expected, merging the bins whose expectation is
 * below 20 into one tail bin.  Returns the statistic, *df the degrees of
 * freedom. */
static double chi_square(const int64_t *obs, const double *expect, int64_t nbins, int *df)
{
    double chi = 0, tail_o = 0, tail_e = 0;
    int bins = 0;
    for (int64_t i = 0; i < nbins; i++) {
        if (expect[i] >= 20) {
            double d = (double)obs[i] - expect[i];
            chi += d * d / expect[i];
            bins++;
        } else {
            tail_o += (double)obs[i];
            tail_e += expect[i];
        }
    }
    if (tail_e > 0) {
        chi += (tail_o - tail_e) * (tail_o - tail_e) / tail_e;
        bins++;
    }
    *df = bins - 1;
    return chi;
}

static void test_zipf_law(int64_t rows, double alpha, int nbatches, int full_chi)
{
    ember_synth_config cfg = ember_synth_config_default();
    cfg.tables = 1;
    cfg.rows = rows;
    cfg.batch_size = 1000;
    cfg.pooling = 100;
    cfg.zipf = 1;
    cfg.alpha = alpha;
    cfg.seed = 7;
    int64_t total;
    int64_t *cnt = row_counts(cfg, nbatches, &total);

    /* exact law over ranks */
    double norm = 0;
    for (int64_t k = rows; k >= 1; k--)
        norm += pow((double)k, -alpha);
    int64_t nrank = full_chi ? rows : 50;
    int64_t *obs = malloc((size_t)nrank * sizeof *obs);
    double *expect = malloc((size_t)nrank * sizeof *expect);
    int64_t seen = 0;
    double seen_e = 0;
    for (int64_t k = 1; k <= nrank; k++) {
        obs[k - 1] = cnt[scramble(k, rows)];
        expect[k - 1] = (double)total * pow((double)k, -alpha) / norm;
        seen += obs[k - 1];
        seen_e += expect[k - 1];
    }
    /* the top ranks, one by one */
    for (int64_t k = 1; k <= 10; k++) {
        double p = expect[k - 1] / (double)total;
        double sigma = sqrt((double)total * p * (1 - p));
        CHECK_MSG(fabs((double)obs[k - 1] - expect[k - 1]) <= 5 * sigma,
                  "rows %lld alpha %g rank %lld: %lld draws, expected %.1f +- %.1f",
                  (long long)rows, alpha, (long long)k, (long long)obs[k - 1], expect[k - 1],
                  sigma);
    }
    /* the law itself: count(1) / count(2) ~ 2^alpha within 5 % */
    double ratio = (double)obs[0] / (double)obs[1];
    CHECK_MSG(fabs(ratio / pow(2.0, alpha) - 1) < 0.05, "rows %lld alpha %g: c1/c2 %.4f, want %.4f",
              (long long)rows, alpha, ratio, pow(2.0, alpha));

    int df;
    double chi;
    if (full_chi) {
        /* every rank must be reachable: the scramble is a bijection here */
        chi = chi_square(obs, expect, nrank, &df);
    } else {
        /* top 50 ranks individually plus everything else as one bin */
        int64_t *o2 = malloc((size_t)(nrank + 1) * sizeof *o2);
        double *e2 = malloc((size_t)(nrank + 1) * sizeof *e2);
        memcpy(o2, obs, (size_t)nrank * sizeof *o2);
        memcpy(e2, expect, (size_t)nrank * sizeof *e2);
        o2[nrank] = total - seen;
        e2[nrank] = (double)total - seen_e;
        chi = chi_square(o2, e2, nrank + 1, &df);
        free(o2);
        free(e2);
    }
    CHECK_MSG(chi < df + 6 * sqrt(2.0 * df), "rows %lld alpha %g: chi-square %.1f with %d df",
              (long long)rows, alpha, chi, df);
    printf("zipf rows %lld alpha %g: %lld draws, chi-square %.1f (%d df), c1/c2 %.3f (2^a %.3f)\n",
           (long long)rows, alpha, (long long)total, chi, df, ratio, pow(2.0, alpha));
    free(obs);
    free(expect);
    free(cnt);
}

static void test_uniform_flat(int64_t rows)
{
    ember_synth_config cfg = ember_synth_config_default();
    cfg.tables = 1;
    cfg.rows = rows;
    cfg.batch_size = 1000;
    cfg.pooling = 100;
    cfg.zipf = 0;
    cfg.seed = 11;
    int64_t total;
    int64_t *cnt = row_counts(cfg, 10, &total);
    double *expect = malloc((size_t)rows * sizeof *expect);
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t r = 0; r < rows; r++) {
        expect[r] = (double)total / (double)rows;
        lo = cnt[r] < lo ? cnt[r] : lo;
        hi = cnt[r] > hi ? cnt[r] : hi;
    }
    int df;
    double chi = chi_square(cnt, expect, rows, &df);
    CHECK_MSG(chi < df + 6 * sqrt(2.0 * df), "uniform rows %lld: chi-square %.1f with %d df",
              (long long)rows, chi, df);
    printf("uniform rows %lld: %lld draws, chi-square %.1f (%d df), counts %lld..%lld\n",
           (long long)rows, (long long)total, chi, df, (long long)lo, (long long)hi);
    free(expect);
    free(cnt);
}

/* FNV-1a over the ids (and weights) of a batch. */
static uint64_t batch_hash(const ember_batch *b)
{
    uint64_t h = 1469598103934665603ULL;
    for (int64_t i = 0; i < b->num_ids; i++) {
        h = (h ^ (uint64_t)b->ids[i]) * 1099511628211ULL;
        if (b->weights) {
            uint32_t w;
            memcpy(&w, &b->weights[i], 4);
            h = (h ^ w) * 1099511628211ULL;
        }
    }
    return h;
}

static void test_shape_and_determinism(void)
{
    ember_synth_config cfg = ember_synth_config_default();
    cfg.tables = 3;
    cfg.rows = 5000;
    cfg.batch_size = 257;
    cfg.pooling = 7;
    cfg.weighted = 1;
    cfg.seed = 42;
    ember_synth *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK(ember_synth_create(&cfg, &a) == EMBER_OK);
    CHECK(ember_synth_create(&cfg, &b) == EMBER_OK);
    ember_synth_config cfg2 = cfg;
    cfg2.seed = 43;
    CHECK(ember_synth_create(&cfg2, &c) == EMBER_OK);
    ember_synth_config cfg3 = cfg;
    cfg3.weighted = 0;
    CHECK(ember_synth_create(&cfg3, &d) == EMBER_OK);
    if (!a || !b || !c || !d)
        return;

    const int64_t *first_ids = NULL;
    uint64_t prev_hash = 0;
    for (int n = 0; n < 4; n++) {
        ember_batch ba, bb, bc, bd;
        /* a draws with one thread, b with two: the bytes must not differ */
        omp_set_num_threads(1);
        CHECK(ember_synth_next(a, &ba) == EMBER_OK);
        omp_set_num_threads(2);
        CHECK(ember_synth_next(b, &bb) == EMBER_OK);
        CHECK(ember_synth_next(c, &bc) == EMBER_OK);
        CHECK(ember_synth_next(d, &bd) == EMBER_OK);

        CHECK(ba.batch_size == 257 && ba.num_features == 3);
        CHECK(ba.num_ids == 3 * 257 * 7);
        CHECK(ba.weights != NULL && bd.weights == NULL);
        if (n == 0)
            first_ids = ba.ids;
        CHECK_MSG(ba.ids == first_ids, "batch %d: arrays moved (reallocated in next)", n);

        int64_t sum_len = 0, bad_len = 0, bad_id = 0, bad_w = 0;
        double wsum = 0;
        for (int64_t i = 0; i < 3 * 257; i++) {
            sum_len += ba.lengths[i];
            bad_len += ba.lengths[i] != 7;
        }
        for (int64_t i = 0; i < ba.num_ids; i++) {
            bad_id += ba.ids[i] < 0 || ba.ids[i] >= cfg.rows;
            bad_w += !(ba.weights[i] >= 0.5f && ba.weights[i] < 1.5f);
            wsum += ba.weights[i];
        }
        CHECK(sum_len == ba.num_ids && bad_len == 0);
        CHECK_MSG(bad_id == 0, "batch %d: %lld ids out of range", n, (long long)bad_id);
        CHECK_MSG(bad_w == 0, "batch %d: %lld weights outside [0.5, 1.5)", n, (long long)bad_w);
        CHECK_MSG(fabs(wsum / (double)ba.num_ids - 1.0) < 0.02, "batch %d: mean weight %.4f", n,
                  wsum / (double)ba.num_ids);

        CHECK_MSG(!memcmp(ba.ids, bb.ids, (size_t)ba.num_ids * 8) &&
                      !memcmp(ba.weights, bb.weights, (size_t)ba.num_ids * 4),
                  "batch %d: same seed, different batch (1 vs 2 threads)", n);
        CHECK_MSG(!memcmp(ba.ids, bd.ids, (size_t)ba.num_ids * 8),
                  "batch %d: asking for weights changed the ids", n);
        CHECK_MSG(memcmp(ba.ids, bc.ids, (size_t)ba.num_ids * 8) != 0,
                  "batch %d: seeds 42 and 43 gave the same ids", n);
        /* tables are separate streams: feature 0 and 1 differ */
        int64_t per = 257 * 7, same = 0;
        for (int64_t i = 0; i < per; i++)
            same += ba.ids[i] == ba.ids[per + i];
        CHECK_MSG(same < per / 4, "batch %d: tables 0 and 1 agree on %lld of %lld ids", n,
                  (long long)same, (long long)per);
        uint64_t h = batch_hash(&ba);
        CHECK_MSG(h != prev_hash, "batch %d repeats batch %d", n, n - 1);
        prev_hash = h;
    }
    ember_synth_destroy(a);
    ember_synth_destroy(b);
    ember_synth_destroy(c);
    ember_synth_destroy(d);
}

static void test_edges_and_errors(void)
{
    ember_synth_config cfg = ember_synth_config_default();
    ember_synth *s = (ember_synth *)&cfg; /* must be reset to NULL on error */
    ember_batch b;

    cfg.tables = 0;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_EINVAL);
    CHECK(s == NULL);
    CHECK(strstr(ember_errmsg(NULL), "tables") != NULL);

    cfg = ember_synth_config_default();
    cfg.alpha = 0;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_EINVAL);
    CHECK(strstr(ember_errmsg(NULL), "alpha") != NULL);
    cfg.alpha = NAN;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_EINVAL);
    cfg.zipf = 0; /* alpha is not used by uniform */
    cfg.batch_size = 2;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_OK);
    ember_synth_destroy(s);

    cfg = ember_synth_config_default();
    cfg.rows = 0;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_EINVAL);
    CHECK(strstr(ember_errmsg(NULL), "rows") != NULL);
    cfg = ember_synth_config_default();
    cfg.pooling = 0;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_EINVAL);
    cfg = ember_synth_config_default();
    cfg.batch_size = -1;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_EINVAL);
    cfg = ember_synth_config_default();
    cfg.tables = 1 << 20;
    cfg.batch_size = 1 << 20;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_EINVAL);
    CHECK(ember_synth_create(NULL, &s) == EMBER_EINVAL);
    cfg = ember_synth_config_default();
    CHECK(ember_synth_create(&cfg, NULL) == EMBER_EINVAL);
    CHECK(ember_synth_next(NULL, &b) == EMBER_EINVAL);
    ember_synth_destroy(NULL);

    /* one row: every id is 0 under both laws */
    for (int z = 0; z < 2; z++) {
        cfg = ember_synth_config_default();
        cfg.rows = 1;
        cfg.tables = 2;
        cfg.batch_size = 50;
        cfg.zipf = z;
        CHECK(ember_synth_create(&cfg, &s) == EMBER_OK);
        if (!s)
            continue;
        CHECK(ember_synth_next(s, &b) == EMBER_OK);
        int64_t nonzero = 0;
        for (int64_t i = 0; i < b.num_ids; i++)
            nonzero += b.ids[i] != 0;
        CHECK(nonzero == 0);
        ember_synth_destroy(s);
    }
}

/* The generator is part of what the benchmarks compare across commits: pin
 * the first batch of the default W1 shape so a change to it is deliberate. */
static void test_known_answer(void)
{
    ember_synth_config cfg = ember_synth_config_default(); /* W1, seed 0 */
    CHECK(cfg.tables == 8 && cfg.rows == 1000000 && cfg.batch_size == 4096 && cfg.pooling == 20);
    CHECK(cfg.zipf == 1 && cfg.alpha == 1.05 && cfg.weighted == 0 && cfg.seed == 0);
    ember_synth *s = NULL;
    ember_batch b;
    CHECK(ember_synth_create(&cfg, &s) == EMBER_OK);
    if (!s)
        return;
    CHECK(ember_synth_next(s, &b) == EMBER_OK);
    uint64_t h = batch_hash(&b);
    printf("W1 seed 0 batch 0: ids[0..3] = %lld %lld %lld %lld, hash %016llx\n",
           (long long)b.ids[0], (long long)b.ids[1], (long long)b.ids[2], (long long)b.ids[3],
           (unsigned long long)h);
    CHECK_MSG(h == 0x9bd9ae110952c5cbULL, "W1 batch hash %016llx, pinned %016llx",
              (unsigned long long)h, 0x9bd9ae110952c5cbULL);
    ember_synth_destroy(s);
}

/* Batch n of a generator, copied out (ids only). */
static int64_t *ids_of(const ember_synth_config *cfg, int nbatches, int64_t *per_batch)
{
    ember_synth *s = NULL;
    CHECK(ember_synth_create(cfg, &s) == EMBER_OK);
    *per_batch = (int64_t)cfg->tables * cfg->batch_size * cfg->pooling;
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(*per_batch * nbatches));
    for (int n = 0; s && n < nbatches; n++) {
        ember_batch b;
        CHECK(ember_synth_next(s, &b) == EMBER_OK);
        memcpy(all + n * *per_batch, b.ids, sizeof(int64_t) * (size_t)*per_batch);
    }
    ember_synth_destroy(s);
    return all;
}

static void test_drift(void)
{
    const int64_t rows = 997, R = 100;
    const int nb = 9;
    ember_synth_config base = ember_synth_config_default();
    base.tables = 3;
    base.rows = rows;
    base.batch_size = 64;
    base.pooling = 8;
    base.seed = 11;
    int64_t per, per2;
    int64_t *want = ids_of(&base, nb, &per);
    int64_t *rank_of = malloc(sizeof(int64_t) * (size_t)rows); /* the scramble inverted, naively */
    for (int64_t k = 1; k <= rows; k++)
        rank_of[scramble(k, rows)] = k;
    /* rotate: the same draws, each rank moved e R down */
    ember_synth_config rot = base;
    rot.drift = EMBER_DRIFT_ROTATE, rot.drift_every = 2, rot.drift_rows = R, rot.drift_tables = 2;
    int64_t *got = ids_of(&rot, nb, &per2);
    int64_t bad = 0;
    for (int n = 0; n < nb; n++)
        for (int64_t i = 0; i < per; i++) {
            int64_t t = i / ((int64_t)base.batch_size * base.pooling), e = n / 2, b = want[n * per + i];
            int64_t x = t < 2 ? scramble((rank_of[b] - 1 + e * R) % rows + 1, rows) : b;
            bad += got[n * per + i] != x;
        }
    CHECK_MSG(bad == 0, "rotate: %lld ids are not the undrifted ones moved", (long long)bad);
    free(got);
    /* grow: epoch e's ids are rows of the first start + e R ranks; other tables as before */
    ember_synth_config gr = base;
    gr.drift = EMBER_DRIFT_GROW, gr.drift_every = 3, gr.drift_rows = R, gr.drift_start = 50, gr.drift_tables = 2;
    got = ids_of(&gr, nb, &per2);
    bad = 0;
    int64_t top = 0;
    for (int n = 0; n < nb; n++)
        for (int64_t i = 0; i < per; i++) {
            int64_t t = i / ((int64_t)base.batch_size * base.pooling), e = n / 3, x = got[n * per + i];
            int64_t support = 50 + e * R < rows ? 50 + e * R : rows;
            if (t < 2) {
                bad += x < 0 || x >= rows || rank_of[x] > support;
                top = n == nb - 1 && rank_of[x] > top ? rank_of[x] : top;
            } else {
                bad += x != want[n * per + i];
            }
        }
    CHECK_MSG(bad == 0, "grow: %lld ids outside their epoch's ranks, or moved in a table that does not drift",
              (long long)bad);
    CHECK_MSG(top > 50 + R, "grow: the last epoch's ranks reach only %lld", (long long)top);
    free(got);
    /* a full support from epoch 0: the undrifted batches */
    gr.drift_start = rows;
    got = ids_of(&gr, nb, &per2);
    CHECK_MSG(!memcmp(got, want, sizeof(int64_t) * (size_t)(per * nb)), "grow from the whole table is not the law");
    free(got);
    /* grow's law within an epoch: Zipf over its support, mapped over the table */
    ember_synth_config one = base;
    one.tables = 1, one.batch_size = 1000, one.pooling = 100, one.alpha = 1.05;
    one.drift = EMBER_DRIFT_GROW, one.drift_every = 1000, one.drift_rows = 1, one.drift_start = 300;
    int64_t total;
    int64_t *cnt = row_counts(one, 10, &total);
    double norm = 0;
    for (int64_t k = 300; k >= 1; k--)
        norm += pow((double)k, -1.05);
    int64_t obs[300];
    double expect[300];
    for (int64_t k = 1; k <= 300; k++) {
        obs[k - 1] = cnt[scramble(k, rows)];
        expect[k - 1] = (double)total * pow((double)k, -1.05) / norm;
    }
    int df;
    double chi = chi_square(obs, expect, 300, &df);
    CHECK_MSG(chi < df + 6 * sqrt(2.0 * df), "grow's law: chi-square %.1f with %d df", chi, df);
    printf("drift: rotate and grow as defined; grow's law chi-square %.1f (%d df)\n", chi, df);
    free(cnt);
    free(want);
    free(rank_of);
    /* refused */
    ember_synth *s = NULL;
    ember_synth_config badc = base;
    badc.drift = EMBER_DRIFT_GROW, badc.drift_every = 0, badc.drift_rows = 5;
    CHECK(ember_synth_create(&badc, &s) == EMBER_EINVAL && !s && strstr(ember_errmsg(NULL), "drift_every"));
    badc.drift_every = 1, badc.drift_rows = rows + 1;
    CHECK(ember_synth_create(&badc, &s) == EMBER_EINVAL && !s);
    badc.drift_rows = 1, badc.drift = (ember_drift)7;
    CHECK(ember_synth_create(&badc, &s) == EMBER_EINVAL && !s);
}

int main(void)
{
    test_drift();
    test_edges_and_errors();
    test_shape_and_determinism();
    test_zipf_law(1000, 1.05, 10, 1);
    test_zipf_law(1000, 1.0, 10, 1);
    test_zipf_law(1000, 0.5, 10, 1);
    test_zipf_law(1000, 2.0, 10, 1);
    test_zipf_law(1000000, 1.05, 10, 0); /* W1's table size */
    test_uniform_flat(1000);
    test_uniform_flat(997); /* not a power of two: the rejection step matters */
    test_known_answer();
    return check_report("test_synth");
}
