/*
 * mpi_limits_adapt.c: limits that follow the data (docs/adaptive.md) in a
 * world of W ranks, under mpirun -np 1..4.  Every trial draws a drifting
 * global batch stream (ember_synth, drift grow: new ids every few batches)
 * over four row-wise tables, three of them adapted (policy drop, some with
 * starting limits, one mini-batch), and rank r trains on its even share.
 *
 *   observe  after each forward, ember_limits_observed equals src/ref's
 *            counts of this rank's local batch (ref_partition_counts: per
 *            table the most ids and unique ids of a partition, and the
 *            excess over the limits in force, summed over partitions).
 *   decide   run A: the adapter (src/plan/limits_adapt.c) fed every step
 *            and agreed over the world at its decision steps.  After every
 *            decision its limits equal the rule computed naively from every
 *            rank's ref counts (the window's per-step maxima over ranks and
 *            partitions, sorted, numpy's percentile, ceil(q (1 + h)), raise
 *            below it, shrink past (1 + h) above it), and the excess each
 *            change reports equals the ref counts' since the last decision.
 *            The same on every rank (gathered and compared).
 *   replay   run B: a fresh collection at another thread count, no adapter:
 *            run A's changes set with ember_set_limits after their steps.
 *            Tables and state bit-identical to run A's.
 *   resume   run C: the adapter saved at a random step of run A and loaded
 *            into a fresh one, fed run A's figures from there: the same
 *            decisions as run A's.
 *   bound    a trial with max_bytes: after every decision the limits' bytes
 *            are at most the bound (the floors fit here) and a change past
 *            it says capped.
 */
#include <math.h>

#include "mpi_util.h"
#include "plan/limits.h"
#include "plan/limits_adapt.h"
#include "ref/ref.h"

enum { T = 4, STEPS = 36, B = 48, POOL = 6, ROWS = 3000 };

/* This rank's samples [lo, hi) of a feature-major global batch into
 * (lengths, ids), as a local batch. */
static void local_slice(const ember_batch *g, int32_t lo, int32_t hi, int32_t *lengths, int64_t *ids,
                        ember_batch *out)
{
    int64_t n = 0, k = 0;
    for (int32_t f = 0; f < g->num_features; f++)
        for (int32_t s = 0; s < g->batch_size; s++) {
            int32_t len = g->lengths[(int64_t)f * g->batch_size + s];
            if (s >= lo && s < hi) {
                lengths[(int64_t)f * (hi - lo) + (s - lo)] = len;
                for (int32_t i = 0; i < len; i++)
                    ids[n++] = g->ids[k + i];
            }
            k += len;
        }
    *out = (ember_batch){0};
    out->batch_size = hi - lo;
    out->num_features = g->num_features;
    out->lengths = lengths;
    out->ids = ids;
    out->num_ids = n;
}

typedef struct trial {
    test_config *tc;
    limits_adapt_config ac;
    ember_synth_config sc;
    int32_t *start;
} trial;

/* Per step and rank, per table: max ids, max unique, and the counts per
 * partition (for the excess under any limits): the naive figures. */
typedef struct ref_figures {
    int64_t *ids, *unique; /* [STEPS][W][T][S] */
} ref_figures;

static int64_t cell(int32_t step, int32_t r, int32_t t, int32_t k)
{
    return (((int64_t)step * mpi_size_ + r) * T + t) * mpi_size_ + k;
}

static void ref_counts(const trial *tr, ref_figures *rf)
{
    const int32_t W = mpi_size_;
    rf->ids = mpi_alloc((size_t)STEPS * W * T * W, sizeof(int64_t));
    rf->unique = mpi_alloc((size_t)STEPS * W * T * W, sizeof(int64_t));
    test_config *one = mpi_ref_config(tr->tc); /* num_shards W explicit */
    ember_synth *syn = NULL;
    ember_synth_create(&tr->sc, &syn);
    int32_t *len = mpi_alloc((size_t)B * T, sizeof(int32_t));
    int64_t *ids = mpi_alloc((size_t)B * T * POOL, sizeof(int64_t));
    for (int32_t step = 0; step < STEPS; step++) {
        ember_batch g, lb;
        ember_synth_next(syn, &g);
        for (int32_t r = 0; r < W; r++) {
            local_slice(&g, tr->start[r], tr->start[r + 1], len, ids, &lb);
            ref_partition_counts(&one->cfg, &lb, &rf->ids[cell(step, r, 0, 0)], &rf->unique[cell(step, r, 0, 0)]);
        }
    }
    free(len);
    free(ids);
    ember_synth_destroy(syn);
    test_config_free(one);
}

static int64_t max_over(const int64_t *v, int32_t step, int32_t t, int rank_only)
{
    int64_t m = 0;
    for (int32_t r = 0; r < mpi_size_; r++) {
        if (rank_only >= 0 && r != rank_only)
            continue;
        for (int32_t k = 0; k < mpi_size_; k++)
            m = v[cell(step, r, t, k)] > m ? v[cell(step, r, t, k)] : m;
    }
    return m;
}

static int64_t excess(const int64_t *v, int32_t step, int32_t t, int64_t limit, int rank_only)
{
    int64_t e = 0;
    for (int32_t r = 0; r < mpi_size_; r++) {
        if (rank_only >= 0 && r != rank_only)
            continue;
        for (int32_t k = 0; k < mpi_size_; k++)
            e += limit > 0 && v[cell(step, r, t, k)] > limit ? v[cell(step, r, t, k)] - limit : 0;
    }
    return e;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The rule, naively: ceil(percentile q of the last `window` steps' maxima
 * (steps [0, step]) x (1 + h)); then raise below it, shrink past (1 + h). */
static int64_t rule(const limits_adapt_config *ac, const int64_t *v, int32_t step, int32_t t, int64_t now)
{
    int64_t n = 0, w[STEPS];
    for (int32_t s = step; s >= 0 && n < ac->window; s--)
        w[n++] = max_over(v, s, t, -1);
    qsort(w, (size_t)n, sizeof *w, cmp64);
    double h = (double)(n - 1) * ac->quantile;
    int64_t lo = (int64_t)floor(h);
    double q = lo >= n - 1 ? (double)w[n - 1] : (double)w[lo] + (h - (double)lo) * (double)(w[lo + 1] - w[lo]);
    int64_t want = (int64_t)ceil(q * (1.0 + ac->headroom) - 1e-9);
    want = want < 1 ? 1 : want;
    if (now == 0 || now < want || (double)now > (double)want * (1.0 + ac->headroom))
        return want;
    return now;
}

typedef struct run_log {
    int64_t limits[STEPS][2 * T]; /* after each step's decision, in force */
    int32_t changes[STEPS];
    void *saved;                  /* the adapter after step save_at */
    int64_t saved_bytes;
    int64_t obs[STEPS][4 * T];    /* this rank's figures */
    int32_t moved;                /* changes of a limit that was in force (not a first one) */
} run_log;

static ember_world *world_; /* one for the run (main) */

static ember_collection *make(const trial *tr, int32_t threads)
{
    test_config *tc = test_config_copy(tr->tc);
    tc->cfg.world = world_;
    tc->cfg.threads = threads;
    ember_collection *c = mpi_create(&tc->cfg, "adaptive");
    test_config_free(tc);
    return c;
}

/* One run over the stream: with an adapter (run A: ad != NULL), or with
 * run A's limits replayed (run B: replay != NULL). */
static void run(const trial *tr, ember_collection *c, limits_adapt *ad, const run_log *replay, run_log *log,
                int32_t save_at, const ref_figures *rf)
{
    const int32_t me = mpi_rank_, lo = tr->start[me], hi = tr->start[me + 1];
    ember_synth *syn = NULL;
    ember_synth_create(&tr->sc, &syn);
    int32_t *len = mpi_alloc((size_t)B * T, sizeof(int32_t));
    int64_t *ids = mpi_alloc((size_t)B * T * POOL, sizeof(int64_t));
    const int64_t width = ember_pooled_width(c);
    float *out = mpi_alloc((size_t)(B * width) + 1, sizeof(float));
    float *grad = mpi_alloc((size_t)(B * width) + 1, sizeof(float));
    test_rng gr = {mpi_seed_ ^ 0x77u};
    if (ad)
        MCHECK(ember_limits_observe(c, 1) == EMBER_OK, "observe: %s", ember_errmsg(c));
    int64_t limit_now[2 * T];
    for (int32_t t = 0; t < T; t++)
        limit_now[2 * t] = tr->tc->tables[t].max_ids_per_partition,
        limit_now[2 * t + 1] = tr->tc->tables[t].max_unique_ids_per_partition;
    int64_t over_since[2 * T] = {0};
    for (int32_t step = 0; step < STEPS; step++) {
        mpi_context("step %d", step);
        ember_batch g, lb;
        ember_synth_next(syn, &g);
        local_slice(&g, lo, hi, len, ids, &lb);
        int rc = ember_forward(c, &lb, out, NULL);
        MCHECK(rc == EMBER_OK, "forward: %s", ember_errmsg(c));
        for (int64_t i = 0; i < (int64_t)(hi - lo) * width; i++) /* one global draw per step, this rank's rows */
            grad[i] = test_float(&gr, -1, 1);
        rc = ember_backward(c, grad, NULL);
        MCHECK(rc == EMBER_OK, "backward: %s", ember_errmsg(c));
        if (ad) {
            int64_t *obs = log->obs[step], nb = 0;
            MCHECK(ember_limits_observed(c, 1, obs, &nb) == EMBER_OK && nb == 1, "observed %lld batches", (long long)nb);
            for (int32_t t = 0; t < T; t++) { /* observe: this rank's local batch, naively */
                int64_t want[4] = {max_over(rf->ids, step, t, me), max_over(rf->unique, step, t, me),
                                   excess(rf->ids, step, t, limit_now[2 * t], me),
                                   excess(rf->unique, step, t, limit_now[2 * t + 1], me)};
                for (int k = 0; k < 4; k++)
                    MCHECK(obs[4 * t + k] == want[k], "table %d figure %d: observed %lld, ref %lld", t, k,
                           (long long)obs[4 * t + k], (long long)want[k]);
                over_since[2 * t] += excess(rf->ids, step, t, limit_now[2 * t], -1);
                over_since[2 * t + 1] += excess(rf->unique, step, t, limit_now[2 * t + 1], -1);
            }
            MCHECK(limits_adapt_observe(ad, obs) == EMBER_OK, "adapter full");
            limits_change ch[T];
            int32_t n = 0;
            if (limits_adapt_due(ad, step + 1)) {
                MCHECK(limits_adapt_agree(ad, ember_collection_world(c)) == EMBER_OK, "agree");
                limits_adapt_decide(ad, step + 1, ch, &n);
                for (int32_t t = 0; t < T; t++) { /* decide: the rule, naively */
                    if (!limits_adapt_adapted(ad, t))
                        continue;
                    int64_t a, u, cap = tr->ac.max_bytes;
                    limits_adapt_limits(ad, t, &a, &u);
                    if (cap == 0) {
                        int64_t wa = rule(&tr->ac, rf->ids, step, t, limit_now[2 * t]);
                        int64_t wu = rule(&tr->ac, rf->unique, step, t, limit_now[2 * t + 1]);
                        MCHECK(a == wa && u == wu, "table %d: limits %lld/%lld, the rule's %lld/%lld", t,
                               (long long)a, (long long)u, (long long)wa, (long long)wu);
                    }
                }
                for (int32_t i = 0; i < n; i++) {
                    int32_t t = ch[i].table;
                    MCHECK(ch[i].over_ids == over_since[2 * t] && ch[i].over_unique == over_since[2 * t + 1],
                           "table %d: change says %lld/%lld over, ref %lld/%lld", t, (long long)ch[i].over_ids,
                           (long long)ch[i].over_unique, (long long)over_since[2 * t],
                           (long long)over_since[2 * t + 1]);
                }
                memset(over_since, 0, sizeof over_since);
                if (tr->ac.max_bytes > 0) { /* bound: within it, or no limit rose and the change says capped */
                    int64_t bytes = limits_adapt_bytes(ad, -1);
                    int rose = 0, capped = 0;
                    for (int32_t i = 0; i < n; i++) {
                        capped |= ch[i].capped;
                        rose |= (ch[i].old_ids > 0 && ch[i].new_ids > ch[i].old_ids) ||
                                (ch[i].old_unique > 0 && ch[i].new_unique > ch[i].old_unique);
                    }
                    MCHECK(bytes <= tr->ac.max_bytes || (capped && !rose),
                           "limit bytes %lld over the bound %lld (capped %d, a limit rose %d)", (long long)bytes,
                           (long long)tr->ac.max_bytes, capped, rose);
                }
                for (int32_t t = 0; t < T; t++) {
                    limits_adapt_limits(ad, t, &limit_now[2 * t], &limit_now[2 * t + 1]);
                    MCHECK(ember_set_limits(c, t, limit_now[2 * t], limit_now[2 * t + 1]) == EMBER_OK, "set");
                }
            }
            log->changes[step] = n;
            for (int32_t i = 0; i < n; i++)
                log->moved += (ch[i].old_ids > 0 && ch[i].new_ids != ch[i].old_ids) ||
                              (ch[i].old_unique > 0 && ch[i].new_unique != ch[i].old_unique);
            if (step == save_at) {
                MCHECK(limits_adapt_agree(ad, ember_collection_world(c)) == EMBER_OK, "agree at save");
                MCHECK(limits_adapt_save(ad, &log->saved, &log->saved_bytes) == EMBER_OK, "save");
            }
        } else if (replay && replay->changes[step] > 0) { /* replay: A's changes after their steps */
            for (int32_t t = 0; t < T; t++)
                MCHECK(ember_set_limits(c, t, replay->limits[step][2 * t], replay->limits[step][2 * t + 1]) ==
                           EMBER_OK, "set");
        }
        for (int32_t t = 0; t < T; t++) {
            log->limits[step][2 * t] = limit_now[2 * t];
            log->limits[step][2 * t + 1] = limit_now[2 * t + 1];
        }
        if (replay)
            memcpy(log->limits[step], replay->limits[step], sizeof log->limits[step]);
    }
    ember_synth_destroy(syn);
    free(len);
    free(ids);
    free(out);
    free(grad);
}

static int one_trial(test_rng *r, int k)
{
    const int32_t W = mpi_size_;
    trial tr = {0};
    tr.tc = test_config_new(T, T);
    tr.tc->cfg.seed = test_next(r);
    tr.tc->cfg.dedup = (int)test_range(r, 0, 2);
    for (int32_t t = 0; t < T; t++) {
        ember_table_config *tb = &tr.tc->tables[t];
        tb->rows = ROWS;
        tb->dim = 4;
        tb->placement = EMBER_PLACE_ROW;
        tb->optimizer = ember_optimizer_default(EMBER_OPT_ADAGRAD);
        tb->limit_policy = t == 2 ? EMBER_LIMIT_MINIBATCH : EMBER_LIMIT_DROP;
    }
    tr.tc->tables[1].max_ids_per_partition = 8 + test_range(r, 0, 40) / W; /* starting limits */
    tr.tc->tables[1].max_unique_ids_per_partition = 6 + test_range(r, 0, 30) / W;
    tr.tc->tables[2].max_ids_per_partition = 2 * POOL; /* mini-batch: every sample fits alone */
    tr.tc->tables[2].max_unique_ids_per_partition = 2 * POOL;
    tr.tc->tables[3].limit_policy = EMBER_LIMIT_ERROR; /* no limit: not adapted */
    tr.ac = limits_adapt_config_default();
    tr.ac.mode = test_range(r, 0, 4) ? LIMITS_ADAPT_RUNNING : LIMITS_ADAPT_FIRST;
    tr.ac.every = test_range(r, 2, 7);
    tr.ac.window = test_range(r, 1, 12);
    static const double Q[] = {1.0, 0.999, 0.9, 0.5};
    tr.ac.quantile = Q[test_range(r, 0, 4)];
    tr.ac.headroom = (double)test_range(r, 0, 4) * 0.05;
    tr.ac.max_bytes = k % 3 == 2 ? test_range(r, 8000, 40000) * W : 0;
    tr.sc = ember_synth_config_default();
    tr.sc.tables = T;
    tr.sc.rows = ROWS;
    tr.sc.batch_size = B;
    tr.sc.pooling = POOL;
    tr.sc.alpha = 1.05;
    tr.sc.seed = test_next(r);
    tr.sc.drift = EMBER_DRIFT_GROW;
    tr.sc.drift_every = test_range(r, 2, 8);
    tr.sc.drift_rows = test_range(r, 50, 400);
    tr.sc.drift_tables = (int32_t)test_range(r, 0, T + 1);
    tr.start = mpi_starts();
    mpi_split(r, B, W, MPI_SPLIT_EVEN, tr.start);
    mpi_context("trial %d: %s every %lld window %lld q %g h %g max_bytes %lld", k,
                tr.ac.mode == LIMITS_ADAPT_FIRST ? "first" : "running", (long long)tr.ac.every,
                (long long)tr.ac.window, tr.ac.quantile, tr.ac.headroom, (long long)tr.ac.max_bytes);
    ref_figures rf;
    ref_counts(&tr, &rf);
    int32_t save_at = (int32_t)test_range(r, 0, STEPS - 1);
    run_log *a = mpi_alloc(1, sizeof *a), *b = mpi_alloc(1, sizeof *b);
    limits_adapt *ad = NULL, *ad2 = NULL;
    char err[256];
    MCHECK(limits_adapt_create(&tr.ac, &tr.tc->cfg, &ad, err, sizeof err) == EMBER_OK, "create: %s", err);
    ember_collection *ca = make(&tr, 1), *cb = make(&tr, 2);
    int ok = ca && cb && ad;
    if (mpi_all(ok)) {
        run(&tr, ca, ad, NULL, a, save_at, &rf);
        /* every rank decided alike */
        int64_t *all = mpi_alloc((size_t)W * STEPS * 2 * T, sizeof(int64_t));
        MPI_Allgather(a->limits, STEPS * 2 * T, MPI_INT64_T, all, STEPS * 2 * T, MPI_INT64_T, MPI_COMM_WORLD);
        for (int32_t q = 1; q < W; q++)
            MCHECK(!memcmp(all, all + (size_t)q * STEPS * 2 * T, sizeof(int64_t) * STEPS * 2 * T),
                   "rank %d's limits differ from rank 0's", q);
        free(all);
        /* replay at another thread count */
        run(&tr, cb, NULL, a, b, -1, &rf);
        mpi_snapshot snap;
        mpi_snap(ca, &tr.tc->cfg, &snap);
        mpi_snap_same(cb, &tr.tc->cfg, &snap, "replayed run against the adaptive run");
        /* resume: the saved adapter, fed run A's figures after save_at */
        MCHECK(limits_adapt_create(&tr.ac, &tr.tc->cfg, &ad2, err, sizeof err) == EMBER_OK, "create: %s", err);
        MCHECK(a->saved && limits_adapt_load(ad2, a->saved, a->saved_bytes, err, sizeof err) == EMBER_OK, "load: %s",
               err);
        for (int32_t step = save_at + 1; ad2 && step < STEPS; step++) {
            limits_adapt_observe(ad2, a->obs[step]);
            if (!limits_adapt_due(ad2, step + 1))
                continue;
            limits_change ch[T];
            int32_t n = 0;
            MCHECK(limits_adapt_agree(ad2, ember_collection_world(ca)) == EMBER_OK, "agree");
            limits_adapt_decide(ad2, step + 1, ch, &n);
            MCHECK(n == a->changes[step], "step %d: resumed adapter made %d changes, run A %d", step, n,
                   a->changes[step]);
            for (int32_t t = 0; t < T; t++) {
                int64_t x, u;
                limits_adapt_limits(ad2, t, &x, &u);
                MCHECK(x == a->limits[step][2 * t] && u == a->limits[step][2 * t + 1],
                       "step %d table %d: resumed %lld/%lld, run A %lld/%lld", step, t, (long long)x, (long long)u,
                       (long long)a->limits[step][2 * t], (long long)a->limits[step][2 * t + 1]);
            }
        }
        /* a blob of another window is refused, the adapter unchanged */
        if (a->saved) {
            limits_adapt_config other = tr.ac;
            other.window++;
            limits_adapt *ad3 = NULL;
            limits_adapt_create(&other, &tr.tc->cfg, &ad3, err, sizeof err);
            MCHECK(ad3 && limits_adapt_load(ad3, a->saved, a->saved_bytes, err, sizeof err) == EMBER_EFORMAT,
                   "a blob of another window was taken");
            limits_adapt_destroy(ad3);
        }
    }
    int changed = a->moved; /* limits in force that the data moved */
    limits_adapt_destroy(ad);
    limits_adapt_destroy(ad2);
    ember_collection_destroy(ca);
    ember_collection_destroy(cb);
    free(a->saved);
    free(a);
    free(b);
    free(rf.ids);
    free(rf.unique);
    free(tr.start);
    test_config_free(tr.tc);
    return changed;
}

int main(int argc, char **argv)
{
    uint64_t seed = mpi_test_init(&argc, &argv);
    test_rng r = {seed};
    world_ = mpi_world();
    int changed = 0;
    for (int k = 0; k < 12; k++)
        changed += one_trial(&r, k) > 0;
    mpi_context("overall");
    MCHECK(changed >= 9, "only %d of 12 trials moved a limit in force: the test exercises too little", changed);
    ember_world_destroy(world_);
    return mpi_test_finish("mpi_limits_adapt");
}
