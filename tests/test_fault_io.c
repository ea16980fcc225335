/*
 * test_fault_io.c: the SSD tier and ember_save under system-call faults
 * (docs/RELIABILITY.md, "The SSD tier").  The program runs with
 * tests/fault/fault_shim.c preloaded (it starts itself again under
 * LD_PRELOAD when the shim is not loaded yet) and switches the fault on and
 * off between calls (ember_fault_reload), so every fault below is a real
 * pwrite/pwritev/write/fsync/close of the library that returns -1 with
 * ENOSPC or EIO (or a short write), not an injection inside the library.
 *
 * Once with O_DIRECT store files (buffered where the filesystem refuses
 * O_DIRECT) and once buffered; the store's log writes whole segments with
 * pwrite:
 *   - steps 1..7 of an SSD collection whose cache is a quarter of each
 *     table, so every step writes dirty rows back: with every store write
 *     failing, ember_forward returns EMBER_EIO naming the table, the store
 *     file and the system's reason (at once, or, when the write failed in
 *     the background, at the next forward: never swallowed), ember_backward
 *     refuses (EMBER_ESTATE); with the fault gone the same step runs again
 *     and the outputs, tables and optimizer state equal the memory tier's
 *     bit for bit.  A save between the failed step and its retry holds the
 *     state before the step.  Buffered: a short write followed by success
 *     is continued (the step succeeds, results equal).
 *   - ember_save with a fault in each of its writes: the store's flush of
 *     dirty rows, the data file's write, fsync and close, the manifest's
 *     write and fsync, the fsync of the temporary folder and of the root
 *     after the rename (new and replacing): EMBER_EIO naming the file and
 *     the reason; the previous checkpoint stays the newest and verifies, no
 *     step-* folder of the failed save remains, no descriptor leaks, the
 *     tables are unchanged; with the fault gone the save succeeds and loads
 *     into the memory tier equal to it.
 * Every fault must have been injected (the shim's count), or the test fails.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collection/collection.h"
#include "core/safe_file.h"
#include "tier/ssd.h"
#include "tier/ssd_size.h"
#include "util.h"

#ifndef EMBER_FAULT_SHIM
#error "EMBER_FAULT_SHIM: the path of the fault shim library (CMakeLists.txt)"
#endif

#define STEPS 8

static char root[PATH_MAX];
static int (*shim_reload)(void);
static long long (*shim_injected)(void);

/* ------------------------------------------------------------- the shim */

/* Fails calls (a comma list for EMBER_FAULT_CALLS) on paths matching pat:
 * after `after` matching calls, `count` of them (0: all), with err. */
static void fault_on(const char *pat, const char *calls, int after, int count, const char *err, int shortw)
{
    char a[32], c[32];
    snprintf(a, sizeof a, "%d", after);
    snprintf(c, sizeof c, "%d", count);
    setenv("EMBER_FAULT_PATH", pat, 1);
    setenv("EMBER_FAULT_CALLS", calls, 1);
    setenv("EMBER_FAULT_AFTER", a, 1);
    setenv("EMBER_FAULT_COUNT", c, 1);
    setenv("EMBER_FAULT_ERRNO", err, 1);
    setenv("EMBER_FAULT_SHORT", shortw ? "1" : "0", 1);
    CHECK(shim_reload() == 1);
}

/* Off; returns the failures injected while it was on. */
static long long fault_off(void)
{
    long long n = shim_injected();
    unsetenv("EMBER_FAULT_PATH");
    shim_reload();
    return n;
}

/* ------------------------------------------------------------- helpers */

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}
static void rm_tree(const char *p) { nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* Names in dir that start with prefix (".tmp-", "step-..."). */
static int count_named(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    if (!d)
        return 0;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

typedef struct steps {
    test_batch tb[STEPS];
    float *dp[STEPS], *ds[STEPS];
} steps;

static void make_steps(test_rng *r, const test_config *tc, steps *st)
{
    for (int s = 0; s < STEPS; s++) {
        test_batch_opts o = test_batch_opts_default();
        o.batch_size = 128;
        o.max_len = 6;
        o.empty_frac = 0;
        o.weighted = (int)test_range(r, 0, 2);
        test_batch_make(r, &tc->cfg, &o, &st->tb[s]);
        int64_t W = test_pooled_width(&tc->cfg), S = test_sequence_size(&tc->cfg, &st->tb[s].b);
        st->dp[s] = malloc((size_t)(o.batch_size * W + 1) * sizeof(float));
        st->ds[s] = malloc((size_t)(S + 1) * sizeof(float));
        test_fill(r, st->dp[s], o.batch_size * W, -1, 1);
        test_fill(r, st->ds[s], S, -1, 1);
    }
}

static void free_steps(steps *st)
{
    for (int s = 0; s < STEPS; s++) {
        test_batch_free(&st->tb[s]);
        free(st->dp[s]);
        free(st->ds[s]);
    }
}

static size_t out_floats(const test_config *tc, const steps *st, int s)
{
    return (size_t)(st->tb[s].b.batch_size * test_pooled_width(&tc->cfg) +
                    test_sequence_size(&tc->cfg, &st->tb[s].b));
}

/* Waits for every store's segment writer: a write the step queued has been
 * made (or has failed) when this returns. */
static void wait_writes(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++)
        ember_store_ssd_wait_writes(c->ptables[p].store);
}

static int step(ember_collection *c, const test_config *tc, steps *st, int s, float *out)
{
    int rc = ember_forward(c, &st->tb[s].b, out, out + st->tb[s].b.batch_size * test_pooled_width(&tc->cfg));
    return rc != EMBER_OK ? rc : ember_backward(c, st->dp[s], st->ds[s]);
}

/* Table t's values of a and b: bitwise equal? */
static int same_values(const ember_collection *a, const ember_collection *b, const test_config *tc, int32_t t)
{
    float *x = test_read_table(a, &tc->cfg, t, 0), *y = test_read_table(b, &tc->cfg, t, 0);
    int same = x && y && memcmp(x, y, sizeof(float) * (size_t)(tc->tables[t].rows * tc->tables[t].dim)) == 0;
    free(x);
    free(y);
    return same;
}

/* The newest checkpoint under ck opens (checksums verified) at want_step. */
static void newest_is(const char *ck, int64_t want_step, const char *what)
{
    ember_checkpoint *k = NULL;
    int rc = ember_checkpoint_open(ck, &k);
    CHECK_MSG(rc == EMBER_OK && ember_checkpoint_step(k) == want_step, "%s: open %s: %d %s, step %lld (want %lld)",
              what, ck, rc, rc == EMBER_OK ? "" : ember_errmsg(NULL), k ? (long long)ember_checkpoint_step(k) : -1LL,
              (long long)want_step);
    ember_checkpoint_close(k);
}

/* ------------------------------------------------------------- the run */

/* buffered: through the page cache, else O_DIRECT; half: fp16 rows on the
 * row-wise Adagrad table, bf16 rows and state on the Adam one (smaller
 * records, the same failures). */
static void one_mode(test_rng *r, int buffered, int half)
{
    test_config *tc = test_config_new(2, 2);
    for (int32_t t = 0; t < 2; t++) {
        tc->tables[t].rows = 2000;
        tc->tables[t].dim = 8;
        tc->tables[t].optimizer = test_optimizer_random(r, t ? EMBER_OPT_ADAM : EMBER_OPT_ROWWISE_ADAGRAD);
        tc->features[t].table = t;
    }
    if (half) {
        tc->tables[0].precision = EMBER_PRECISION_FP16;
        tc->tables[1].precision = EMBER_PRECISION_BF16;
        tc->tables[1].state_precision = EMBER_PRECISION_BF16;
    }
    tc->cfg.seed = test_next(r);
    tc->cfg.threads = 2;
    steps st;
    make_steps(r, tc, &st);
    char dir[PATH_MAX + 16], ck[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/store%d%d", root, buffered, half);
    snprintf(ck, sizeof ck, "%s/ck%d%d", root, buffered, half);
    mkdir(dir, 0700);
    test_config *cc = test_config_copy(tc);
    cc->cfg.ssd_dir = dir;
    cc->cfg.ssd_policy = EMBER_CACHE_LRU;
    cc->cfg.io_threads = 4; /* concurrent pwrites into the shim */
    cc->cfg.ssd_buffered = buffered;
    for (int32_t t = 0; t < 2; t++) { /* about 500 of 2000 rows (docs/tiers.md: a record + 38 bytes a row
                                         under LRU): dirty rows are evicted every step */
        cc->tables[t].storage = EMBER_STORAGE_SSD;
        cc->tables[t].cache_bytes = ember_ssd_cache_bytes_for(500, cc->tables[t].rows, test_ssd_record_bytes(&cc->tables[t]),
                                                              EMBER_CACHE_LRU);
    }
    ember_collection *mem = NULL, *ssd = NULL;
    CHECK(ember_collection_create(&tc->cfg, &mem) == EMBER_OK);
    CHECK_MSG(ember_collection_create(&cc->cfg, &ssd) == EMBER_OK, "create: %s", ember_errmsg(NULL));
    if (!mem || !ssd)
        return;
    float *o1 = calloc(out_floats(tc, &st, 0) + 1, sizeof(float)), *o2 = calloc(out_floats(tc, &st, 0) + 1, sizeof(float));
    int faulted = 0, shorts = 0;
    ember_save_options so = {0};

    /* ---- write-back during steps.  Dirty rows leave the cache as appends to
     * the store's log, and its writer thread writes whole segments while the
     * step goes on: a failed segment write is kept in memory and retried,
     * and reported by the next forward (the retry fails while the fault is
     * on).  So a forward that succeeded over an injected failure must be
     * followed by a forward that reports it. */
    int on = 0, pending = 0, enospc = 0;
    for (int s = 0; s < STEPS; s++) {
        if (on && buffered && s == 6) { /* a fault no write met: off, for the short writes */
            fault_off();
            on = pending = 0;
        }
        if (!on && s >= 1 && !(buffered && s >= 6)) { /* on until a forward reports it */
            enospc = s % 2;
            fault_on(".ember-store", "writes", s == 3 && !buffered ? 1 : 0, 0, enospc ? "ENOSPC" : "EIO", 0);
            on = 1;
        }
        if (on) {
            int64_t W = test_pooled_width(&tc->cfg);
            int rc = ember_forward(ssd, &st.tb[s].b, o2, o2 + st.tb[s].b.batch_size * W);
            wait_writes(ssd); /* the segments this forward queued: written or failed now */
            long long inj = shim_injected();

            if (rc != EMBER_OK) {
                faulted++;
                const char *m = ember_errmsg(ssd);
                CHECK_MSG(rc == EMBER_EIO && strstr(m, "table '") && strstr(m, "write-back of row") &&
                              strstr(m, ".ember-store") && strstr(m, strerror(enospc ? ENOSPC : EIO)),
                          "mode %d step %d: status %d, message %s", buffered, s, rc, m);
                CHECK_MSG(inj > 0, "mode %d step %d: failed with no fault injected: %s", buffered, s, m);
                if (faulted == 1)
                    printf("mode %d step %d: %s\n", buffered, s, m);
                CHECK(ember_backward(ssd, st.dp[s], st.ds[s]) == EMBER_ESTATE);
                fault_off();
                on = pending = 0;
            } else {
                CHECK_MSG(!pending, "mode %d step %d: a failed segment write of the step before was not reported",
                          buffered, s);
                CHECK(ember_backward(ssd, st.dp[s], st.ds[s]) == EMBER_OK);
                pending = inj > 0; /* failed in the background: the next forward must say so */
            }
            ember_stats now;
            ember_collection_stats(ssd, &now);
            if (now.steps == s && faulted == 1) { /* a save right after the failed step holds the state before it */
                char mid[PATH_MAX + 16];
                snprintf(mid, sizeof mid, "%s/mid%d", root, buffered);
                ember_save_options mo = {0};
                mo.step = s;
                ember_checkpoint *k = NULL;
                ember_collection *chk = NULL;
                CHECK_MSG(ember_save(ssd, mid, &mo) == EMBER_OK, "save after a failed step: %s", ember_errmsg(ssd));
                CHECK(ember_checkpoint_open(mid, &k) == EMBER_OK);
                CHECK(ember_collection_create(&tc->cfg, &chk) == EMBER_OK);
                CHECK(k && chk && ember_load(chk, k) == EMBER_OK);
                CHECK_MSG(chk && test_tables_identical(mem, chk, &tc->cfg),
                          "mode %d step %d: a save after the failed step differs from the state before it", buffered, s);
                ember_checkpoint_close(k);
                ember_collection_destroy(chk);
                rm_tree(mid);
            }
            if (now.steps == s) /* the step did not run: again, without the fault */
                CHECK_MSG(step(ssd, tc, &st, s, o2) == EMBER_OK, "mode %d step %d retried: %s", buffered, s,
                          ember_errmsg(ssd));
        } else if (s >= 6) { /* buffered: a short write, then the rest: the step succeeds */
            fault_on(".ember-store", "pwrite", 0, 1, "ENOSPC", 1);
            int rc = step(ssd, tc, &st, s, o2);
            wait_writes(ssd);
            long long inj = fault_off();
            shorts += inj > 0;

            CHECK_MSG(rc == EMBER_OK, "mode %d step %d after a short write: %s", buffered, s, ember_errmsg(ssd));
        } else {
            CHECK(step(ssd, tc, &st, s, o2) == EMBER_OK);
        }
        CHECK(step(mem, tc, &st, s, o1) == EMBER_OK); /* after: a failed SSD step is compared with the state before */
        CHECK_MSG(memcmp(o1, o2, sizeof(float) * out_floats(tc, &st, s)) == 0, "mode %d step %d: outputs differ",
                  buffered, s);
        CHECK_MSG(test_tables_identical(mem, ssd, &tc->cfg), "mode %d step %d: tables differ", buffered, s);
        if (s == 2) {
            so.step = 2;
            CHECK_MSG(ember_save(ssd, ck, &so) == EMBER_OK, "save: %s", ember_errmsg(ssd));
        }
    }
    if (on)
        fault_off();
    CHECK_MSG(faulted >= 2, "mode %d: only %d steps met a failing write-back", buffered, faulted);
    CHECK_MSG(!buffered || shorts >= 1, "mode %d: no short write was made", buffered);

    /* ---- faults during save: the store's flush, then every file the save writes */
    char rootpat[PATH_MAX + 32], real[PATH_MAX];
    CHECK(realpath(ck, real) != NULL);
    snprintf(rootpat, sizeof rootpat, "%s$", real); /* the root folder itself */
    /* named: outputs under NAME.tmp (safe_file.c's way where the file system
     * has no O_TMPFILE); unnamed: O_TMPFILE, whose descriptors /proc shows as
     * "#inode (deleted)" even once the file is named (the descriptor keeps the
     * name it was opened under), so the data file's calls are the first such,
     * and the manifest's come after the data file's close (armed) */
    struct {
        const char *pat, *calls;
        int after, named;
        const char *err, *want, *arm;
    } cases[] = {
        {".ember-store", "writes", 0, 0, "ENOSPC", "write-back of row", NULL}, /* flush of dirty rows */
        {"/.tmp-step-", "write", 0, 1, "ENOSPC", "cannot write", NULL},       /* the data file's first write */
        {".bin.tmp", "fsync", 0, 1, "EIO", "cannot fsync", NULL},
        {"rank-00000-of-00001.bin$", "close", 0, 1, "EIO", "cannot close", NULL}, /* renamed, then closed */
        {"manifest.json.tmp", "write", 0, 1, "ENOSPC", "cannot write", NULL},
        {"manifest.json.tmp", "fsync", 0, 1, "EIO", "cannot fsync", NULL},
        {"/.tmp-step-", "write", 0, 0, "ENOSPC", "cannot write", NULL},
        {"(deleted)", "fsync", 0, 0, "EIO", "cannot fsync", NULL}, /* the data file, unnamed */
        {"(deleted)", "close", 0, 0, "EIO", "cannot close", NULL}, /* named before its close */
        {"(deleted)", "write", 0, 0, "ENOSPC", "cannot write", "(deleted)"}, /* the manifest */
        {"(deleted)", "fsync", 0, 0, "EIO", "cannot fsync", "(deleted)"},
        {"/.tmp-step-", "fsync", 1, 0, "EIO", "cannot fsync the folder", NULL}, /* 0 is the data file's */
        {rootpat, "fsync", 0, 0, "EIO", "cannot fsync the folder", NULL},     /* after the rename to step-* */
    };
    so.step = 6;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fds = open_fds();
        safe_file_tmpfile_off(cases[i].named);
        if (cases[i].arm) { /* counted from the data file's close on */
            setenv("EMBER_FAULT_ARM_PATH", cases[i].arm, 1);
            setenv("EMBER_FAULT_ARM_CALLS", "close", 1);
        }
        fault_on(cases[i].pat, cases[i].calls, cases[i].after, 0, cases[i].err, 0);
        int rc = ember_save(ssd, ck, &so);
        long long inj = fault_off();
        unsetenv("EMBER_FAULT_ARM_PATH");
        unsetenv("EMBER_FAULT_ARM_CALLS");
        safe_file_tmpfile_off(0);
        const char *m = ember_errmsg(ssd);
        int e = strcmp(cases[i].err, "EIO") == 0 ? EIO : ENOSPC;
        CHECK_MSG(rc == EMBER_EIO && strstr(m, cases[i].want) && strstr(m, strerror(e)),
                  "mode %d save case %zu (%s on %s): status %d, message %s", buffered, i, cases[i].calls,
                  cases[i].pat, rc, m);
        CHECK_MSG(inj > 0, "mode %d save case %zu: no fault injected", buffered, i);
        if (buffered == 0)
            printf("save, %s %s on %s: %s\n", cases[i].err, cases[i].calls, cases[i].pat, m);
        CHECK_MSG(open_fds() == fds, "mode %d save case %zu: %d descriptors open before, %d after", buffered, i, fds,
                  open_fds());
        CHECK_MSG(count_named(ck, "step-000000000006") == 0, "mode %d save case %zu: a step-6 folder is left",
                  buffered, i);
        newest_is(ck, 2, "after a failed save");
        CHECK_MSG(test_tables_identical(mem, ssd, &tc->cfg), "mode %d save case %zu: tables changed", buffered, i);
    }
    CHECK_MSG(ember_save(ssd, ck, &so) == EMBER_OK, "save after the faults: %s", ember_errmsg(ssd));
    CHECK(count_named(ck, ".tmp-") == 0 && count_named(ck, ".trash-") == 0);
    newest_is(ck, 6, "after the save");
    ember_checkpoint *k = NULL;
    ember_collection *back = NULL;
    CHECK(ember_checkpoint_open(ck, &k) == EMBER_OK);
    CHECK(ember_collection_create(&tc->cfg, &back) == EMBER_OK);
    CHECK_MSG(ember_load(back, k) == EMBER_OK, "load: %s", ember_errmsg(back));
    CHECK_MSG(test_tables_identical(mem, back, &tc->cfg), "mode %d: the checkpoint differs from the memory tier",
              buffered);
    ember_checkpoint_close(k);

    /* ---- replacing step 6 (RENAME_EXCHANGE) after one more step; root's fsync fails: the old one stays */
    CHECK(step(mem, tc, &st, 0, o1) == EMBER_OK);
    CHECK(step(ssd, tc, &st, 0, o2) == EMBER_OK);
    CHECK(!same_values(mem, back, tc, 0)); /* the step changed table 0 */
    fault_on(rootpat, "fsync", 0, 0, "EIO", 0);
    int rc = ember_save(ssd, ck, &so);
    CHECK_MSG(fault_off() > 0 && rc == EMBER_EIO, "mode %d: replacing save with a failing fsync: %d %s", buffered, rc,
              ember_errmsg(ssd));
    k = NULL;
    ember_collection *old = NULL;
    CHECK(ember_checkpoint_open(ck, &k) == EMBER_OK && ember_checkpoint_step(k) == 6);
    CHECK(ember_collection_create(&tc->cfg, &old) == EMBER_OK);
    CHECK(k && ember_load(old, k) == EMBER_OK);
    CHECK_MSG(test_tables_identical(back, old, &tc->cfg), "mode %d: the failed replacing save changed step 6",
              buffered);
    ember_checkpoint_close(k);

    ember_collection_destroy(old);
    ember_collection_destroy(back);
    ember_collection_destroy(mem);
    ember_collection_destroy(ssd);
    CHECK_MSG(count_named(dir, "") == 2, "mode %d: store files left in %s", buffered, dir); /* . and .. */
    rm_tree(ck);
    rmdir(dir);
    free(o1);
    free(o2);
    free_steps(&st);
    test_config_free(cc);
    test_config_free(tc);
}

static int has_text(const char *path, const char *want)
{
    char buf[64] = "";
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(want) && !memcmp(buf, want, n);
}

/* An output that replaces a file and fails after it was named (the folder's
 * fsync, the file's close): the old file comes back at its name, nothing
 * is left at NAME.tmp; both ways (O_TMPFILE and the named temporary). */
static void output_late_failures(void)
{
    char dir[PATH_MAX + 8], real[PATH_MAX], path[PATH_MAX + 16], tmp[PATH_MAX + 32], pat[PATH_MAX + 32], err[1024];
    snprintf(dir, sizeof dir, "%s/out", root);
    mkdir(dir, 0700);
    CHECK(realpath(dir, real) != NULL);
    snprintf(path, sizeof path, "%s/e", dir);
    snprintf(tmp, sizeof tmp, "%s/e.tmp", dir);
    for (int named = 0; named < 2; named++)
        for (int call = 0; call < 2; call++) {
            FILE *f = fopen(path, "wb");
            fputs("old\n", f);
            fclose(f);
            safe_file_tmpfile_off(named);
            safe_out o;
            CHECK(safe_out_open_path(&o, path, 0, err, sizeof err) == EMBER_OK);
            safe_out_write(&o, "new\n", 4);
            if (call == 0) /* the folder's fsync, after the swap */
                snprintf(pat, sizeof pat, "%s$", real);
            else /* the file's close: the new file, by its descriptor's path */
                snprintf(pat, sizeof pat, named ? "%s/e$" : "%s/#", real);
            fault_on(pat, call == 0 ? "fsync" : "close", 0, 1, "EIO", 0);
            int st = safe_out_commit(&o, err, sizeof err);
            long long inj = fault_off();
            safe_file_tmpfile_off(0);
            CHECK_MSG(inj == 1 && st == EMBER_EIO && strstr(err, call == 0 ? "cannot fsync the folder" : "cannot close"),
                      "named %d, call %d: injected %lld, status %d, %s", named, call, inj, st, err);
            CHECK_MSG(has_text(path, "old\n"), "named %d, call %d: the old file is not back", named, call);
            struct stat sb;
            CHECK_MSG(lstat(tmp, &sb) != 0, "named %d, call %d: e.tmp left", named, call);
        }
    /* and without a failure: the new file in place, the old one gone, no e.tmp */
    safe_out o;
    CHECK(safe_out_open_path(&o, path, 0, err, sizeof err) == EMBER_OK);
    safe_out_write(&o, "new\n", 4);
    CHECK(safe_out_commit(&o, err, sizeof err) == EMBER_OK && has_text(path, "new\n"));
    struct stat sb;
    CHECK(lstat(tmp, &sb) != 0);
}

int main(int argc, char **argv)
{
    shim_reload = (int (*)(void))dlsym(RTLD_DEFAULT, "ember_fault_reload");
    shim_injected = (long long (*)(void))dlsym(RTLD_DEFAULT, "ember_fault_injected");
    if (!shim_reload || !shim_injected) { /* start again with the shim preloaded */
        if (getenv("EMBER_FAULT_REEXEC")) {
            fprintf(stderr, "test_fault_io: %s is preloaded but its functions are not found\n", EMBER_FAULT_SHIM);
            return 1;
        }
        const char *pre = getenv("LD_PRELOAD"), *asan = getenv("ASAN_OPTIONS");
        char buf[8192];
        snprintf(buf, sizeof buf, "%s%s%s", EMBER_FAULT_SHIM, pre && *pre ? ":" : "", pre ? pre : "");
        setenv("LD_PRELOAD", buf, 1);
        /* a sanitizer build: its runtime need not come first (the shim wraps no allocation) */
        snprintf(buf, sizeof buf, "%s%sverify_asan_link_order=0", asan ? asan : "", asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", buf, 1);
        setenv("EMBER_FAULT_REEXEC", "1", 1);
        unsetenv("EMBER_FAULT_PATH");
        execv("/proc/self/exe", argv);
        perror("test_fault_io: execv /proc/self/exe");
        return 1;
    }
    unsetenv("EMBER_FAULT_PATH");
    unsetenv("EMBER_FAULT_ARM_PATH");
    shim_reload();
    uint64_t seed = test_seed(argc, argv);
    test_rng r = {seed};
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/ember-test-fault-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char log[PATH_MAX + 16];
    snprintf(log, sizeof log, "%s/fault.log", root); /* the shim's line per injected failure */
    setenv("EMBER_FAULT_LOG", log, 1);
    one_mode(&r, 0, 0);
    one_mode(&r, 1, 0);
    one_mode(&r, 0, 1);
    output_late_failures();
    rm_tree(root);
    return check_report("test_fault_io");
}
