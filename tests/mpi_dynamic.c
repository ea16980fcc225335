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
 *   - every fourth trial on the SSD tier, every eighth with lookahead (each
 *     rank announces its slice of the coming batches);
 *   - announcements reach the owners' stores (rows read ahead), change
 *     nothing (a twin in memory), and skip keys without a row;
 *   - world-size invariance: with room for every key and admission on first
 *     use, rows by key after training equal those of a world of one, with
 *     fp32 rows and with fp16 and bf16 rows rounded stochastically (the
 *     bits follow the key, not its slot or rank);
 *   - half of the trials in memory train fp16 or bf16 rows rounded to
 *     nearest (the FIXED twin rounds alike);
 *   - the key exchange's bytes (8 per id to another rank's key, 4 back) count
 *     in ember_stats' last_bytes_sent and last_bytes_received.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "dyn_util.h"
#include "mpi_util.h"
#include "dyn/dyn.h"
#include "tier/tier.h"

static char dir[256];

#define TRIALS 16
#define STEPS 12


/* 1 on every rank when a and b (same world, or one of them a world of one
 * on every rank) hold the same keys with the same rows and state. */
static int same_by_key(const ember_collection *a, const ember_collection *b, int32_t dim, int32_t sf, int64_t max)
{
    int64_t n = 0, m = 0, *keys = malloc(8 * (size_t)(max + 1)), *all = malloc(8 * (size_t)(max * mpi_size_ + 1));
    int local_a = ember_world_size(ember_collection_world(a)) == 1 && mpi_size_ > 1;
    ember_dynamic_keys(local_a ? b : a, 0, max, keys, &n); /* this rank's keys of the distributed one */
    int64_t *counts = calloc((size_t)mpi_size_, 8);
    MPI_Allgather(&n, 1, MPI_INT64_T, counts, 1, MPI_INT64_T, MPI_COMM_WORLD);
    int *rc = calloc((size_t)mpi_size_, sizeof(int)), *rd = calloc((size_t)mpi_size_, sizeof(int));
    for (int r = 0; r < mpi_size_; r++) {
        rc[r] = (int)counts[r];
        rd[r] = r ? rd[r - 1] + rc[r - 1] : 0;
        m += counts[r];
    }
    MPI_Allgatherv(keys, (int)n, MPI_INT64_T, all, rc, rd, MPI_INT64_T, MPI_COMM_WORLD);
    float *x = malloc(sizeof(float) * (size_t)(m * (dim + sf) + 1)), *y = malloc(sizeof(float) * (size_t)(m * (dim + sf) + 1));
    int8_t *fx = malloc((size_t)m + 1), *fy = malloc((size_t)m + 1);
    int ok = ember_dynamic_read(a, 0, all, m, x, x + m * dim, fx) == EMBER_OK &&
             ember_dynamic_read(b, 0, all, m, y, y + m * dim, fy) == EMBER_OK;
    ok = ok && !memcmp(fx, fy, (size_t)m) && mpi_first_diff(x, y, m * (dim + sf)) < 0;
    int64_t na = 0, nb = 0; /* the same number of keys overall */
    ember_dynamic_stats sa, sb;
    ember_table_dynamic_stats(a, 0, &sa);
    ember_table_dynamic_stats(b, 0, &sb);
    na = sa.resident, nb = sb.resident;
    int64_t ta = na, tb = nb;
    if (ember_world_size(ember_collection_world(a)) > 1)
        MPI_Allreduce(&na, &ta, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (ember_world_size(ember_collection_world(b)) > 1)
        MPI_Allreduce(&nb, &tb, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    ok = ok && ta == tb && ta == m;
    free(keys);
    free(all);
    free(counts);
    free(rc);
    free(rd);
    free(x);
    free(y);
    free(fx);
    free(fy);
    return mpi_all(ok);
}

/* Saves c to root (collective) and opens it on every rank. */
static ember_checkpoint *save_open(ember_collection *c, const char *root, int64_t step)
{
    ember_save_options so = {step, 0, NULL, 0, NULL, 0};
    int st = ember_save(c, root, &so);
    MCHECK(st == EMBER_OK, "save: %s", ember_errmsg(c));
    MPI_Barrier(MPI_COMM_WORLD);
    ember_checkpoint *ck = NULL;
    MCHECK(ember_checkpoint_open(root, &ck) == EMBER_OK, "open: %s", ember_errmsg(NULL));
    return ck;
}

/* One step's input: a global batch g of B samples, split over the ranks
 * at start[], this rank's slice lb, output buffers for both, and a global
 * gradient gd drawn from r (the same on every rank) with this rank's
 * sequence part in lds; ld = this rank's pooled part of gd. */
typedef struct step_io {
    test_batch g, lb;
    int32_t *start; /* [W + 1] */
    int64_t gseq, lseq;
    float *gout, *lout, *gd, *lds, *ld;
} step_io;

static void step_io_make(test_rng *r, stream *s, const test_config *tc, int32_t B, int32_t max_len, int weighted,
                         mpi_split_kind split, step_io *io)
{
    int32_t W = mpi_size_, rank = mpi_rank_;
    int64_t pw = test_pooled_width(&tc->cfg);
    make_batch(r, s, B, max_len, weighted, &io->g);
    io->start = mpi_starts();
    mpi_split(r, B, W, split, io->start);
    test_sub_batch(&io->g.b, io->start[rank], io->start[rank + 1], &io->lb);
    io->gseq = test_sequence_size(&tc->cfg, &io->g.b);
    io->lseq = test_sequence_size(&tc->cfg, &io->lb.b);
    io->gout = calloc((size_t)(B * pw + io->gseq + 1), sizeof(float));
    io->lout = calloc((size_t)(io->lb.b.batch_size * pw + io->lseq + 1), sizeof(float));
    io->gd = malloc(sizeof(float) * (size_t)(B * pw + io->gseq + 1));
    io->lds = mpi_nan_buffer(io->lseq);
    test_fill(r, io->gd, B * pw + io->gseq, -1, 1);
    mpi_local_sequence(&tc->cfg, &io->g.b, io->start[rank], io->start[rank + 1], io->gd + B * pw, io->lds);
    io->ld = io->gd + (int64_t)io->start[rank] * pw;
}

static void step_io_free(step_io *io)
{
    free(io->gout);
    free(io->lout);
    free(io->gd);
    free(io->lds);
    free(io->start);
    test_batch_free(&io->g);
    test_batch_free(&io->lb);
}

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
    if (ix % 4 == 1 || ix % 4 == 2) { /* half rows to nearest: the twin's rows round alike */
        tc->tables[0].precision = ix % 4 == 1 ? EMBER_PRECISION_FP16 : EMBER_PRECISION_BF16;
        tc->tables[0].rounding = EMBER_ROUND_NEAREST;
    }
    tc->cfg.world = world;
    tc->cfg.threads = 1 + ix % 2;
    int32_t ahead = 0; /* batches announced ahead (lookahead) */
    if (ix % 4 == 3) { /* the SSD tier, a cache of a few rows; every other one announces its batches */
        ember_table_config *d = &tc->tables[0];
        d->storage = EMBER_STORAGE_SSD;
        d->path = dir;
        d->cache_policy = ix % 8 == 7 ? EMBER_CACHE_LOOKAHEAD : EMBER_CACHE_LRU;
        if (ix % 8 == 3) { /* half rows there too, in the cache's slots and the store file */
            d->precision = EMBER_PRECISION_FP16;
            d->rounding = EMBER_ROUND_NEAREST;
        }
        d->cache_bytes = ember_ssd_cache_bytes_for(200, d->capacity, test_ssd_record_bytes(d), d->cache_policy);
        tc->cfg.io_threads = 2;
        tc->cfg.lookahead = (int32_t)test_range(r, 1, 4);
        ahead = d->cache_policy == EMBER_CACHE_LOOKAHEAD ? tc->cfg.lookahead : 0;
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
    step_io ios[STEPS + 1]; /* every step's input, drawn first: announcements need the later ones */
    for (int step = 1; step <= STEPS; step++) {
        int32_t B = (int32_t)test_range(r, 0, 24), max_len = (int32_t)test_range(r, 1, 5);
        int weighted = (int)test_range(r, 0, 2);
        step_io_make(r, &s, tc, B, max_len, weighted, (mpi_split_kind)test_range(r, 0, 4), &ios[step]);
    }
    for (int step = 1; step <= STEPS && A && !bad; step++) {
        step_io io = ios[step];
        test_batch rb;
        int32_t B = io.g.b.batch_size;
        const int32_t *start = io.start;
        int64_t lseq = io.lseq;
        float *gout = io.gout, *lout = io.lout;
        const test_batch *g = &io.g, *lb = &io.lb;
        ember_stats es;
        ember_collection_stats(A, &es);
        int want = dyn_sim_step(&sim, &tc->cfg, &g->b, start, (uint32_t)(es.steps + 1), &rb);
        int got = ember_forward(A, &lb->b, lout, lout + lb->b.batch_size * pw);
        MCHECK(got == want, "step %d: forward %d, reference %d (%s)", step, got, want, ember_errmsg(A));
        for (int k = 1; k <= ahead && step + k <= STEPS; k++) /* each rank its slice of what is not yet announced */
            if (step == 1 || k == ahead)
                MCHECK(ember_prefetch(A, &ios[step + k].lb.b) == EMBER_OK, "prefetch: %s", ember_errmsg(A));
        if (want == EMBER_OK && got == EMBER_OK) {
            MCHECK(ember_forward(sim.R, &rb.b, gout, gout + B * pw) == EMBER_OK, "twin forward");
            const float *mine = gout + (int64_t)start[rank] * pw;
            int64_t n = lb->b.batch_size * pw;
            float *lwant = mpi_nan_buffer(lseq);
            mpi_local_sequence(&tc->cfg, &g->b, start[rank], start[rank + 1], gout + B * pw, lwant);
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
            MCHECK(ember_backward(A, io.ld, io.lds) == EMBER_OK, "backward: %s", ember_errmsg(A));
            MCHECK(ember_backward(sim.R, io.gd, io.gd + B * pw) == EMBER_OK, "twin backward");
            test_batch_free(&rb);
        }
        char what[96];
        snprintf(what, sizeof what, "trial %d step %d", ix, step);
        bad = dyn_sim_compare(&sim, A, rank, what);
        MCHECK(bad == 0, "step %d: %d mismatches with the reference", step, bad);
        bad = !mpi_all(!bad);
    }
    for (int step = 1; step <= STEPS; step++)
        step_io_free(&ios[step]);
    if (rank == 0 && !bad)
        printf("trial %d: W %d evict %d admit %d capacity %lld: %d steps equal\n", ix, W, evict, admit,
               (long long)capacity, STEPS);
    if (A && !bad) { /* save, load into a twin of the same world, train both on: equal, evictions included */
        char root[300];
        snprintf(root, sizeof root, "%s/resume-%d", dir, ix);
        ember_checkpoint *ck = save_open(A, root, STEPS);
        test_config *tc2 = test_config_copy(tc);
        char dir2[300];
        snprintf(dir2, sizeof dir2, "%s/b", dir);
        mkdir(dir2, 0700);
        if (tc2->tables[0].storage == EMBER_STORAGE_SSD)
            tc2->tables[0].path = dir2;
        ember_collection *B2 = mpi_create(&tc2->cfg, "resumed");
        MCHECK(B2 && ember_load(B2, ck) == EMBER_OK, "load: %s", B2 ? ember_errmsg(B2) : "");
        int32_t dim = tc->tables[0].dim, sf = ember_state_floats(tc->tables[0].optimizer.kind, dim);
        for (int step = 0; step < 6 && B2; step++) {
            step_io io;
            step_io_make(r, &s, tc, (int32_t)test_range(r, 0, 24), 3, 0, MPI_SPLIT_EVEN, &io);
            int64_t lb_n = io.lb.b.batch_size * pw, n = lb_n + io.lseq;
            float *o2 = calloc((size_t)n + 1, sizeof(float));
            int s1 = ember_forward(A, &io.lb.b, io.lout, io.lout + lb_n);
            int s2 = ember_forward(B2, &io.lb.b, o2, o2 + lb_n);
            MCHECK(s1 == s2 && mpi_first_diff(io.lout, o2, n) < 0, "resumed step %d: %d/%d or outputs differ", step,
                   s1, s2);
            if (s1 == EMBER_OK && s2 == EMBER_OK) {
                MCHECK(ember_backward(A, io.ld, io.lds) == EMBER_OK, "%s", ember_errmsg(A));
                MCHECK(ember_backward(B2, io.ld, io.lds) == EMBER_OK, "%s", ember_errmsg(B2));
            }
            free(o2);
            step_io_free(&io);
        }
        MCHECK(B2 && same_by_key(A, B2, dim, sf, capacity), "a resumed dynamic table differs from the original");
        ember_collection_destroy(B2);
        test_config_free(tc2);
        ember_checkpoint_close(ck);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            char cmd[400];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
            MCHECK(system(cmd) == 0, "rm");
        }
    }
    ember_collection_destroy(A);
    dyn_sim_free(&sim);
    free(s.pool);
    test_config_free(tc);
}

/* The most distinct keys of the dynamic table (features F_POOLED and
 * F_SECOND) that one owner of the W gets in one of the global batches. */
static int64_t owner_step_keys(const step_io *ios, int nsteps, int32_t W)
{
    int64_t most = 0, *count = mpi_alloc((size_t)W, sizeof *count);
    for (int step = 0; step < nsteps; step++) {
        const ember_batch *g = &ios[step].g.b;
        int64_t n = 0; /* the ids of F_POOLED and F_SECOND come first */
        for (int64_t i = 0; i < 2 * (int64_t)g->batch_size; i++)
            n += g->lengths[i];
        memset(count, 0, sizeof *count * (size_t)W);
        for (int64_t i = 0; i < n; i++) {
            int64_t j = 0;
            while (j < i && g->ids[j] != g->ids[i])
                j++;
            if (j == i && ++count[ember_dyn_owner(g->ids[i], W)] > most)
                most = count[ember_dyn_owner(g->ids[i], W)];
        }
    }
    free(count);
    return most;
}

/* Announcements travel: each rank announces its slice of the next batch,
 * the keys reach their owners (with the fixed table's rows in the same
 * blocks) and the owners read rows ahead; outputs and tables equal a twin
 * in memory.  Keys without a row announced on every rank: no error. */
static void lookahead_owners(test_rng *r, ember_world *world)
{
    int32_t W = mpi_size_, rank = mpi_rank_;
    test_config *tc = stream_config(r, EMBER_EVICT_LRU, 1, 64);
    tc->cfg.world = world;
    tc->cfg.lookahead = 2;
    tc->cfg.io_threads = 2;
    test_config *mem = test_config_copy(tc);
    stream s;
    stream_init(r, &s, 100 * W);
    int64_t pw = test_pooled_width(&tc->cfg);
    step_io ios[31];
    for (int step = 0; step <= 30; step++) /* 2 samples per rank of up to 2 ids per feature */
        step_io_make(r, &s, tc, 2 * W, 2, 0, MPI_SPLIT_EVEN, &ios[step]);
    /* dynamic: room for the most keys one owner gets in one step (~10), far fewer than the 40..64 keys a
     * rank holds (capacity 64); not room for all of a step's 8 W ids on one owner, which from W = 8 on is
     * the whole capacity: nothing would be read ahead.  Fixed: the whole table */
    int64_t step_keys = owner_step_keys(ios, 31, W);
    for (int32_t t = 0; t < 2; t++) {
        ember_table_config *x = &tc->tables[t];
        int64_t rows = t ? 40 : step_keys + 2;
        x->storage = EMBER_STORAGE_SSD;
        x->path = dir;
        x->cache_policy = EMBER_CACHE_LOOKAHEAD;
        x->cache_bytes = ember_ssd_cache_bytes_for(rows, t ? x->rows : x->capacity, test_ssd_record_bytes(x),
                                                   EMBER_CACHE_LOOKAHEAD);
    }
    mpi_context("lookahead owners (cache of %lld rows of the dynamic table)", (long long)(step_keys + 2));
    ember_collection *A = mpi_create(&tc->cfg, "lookahead"), *M = mpi_create(&mem->cfg, "memory twin");
    for (int step = 0; step < 30 && A && M; step++) {
        step_io *io = &ios[step];
        int64_t n = io->lb.b.batch_size * pw + io->lseq;
        float *o2 = calloc((size_t)n + 1, sizeof(float));
        int64_t lb_n = io->lb.b.batch_size * pw;
        MCHECK(ember_forward(A, &io->lb.b, io->lout, io->lout + lb_n) == EMBER_OK, "%s", ember_errmsg(A));
        MCHECK(ember_forward(M, &io->lb.b, o2, o2 + lb_n) == EMBER_OK, "%s", ember_errmsg(M));
        MCHECK(mpi_first_diff(io->lout, o2, n) < 0, "step %d: outputs differ from the memory twin", step);
        MCHECK(ember_prefetch(A, &ios[step + 1].lb.b) == EMBER_OK, "prefetch: %s", ember_errmsg(A));
        MCHECK(ember_backward(A, io->ld, io->lds) == EMBER_OK, "%s", ember_errmsg(A));
        MCHECK(ember_backward(M, io->ld, io->lds) == EMBER_OK, "%s", ember_errmsg(M));
        free(o2);
    }
    if (A && M) {
        int32_t dim = tc->tables[0].dim, sf = ember_state_floats(tc->tables[0].optimizer.kind, dim);
        MCHECK(same_by_key(A, M, dim, sf, 64), "announced keys changed the tables");
        ember_tier_stats ts;
        MCHECK(ember_table_tier_stats(A, 0, &ts) == EMBER_OK, "tier stats");
        int64_t loads = ts.prefetch_loads, all = 0;
        MPI_Allreduce(&loads, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        MCHECK(all > 0, "no announced key's row was read ahead on any rank (this rank: %lld accesses, %lld loads)",
               (long long)ts.accesses, (long long)ts.demand_loads);
        int64_t fresh[2] = {0x7e57000000000000LL + rank, -1 - rank};
        int32_t len[3] = {2, 0, 0};
        ember_batch fb = {1, 3, len, fresh, NULL, 2};
        MCHECK(ember_prefetch(A, &fb) == EMBER_OK, "announcing keys without a row: %s", ember_errmsg(A));
    }
    for (int step = 0; step <= 30; step++)
        step_io_free(&ios[step]);
    ember_collection_destroy(A);
    ember_collection_destroy(M);
    free(s.pool);
    test_config_free(tc);
    test_config_free(mem);
}

/* Room for every key, admission on first use: rows by key as in a world of one. */
static void world_size_invariance(test_rng *r, ember_world *world, ember_row_precision precision)
{
    int32_t rank = mpi_rank_;
    test_config *tc = stream_config(r, EMBER_EVICT_NONE, 1, 400);
    tc->tables[0].exchange = EMBER_EXCHANGE_ROWS;
    tc->tables[0].precision = precision; /* half rows: stochastic rounding's bits follow the key */
    tc->tables[0].rounding = EMBER_ROUND_STOCHASTIC;
    if (test_element_state(tc->tables[0].optimizer.kind)) /* the state's too */
        tc->tables[0].state_precision = precision;
    mpi_context("world-size invariance, %s rows", ember_precision_name(precision));
    stream s;
    stream_init(r, &s, 300);
    test_config *one = test_config_copy(tc);
    tc->cfg.world = world;
    one->cfg.world = NULL;
    ember_collection *A = mpi_create(&tc->cfg, "dynamic"), *D = mpi_create(&one->cfg, "world of one");
    int64_t pw = test_pooled_width(&tc->cfg);
    for (int step = 0; step < 10 && A && D; step++) {
        step_io io;
        int32_t B = (int32_t)test_range(r, 1, 24);
        step_io_make(r, &s, tc, B, 4, 1, MPI_SPLIT_RANDOM, &io);
        int64_t lb_n = io.lb.b.batch_size * pw;
        MCHECK(ember_forward(A, &io.lb.b, io.lout, io.lout + lb_n) == EMBER_OK, "%s", ember_errmsg(A));
        MCHECK(ember_forward(D, &io.g.b, io.gout, io.gout + B * pw) == EMBER_OK, "%s", ember_errmsg(D));
        MCHECK(mpi_first_diff(io.lout, io.gout + (int64_t)io.start[rank] * pw, lb_n) < 0,
               "step %d: outputs differ from a world of one", step);
        MCHECK(ember_backward(A, io.ld, io.lds) == EMBER_OK, "%s", ember_errmsg(A));
        MCHECK(ember_backward(D, io.gd, io.gd + B * pw) == EMBER_OK, "%s", ember_errmsg(D));
        step_io_free(&io);
    }
    if (A && D) { /* W -> 1 and 1 -> W through checkpoints: the same rows by key */
        char ra[300], rd[300];
        snprintf(ra, sizeof ra, "%s/world", dir);
        snprintf(rd, sizeof rd, "%s/one-%d", dir, rank);
        ember_checkpoint *cka = save_open(A, ra, 10);
        ember_save_options so = {10, 0, NULL, 0, NULL, 0};
        MCHECK(ember_save(D, rd, &so) == EMBER_OK, "save: %s", ember_errmsg(D)); /* each rank its own copy */
        ember_checkpoint *ckd = NULL;
        MCHECK(ember_checkpoint_open(rd, &ckd) == EMBER_OK, "open %s", rd);
        ember_collection *D2 = mpi_create(&one->cfg, "world of one from W"), *A2 = mpi_create(&tc->cfg, "W from one");
        MCHECK(D2 && ember_load(D2, cka) == EMBER_OK, "load W -> 1: %s", D2 ? ember_errmsg(D2) : "");
        MCHECK(A2 && ember_load(A2, ckd) == EMBER_OK, "load 1 -> W: %s", A2 ? ember_errmsg(A2) : "");
        int32_t dim = tc->tables[0].dim, sf = ember_state_floats(tc->tables[0].optimizer.kind, dim);
        MCHECK(A2 && D2 && same_by_key(A2, D2, dim, sf, 400), "resharded checkpoints differ by key");
        MCHECK(A2 && same_by_key(A, A2, dim, sf, 400), "1 -> W differs from the original W");
        ember_collection_destroy(D2);
        ember_collection_destroy(A2);
        ember_checkpoint_close(cka);
        ember_checkpoint_close(ckd);
        MPI_Barrier(MPI_COMM_WORLD);
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'%s%s%s", rd, rank == 0 ? " '" : "", rank == 0 ? ra : "", rank == 0 ? "'" : "");
        MCHECK(system(cmd) == 0, "rm");
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

/* Bytes of one forward on a fresh collection of one dynamic table whose
 * keys (distinct) all need more occurrences before a row. */
static void forward_bytes(const test_config *tc, const ember_batch *lb, int64_t *sent, int64_t *received)
{
    ember_collection *c = mpi_create(&tc->cfg, "key bytes");
    float out[64];
    *sent = *received = -1;
    if (c && ember_forward(c, lb, out, NULL) == EMBER_OK) {
        ember_stats st;
        ember_collection_stats(c, &st);
        *sent = st.last_bytes_sent;
        *received = st.last_bytes_received;
    }
    MCHECK(*sent >= 0, "key bytes: forward: %s", c ? ember_errmsg(c) : "no collection");
    ember_collection_destroy(c);
}

/* The key exchange counts in ember_stats' bytes.  With no key holding a row
 * the routed part of the forward is the same whatever the keys (every id is
 * "no row"), so a batch whose keys all belong to the rank that holds them
 * (no key exchange) against the same bags with random keys differs by
 * exactly 8 bytes per id sent to its key's owner and 4 per id received (its
 * slot, or "none", back). */
static void key_bytes(test_rng *r, ember_world *world)
{
    int32_t W = mpi_size_, rank = mpi_rank_;
    test_config *tc = test_config_new(1, 1);
    tc->tables[0].kind = EMBER_TABLE_DYNAMIC;
    tc->tables[0].rows = 0;
    tc->tables[0].capacity = 100;
    tc->tables[0].admit_after = 3;
    tc->tables[0].dim = 4;
    tc->cfg.world = world;
    tc->cfg.seed = test_next(r);
    mpi_context("key bytes");
    enum { PER_RANK = 6, MAX_LEN = 3 };
    int32_t B = PER_RANK * W, *lengths = mpi_alloc((size_t)B, sizeof *lengths);
    int64_t *ids = mpi_alloc((size_t)B * MAX_LEN, sizeof *ids), *local = mpi_alloc(PER_RANK * MAX_LEN, sizeof *local);
    int64_t n = 0, lo = 0, hi = 0, away = 0, in = 0;
    for (int32_t b = 0; b < B; b++) { /* the global batch, the same on every rank */
        lengths[b] = (int32_t)test_range(r, 0, MAX_LEN + 1);
        if (b == PER_RANK * rank)
            lo = n;
        for (int32_t k = 0; k < lengths[b]; k++, n++)
            ids[n] = (int64_t)test_next(r); /* distinct: none reaches admit_after in one batch */
        if (b == PER_RANK * (rank + 1) - 1)
            hi = n;
    }
    for (int64_t i = 0; i < n; i++) {
        int mine = i >= lo && i < hi, owned = (int32_t)ember_dyn_owner(ids[i], W) == rank;
        away += mine && !owned;
        in += !mine && owned;
    }
    for (int64_t i = lo, key = 0; i < hi; i++) { /* the same bags, keys of this rank */
        while ((int32_t)ember_dyn_owner(key, W) != rank)
            key++;
        local[i - lo] = key++;
    }
    ember_batch lb = {PER_RANK, 1, lengths + PER_RANK * rank, ids + lo, NULL, hi - lo};
    ember_batch ob = lb;
    ob.ids = local;
    int64_t s_keys, r_keys, s_own, r_own;
    forward_bytes(tc, &lb, &s_keys, &r_keys);
    forward_bytes(tc, &ob, &s_own, &r_own);
    MCHECK(s_keys - s_own == 8 * away + 4 * in && r_keys - r_own == 4 * away + 8 * in,
           "key bytes: sent %lld and received %lld more than without a key exchange, want %lld and %lld (%lld "
           "ids away, %lld in)", (long long)(s_keys - s_own), (long long)(r_keys - r_own),
           (long long)(8 * away + 4 * in), (long long)(4 * away + 8 * in), (long long)away, (long long)in);
    free(lengths), free(ids), free(local);
    test_config_free(tc);
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
    lookahead_owners(&r, world);
    world_size_invariance(&r, world, EMBER_PRECISION_FP32);
    world_size_invariance(&r, world, EMBER_PRECISION_FP16);
    world_size_invariance(&r, world, EMBER_PRECISION_BF16);
    key_bytes(&r, world);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mpi_rank_ == 0) {
        char b[300];
        snprintf(b, sizeof b, "%s/b", dir);
        rmdir(b);
        rmdir(dir);
    }
    ember_world_destroy(world);
    return mpi_test_finish("mpi_dynamic");
}
