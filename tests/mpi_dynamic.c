/*
 * mpi_dynamic.c: dynamic tables over MPI (docs/dynamic.md), under mpirun
 * -np 1..4.  Every rank draws the same config and global batches and
 * trains its slice (even, random, zero-rank and one-rank splits):
 *
 *   - against the reference of dyn_util.h in a world of W (each owner's key
 *     rules, and a FIXED twin fed the translated ids): resident keys per
 *     rank, counters, freed keys, rows and state bit-identical after every
 *     step; outputs bit-identical in the `rows` exchange and within the
 *     pooled exchange's rounding in `pooled`; a step that fails on one
 *     owner (a full table) fails on every rank and changes nothing;
 *   - every fourth trial on the SSD tier;
 *   - world-size invariance: with room for every key and admission on first
 *     use, rows by key after training equal those of a world of one.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "dyn_util.h"
#include "mpi_util.h"
#include "tier/tier.h"

static char dir[256];

#define TRIALS 16
#define STEPS 12

static void trial(test_rng *r, int ix, ember_world *world)
{
    static const ember_evict_policy policies[] = {EMBER_EVICT_LRU, EMBER_EVICT_LFU, EMBER_EVICT_TTL,
                                                  EMBER_EVICT_NONE};
    int32_t W = ember_world_size(world), rank = mpi_rank_;
    ember_evict_policy evict = policies[ix % 4];
    int32_t admit = (int32_t)test_range(r, 0, 4);
    int64_t capacity = test_range(r, 3, 60);
    test_config *tc = stream_config(r, evict, admit, capacity);
    tc->tables[0].exchange = ix % 2 ? EMBER_EXCHANGE_POOLED : EMBER_EXCHANGE_ROWS;
    tc->cfg.world = world;
    tc->cfg.threads = 1 + ix % 2;
    if (ix % 4 == 3) { /* the SSD tier, a cache of a few rows */
        ember_table_config *d = &tc->tables[0];
        d->storage = EMBER_STORAGE_SSD;
        d->path = dir;
        d->cache_policy = EMBER_CACHE_LRU;
        d->cache_bytes = 200 * ember_ssd_slot_bytes(d->dim, ember_state_floats(d->optimizer.kind, d->dim),
                                                    EMBER_CACHE_LRU);
        tc->cfg.io_threads = 2;
    }
    stream s;
    stream_init(r, &s, capacity * W * test_range(r, 1, 5));
    mpi_context("trial %d (evict %d, admit %d, capacity %lld, %s exchange, optimizer %d, dedup %d, combiners %d %d)",
                ix, evict, admit, (long long)capacity, ix % 2 ? "pooled" : "rows", tc->tables[0].optimizer.kind,
                tc->cfg.dedup, tc->features[0].combiner, tc->features[1].combiner);
    ember_collection *A = mpi_create(&tc->cfg, "dynamic");
    dyn_sim sim;
    dyn_sim_init(&sim, tc, 0, W);
    int64_t pw = test_pooled_width(&tc->cfg);
    int bad = 0;
    for (int step = 1; step <= STEPS && A && !bad; step++) {
        test_batch g, lb, rb;
        int32_t B = (int32_t)test_range(r, 0, 24), start[65];
        make_batch(r, &s, B, (int32_t)test_range(r, 1, 5), (int)test_range(r, 0, 2), &g);
        mpi_split(r, B, W, (mpi_split_kind)test_range(r, 0, 4), start);
        test_sub_batch(&g.b, start[rank], start[rank + 1], &lb);
        int64_t gseq = test_sequence_size(&tc->cfg, &g.b), lseq = test_sequence_size(&tc->cfg, &lb.b);
        float *gout = calloc((size_t)(B * pw + gseq + 1), sizeof(float));
        float *lout = calloc((size_t)(lb.b.batch_size * pw + lseq + 1), sizeof(float));
        float *gd = malloc(sizeof(float) * (size_t)(B * pw + gseq + 1)), *lds = mpi_nan_buffer(lseq);
        test_fill(r, gd, B * pw + gseq, -1, 1);
        mpi_local_sequence(&tc->cfg, &g.b, start[rank], start[rank + 1], gd + B * pw, lds);
        ember_stats es;
        ember_collection_stats(A, &es);
        int want = dyn_sim_step(&sim, &tc->cfg, &g.b, start, (uint32_t)(es.steps + 1), &rb);
        int got = ember_forward(A, &lb.b, lout, lout + lb.b.batch_size * pw);
        MCHECK(got == want, "step %d: forward %d, reference %d (%s)", step, got, want, ember_errmsg(A));
        if (want == EMBER_OK && got == EMBER_OK) {
            MCHECK(ember_forward(sim.R, &rb.b, gout, gout + B * pw) == EMBER_OK, "twin forward");
            const float *mine = gout + (int64_t)start[rank] * pw;
            int64_t n = lb.b.batch_size * pw;
            float *lwant = mpi_nan_buffer(lseq);
            mpi_local_sequence(&tc->cfg, &g.b, start[rank], start[rank + 1], gout + B * pw, lwant);
            if (tc->tables[0].exchange == EMBER_EXCHANGE_ROWS) {
                MCHECK(mpi_first_diff(lout, mine, n) < 0 && mpi_first_diff(lout + n, lwant, lseq) < 0,
                       "step %d: outputs differ from the reference", step);
            } else {
                int close = 1;
                for (int64_t i = 0; i < n; i++)
                    close &= fabsf(lout[i] - mine[i]) <= 1e-5f * (1 + fabsf(mine[i]));
                MCHECK(close && mpi_first_diff(lout + n, lwant, lseq) < 0,
                       "step %d: pooled-exchange outputs beyond rounding of the reference", step);
            }
            free(lwant);
            MCHECK(ember_backward(A, gd + (int64_t)start[rank] * pw, lds) == EMBER_OK, "backward: %s",
                   ember_errmsg(A));
            MCHECK(ember_backward(sim.R, gd, gd + B * pw) == EMBER_OK, "twin backward");
            test_batch_free(&rb);
        }
        char what[96];
        snprintf(what, sizeof what, "trial %d step %d", ix, step);
        bad = dyn_sim_compare(&sim, A, rank, what);
        MCHECK(bad == 0, "step %d: %d mismatches with the reference", step, bad);
        bad = !mpi_all(!bad);
        free(gout);
        free(lout);
        free(gd);
        free(lds);
        test_batch_free(&g);
        test_batch_free(&lb);
    }
    if (rank == 0 && !bad)
        printf("trial %d: W %d evict %d admit %d capacity %lld: %d steps equal\n", ix, W, evict, admit,
               (long long)capacity, STEPS);
    ember_collection_destroy(A);
    dyn_sim_free(&sim);
    free(s.pool);
    test_config_free(tc);
}

/* Room for every key, admission on first use: rows by key as in a world of one. */
static void world_size_invariance(test_rng *r, ember_world *world)
{
    int32_t W = ember_world_size(world), rank = mpi_rank_;
    test_config *tc = stream_config(r, EMBER_EVICT_NONE, 1, 400);
    tc->tables[0].exchange = EMBER_EXCHANGE_ROWS;
    stream s;
    stream_init(r, &s, 300);
    test_config *one = test_config_copy(tc);
    tc->cfg.world = world;
    one->cfg.world = NULL;
    ember_collection *A = mpi_create(&tc->cfg, "dynamic"), *D = mpi_create(&one->cfg, "world of one");
    int64_t pw = test_pooled_width(&tc->cfg);
    for (int step = 0; step < 10 && A && D; step++) {
        test_batch g, lb;
        int32_t B = (int32_t)test_range(r, 1, 24), start[65];
        make_batch(r, &s, B, 4, 1, &g);
        mpi_split(r, B, W, MPI_SPLIT_RANDOM, start);
        test_sub_batch(&g.b, start[rank], start[rank + 1], &lb);
        int64_t gseq = test_sequence_size(&tc->cfg, &g.b), lseq = test_sequence_size(&tc->cfg, &lb.b);
        float *gout = calloc((size_t)(B * pw + gseq + 1), sizeof(float));
        float *lout = calloc((size_t)(lb.b.batch_size * pw + lseq + 1), sizeof(float));
        float *gd = malloc(sizeof(float) * (size_t)(B * pw + gseq + 1)), *lds = mpi_nan_buffer(lseq);
        test_fill(r, gd, B * pw + gseq, -1, 1);
        mpi_local_sequence(&tc->cfg, &g.b, start[rank], start[rank + 1], gd + B * pw, lds);
        MCHECK(ember_forward(A, &lb.b, lout, lout + lb.b.batch_size * pw) == EMBER_OK, "%s", ember_errmsg(A));
        MCHECK(ember_forward(D, &g.b, gout, gout + B * pw) == EMBER_OK, "%s", ember_errmsg(D));
        MCHECK(mpi_first_diff(lout, gout + (int64_t)start[rank] * pw, lb.b.batch_size * pw) < 0,
               "step %d: outputs differ from a world of one", step);
        MCHECK(ember_backward(A, gd + (int64_t)start[rank] * pw, lds) == EMBER_OK, "%s", ember_errmsg(A));
        MCHECK(ember_backward(D, gd, gd + B * pw) == EMBER_OK, "%s", ember_errmsg(D));
        free(gout);
        free(lout);
        free(gd);
        free(lds);
        test_batch_free(&g);
        test_batch_free(&lb);
    }
    int64_t n = 0, *keys = malloc(8 * 401);
    ember_dynamic_keys(D, 0, 400, keys, &n);
    int32_t dim = tc->tables[0].dim, sf = ember_state_floats(tc->tables[0].optimizer.kind, dim);
    float *a = malloc(sizeof(float) * (size_t)(n * (dim + sf) + 1)), *d = malloc(sizeof(float) * (size_t)(n * (dim + sf) + 1));
    int8_t *fa = malloc((size_t)n + 1), *fd = malloc((size_t)n + 1);
    MCHECK(ember_dynamic_read(A, 0, keys, n, a, a + n * dim, fa) == EMBER_OK, "read: %s", ember_errmsg(A));
    MCHECK(ember_dynamic_read(D, 0, keys, n, d, d + n * dim, fd) == EMBER_OK, "read");
    int64_t missing = 0;
    for (int64_t i = 0; i < n; i++)
        missing += !fa[i];
    MCHECK(missing == 0 && mpi_first_diff(a, d, n * (dim + sf)) < 0,
           "rows by key differ from a world of one (%lld keys, %lld missing)", (long long)n, (long long)missing);
    free(keys);
    free(a);
    free(d);
    free(fa);
    free(fd);
    ember_collection_destroy(A);
    ember_collection_destroy(D);
    free(s.pool);
    test_config_free(tc);
    test_config_free(one);
}

int main(int argc, char **argv)
{
    uint64_t seed = mpi_test_init(&argc, &argv);
    ember_world *world = mpi_world();
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ember-mpi-dynamic-%llu", tmp && *tmp ? tmp : "/tmp", (unsigned long long)seed);
    mkdir(dir, 0700);
    MPI_Barrier(MPI_COMM_WORLD);
    test_rng r = {seed};
    for (int i = 0; i < TRIALS; i++)
        trial(&r, i, world);
    world_size_invariance(&r, world);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mpi_rank_ == 0)
        rmdir(dir);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_dynamic");
}
