/*
 * mpi_tier.c: the SSD tier over MPI (docs/tiers.md): each rank tiers its own
 * shard, and a distributed collection on the SSD tier gives bit-identical
 * outputs, tables and optimizer state to the same distributed collection in
 * memory.  Run under mpirun -np 1..4.
 *
 * Every rank draws the same random config (placements ROW, COLUMN, TABLE,
 * REPLICATED or mixed, both exchanges, stacking, every optimizer, weights,
 * dedup), the same global batches (each rank trains its even slice), a
 * random policy (LRU, LFU, lookahead with ember_prefetch of the next step's
 * local slice) and a random cache from a few rows to the whole table; a
 * cache too small for one step is refused with EMBER_ELIMIT on every rank and
 * the trial runs again with a larger one.  Some tables train with half rows
 * and some Adagrad and Adam ones with half state (docs/precision.md).  memcmp, no tolerance: the tier
 * never changes the arithmetic, whatever the placement.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "mpi_util.h"
#include "tier/tier.h"

#define TRIALS 20
#define STEPS 4

static char dir[256];

/* util.h's random config, placed: one placement per trial (mixed every
 * fifth), random exchanges and owners. */
static test_config *random_config(test_rng *r, int trial, ember_world *world)
{
    int32_t W = ember_world_size(world);
    test_config *tc = test_config_random(r, 3, 4, 20, 600);
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->placement = trial % 5 < 4 ? (ember_placement)(trial % 5) : (ember_placement)test_range(r, 0, 4);
        tb->exchange = (ember_exchange)test_range(r, 0, 2);
        tb->owner = (int32_t)test_range(r, 0, W);
        if (!tb->quant_buckets && test_range(r, 0, 3) == 0) {
            tb->precision = test_range(r, 0, 2) ? EMBER_PRECISION_FP16 : EMBER_PRECISION_BF16;
            tb->rounding = test_range(r, 0, 3) ? EMBER_ROUND_STOCHASTIC : EMBER_ROUND_NEAREST;
        }
        if (!tb->quant_buckets && test_element_state(tb->optimizer.kind) &&
            test_range(r, 0, 2))
            tb->state_precision = test_range(r, 0, 2) ? EMBER_PRECISION_FP16 : EMBER_PRECISION_BF16;
    }
    tc->cfg.num_shards = 0; /* the world size */
    tc->cfg.threads = 1 + trial % 2;
    tc->cfg.world = world;
    return tc;
}

/* Runs the steps on c; outputs of step s in out[s].  The status of the first
 * failed call (agreed over the world), or EMBER_OK. */
static int run(ember_collection *c, const test_config *tc, test_batch *lb, mpi_grads *g, const int32_t *start,
               test_batch *gb, float **out, int prefetch)
{
    int32_t rank = mpi_rank_;
    int64_t Wp = test_pooled_width(&tc->cfg);
    for (int s = 0; s < STEPS; s++) {
        int64_t lS = test_sequence_size(&tc->cfg, &lb[s].b), lB = lb[s].b.batch_size;
        float *lds = mpi_nan_buffer(lS);
        mpi_local_sequence(&tc->cfg, &gb[s].b, start[rank], start[rank + 1], g[s].ds, lds);
        int rc = ember_forward(c, &lb[s].b, out[s], out[s] + lB * Wp);
        if (rc == EMBER_OK && prefetch && s + 1 < STEPS)
            MCHECK(ember_prefetch(c, &lb[s + 1].b) == EMBER_OK, "prefetch: %s", ember_errmsg(c));
        if (rc == EMBER_OK)
            rc = ember_backward(c, g[s].dp + start[rank] * Wp, lds);
        free(lds);
        if (rc != EMBER_OK)
            return rc;
    }
    return EMBER_OK;
}

static void trial(test_rng *r, int ix, ember_world *world)
{
    int32_t W = ember_world_size(world);
    test_config *tc = random_config(r, ix, world);
    test_batch gb[STEPS], lb[STEPS];
    mpi_grads g[STEPS];
    int32_t *start = mpi_starts();
    int32_t B = (int32_t)test_range(r, W, W < 64 ? 64 : 2 * W); /* a sample or more per rank */
    mpi_split(r, B, W, MPI_SPLIT_EVEN, start);
    for (int s = 0; s < STEPS; s++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = B;
        o.max_len = 6;
        o.weighted = (int)test_range(r, 0, 2);
        test_batch_make(r, &tc->cfg, &o, &gb[s]);
        test_sub_batch(&gb[s].b, start[mpi_rank_], start[mpi_rank_ + 1], &lb[s]);
        mpi_grads_make(r, &tc->cfg, &gb[s].b, -1.0f, &g[s]);
    }
    float *want[STEPS], *got[STEPS];
    for (int s = 0; s < STEPS; s++) {
        size_t n = (size_t)(lb[s].b.batch_size * test_pooled_width(&tc->cfg) + test_sequence_size(&tc->cfg, &lb[s].b));
        want[s] = calloc(n + 1, sizeof(float));
        got[s] = calloc(n + 1, sizeof(float));
    }
    mpi_context("trial %d placement mode %d, %d tables", ix, ix % 5, tc->cfg.num_tables);
    ember_collection *mem = mpi_create(&tc->cfg, "memory");
    int rc = mem ? run(mem, tc, lb, g, start, gb, want, 0) : EMBER_EINVAL;
    MCHECK(rc == EMBER_OK, "memory run: %s", mem ? ember_errmsg(mem) : "no collection");
    ember_cache_policy pol = (ember_cache_policy)test_range(r, 1, 4);
    int64_t cached = test_range(r, 1, 600);
    for (int attempt = 0; attempt < 12 && rc == EMBER_OK; attempt++, cached *= 2) {
        test_config *cc = test_config_copy(tc);
        cc->cfg.ssd_dir = dir;
        cc->cfg.ssd_policy = pol;
        for (int32_t t = 0; t < cc->cfg.num_tables; t++) {
            ember_table_config *t_ = &cc->tables[t];
            t_->storage = EMBER_STORAGE_SSD;
            t_->cache_bytes = ember_ssd_cache_bytes_for(cached, t_->rows, /* the whole table's bitmap: >= a rank's */
                                                        test_ssd_record_bytes(t_), pol);
        }
        ember_collection *ssd = mpi_create(&cc->cfg, "ssd");
        int src = ssd ? run(ssd, tc, lb, g, start, gb, got, pol == EMBER_CACHE_LOOKAHEAD) : EMBER_EINVAL;
        if (src == EMBER_ELIMIT) { /* agreed: every rank retries */
            MCHECK(strstr(ember_errmsg(ssd), "distinct rows cached at once"), "message %s", ember_errmsg(ssd));
            ember_collection_destroy(ssd);
            test_config_free(cc);
            continue;
        }
        MCHECK(src == EMBER_OK, "ssd run (policy %d, %lld rows cached): %s", (int)pol, (long long)cached,
               ssd ? ember_errmsg(ssd) : "no collection");
        if (mpi_all(src == EMBER_OK)) {
            for (int s = 0; s < STEPS; s++) {
                size_t n = (size_t)(lb[s].b.batch_size * test_pooled_width(&tc->cfg) +
                                    test_sequence_size(&tc->cfg, &lb[s].b));
                MCHECK(memcmp(want[s], got[s], n * sizeof(float)) == 0, "step %d: outputs differ (policy %d)", s,
                       (int)pol);
            }
            int same = test_tables_identical(mem, ssd, &tc->cfg); /* collective reads */
            MCHECK(same, "tables differ between the tiers (policy %d, %lld rows cached)", (int)pol,
                   (long long)cached);
            if (mpi_rank_ == 0)
                printf("trial %d: W %d, %d tables, policy %d, %lld rows cached, attempt %d\n", ix, W,
                       tc->cfg.num_tables, (int)pol, (long long)cached, attempt);
        }
        ember_collection_destroy(ssd);
        test_config_free(cc);
        break;
    }
    ember_collection_destroy(mem);
    for (int s = 0; s < STEPS; s++) {
        test_batch_free(&gb[s]);
        test_batch_free(&lb[s]);
        mpi_grads_free(&g[s]);
        free(want[s]);
        free(got[s]);
    }
    free(start);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    uint64_t seed = mpi_test_init(&argc, &argv);
    ember_world *world = mpi_world();
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ember-mpi-tier-%llu", tmp && *tmp ? tmp : "/tmp", (unsigned long long)seed);
    mkdir(dir, 0700); /* every rank: one of them creates it */
    MPI_Barrier(MPI_COMM_WORLD);
    test_rng r = {seed};
    for (int i = 0; i < TRIALS; i++)
        trial(&r, i, world);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mpi_rank_ == 0)
        rmdir(dir);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_tier");
}
