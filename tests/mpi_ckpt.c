/*
 * mpi_ckpt.c: checkpoints over MPI, with resharding.  Three modes:
 *
 *   mpi_ckpt [SEED]          (CTest mpi_ckpt_np1..4) in a world of W: trains
 *       random configs (random placement, owner and exchange per table,
 *       stacking on and off, all four optimizers), saves, opens on every
 *       rank, checks the checkpoint's canonical rows (ckpt_read_rows) against
 *       the collective ember_table_read / read_state of the saved collection,
 *       loads into a collection with other placements and stacking, and
 *       checks every row and state float bit-identical, and the step count.
 *       Exact trials (ROW/TABLE/REPLICATED with exchange ROWS on both sides,
 *       which DESIGN.md makes world- and placement-independent) also run one
 *       more identical step on both and compare bit for bit.
 *   mpi_ckpt save DIR SEED   trains the config of SEED with placements drawn
 *       from SEED and W, saves DIR/root, and (rank 0) writes the tables as
 *       read collectively to DIR/expected.bin, then runs one more step and
 *       writes DIR/next.bin.
 *   mpi_ckpt load DIR SEED   (any world M) the same config with placements
 *       drawn from SEED and M; loads DIR/root, compares with expected.bin and
 *       with ckpt_read_rows, checks the saving ranks' blobs, runs the same
 *       next step and compares with next.bin when the saving and the
 *       loading configs are both exact.
 * tests/ckpt_reshard.sh runs save with N and load with M for N, M in 1..4.
 *
 * The default mode also checks the dense model's reader (src/ckpt/
 * ckpt_dense.h, dense_pieces below): a random vector and its state, saved
 * whole and as random pieces dealt to random ranks, read back over random
 * ranges on every rank; a missing piece and a model of another size fail.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_dense.h"
#include "mpi_util.h"
#include "ckpt_util.h"

#define GLOBAL_B 24

static ember_world *world_;

/* The config of seed (identical on every rank and for every world), with
 * placements drawn from prng; exact: only world-independent placements. */
static test_config *config(uint64_t seed, test_rng *prng, int exact)
{
    test_rng r = {seed};
    test_config *tc = test_config_random(&r, 5, 6, 1, 300);
    tc->tables[0].optimizer = test_optimizer_random(&r, (ember_optimizer_kind)((seed & 15) % TEST_NUM_OPT));
    for (int32_t f = 0; f < tc->cfg.num_features; f++)
        tc->features[f].combiner = (ember_combiner)test_range(&r, 0, 3); /* no sequence outputs */
    tc->features[0].table = 0; /* table 0 is trained */
    tc->cfg.bounds = EMBER_BOUNDS_DROP;
    tc->cfg.num_shards = 2;
    tc->cfg.world = world_;
    tc->cfg.stack_tables = (int)test_range(prng, 0, 2);
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->placement = (ember_placement)test_range(prng, 0, 4);
        if (exact && tb->placement == EMBER_PLACE_COLUMN)
            tb->placement = EMBER_PLACE_ROW;
        tb->exchange = exact ? EMBER_EXCHANGE_ROWS : (ember_exchange)test_range(prng, 0, 2);
        tb->owner = (int32_t)test_range(prng, 0, mpi_size_);
    }
    if (!exact && test_range(prng, 0, 2)) /* COLUMN often: its state layout is the odd one */
        tc->tables[0].placement = EMBER_PLACE_COLUMN;
    return tc;
}

/* One step of a global batch drawn from r (the same on every rank and in
 * every world), split evenly over the ranks. */
static int step(test_rng *r, ember_collection *c, const test_config *tc)
{
    test_batch_opts o = test_batch_opts_default();
    o.batch_size = GLOBAL_B;
    o.max_len = 5;
    test_batch g, l;
    test_batch_make(r, &tc->cfg, &o, &g);
    int32_t lo = GLOBAL_B * mpi_rank_ / mpi_size_, hi = GLOBAL_B * (mpi_rank_ + 1) / mpi_size_;
    test_sub_batch(&g.b, lo, hi, &l);
    int64_t W = test_pooled_width(&tc->cfg);
    float *dp = malloc(sizeof(float) * (size_t)(GLOBAL_B * W + 1)), *p = calloc((size_t)(GLOBAL_B * W + 1), 4);
    float seq[4];
    test_fill(r, dp, GLOBAL_B * W, -1, 1);
    int st = ember_forward(c, &l.b, p, seq);
    if (st == EMBER_OK)
        st = ember_backward(c, dp + lo * W, seq);
    MCHECK(st == EMBER_OK, "step: %s", ember_errmsg(c));
    free(dp), free(p);
    test_batch_free(&g), test_batch_free(&l);
    return st;
}

static int is_exact(const test_config *tc)
{
    for (int32_t t = 0; t < tc->cfg.num_tables; t++)
        if (tc->tables[t].placement == EMBER_PLACE_COLUMN || tc->tables[t].exchange != EMBER_EXCHANGE_ROWS)
            return 0;
    return 1;
}

static void snap_write(const ckpt_snap *s, const test_config *tc, const char *path)
{
    FILE *f = fopen(path, "wb");
    MCHECK(f != NULL, "cannot write %s", path);
    for (int32_t t = 0; f && t < tc->cfg.num_tables; t++) {
        const ember_table_config *tb = &tc->tables[t];
        int64_t sf = ember_state_floats(tb->optimizer.kind, tb->dim);
        fwrite(s->v[t], 4, (size_t)(tb->rows * tb->dim), f);
        fwrite(s->s[t], 4, (size_t)(tb->rows * sf), f);
    }
    if (f) {
        fwrite(&s->steps, sizeof s->steps, 1, f);
        fclose(f);
    }
}

static int snap_read(ckpt_snap *s, const test_config *tc, const char *path)
{
    FILE *f = fopen(path, "rb");
    int ok = f != NULL;
    s->n = tc->cfg.num_tables;
    for (int32_t t = 0; t < s->n; t++) {
        const ember_table_config *tb = &tc->tables[t];
        int64_t sf = ember_state_floats(tb->optimizer.kind, tb->dim);
        s->v[t] = malloc((size_t)(tb->rows * tb->dim) * 4 + 4);
        s->s[t] = malloc((size_t)(tb->rows * sf) * 4 + 4);
        ok = ok && fread(s->v[t], 4, (size_t)(tb->rows * tb->dim), f) == (size_t)(tb->rows * tb->dim);
        ok = ok && fread(s->s[t], 4, (size_t)(tb->rows * sf), f) == (size_t)(tb->rows * sf);
    }
    ok = ok && fread(&s->steps, sizeof s->steps, 1, f) == 1;
    if (f)
        fclose(f);
    return ok;
}

static int64_t rank_blob_value(int32_t r) { return 1000 + 7 * r; }

static int save_mode(const char *dir, uint64_t seed)
{
    char root[600], path[700];
    snprintf(root, sizeof root, "%s/root", dir);
    test_rng pr = {seed * 31 + (uint64_t)mpi_size_}, r = {seed ^ 0xabcdef};
    test_config *tc = config(seed, &pr, (int)(seed % 2));
    ember_collection *c = mpi_create(&tc->cfg, "save");
    if (!c) {
        test_config_free(tc);
        return 1;
    }
    for (int s = 0; s < 3; s++)
        step(&r, c, tc);
    int64_t mine = rank_blob_value(mpi_rank_);
    ember_blob shared[2] = {{"seed", &seed, sizeof seed}, {"rng", &r.s, sizeof r.s}};
    ember_blob own = {"position", &mine, sizeof mine};
    ember_save_options so = {3, 0, shared, 2, &own, 1};
    int st = ember_save(c, root, &so);
    MCHECK(st == EMBER_OK, "save: %s", ember_errmsg(c));
    ckpt_snap a;
    ckpt_snap_take(&a, c, &tc->cfg);
    snprintf(path, sizeof path, "%s/expected.bin", dir);
    if (mpi_rank_ == 0)
        snap_write(&a, tc, path);
    ckpt_snap_free(&a);
    if (is_exact(tc)) { /* the next step, only where it does not depend on the world */
        step(&r, c, tc);
        ckpt_snap_take(&a, c, &tc->cfg);
        snprintf(path, sizeof path, "%s/next.bin", dir);
        if (mpi_rank_ == 0)
            snap_write(&a, tc, path);
        ckpt_snap_free(&a);
    }
    ember_collection_destroy(c);
    test_config_free(tc);
    return 0;
}

static int load_mode(const char *dir, uint64_t seed)
{
    char root[600], path[700];
    snprintf(root, sizeof root, "%s/root", dir);
    test_rng pr = {seed * 77 + 5 + (uint64_t)mpi_size_};
    test_config *tc = config(seed, &pr, (int)(seed % 2));
    ember_collection *c = mpi_create(&tc->cfg, "load");
    ember_checkpoint *ck = NULL;
    int st = ember_checkpoint_open(root, &ck);
    MCHECK(st == EMBER_OK, "open %s: %s", root, ember_errmsg(NULL));
    if (!c || !mpi_all(st == EMBER_OK))
        goto done;
    mpi_context("load into world %d from world %d", mpi_size_, ember_checkpoint_world(ck));
    st = ember_load(c, ck);
    MCHECK(st == EMBER_OK, "load: %s", ember_errmsg(c));
    if (!mpi_all(st == EMBER_OK))
        goto done;
    ckpt_snap want, got;
    snprintf(path, sizeof path, "%s/expected.bin", dir);
    MCHECK(snap_read(&want, tc, path), "cannot read %s", path);
    ckpt_snap_take(&got, c, &tc->cfg);
    MCHECK(ckpt_snap_equal(&want, &got, &tc->cfg) && want.steps == got.steps, "loaded tables differ");
    MCHECK(ckpt_snap_matches(&want, ck, &tc->cfg), "the checkpoint's canonical rows differ");
    ckpt_snap_free(&got);
    ckpt_snap_free(&want);
    int64_t n = 0;
    const void *b = ember_checkpoint_blob(ck, -1, "seed", &n);
    MCHECK(b && n == 8 && memcmp(b, &seed, 8) == 0, "blob \"seed\"");
    for (int32_t r = 0; r < ember_checkpoint_world(ck); r++) {
        int64_t v = rank_blob_value(r);
        b = ember_checkpoint_blob(ck, r, "position", &n);
        MCHECK(b && n == 8 && memcmp(b, &v, 8) == 0, "rank blob \"position\" of rank %d", r);
    }
    test_rng r = {0};
    b = ember_checkpoint_blob(ck, -1, "rng", &n);
    MCHECK(b && n == 8, "blob \"rng\"");
    snprintf(path, sizeof path, "%s/next.bin", dir);
    /* the next step, from the saved generator, when both worlds' configs are exact */
    if (b && n == 8 && is_exact(tc) && access(path, F_OK) == 0) {
        memcpy(&r.s, b, 8);
        step(&r, c, tc);
        MCHECK(snap_read(&want, tc, path), "cannot read %s", path);
        ckpt_snap_take(&got, c, &tc->cfg);
        MCHECK(ckpt_snap_equal(&want, &got, &tc->cfg), "the step after loading differs");
        ckpt_snap_free(&got);
        ckpt_snap_free(&want);
    }
done:
    ember_checkpoint_close(ck);
    ember_collection_destroy(c);
    test_config_free(tc);
    return 0;
}

/* Save in this world, load into other placements of this world. */
static void trial(test_rng *master, int t, const char *dir)
{
    char root[600];
    static int first_kind = -1; /* the run's first kind; each kind saved exact and not in turn */
    if (first_kind < 0)
        first_kind = (int)(test_next(master) % TEST_NUM_OPT);
    uint64_t seed = (test_next(master) & ~UINT64_C(15)) | (uint64_t)((first_kind + t / 2) % TEST_NUM_OPT);
    int exact = t % 2;
    snprintf(root, sizeof root, "%s/t%d", dir, t);
    mpi_context("trial %d (config seed %llu, exact %d)", t, (unsigned long long)seed, exact);
    test_rng pa = {seed + 1}, pb = {seed + 2}, r = {seed + 3};
    test_config *ta = config(seed, &pa, exact), *tb = config(seed, &pb, exact);
    if (!exact) /* saved under COLUMN: the layout that splits rows and state */
        ta->tables[0].placement = EMBER_PLACE_COLUMN;
    ember_collection *a = mpi_create(&ta->cfg, "a"), *b = mpi_create(&tb->cfg, "b");
    ember_checkpoint *ck = NULL;
    if (!a || !b)
        goto done;
    for (int s = 0; s < 3; s++)
        step(&r, a, ta);
    ember_save_options so = {(int64_t)t, 2, NULL, 0, NULL, 0};
    int st = ember_save(a, root, &so);
    MCHECK(st == EMBER_OK, "save: %s", ember_errmsg(a));
    ckpt_snap sa, sb;
    ckpt_snap_take(&sa, a, &ta->cfg);
    st = ember_checkpoint_open(root, &ck);
    MCHECK(st == EMBER_OK, "open: %s", ember_errmsg(NULL));
    if (!mpi_all(st == EMBER_OK)) {
        ckpt_snap_free(&sa);
        goto done;
    }
    MCHECK(ckpt_snap_matches(&sa, ck, &ta->cfg), "the checkpoint's canonical rows differ");
    st = ember_load(b, ck);
    MCHECK(st == EMBER_OK, "load: %s", ember_errmsg(b));
    ckpt_snap_take(&sb, b, &tb->cfg);
    MCHECK(ckpt_snap_equal(&sa, &sb, &ta->cfg) && sa.steps == sb.steps, "loaded tables differ");
    ckpt_snap_free(&sb);
    if (exact) {
        test_rng r2 = r;
        step(&r, a, ta);
        step(&r2, b, tb);
        MCHECK(test_tables_identical(a, b, &ta->cfg), "the step after loading differs");
    }
    /* another config: refused on every rank, nothing changed */
    test_config *tc = test_config_copy(tb);
    tc->tables[tc->cfg.num_tables - 1].rows += 1;
    ember_collection *c = mpi_create(&tc->cfg, "c");
    if (c) {
        ckpt_snap before, after;
        ckpt_snap_take(&before, c, &tc->cfg);
        st = ember_load(c, ck);
        MCHECK(st == EMBER_EINVAL && strstr(ember_errmsg(c), "rows"), "mismatched load: %s: %s",
               ember_status_str(st), ember_errmsg(c));
        ckpt_snap_take(&after, c, &tc->cfg);
        MCHECK(ckpt_snap_equal(&before, &after, &tc->cfg), "a refused load changed the tables");
        ckpt_snap_free(&before);
        ckpt_snap_free(&after);
    }
    ember_collection_destroy(c);
    test_config_free(tc);
    /* rank blobs whose names differ between ranks: refused on every rank */
    if (mpi_size_ > 1) {
        int64_t x = 1;
        ember_blob own = {mpi_rank_ == 0 ? "pos" : "other", &x, 8};
        ember_save_options bad = {1000 + t, 0, NULL, 0, &own, 1};
        st = ember_save(a, root, &bad);
        MCHECK(st == EMBER_EINVAL || st == EMBER_ECOMM, "save with other rank blob names: %s",
               ember_status_str(st));
        char p[700];
        struct stat sbuf;
        snprintf(p, sizeof p, "%s/step-%012d", root, 1000 + t);
        MCHECK(stat(p, &sbuf) != 0, "a failed save left %s", p);
    }
    ckpt_snap_free(&sa);
done:
    ember_checkpoint_close(ck);
    ember_collection_destroy(a);
    ember_collection_destroy(b);
    test_config_free(ta);
    test_config_free(tb);
}

/* Up to 6 random increasing disjoint ranges of [0, full) (empty ones too)
 * into ranges; returns how many and their floats in *sum. */
static int32_t random_ranges(test_rng *r, int64_t full, int64_t *ranges, int64_t *sum)
{
    int32_t n = 0;
    int64_t at = 0;
    *sum = 0;
    while (n < 6 && at < full) {
        const int64_t off = at + (int64_t)test_range(r, 0, (uint64_t)(full - at) / 3 + 1);
        const int64_t len = (int64_t)test_range(r, 0, (uint64_t)(full - off) + 1);
        ranges[2 * n] = off, ranges[2 * n + 1] = len, n++;
        *sum += len;
        at = off + len;
        if (test_range(r, 0, 4) == 0)
            break;
    }
    return n;
}

/* The dense model saved in pieces (rank blobs dense.ranges, dense.params,
 * dense.optim: a random cut of the vector dealt to random ranks, some with
 * none) or whole (the shared blobs), then read by every rank over random
 * ranges: the vector's own values and state.  drop 1: the first piece is
 * left out, so a whole read must fail; drop 2: the first piece is saved
 * twice, by its owner and the next rank (overlapping pieces: the same rank
 * twice in a world of one), so every read must fail. */
static void dense_pieces(test_rng *master, const char *dir, int t, int whole, int drop)
{
    const int64_t full = (int64_t)test_range(master, 1, 3000);
    const int32_t floats = (int32_t)test_range(master, 0, 3), W = mpi_size_;
    mpi_context("dense pieces %d (whole %d, drop %d, %lld parameters, %d state floats)", t, whole, drop,
                (long long)full, floats);
    float *v = malloc((size_t)(full * (1 + floats)) * sizeof *v); /* params, then each state vector */
    test_fill(master, v, full * (1 + floats), -1, 1);
    /* the pieces: consecutive ranges of random length, each to a random rank */
    int64_t *mine = malloc((size_t)(2 * full + 4) * sizeof *mine), held = 0, first_owner = -1;
    int32_t nm = 0;
    for (int64_t at = 0; at < full;) {
        const int64_t len = 1 + (int64_t)test_range(master, 0, (uint64_t)(full - at));
        const int32_t owner = (int32_t)test_range(master, 0, (uint64_t)W);
        const int first = first_owner < 0;
        if (first)
            first_owner = owner;
        if (first && drop == 2 && mpi_rank_ == (owner + 1) % W) /* a second copy of the first piece */
            mine[2 * nm] = at, mine[2 * nm + 1] = len, nm++, held += len;
        if (owner == mpi_rank_ && !(drop == 1 && first))
            mine[2 * nm] = at, mine[2 * nm + 1] = len, nm++, held += len;
        at += len;
    }
    float *pp = malloc((size_t)(held * (1 + floats) + 1) * sizeof *pp);
    for (int64_t k = 0, at = 0; k <= floats; k++)
        for (int32_t i = 0; i < nm; i++, at += mine[2 * i - 1])
            memcpy(pp + at, v + k * full + mine[2 * i], (size_t)mine[2 * i + 1] * sizeof *pp);
    int64_t rbytes = 0;
    int64_t *rb = nm ? ckpt_dense_ranges_blob(full, floats, mine, nm, &rbytes) : NULL;
    test_rng cr = {test_next(master)};
    test_config *tc = test_config_random(&cr, 2, 2, 1, 50);
    tc->cfg.world = world_;
    for (int32_t i = 0; i < tc->cfg.num_tables; i++) /* any placement the world has */
        if (tc->tables[i].placement == EMBER_PLACE_TABLE)
            tc->tables[i].owner %= W;
    ember_collection *c = mpi_create(&tc->cfg, "pieces");
    char root[600];
    snprintf(root, sizeof root, "%s/dense%d", dir, t);
    ember_blob shared[2] = {{"dense.params", v, full * 4}, {"dense.optim", v + full, floats * full * 4}};
    ember_blob own[3] = {{CKPT_DENSE_RANGES, rb, rbytes}, {"dense.params", pp, held * 4},
                         {"dense.optim", pp + held, floats * held * 4}};
    ember_save_options so = {1, 1, shared, whole ? (floats ? 2 : 1) : 0, own, whole ? 0 : 3};
    ember_checkpoint *ck = NULL;
    int st = c ? ember_save(c, root, &so) : EMBER_EINVAL;
    MCHECK(st == EMBER_OK, "save: %s", c ? ember_errmsg(c) : "no collection");
    st = st == EMBER_OK ? ember_checkpoint_open(root, &ck) : st;
    MCHECK(st == EMBER_OK, "open: %s", ember_errmsg(NULL));
    char err[400];
    int64_t ranges[12], want;
    for (int rep = 0; ck && rep < 4; rep++) {
        int32_t n = rep == 0 ? 1 : random_ranges(master, full, ranges, &want);
        if (rep == 0)
            ranges[0] = 0, ranges[1] = full, want = full; /* a whole model, as the predictor reads it */
        float *got = malloc((size_t)(want * (1 + floats) + 1) * sizeof *got);
        for (int64_t i = 0; i < want * (1 + floats); i++)
            got[i] = -7.0f;
        st = ckpt_dense_read(ck, full, floats, ranges, n, got, got + want, err, sizeof err);
        int64_t written = -1; /* a failed read writes nothing */
        for (int64_t i = 0; st != 0 && i < want * (1 + floats) && written < 0; i++)
            written = got[i] != -7.0f ? i : -1;
        MCHECK(written < 0, "a failed read (%s) wrote element %lld", err, (long long)written);
        if (drop == 1 && rep == 0) {
            MCHECK(st == EMBER_EFORMAT && strstr(err, "of the ") && strstr(err, " parameters asked for are in its pieces"),
                   "a missing piece: status %d, '%s'", st, err);
        } else if (drop == 2) {
            MCHECK(st == EMBER_EFORMAT && (strstr(err, "pieces of two ranks overlap") || strstr(err, "malformed")),
                   "overlapping pieces: status %d, '%s'", st, err);
        } else if (!drop) {
            MCHECK(st == 0, "read %d ranges: %s", n, err);
            for (int64_t k = 0, at = 0; st == 0 && k <= floats; k++)
                for (int32_t i = 0; i < n; at += ranges[2 * i + 1], i++)
                    MCHECK(!memcmp(got + at, v + k * full + ranges[2 * i], (size_t)ranges[2 * i + 1] * 4),
                           "vector %lld, range [%lld, +%lld): not the saved values", (long long)k,
                           (long long)ranges[2 * i], (long long)ranges[2 * i + 1]);
        }
        free(got);
    }
    if (ck) { /* a model of another size */
        const int64_t one[2] = {0, 1};
        float x[4];
        st = ckpt_dense_read(ck, full + 1, floats, one, 1, x, x + 1, err, sizeof err);
        MCHECK(st == EMBER_EFORMAT && strstr(err, "the dense model"), "another size: status %d, '%s'", st, err);
    }
    ember_checkpoint_close(ck);
    ember_collection_destroy(c);
    test_config_free(tc);
    free(v), free(mine), free(pp), free(rb);
}

int main(int argc, char **argv)
{
    int mode = argc > 3 ? (strcmp(argv[1], "save") == 0 ? 1 : strcmp(argv[1], "load") == 0 ? 2 : -1) : 0;
    if (mode < 0) {
        fprintf(stderr, "usage: mpi_ckpt [SEED] | save DIR SEED | load DIR SEED\n");
        return 2;
    }
    char *targv[2] = {argv[0], mode ? argv[3] : argc > 1 ? argv[1] : NULL};
    int targc = targv[1] ? 2 : 1;
    char **tav = targv;
    uint64_t seed = mpi_test_init(&targc, &tav);
    world_ = mpi_world();
    if (mode == 1 || mode == 2) {
        mode == 1 ? save_mode(argv[2], seed) : load_mode(argv[2], seed);
        ember_world_destroy(world_);
        return mpi_test_finish(mode == 1 ? "mpi_ckpt save" : "mpi_ckpt load");
    }
    char dir[256] = "";
    if (mpi_rank_ == 0)
        ckpt_tmpdir(dir, "mpi_ckpt");
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    test_rng master = {seed};
    for (int t = 0; t < 8; t++)
        trial(&master, t, dir);
    for (int t = 0; t < 8; t++) /* pieces, a piece missing, whole, pieces overlapping */
        dense_pieces(&master, dir, t, t % 4 == 2, t % 4 == 1 ? 1 : t % 4 == 3 ? 2 : 0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mpi_rank_ == 0)
        ckpt_rm_tree(dir);
    ember_world_destroy(world_);
    return mpi_test_finish("mpi_ckpt");
}
