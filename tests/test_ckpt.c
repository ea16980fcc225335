/*
 * test_ckpt.c: checkpoints in a world of one (ember_save, ember_checkpoint_open,
 * ember_load; the internal ckpt_read_rows).
 *
 * Random configs (several tables, all four optimizers, stacking on and off,
 * every placement, random training so the state is not trivial):
 *   - save -> open -> load into a fresh collection made with another seed,
 *     (some tables with half rows and state, docs/precision.md)
 *     stacking and placements: every row and state float bit-identical to
 *     the saved collection, the step count restored, the blobs equal, and
 *     one more identical step on both gives identical tables;
 *   - keep-K, re-saving a step, leftovers of crashed saves;
 *   - corruption: a flipped byte anywhere, a truncated or extended file, a
 *     missing file: open fails with ECORRUPT / EFORMAT / EIO naming the file
 *     (and succeeds again once the byte is restored);
 *   - a checkpoint of another config (dim, rows, optimizer kind, a missing
 *     table): ember_load is EINVAL naming table and field, and the
 *     collection is bit-identical to before.
 * `test_ckpt SEED` reruns; EMBER_CKPT_BENCH_MB=100 also times a ~100 MB save,
 * open and load (JSON line).
 */
#include <sys/stat.h>

#include "util.h"
#include "ckpt_util.h"

static char root_[256];

static test_config *random_config(test_rng *r, int trial)
{
    test_config *tc = test_config_random(r, 6, 8, 1, 400);
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        tc->tables[t].placement = (ember_placement)test_range(r, 0, 4);
        tc->tables[t].exchange = (ember_exchange)test_range(r, 0, 2);
    }
    tc->tables[0].optimizer = test_optimizer_random(r, (ember_optimizer_kind)(trial % TEST_NUM_OPT));
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) { /* half rows and state (docs/precision.md) on some */
        ember_table_config *tb = &tc->tables[t];
        if (test_range(r, 0, 3) || tb->storage == EMBER_STORAGE_SSD)
            continue;
        tb->quant_buckets = 0;
        tb->precision = (ember_row_precision)test_range(r, 0, 3);
        if (test_element_state(tb->optimizer.kind))
            tb->state_precision = (ember_row_precision)test_range(r, 1, 3);
    }
    tc->features[0].table = 0; /* table 0 (every optimizer in turn) is trained */
    tc->cfg.bounds = EMBER_BOUNDS_DROP;
    return tc;
}

static ember_collection *make(const test_config *tc)
{
    ember_collection *c = NULL;
    int st = ember_collection_create(&tc->cfg, &c);
    if (st != EMBER_OK)
        fprintf(stderr, "create: %s\n", ember_errmsg(NULL));
    return c;
}

static void random_bytes(test_rng *r, unsigned char *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (unsigned char)test_next(r);
}

/* save -> open -> load into another collection; continue one step on both. */
static void test_roundtrip(test_rng *r, int trial)
{
    char root[300];
    snprintf(root, sizeof root, "%s/rt%d", root_, trial);
    test_config *tc = random_config(r, trial);
    ember_collection *c1 = make(tc);
    CHECK(c1 != NULL);
    if (!c1)
        return;
    for (int s = (int)test_range(r, 1, 5); s > 0; s--)
        CHECK(ckpt_test_step(r, c1, &tc->cfg, (int32_t)test_range(r, 1, 64)) == EMBER_OK);
    ckpt_snap a, b;
    ckpt_snap_take(&a, c1, &tc->cfg);
    unsigned char d0[5000], d1[300], d2[64];
    int64_t n0 = test_range(r, 0, 5000), n1 = test_range(r, 1, 300);
    random_bytes(r, d0, n0), random_bytes(r, d1, n1), random_bytes(r, d2, 64);
    ember_blob blobs[2] = {{"dense", d0, n0}, {"loader.pos", d1, n1}}, mine[1] = {{"rank-state", d2, 64}};
    ember_save_options so = {test_range(r, 0, 1000000), 0, blobs, 2, mine, 1};
    int st = ember_save(c1, root, &so);
    CHECK_MSG(st == EMBER_OK, "trial %d: save: %s", trial, ember_errmsg(c1));
    ember_checkpoint *ck = NULL;
    st = ember_checkpoint_open(root, &ck);
    CHECK_MSG(st == EMBER_OK, "trial %d: open: %s", trial, ember_errmsg(NULL));
    if (st != EMBER_OK)
        goto done;
    char want[64];
    snprintf(want, sizeof want, "step-%012lld", (long long)so.step);
    CHECK(ember_checkpoint_step(ck) == so.step && ember_checkpoint_world(ck) == 1);
    CHECK(strstr(ember_checkpoint_path(ck), want) != NULL);
    int64_t nb = -1;
    const void *p = ember_checkpoint_blob(ck, -1, "dense", &nb);
    CHECK(p && nb == n0 && memcmp(p, d0, (size_t)n0) == 0);
    p = ember_checkpoint_blob(ck, -1, "loader.pos", &nb);
    CHECK(p && nb == n1 && memcmp(p, d1, (size_t)n1) == 0);
    p = ember_checkpoint_blob(ck, 0, "rank-state", &nb);
    CHECK(p && nb == 64 && memcmp(p, d2, 64) == 0);
    CHECK(ember_checkpoint_blob(ck, -1, "rank-state", NULL) == NULL);
    CHECK(ember_checkpoint_blob(ck, 1, "rank-state", NULL) == NULL);
    CHECK(ckpt_seed(ck) == tc->cfg.seed && ckpt_num_tables(ck) == tc->cfg.num_tables);
    CHECK_MSG(ckpt_snap_matches(&a, ck, &tc->cfg), "trial %d: checkpoint rows", trial);

    /* another seed, stacking and placement, another learning rate; the same
     * seed where a table rounds stochastically (its bits come from the seed) */
    test_config *tc2 = test_config_copy(tc);
    int stochastic = 0;
    for (int32_t t = 0; t < tc->cfg.num_tables; t++)
        stochastic |= tc->tables[t].rounding == EMBER_ROUND_STOCHASTIC &&
                      (tc->tables[t].precision != EMBER_PRECISION_FP32 ||
                       tc->tables[t].state_precision != EMBER_PRECISION_FP32);
    if (!stochastic)
        tc2->cfg.seed ^= 0x5555;
    tc2->cfg.stack_tables = !tc->cfg.stack_tables;
    for (int32_t t = 0; t < tc2->cfg.num_tables; t++)
        tc2->tables[t].placement = (ember_placement)test_range(r, 0, 4);
    ember_collection *c2 = make(tc2);
    CHECK(c2 != NULL);
    if (c2) {
        st = ember_load(c2, ck);
        CHECK_MSG(st == EMBER_OK, "trial %d: load: %s", trial, ember_errmsg(c2));
        ckpt_snap_take(&b, c2, &tc2->cfg);
        CHECK_MSG(ckpt_snap_equal(&a, &b, &tc->cfg), "trial %d: loaded tables differ", trial);
        CHECK_MSG(b.steps == a.steps, "trial %d: steps %lld, saved %lld", trial, (long long)b.steps,
                  (long long)a.steps);
        ckpt_snap_free(&b);
        /* the same next step on both: identical (the state was restored) */
        test_rng r1 = *r, r2 = *r;
        int32_t B = (int32_t)test_range(r, 1, 64);
        CHECK(ckpt_test_step(&r1, c1, &tc->cfg, B) == EMBER_OK);
        CHECK(ckpt_test_step(&r2, c2, &tc2->cfg, B) == EMBER_OK);
        CHECK_MSG(test_tables_identical(c1, c2, &tc->cfg), "trial %d: a step after load differs", trial);
        ember_collection_destroy(c2);
    }
    /* the checkpoint lists its tables: a collection of those configs (and the
     * original features) loads it without declaring anything again */
    {
        int32_t nt = ember_checkpoint_num_tables(ck), same = nt == tc->cfg.num_tables;
        ember_table_config listed[TEST_MAX_TABLES], dummy;
        CHECK(ember_checkpoint_table(ck, nt, &dummy) == EMBER_EINVAL && ember_checkpoint_table(ck, -1, &dummy) == EMBER_EINVAL);
        for (int32_t t = 0; t < nt && same; t++) {
            const ember_table_config *o = &tc->tables[t];
            same = ember_checkpoint_table(ck, t, &listed[t]) == EMBER_OK && !strcmp(listed[t].name, o->name) &&
                   listed[t].rows == o->rows && listed[t].dim == o->dim && listed[t].init == o->init &&
                   listed[t].init_value == o->init_value && listed[t].placement == o->placement &&
                   !memcmp(&listed[t].optimizer, &o->optimizer, sizeof o->optimizer) && listed[t].kind == o->kind;
        }
        CHECK_MSG(same, "trial %d: the listed tables differ from the saved configs", trial);
        ember_collection_config lc = tc->cfg;
        lc.tables = listed;
        ember_collection *c4 = NULL;
        if (same && ember_collection_create(&lc, &c4) == EMBER_OK) {
            CHECK_MSG(ember_load(c4, ck) == EMBER_OK, "trial %d: load into the listed tables: %s", trial,
                      ember_errmsg(c4));
            ckpt_snap_take(&b, c4, &lc);
            CHECK_MSG(ckpt_snap_equal(&a, &b, &tc->cfg), "trial %d: tables loaded by listing differ", trial);
            ckpt_snap_free(&b);
        } else {
            CHECK_MSG(0, "trial %d: no collection from the listed tables: %s", trial, ember_errmsg(NULL));
        }
        ember_collection_destroy(c4);
    }
    /* a checkpoint without a model description (this one: ember_save from a
     * program) cannot be a predictor, and the error says why */
    if (trial == 0) {
        ember_predictor *pr = NULL;
        int ps = ember_predictor_open(root, NULL, &pr);
        CHECK_MSG(ps == EMBER_EFORMAT && !pr && strstr(ember_errmsg(NULL), "no model description"),
                  "predictor on a checkpoint without model.json: %s (%s)", ember_status_str(ps), ember_errmsg(NULL));
    }
    /* hyper-parameters may differ: they come from the collection */
    tc2->tables[0].optimizer.lr *= 2;
    ember_collection *c3 = make(tc2);
    CHECK(c3 && ember_load(c3, ck) == EMBER_OK);
    ember_collection_destroy(c3);
    test_config_free(tc2);
done:
    ember_checkpoint_close(ck);
    ckpt_snap_free(&a);
    ember_collection_destroy(c1);
    test_config_free(tc);
}

/* Names of the files of the folder, a NULL-ended list into buf. */
static int list_files(const char *dir, char names[][256], int max)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < max)
        if (e->d_name[0] != '.')
            snprintf(names[n++], 256, "%s", e->d_name);
    if (d)
        closedir(d);
    return n;
}

/* Opens dir, expecting one of the statuses and the file named. */
static void expect_fail(const char *dir, int s1, int s2, const char *name, const char *what)
{
    ember_checkpoint *ck = NULL;
    int st = ember_checkpoint_open(dir, &ck);
    CHECK_MSG((st == s1 || st == s2) && ck == NULL, "%s: open gave %s (%s)", what, ember_status_str(st),
              ember_errmsg(NULL));
    CHECK_MSG(strstr(ember_errmsg(NULL), name) != NULL, "%s: message \"%s\" does not name %s", what,
              ember_errmsg(NULL), name);
    ember_checkpoint_close(ck);
}

static void test_corruption(test_rng *r)
{
    char root[300], dir[400], path[800], names[16][256];
    snprintf(root, sizeof root, "%s/corrupt", root_);
    test_config *tc = random_config(r, (int)test_range(r, 0, 4));
    ember_collection *c = make(tc);
    CHECK(ckpt_test_step(r, c, &tc->cfg, 32) == EMBER_OK);
    unsigned char blob[100];
    random_bytes(r, blob, 100);
    ember_blob b = {"dense", blob, 100};
    ember_save_options so = {7, 0, &b, 1, NULL, 0};
    CHECK(ember_save(c, root, &so) == EMBER_OK);
    snprintf(dir, sizeof dir, "%s/step-000000000007", root);
    int nf = list_files(dir, names, 16);
    CHECK(nf == 2);
    int flips = 0;
    for (int trial = 0; trial < 300 && nf > 0; trial++) {
        const char *name = names[test_range(r, 0, nf)];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        long n = 0;
        unsigned char *orig = test_read_file(path, &n), *bad = malloc((size_t)n + 2);
        memcpy(bad, orig, (size_t)n);
        int kind = (int)test_range(r, 0, 10);
        char what[128];
        if (kind < 7) { /* flip one byte */
            long at = (long)test_range(r, 0, n);
            bad[at] ^= (unsigned char)test_range(r, 1, 256);
            test_write_file(path, bad, n);
            snprintf(what, sizeof what, "byte %ld of %s flipped", at, name);
            expect_fail(dir, EMBER_ECORRUPT, EMBER_EFORMAT, name, what);
            flips++;
        } else if (kind < 9) { /* truncate */
            long keep = (long)test_range(r, 0, n);
            test_write_file(path, bad, keep);
            snprintf(what, sizeof what, "%s truncated to %ld bytes", name, keep);
            expect_fail(dir, EMBER_ECORRUPT, EMBER_EFORMAT, name, what);
        } else { /* extend */
            bad[n] = 0;
            test_write_file(path, bad, n + 1);
            snprintf(what, sizeof what, "%s extended", name);
            expect_fail(dir, EMBER_ECORRUPT, EMBER_EFORMAT, name, what);
        }
        test_write_file(path, orig, n);
        ember_checkpoint *ck = NULL;
        CHECK_MSG(ember_checkpoint_open(root, &ck) == EMBER_OK, "restored: %s", ember_errmsg(NULL));
        ember_checkpoint_close(ck);
        free(orig), free(bad);
    }
    CHECK(flips > 100);
    /* a missing data file: EIO naming it */
    snprintf(path, sizeof path, "%s/rank-00000-of-00001.bin", dir);
    long n = 0;
    unsigned char *orig = test_read_file(path, &n);
    remove(path);
    expect_fail(root, EMBER_EIO, EMBER_EIO, "rank-00000-of-00001.bin", "missing data file");
    test_write_file(path, orig, n);
    free(orig);
    /* no manifest: no checkpoint at all */
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    remove(path);
    expect_fail(dir, EMBER_EIO, EMBER_EIO, "manifest.json", "missing manifest");
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void check_load_refused(ember_collection *c2, const test_config *tc2, const ember_checkpoint *ck,
                               const char *table, const char *field)
{
    ckpt_snap before, after;
    ckpt_snap_take(&before, c2, &tc2->cfg);
    int st = ember_load(c2, ck);
    CHECK_MSG(st == EMBER_EINVAL, "%s/%s: load gave %s", table, field, ember_status_str(st));
    const char *m = ember_errmsg(c2);
    CHECK_MSG(strstr(m, table) && strstr(m, field), "message \"%s\" names neither %s nor %s", m, table, field);
    ckpt_snap_take(&after, c2, &tc2->cfg);
    CHECK_MSG(ckpt_snap_equal(&before, &after, &tc2->cfg) && before.steps == after.steps,
              "%s/%s: a refused load changed the collection", table, field);
    ckpt_snap_free(&before);
    ckpt_snap_free(&after);
}

static void test_mismatch(test_rng *r)
{
    char root[300];
    snprintf(root, sizeof root, "%s/mismatch", root_);
    test_config *tc = random_config(r, 1);
    ember_collection *c = make(tc);
    CHECK(ckpt_test_step(r, c, &tc->cfg, 16) == EMBER_OK);
    ember_save_options so = {1, 0, NULL, 0, NULL, 0};
    CHECK(ember_save(c, root, &so) == EMBER_OK);
    ember_checkpoint *ck = NULL;
    CHECK(ember_checkpoint_open(root, &ck) == EMBER_OK);
    static const char *const fields[] = {"dim", "rows", "optimizer", "not in the checkpoint"};
    for (int k = 0; k < 4 && ck; k++) {
        test_config *tc2 = test_config_copy(tc);
        int32_t t = tc->cfg.num_tables - 1; /* the last: the others must stay as they were */
        ember_table_config *tb = &tc2->tables[t];
        if (k == 0)
            tb->dim = tb->dim == 5 ? 6 : 5;
        else if (k == 1)
            tb->rows += 1;
        else if (k == 2)
            tb->optimizer.kind = (ember_optimizer_kind)((tb->optimizer.kind + 1) % 4);
        else
            snprintf(tc2->table_names[t], 32, "renamed%d", t);
        if (!test_element_state(tb->optimizer.kind)) /* no state per element: no half state */
            tb->state_precision = EMBER_PRECISION_FP32;
        ember_collection *c2 = make(tc2);
        CHECK(c2 && ckpt_test_step(r, c2, &tc2->cfg, 16) == EMBER_OK);
        if (c2)
            check_load_refused(c2, tc2, ck, tc2->tables[t].name, fields[k]);
        ember_collection_destroy(c2);
        test_config_free(tc2);
    }
    ember_checkpoint_close(ck);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static int exists(const char *root, const char *name)
{
    char p[600];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", root, name);
    return stat(p, &sb) == 0;
}

/* Which rows table 0 holds in the checkpoint at path: its row 0, value 0. */
static float first_value(const char *path)
{
    ember_checkpoint *ck = NULL;
    float v[1024] = {0};
    if (ember_checkpoint_open(path, &ck) != EMBER_OK)
        return -1e30f;
    ckpt_read_rows(ck, 0, 0, 1, v, NULL);
    ember_checkpoint_close(ck);
    return v[0];
}

/* keep-K, re-saving a step, leftovers of crashed saves, bad options. */
static void test_folders(test_rng *r)
{
    char root[300], p[1200];
    snprintf(root, sizeof root, "%s/folders", root_);
    test_config *tc = test_config_new(2, 2);
    tc->tables[0].dim = 4;
    ember_collection *c = make(tc);
    float row[4];
    ember_save_options so = {0, 3, NULL, 0, NULL, 0};
    for (int64_t s = 1; s <= 6; s++) {
        row[0] = (float)s, row[1] = row[2] = row[3] = 0;
        CHECK(ember_table_write(c, 0, 0, 1, row) == EMBER_OK);
        so.step = s * 10;
        CHECK(ember_save(c, root, &so) == EMBER_OK);
    }
    CHECK(!exists(root, "step-000000000030") && exists(root, "step-000000000040") &&
          exists(root, "step-000000000060"));
    CHECK(first_value(root) == 6.0f);
    /* an older step is kept (it was just saved); the oldest other goes */
    so.step = 5;
    CHECK(ember_save(c, root, &so) == EMBER_OK);
    CHECK(exists(root, "step-000000000005") && !exists(root, "step-000000000040") &&
          exists(root, "step-000000000050"));
    /* re-saving step 60 with other rows replaces it */
    row[0] = 99;
    CHECK(ember_table_write(c, 0, 0, 1, row) == EMBER_OK);
    so.step = 60;
    so.keep = 0;
    CHECK(ember_save(c, root, &so) == EMBER_OK);
    CHECK(first_value(root) == 99.0f);
    /* leftovers: a complete-looking .tmp folder and a trash folder are never
     * taken for a checkpoint, and the next save removes them */
    snprintf(p, sizeof p, "%s/step-000000000060", root);
    float newest = first_value(p);
    snprintf(p, sizeof p, "cp -r %s/step-000000000060 %s/.tmp-step-000000000900-x && mkdir %s/.trash-y", root,
             root, root);
    CHECK(system(p) == 0);
    CHECK(first_value(root) == newest);
    so.step = 61;
    CHECK(ember_save(c, root, &so) == EMBER_OK);
    CHECK(!exists(root, ".tmp-step-000000000900-x") && !exists(root, ".trash-y"));
    DIR *d = opendir(root);
    struct dirent *e;
    int hidden = 0;
    while (d && (e = readdir(d)) != NULL)
        hidden += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    CHECK_MSG(hidden == 0, "%d leftover folders after a save", hidden);
    /* bad options and an unusable root fail, and change nothing */
    unsigned char x = 1;
    ember_blob bad[2] = {{"a/b", &x, 1}, {"ok", &x, 1}}, dup[2] = {{"ok", &x, 1}, {"ok", &x, 1}};
    ember_save_options o2 = {62, 0, bad, 1, NULL, 0};
    CHECK(ember_save(c, root, &o2) == EMBER_EINVAL);
    o2.blobs = dup, o2.num_blobs = 2;
    CHECK(ember_save(c, root, &o2) == EMBER_EINVAL);
    o2.blobs = NULL, o2.num_blobs = 0, o2.step = -1;
    CHECK(ember_save(c, root, &o2) == EMBER_EINVAL);
    o2.step = 62;
    snprintf(p, sizeof p, "%s/step-000000000061/manifest.json", root);
    int st = ember_save(c, p, &o2);
    CHECK_MSG(st == EMBER_EIO && strstr(ember_errmsg(c), "manifest.json"), "save under a file: %s: %s",
              ember_status_str(st), ember_errmsg(c));
    CHECK(!exists(root, "step-000000000062") && first_value(root) == 99.0f);
    ember_checkpoint *ck = NULL;
    snprintf(p, sizeof p, "%s/nothing-here", root);
    CHECK(ember_checkpoint_open(p, &ck) == EMBER_EIO && strstr(ember_errmsg(NULL), "nothing-here"));
    (void)r;
    ember_collection_destroy(c);
    test_config_free(tc);
}

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* EMBER_CKPT_BENCH_MB: a model of about that many MB (values + Adam state). */
static void bench(int64_t mb)
{
    char root[300];
    snprintf(root, sizeof root, "%s/bench", root_);
    test_config *tc = test_config_new(4, 4);
    for (int t = 0; t < 4; t++) {
        tc->tables[t].dim = 64;
        tc->tables[t].rows = mb * 1000000 / (4 * 64 * 4 * 3);
        tc->tables[t].optimizer = ember_optimizer_default(EMBER_OPT_ADAM);
    }
    ember_collection *c = make(tc), *c2 = make(tc);
    ember_save_options so = {1, 0, NULL, 0, NULL, 0};
    double t0 = bench_now();
    int st = ember_save(c, root, &so);
    double t1 = bench_now();
    ember_checkpoint *ck = NULL;
    st |= ember_checkpoint_open(root, &ck);
    double t2 = bench_now();
    st |= ember_load(c2, ck);
    double t3 = bench_now();
    double bytes = (double)ckpt_file_bytes(ck, 0);
    printf("{\"bench\": \"ckpt\", \"status\": %d, \"mb\": %.1f, \"save_mb_s\": %.0f, \"open_verify_mb_s\": %.0f, "
           "\"load_mb_s\": %.0f}\n",
           st, bytes / 1e6, bytes / 1e6 / (t1 - t0), bytes / 1e6 / (t2 - t1), bytes / 1e6 / (t3 - t2));
    ember_checkpoint_close(ck);
    ember_collection_destroy(c);
    ember_collection_destroy(c2);
    test_config_free(tc);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    ckpt_tmpdir(root_, "ckpt");
    for (int trial = 0; trial < 24; trial++)
        test_roundtrip(&r, trial);
    test_corruption(&r);
    test_mismatch(&r);
    test_folders(&r);
    const char *mb = getenv("EMBER_CKPT_BENCH_MB");
    if (mb && atoll(mb) > 0)
        bench(atoll(mb));
    ckpt_rm_tree(root_);
    return check_report("test_ckpt");
}
