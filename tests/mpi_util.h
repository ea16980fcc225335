/*
 * mpi_util.h: helpers shared by the MPI tests (tests/mpi_*.c), which run the
 * same program under `mpiexec -np 1, 2, 3, 4` (CMakeLists.txt registers
 * NAME_np1 .. NAME_np4) and must hold at any world size: whatever holds
 * one entry per rank is sized by the world (mpi_starts, mpi_alloc), never
 * by a fixed rank count.  scripts/mpi_worlds.sh runs them at np 6 and 8.
 *
 * How every MPI test is built (docs/distributed.md): all ranks draw the same
 * GLOBAL random batch from one seed (rank 0's, broadcast and printed), rank r
 * takes the contiguous samples [start[r], start[r+1]) as its local batch,
 * and the distributed collection (cfg.world over MPI_COMM_WORLD) is compared
 * with a reference collection of the same config in a world of one
 * (cfg.world = NULL) that every rank runs over the whole global batch.
 *
 * Rules that keep a failing test from hanging: every rank makes the same
 * collective calls in the same order, whatever its own checks found; a
 * decision to skip work after a failure is taken with mpi_all() (an
 * allreduce), never from one rank's status alone.  A watchdog (alarm) kills
 * a rank stuck past EMBER_MPI_TEST_ALARM seconds (default 120; a whole run
 * takes about a second), and mpirun
 * then ends the job, so a hang fails instead of blocking CI.
 *
 * Failures print "[rank R/W seed S] file:line: <context>: <message>", where
 * the context (mpi_context) names the trial, step and case; rerun with
 * `mpirun -np W build/mpi_X SEED`.
 */
#ifndef EMBER_TESTS_MPI_UTIL_H
#define EMBER_TESTS_MPI_UTIL_H

#include <mpi.h>
#include <stdarg.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "ember-mpi.h"
#include "util.h"

static int mpi_rank_, mpi_size_ = 1;
static uint64_t mpi_seed_;
static char mpi_ctx_[512];
static int mpi_printed_; /* failure lines printed by this rank (capped) */

#define MPI_MAX_PRINTED 40

/* ------------------------------------------------------------ start, end */

/* MPI_Init, the watchdog, line-buffered output, and the seed: rank 0's
 * test_seed (argv[1], $EMBER_TEST_SEED or the clock; printed), broadcast. */
static inline uint64_t mpi_test_init(int *argc, char ***argv)
{
#ifdef __SANITIZE_ADDRESS__
    __lsan_disable(); /* Open MPI's start-up allocations are never freed: not ours */
#endif
    MPI_Init(argc, argv);
#ifdef __SANITIZE_ADDRESS__
    __lsan_enable();
#endif
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size_);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *alarm_env = getenv("EMBER_MPI_TEST_ALARM");
    alarm(alarm_env && *alarm_env ? (unsigned)atoi(alarm_env) : 120u);
    uint64_t seed = 0;
    if (mpi_rank_ == 0)
        seed = test_seed(*argc, *argv);
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    mpi_seed_ = seed;
    return seed;
}

/* n zeroed elements of size bytes, or the run ends here (MPI_Abort): the
 * tests' per-rank arrays come from here, sized by the world. */
static inline void *mpi_alloc(size_t n, size_t size)
{
    void *p = calloc(n + 1, size);
    if (!p) {
        fprintf(stderr, "[rank %d/%d] out of memory (%zu x %zu bytes)\n", mpi_rank_, mpi_size_, n, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* start[0..W] of a split of a batch over the world (mpi_split; caller frees). */
static inline int32_t *mpi_starts(void) { return mpi_alloc((size_t)mpi_size_ + 1, sizeof(int32_t)); }

/* 1 on every rank when ok is true on every rank. */
static inline int mpi_all(int ok)
{
    int all = 0;
    ok = ok != 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

/* Sums the check counters over ranks, prints them on rank 0, finalises.
 * Every rank returns 1 when any rank failed. */
static inline int mpi_test_finish(const char *name)
{
    int local[2] = {check_passed_, check_failed_}, sum[2] = {0, 0};
    MPI_Allreduce(local, sum, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mpi_rank_ == 0)
        printf("%s (np %d, seed %llu): %d passed, %d failed\n", name, mpi_size_,
               (unsigned long long)mpi_seed_, sum[0], sum[1]);
#ifdef __SANITIZE_ADDRESS__
    /* leaks of the test and of ember now, while Open MPI's memory is still
     * reachable; Open MPI frees little at MPI_Finalize (see mpi_lsan.supp) */
    __lsan_do_leak_check();
#endif
    MPI_Finalize();
    return sum[1] ? 1 : 0;
}

/* ------------------------------------------------------- checks, context */

static inline void mpi_context(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mpi_ctx_, sizeof mpi_ctx_, fmt, ap);
    va_end(ap);
}

static inline void mpi_fail_(const char *file, int line, const char *cond, const char *fmt, ...)
{
    check_failed_++;
    if (++mpi_printed_ > MPI_MAX_PRINTED) {
        if (mpi_printed_ == MPI_MAX_PRINTED + 1)
            fprintf(stderr, "[rank %d/%d seed %llu] more failures not printed\n", mpi_rank_,
                    mpi_size_, (unsigned long long)mpi_seed_);
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d/%d seed %llu] %s:%d: %s: %s%s%s\n", mpi_rank_, mpi_size_,
            (unsigned long long)mpi_seed_, file, line, mpi_ctx_, cond ? cond : "",
            cond ? ": " : "", msg);
    fflush(stderr);
}

/* CHECK_MSG with the rank, seed and context in the message. */
#define MCHECK(cond, ...)                                                                  \
    do {                                                                                   \
        if (cond)                                                                          \
            check_passed_++;                                                               \
        else                                                                               \
            mpi_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__);                             \
    } while (0)

/* An unconditional failure with the rank, seed and context. */
#define MFAIL(...) mpi_fail_(__FILE__, __LINE__, NULL, __VA_ARGS__)

/* ------------------------------------------------------------- world */

static inline ember_world *mpi_world(void)
{
    ember_world *w = NULL;
    int rc = ember_world_from_mpi_comm(MPI_COMM_WORLD, &w);
    MCHECK(rc == EMBER_OK && w, "ember_world_from_mpi_comm: %s", ember_status_str(rc));
    if (w) {
        MCHECK(ember_world_rank(w) == mpi_rank_ && ember_world_size(w) == mpi_size_,
               "world rank %d size %d, MPI %d of %d", ember_world_rank(w), ember_world_size(w),
               mpi_rank_, mpi_size_);
    }
    if (!mpi_all(w != NULL)) { /* nothing can be tested; end the run cleanly */
        fprintf(stderr, "[rank %d] no world\n", mpi_rank_);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return w;
}

/* Creates on every rank; NULL on every rank unless every rank succeeded. */
static inline ember_collection *mpi_create(const ember_collection_config *cfg, const char *what)
{
    ember_collection *c = NULL;
    int rc = ember_collection_create(cfg, &c);
    MCHECK(rc == EMBER_OK, "create %s: %s: %s", what, ember_status_str(rc), ember_errmsg(NULL));
    if (!mpi_all(rc == EMBER_OK)) {
        ember_collection_destroy(c);
        return NULL;
    }
    return c;
}

/* The reference config: the same tables and features in a world of one.
 * TABLE owners become 0 (a world of one has no rank 1); that can change
 * which tables stack, which the API promises changes no lookup or update.
 * num_shards 0 (the world size) becomes W explicitly, so limits count the
 * same partitions. */
static inline test_config *mpi_ref_config(const test_config *dist)
{
    test_config *tc = test_config_copy(dist);
    tc->cfg.world = NULL;
    if (tc->cfg.num_shards == 0)
        tc->cfg.num_shards = mpi_size_;
    for (int32_t t = 0; t < tc->cfg.num_tables; t++)
        tc->tables[t].owner = 0;
    return tc;
}

/* --------------------------------------------------- splitting a batch (util.h: test_sub_batch) */

/* Index in b->ids of the first id of bag (f, s). */
static inline int64_t mpi_bag_start(const ember_batch *b, int32_t f, int32_t s)
{
    int64_t k = 0;
    for (int64_t i = 0; i < (int64_t)f * b->batch_size + s; i++)
        k += b->lengths[i];
    return k;
}

typedef enum mpi_split_kind {
    MPI_SPLIT_EVEN = 0,   /* start[r] = B r / W                                  */
    MPI_SPLIT_RANDOM = 1, /* random sorted cut points (ranks with 0 samples too) */
    MPI_SPLIT_ZERO = 2,   /* one random rank has 0 samples, the rest even-ish    */
    MPI_SPLIT_ONE = 3     /* every sample on one random rank                     */
} mpi_split_kind;
static const char *const mpi_split_names[] = {"even", "random", "zero-rank", "one-rank"};

/* start[0..W]: rank r's samples are [start[r], start[r+1]).  Draws from r
 * the same way on every rank. */
static inline void mpi_split(test_rng *r, int32_t B, int32_t W, mpi_split_kind kind,
                             int32_t *start)
{
    start[0] = 0;
    start[W] = B;
    if (kind == MPI_SPLIT_EVEN) {
        for (int32_t k = 1; k < W; k++)
            start[k] = (int32_t)((int64_t)B * k / W);
    } else if (kind == MPI_SPLIT_RANDOM) {
        for (int32_t k = 1; k < W; k++)
            start[k] = (int32_t)test_range(r, 0, (int64_t)B + 1);
        for (int32_t i = 1; i < W; i++) /* insertion sort of the cuts */
            for (int32_t j = i; j > 1 && start[j - 1] > start[j]; j--) {
                int32_t t = start[j];
                start[j] = start[j - 1];
                start[j - 1] = t;
            }
    } else if (kind == MPI_SPLIT_ZERO) {
        int32_t z = (int32_t)test_range(r, 0, W), others = W > 1 ? W - 1 : 1, seen = 0;
        for (int32_t k = 0; k < W; k++) {
            start[k] = (int32_t)((int64_t)B * seen / others);
            if (k != z || W == 1)
                seen++;
        }
    } else {
        int32_t z = (int32_t)test_range(r, 0, W);
        for (int32_t k = 1; k < W; k++)
            start[k] = k <= z ? 0 : B;
    }
}

/* ------------------------------------------------------ output layout */

/* Copies the part of a global sequence output (gseq, for batch g) that
 * belongs to samples [lo, hi) into local layout (out): per NONE feature in
 * config order, that feature's ids of those samples. */
static inline void mpi_local_sequence(const ember_collection_config *cfg, const ember_batch *g,
                                      int32_t lo, int32_t hi, const float *gseq, float *out)
{
    int64_t goff = 0, loff = 0;
    for (int32_t f = 0; f < cfg->num_features; f++) {
        if (cfg->features[f].combiner != EMBER_COMBINER_NONE)
            continue;
        int64_t dim = cfg->tables[cfg->features[f].table].dim, before = 0, mine = 0, all = 0;
        for (int32_t s = 0; s < g->batch_size; s++) {
            int32_t len = g->lengths[(int64_t)f * g->batch_size + s];
            if (s < lo)
                before += len;
            else if (s < hi)
                mine += len;
            all += len;
        }
        memcpy(out + loff, gseq + goff + before * dim, (size_t)(mine * dim) * sizeof *out);
        loff += mine * dim;
        goff += all * dim;
    }
}

static inline float *mpi_nan_buffer(int64_t n)
{
    float *x = malloc((size_t)(n + 1) * sizeof *x);
    if (!x)
        abort();
    for (int64_t i = 0; i <= n; i++)
        x[i] = NAN;
    return x;
}

/* ------------------------------------------------------ comparisons */

/* Placement of table t, in words, for messages. */
static inline const char *mpi_placement_name(const ember_table_config *t)
{
    switch (t->placement) {
    case EMBER_PLACE_ROW: return t->exchange == EMBER_EXCHANGE_POOLED ? "row/pooled" : "row/rows";
    case EMBER_PLACE_COLUMN: return "column";
    case EMBER_PLACE_TABLE: return t->exchange == EMBER_EXCHANGE_POOLED ? "table/pooled" : "table/rows";
    case EMBER_PLACE_REPLICATED: return "replicated";
    }
    return "?";
}

/* Forward of a feature on table t must be bit-identical to a world of one
 * (ROWS exchange of ROW or TABLE, and REPLICATED); otherwise (POOLED,
 * COLUMN) within the tolerance of mpi_close_out. */
static inline int mpi_forward_exact(const ember_table_config *t)
{
    return t->placement == EMBER_PLACE_REPLICATED ||
           ((t->placement == EMBER_PLACE_ROW || t->placement == EMBER_PLACE_TABLE) &&
            t->exchange == EMBER_EXCHANGE_ROWS);
}

/* Tables and optimizer state after backward must be bit-identical for every
 * placement but COLUMN (backward is the same for both exchanges, and an
 * owner sums each row's terms in the global order); COLUMN tables are
 * within mpi_close_table's tolerance (row-wise Adagrad adds per-rank
 * partial sums of g^2), their half-precision values within mpi_close_half. */
static inline int mpi_backward_exact(const ember_table_config *t)
{
    return t->placement != EMBER_PLACE_COLUMN;
}

/* Bitwise equality of floats (memcmp semantics, element by element so the
 * first difference can be named). */
static inline int64_t mpi_first_diff(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a) != 0)
            return i;
    return -1;
}

/* Output tolerance for POOLED and COLUMN:
 *   |got - want| <= 1e-6 max(|got|, |want|) + 1e-6 mag
 * with mag = sum_i |w_i| |row(id_i)| / divisor (test_ref_magnitude): a sum
 * of n terms added in another grouping (partials per rank) is off by a few
 * ulps of mag, not of the result, which may cancel to ~0: random-sign
 * rounding grows like sqrt(n) ulps (n <= 24 here: ~3e-7 mag), and for
 * same-sign terms the result is itself ~mag, so the first term covers it.
 * A missing, doubled or misweighted id moves a bag by >= mag / n. */
static inline int mpi_close_out(float got, float want, float mag)
{
    double d = fabs((double)got - (double)want);
    double m = fmax(fabs((double)got), fabs((double)want));
    return d <= 1e-6 * m + 1e-6 * (double)mag;
}

/* Table tolerance for COLUMN tables (values and state), per step (the test
 * copies the distributed values into the reference after each compare):
 *   |got - want| <= 1e-6 max(|got|, |want|) + atol
 * atol = 1e-6 for values (a row-wise Adagrad step lr g / (sqrt(s) + eps)
 * from an s a few ulps off moves w by a few ulps of the step, <= ~1e-7;
 * values are ~0.01..1, and a wrong slice or lost gradient moves them by
 * >= 1e-3) and, for state, 1e-9 plus 1e-6 of the row's largest state float:
 * a factor from the ranks' sums (clip_norm's scale, LARS's rate) moves a
 * state element by ulps of its terms, not of the result, which may cancel
 * to ~0 (momentum, Adam's m); the row's largest float is of their size. */
static inline int mpi_close_table(float got, float want, double atol)
{
    double d = fabs((double)got - (double)want);
    double m = fmax(fabs((double)got), fabs((double)want));
    return d <= 1e-6 * m + atol;
}

/* The values of a COLUMN table of half-precision rows: the step's fp32
 * update may differ by mpi_close_table's tolerance for values (1e-6 of the
 * value plus 1e-6 absolute: where the update cancels the old value to near
 * zero, the absolute term is what is left), and rounding can then carry the
 * value to the neighbouring half (by either rounding), so a value may
 * differ by that plus one spacing of its format at the larger magnitude:
 * fp16 2^-10 of it (2^-24 below its normals), bf16 2^-7.  A wrong slice,
 * bit or lost gradient moves values by >= 1e-3. */
static inline int mpi_close_half(float got, float want, ember_row_precision p)
{
    double d = fabs((double)got - (double)want);
    double m = fmax(fabs((double)got), fabs((double)want));
    double spacing = p == EMBER_PRECISION_FP16 ? 0x1p-10 * m + 0x1p-24 : 0x1p-7 * m;
    return d <= spacing + 1e-6 * m + 1e-6;
}

/* Compares the local outputs (got_p: B_local x width, got_s: local
 * sequence) with the matching part of the reference's global outputs
 * (want_p: rows lo.. of the global pooled; want_s: already in local layout;
 * mag_*: the same layouts) feature by feature, exactly or within
 * mpi_close_out by the placement of the feature's table.  Returns 1 when
 * all match; reports the first difference (feature, local and global
 * sample, column, values). */
static inline int mpi_compare_outputs(const ember_collection_config *cfg, const ember_batch *lb,
                                      int32_t lo, const float *got_p, const float *want_p,
                                      const float *mag_p, const float *got_s, const float *want_s,
                                      const float *mag_s, const char *what)
{
    int64_t W = test_pooled_width(cfg), col = 0, soff = 0;
    int ok = 1;
    for (int32_t f = 0; f < cfg->num_features && ok; f++) {
        const ember_table_config *t = &cfg->tables[cfg->features[f].table];
        int exact = mpi_forward_exact(t);
        int64_t dim = t->dim;
        if (cfg->features[f].combiner != EMBER_COMBINER_NONE) {
            for (int32_t s = 0; s < lb->batch_size && ok; s++)
                for (int64_t k = 0; k < dim && ok; k++) {
                    int64_t i = (int64_t)s * W + col + k;
                    int same = exact ? memcmp(got_p + i, want_p + i, sizeof(float)) == 0
                                     : mpi_close_out(got_p[i], want_p[i], mag_p[i]);
                    if (!same) {
                        MFAIL("%s: pooled output of feature %s (table %s, %s, %s): local sample "
                                  "%d (global %d) column %lld: got %.9g want %.9g (magnitude %.9g)",
                               what, cfg->features[f].name, t->name, mpi_placement_name(t),
                               exact ? "bit-identical" : "rel 1e-6", s, lo + s, (long long)k,
                               got_p[i], want_p[i], mag_p[i]);
                        ok = 0;
                    }
                }
            col += dim;
        } else {
            int64_t n = 0;
            for (int32_t s = 0; s < lb->batch_size; s++)
                n += lb->lengths[(int64_t)f * lb->batch_size + s];
            for (int64_t i = soff; i < soff + n * dim && ok; i++) {
                int same = exact ? memcmp(got_s + i, want_s + i, sizeof(float)) == 0
                                 : mpi_close_out(got_s[i], want_s[i], mag_s[i]);
                if (!same) {
                    MFAIL("%s: sequence output of feature %s (table %s, %s): local id %lld of "
                              "the feature, column %lld: got %.9g want %.9g (magnitude %.9g)",
                           what, cfg->features[f].name, t->name, mpi_placement_name(t),
                           (long long)((i - soff) / dim), (long long)((i - soff) % dim), got_s[i],
                           want_s[i], mag_s[i]);
                    ok = 0;
                }
            }
            soff += n * dim;
        }
    }
    if (ok)
        check_passed_++;
    return ok;
}

/* Reads every table's values and state from the distributed collection d
 * (collective: all ranks, same arguments) and the reference r (local), and
 * compares them, exactly or within mpi_close_table by placement.  Reports
 * table, row, column and values of the first difference per table.  With
 * sync, writes d's values and state into r afterwards (so the next step of
 * a COLUMN table starts from equal values and state, and the tolerances
 * are one step's; a no-op for tables found identical).
 * Returns the number of tables that differ. */
static inline int mpi_compare_tables(const ember_collection *d, ember_collection *r,
                                     const ember_collection_config *cfg, int sync,
                                     const char *what)
{
    int bad = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tc = &cfg->tables[t];
        int exact = mpi_backward_exact(tc);
        for (int st = 0; st < 2; st++) {
            int64_t per = st ? ember_state_floats(tc->optimizer.kind, tc->dim) : tc->dim;
            if (per == 0)
                continue;
            float *got = test_read_table(d, cfg, t, st); /* collective */
            float *want = test_read_table(r, cfg, t, st);
            MCHECK(got != NULL, "%s: reading %s of table %s from the distributed collection: %s",
                   what, st ? "state" : "values", tc->name, ember_errmsg(d));
            if (got && want) {
                int64_t i = -1;
                if (exact) {
                    i = mpi_first_diff(got, want, tc->rows * per);
                } else {
                    /* half rows, or half state (clip_norm's row norm moves g by an ulp) */
                    ember_row_precision hp = st ? tc->state_precision : tc->precision;
                    int half = hp != EMBER_PRECISION_FP32;
                    int64_t n = tc->rows * per, differ = 0;
                    double row_mag = 0.0;
                    for (int64_t k = 0; k < n && i < 0; k++) {
                        if (st && k % per == 0) { /* the row's largest state float: see mpi_close_table */
                            row_mag = 0.0;
                            for (int64_t j = 0; j < per; j++)
                                row_mag = fmax(row_mag, fabs((double)want[k + j]));
                        }
                        differ += got[k] != want[k];
                        if (got[k] == want[k]) /* infinities too (fp16 state past 65504) */
                            continue;
                        if (half ? !mpi_close_half(got[k], want[k], hp)
                                 : !mpi_close_table(got[k], want[k], st ? 1e-9 + 1e-6 * row_mag : 1e-6))
                            i = k;
                    }
                    /* half rows: a neighbouring half only where an ulp of the update
                     * crossed a rounding point, which is rare; wrong bits move many */
                    MCHECK(!half || differ <= 1 + n / 500, "%s: table %s (column, %s %s): %lld of %lld values "
                           "differ from one process", what, tc->name, ember_precision_name(hp), st ? "state" : "rows",
                           (long long)differ, (long long)n);
                }
                MCHECK(i < 0,
                       "%s: table %s (%s, rows %lld dim %d, optimizer %d) %s differ (%s): row %lld "
                       "%s %lld: got %.9g want %.9g",
                       what, tc->name, mpi_placement_name(tc), (long long)tc->rows, tc->dim,
                       (int)tc->optimizer.kind, st ? "state" : "values",
                       exact                                             ? "bit-identical expected"
                       : (st ? tc->state_precision : tc->precision) != EMBER_PRECISION_FP32 ? "one half-precision spacing"
                                                                        : "rel 1e-6",
                       (long long)(i / per),
                       st ? "state float" : "column", (long long)(i % per),
                       i >= 0 ? got[i] : 0.0, i >= 0 ? want[i] : 0.0);
                bad += i >= 0;
                if (sync && !st)
                    ember_table_write(r, t, 0, tc->rows, got);
                else if (sync) /* a small state (Adam's m near 0) carries another step's difference */
                    ember_table_write_state(r, t, 0, tc->rows, got);
            }
            free(got);
            free(want);
        }
    }
    return bad;
}

/* A snapshot of every table's values and state (collective reads). */
typedef struct mpi_snapshot {
    float *x[2 * TEST_MAX_TABLES];
} mpi_snapshot;

static inline void mpi_snap(const ember_collection *c, const ember_collection_config *cfg,
                            mpi_snapshot *s)
{
    for (int32_t t = 0; t < cfg->num_tables; t++)
        for (int st = 0; st < 2; st++)
            s->x[2 * t + st] = test_read_table(c, cfg, t, st);
}

/* 1 when c's tables and state are bitwise those of s (names the first
 * difference); frees s. */
static inline int mpi_snap_same(const ember_collection *c, const ember_collection_config *cfg,
                                mpi_snapshot *s, const char *what)
{
    int same = 1;
    for (int32_t t = 0; t < cfg->num_tables; t++)
        for (int st = 0; st < 2; st++) {
            const ember_table_config *tc = &cfg->tables[t];
            int64_t per = st ? ember_state_floats(tc->optimizer.kind, tc->dim) : tc->dim;
            float *now = test_read_table(c, cfg, t, st), *was = s->x[2 * t + st];
            int64_t i = now && was ? mpi_first_diff(now, was, tc->rows * per) : 0;
            MCHECK(i < 0, "%s: table %s %s changed: row %lld: now %.9g, before %.9g", what,
                   tc->name, st ? "state" : "values", (long long)(per ? i / per : 0),
                   now && i >= 0 ? now[i] : 0.0, was && i >= 0 ? was[i] : 0.0);
            same &= i < 0;
            free(now);
            free(was);
            s->x[2 * t + st] = NULL;
        }
    return same;
}

/* ------------------------------------------------------ random configs
 * A random config of trial `trial` (mpi_equivalence.c's header lists what
 * it covers): seven placement modes by trial, the six optimizers of table
 * 0, its dims, random combiners, weights, dedup, stacking, bounds, debug
 * checks and thread counts. */
enum { MPI_MODE_ROW_ROWS, MPI_MODE_ROW_POOLED, MPI_MODE_TABLE_ROWS, MPI_MODE_TABLE_POOLED, MPI_MODE_COLUMN,
       MPI_MODE_REPLICATED, MPI_MODE_MIXED, MPI_NUM_MODES };
static const char *const mpi_mode_names[] = {"row/rows", "row/pooled", "table/rows", "table/pooled",
                                         "column",   "replicated", "mixed"};

static const int32_t mpi_dims[] = {1, 2, 3, 4, 5, 8, 17, 64};

static inline void mpi_place(test_rng *r, ember_table_config *t, int mode, int32_t index, int trial,
                  int32_t W)
{
    static const ember_placement by_mode[] = {EMBER_PLACE_ROW,    EMBER_PLACE_ROW,
                                              EMBER_PLACE_TABLE,  EMBER_PLACE_TABLE,
                                              EMBER_PLACE_COLUMN, EMBER_PLACE_REPLICATED};
    if (mode == MPI_MODE_MIXED) {
        t->placement = (ember_placement)test_range(r, 0, 4);
        t->exchange = (ember_exchange)test_range(r, 0, 2);
        t->owner = (int32_t)test_range(r, 0, W);
        return;
    }
    t->placement = by_mode[mode];
    t->exchange = mode == MPI_MODE_ROW_POOLED || mode == MPI_MODE_TABLE_POOLED ? EMBER_EXCHANGE_POOLED
                                                                        : EMBER_EXCHANGE_ROWS;
    t->owner = (index + trial) % W; /* tables on different ranks */
}

static inline test_config *mpi_random_config(test_rng *r, int trial, ember_world *world)
{
    int32_t W = ember_world_size(world);
    int mode = trial % MPI_NUM_MODES;
    int32_t nt = (int32_t)test_range(r, 1, 5), nf = (int32_t)test_range(r, 1, 7);
    test_config *tc = test_config_new(nt, nf);
    for (int32_t t = 0; t < nt; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->rows = test_range(r, 0, 4) == 0 ? test_range(r, 1, 4) : test_range(r, 4, 400);
        tb->dim = t == 0 ? mpi_dims[trial % 8] : mpi_dims[test_range(r, 0, 8)];
        tb->init = (ember_init_kind)test_range(r, 0, 2);
        if (test_range(r, 0, 8) == 0)
            tb->init = EMBER_INIT_CONSTANT;
        tb->init_value = test_float(r, 0.01f, 1.0f);
        ember_optimizer_kind kind = t == 0 ? (ember_optimizer_kind)(trial / MPI_NUM_MODES % TEST_NUM_OPT)
                                           : (ember_optimizer_kind)test_range(r, 0, TEST_NUM_OPT);
        tb->optimizer = test_optimizer_random(r, kind);
        test_init_for_optimizer(tb);
        test_quant_random(r, tb);
        mpi_place(r, tb, mode, t, trial, W);
    }
    if (test_range(r, 0, 2)) /* same dim, optimizer, quantization: tables of one placement stack */
        for (int32_t t = 1; t < nt; t++) {
            tc->tables[t].dim = tc->tables[0].dim;
            tc->tables[t].optimizer = tc->tables[0].optimizer;
            tc->tables[t].quant_buckets = tc->tables[0].quant_buckets;
            tc->tables[t].quant_low = tc->tables[0].quant_low;
            tc->tables[t].quant_high = tc->tables[0].quant_high;
        }
    for (int32_t t = 0; t < nt; t++) /* the copies above: FTRL from zeros */
        test_init_for_optimizer(&tc->tables[t]);
    for (int32_t f = 0; f < nf; f++) {
        tc->features[f].table = (int32_t)test_range(r, 0, nt);
        tc->features[f].combiner = (ember_combiner)test_range(r, 0, 4);
    }
    tc->features[0].table = 0;
    tc->features[0].combiner = (ember_combiner)(trial % 4);
    tc->cfg.seed = test_next(r);
    tc->cfg.dedup = (int)test_range(r, 0, 2);
    tc->cfg.stack_tables = (int)test_range(r, 0, 2);
    tc->cfg.bounds = test_range(r, 0, 4) == 0 ? EMBER_BOUNDS_DROP : EMBER_BOUNDS_ERROR;
    tc->cfg.debug_checks = test_range(r, 0, 4) == 0;
    tc->cfg.threads = 1 + trial % 2; /* results do not depend on it */
    tc->cfg.world = world;
    return tc;
}

static inline void mpi_describe(char *buf, size_t n, int trial, const test_config *tc)
{
    int k = snprintf(buf, n, "trial %d mode %s (dedup %d stack %d bounds %s debug %d) tables", trial,
                     mpi_mode_names[trial % MPI_NUM_MODES], tc->cfg.dedup, tc->cfg.stack_tables,
                     tc->cfg.bounds == EMBER_BOUNDS_DROP ? "drop" : "error", tc->cfg.debug_checks);
    for (int32_t t = 0; t < tc->cfg.num_tables && k > 0 && (size_t)k < n; t++) {
        const ember_table_config *tb = &tc->tables[t];
        k += snprintf(buf + k, n - (size_t)k, " [%s %lldx%d opt %d %s owner %d quant %d precision %d/%d]",
                      tb->name, (long long)tb->rows, tb->dim, (int)tb->optimizer.kind, mpi_placement_name(tb),
                      tb->owner, tb->quant_buckets, (int)tb->precision, (int)tb->rounding);
    }
    for (int32_t f = 0; f < tc->cfg.num_features && k > 0 && (size_t)k < n; f++)
        k += snprintf(buf + k, n - (size_t)k, "%s f%d:t%d/c%d", f ? "" : " features",
                      f, tc->features[f].table, (int)tc->features[f].combiner);
}

/* ---------------------------------------------------------- one step */

/* Upstream gradients of a global batch, drawn the same on every rank. */
typedef struct mpi_grads {
    float *dp, *ds; /* global d_pooled (B x width) and d_sequence */
} mpi_grads;

static inline void mpi_grads_make(test_rng *r, const ember_collection_config *cfg,
                                  const ember_batch *gb, float lo, mpi_grads *g)
{
    int64_t np = (int64_t)gb->batch_size * test_pooled_width(cfg), ns = test_sequence_size(cfg, gb);
    g->dp = malloc((size_t)(np + 1) * sizeof(float));
    g->ds = malloc((size_t)(ns + 1) * sizeof(float));
    test_fill(r, g->dp, np, lo, 1.0f);
    test_fill(r, g->ds, ns, lo, 1.0f);
}

/* d = g + 0.5 * out, elementwise: an upstream gradient that depends on the
 * outputs, so that what a forward read flows into the tables (caller frees). */
static inline float *mpi_grads_of(const float *g, const float *out, int64_t n)
{
    float *d = malloc((size_t)(n + 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        d[i] = g[i] + 0.5f * out[i];
    return d;
}

static inline void mpi_grads_free(mpi_grads *g)
{
    free(g->dp);
    free(g->ds);
}

/*
 * One training step on both collections: forward of this rank's samples
 * [start[rank], start[rank+1]) of the global batch gb on d (distributed),
 * forward of all of gb on r (a world of one, every rank), and the checks:
 *   - d's outputs against r's rows of these samples (mpi_compare_outputs:
 *     exact or within mpi_close_out by placement);
 *   - with naive, d's outputs against src/ref's ref_forward on r's tables
 *     within test_forward's tolerance (1e-5 |want| + mtol mag, mtol = 1e-5
 *     + 2 max_len 2^-24 for bags of up to max_len ids);
 *   - backward on both with g (d gets its slice), then every table and its
 *     state (mpi_compare_tables, syncing r to d's values afterwards).
 * cfg describes d (placements; the same tables and features as r's).
 * Returns 1 on every rank when every rank's four calls succeeded.
 */
static inline int mpi_step(ember_collection *d, ember_collection *r,
                           const ember_collection_config *cfg, const ember_batch *gb,
                           const int32_t *start, const mpi_grads *g, int naive, const char *what)
{
    int32_t rank = mpi_rank_, B = gb->batch_size, lo = start[rank], hi = start[rank + 1];
    test_batch lb;
    test_sub_batch(gb, lo, hi, &lb);
    int64_t Wp = test_pooled_width(cfg), gS = test_sequence_size(cfg, gb);
    int64_t lS = test_sequence_size(cfg, &lb.b), lB = hi - lo;
    int32_t max_len = 0;
    for (int64_t i = 0; i < (int64_t)B * gb->num_features; i++)
        if (gb->lengths[i] > max_len)
            max_len = gb->lengths[i];

    /* the reference, the naive oracle and the magnitudes (global) */
    ref_model m;
    int have_m = ref_model_init(&m, cfg) == 0;
    MCHECK(have_m, "%s: ref_model_init", what);
    if (have_m)
        test_sync_ref(r, &m);
    float *gp = mpi_nan_buffer(B * Wp), *gs = mpi_nan_buffer(gS);
    float *np_ = mpi_nan_buffer(B * Wp), *ns_ = mpi_nan_buffer(gS);
    float *mp = mpi_nan_buffer(B * Wp), *ms = mpi_nan_buffer(gS);
    if (have_m) {
        ref_forward(&m, gb, NULL, np_, ns_);
        test_ref_magnitude(&m, gb, NULL, mp, ms);
        ref_model_free(&m);
    }
    int rrc = ember_forward(r, gb, gp, gs);
    MCHECK(rrc == EMBER_OK, "%s: reference forward: %s", what, ember_errmsg(r));

    float *lp = mpi_nan_buffer(lB * Wp), *ls = mpi_nan_buffer(lS), *lds = mpi_nan_buffer(lS);
    float *want_s = mpi_nan_buffer(lS), *mag_s = mpi_nan_buffer(lS), *naive_s = mpi_nan_buffer(lS);
    mpi_local_sequence(cfg, gb, lo, hi, g->ds, lds);
    MCHECK(ember_pooled_width(d) == Wp, "%s: pooled width %lld want %lld", what,
           (long long)ember_pooled_width(d), (long long)Wp);
    MCHECK(ember_sequence_size(d, &lb.b) == lS, "%s: sequence size %lld want %lld", what,
           (long long)ember_sequence_size(d, &lb.b), (long long)lS);
    int drc = ember_forward(d, &lb.b, lp, ls);
    MCHECK(drc == EMBER_OK, "%s: distributed forward: %s: %s", what, ember_status_str(drc),
           ember_errmsg(d));
    int ok = mpi_all(rrc == EMBER_OK && drc == EMBER_OK);
    if (ok) {
        mpi_local_sequence(cfg, gb, lo, hi, gs, want_s);
        mpi_local_sequence(cfg, gb, lo, hi, ms, mag_s);
        mpi_local_sequence(cfg, gb, lo, hi, ns_, naive_s);
        mpi_compare_outputs(cfg, &lb.b, lo, lp, gp + lo * Wp, mp + lo * Wp, ls, want_s, mag_s,
                            what);
        if (naive && have_m) {
            double mtol = 1e-5 + 2.0 * max_len * 0x1p-24;
            char msg[sizeof mpi_ctx_ + 400];
            snprintf(msg, sizeof msg, "[rank %d seed %llu] %s: %s: pooled vs src/ref", rank,
                     (unsigned long long)mpi_seed_, mpi_ctx_, what);
            TEST_CHECK_CLOSE_MAG(lp, np_ + lo * Wp, mp + lo * Wp, lB * Wp, 1e-5, mtol, msg);
            snprintf(msg, sizeof msg, "[rank %d seed %llu] %s: %s: sequence vs src/ref", rank,
                     (unsigned long long)mpi_seed_, mpi_ctx_, what);
            TEST_CHECK_CLOSE_MAG(ls, naive_s, mag_s, lS, 1e-5, mtol, msg);
        }
        rrc = ember_backward(r, g->dp, g->ds);
        MCHECK(rrc == EMBER_OK, "%s: reference backward: %s", what, ember_errmsg(r));
        drc = ember_backward(d, g->dp + lo * Wp, lds);
        MCHECK(drc == EMBER_OK, "%s: distributed backward: %s: %s", what, ember_status_str(drc),
               ember_errmsg(d));
        ok = mpi_all(rrc == EMBER_OK && drc == EMBER_OK);
        if (ok) {
            char when[300];
            snprintf(when, sizeof when, "%s, after backward", what);
            mpi_compare_tables(d, r, cfg, 1, when);
        }
    }
    free(gp), free(gs), free(np_), free(ns_), free(mp), free(ms), free(lp), free(ls), free(lds),
        free(want_s), free(mag_s), free(naive_s);
    test_batch_free(&lb);
    return ok;
}

/* 1 when msg holds v as a whole number (not part of a longer one). */
static inline int mpi_has_number(const char *msg, long long v)
{
    char want[32];
    snprintf(want, sizeof want, "%lld", v);
    for (const char *p = msg; (p = strstr(p, want)) != NULL; p++) {
        int digit_before = p > msg && (p[-1] >= '0' && p[-1] <= '9');
        int minus_before = v >= 0 && p > msg && p[-1] == '-';
        char after = p[strlen(want)];
        if (!digit_before && !minus_before && !(after >= '0' && after <= '9'))
            return 1;
    }
    return 0;
}

/* 1 when msg says "rank R" for the given R. */
static inline int mpi_names_rank(const char *msg, int32_t rank)
{
    char want[32];
    snprintf(want, sizeof want, "rank %d", rank);
    for (const char *p = msg; (p = strstr(p, want)) != NULL; p++) {
        char after = p[strlen(want)];
        if (!(after >= '0' && after <= '9'))
            return 1;
    }
    return 0;
}

#endif
