/*
 * mpi_train.c: the replicated training step over MPI (src/model/model_step.c,
 * docs/training.md "Replication and determinism").  Run under mpirun -np
 * 1..4.
 *
 * Every rank draws the same random setup (tables placed row-, table-,
 * column-wise or replicated; a dense model with DOT or CAT) and the same
 * GLOBAL CTR batches of 1..48 samples; rank r trains on its contiguous
 * slice [G r / W, G (r+1) / W) (uneven, sometimes empty) with micro-batches
 * of b and accumulation k, while every rank also trains a world-of-one
 * reference on the whole global batch (one micro-batch).  After every step:
 *   - the dense parameters of all ranks are bit-identical (allgather,
 *     memcmp against rank 0's): the rank-order reduce gives every rank the
 *     same bytes;
 *   - they equal the reference's within 1e-5 relative (the dense model sums
 *     the global batch in other blocks);
 *   - the loss summed over ranks equals the reference's within 1e-5.
 * After the last step every table equals the reference's within 1e-5
 * (collective reads).  Dense optimizer SGD or Adam (eps 1e-3: near g = 0,
 * Adam turns rounding into a step of lr).
 *
 * A third trainer runs the same distributed steps with the dense optimizer
 * state sharded over groups of g ranks (g = 1, 2 when it divides W, or W,
 * by trial): after every step its dense parameters equal the replicated
 * trainer's bit for bit, and at the end so do its tables and its optimizer
 * state gathered to rank 0 (dense_sync_gather_state), which also restores
 * into a fresh sharded update as it was (dense_sync_set_state).
 *
 * ember_trainer_open with overrides one rank alone gets wrong (the last
 * rank's threads 0): every rank fails together with EMBER_EINVAL and the
 * same message, none waits in the set-up's collectives.
 *
 * A world over half the ranks (MPI_Comm_split) counts the ranks on this
 * machine among its own (ember_comm_local_ranks), not the job's.
 */
#include "ember-train.h"
#include "comm/collect.h"
#include "mpi_util.h"
#include "model/dense_sync.h"
#include "train_util.h"

#define TRIALS 8
#define STEPS 5
#define GMAX 48

static int rstep(ctr_model *t, const tctr *x, int64_t global, double *loss, const char *what)
{
    char err[256] = "";
    int st = model_step(t, &x->b, global, loss, err, sizeof err);
    MCHECK(st == EMBER_OK, "%s: model_step: %s", what, err);
    return st;
}

static void trial_run(test_rng *r, int trial, ember_world *world)
{
    const int32_t W = mpi_size_, me = mpi_rank_;
    int32_t F = (int32_t)test_range(r, 1, 5), d = (int32_t)test_range(r, 1, 9), nd = (int32_t)test_range(r, 1, 6);
    dlrm_config mc;
    test_config *dist = ttrain_config(r, F, d, nd, &mc);
    for (int32_t t = 0; t < F; t++) {
        dist->tables[t].placement = (ember_placement)((trial + t) % 4);
        dist->tables[t].owner = (int32_t)test_range(r, 0, W);
    }
    dist->cfg.world = world;
    dist->cfg.threads = 1;
    test_config *ref = mpi_ref_config(dist);
    dense_optim_kind kind = trial % 2 ? DENSE_ADAM : DENSE_SGD;
    int32_t b = (int32_t)test_range(r, 1, 7), per = (GMAX + W - 1) / W, k = (per + b - 1) / b;
    int32_t groups[3] = {1, W % 2 == 0 ? 2 : W, W}, grp = groups[trial % 3];
    model_config cd = {.micro_batch = b, .accumulate = k, .dense_optim = dense_optim_config_default(kind),
                         .threads = 1, .blas_threads = 1},
                   cr = {.micro_batch = GMAX, .accumulate = 1, .dense_optim = dense_optim_config_default(kind),
                         .threads = 1, .blas_threads = 1};
    cd.dense_optim.lr = cr.dense_optim.lr = kind == DENSE_SGD ? 0.2f : 0.01f;
    cd.dense_optim.eps = cr.dense_optim.eps = 1e-3f;
    model_config cs = cd;
    cs.optim_group = grp;
    mpi_context("trial %d (F %d d %d dense %d, b %d k %d, %s, %s, sharded over %d)", trial, F, d, nd, b, k,
                kind == DENSE_SGD ? "sgd" : "adam", mc.interaction == DENSE_INTERACT_DOT ? "dot" : "cat", grp);

    ember_collection *cd_coll = mpi_create(&dist->cfg, "distributed"), *cr_coll = mpi_create(&ref->cfg, "reference");
    ember_collection *cs_coll = mpi_create(&dist->cfg, "sharded");
    dlrm *md = NULL, *mr = NULL, *ms = NULL;
    ctr_model *td = NULL, *tr = NULL, *ts = NULL;
    char err[256] = "";
    int ok = cd_coll && cr_coll && cs_coll;
    if (ok) {
        MCHECK(dlrm_create(&mc, &md, err, sizeof err) == 0, "dlrm_create: %s", err);
        MCHECK(dlrm_create(&mc, &mr, err, sizeof err) == 0, "dlrm_create: %s", err);
        MCHECK(dlrm_create(&mc, &ms, err, sizeof err) == 0, "dlrm_create: %s", err);
        ok = mpi_all(md && mr && ms);
    }
    if (ok) {
        MCHECK(model_create(&cd, cd_coll, md, &td, err, sizeof err) == EMBER_OK, "model_create: %s", err);
        MCHECK(model_create(&cr, cr_coll, mr, &tr, err, sizeof err) == EMBER_OK, "model_create: %s", err);
        MCHECK(model_create(&cs, cs_coll, ms, &ts, err, sizeof err) == EMBER_OK, "model_create: %s", err);
        ok = mpi_all(td && tr && ts);
    }
    int64_t P = ok ? dlrm_num_params(md) : 0;
    float *all = malloc((size_t)(P * W + 1) * sizeof *all);
    for (int s = 0; ok && s < STEPS; s++) {
        int32_t G = (int32_t)test_range(r, 1, GMAX + 1);
        tctr g, x;
        tctr_make(r, &ref->cfg, G, nd, &g);
        tctr_slice(&g, (int32_t)((int64_t)G * me / W), (int32_t)((int64_t)G * (me + 1) / W), &x);
        char what[64];
        snprintf(what, sizeof what, "step %d (G %d, local %d)", s, G, x.b.batch_size);
        double ld = 0, lr_ = 0, ls = 0;
        int st = rstep(td, &x, G, &ld, what);
        st |= rstep(tr, &g, G, &lr_, what);
        st |= rstep(ts, &x, G, &ls, what);
        ok = mpi_all(st == EMBER_OK);
        if (ok) {
            MCHECK(memcmp(dlrm_params(md), dlrm_params(ms), (size_t)P * sizeof(float)) == 0 && ld == ls,
                   "%s: sharded over %d: dense parameters or loss differ from the replicated update's", what, grp);
            MPI_Allgather(dlrm_params(md), (int)P, MPI_FLOAT, all, (int)P, MPI_FLOAT, MPI_COMM_WORLD);
            for (int32_t q = 1; q < W; q++)
                MCHECK(memcmp(all, all + q * P, (size_t)P * sizeof *all) == 0,
                       "%s: rank %d's dense parameters differ from rank 0's", what, q);
            char msg[sizeof mpi_ctx_ + 256];
            snprintf(msg, sizeof msg, "[rank %d seed %llu] %s: %s: dense parameters vs one process", me,
                     (unsigned long long)mpi_seed_, mpi_ctx_, what);
            CHECK_CLOSE(dlrm_params(md), dlrm_params(mr), P, 1e-5, 1e-6, msg);
            double sum = 0;
            MPI_Allreduce(&ld, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            MCHECK(fabs(sum - lr_) <= 1e-5 * fabs(lr_) + 1e-9, "%s: loss %.9g over ranks, %.9g in one process",
                   what, sum, lr_);
        }
        tctr_free(&g);
        tctr_free(&x);
    }
    if (ok) {
        int64_t n1, n2;
        float *a = ttrain_tables(cd_coll, &dist->cfg, &n1), *b2 = ttrain_tables(cr_coll, &ref->cfg, &n2);
        char msg[sizeof mpi_ctx_ + 256];
        snprintf(msg, sizeof msg, "[rank %d seed %llu] %s: tables vs one process", me, (unsigned long long)mpi_seed_,
                 mpi_ctx_);
        CHECK_CLOSE(a, b2, n1, 1e-5, 1e-6, msg);
        int64_t n3;
        float *c3 = ttrain_tables(cs_coll, &dist->cfg, &n3);
        MCHECK(n3 == n1 && memcmp(a, c3, (size_t)n1 * sizeof(float)) == 0, "sharded over %d: tables differ", grp);
        free(a);
        free(b2);
        free(c3);
        /* the optimizer state, gathered whole to rank 0, and restored */
        dense_sync *rs = model_dense_sync(td), *ss = model_dense_sync(ts);
        int64_t fl = dense_sync_state_floats(rs);
        MCHECK(fl == dense_sync_state_floats(ss) && dense_sync_steps(rs) == dense_sync_steps(ss), "state shape");
        MCHECK(dense_sync_state_bytes(ss) * grp <= dense_sync_state_bytes(rs) + fl * 4 * grp &&
                   (fl == 0 || grp == 1 || dense_sync_state_bytes(ss) < dense_sync_state_bytes(rs)),
               "sharded over %d: %lld state bytes on this rank, replicated %lld", grp,
               (long long)dense_sync_state_bytes(ss), (long long)dense_sync_state_bytes(rs));
        float *s1 = calloc((size_t)(fl * P + 1), sizeof(float)), *s2 = calloc((size_t)(fl * P + 1), sizeof(float));
        MCHECK(dense_sync_gather_state(rs, s1, err, sizeof err) == EMBER_OK, "gather: %s", err);
        MCHECK(dense_sync_gather_state(ss, s2, err, sizeof err) == EMBER_OK, "gather sharded: %s", err);
        if (me == 0)
            MCHECK(memcmp(s1, s2, (size_t)(fl * P) * sizeof(float)) == 0, "sharded over %d: the gathered optimizer "
                   "state differs from the replicated one", grp);
        MPI_Bcast(s2, (int)(fl * P), MPI_FLOAT, 0, MPI_COMM_WORLD);
        dense_sync *fresh = NULL;
        MCHECK(dense_sync_create(world, P, grp, &cs.dense_optim, &fresh, err, sizeof err) == EMBER_OK, "create: %s",
               err);
        if (fresh) {
            dense_sync_set_state(fresh, s2, dense_sync_steps(ss));
            MCHECK(dense_sync_steps(fresh) == dense_sync_steps(ss), "restored step count");
            memset(s1, 0, (size_t)(fl * P) * sizeof(float));
            MCHECK(dense_sync_gather_state(fresh, s1, err, sizeof err) == EMBER_OK, "gather restored: %s", err);
            if (me == 0)
                MCHECK(memcmp(s1, s2, (size_t)(fl * P) * sizeof(float)) == 0, "restored state differs");
        }
        dense_sync_destroy(fresh);
        free(s1);
        free(s2);
    }
    free(all);
    model_destroy(td);
    model_destroy(tr);
    model_destroy(ts);
    dlrm_destroy(md);
    dlrm_destroy(mr);
    dlrm_destroy(ms);
    ember_collection_destroy(cd_coll);
    ember_collection_destroy(cr_coll);
    ember_collection_destroy(cs_coll);
    test_config_free(dist);
    test_config_free(ref);
}

/* The update alone on tiny vectors (fewer parameters than ranks: empty
 * chunks and parts): sharded over every g, the same bits as replicated. */
static void tiny_updates(test_rng *r, ember_world *world)
{
    const int32_t W = mpi_size_, me = mpi_rank_;
    static const int64_t sizes[] = {1, 2, 3, 5, 37};
    int32_t groups[3] = {1, W % 2 == 0 ? 2 : W, W};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int gi = 0; gi < 3; gi++) {
            int64_t n = sizes[k];
            dense_optim_config oc = dense_optim_config_default(DENSE_ADAM);
            dense_sync *rep = NULL, *sh = NULL;
            char err[256] = "";
            MCHECK(dense_sync_create(world, n, 0, &oc, &rep, err, sizeof err) == EMBER_OK, "tiny: %s", err);
            MCHECK(dense_sync_create(world, n, groups[gi], &oc, &sh, err, sizeof err) == EMBER_OK, "tiny: %s", err);
            float *p1 = malloc(sizeof(float) * (size_t)n), *p2 = malloc(sizeof(float) * (size_t)n);
            float *g1 = malloc(sizeof(float) * (size_t)n), *g2 = malloc(sizeof(float) * (size_t)n);
            test_fill(r, p1, n, -1, 1); /* the same on every rank: the same draws */
            memcpy(p2, p1, sizeof(float) * (size_t)n);
            for (int step = 0; rep && sh && step < 4; step++) {
                test_rng mine = {test_next(r) + (uint64_t)me}; /* each rank's own gradients */
                test_fill(&mine, g1, n, -1, 1);
                memcpy(g2, g1, sizeof(float) * (size_t)n);
                int st = dense_sync_reduce(rep, g1, err, sizeof err) | dense_sync_reduce(sh, g2, err, sizeof err);
                dense_sync_apply(rep, p1, g1);
                dense_sync_apply(sh, p2, g2);
                st |= dense_sync_gather(rep, p1, err, sizeof err) | dense_sync_gather(sh, p2, err, sizeof err);
                MCHECK(st == EMBER_OK, "tiny n %lld g %d: %s", (long long)n, groups[gi], err);
                MCHECK(memcmp(p1, p2, sizeof(float) * (size_t)n) == 0, "tiny n %lld, sharded over %d, step %d: "
                       "parameters differ from the replicated update's", (long long)n, groups[gi], step);
            }
            free(p1), free(p2), free(g1), free(g2);
            dense_sync_destroy(rep);
            dense_sync_destroy(sh);
        }
}

static void open_fails_together(ember_world *world)
{
    mpi_context("trainer open, the last rank's overrides bad");
    ember_train_overrides o;
    ember_train_overrides_init(&o);
    o.steps = 1;
    o.micro_batch = 16;
    o.eval_samples = 0;
    o.threads = mpi_rank_ == mpi_size_ - 1 ? 0 : 1;
    ember_trainer *t = NULL;
    int st = ember_trainer_open(NULL, &o, world, NULL, NULL, &t);
    const char *msg = ember_errmsg(t);
    MCHECK(st == EMBER_EINVAL, "open: %s (%s), want EINVAL on every rank", ember_status_str(st), msg);
    MCHECK(strstr(msg, "threads") != NULL, "message: %s", msg);
    ember_trainer_close(t);
}

static void local_ranks_of_a_split(void)
{
    mpi_context("local ranks of a world over half the ranks");
    MPI_Comm half, node;
    MPI_Comm_split(MPI_COMM_WORLD, mpi_rank_ % 2, mpi_rank_, &half);
    MPI_Comm_split_type(half, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int want = 0;
    MPI_Comm_size(node, &want);
    ember_world *w = NULL;
    MCHECK(ember_world_from_mpi_comm(half, &w) == EMBER_OK, "ember_world_from_mpi_comm");
    int got = ember_comm_local_ranks(w);
    MCHECK(got == want, "ember_comm_local_ranks %d, MPI_COMM_TYPE_SHARED %d", got, want);
    ember_world_destroy(w);
    MPI_Comm_free(&node);
    MPI_Comm_free(&half);
}

int main(int argc, char **argv)
{
    test_rng r = {mpi_test_init(&argc, &argv)};
    ember_world *world = mpi_world();
    open_fails_together(world);
    local_ranks_of_a_split();
    tiny_updates(&r, world);
    for (int trial = 0; trial < TRIALS; trial++)
        trial_run(&r, trial, world);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_train");
}
