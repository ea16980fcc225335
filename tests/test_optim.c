/*
 * test_optim.c: optimizer and combiner-scale updates against numbers worked
 * out by hand, on one table of 3 rows, dim 2.
 *
 * Rows start as row0 = [1, 2], row1 = [-1, 0.5], row2 = [7, -7] (written
 * with ember_table_write); row 2 is never looked up and must never change.
 * The main batch has B = 2: sample 0 bag {0}, sample 1 bag {0, 1}, SUM, and
 * d_pooled = [-1, 5 | 2, 2], so the summed gradients are
 *     g(row0) = [-1, 5] + [2, 2] = [1, 7]        g(row1) = [2, 2].
 * Expected values below are derived in the comments; the tolerance is
 * rtol 1e-6, atol 1e-6: every value is O(1) and float rounding of a few
 * operations is ~1e-7 (eps = 1e-8 moves Adam/Adagrad results by < 4e-7).
 * The ref's optimizer is checked against the same numbers.
 */
#include "util.h"

static const float W_INIT[6] = {1, 2, -1, 0.5f, 7, -7};
static const int32_t LEN_A[2] = {1, 2};
static const int64_t IDS_A[3] = {0, 0, 1};
static const float D_A[4] = {-1, 5, 2, 2};
/* Batch C: bag {0} alone, d = [-1, 5] for sample 1, so g(row0) = [-1, 5]
 * and row 1 is untouched (lazy: keeps its values and state). */
static const int32_t LEN_C[2] = {0, 1};
static const int64_t IDS_C[1] = {0};
static const float D_C[4] = {7, 7, -1, 5};

static ember_collection *make(ember_optimizer o, ember_combiner comb, int dedup)
{
    test_config *tc = test_config_new(1, 1);
    tc->tables[0].rows = 3;
    tc->tables[0].dim = 2;
    tc->tables[0].init = EMBER_INIT_ZEROS;
    tc->tables[0].optimizer = o;
    tc->features[0].combiner = comb;
    tc->cfg.dedup = dedup;
    tc->cfg.debug_checks = 1;
    ember_collection *c = NULL;
    int rc = ember_collection_create(&tc->cfg, &c);
    CHECK_MSG(rc == EMBER_OK, "create: %s", ember_errmsg(NULL));
    if (c)
        CHECK(ember_table_write(c, 0, 0, 3, W_INIT) == EMBER_OK);
    test_config_free(tc);
    return c;
}

/* forward + backward of one batch; checks pooled (or sequence) output */
static void step(ember_collection *c, int32_t B, const int32_t *len, const int64_t *ids,
                 const float *wts, int64_t n, const float *d, const float *want_out,
                 int64_t out_n, int sequence, const char *what)
{
    ember_batch b = {B, 1, len, ids, wts, n};
    float out[16];
    for (int i = 0; i < 16; i++)
        out[i] = NAN;
    int rc = sequence ? ember_forward(c, &b, NULL, out) : ember_forward(c, &b, out, NULL);
    CHECK_MSG(rc == EMBER_OK, "%s forward: %s", what, ember_errmsg(c));
    if (want_out)
        CHECK_CLOSE(out, want_out, out_n, 1e-6, 1e-6, what);
    rc = sequence ? ember_backward(c, NULL, d) : ember_backward(c, d, NULL);
    CHECK_MSG(rc == EMBER_OK, "%s backward: %s", what, ember_errmsg(c));
}

static void expect(ember_collection *c, const float *want_w, const float *want_s, int sf,
                   const char *what)
{
    float w[6], s[12];
    CHECK(ember_table_read(c, 0, 0, 3, w) == EMBER_OK);
    CHECK_CLOSE(w, want_w, 6, 1e-6, 1e-6, what);
    if (sf) {
        CHECK(ember_table_read_state(c, 0, 0, 3, s) == EMBER_OK);
        CHECK_CLOSE(s, want_s, 3 * sf, 1e-6, 1e-6, what);
    }
}

/* The ref's optimizer on the same gradients (rows 0 and 1). */
static void ref_expect(ember_optimizer o, int64_t t, float *w, float *s, const float *g0,
                       const float *g1, int sf)
{
    ref_optimizer_apply(&o, t, 2, w, s, g0);
    ref_optimizer_apply(&o, t, 2, w + 2, s + sf, g1);
}

/* Optimizer o from rows w0 over batch A then batch C (row 1 lazy), its
 * values and state (sf floats a row) checked after each against w1, s1 and
 * w2, s2; then the ref from w0 over the same gradients against the same. */
static void two_steps(ember_optimizer o, const float w0[6], const float w1[6], const float *s1, const float w2[6],
                      const float *s2, int sf, const char *what)
{
    char m[160];
    ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    CHECK(ember_table_write(c, 0, 0, 3, w0) == EMBER_OK);
    snprintf(m, sizeof m, "%s step 1", what);
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, m);
    expect(c, w1, s1, sf, m);
    snprintf(m, sizeof m, "%s step 2 (row 1 lazy)", what);
    step(c, 2, LEN_C, IDS_C, NULL, 1, D_C, NULL, 0, 0, m);
    expect(c, w2, s2, sf, m);
    ember_collection_destroy(c);

    float w[6], s[12] = {0};
    memcpy(w, w0, sizeof w);
    ref_expect(o, 1, w, s, (float[]){1, 7}, (float[]){2, 2}, sf);
    snprintf(m, sizeof m, "ref %s step 1", what);
    CHECK_CLOSE(w, w1, 4, 1e-6, 1e-6, m);
    CHECK_CLOSE(s, s1, 2 * sf, 1e-6, 1e-6, m);
    ref_optimizer_apply(&o, 2, 2, w, s, (float[]){-1, 5});
    snprintf(m, sizeof m, "ref %s step 2", what);
    CHECK_CLOSE(w, w2, 4, 1e-6, 1e-6, m);
    CHECK_CLOSE(s, s2, 2 * sf, 1e-6, 1e-6, m);
}

static void test_sgd(void)
{
    /* lr 0.1, weight decay 0.5: g' = g + 0.5 w
     * step 1: row0 g' = [1 + 0.5, 7 + 1]   = [1.5, 8]    -> w = [0.85, 1.2]
     *         row1 g' = [2 - 0.5, 2 + 0.25] = [1.5, 2.25] -> w = [-1.15, 0.275]
     * pooled = [row0 | row0 + row1] = [1, 2 | 0, 2.5]
     * step 2: row0 g' = [1 + 0.425, 7 + 0.6] = [1.425, 7.6] -> [0.7075, 0.44]
     *         row1 g' = [2 - 0.575, 2 + 0.1375] = [1.425, 2.1375] -> [-1.2925, 0.06125]
     * pooled = [0.85, 1.2 | -0.3, 1.475] */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_SGD);
    o.lr = 0.1f;
    o.weight_decay = 0.5f;
    ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const float p1[4] = {1, 2, 0, 2.5f}, p2[4] = {0.85f, 1.2f, -0.3f, 1.475f};
    static const float w1[6] = {0.85f, 1.2f, -1.15f, 0.275f, 7, -7};
    static const float w2[6] = {0.7075f, 0.44f, -1.2925f, 0.06125f, 7, -7};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, p1, 4, 0, "sgd step 1");
    expect(c, w1, NULL, 0, "sgd step 1");
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, p2, 4, 0, "sgd step 2");
    expect(c, w2, NULL, 0, "sgd step 2");
    ember_stats st;
    ember_collection_stats(c, &st);
    CHECK(st.steps == 2);

    float w[6], s[1] = {0};
    memcpy(w, W_INIT, sizeof w);
    ref_expect(o, 1, w, s, (float[]){1, 7}, (float[]){2, 2}, 0);
    CHECK_CLOSE(w, w1, 4, 1e-6, 1e-6, "ref sgd step 1");
    ember_collection_destroy(c);
}

static void test_adagrad(void)
{
    /* lr 0.5, eps 1e-8: s += g^2, w -= 0.5 g / (sqrt(s) + eps)
     * step 1: row0 s = [1, 49]  -> w = [1 - 0.5, 2 - 0.5*7/7] = [0.5, 1.5]
     *         row1 s = [4, 4]   -> w = [-1 - 0.5, 0.5 - 0.5]  = [-1.5, 0]
     * step 2: row0 s = [2, 98]  -> 0.5*1/sqrt2 = 0.5*7/sqrt98 = 0.35355339
     *                           -> w = [0.14644661, 1.14644661]
     *         row1 s = [8, 8]   -> 0.5*2/sqrt8 = 0.35355339 -> [-1.85355339, -0.35355339] */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_ADAGRAD);
    o.lr = 0.5f;
    o.eps = 1e-8f;
    ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const float w1[6] = {0.5f, 1.5f, -1.5f, 0, 7, -7}, s1[6] = {1, 49, 4, 4, 0, 0};
    static const float w2[6] = {0.14644661f, 1.14644661f, -1.85355339f, -0.35355339f, 7, -7};
    static const float s2[6] = {2, 98, 8, 8, 0, 0};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "adagrad step 1");
    expect(c, w1, s1, 2, "adagrad step 1");
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "adagrad step 2");
    expect(c, w2, s2, 2, "adagrad step 2");
    ember_collection_destroy(c);

    float w[6], s[6] = {0};
    memcpy(w, W_INIT, sizeof w);
    ref_expect(o, 1, w, s, (float[]){1, 7}, (float[]){2, 2}, 2);
    ref_expect(o, 2, w, s, (float[]){1, 7}, (float[]){2, 2}, 2);
    CHECK_CLOSE(w, w2, 4, 1e-6, 1e-6, "ref adagrad step 2");
    CHECK_CLOSE(s, s2, 4, 1e-6, 1e-6, "ref adagrad state step 2");

    /* eps = 1 sits outside the sqrt: row0 w = [1 - 0.5*1/(1+1), 2 - 0.5*7/(7+1)]
     * = [0.75, 1.5625]; row1 w = [-1 - 0.5*2/(2+1), 0.5 - 1/3] = [-1.3333333, 0.1666667] */
    o.eps = 1.0f;
    c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const float w3[6] = {0.75f, 1.5625f, -1.33333333f, 0.16666667f, 7, -7};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "adagrad eps 1");
    expect(c, w3, s1, 2, "adagrad eps 1");
    ember_collection_destroy(c);
}

static void test_rowwise(void)
{
    /* lr 0.1: s += mean(g^2), w -= 0.1 g / (sqrt(s) + eps)
     * step 1: row0 s = (1 + 49)/2 = 25, sqrt 5 -> w = [1 - 0.02, 2 - 0.14] = [0.98, 1.86]
     *         row1 s = (4 + 4)/2 = 4, sqrt 2   -> w = [-1 - 0.1, 0.5 - 0.1] = [-1.1, 0.4]
     * step 2: row0 s = 50 -> w = [0.98 - 0.1/sqrt50, 1.86 - 0.7/sqrt50]
     *                          = [0.96585786, 1.76100505]
     *         row1 s = 8  -> w = [-1.1 - 0.2/sqrt8, 0.4 - 0.2/sqrt8]
     *                          = [-1.17071068, 0.32928932] */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_ROWWISE_ADAGRAD);
    o.lr = 0.1f;
    o.eps = 1e-8f;
    ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const float w1[6] = {0.98f, 1.86f, -1.1f, 0.4f, 7, -7}, s1[3] = {25, 4, 0};
    static const float w2[6] = {0.96585786f, 1.76100505f, -1.17071068f, 0.32928932f, 7, -7};
    static const float s2[3] = {50, 8, 0};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "rowwise step 1");
    expect(c, w1, s1, 1, "rowwise step 1");
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "rowwise step 2");
    expect(c, w2, s2, 1, "rowwise step 2");
    ember_collection_destroy(c);

    float w[6], s[3] = {0};
    memcpy(w, W_INIT, sizeof w);
    ref_expect(o, 1, w, s, (float[]){1, 7}, (float[]){2, 2}, 1);
    ref_expect(o, 2, w, s, (float[]){1, 7}, (float[]){2, 2}, 1);
    CHECK_CLOSE(w, w2, 4, 1e-6, 1e-6, "ref rowwise step 2");
    CHECK_CLOSE(s, s2, 2, 1e-6, 1e-6, "ref rowwise state step 2");
}

static void test_adam(void)
{
    /* lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8.  State per row: m[2] then v[2].
     * step 1 (t = 1), batch A: m = 0.1 g, v = 0.001 g^2,
     *   factor sqrt(1 - 0.999)/(1 - 0.9) = 0.31622777, so the step is
     *   0.1 * 0.31622777 * 0.1 g / (0.031622777 |g|) = 0.1 sign(g):
     *   row0 w = [0.9, 1.9], m = [0.1, 0.7], v = [0.001, 0.049]
     *   row1 w = [-1.1, 0.4], m = [0.2, 0.2], v = [0.004, 0.004]
     * step 2 (t = 2), batch B: sample 0 bag {1}, sample 1 empty, same d_pooled,
     *   so only row1 moves, with g = [-1, 5]; row0 keeps w, m and v (lazy):
     *   m = 0.9*[0.2, 0.2] + 0.1*[-1, 5] = [0.08, 0.68]
     *   v = 0.999*[0.004, 0.004] + 0.001*[1, 25] = [0.004996, 0.028996]
     *   factor sqrt(1 - 0.999^2)/(1 - 0.9^2) = 0.23531673 (t = 2)
     *   w = [-1.1 - 0.1*0.23531673*0.08/0.07068239, 0.4 - 0.1*0.23531673*0.68/0.17028212]
     *     = [-1.1266337, 0.30602926]
     * step 3 (t = 3), batch C: bag {0} only, g(row0) = [-1, 5]; row0 was touched
     *   once before, so a per-row count (t = 2) would differ from the global t = 3:
     *   m = 0.9*[0.1, 0.7] + 0.1*[-1, 5] = [-0.01, 1.13]
     *   v = 0.999*[0.001, 0.049] + 0.001*[1, 25] = [0.001999, 0.073951]
     *   factor sqrt(1 - 0.999^3)/(1 - 0.9^3) = 0.05474487/0.271 = 0.2020106
     *   w = [0.9 + 0.1*0.2020106*0.01/0.04471018, 1.9 - 0.1*0.2020106*1.13/0.27193933]
     *     = [0.90451822, 1.81605759] */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_ADAM);
    o.lr = 0.1f;
    o.eps = 1e-8f;
    ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const int32_t len_b[2] = {1, 0};
    static const int64_t ids_b[1] = {1};
    static const float w1[6] = {0.9f, 1.9f, -1.1f, 0.4f, 7, -7};
    static const float s1[12] = {0.1f, 0.7f, 0.001f, 0.049f, 0.2f, 0.2f,
                                 0.004f, 0.004f, 0, 0, 0, 0};
    static const float w2[6] = {0.9f, 1.9f, -1.1266337f, 0.30602926f, 7, -7};
    static const float s2[12] = {0.1f,  0.7f,  0.001f,    0.049f,    0.08f, 0.68f,
                                 0.004996f, 0.028996f, 0, 0, 0, 0};
    static const float w3[6] = {0.90451822f, 1.81605759f, -1.1266337f, 0.30602926f, 7, -7};
    static const float s3[12] = {-0.01f, 1.13f, 0.001999f, 0.073951f, 0.08f, 0.68f,
                                 0.004996f, 0.028996f, 0, 0, 0, 0};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "adam step 1");
    expect(c, w1, s1, 4, "adam step 1");
    step(c, 2, len_b, ids_b, NULL, 1, D_A, NULL, 0, 0, "adam step 2");
    expect(c, w2, s2, 4, "adam step 2");
    step(c, 2, LEN_C, IDS_C, NULL, 1, D_C, NULL, 0, 0, "adam step 3");
    expect(c, w3, s3, 4, "adam step 3 (global t)");
    ember_collection_destroy(c);

    float w[6], s[12] = {0};
    memcpy(w, W_INIT, sizeof w);
    ref_expect(o, 1, w, s, (float[]){1, 7}, (float[]){2, 2}, 4);
    ref_optimizer_apply(&o, 2, 2, w + 2, s + 4, (float[]){-1, 5});
    ref_optimizer_apply(&o, 3, 2, w, s, (float[]){-1, 5});
    CHECK_CLOSE(w, w3, 4, 1e-6, 1e-6, "ref adam step 3");
    CHECK_CLOSE(s, s3, 8, 1e-6, 1e-6, "ref adam state step 3");

    /* weight decay 1 with Adam: g' = g + w: row0 [2, 9], row1 [1, 2.5]; still
     * 0.1 sign(g') at t = 1: w = [0.9, 1.9 | -1.1, 0.4],
     * m = 0.1 g' = [0.2, 0.9 | 0.1, 0.25], v = 0.001 g'^2 = [0.004, 0.081 | 0.001, 0.00625] */
    o.weight_decay = 1.0f;
    c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const float s4[12] = {0.2f,  0.9f, 0.004f, 0.081f, 0.1f, 0.25f,
                                 0.001f, 0.00625f, 0, 0, 0, 0};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "adam wd step 1");
    expect(c, w1, s4, 4, "adam wd step 1");
    ember_collection_destroy(c);

    /* decoupled (AdamW), lr 0.1, weight decay 0.5: w *= 1 - 0.05 first, g
     * untouched, so m, v are step 1's s1 and the step is still 0.1 sign(g):
     * row0 [0.95 - 0.1, 1.9 - 0.1] = [0.85, 1.8], row1 [-0.95 - 0.1, 0.475 - 0.1]
     * = [-1.05, 0.375] */
    o.weight_decay = 0.5f;
    o.weight_decay_mode = EMBER_DECAY_DECOUPLED;
    c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const float w5[6] = {0.85f, 1.8f, -1.05f, 0.375f, 7, -7};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "adamw step 1");
    expect(c, w5, s1, 4, "adamw step 1");
    ember_collection_destroy(c);
    memcpy(w, W_INIT, sizeof w);
    memset(s, 0, sizeof s);
    ref_expect(o, 1, w, s, (float[]){1, 7}, (float[]){2, 2}, 4);
    CHECK_CLOSE(w, w5, 4, 1e-6, 1e-6, "ref adamw step 1");
    CHECK_CLOSE(s, s1, 8, 1e-6, 1e-6, "ref adamw state step 1");
}

static void test_momentum(void)
{
    /* lr 0.1, momentum 0.9: b = 0.9 b + g; heavy ball w -= 0.1 b, Nesterov
     * w -= 0.1 (g + 0.9 b).  Step 1 (batch A): g(row0) = [1, 7], g(row1) = [2, 2]
     *   heavy ball: b = g; w0 = [0.9, 1.3], w1 = [-1.2, 0.3]
     *   Nesterov:   b = g; w0 = [1 - 0.19, 2 - 1.33] = [0.81, 0.67],
     *               w1 = [-1 - 0.38, 0.5 - 0.38] = [-1.38, 0.12]
     * step 2 (batch C: bag {0} alone, g(row0) = [-1, 5]; row 1 untouched keeps
     * b and w, lazily):  b0 = 0.9 [1, 7] + [-1, 5] = [-0.1, 11.3]
     *   heavy ball: w0 = [0.9 + 0.01, 1.3 - 1.13] = [0.91, 0.17]
     *   Nesterov:   w0 = [0.81 + 0.109, 0.67 - 1.517] = [0.919, -0.847]
     *               (g + 0.9 b = [-1.09, 15.17]) */
    static const float s1[6] = {1, 7, 2, 2, 0, 0}, s2[6] = {-0.1f, 11.3f, 2, 2, 0, 0};
    static const float hb1[6] = {0.9f, 1.3f, -1.2f, 0.3f, 7, -7}, hb2[6] = {0.91f, 0.17f, -1.2f, 0.3f, 7, -7};
    static const float nv1[6] = {0.81f, 0.67f, -1.38f, 0.12f, 7, -7}, nv2[6] = {0.919f, -0.847f, -1.38f, 0.12f, 7, -7};
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        ember_optimizer o = ember_optimizer_default(EMBER_OPT_MOMENTUM);
        o.lr = 0.1f;
        o.momentum = 0.9f;
        o.nesterov = nesterov;
        two_steps(o, W_INIT, nesterov ? nv1 : hb1, s1, nesterov ? nv2 : hb2, s2, 2, nesterov ? "nesterov" : "momentum");
    }
}

static void test_ftrl(void)
{
    /* lr (alpha) 0.5, beta 1, l1 0.5, l2 0.1, lr_power -0.5; z = n = 0.
     * step 1 (batch A): row0 g = [1, 7]: n = [1, 49], sigma = sqrt(n) / 0.5 = [2, 14],
     *   z = g - sigma w = [1 - 2*1, 7 - 14*2] = [-1, -21];
     *   w = -(z - sign(z) 0.5) / ((1 + sqrt n) / 0.5 + 0.1) = [0.5 / 4.1, 20.5 / 16.1]
     *     = [0.12195122, 1.27329193]
     *   row1 g = [2, 2]: n = [4, 4], sigma = [4, 4], z = [2 + 4, 2 - 2] = [6, 0];
     *   w = [-5.5 / 6.1, 0 (|z| <= l1)] = [-0.90163934, 0]
     * step 2 (batch C: bag {0}, g(row0) = [-1, 5]): n = [2, 74],
     *   sigma = [(sqrt2 - 1) / 0.5, (sqrt74 - 7) / 0.5] = [0.82842712, 3.20465053],
     *   z = [-1 - 1 - 0.82842712*0.12195122, -21 + 5 - 3.20465053*1.27329193]
     *     = [-2.10102770, -20.08045565];
     *   w = [1.60102770 / ((1 + sqrt2)/0.5 + 0.1), 19.58045565 / ((1 + sqrt74)/0.5 + 0.1)]
     *     = [1.60102770 / 4.92842712, 19.58045565 / 19.30465053] = [0.32485571, 1.01428698];
     *   row 1 keeps w = [-0.90163934, 0], exactly 0 in its second column. */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_FTRL);
    o.lr = 0.5f;
    o.beta = 1.0f;
    o.l1 = 0.5f;
    o.l2 = 0.1f;
    ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
    if (!c)
        return;
    static const float w1[6] = {0.12195122f, 1.27329193f, -0.90163934f, 0, 7, -7};
    static const float s1[12] = {-1, -21, 1, 49, 6, 0, 4, 4, 0, 0, 0, 0};
    static const float w2[6] = {0.32485571f, 1.01428698f, -0.90163934f, 0, 7, -7};
    static const float s2[12] = {-2.10102770f, -20.08045565f, 2, 74, 6, 0, 4, 4, 0, 0, 0, 0};
    step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "ftrl step 1");
    expect(c, w1, s1, 4, "ftrl step 1");
    step(c, 2, LEN_C, IDS_C, NULL, 1, D_C, NULL, 0, 0, "ftrl step 2");
    expect(c, w2, s2, 4, "ftrl step 2");
    float wz[6];
    CHECK(ember_table_read(c, 0, 0, 3, wz) == EMBER_OK);
    CHECK_MSG(wz[3] == 0.0f, "ftrl: a weight with |z| <= l1 is %g, not exactly 0", (double)wz[3]);
    ember_collection_destroy(c);

    float w[6], s[12] = {0};
    memcpy(w, W_INIT, sizeof w);
    ref_expect(o, 1, w, s, (float[]){1, 7}, (float[]){2, 2}, 4);
    ref_optimizer_apply(&o, 2, 2, w, s, (float[]){-1, 5});
    CHECK_CLOSE(w, w2, 4, 1e-6, 1e-6, "ref ftrl step 2");
    CHECK_CLOSE(s, s2, 8, 1e-6, 1e-6, "ref ftrl state step 2");
}

/* FTRL on a row whose n is infinite (half state past its range, fp16's
 * 65504): no step from sigma (inf - inf is not taken), z += g, and the
 * weight 0 for every lr_power, not nan. */
static void test_ftrl_infinite_n(void)
{
    static const float lr_powers[2] = {-0.5f, -0.75f};
    for (int i = 0; i < 2; i++) {
        ember_optimizer o = ember_optimizer_default(EMBER_OPT_FTRL);
        o.lr = 0.5f;
        o.lr_power = lr_powers[i];
        ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
        if (!c)
            return;
        float st[12] = {0}, w[6], s[12];
        for (int k = 0; k < 12; k++)
            st[k] = k % 4 >= 2 ? INFINITY : 0.0f; /* rows' n: infinite; z: 0 */
        CHECK(ember_table_write_state(c, 0, 0, 3, st) == EMBER_OK);
        step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, "ftrl, infinite n");
        CHECK(ember_table_read(c, 0, 0, 3, w) == EMBER_OK && ember_table_read_state(c, 0, 0, 3, s) == EMBER_OK);
        for (int k = 0; k < 4; k++)
            CHECK_MSG(w[k] == 0.0f, "ftrl lr_power %g, infinite n: w[%d] = %g, not 0", (double)o.lr_power, k,
                      (double)w[k]);
        const float z_want[4] = {1, 7, 2, 2}; /* z = g */
        for (int k = 0; k < 4; k++)
            CHECK_MSG(s[(k / 2) * 4 + k % 2] == z_want[k], "ftrl lr_power %g, infinite n: z[%d] = %g, want %g",
                      (double)o.lr_power, k, (double)s[(k / 2) * 4 + k % 2], (double)z_want[k]);
        ember_collection_destroy(c);

        float rw[2] = {1, 2}, rs[4] = {0, 0, INFINITY, INFINITY};
        ref_optimizer_apply(&o, 1, 2, rw, rs, (float[]){1, 7});
        CHECK_MSG(rw[0] == 0.0f && rw[1] == 0.0f && rs[0] == 1.0f && rs[1] == 7.0f,
                  "ref ftrl lr_power %g, infinite n: w %g %g z %g %g", (double)o.lr_power, (double)rw[0],
                  (double)rw[1], (double)rs[0], (double)rs[1]);
    }
}

static void test_rowwise_adam(void)
{
    /* lr 0.1, betas (0.9, 0.999), eps 1e-8; state per row [m0, m1, v].
     * step 1 (batch A, t = 1): m = 0.1 g, v = 0.001 mean(g^2), so
     *   m / (1 - 0.9) = g and v / (1 - 0.999) = mean(g^2):
     *   row0 mean = (1 + 49) / 2 = 25 -> w0 = [1, 2] - 0.1 [1, 7] / 5 = [0.98, 1.86]
     *   row1 mean = 4               -> w1 = [-1, 0.5] - 0.1 [2, 2] / 2 = [-1.1, 0.4]
     *   state: row0 [0.1, 0.7, 0.025], row1 [0.2, 0.2, 0.004]
     * step 2 (batch C, t = 2, g(row0) = [-1, 5]): m0 = [0.09 - 0.1, 0.63 + 0.5]
     *   = [-0.01, 1.13], v0 = 0.999 * 0.025 + 0.001 * 13 = 0.037975;
     *   w0 -= 0.1 m0 / 0.19 / (sqrt(0.037975 / 0.001999) + 1e-8)
     *   = [0.98120755, 1.7235472]; row 1 as it was. */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_ROWWISE_ADAM);
    o.lr = 0.1f;
    static const float w1[6] = {0.98f, 1.86f, -1.1f, 0.4f, 7, -7};
    static const float s1[9] = {0.1f, 0.7f, 0.025f, 0.2f, 0.2f, 0.004f, 0, 0, 0};
    static const float w2[6] = {0.98120755f, 1.7235472f, -1.1f, 0.4f, 7, -7};
    static const float s2[9] = {-0.01f, 1.13f, 0.037975f, 0.2f, 0.2f, 0.004f, 0, 0, 0};
    two_steps(o, W_INIT, w1, s1, w2, s2, 3, "rowwise adam");
}

/* W_INIT with row 1 at zeros: LAMB's and LARS's trust ratio is then 1 (|w| = 0). */
static const float W_ROW1_ZERO[6] = {1, 2, 0, 0, 7, -7};

static void test_lamb(void)
{
    /* lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.5 decoupled (into
     * r, FBGEMM's form); row 1 starts at zeros.  Step 1 (t = 1): the
     * bias-corrected m and v are g and g^2, so r = g / (|g| + eps) + 0.5 w:
     *   row0 r = [1, 1] + [0.5, 1] = [1.5, 2], |w| = sqrt 5, |r| = 2.5,
     *   w0 -= 0.1 * (sqrt5 / 2.5) r = [0.86583592, 1.8211146]
     *   row1 |w| = 0: ratio 1, w1 = -0.1 [1, 1] = [-0.1, -0.1]
     *   state: row0 m = [0.1, 0.7], v = [0.001, 0.049]; row1 m = [0.2, 0.2],
     *   v = [0.004, 0.004]
     * step 2 (batch C, t = 2): m0 = [-0.01, 1.13], v0 = [0.001999, 0.073951],
     *   r and the ratio again from them: w0 = [0.82602704, 1.6234367]. */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_LAMB);
    o.lr = 0.1f;
    o.weight_decay = 0.5f;
    o.weight_decay_mode = EMBER_DECAY_DECOUPLED;
    static const float w1[6] = {0.86583592f, 1.8211146f, -0.1f, -0.1f, 7, -7};
    static const float s1[12] = {0.1f, 0.7f, 0.001f, 0.049f, 0.2f, 0.2f, 0.004f, 0.004f, 0, 0, 0, 0};
    static const float w2[6] = {0.82602704f, 1.6234367f, -0.1f, -0.1f, 7, -7};
    static const float s2[12] = {-0.01f, 1.13f, 0.001999f, 0.073951f, 0.2f, 0.2f, 0.004f, 0.004f, 0, 0, 0, 0};
    two_steps(o, W_ROW1_ZERO, w1, s1, w2, s2, 4, "lamb");
}

static void test_lars(void)
{
    /* lr 0.1, eta 0.5, momentum 0.9, weight decay 0.1 (L2: FBGEMM's LARS_SGD);
     * row 1 starts at zeros.  Step 1: row0 |w| = sqrt5, |g| = sqrt50,
     *   q = 0.5 sqrt5 / (sqrt50 + 0.1 sqrt5) = 0.15325...,
     *   b = 0.1 q ([1, 7] + 0.1 [1, 2]) = [0.016859387, 0.11035235],
     *   w0 = [0.98314061, 1.8896477]
     *   row1 |w| = 0: q = 1, b = 0.1 [2, 2], w1 = [-0.2, -0.2]
     * step 2 (batch C, g(row0) = [-1, 5]): q from the new w0,
     *   b0 = 0.9 b0 + 0.1 q (g + 0.1 w0) = [-0.0029051676, 0.20335478],
     *   w0 = [0.98604578, 1.6862929]. */
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_LARS);
    o.lr = 0.1f;
    o.eta = 0.5f;
    o.weight_decay = 0.1f;
    static const float w1[6] = {0.98314061f, 1.8896477f, -0.2f, -0.2f, 7, -7};
    static const float s1[6] = {0.016859387f, 0.11035235f, 0.2f, 0.2f, 0, 0};
    static const float w2[6] = {0.98604578f, 1.6862929f, -0.2f, -0.2f, 7, -7};
    static const float s2[6] = {-0.0029051676f, 0.20335478f, 0.2f, 0.2f, 0, 0};
    two_steps(o, W_ROW1_ZERO, w1, s1, w2, s2, 2, "lars");
}

/* Row-wise Adam's half state is refused, with a message that names it. */
static void test_refusals(void)
{
    test_config *tc = test_config_new(1, 1);
    tc->tables[0].rows = 3;
    tc->tables[0].dim = 2;
    tc->tables[0].optimizer = ember_optimizer_default(EMBER_OPT_ROWWISE_ADAM);
    tc->tables[0].state_precision = EMBER_PRECISION_BF16;
    ember_collection *c = NULL;
    int rc = ember_collection_create(&tc->cfg, &c);
    const char *msg = ember_errmsg(NULL);
    CHECK_MSG(rc == EMBER_EINVAL && c == NULL, "row-wise Adam with bf16 state: created (rc %d)", rc);
    CHECK_MSG(strstr(msg, "row-wise Adam") && strstr(msg, "bf16"), "the message does not name it: %s", msg);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void test_clipping(void)
{
    /* SGD, lr 0.1.  Batch A: g(row0) = [1, 7], g(row1) = [2, 2].
     * clip_value 3: row0 g = [1, 3] (one element clipped), row1 [2, 2] ->
     *   w = [0.9, 1.7 | -1.2, 0.3]; counts: 1 value, 0 rows.
     * clip_norm 2: row0 |g| = sqrt(50) -> g * 2/sqrt(50) = [0.28284271, 1.97989899],
     *   row1 |g| = sqrt(8) -> [1.41421356, 1.41421356]; both rows scaled ->
     *   w = [0.97171573, 1.80201010 | -1.14142136, 0.35857864]; counts: 0, 2.
     * Both (value first, then norm): row0 [1, 3] has norm sqrt(10) > 2 ->
     *   [0.63245553, 1.89736660]; row1 as above -> w = [0.93675445, 1.81026334 |
     *   -1.14142136, 0.35857864]; counts 1, 2. */
    static const float want[3][6] = {{0.9f, 1.7f, -1.2f, 0.3f, 7, -7},
                                     {0.97171573f, 1.80201010f, -1.14142136f, 0.35857864f, 7, -7},
                                     {0.93675445f, 1.81026334f, -1.14142136f, 0.35857864f, 7, -7}};
    static const int64_t counts[3][2] = {{1, 0}, {0, 2}, {1, 2}};
    for (int i = 0; i < 3; i++) {
        ember_optimizer o = ember_optimizer_default(EMBER_OPT_SGD);
        o.lr = 0.1f;
        o.clip_value = i != 1 ? 3.0f : 0.0f;
        o.clip_norm = i != 0 ? 2.0f : 0.0f;
        ember_collection *c = make(o, EMBER_COMBINER_SUM, 0);
        if (!c)
            return;
        char what[64];
        snprintf(what, sizeof what, "clip case %d", i);
        step(c, 2, LEN_A, IDS_A, NULL, 3, D_A, NULL, 0, 0, what);
        expect(c, want[i], NULL, 0, what);
        ember_stats st;
        ember_collection_stats(c, &st);
        CHECK_MSG(st.clipped_values == counts[i][0] && st.clipped_rows == counts[i][1],
                  "%s: %lld values and %lld rows clipped, want %lld and %lld", what, (long long)st.clipped_values,
                  (long long)st.clipped_rows, (long long)counts[i][0], (long long)counts[i][1]);
        ember_collection_destroy(c);
        float w[6];
        memcpy(w, W_INIT, sizeof w);
        ref_expect(o, 1, w, NULL, (float[]){1, 7}, (float[]){2, 2}, 0);
        CHECK_CLOSE(w, want[i], 4, 1e-6, 1e-6, "ref clipping");
    }
}

static void test_combiner_scales(void)
{
    ember_optimizer o = ember_optimizer_default(EMBER_OPT_SGD);
    o.lr = 0.1f;
    static const int32_t len1[1] = {2}, len3[1] = {3};
    static const int64_t ids01[2] = {0, 1}, ids001[3] = {0, 0, 1}, ids101[3] = {1, 0, 1};

    /* MEAN, weights 1 and 3: pooled = ([1,2] + 3*[-1,0.5]) / 4 = [-0.5, 0.875];
     * d = [4, 8]: g0 = 1/4*[4,8] = [1,2], g1 = 3/4*[4,8] = [3,6]
     * -> w0 = [0.9, 1.8], w1 = [-1.3, -0.1] */
    ember_collection *c = make(o, EMBER_COMBINER_MEAN, 0);
    if (c) {
        static const float out[2] = {-0.5f, 0.875f}, w[6] = {0.9f, 1.8f, -1.3f, -0.1f, 7, -7};
        step(c, 1, len1, ids01, (float[]){1, 3}, 2, (float[]){4, 8}, out, 2, 0, "mean weighted");
        expect(c, w, NULL, 0, "mean weighted");
        ember_collection_destroy(c);
    }
    /* SQRTN, weights 3 and 4 (sqrt(9+16) = 5): pooled = ([3,6] + [-4,2]) / 5 = [-0.2, 1.6];
     * d = [5, 10]: g0 = 3/5*[5,10] = [3,6], g1 = 4/5*[5,10] = [4,8]
     * -> w0 = [0.7, 1.4], w1 = [-1.4, -0.3] */
    c = make(o, EMBER_COMBINER_SQRTN, 0);
    if (c) {
        static const float out[2] = {-0.2f, 1.6f}, w[6] = {0.7f, 1.4f, -1.4f, -0.3f, 7, -7};
        step(c, 1, len1, ids01, (float[]){3, 4}, 2, (float[]){5, 10}, out, 2, 0, "sqrtn weighted");
        expect(c, w, NULL, 0, "sqrtn weighted");
        ember_collection_destroy(c);
    }
    /* MEAN, unweighted bag {0, 0, 1}, with and without dedup (same maths):
     * pooled = (2*[1,2] + [-1,0.5]) / 3 = [1/3, 1.5]; d = [3, 6]:
     * g0 = 2 * 1/3 * [3,6] = [2,4], g1 = [1,2] -> w0 = [0.8, 1.6], w1 = [-1.1, 0.3] */
    for (int dedup = 0; dedup < 2; dedup++) {
        c = make(o, EMBER_COMBINER_MEAN, dedup);
        if (c) {
            static const float out[2] = {0.33333333f, 1.5f};
            static const float w[6] = {0.8f, 1.6f, -1.1f, 0.3f, 7, -7};
            step(c, 1, len3, ids001, NULL, 3, (float[]){3, 6}, out, 2, 0, "mean duplicates");
            expect(c, w, NULL, 0, dedup ? "mean duplicates, dedup" : "mean duplicates");
            ember_collection_destroy(c);
        }
    }
    /* NONE: ids [1, 0, 1], weights [1, 2, -1]:
     * sequence = [row1 | 2 row0 | -row1] = [-1, 0.5 | 2, 4 | 1, -0.5];
     * d_sequence = [1,1 | 1,0 | 2,2]: g1 = [1,1] - [2,2] = [-1,-1], g0 = 2*[1,0] = [2,0]
     * -> w0 = [0.8, 2], w1 = [-0.9, 0.6] */
    for (int dedup = 0; dedup < 2; dedup++) {
        c = make(o, EMBER_COMBINER_NONE, dedup);
        if (c) {
            static const float out[6] = {-1, 0.5f, 2, 4, 1, -0.5f};
            static const float w[6] = {0.8f, 2, -0.9f, 0.6f, 7, -7};
            CHECK(ember_pooled_width(c) == 0);
            ember_batch b = {1, 1, len3, ids101, (float[]){1, 2, -1}, 3};
            CHECK(ember_sequence_size(c, &b) == 6);
            step(c, 1, len3, ids101, (float[]){1, 2, -1}, 3, (float[]){1, 1, 1, 0, 2, 2}, out, 6,
                 1, "none weighted");
            expect(c, w, NULL, 0, "none weighted");
            ember_collection_destroy(c);
        }
    }
    /* Divisor 0: MEAN with weights 1 and -1, SQRTN with weights 0.  The header
     * says the pooled row is zero (never NaN); the backward of a constant zero
     * output is a zero gradient (ambiguity resolved this way: scale = 0 when
     * the divisor is 0), but both rows still occur in the batch, so they are
     * touched and weight decay 0.5 applies: w -= 0.1 * 0.5 * w, i.e. w *= 0.95:
     * row0 = [0.95, 1.9], row1 = [-0.95, 0.475]. */
    o.weight_decay = 0.5f;
    for (int sq = 0; sq < 2; sq++) {
        c = make(o, sq ? EMBER_COMBINER_SQRTN : EMBER_COMBINER_MEAN, 0);
        if (c) {
            static const float out[2] = {0, 0}, w[6] = {0.95f, 1.9f, -0.95f, 0.475f, 7, -7};
            step(c, 1, len1, ids01, sq ? (float[]){0, 0} : (float[]){1, -1}, 2, (float[]){4, 8},
                 out, 2, 0, sq ? "sqrtn divisor 0" : "mean divisor 0");
            expect(c, w, NULL, 0, sq ? "sqrtn divisor 0" : "mean divisor 0");
            ember_collection_destroy(c);
        }
    }
}

/* The reference's limit semantics (no library call): an id with keep = 0
 * contributes a zero row but still counts in the divisor, and its row is
 * not touched by backward.  MEAN bag {0 (w 1), 1 (w 3)} with id 1 dropped:
 * pooled = 1*[1, 2] / 4 = [0.25, 0.5]; d = [4, 8]: g0 = 1/4*[4, 8] = [1, 2],
 * SGD lr 0.1, weight decay 0.5: row0 = [1, 2] - 0.1*([1, 2] + 0.5*[1, 2])
 * = [0.85, 1.7]; row1 keeps [-1, 0.5] although weight decay would move it. */
static void ref_keep(void)
{
    test_config *tc = test_config_new(1, 1);
    tc->tables[0].rows = 3;
    tc->tables[0].dim = 2;
    tc->tables[0].optimizer.lr = 0.1f;
    tc->tables[0].optimizer.weight_decay = 0.5f;
    tc->features[0].combiner = EMBER_COMBINER_MEAN;
    ref_model m;
    CHECK(ref_model_init(&m, &tc->cfg) == 0);
    memcpy(m.tables[0].w, W_INIT, sizeof W_INIT);
    static const int32_t len[1] = {2};
    static const int64_t ids[2] = {0, 1};
    static const float wts[2] = {1, 3}, d[2] = {4, 8}, want_p[2] = {0.25f, 0.5f};
    static const float want_w[6] = {0.85f, 1.7f, -1, 0.5f, 7, -7};
    static const uint8_t keep[2] = {1, 0};
    ember_batch b = {1, 1, len, ids, wts, 2};
    float p[2];
    ref_forward(&m, &b, keep, p, NULL);
    CHECK_CLOSE(p, want_p, 2, 1e-6, 1e-6, "ref keep forward");
    ref_backward(&m, &b, keep, d, NULL);
    CHECK_CLOSE(m.tables[0].w, want_w, 6, 1e-6, 1e-6, "ref keep backward");
    CHECK(m.step == 1);
    ref_model_free(&m);
    test_config_free(tc);
}

int main(void)
{
    ref_keep();
    test_sgd();
    test_adagrad();
    test_rowwise();
    test_adam();
    test_momentum();
    test_ftrl();
    test_ftrl_infinite_n();
    test_rowwise_adam();
    test_lamb();
    test_lars();
    test_refusals();
    test_clipping();
    test_combiner_scales();
    return check_report("test_optim");
}
