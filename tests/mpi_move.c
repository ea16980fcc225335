/*
 * mpi_move.c: tables moved to a new placement in a running job
 * (ember_move_rows, src/step/move.c; docs/adaptive.md, "Re-planning while
 * training"), under mpirun -np 1..4.
 *
 * Each trial takes a random config of mpi_equivalence's kinds (every
 * placement mode, mixed ones, optimizers, dims, stacking, dedup, bounds,
 * simulated quantization), trains it K steps against the world-of-one
 * reference (mpi_step), then places every table anew at random (another
 * mode, owners, exchanges: stacking changes with it) and moves the rows:
 *   moved      every table's values and optimizer state in the new
 *              collection are bitwise those of the old (collective reads),
 *              and the old collection is unchanged;
 *   continues  K more steps on the new collection against the reference
 *              (mpi_step: bit-identical for the placements whose results are
 *              world-independent, within mpi_close_table otherwise), the
 *              Adam step and the learning-rate factor carried over;
 *   exact      when both placements are bit-exact for every table, the old
 *              collection trained the same K steps ends bitwise equal to
 *              the new one;
 *   refused    a move into a collection of other tables fails with
 *              EMBER_EINVAL on every rank, naming the table.
 */
#include "mpi_util.h"
#include "step/rows.h"

enum { K = 3, TRIALS = 28 };

/* A step of c on this rank's share, no reference. */
static int train_local(ember_collection *c, const ember_collection_config *cfg, const ember_batch *gb,
                       const int32_t *start, const mpi_grads *g)
{
    int32_t lo = start[mpi_rank_], hi = start[mpi_rank_ + 1];
    test_batch lb;
    test_sub_batch(gb, lo, hi, &lb);
    int64_t Wp = test_pooled_width(cfg), lS = test_sequence_size(cfg, &lb.b);
    float *p = mpi_nan_buffer((hi - lo) * Wp), *sq = mpi_nan_buffer(lS), *ds = mpi_nan_buffer(lS);
    mpi_local_sequence(cfg, gb, lo, hi, g->ds, ds);
    int rc = ember_forward(c, &lb.b, p, sq);
    if (rc == EMBER_OK)
        rc = ember_backward(c, g->dp + lo * Wp, ds);
    free(p), free(sq), free(ds);
    test_batch_free(&lb);
    return rc;
}

static int all_exact(const test_config *tc)
{
    for (int32_t t = 0; t < tc->cfg.num_tables; t++)
        if (!mpi_forward_exact(&tc->tables[t]) || !mpi_backward_exact(&tc->tables[t]))
            return 0;
    return 1;
}

static void trial(test_rng *r, int ix, ember_world *world)
{
    const int32_t W = ember_world_size(world);
    test_config *tc = mpi_random_config(r, ix, world), *ref = mpi_ref_config(tc);
    test_config *nc = test_config_copy(tc);
    int mode = (int)test_range(r, 0, MPI_NUM_MODES);
    for (int32_t t = 0; t < nc->cfg.num_tables; t++)
        mpi_place(r, &nc->tables[t], mode, t, ix + 1, W);
    for (int32_t t = 0; t < nc->cfg.num_tables; t++) { /* hot rows where both placements take them */
        const ember_table_config *x = &tc->tables[t], *y = &nc->tables[t];
        int both = x->placement == EMBER_PLACE_ROW && x->exchange == EMBER_EXCHANGE_ROWS &&
                   y->placement == EMBER_PLACE_ROW && y->exchange == EMBER_EXCHANGE_ROWS && x->rows > 4;
        if (both && test_range(r, 0, 2))
            tc->tables[t].hot_rows = nc->tables[t].hot_rows = ref->tables[t].hot_rows = 3;
    }
    char what[2048];
    mpi_describe(what, sizeof what, ix, tc);
    mpi_context("%s -> mode %s", what, mpi_mode_names[mode]);
    test_batch gb[2 * K];
    mpi_grads g[2 * K];
    int32_t *start = mpi_starts();
    int32_t B = (int32_t)test_range(r, W, W < 48 ? 48 : 2 * W);
    mpi_split(r, B, W, (mpi_split_kind)test_range(r, 0, 3), start);
    for (int s = 0; s < 2 * K; s++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = B;
        o.max_len = 5;
        o.invalid_frac = tc->cfg.bounds == EMBER_BOUNDS_DROP ? 0.05 : 0.0;
        test_batch_make(r, &tc->cfg, &o, &gb[s]);
        mpi_grads_make(r, &tc->cfg, &gb[s].b, -1.0f, &g[s]);
    }
    ember_collection *a = mpi_create(&tc->cfg, "old placement"), *rc = mpi_create(&ref->cfg, "reference");
    ember_collection *b = mpi_create(&nc->cfg, "new placement");
    int ok = a && rc && b;
    if (ok) {
        float lr = test_float(r, 0.5f, 1.5f);
        ember_set_lr_scale(a, lr);
        ember_set_lr_scale(rc, lr);
        for (int s = 0; s < K && ok; s++)
            ok = mpi_step(a, rc, &tc->cfg, &gb[s].b, start, &g[s], 0, "before the move");
        if (ok) /* hot rows from the counts, carried by the move */
            MCHECK(ember_refresh_hot_rows(a) == EMBER_OK, "refresh: %s", ember_errmsg(a));
    }
    if (mpi_all(ok)) {
        /* moved */
        mpi_snapshot before, old;
        mpi_snap(a, &tc->cfg, &before);
        mpi_snap(a, &tc->cfg, &old);
        int st = ember_move_rows(a, b);
        MCHECK(st == EMBER_OK, "move: %s: %s", ember_status_str(st), ember_errmsg(b));
        mpi_snap_same(b, &tc->cfg, &before, "the moved tables against the old ones");
        mpi_snap_same(a, &tc->cfg, &old, "the old collection after the move");
        ember_stats sa, sb;
        ember_collection_stats(a, &sa);
        ember_collection_stats(b, &sb);
        MCHECK(sa.steps == sb.steps && sb.steps == K, "steps: old %lld, moved %lld", (long long)sa.steps,
               (long long)sb.steps);
        /* continues, against the reference */
        for (int s = K; s < 2 * K && mpi_all(st == EMBER_OK); s++)
            st = mpi_step(b, rc, &nc->cfg, &gb[s].b, start, &g[s], 0, "after the move") ? EMBER_OK : EMBER_EINVAL;
        /* exact: the old placement trained on, bit for bit */
        if (all_exact(tc) && all_exact(nc) && mpi_all(st == EMBER_OK)) {
            for (int s = K; s < 2 * K; s++)
                MCHECK(train_local(a, &tc->cfg, &gb[s].b, start, &g[s]) == EMBER_OK, "old step: %s", ember_errmsg(a));
            mpi_snapshot cont;
            mpi_snap(a, &tc->cfg, &cont);
            mpi_snap_same(b, &tc->cfg, &cont, "the moved collection against the old one trained on");
        }
    }
    /* refused: other tables (one more row) */
    test_config *other = test_config_copy(nc);
    other->tables[0].rows += 1;
    ember_collection *o = mpi_create(&other->cfg, "other tables");
    if (a && o) {
        int st = ember_move_rows(a, o);
        MCHECK(st == EMBER_EINVAL && strstr(ember_errmsg(o), other->tables[0].name),
               "a move into other tables: %s: %s", ember_status_str(st), ember_errmsg(o));
    }
    ember_collection_destroy(o);
    test_config_free(other);
    ember_collection_destroy(a);
    ember_collection_destroy(b);
    ember_collection_destroy(rc);
    for (int s = 0; s < 2 * K; s++) {
        test_batch_free(&gb[s]);
        mpi_grads_free(&g[s]);
    }
    free(start);
    test_config_free(tc);
    test_config_free(ref);
    test_config_free(nc);
}

int main(int argc, char **argv)
{
    uint64_t seed = mpi_test_init(&argc, &argv);
    test_rng r = {seed};
    ember_world *world = mpi_world();
    for (int ix = 0; ix < TRIALS; ix++)
        trial(&r, ix, world);
    ember_world_destroy(world);
    return mpi_test_finish("mpi_move");
}
