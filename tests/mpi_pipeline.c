/*
 * mpi_pipeline.c: the dense model in pipeline stages (src/model/pipeline.h)
 * against the same model unpipelined in one process, bit for bit.
 *
 * Every rank builds the same random model and the same random steps (k
 * micro-batches of b samples, dense features, pooled embeddings, labels)
 * and runs the reference: per micro-batch forward, BCE, backward, then an
 * SGD step, for 3 steps.  Then, for each schedule (fill-drain, 1f1b,
 * interleaved with 2 pieces per rank), with and without recomputation,
 * with even and random cuts, the world runs the same steps as one
 * pipeline (and, on an even number W >= 4 of ranks, also as two pipelines
 * of W / 2 stages over ember_world_split): each step's loss on the last
 * piece's rank, d_pooled on the interaction's, and after the steps every
 * parameter a rank owns must equal the reference's bits.  Each rank's
 * model is a part (dlrm_create_part) holding its pieces' blocks only, and
 * after the steps a forward-only pass (pipe_forward) must give every rank
 * the reference model's logits.  The balance rule's cuts, by time and by
 * memory, are checked against every split (brute force).  Models draw
 * every interaction (DCN too) and activation, with enough top layers for
 * 2 S pieces.
 * A pipeline has at most PIPE_MAX_PIECES pieces, so the interleaved
 * schedule's 2 W pieces fit on up to PIPE_MAX_PIECES / 2 ranks; on more the
 * test fails at once, saying so, rather than overrun the cuts.
 */
#include <math.h>
#include <string.h>

#include "comm/comm.h"
#include "dense/dense.h"
#include "mpi_util.h"
#include "model/pipeline.h"

#define STEPS 3

typedef struct data {
    int32_t k, b, n; /* n samples: k micro-batches of b, the last one short */
    float *dense[STEPS], *pooled[STEPS], *labels[STEPS];
} data;

static dlrm_config random_model(test_rng *r, int32_t S)
{
    static const int32_t dims[] = {2, 4, 8};
    dlrm_config c;
    memset(&c, 0, sizeof c);
    c.num_dense = (int32_t)test_range(r, 1, 14);
    c.num_sparse = (int32_t)test_range(r, 1, 5);
    c.emb_dim = dims[test_range(r, 0, 3)];
    c.num_bottom = (int32_t)test_range(r, 1, 4);
    for (int32_t l = 0; l < c.num_bottom - 1; l++)
        c.bottom[l] = (int32_t)test_range(r, 1, 33);
    c.bottom[c.num_bottom - 1] = c.emb_dim;
    c.num_top = (int32_t)test_range(r, 0, 4);
    if (c.num_bottom + c.num_top + 2 < 2 * S) /* room for 2 pieces per rank */
        c.num_top = 2 * S - c.num_bottom - 2;
    for (int32_t l = 0; l < c.num_top; l++)
        c.top[l] = (int32_t)test_range(r, 1, 33);
    c.interaction = (dense_interaction)test_range(r, 0, 3);
    if (c.interaction == DENSE_INTERACT_DCN) {
        c.num_cross = (int32_t)test_range(r, 1, 3);
        c.cross_rank = test_range(r, 0, 2) ? 0 : (int32_t)test_range(r, 1, 9);
    }
    c.activation = (dense_activation)test_range(r, 0, 5);
    c.seed = test_next(r);
    return c;
}

/* The unpipelined steps: losses per step, d_pooled per step, final params. */
typedef struct ref_run {
    double loss[STEPS];
    float *d_pooled[STEPS], *params;
    float *logit; /* the final model's logits on step 0's samples */
} ref_run;

static void reference(const dlrm_config *c, const data *d, ref_run *out)
{
    dlrm *m = NULL;
    char err[256];
    MCHECK(dlrm_create(c, &m, err, sizeof err) == 0, "%s", err);
    const int64_t n = dlrm_num_params(m), pw = (int64_t)c->num_sparse * c->emb_dim;
    dense_optim_config oc = dense_optim_config_default(DENSE_SGD);
    oc.lr = 0.05f;
    dense_optim *o = NULL;
    MCHECK(dense_optim_create(&oc, n, &o) == 0, "optim");
    float *logit = malloc((size_t)d->b * sizeof *logit), *dlogit = malloc((size_t)d->b * sizeof *dlogit);
    const float scale = 1.0f / (float)d->n;
    for (int s = 0; s < STEPS; s++) {
        dlrm_zero_grads(m);
        out->loss[s] = 0;
        out->d_pooled[s] = malloc((size_t)(d->k * d->b * pw) * sizeof(float));
        for (int32_t j = 0; j < d->k; j++) {
            const int64_t r0 = (int64_t)j * d->b;
            const int32_t bj = d->n - r0 < d->b ? (int32_t)(d->n - r0) : d->b;
            dlrm_forward(m, bj, d->dense[s] + r0 * c->num_dense, d->pooled[s] + r0 * pw, logit);
            out->loss[s] += dense_bce_logits(logit, d->labels[s] + r0, bj, scale, dlogit);
            dlrm_backward(m, dlogit, out->d_pooled[s] + r0 * pw);
        }
        dense_optim_step(o, dlrm_params(m), dlrm_grads(m));
    }
    out->logit = malloc((size_t)d->n * sizeof(float) + 4);
    for (int32_t j = 0; j < d->k; j++) {
        const int64_t r0 = (int64_t)j * d->b;
        const int32_t bj = d->n - r0 < d->b ? (int32_t)(d->n - r0) : d->b;
        dlrm_forward(m, bj, d->dense[0] + r0 * c->num_dense, d->pooled[0] + r0 * pw, out->logit + r0);
    }
    out->params = malloc((size_t)n * sizeof(float));
    memcpy(out->params, dlrm_params(m), (size_t)n * sizeof(float));
    free(logit), free(dlogit);
    dense_optim_destroy(o);
    dlrm_destroy(m);
}

/* The same steps as a pipeline over stages; checks against ref. */
static void pipelined(const dlrm_config *c, const data *d, const ref_run *ref, ember_world *stages,
                      const pipe_config *pc)
{
    dlrm *m = NULL;
    pipeline *p = NULL;
    char err[256] = "";
    uint8_t held[DENSE_MAX_BLOCKS];
    MCHECK(pipe_held(pc, ember_world_size(stages), ember_world_rank(stages), dlrm_config_blocks(c), held, err,
                     sizeof err) == 0, "%s", err);
    MCHECK(dlrm_create_part(c, held, &m, err, sizeof err) == 0, "%s", err);
    int ok = pipe_create(pc, m, stages, &p, err, sizeof err) == 0;
    MCHECK(ok, "pipe_create: %s", err);
    if (!mpi_all(ok)) {
        dlrm_destroy(m);
        return;
    }
    const int64_t n = dlrm_num_params(m), pw = (int64_t)c->num_sparse * c->emb_dim;
    const int32_t nblocks = dlrm_num_blocks(m);
    dense_optim_config oc = dense_optim_config_default(DENSE_SGD);
    oc.lr = 0.05f;
    dense_optim *o = NULL;
    MCHECK(dense_optim_create(&oc, n, &o) == 0, "optim");
    float *d_pooled = malloc((size_t)(d->k * d->b * pw) * sizeof(float));
    const float scale = 1.0f / (float)d->n;
    for (int s = 0; s < STEPS; s++) {
        dlrm_zero_grads(m);
        double loss = -1;
        int st = pipe_step(p, d->n, d->b, d->dense[s], d->pooled[s], d->labels[s], scale, &loss, d_pooled, err,
                           sizeof err);
        MCHECK(st == EMBER_OK, "pipe_step: %s", err);
        if (pipe_runs(p, nblocks - 1))
            MCHECK(!memcmp(&loss, &ref->loss[s], sizeof loss), "step %d: loss %.17g, unpipelined %.17g", s, loss,
                   ref->loss[s]);
        if (pipe_runs(p, c->num_bottom)) {
            int64_t at = mpi_first_diff(d_pooled, ref->d_pooled[s], (int64_t)d->n * pw);
            MCHECK(at < 0, "step %d: d_pooled differs at %lld", s, (long long)at);
        }
        dense_optim_step(o, dlrm_params(m), dlrm_grads(m));
    }
    int64_t held_params = 0;
    for (int32_t blk = 0; blk < nblocks; blk++) {
        int64_t off, len;
        dlrm_block_params(m, blk, &off, &len);
        MCHECK(dlrm_holds(m, blk) == pipe_runs(p, blk), "block %d: held %d, runs %d", blk, dlrm_holds(m, blk),
               pipe_runs(p, blk));
        if (!pipe_runs(p, blk) || !len)
            continue;
        held_params += len;
        int64_t at = mpi_first_diff(dlrm_params(m) + dlrm_block_local(m, blk), ref->params + off, len);
        MCHECK(at < 0, "block %d (owner %d): parameter %lld differs after %d steps", blk, pipe_owner(p, blk),
               (long long)at, STEPS);
    }
    MCHECK(held_params == n, "the part holds %lld parameters, its pieces %lld", (long long)n,
           (long long)held_params);
    float *logit = malloc((size_t)d->n * sizeof(float) + 4);
    MCHECK(pipe_forward(p, d->n, d->b, d->dense[0], d->pooled[0], logit, err, sizeof err) == EMBER_OK,
           "pipe_forward: %s", err);
    int64_t at = mpi_first_diff(logit, ref->logit, d->n);
    MCHECK(at < 0, "pipe_forward: logit %lld differs from the unpipelined model's", (long long)at);
    free(logit);
    pipe_stats ps;
    pipe_get_stats(p, &ps);
    if (d->n == d->k * d->b) { /* full micro-batches: the plan's figure is the measured one */
        const int64_t want = pipe_plan_kept_bytes(pc, c, ember_world_size(stages), ember_world_rank(stages), d->k,
                                                  d->b);
        MCHECK(ps.peak_activation_bytes == want, "kept activations: %lld bytes, planned %lld",
               (long long)ps.peak_activation_bytes, (long long)want);
    }
    MCHECK(ps.busy_s >= 0 && ps.busy_s <= ps.step_s + 1e-6 && ps.peak_in_flight >= 1, "stats: busy %g of %g s",
           ps.busy_s, ps.step_s);
    free(d_pooled);
    dense_optim_destroy(o);
    pipe_destroy(p);
    dlrm_destroy(m);
}

/* The balance rule's costs, computed here on their own: by time each
 * block's seconds added up; by memory piece q of blocks [j, i) costs their
 * parameters, gradients and state plus the activations it keeps for the
 * micro-batches it has in flight (with recomputation: its input for each,
 * and its own activations once). */
typedef struct ref_cost {
    const double *sec;                   /* time: per block, or NULL            */
    double params[DENSE_MAX_BLOCKS + 1]; /* memory: per block, bytes            */
    double kept[DENSE_MAX_BLOCKS + 1];   /* one micro-batch's, bytes            */
    double input[DENSE_MAX_BLOCKS + 1];  /* a piece's input from block j, bytes */
    int32_t in_flight[PIPE_MAX_PIECES];
    int recompute;
} ref_cost;

static double ref_piece(const ref_cost *rc, int32_t q, int32_t j, int32_t i)
{
    double sum = 0, kept = 0;
    for (int32_t blk = j; blk < i; blk++) {
        sum += rc->sec ? rc->sec[blk] : rc->params[blk];
        kept += rc->sec ? 0 : rc->kept[blk];
    }
    if (rc->sec)
        return sum;
    return sum + (rc->recompute ? rc->in_flight[q] * rc->input[j] + kept : rc->in_flight[q] * kept);
}

/* The cheapest costliest piece over every split of blocks [j0, n) into
 * pieces q0 .. P-1 whose every piece's limit is at most bound (n is small
 * here). */
static double brute_best(const ref_cost *cost, const ref_cost *limit, double bound, int32_t j0, int32_t n, int32_t q0,
                         int32_t P)
{
    if (q0 == P - 1)
        return !limit || ref_piece(limit, q0, j0, n) <= bound ? ref_piece(cost, q0, j0, n) : HUGE_VAL;
    double best = HUGE_VAL;
    for (int32_t i = j0 + 1; i <= n - (P - 1 - q0); i++) { /* piece q0 is blocks j0 .. i-1 */
        if (limit && ref_piece(limit, q0, j0, i) > bound)
            break;
        const double first = ref_piece(cost, q0, j0, i), rest = brute_best(cost, limit, bound, i, n, q0 + 1, P);
        const double worst = first > rest ? first : rest;
        best = worst < best ? worst : best;
    }
    return best;
}

/* The costliest piece under the cuts. */
static double piece_max(const ref_cost *cost, int32_t n, const int32_t *cuts, int32_t P)
{
    double worst = 0;
    for (int32_t q = 0; q < P; q++) {
        const double piece = ref_piece(cost, q, q ? cuts[q - 1] : 0, q < P - 1 ? cuts[q] : n);
        worst = piece > worst ? piece : worst;
    }
    return worst;
}

static void run_configs(test_rng *r, const dlrm_config *c, const data *d, const ref_run *ref, ember_world *stages,
                        const char *what)
{
    const int32_t S = ember_world_size(stages);
    dlrm *probe = NULL;
    char err[256];
    MCHECK(dlrm_create(c, &probe, err, sizeof err) == 0, "%s", err);
    const int32_t nblocks = dlrm_num_blocks(probe);
    dlrm_destroy(probe);
    for (int sched = 0; sched < 3; sched++)
        for (int rec = 0; rec < 2; rec++)
            for (int cut = 0; cut < 3; cut++) {
                pipe_config pc = pipe_config_default((pipe_schedule)sched);
                pc.recompute = rec;
                const int32_t P = S * pc.virtual_stages;
                if (cut) { /* P - 1 increasing cuts in 1 .. nblocks - 1, the same on every rank */
                    pc.num_cuts = P - 1;
                    int32_t prev = 0;
                    for (int32_t j = 0; j < P - 1; j++) {
                        int32_t room = nblocks - (P - 1 - j) - prev; /* leave a block for each later piece */
                        prev = pc.cuts[j] = prev + 1 + (int32_t)test_range(r, 0, (uint64_t)room);
                    }
                }
                if (cut == 2) { /* the balance rule: optimal for its costs, the same everywhere; by memory
                                   (every other configuration) or by time, whose cuts keep within the slack of
                                   the fastest split and are the leanest in bytes among such */
                    double cost[DENSE_MAX_BLOCKS];
                    char err2[256] = "";
                    const int by_memory = (sched + rec) % 2;
                    pipe_balance_config bc;
                    memset(&bc, 0, sizeof bc);
                    bc.by_memory = by_memory, bc.micro_batch = d->b, bc.stages = S, bc.pipe = pc;
                    bc.accumulate = d->k, bc.threads = bc.blas_threads = 1;
                    bc.state_floats = 0.5 * (double)test_range(r, 0, 5);
                    int ok = pipe_balance(c, &bc, stages, pc.cuts, cost, err2, sizeof err2) == 0;
                    MCHECK(ok, "pipe_balance: %s", err2);
                    if (!mpi_all(ok))
                        continue;
                    pc.num_cuts = P - 1;
                    dlrm *shape = NULL;
                    uint8_t none[DENSE_MAX_BLOCKS] = {0};
                    MCHECK(dlrm_create_part(c, none, &shape, err2, sizeof err2) == 0, "%s", err2);
                    ref_cost mem, time;
                    memset(&mem, 0, sizeof mem);
                    memset(&time, 0, sizeof time);
                    mem.recompute = rec;
                    MCHECK(pipe_plan_in_flight(&pc, S, d->k, mem.in_flight) == 0, "pipe_plan_in_flight");
                    for (int32_t blk = 0; shape && blk < nblocks; blk++) {
                        int64_t off, len;
                        dlrm_block_params(shape, blk, &off, &len);
                        mem.params[blk] = 4.0 * (double)len * (2 + bc.state_floats);
                        mem.kept[blk] = 4.0 * d->b * (double)dlrm_block_kept_floats(shape, blk);
                        mem.input[blk] = blk ? 4.0 * d->b * dlrm_block_in_width(shape, blk) : 0;
                        MCHECK(!by_memory || cost[blk] == mem.params[blk] + mem.kept[blk], "memory balance: block %d "
                               "costs %g bytes, want %g", blk, cost[blk], mem.params[blk] + mem.kept[blk]);
                    }
                    dlrm_destroy(shape);
                    time.sec = cost;
                    /* fill-drain and 1f1b (a piece per stage): a piece's memory cost is what its stage keeps,
                     * as the schedule's own account (checked against the measured peak) says */
                    for (int32_t q = 0; pc.virtual_stages == 1 && q < P; q++) {
                        const int32_t j = q ? pc.cuts[q - 1] : 0, i = q < P - 1 ? pc.cuts[q] : nblocks;
                        double params = 0;
                        for (int32_t blk = j; blk < i; blk++)
                            params += mem.params[blk];
                        const double want = params + (double)pipe_plan_kept_bytes(&pc, c, S, q, d->k, d->b);
                        MCHECK(fabs(ref_piece(&mem, q, j, i) - want) <= 1e-9 * want, "stage %d: memory cost %g, its "
                               "schedule keeps %g", q, ref_piece(&mem, q, j, i), want);
                    }
                    const double worst = piece_max(by_memory ? &mem : &time, nblocks, pc.cuts, P);
                    const double best = brute_best(by_memory ? &mem : &time, NULL, HUGE_VAL, 0, nblocks, 0, P);
                    if (by_memory) {
                        MCHECK(worst <= best * (1 + 1e-12), "balanced cuts: largest piece %g bytes, best %g", worst,
                               best);
                    } else {
                        const double bound = best * (1 + PIPE_TIME_SLACK);
                        const double lean = brute_best(&mem, &time, bound * (1 + 1e-12), 0, nblocks, 0, P);
                        MCHECK(worst <= bound * (1 + 1e-9), "balanced cuts: slowest piece %g, fastest %g", worst, best);
                        MCHECK(piece_max(&mem, nblocks, pc.cuts, P) <= lean * (1 + 1e-12), "balanced cuts: largest "
                               "piece %g bytes, leanest within the slack %g", piece_max(&mem, nblocks, pc.cuts, P),
                               lean);
                    }
                    for (int32_t j = 0; j < P - 1; j++)
                        MCHECK(pc.cuts[j] > (j ? pc.cuts[j - 1] : 0) && pc.cuts[j] < nblocks, "cut %d at %d", j,
                               pc.cuts[j]);
                }
                static const char *const cut_names[] = {"even", "random", "balanced"};
                mpi_context("%s: interaction %d, %s, recompute %d, %s cuts, S %d, k %d, b %d, n %d", what, (int)c->interaction,
                            pipe_schedule_name((pipe_schedule)sched), rec, cut_names[cut], S, d->k, d->b, d->n);
                pipelined(c, d, ref, stages, &pc);
            }
}

int main(int argc, char **argv)
{
    test_rng r = {mpi_test_init(&argc, &argv)};
    ember_world *w = mpi_world();
    const int32_t W = ember_world_size(w);
    mpi_context("world size");
    MCHECK(2 * W <= PIPE_MAX_PIECES, "a pipeline of %d stages with 2 pieces each exceeds the %d pieces a pipeline "
           "holds: mpi_pipeline runs on at most %d ranks", W, PIPE_MAX_PIECES, PIPE_MAX_PIECES / 2);
    for (int trial = 0; trial < 4 && 2 * W <= PIPE_MAX_PIECES; trial++) {
        dlrm_config c = random_model(&r, W);
        data d = {(int32_t)(W * test_range(&r, 1, 4)), (int32_t)test_range(&r, 1, 300), 0, {0}, {0}, {0}};
        /* the last micro-batch short in half the trials (the interleaved schedule then pads with empty
         * ones when k is no longer a multiple of the stages) */
        d.n = d.k * d.b - (trial % 2 ? (int32_t)test_range(&r, 0, d.b) : 0);
        if (trial % 2 && d.b > 1 && d.n % d.b == 0)
            d.n--;
        d.k = (d.n + d.b - 1) / d.b;
        const int64_t rows = (int64_t)d.k * d.b, pw = (int64_t)c.num_sparse * c.emb_dim;
        for (int s = 0; s < STEPS; s++) {
            d.dense[s] = malloc((size_t)(rows * c.num_dense) * sizeof(float));
            d.pooled[s] = malloc((size_t)(rows * pw) * sizeof(float));
            d.labels[s] = malloc((size_t)rows * sizeof(float));
            test_fill(&r, d.dense[s], rows * c.num_dense, -1, 1);
            test_fill(&r, d.pooled[s], rows * pw, -0.5f, 0.5f);
            for (int64_t i = 0; i < rows; i++)
                d.labels[s][i] = (float)test_range(&r, 0, 2);
        }
        ref_run ref;
        mpi_context("trial %d: reference", trial);
        reference(&c, &d, &ref);
        char what[64];
        snprintf(what, sizeof what, "trial %d, one pipeline", trial);
        run_configs(&r, &c, &d, &ref, w, what);
        if (W >= 4 && W % 2 == 0) { /* pipeline x data parallel: two pipelines of W / 2 stages */
            ember_world *half = NULL;
            MCHECK(ember_world_split(w, mpi_rank_ / (W / 2), mpi_rank_, &half) == EMBER_OK && half, "split");
            snprintf(what, sizeof what, "trial %d, two pipelines", trial);
            if (mpi_all(half != NULL)) {
                run_configs(&r, &c, &d, &ref, half, what);
            }
            ember_world_destroy(half);
        }
        for (int s = 0; s < STEPS; s++)
            free(d.dense[s]), free(d.pooled[s]), free(d.labels[s]), free(ref.d_pooled[s]);
        free(ref.params), free(ref.logit);
    }
    ember_world_destroy(w);
    return mpi_test_finish("mpi_pipeline");
}
