/*
 * test_train.c: the training step and its metrics (src/model/model.h, metrics.h).
 *
 *   metrics      metric_auc against a naive O(n^2) count of (positive,
 *                negative) pairs, ties one half, on random scores drawn
 *                from a few values (many ties), one class absent, NaN
 *                scores; metric_logloss against the plain formula.
 *   composition  a step with accumulate 1 is bit-identical to the calls
 *                done by hand (ember_forward, dlrm_forward, BCE,
 *                dlrm_backward, ember_backward, dense_optim_step), and its
 *                loss_sum is the BCE sum.
 *   accumulate   k micro-batches of b equal one micro-batch of k*b
 *                (accumulate 1) after several steps: dense parameters and
 *                tables within 1e-6 (BLAS sums the batch in other
 *                blocks), including a short last step; SGD and Adam.
 *   threads      the collection's threads 1 vs 2 (the dense model's BLAS
 *                threads fixed at 1: OpenBLAS is not bit-identical across
 *                thread counts, dense.h): tables, dense parameters and
 *                losses bit-identical.
 *   predict      probabilities are sigmoid of the model's logits, and a
 *                predict between steps changes nothing.
 *   errors       a feature of the wrong dim, combiner none, micro_batch 0.
 */
#include "train_util.h"

/* ------------------------------------------------------------- metrics */

static double naive_auc(const float *s, const float *y, int64_t n)
{
    double wins = 0, pairs = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            if (y[i] > 0.5f && y[j] <= 0.5f) {
                pairs += 1;
                wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
            }
    return pairs ? wins / pairs : 0.5;
}

static void test_metrics(test_rng *r)
{
    for (int trial = 0; trial < 200; trial++) {
        int64_t n = test_range(r, 1, 400);
        int levels = (int)test_range(r, 1, 12); /* few distinct scores: ties */
        float *s = malloc((size_t)n * sizeof *s), *y = malloc((size_t)n * sizeof *y);
        double pos_rate = trial % 20 == 0 ? 0.0 : trial % 20 == 1 ? 1.0 : test_uniform(r);
        for (int64_t i = 0; i < n; i++) {
            s[i] = trial % 2 ? (float)test_range(r, 0, levels) / (float)levels : test_float(r, -3, 3);
            y[i] = test_uniform(r) < pos_rate ? 1.0f : 0.0f;
        }
        double got = metric_auc(s, y, n), want = naive_auc(s, y, n);
        CHECK_MSG(fabs(got - want) <= 1e-12, "trial %d n %lld: auc %.15g, naive %.15g", trial, (long long)n, got,
                  want);
        /* probabilities for the log loss, with exact 0 and 1 (clamped) */
        for (int64_t i = 0; i < n; i++)
            s[i] = test_range(r, 0, 10) == 0 ? (float)test_range(r, 0, 2) : test_float(r, 0, 1);
        double ll = 0;
        for (int64_t i = 0; i < n; i++) {
            double p = fmin(fmax((double)s[i], 1e-7), 1 - 1e-7);
            ll += y[i] > 0.5f ? -log(p) : -log(1 - p);
        }
        ll /= (double)n;
        got = metric_logloss(s, y, n);
        CHECK_MSG(fabs(got - ll) <= 1e-12 * (1 + ll), "trial %d: logloss %.15g, naive %.15g", trial, got, ll);
        free(s);
        free(y);
    }
    /* fixed cases */
    float s1[] = {0.1f, 0.4f, 0.35f, 0.8f}, y1[] = {0, 0, 1, 1};
    CHECK(fabs(metric_auc(s1, y1, 4) - 0.75) < 1e-12);
    float s2[] = {0.5f, 0.5f, 0.5f, 0.5f}, y2[] = {0, 1, 0, 1};
    CHECK(fabs(metric_auc(s2, y2, 4) - 0.5) < 1e-12);
    float s3[] = {NAN, 0.2f, 0.9f}, y3[] = {1, 0, 1}; /* NaN ranks lowest */
    CHECK(fabs(metric_auc(s3, y3, 3) - 0.5) < 1e-12);
    CHECK(metric_auc(s1, y1, 0) == 0.5);
    float p4[] = {0.0f, 1.0f}, y4[] = {0, 1};
    CHECK(metric_logloss(p4, y4, 2) < 1e-6);
}

/* ------------------------------------------------------------ a setup */

typedef struct run {
    ember_collection *coll;
    dlrm *model;
    ctr_model *tr;
} run;

static int run_open(run *u, const test_config *tc, const dlrm_config *mc, const model_config *cfg)
{
    char err[256];
    memset(u, 0, sizeof *u);
    int st = ember_collection_create(&tc->cfg, &u->coll);
    CHECK_MSG(st == EMBER_OK, "%s", ember_errmsg(NULL));
    if (st != EMBER_OK)
        return 0;
    CHECK_MSG(dlrm_create(mc, &u->model, err, sizeof err) == 0, "%s", err);
    if (!u->model)
        return 0;
    st = model_create(cfg, u->coll, u->model, &u->tr, err, sizeof err);
    CHECK_MSG(st == EMBER_OK, "model_create: %s", err);
    return st == EMBER_OK;
}

static void run_close(run *u)
{
    model_destroy(u->tr);
    dlrm_destroy(u->model);
    ember_collection_destroy(u->coll);
}

static model_config tcfg(int32_t b, int32_t k, dense_optim_kind kind, int32_t threads)
{
    model_config c;
    memset(&c, 0, sizeof c);
    c.micro_batch = b;
    c.accumulate = k;
    c.dense_optim = dense_optim_config_default(kind);
    c.dense_optim.lr = kind == DENSE_SGD ? 0.2f : 0.01f;
    c.threads = threads;
    return c;
}

static int step(run *u, const tctr *x, double *loss)
{
    char err[256];
    int st = model_step(u->tr, &x->b, x->b.batch_size, loss, err, sizeof err);
    CHECK_MSG(st == EMBER_OK, "model_step: %s", err);
    return st == EMBER_OK;
}

/* ---------------------------------------------------------- composition */

static void test_composition(test_rng *r)
{
    const int32_t F = 3, d = 4, nd = 5, B = 23;
    dlrm_config mc;
    test_config *tc = ttrain_config(r, F, d, nd, &mc);
    model_config c = tcfg(B, 1, DENSE_ADAM, 1);
    run u;
    ember_collection *coll = NULL;
    dlrm *model = NULL;
    dense_optim *opt = NULL;
    char err[256];
    int ok = run_open(&u, tc, &mc, &c);
    ok = ok && ember_collection_create(&tc->cfg, &coll) == EMBER_OK && dlrm_create(&mc, &model, err, sizeof err) == 0 &&
         dense_optim_create(&c.dense_optim, dlrm_num_params(model), &opt) == 0;
    CHECK(ok);
    int64_t W = (int64_t)F * d, P = ok ? dlrm_num_params(model) : 0;
    float *pooled = malloc((size_t)(B * W) * 4), *dp = malloc((size_t)(B * W) * 4);
    float *logit = malloc(B * 4), *dlogit = malloc(B * 4);
    for (int s = 0; ok && s < 4; s++) {
        tctr x;
        tctr_make(r, &tc->cfg, B, nd, &x);
        double loss = 0;
        ok = step(&u, &x, &loss);
        /* by hand */
        CHECK(ember_forward(coll, &x.b.sparse, pooled, NULL) == EMBER_OK);
        dlrm_zero_grads(model);
        CHECK(dlrm_forward(model, B, x.dense, pooled, logit) == 0);
        double want = dense_bce_logits(logit, x.label, B, 1.0f / B, dlogit);
        dlrm_backward(model, dlogit, dp);
        CHECK(ember_backward(coll, dp, NULL) == EMBER_OK);
        dense_optim_step(opt, dlrm_params(model), dlrm_grads(model));
        CHECK_MSG(loss == want, "step %d: loss_sum %.17g, by hand %.17g", s, loss, want);
        CHECK_MSG(memcmp(dlrm_params(u.model), dlrm_params(model), (size_t)P * 4) == 0,
                  "step %d: dense parameters differ from the calls by hand", s);
        CHECK_MSG(test_tables_identical(u.coll, coll, &tc->cfg), "step %d: tables differ from the calls by hand", s);
        tctr_free(&x);
    }
    free(pooled), free(dp), free(logit), free(dlogit);
    dense_optim_destroy(opt);
    dlrm_destroy(model);
    ember_collection_destroy(coll);
    run_close(&u);
    test_config_free(tc);
}

/* ----------------------------------------------------------- accumulate */

static void test_accumulate(test_rng *r, dense_optim_kind kind)
{
    const int32_t F = 4, d = 8, nd = 6;
    for (int trial = 0; trial < 6; trial++) {
        int32_t b = (int32_t)test_range(r, 1, 9), k = (int32_t)test_range(r, 2, 5);
        dlrm_config mc;
        test_config *tc = ttrain_config(r, F, d, nd, &mc);
        model_config ca = tcfg(b, k, kind, 1), cb = tcfg(b * k, 1, kind, 1);
        if (kind == DENSE_ADAM)
            ca.dense_optim.eps = cb.dense_optim.eps = 1e-3f; /* near g = 0, Adam turns rounding into lr */
        run a, bb;
        int ok = run_open(&a, tc, &mc, &ca);
        ok = run_open(&bb, tc, &mc, &cb) && ok;
        for (int s = 0; ok && s < 5; s++) {
            tctr x;
            int32_t n = s == 4 ? (int32_t)test_range(r, 1, b * k + 1) : b * k; /* a short last step */
            tctr_make(r, &tc->cfg, n, nd, &x);
            double la = 0, lb = 0;
            ok = step(&a, &x, &la) && step(&bb, &x, &lb);
            CHECK_MSG(fabs(la - lb) <= 1e-6 * fabs(lb) + 1e-9, "trial %d step %d: loss %.9g vs %.9g", trial, s,
                      la, lb);
            tctr_free(&x);
        }
        if (ok) {
            char what[160];
            snprintf(what, sizeof what, "%s trial %d (b %d, k %d, %s): dense parameters",
                     kind == DENSE_SGD ? "sgd" : "adam", trial, b, k,
                     mc.interaction == DENSE_INTERACT_DOT ? "dot" : "cat");
            CHECK_CLOSE(dlrm_params(a.model), dlrm_params(bb.model), dlrm_num_params(a.model), 1e-6, 1e-7, what);
            int64_t na, nb;
            float *ta = ttrain_tables(a.coll, &tc->cfg, &na), *tb = ttrain_tables(bb.coll, &tc->cfg, &nb);
            snprintf(what, sizeof what, "%s trial %d (b %d, k %d): tables", kind == DENSE_SGD ? "sgd" : "adam",
                     trial, b, k);
            CHECK_CLOSE(ta, tb, na, 1e-6, 1e-7, what);
            free(ta);
            free(tb);
        }
        run_close(&a);
        run_close(&bb);
        test_config_free(tc);
    }
}

/* -------------------------------------------------------------- threads */

static void test_threads(test_rng *r)
{
    const int32_t F = 3, d = 8, nd = 4;
    dlrm_config mc;
    test_config *tc = ttrain_config(r, F, d, nd, &mc);
    for (int32_t t = 0; t < F; t++)
        tc->tables[t].rows = 2000; /* enough ids for the threads to split */
    model_config c1 = tcfg(64, 2, DENSE_ADAM, 1), c2 = tcfg(64, 2, DENSE_ADAM, 2);
    run a, b;
    int ok = run_open(&a, tc, &mc, &c1);
    ok = run_open(&b, tc, &mc, &c2) && ok;
    dlrm_set_threads(b.model, 2, 1); /* BLAS results depend on its thread count: one for both models */
    for (int s = 0; ok && s < 4; s++) {
        tctr x;
        tctr_make(r, &tc->cfg, 128, nd, &x);
        double la = 0, lb = 0;
        ok = step(&a, &x, &la) && step(&b, &x, &lb);
        CHECK_MSG(la == lb, "step %d: loss %.17g vs %.17g", s, la, lb);
        tctr_free(&x);
    }
    if (ok) {
        CHECK_MSG(test_tables_identical(a.coll, b.coll, &tc->cfg), "threads 1 vs 2: tables differ");
        CHECK_MSG(memcmp(dlrm_params(a.model), dlrm_params(b.model), (size_t)dlrm_num_params(a.model) * 4) == 0,
                  "threads 1 vs 2: dense parameters differ");
    }
    run_close(&a);
    run_close(&b);
    test_config_free(tc);
}

/* ----------------------------------------------- learning-rate schedule */

/* The factors against sequences computed by hand from docs/training.md's
 * formulas, and a factor of 1/2 against halved rates: the same tables and
 * dense parameters bit for bit, every embedding optimizer. */
static void test_lr_schedule(test_rng *r)
{
    static const struct {
        lr_schedule s;
        int64_t steps;
        double want[8];
    } cases[] = {
        {{2, LR_DECAY_LINEAR, 0.5f, 1, 0.5f}, 6, {0.5, 1.0, 1.0, 1.0 - 0.5 / 3, 1.0 - 1.0 / 3, 0.5}},
        {{2, LR_DECAY_COSINE, 0.0f, 1, 0.5f}, 6, {0.5, 1.0, 1.0, 0.75, 0.25, 0.0}},
        {{0, LR_DECAY_STEP, 0.0f, 2, 0.5f}, 6, {1.0, 1.0, 0.5, 0.5, 0.25, 0.25}},
        {{4, LR_DECAY_NONE, 0.0f, 1, 0.5f}, 6, {0.25, 0.5, 0.75, 1.0, 1.0, 1.0}},
        {{0, LR_DECAY_LINEAR, 0.2f, 1, 0.5f}, 1, {1.0}}, /* one step: no span to decay over */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char err[128] = "";
        CHECK_MSG(lr_schedule_check(&cases[c].s, err, sizeof err) == 0, "case %zu: %s", c, err);
        for (int64_t k = 1; k <= cases[c].steps; k++) {
            float got = lr_schedule_scale(&cases[c].s, k, cases[c].steps);
            CHECK_MSG(fabs((double)got - cases[c].want[k - 1]) <= 1e-7, "case %zu step %lld: %.9g want %.9g", c,
                      (long long)k, (double)got, cases[c].want[k - 1]);
        }
    }
    lr_schedule bad = {-1, LR_DECAY_NONE, 0, 1, 0.5f};
    char err[128] = "";
    CHECK(lr_schedule_check(&bad, err, sizeof err) != 0 && strstr(err, "warmup"));
    bad = (lr_schedule){0, LR_DECAY_STEP, 0, 0, 0.5f};
    CHECK(lr_schedule_check(&bad, err, sizeof err) != 0 && strstr(err, "every"));

    /* a factor of 1/2 = rates configured at half (x * 0.5f is exact) */
    const int32_t F = 4, d = 8, nd = 4;
    dlrm_config mc;
    test_config *tc = ttrain_config(r, F, d, nd, &mc);
    for (int32_t t = 0; t < F; t++)
        tc->tables[t].optimizer = test_optimizer_random(r, (ember_optimizer_kind)(t % 4));
    test_config *half = test_config_copy(tc);
    for (int32_t t = 0; t < F; t++)
        half->tables[t].optimizer.lr *= 0.5f;
    model_config c1 = tcfg(64, 1, DENSE_ADAM, 1), c2 = c1;
    c2.dense_optim.lr *= 0.5f;
    run a, b;
    int ok = run_open(&a, tc, &mc, &c1);
    ok = run_open(&b, half, &mc, &c2) && ok;
    if (ok) {
        CHECK(model_set_lr_scale(a.tr, 0.5f) == EMBER_OK);
        CHECK(model_set_lr_scale(a.tr, -1.0f) == EMBER_EINVAL);
    }
    for (int s = 0; ok && s < 4; s++) {
        tctr x;
        tctr_make(r, &tc->cfg, 64, nd, &x);
        double la = 0, lb = 0;
        ok = step(&a, &x, &la) && step(&b, &x, &lb);
        CHECK_MSG(la == lb, "step %d: loss %.17g vs %.17g", s, la, lb);
        tctr_free(&x);
    }
    if (ok) {
        CHECK_MSG(test_tables_identical(a.coll, b.coll, &tc->cfg), "scale 1/2 vs halved rates: tables differ");
        CHECK_MSG(memcmp(dlrm_params(a.model), dlrm_params(b.model), (size_t)dlrm_num_params(a.model) * 4) == 0,
                  "scale 1/2 vs halved rates: dense parameters differ");
    }
    run_close(&a);
    run_close(&b);
    test_config_free(tc);
    test_config_free(half);
}

/* -------------------------------------------------------------- predict */

static void test_predict(test_rng *r)
{
    const int32_t F = 2, d = 4, nd = 3, B = 30;
    dlrm_config mc;
    test_config *tc = ttrain_config(r, F, d, nd, &mc);
    model_config c = tcfg(8, 2, DENSE_ADAM, 1);
    run a, b;
    int ok = run_open(&a, tc, &mc, &c);
    ok = run_open(&b, tc, &mc, &c) && ok;
    for (int s = 0; ok && s < 3; s++) {
        tctr x, e;
        tctr_make(r, &tc->cfg, 16, nd, &x);
        tctr_make(r, &tc->cfg, B, nd, &e); /* larger than a step: the buffers grow */
        float prob[B], again[B], logit[B], pooled[B * F * d];
        char err[256];
        CHECK_MSG(model_predict(a.tr, &e.b, prob, err, sizeof err) == EMBER_OK, "%s", err);
        CHECK_MSG(model_predict(a.tr, &e.b, again, err, sizeof err) == EMBER_OK, "%s", err);
        CHECK(memcmp(prob, again, sizeof prob) == 0);
        CHECK(ember_forward(b.coll, &e.b.sparse, pooled, NULL) == EMBER_OK);
        for (int32_t lo = 0; lo < B; lo += 8) /* the model in micro-batches, as predict */
            CHECK(dlrm_forward(b.model, B - lo < 8 ? B - lo : 8, e.dense + lo * nd, pooled + lo * F * d,
                               logit + lo) == 0);
        for (int32_t i = 0; i < B; i++)
            CHECK_MSG(prob[i] == dense_sigmoid(logit[i]) && prob[i] >= 0 && prob[i] <= 1,
                      "sample %d: %.9g vs sigmoid(%.9g)", i, prob[i], logit[i]);
        double la = 0, lb = 0;
        ok = step(&a, &x, &la) && step(&b, &x, &lb);
        CHECK_MSG(la == lb, "a predict before the step changed the loss: %.17g vs %.17g", la, lb);
        tctr_free(&x);
        tctr_free(&e);
    }
    if (ok) {
        CHECK_MSG(test_tables_identical(a.coll, b.coll, &tc->cfg), "predict between steps changed the tables");
        CHECK(memcmp(dlrm_params(a.model), dlrm_params(b.model), (size_t)dlrm_num_params(a.model) * 4) == 0);
    }
    run_close(&a);
    run_close(&b);
    test_config_free(tc);
}

/* --------------------------------------------------------------- errors */

static void test_errors(test_rng *r)
{
    dlrm_config mc;
    test_config *tc = ttrain_config(r, 2, 4, 3, &mc);
    ember_collection *coll = NULL;
    dlrm *model = NULL;
    ctr_model *t = NULL;
    char err[256] = "";
    tc->tables[1].dim = 8;
    CHECK(ember_collection_create(&tc->cfg, &coll) == EMBER_OK);
    CHECK(dlrm_create(&mc, &model, err, sizeof err) == 0);
    model_config c = tcfg(8, 1, DENSE_SGD, 1);
    CHECK(model_create(&c, coll, model, &t, err, sizeof err) == EMBER_EINVAL && !t);
    CHECK_MSG(strstr(err, "feature1") && strstr(err, "dim 8"), "%s", err);
    ember_collection_destroy(coll);
    tc->tables[1].dim = 4;
    tc->features[0].combiner = EMBER_COMBINER_NONE;
    CHECK(ember_collection_create(&tc->cfg, &coll) == EMBER_OK);
    CHECK(model_create(&c, coll, model, &t, err, sizeof err) == EMBER_EINVAL && !t);
    CHECK_MSG(strstr(err, "feature0") && strstr(err, "none"), "%s", err);
    ember_collection_destroy(coll);
    tc->features[0].combiner = EMBER_COMBINER_SUM;
    CHECK(ember_collection_create(&tc->cfg, &coll) == EMBER_OK);
    c.micro_batch = 0;
    CHECK(model_create(&c, coll, model, &t, err, sizeof err) == EMBER_EINVAL && !t);
    CHECK_MSG(strstr(err, "micro_batch"), "%s", err);
    /* a batch with an id out of range: the collection's message */
    c.micro_batch = 8;
    CHECK(model_create(&c, coll, model, &t, err, sizeof err) == EMBER_OK);
    tctr x;
    tctr_make(r, &tc->cfg, 8, 3, &x);
    if (x.sp.b.num_ids > 0) {
        x.sp.ids[0] = 1000000;
        double loss;
        CHECK(model_step(t, &x.b, 8, &loss, err, sizeof err) == EMBER_EINPUT);
        CHECK_MSG(strstr(err, "1000000"), "%s", err);
    }
    tctr_free(&x);
    model_destroy(t);
    dlrm_destroy(model);
    ember_collection_destroy(coll);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    test_metrics(&r);
    test_lr_schedule(&r);
    test_composition(&r);
    test_accumulate(&r, DENSE_SGD);
    test_accumulate(&r, DENSE_ADAM);
    test_threads(&r);
    test_predict(&r);
    test_errors(&r);
    return check_report("test_train");
}
