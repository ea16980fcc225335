/*
 * mpi_dynbundle.c: bundles of dynamic tables over MPI (docs/inference.md,
 * "Dynamic tables in bundles"), under mpirun -np 1..4 (and 6, 8 by
 * scripts/mpi_worlds.sh).  Every rank trains a model with two dynamic tables
 * (full, so keys were evicted; one with simulated quantization) and a fixed
 * table in this world, rank 0 exports it at fp32 and int8, and every rank
 * opens the checkpoint and both bundles as predictors of this world.  Then,
 * on a global random batch of known and unknown keys (rank r scores its
 * slice, one rank's slice empty now and then):
 *
 *   - each rank holds exactly the bundle's keys it owns (mix64(key) mod W),
 *     together every key once, and scoring admits none;
 *   - the fp32 bundle scores as the checkpoint, bit for bit, in this world;
 *   - the int8 bundle's pooled embeddings equal, bit for bit, the naive
 *     dequantize-and-pool of its files (bundle_util.h) over the slice, but
 *     for the table under the pooled exchange (the owners' partial sums
 *     round otherwise: within 1e-6; the other dynamic table and the fixed
 *     one use the rows exchange);
 *   - the int8 bundle's scores equal, within 1e-6, those of a world of one
 *     over the whole batch (the dense model may see other chunks).
 */
#include <sys/stat.h>
#include <unistd.h>

#include "mpi_util.h"
#include "bundle_util.h"
#include "dyn/dyn.h"
#include "ember-train.h"
#include "infer/predictor.h"

#define GLOBAL_B 160

static char dir[256];

/* The model, trained in this world; rank 0 exports it (fp32, int8). */
static int train_and_export(ember_world *w)
{
    char cfg[300], ck[300], b[300];
    snprintf(cfg, sizeof cfg, "%s/dyn.cfg", dir);
    snprintf(ck, sizeof ck, "%s/ck", dir);
    if (mpi_rank_ == 0) {
        FILE *f = fopen(cfg, "w");
        fprintf(f, "seed = 5;\n"
                   "tables = (\n"
                   "  { name = \"user\"; kind = \"dynamic\"; keys = 3000; capacity = 120; admit_after = 1; dim = 8;"
                   " placement = \"row\"; exchange = \"pooled\"; },\n"
                   "  { name = \"query\"; kind = \"dynamic\"; keys = 1000; capacity = 60; admit_after = 2; evict = \"lfu\";"
                   " dim = 8; placement = \"row\"; exchange = \"rows\";\n"
                   "    quantization = { num_buckets = 16; low = -0.1; high = 0.1; }; },\n"
                   "  { name = \"item\"; rows = 50; dim = 8; } );\n"
                   "features = (\n"
                   "  { name = \"fu\"; table = \"user\"; pooling = 2; combiner = \"mean\"; },\n"
                   "  { name = \"fq\"; table = \"query\"; pooling = 2; combiner = \"sqrtn\"; },\n"
                   "  { name = \"fi\"; table = \"item\"; pooling = 1; } );\n"
                   "data = { dist = \"zipf\"; alpha = 1.1; seed = 1; };\n"
                   "train = { steps = 6; micro_batch = 32; eval_samples = 64; metrics = \"\"; plot = \"\"; };\n"
                   "model = { bottom = [8]; top = [8]; };\n");
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ember_train_overrides o;
    ember_train_overrides_init(&o);
    o.checkpoint_dir = ck;
    o.threads = 1;
    ember_trainer *t = NULL;
    int st = ember_trainer_open(cfg, &o, w, NULL, NULL, &t);
    if (st == EMBER_OK)
        st = ember_trainer_run(t);
    MCHECK(st == EMBER_OK, "train: %s", ember_errmsg(t));
    ember_trainer_close(t);
    if (!mpi_all(st == EMBER_OK))
        return 0;
    const char *enc[] = {"fp32", "int8"};
    for (int e = 0; e < 2 && mpi_rank_ == 0; e++) {
        snprintf(b, sizeof b, "%s/b-%s", dir, enc[e]);
        st = ember_bundle_write(ck, b, enc[e], NULL, 0);
        MCHECK(st == EMBER_OK, "export %s: %s", enc[e], ember_errmsg(NULL));
    }
    return mpi_all(st == EMBER_OK);
}

static ember_predictor *open_model(const char *name, ember_world *w)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ember_predictor_options o = {w, 1};
    ember_predictor *p = NULL;
    int st = ember_predictor_open(path, &o, &p);
    MCHECK(st == EMBER_OK, "open %s: %s", name, ember_errmsg(NULL));
    return p;
}

/* Each rank holds the keys of table t it owns, every key once over the world. */
static void check_keys(ember_predictor *p, const bundle_table *bt, int32_t t, const char *name)
{
    ember_collection *c = predictor_collection(p);
    ember_dynamic_stats ds;
    MCHECK(ember_table_dynamic_stats(c, t, &ds) == EMBER_OK, "%s: stats", name);
    int64_t *mine = malloc(sizeof(int64_t) * (size_t)(ds.resident + 1)), n = 0, owned = 0, total = 0;
    MCHECK(ember_dynamic_keys(c, t, ds.resident, mine, &n) == EMBER_OK, "%s: keys", name);
    for (int64_t i = 0; i < bt->rows; i++)
        owned += (int32_t)ember_dyn_owner(bt->keys[i], mpi_size_) == mpi_rank_;
    int found = 1;
    for (int64_t i = 0; i < n; i++) {
        found &= (int32_t)ember_dyn_owner(mine[i], mpi_size_) == mpi_rank_ && bundle_row(bt, mine[i]) != NULL;
    }
    MCHECK(n == owned && found && ds.admitted == 0, "%s: table %d: this rank holds %lld keys (all its own: %d), "
           "owns %lld of the bundle's, admitted %lld", name, (int)t, (long long)n, found, (long long)owned,
           (long long)ds.admitted);
    MPI_Allreduce(&n, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MCHECK(total == bt->rows, "%s: table %d: %lld keys over the world, the bundle %lld", name, (int)t,
           (long long)total, (long long)bt->rows);
    free(mine);
}

/* Pooled [B][width] against the reference: bit for bit, but for a ROW
 * table under the pooled exchange in a world of more than one, whose
 * owners' partial sums round otherwise: within 1e-6 there (every value
 * here is below 1; a row missed or misread is off by about 0.01). */
static int same_pooled(const ember_collection_config *cc, const float *got, const float *want, int32_t B,
                       int64_t width)
{
    int ok = 1;
    for (int32_t f = 0, col = 0; f < cc->num_features; col += cc->tables[cc->features[f].table].dim, f++) {
        const ember_table_config *t = &cc->tables[cc->features[f].table];
        int split = mpi_size_ > 1 && t->placement == EMBER_PLACE_ROW && t->exchange == EMBER_EXCHANGE_POOLED;
        for (int32_t s = 0; s < B; s++)
            for (int32_t j = 0; j < t->dim; j++) {
                float a = got[s * width + col + j], b = want[s * width + col + j];
                ok &= split ? fabsf(a - b) <= 1e-6f : !memcmp(&a, &b, sizeof a);
            }
    }
    return ok;
}

int main(int argc, char **argv)
{
    uint64_t seed = mpi_test_init(&argc, &argv);
    test_rng r = {seed};
    ember_world *w = mpi_world();
    long pid = (long)getpid();
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(dir, sizeof dir, "/tmp/ember-mpi-dynbundle-%ld", pid);
    if (mpi_rank_ == 0)
        MCHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!train_and_export(w))
        goto done;
    ember_predictor *ck = open_model("ck", w), *b32 = open_model("b-fp32", w), *b8 = open_model("b-int8", w);
    ember_predictor *one = NULL;
    ember_predictor_options o1 = {NULL, 1};
    char path[300];
    snprintf(path, sizeof path, "%s/b-int8", dir);
    MCHECK(ember_predictor_open(path, &o1, &one) == EMBER_OK, "open int8 alone: %s", ember_errmsg(NULL));
    if (!mpi_all(ck && b32 && b8 && one))
        goto close;
    const ember_collection_config *cc = ember_predictor_config(b8);
    int32_t T = cc->num_tables, F = cc->num_features, nd = ember_predictor_num_dense(b8);
    int64_t width = 0;
    for (int32_t f = 0; f < F; f++)
        width += cc->tables[cc->features[f].table].dim;
    bundle_table bt[3];
    read_bundle(path, bt, T);
    for (int32_t t = 0; t < T; t++)
        if (bt[t].dynamic)
            check_keys(b8, &bt[t], t, "int8");
    for (int round = 0; round < 4; round++) {
        mpi_context("round %d", round);
        /* the same global batch on every rank: known keys, unknown keys, rows */
        int32_t lengths[3 * GLOBAL_B];
        int64_t ids[3 * GLOBAL_B * 3], n = 0;
        for (int32_t f = 0; f < F; f++) {
            const bundle_table *t = &bt[cc->features[f].table];
            for (int32_t s = 0; s < GLOBAL_B; s++) {
                lengths[f * GLOBAL_B + s] = (int32_t)test_range(&r, 0, 4);
                for (int32_t i = 0; i < lengths[f * GLOBAL_B + s]; i++)
                    ids[n++] = !t->dynamic ? test_range(&r, 0, t->rows)
                               : test_range(&r, 0, 2) ? t->keys[test_range(&r, 0, t->rows)]
                                                      : (int64_t)test_next(&r);
            }
        }
        float dense[GLOBAL_B * 16];
        test_fill(&r, dense, (int64_t)GLOBAL_B * nd, -1, 1);
        /* this rank's slice [s0, s1): even, or (round 3) all on the last rank */
        int32_t s0 = round == 3 ? (mpi_rank_ == mpi_size_ - 1 ? 0 : GLOBAL_B) : GLOBAL_B * mpi_rank_ / mpi_size_;
        int32_t s1 = round == 3 ? GLOBAL_B : GLOBAL_B * (mpi_rank_ + 1) / mpi_size_, B = s1 - s0;
        int32_t len[3 * GLOBAL_B];
        int64_t sid[3 * GLOBAL_B * 3], m = 0, k = 0;
        for (int32_t f = 0; f < F; f++)
            for (int32_t s = 0; s < GLOBAL_B; s++)
                for (int32_t i = 0; i < lengths[f * GLOBAL_B + s]; i++, k++)
                    if (s >= s0 && s < s1)
                        sid[m++] = ids[k];
        for (int32_t f = 0; f < F; f++)
            memcpy(len + f * B, lengths + f * GLOBAL_B + s0, sizeof(int32_t) * (size_t)B);
        ember_batch mine = {B, F, len, sid, NULL, m}, all = {GLOBAL_B, F, lengths, ids, NULL, n};
        float s_ck[GLOBAL_B], s_32[GLOBAL_B], s_8[GLOBAL_B], s_one[GLOBAL_B];
        MCHECK(ember_predictor_score(ck, B, dense + s0 * nd, &mine, s_ck) == EMBER_OK, "%s", ember_errmsg(ck));
        MCHECK(ember_predictor_score(b32, B, dense + s0 * nd, &mine, s_32) == EMBER_OK, "%s", ember_errmsg(b32));
        MCHECK(ember_predictor_score(b8, B, dense + s0 * nd, &mine, s_8) == EMBER_OK, "%s", ember_errmsg(b8));
        MCHECK(ember_predictor_score(one, GLOBAL_B, dense, &all, s_one) == EMBER_OK, "%s", ember_errmsg(one));
        MCHECK(!memcmp(s_ck, s_32, sizeof(float) * (size_t)B), "the fp32 bundle scores unlike its checkpoint");
        int close = 1;
        for (int32_t s = 0; s < B; s++)
            close &= fabsf(s_8[s] - s_one[s0 + s]) <= 1e-6f;
        MCHECK(close, "the int8 bundle scores unlike a world of one (beyond 1e-6)");
        ember_collection *c = predictor_collection(b8);
        float *pooled = malloc(sizeof(float) * (size_t)(B * width + 1)), *want = malloc(sizeof(float) * (size_t)(B * width + 1));
        ember_collection_set_training(c, 0);
        MCHECK(ember_forward(c, &mine, pooled, NULL) == EMBER_OK, "forward: %s", ember_errmsg(c));
        ember_collection_set_training(c, 1);
        ref_pool(cc, bt, &mine, want);
        MCHECK(same_pooled(cc, pooled, want, B, width), "pooled != the naive dequantize-and-pool of the bundle's files");
        free(pooled);
        free(want);
    }
    for (int32_t t = 0; t < T; t++)
        if (bt[t].dynamic)
            check_keys(b8, &bt[t], t, "int8 after scoring");
    free_bundle(bt, T);
close:
    ember_predictor_close(ck);
    ember_predictor_close(b32);
    ember_predictor_close(b8);
    ember_predictor_close(one);
done:
    MPI_Barrier(MPI_COMM_WORLD);
    if (mpi_rank_ == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    ember_world_destroy(w);
    return mpi_test_finish("mpi_dynbundle");
}
