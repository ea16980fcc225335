/*
 * mpi_schedule.c: the split forward's schedules (ember_forward_begin /
 * _progress / _end, docs/distributed.md "Schedules").  Run under mpirun
 * -np 1..4.
 *
 * Every rank draws the same random config (mpi_random_config: the seven
 * placement modes, every exchange, the four optimizers) and STEPS global
 * batches, and takes its slice of each.  Four distributed collections of
 * the config train on them side by side, each with upstream gradients
 * d = g + 0.5 * (its own outputs), so that what a forward read flows into
 * the tables:
 *   BLK      schedule BLOCKING, plain ember_forward / ember_backward;
 *   SPL      schedule BLOCKING, pipelined: batch i+1 begun before batch i's
 *            backward, ended after it;
 *   OVL      schedule OVERLAP, pipelined, with ember_forward_progress calls
 *            and a collective table read while batch i+1 is begun;
 *   STL      schedule STALE, pipelined.
 * Checked every step: SPL's and OVL's outputs are BLK's bit for bit
 * (memcmp), and after every backward their tables and optimizer state are
 * BLK's bit for bit (mpi_snap_same), whatever the placement or exchange.
 * STL against the naive reference of the stale rule: src/ref over the
 * global batch, where batch 0 reads the initial tables and batch i+1 reads
 * the tables as they were before batch i's update (read from STL at that
 * moment, so that rounding does not accumulate over steps); outputs within
 * test_forward's tolerance; after each update, tables and state within
 * rel 1e-4 of the reference's update of those same tables with gradients
 * from its own outputs.  So that the rule
 * is seen to matter, the same reference read fresh must differ from STL's
 * outputs somewhere in the run (checked over all trials on rank 0).
 * In a world of one, half the trials run through the exchange code (the
 * internal flag exchange_always), the other half the local path.
 * Fixed cases: begin twice, end without begin and ember_forward while a
 * batch is begun answer EMBER_ESTATE; a begin that fails (an id out of
 * range on one rank) leaves the current batch's backward working; the
 * SSD tier with STALE and a dynamic table with OVERLAP are refused at
 * create, naming the table, and the split forward refuses a dynamic table
 * under BLOCKING; a collection destroyed with a batch begun completes its
 * exchanges first.
 */
#include "collection/collection.h" /* exchange_always: a world of one through the exchange code */
#include "mpi_util.h"

#define TRIALS 28
#define STEPS 4

enum { BLK, SPL, OVL, STL, NCOLL };
static const char *const coll_names[] = {"blocking", "split blocking", "overlap", "stale"};
static const ember_schedule coll_schedule[] = {EMBER_SCHEDULE_BLOCKING, EMBER_SCHEDULE_BLOCKING,
                                               EMBER_SCHEDULE_OVERLAP, EMBER_SCHEDULE_STALE};
static int64_t stale_differs; /* elements where the stale rule changed an output */

static void copy_ref(ref_model *dst, const ref_model *src)
{
    for (int32_t t = 0; t < src->cfg.num_tables; t++) {
        const ember_table_config *tc = &src->cfg.tables[t];
        int64_t per = ember_state_floats(tc->optimizer.kind, tc->dim);
        memcpy(dst->tables[t].w, src->tables[t].w, sizeof(float) * (size_t)(tc->rows * tc->dim));
        if (per)
            memcpy(dst->tables[t].state, src->tables[t].state, sizeof(float) * (size_t)(tc->rows * per));
    }
}

/* The magnitude of batch i's gradient, per table element: ref_backward from
 * zero tables with SGD at lr -1 on |d| and |weights|, so that mag->w holds
 * G = sum_i |coef_i| |d_i|, and the occurrences N of every row.  Any float
 * summation order of the N terms (the library's per rank and exchange, the
 * reference's by sample) is within N 2^-24 G of the exact sum, and G may be
 * far above |g|: a 1-row table's 38 terms of d = g + 0.5 out in [-1, 1)
 * summed to 0.0012 with G = 25, so the two orders differed by 7e-4 of g. */
static void grad_magnitude(const ember_collection_config *cfg, const ember_batch *gb, const float *dp, int64_t np,
                           const float *ds, int64_t ns, ref_model *mag, int64_t **count)
{
    ember_table_config *tc = malloc((size_t)cfg->num_tables * sizeof *tc);
    float *adp = malloc((size_t)(np + 1) * sizeof(float)), *ads = malloc((size_t)(ns + 1) * sizeof(float));
    float *w = malloc((size_t)(gb->num_ids + 1) * sizeof(float));
    if (!tc || !adp || !ads || !w)
        abort();
    ember_collection_config c = *cfg;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        tc[t] = cfg->tables[t];
        memset(&tc[t].optimizer, 0, sizeof tc[t].optimizer);
        tc[t].optimizer.kind = EMBER_OPT_SGD;
        tc[t].optimizer.lr = -1.0f;
    }
    c.tables = tc;
    if (ref_model_init(mag, &c) != 0)
        abort();
    for (int32_t t = 0; t < cfg->num_tables; t++)
        memset(mag->tables[t].w, 0, sizeof(float) * (size_t)(tc[t].rows * tc[t].dim));
    for (int64_t k = 0; k < np; k++)
        adp[k] = fabsf(dp[k]);
    for (int64_t k = 0; k < ns; k++)
        ads[k] = fabsf(ds[k]);
    for (int64_t k = 0; k < gb->num_ids; k++)
        w[k] = gb->weights ? fabsf(gb->weights[k]) : 1.0f;
    ember_batch ab = *gb;
    ab.weights = w;
    ref_backward(mag, &ab, NULL, adp, ads);
    for (int32_t t = 0; t < cfg->num_tables; t++)
        count[t] = calloc((size_t)cfg->tables[t].rows, sizeof *count[t]);
    int64_t k = 0;
    for (int32_t f = 0; f < gb->num_features; f++) {
        int32_t t = cfg->features[f].table;
        for (int32_t s = 0; s < gb->batch_size; s++)
            for (int32_t p = 0; p < gb->lengths[(int64_t)f * gb->batch_size + s]; p++, k++)
                if (gb->ids[k] >= 0 && gb->ids[k] < cfg->tables[t].rows)
                    count[t][gb->ids[k]]++;
    }
    free(tc), free(adp), free(ads), free(w);
}

/* STL's tables against the reference's (collective): within rel 1e-4, plus
 * what the summation order may move g (N 2^-24 G, grad_magnitude) carried
 * through the optimizer: a step moves w by at most lr (SGD) or lr / eps
 * (Adagrad, Adam; twice that for row-wise Adagrad, whose denominator holds
 * the row's other columns) per unit of g, and the state (g^2, Adam's m and
 * v) by at most (2 G + 1) per unit.  Momentum moves w by at most lr (1 +
 * momentum) per unit.  FTRL (from zeros, util.h) moves z by 1 + |w| s per
 * unit, s bounding how far sigma moves per unit of g (2q max(1, G)^(2q-1) /
 * lr for n^q, q = -lr_power in [1/2, 1]); w moves by lr / beta per unit of
 * z. */
static void compare_with_ref(const ember_collection *c, const ref_model *m, const ref_model *mag,
                             int64_t *const *count, const char *what)
{
    for (int32_t t = 0; t < m->cfg.num_tables; t++)
        for (int st = 0; st < 2; st++) {
            const ember_table_config *tc = &m->cfg.tables[t];
            const ember_optimizer *o = &tc->optimizer;
            int64_t per = st ? ember_state_floats(o->kind, tc->dim) : tc->dim;
            double slope = o->kind == EMBER_OPT_SGD        ? o->lr
                           : o->kind == EMBER_OPT_MOMENTUM ? o->lr * (1.0 + o->momentum)
                           : o->kind == EMBER_OPT_FTRL     ? o->lr / o->beta
                                                            : (o->kind == EMBER_OPT_ROWWISE_ADAGRAD || o->kind == EMBER_OPT_ROWWISE_ADAM ? 2.0 : 1.0) * o->lr / o->eps;
            float *got = test_read_table(c, &m->cfg, t, st);
            const float *want = st ? m->tables[t].state : m->tables[t].w;
            int64_t bad = -1;
            double tol = 0.0;
            for (int64_t i = 0; got && i < tc->rows * per && bad < 0; i++) {
                int64_t row = i / per, col = (i % per) % tc->dim;
                double g = mag->tables[t].w[row * tc->dim + col];
                if (per < tc->dim) /* row-wise: the row's largest */
                    for (int32_t k = 0; k < tc->dim; k++)
                        g = fmax(g, mag->tables[t].w[row * tc->dim + k]);
                double dg = (double)count[t][row] * 0x1p-24 * g;
                if (o->kind == EMBER_OPT_FTRL) { /* z's error, carried into w too */
                    double q = -o->lr_power, s = 2.0 * q * pow(fmax(1.0, g), 2.0 * q - 1.0) / o->lr;
                    dg *= 1.0 + fabs((double)m->tables[t].w[row * tc->dim + col]) * s;
                }
                tol = 1e-4 * fmax(fabs((double)want[i]), 1e-2) + (st ? (2.0 * g + 1.0) : slope) * dg;
                if (!(fabs((double)got[i] - want[i]) <= tol))
                    bad = i;
            }
            MCHECK(got && bad < 0, "%s: stale table %s (%s) %s: row %lld col %lld got %.9g, the stale rule's "
                   "reference %.9g (tolerance %.3g)", what, tc->name, mpi_placement_name(tc),
                   st ? "state" : "values", (long long)(bad >= 0 ? bad / per : -1),
                   (long long)(bad >= 0 ? bad % per : -1), got && bad >= 0 ? got[bad] : 0.0,
                   bad >= 0 ? want[bad] : 0.0, tol);
            free(got);
        }
}

typedef struct step_data {
    test_batch gb, lb;
    int32_t *start; /* [W + 1] */
    mpi_grads g;
    float *lds;        /* this rank's slice of g.ds */
    int64_t lP, lS, gS;
} step_data;

static void trial_run(test_rng *r, int trial, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    test_config *tc = mpi_random_config(r, trial, world);
    const ember_collection_config *cfg = &tc->cfg;
    char desc[400];
    mpi_describe(desc, sizeof desc, trial, tc);
    mpi_context("%s", desc);
    int64_t Wp = test_pooled_width(cfg);

    step_data sd[STEPS];
    for (int i = 0; i < STEPS; i++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = (int32_t)test_range(r, 0, 41);
        o.max_len = (int32_t)test_range(r, 0, 7);
        o.empty_frac = 0.2;
        o.dup_heavy = test_range(r, 0, 4) == 0;
        o.weighted = (int)test_range(r, 0, 2);
        o.invalid_frac = cfg->bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch_make(r, cfg, &o, &sd[i].gb);
        sd[i].start = mpi_starts();
        mpi_split(r, sd[i].gb.b.batch_size, W, (mpi_split_kind)((trial + i) % 4), sd[i].start);
        test_sub_batch(&sd[i].gb.b, sd[i].start[rank], sd[i].start[rank + 1], &sd[i].lb);
        mpi_grads_make(r, cfg, &sd[i].gb.b, -1.0f, &sd[i].g);
        sd[i].lP = (int64_t)sd[i].lb.b.batch_size * Wp;
        sd[i].lS = test_sequence_size(cfg, &sd[i].lb.b);
        sd[i].gS = test_sequence_size(cfg, &sd[i].gb.b);
        sd[i].lds = mpi_nan_buffer(sd[i].lS);
        mpi_local_sequence(cfg, &sd[i].gb.b, sd[i].start[rank], sd[i].start[rank + 1], sd[i].g.ds, sd[i].lds);
    }

    ember_collection *c[NCOLL];
    int made = 1;
    for (int k = 0; k < NCOLL; k++) {
        tc->cfg.schedule = coll_schedule[k];
        made &= (c[k] = mpi_create(&tc->cfg, coll_names[k])) != NULL;
    }
    tc->cfg.schedule = EMBER_SCHEDULE_BLOCKING;
    if (W == 1 && trial % 2) /* half the trials of a world of one run the chain of exchanges too */
        for (int k = 0; k < NCOLL; k++)
            if (c[k])
                c[k]->exchange_always = 1;
    ref_model m, prev;
    int have_ref = ref_model_init(&m, cfg) == 0 && ref_model_init(&prev, cfg) == 0;
    MCHECK(have_ref, "ref_model_init");
    float *out_p[NCOLL][STEPS], *out_s[NCOLL][STEPS];
    for (int k = 0; k < NCOLL; k++)
        for (int i = 0; i < STEPS; i++) {
            out_p[k][i] = mpi_nan_buffer(sd[i].lP);
            out_s[k][i] = mpi_nan_buffer(sd[i].lS);
        }
    if (!mpi_all(made && have_ref))
        goto done;

    /* batch 0: a plain forward, and begin + end with nothing in between */
    int rc = ember_forward(c[BLK], &sd[0].lb.b, out_p[BLK][0], out_s[BLK][0]);
    MCHECK(rc == EMBER_OK, "blocking forward 0: %s", ember_errmsg(c[BLK]));
    for (int k = SPL; k < NCOLL; k++) {
        int a = ember_forward_begin(c[k], &sd[0].lb.b, out_p[k][0], out_s[k][0]);
        int b = a == EMBER_OK ? ember_forward_end(c[k]) : a;
        MCHECK(b == EMBER_OK, "%s begin/end of batch 0: %s", coll_names[k], ember_errmsg(c[k]));
        rc |= b;
    }
    if (!mpi_all(rc == EMBER_OK))
        goto done;
    for (int i = 0; i < STEPS; i++) {
        char what[200];
        snprintf(what, sizeof what, "step %d (global B %d, local [%d, %d))", i, sd[i].gb.b.batch_size,
                 sd[i].start[rank], sd[i].start[rank + 1]);
        const ember_batch *gb = &sd[i].gb.b;
        int32_t lo = sd[i].start[rank], B = gb->batch_size;
        /* outputs of batch i: SPL and OVL are BLK's, bit for bit */
        for (int k = SPL; k <= OVL; k++) {
            int64_t dp = mpi_first_diff(out_p[k][i], out_p[BLK][i], sd[i].lP);
            int64_t ds = mpi_first_diff(out_s[k][i], out_s[BLK][i], sd[i].lS);
            MCHECK(dp < 0 && ds < 0, "%s: %s outputs differ from blocking's: pooled float %lld (%.9g vs %.9g), "
                   "sequence float %lld", what, coll_names[k], (long long)dp,
                   dp >= 0 ? out_p[k][i][dp] : 0.0, dp >= 0 ? out_p[BLK][i][dp] : 0.0, (long long)ds);
        }
        /* STL's outputs against the stale rule's reference (prev: the
         * tables before the last update; batch 0 reads the initial ones) */
        float *np_ = mpi_nan_buffer(B * Wp), *ns_ = mpi_nan_buffer(sd[i].gS);
        float *fp = mpi_nan_buffer(B * Wp), *fs = mpi_nan_buffer(sd[i].gS);
        float *mp = mpi_nan_buffer(B * Wp), *ms = mpi_nan_buffer(sd[i].gS);
        ref_model *read = i == 0 ? &m : &prev;
        ref_forward(read, gb, NULL, np_, ns_);
        ref_forward(&m, gb, NULL, fp, fs);
        test_ref_magnitude(read, gb, NULL, mp, ms);
        int32_t max_len = 0;
        for (int64_t e = 0; e < (int64_t)B * gb->num_features; e++)
            max_len = gb->lengths[e] > max_len ? gb->lengths[e] : max_len;
        double mtol = 1e-5 + 2.0 * max_len * 0x1p-24;
        float *want_s = mpi_nan_buffer(sd[i].lS), *mag_s = mpi_nan_buffer(sd[i].lS);
        float *fresh_s = mpi_nan_buffer(sd[i].lS);
        mpi_local_sequence(cfg, gb, lo, sd[i].start[rank + 1], ns_, want_s);
        mpi_local_sequence(cfg, gb, lo, sd[i].start[rank + 1], ms, mag_s);
        mpi_local_sequence(cfg, gb, lo, sd[i].start[rank + 1], fs, fresh_s);
        char msg[sizeof mpi_ctx_ + 400];
        snprintf(msg, sizeof msg, "[rank %d seed %llu] %s: %s: stale pooled vs the stale rule (src/ref)", rank,
                 (unsigned long long)mpi_seed_, mpi_ctx_, what);
        TEST_CHECK_CLOSE_MAG(out_p[STL][i], np_ + (int64_t)lo * Wp, mp + (int64_t)lo * Wp, sd[i].lP, 1e-5, mtol,
                             msg);
        snprintf(msg, sizeof msg, "[rank %d seed %llu] %s: %s: stale sequence vs the stale rule (src/ref)", rank,
                 (unsigned long long)mpi_seed_, mpi_ctx_, what);
        TEST_CHECK_CLOSE_MAG(out_s[STL][i], want_s, mag_s, sd[i].lS, 1e-5, mtol, msg);
        for (int64_t e = 0; e < sd[i].lP; e++) /* where a fresh read would differ */
            stale_differs += fabsf(out_p[STL][i][e] - fp[(int64_t)lo * Wp + e]) > 1e-3f;
        for (int64_t e = 0; e < sd[i].lS; e++)
            stale_differs += fabsf(out_s[STL][i][e] - fresh_s[e]) > 1e-3f;

        /* begin batch i+1 (pipelined collections) */
        int nxt = i + 1 < STEPS;
        rc = EMBER_OK;
        for (int k = SPL; k < NCOLL && nxt; k++) {
            int a = ember_forward_begin(c[k], &sd[i + 1].lb.b, out_p[k][i + 1], out_s[k][i + 1]);
            MCHECK(a == EMBER_OK, "%s: %s begin of batch %d: %s", what, coll_names[k], i + 1, ember_errmsg(c[k]));
            rc |= a;
        }
        if (!mpi_all(rc == EMBER_OK))
            break;
        for (int rep = 0; rep < 3; rep++)
            MCHECK(ember_forward_progress(c[OVL]) == EMBER_OK, "%s: progress: %s", what, ember_errmsg(c[OVL]));
        /* the tables batch i+1 read (STL's, before batch i's update), and
         * the reference's update starts from them: no drift accumulates */
        test_sync_ref(c[STL], &prev);
        copy_ref(&m, &prev);
        /* the dense work's stand-in: gradients from each one's outputs */
        for (int k = 0; k < NCOLL; k++) {
            float *dp = mpi_grads_of(sd[i].g.dp + (int64_t)lo * Wp, out_p[k][i], sd[i].lP);
            float *ds = mpi_grads_of(sd[i].lds, out_s[k][i], sd[i].lS);
            int a = ember_backward(c[k], dp, ds);
            MCHECK(a == EMBER_OK, "%s: %s backward: %s", what, coll_names[k], ember_errmsg(c[k]));
            rc |= a;
            free(dp), free(ds);
            if (k == OVL)
                MCHECK(ember_forward_progress(c[OVL]) == EMBER_OK, "%s: progress after backward", what);
        }
        /* the reference's update, from its own stale outputs */
        float *gdp = mpi_grads_of(sd[i].g.dp, np_, (int64_t)B * Wp), *gds = mpi_grads_of(sd[i].g.ds, ns_, sd[i].gS);
        ref_backward(&m, gb, NULL, gdp, gds);
        ref_model gmag;
        int64_t **count = malloc((size_t)cfg->num_tables * sizeof *count);
        grad_magnitude(cfg, gb, gdp, (int64_t)B * Wp, gds, sd[i].gS, &gmag, count);
        free(gdp), free(gds);
        free(np_), free(ns_), free(fp), free(fs), free(mp), free(ms), free(want_s), free(mag_s), free(fresh_s);
        if (!mpi_all(rc == EMBER_OK)) {
            ref_model_free(&gmag);
            for (int32_t t = 0; t < cfg->num_tables; t++)
                free(count[t]);
            free(count);
            break;
        }
        /* tables after the update, batch i+1 still begun (collective reads in between) */
        char when[260];
        for (int k = SPL; k <= OVL; k++) {
            snprintf(when, sizeof when, "%s, %s tables after backward against blocking's", what, coll_names[k]);
            mpi_snapshot s;
            mpi_snap(c[BLK], cfg, &s);
            mpi_snap_same(c[k], cfg, &s, when);
        }
        snprintf(when, sizeof when, "%s, after backward", what);
        compare_with_ref(c[STL], &m, &gmag, count, when);
        ref_model_free(&gmag);
        for (int32_t t = 0; t < cfg->num_tables; t++)
            free(count[t]);
        free(count);
        if (!nxt)
            break;
        rc = ember_forward(c[BLK], &sd[i + 1].lb.b, out_p[BLK][i + 1], out_s[BLK][i + 1]);
        MCHECK(rc == EMBER_OK, "%s: blocking forward %d: %s", what, i + 1, ember_errmsg(c[BLK]));
        for (int k = SPL; k < NCOLL; k++) {
            int a = ember_forward_end(c[k]);
            MCHECK(a == EMBER_OK, "%s: %s end of batch %d: %s", what, coll_names[k], i + 1, ember_errmsg(c[k]));
            rc |= a;
        }
        if (!mpi_all(rc == EMBER_OK))
            break;
    }
done:
    for (int k = 0; k < NCOLL; k++) {
        ember_collection_destroy(c[k]);
        for (int i = 0; i < STEPS; i++)
            free(out_p[k][i]), free(out_s[k][i]);
    }
    if (have_ref) {
        ref_model_free(&m);
        ref_model_free(&prev);
    }
    for (int i = 0; i < STEPS; i++) {
        test_batch_free(&sd[i].gb);
        test_batch_free(&sd[i].lb);
        mpi_grads_free(&sd[i].g);
        free(sd[i].lds);
        free(sd[i].start);
    }
    test_config_free(tc);
}

/* Calls out of order, a failed begin, refused configs. */
static void fixed_cases(ember_world *world)
{
    int32_t W = ember_world_size(world), rank = ember_world_rank(world);
    mpi_context("fixed: calls out of order");
    test_config *tc = test_config_new(1, 1);
    tc->tables[0].rows = 4 * W + 3;
    tc->tables[0].dim = 4;
    tc->cfg.world = world;
    tc->cfg.schedule = EMBER_SCHEDULE_OVERLAP;
    ember_collection *c = mpi_create(&tc->cfg, "overlap");
    if (mpi_all(c != NULL)) {
        int32_t len[2] = {1, 1};
        int64_t ids[2] = {rank, (rank + 1) % W}, bad_ids[2] = {rank, rank == W - 1 ? 1000000 : 0};
        ember_batch b = {2, 1, len, ids, NULL, 2}, bad = {2, 1, len, bad_ids, NULL, 2};
        float out[8], out2[8], d[8] = {0.5f, -0.25f, 1, 2, -1, 0.125f, 3, -2};
        MCHECK(ember_forward_end(c) == EMBER_ESTATE, "end without begin: %s", ember_errmsg(c));
        MCHECK(ember_forward(c, &b, out, NULL) == EMBER_OK, "forward: %s", ember_errmsg(c));
        /* the last rank's id is out of range: every rank's begin fails, the
         * current batch's backward still works */
        int a = ember_forward_begin(c, &bad, out2, NULL);
        MCHECK(a == EMBER_EINPUT && mpi_has_number(ember_errmsg(c), 1000000),
               "a begin with id 1000000 on rank %d: %s: %s", W - 1, ember_status_str(a), ember_errmsg(c));
        MCHECK(ember_forward_end(c) == EMBER_ESTATE, "end after a failed begin: %s", ember_errmsg(c));
        MCHECK(ember_forward_begin(c, &b, out2, NULL) == EMBER_OK, "begin: %s", ember_errmsg(c));
        MCHECK(ember_forward_begin(c, &b, out2, NULL) == EMBER_ESTATE, "begin twice: %s", ember_errmsg(c));
        MCHECK(ember_forward(c, &b, out, NULL) == EMBER_ESTATE, "forward while begun: %s", ember_errmsg(c));
        MCHECK(ember_backward(c, d, NULL) == EMBER_OK, "backward of the current batch: %s", ember_errmsg(c));
        MCHECK(ember_forward_end(c) == EMBER_OK, "end: %s", ember_errmsg(c));
        MCHECK(ember_backward(c, d, NULL) == EMBER_OK, "backward of the ended batch: %s", ember_errmsg(c));
        MCHECK(ember_backward(c, d, NULL) == EMBER_ESTATE, "a second backward: %s", ember_errmsg(c));
        /* destroyed with a batch begun: its exchanges complete first (ASan: no late writes) */
        MCHECK(ember_forward(c, &b, out, NULL) == EMBER_OK, "forward: %s", ember_errmsg(c));
        MCHECK(ember_forward_begin(c, &b, out2, NULL) == EMBER_OK, "begin before destroy: %s", ember_errmsg(c));
    }
    ember_collection_destroy(c);

    mpi_context("fixed: refused configs");
    tc->cfg.schedule = EMBER_SCHEDULE_STALE;
    tc->tables[0].storage = EMBER_STORAGE_SSD;
    ember_collection *s = NULL;
    MCHECK(ember_collection_create(&tc->cfg, &s) == EMBER_EINVAL && strstr(ember_errmsg(NULL), "table0") &&
               strstr(ember_errmsg(NULL), "stale"),
           "the SSD tier with the stale schedule: %s", ember_errmsg(NULL));
    ember_collection_destroy(s);
    s = NULL;
    tc->tables[0].storage = EMBER_STORAGE_MEMORY;
    tc->tables[0].kind = EMBER_TABLE_DYNAMIC;
    tc->tables[0].capacity = 64;
    tc->tables[0].rows = 0;
    tc->cfg.schedule = EMBER_SCHEDULE_OVERLAP;
    MCHECK(ember_collection_create(&tc->cfg, &s) == EMBER_EINVAL && strstr(ember_errmsg(NULL), "table0") &&
               strstr(ember_errmsg(NULL), "blocking"),
           "a dynamic table with the overlap schedule: %s", ember_errmsg(NULL));
    ember_collection_destroy(s);
    s = NULL;
    tc->cfg.schedule = EMBER_SCHEDULE_BLOCKING; /* created, but the split forward refuses it */
    if (mpi_all(ember_collection_create(&tc->cfg, &s) == EMBER_OK)) {
        int32_t len[1] = {1};
        int64_t key[1] = {12345};
        ember_batch kb = {1, 1, len, key, NULL, 1};
        float o[4];
        MCHECK(ember_forward_begin(s, &kb, o, NULL) == EMBER_EINVAL && strstr(ember_errmsg(s), "dynamic"),
               "begin with a dynamic table: %s", ember_errmsg(s));
    }
    ember_collection_destroy(s);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {mpi_test_init(&argc, &argv)};
    ember_world *world = mpi_world();
    fixed_cases(world);
    for (int trial = 0; trial < TRIALS; trial++)
        trial_run(&r, trial, world);
    mpi_context("the stale rule matters");
    int none = mpi_all(stale_differs == 0); /* 1 when no rank saw a difference */
    MCHECK(!none, "no stale output differed from a fresh read in %d trials: the test cannot tell the rules apart",
           TRIALS);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_schedule");
}
