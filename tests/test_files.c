/*
 * test_files.c: the files ember writes (src/core/safe_file.h,
 * docs/RELIABILITY.md "Files ember writes").  For every kind of file a link
 * is planted at the exact name ember writes (and at the temporary name,
 * where one is used) and must be refused by name with its target byte for
 * byte untouched; a folder, a FIFO and a regular file ember did not make are
 * refused too, or (an output the user named) replaced by rename only, its
 * other names untouched.  A failed write (a file size limit: the same
 * failed write(2) a full disk gives) must fail the commit with the OS
 * reason and leave nothing.
 *
 *   outputs        safe_out, both ways (O_TMPFILE and the named temporary)
 *   trees          removing a tree never follows a link
 *   store files    the SSD tier: a link, a file of someone else's, a
 *                  leftover of a killed process (taken), a table name that
 *                  cannot be a file name
 *   checkpoints    a link at step-N, at a .tmp-* leftover name and at an
 *                  older step that keep would delete
 *   batch files    ember_batch_writer at a link and at name.tmp
 *   exports        ember_export's (key, row) file at a link
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/safe_file.h"
#include "ember-data.h"
#include "ember.h"

static char root[256];
static const char PRECIOUS[] = "precious: not ember's\n";

static void path_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", root, name); }

static int file_is(const char *path, const char *want)
{
    char buf[4096] = "";
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return n == strlen(want) && !memcmp(buf, want, n);
}

static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* The victim: a file outside every folder ember writes, made once (main)
 * and only read after, so that a write through a link shows. */
static const char *victim(void)
{
    static char v[300];
    if (!v[0])
        path_of(v, sizeof v, "victim");
    return v;
}

/* Plants a link at folder/name pointing to the victim. */
static void plant(const char *folder, const char *name)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", folder, name);
    unlink(p);
    CHECK(symlink(victim(), p) == 0);
}

static int write_output(const char *path, const char *text, int flags, char *err, size_t len)
{
    safe_out o;
    int st = safe_out_open_path(&o, path, flags, err, len);
    if (st != EMBER_OK)
        return st;
    safe_out_write(&o, text, (int64_t)strlen(text));
    return safe_out_commit(&o, err, len);
}

/* ------------------------------------------------------------ outputs */

static void outputs(int named)
{
    safe_file_tmpfile_off(named);
    char d[300], p[700], q[700], err[1024];
    snprintf(d, sizeof d, "%s/out-%d", root, named);
    mkdir(d, 0700);
    /* a link at the name, and at name.tmp */
    plant(d, "a");
    snprintf(p, sizeof p, "%s/a", d);
    CHECK(write_output(p, "new\n", 0, err, sizeof err) == EMBER_EIO);
    CHECK_MSG(strstr(err, "/a is a symbolic link") && strstr(err, "does not write through links"), "%s", err);
    CHECK(file_is(victim(), PRECIOUS));
    plant(d, "b.tmp");
    snprintf(p, sizeof p, "%s/b", d);
    CHECK(write_output(p, "new\n", 0, err, sizeof err) == EMBER_EIO);
    CHECK_MSG(strstr(err, "b.tmp exists (a symbolic link)"), "%s", err);
    CHECK(file_is(victim(), PRECIOUS) && !exists(p));
    /* a folder, a FIFO */
    snprintf(p, sizeof p, "%s/c", d);
    mkdir(p, 0700);
    CHECK(write_output(p, "new\n", 0, err, sizeof err) == EMBER_EIO);
    CHECK_MSG(strstr(err, "/c is a folder, not a file"), "%s", err);
    snprintf(p, sizeof p, "%s/fifo", d);
    CHECK(mkfifo(p, 0600) == 0);
    CHECK(write_output(p, "new\n", 0, err, sizeof err) == EMBER_EIO);
    CHECK_MSG(strstr(err, "fifo is a device, FIFO or socket"), "%s", err);
    /* a regular file the user named: replaced by rename, its other name keeps the old bytes */
    snprintf(p, sizeof p, "%s/e", d);
    snprintf(q, sizeof q, "%s/e.other-name", d);
    put_file(p, PRECIOUS);
    CHECK(link(p, q) == 0);
    CHECK_MSG(write_output(p, "new\n", 0, err, sizeof err) == EMBER_OK, "%s", err);
    CHECK(file_is(p, "new\n") && file_is(q, PRECIOUS));
    snprintf(q, sizeof q, "%s/e.tmp", d);
    CHECK(!exists(q));
    /* appending: the old bytes first */
    CHECK(write_output(p, "more\n", SAFE_OUT_APPEND, err, sizeof err) == EMBER_OK);
    CHECK(file_is(p, "new\nmore\n"));
    /* a failed write: the commit says why and leaves the old file as it was */
    struct rlimit old, small = {4096, 4096};
    getrlimit(RLIMIT_FSIZE, &old);
    small.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    char big[8192];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(write_output(p, big, 0, err, sizeof err) == EMBER_EIO);
    CHECK_MSG(strstr(err, "cannot write") && strstr(err, "/e: File too large"), "%s", err);
    CHECK(file_is(p, "new\nmore\n") && !exists(q));
    snprintf(q, sizeof q, "%s/f", d);
    CHECK(write_output(q, big, 0, err, sizeof err) == EMBER_EIO && !exists(q));
    setrlimit(RLIMIT_FSIZE, &old);
    /* a live output (published at open): taken back on abort */
    safe_out o;
    CHECK(safe_out_open_path(&o, q, 0, err, sizeof err) == EMBER_OK);
    CHECK(safe_out_publish(&o, err, sizeof err) == EMBER_OK && exists(q));
    safe_out_write(&o, "line\n", 5);
    safe_out_abort(&o);
    CHECK(!exists(q));
    CHECK(safe_out_open_path(&o, p, SAFE_OUT_APPEND, err, sizeof err) == EMBER_OK);
    CHECK(safe_out_publish(&o, err, sizeof err) == EMBER_OK);
    safe_out_write(&o, "half", 4);
    safe_out_abort(&o);
    CHECK_MSG(file_is(p, "new\nmore\n"), "an appended output taken back keeps its old bytes");
    /* nothing in the folder but what the user or the test made */
    snprintf(q, sizeof q, "%s/b.tmp", d);
    CHECK(unlink(q) == 0);
    snprintf(q, sizeof q, "%s/a", d);
    CHECK(unlink(q) == 0);
    safe_file_tmpfile_off(0);
}

static void trees(void)
{
    char d[300], p[700], keep[700], err[512];
    snprintf(d, sizeof d, "%s/tree", root);
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/sub", d);
    mkdir(p, 0700);
    snprintf(keep, sizeof keep, "%s/keep", root);
    mkdir(keep, 0700);
    snprintf(p, sizeof p, "%s/keep/file", root);
    put_file(p, PRECIOUS);
    snprintf(p, sizeof p, "%s/sub/link", d);
    CHECK(symlink(keep, p) == 0);
    safe_dir rd;
    CHECK(safe_dir_open(&rd, root, err, sizeof err) == EMBER_OK);
    CHECK(safe_remove_tree(&rd, "tree") == 0 && !exists(d));
    snprintf(p, sizeof p, "%s/keep/file", root);
    CHECK_MSG(file_is(p, PRECIOUS), "removing a tree followed a link");
    /* a link given as the tree: the link goes, its target stays */
    snprintf(p, sizeof p, "%s/tlink", root);
    CHECK(symlink(keep, p) == 0);
    CHECK(safe_remove_tree(&rd, "tlink") == 0 && !exists(p));
    snprintf(p, sizeof p, "%s/keep/file", root);
    CHECK(file_is(p, PRECIOUS));
    safe_dir_close(&rd);
}

/* ------------------------------------------------------------ store files */

static ember_table_config ssd_table(const char *name)
{
    ember_table_config t = ember_table_config_default();
    t.name = name;
    t.rows = 1000;
    t.dim = 8;
    t.storage = EMBER_STORAGE_SSD;
    t.cache_bytes = 64 << 10;
    return t;
}

/* A collection of table t alone, one feature "f" on it. */
static int one_table(ember_table_config t, const char *ssd_dir, ember_collection **c)
{
    ember_feature_config f = {"f", 0, EMBER_COMBINER_SUM};
    ember_collection_config cc = ember_collection_config_default();
    cc.tables = &t;
    cc.num_tables = 1;
    cc.features = &f;
    cc.num_features = 1;
    cc.ssd_dir = ssd_dir;
    return ember_collection_create(&cc, c);
}

static int ssd_create(const char *dir, const char *table, ember_collection **c)
{
    return one_table(ssd_table(table), dir, c);
}

static void store_files(void)
{
    char d[300], p[700];
    snprintf(d, sizeof d, "%s/ssd", root);
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/t.rank0.ember-store", d);
    ember_collection *c = NULL;
    /* a link at the store's name */
    plant(d, "t.rank0.ember-store");
    CHECK(ssd_create(d, "t", &c) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "t.rank0.ember-store exists (a symbolic link)"), "%s", ember_errmsg(NULL));
    CHECK(file_is(victim(), PRECIOUS));
    unlink(p);
    /* a file that no ember store left */
    put_file(p, PRECIOUS);
    CHECK(ssd_create(d, "t", &c) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "exists and it is not an ember store file"), "%s", ember_errmsg(NULL));
    CHECK(file_is(p, PRECIOUS));
    unlink(p);
    /* a store that a killed process left: taken, then removed with its collection */
    pid_t pid = fork();
    if (pid == 0) {
        ember_collection *k = NULL;
        _exit(ssd_create(d, "t", &k) == EMBER_OK ? 0 : 1); /* no destroy: as if killed */
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && exists(p));
    /* ... but not one that others may write, or that another user owns */
    CHECK(chmod(p, 0644) == 0);
    CHECK(ssd_create(d, "t", &c) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "it is not this user's own store file (owner") &&
                  strstr(ember_errmsg(NULL), "mode 644"), "%s", ember_errmsg(NULL));
    CHECK(chmod(p, 0600) == 0);
    if (geteuid() == 0) { /* root can give it away (as an attacker's own file would be) */
        CHECK(chown(p, 65534, 65534) == 0);
        CHECK(ssd_create(d, "t", &c) == EMBER_EIO);
        CHECK_MSG(strstr(ember_errmsg(NULL), "owner 65534"), "%s", ember_errmsg(NULL));
        CHECK(chown(p, 0, 0) == 0);
    }
    CHECK_MSG(ssd_create(d, "t", &c) == EMBER_OK, "a killed store's leftover: %s", ember_errmsg(NULL));
    ember_collection_destroy(c);
    CHECK(!exists(p));
    /* a hard link to someone's file at the name: refused */
    char other[700];
    snprintf(other, sizeof other, "%s/other-file", root);
    put_file(other, PRECIOUS);
    CHECK(link(other, p) == 0);
    CHECK(ssd_create(d, "t", &c) == EMBER_EIO);
    CHECK(file_is(other, PRECIOUS));
    unlink(p);
    /* a table whose name cannot name a file */
    CHECK(ssd_create(d, "../t", &c) == EMBER_EINVAL);
    CHECK_MSG(strstr(ember_errmsg(NULL), "a name with '/'"), "%s", ember_errmsg(NULL));
    /* a regular file as the folder: said as such */
    CHECK(ssd_create(victim(), "t", &c) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "victim is not a folder"), "%s", ember_errmsg(NULL));
}

/* ------------------------------------------------------------ checkpoints */

static ember_collection *memory_collection(void)
{
    ember_table_config t = ember_table_config_default();
    t.name = "t";
    t.rows = 100;
    t.dim = 4;
    ember_collection *c = NULL;
    CHECK(one_table(t, NULL, &c) == EMBER_OK);
    return c;
}

static void checkpoints(void)
{
    char ck[300], p[700], vdir[300], vfile[700];
    snprintf(ck, sizeof ck, "%s/ck", root);
    snprintf(vdir, sizeof vdir, "%s/victim-dir", root);
    snprintf(vfile, sizeof vfile, "%s/victim-dir/manifest.json", root);
    mkdir(ck, 0700);
    mkdir(vdir, 0700);
    put_file(vfile, PRECIOUS);
    ember_collection *c = memory_collection();
    ember_save_options so = {0};
    /* a link at the step folder's name: refused, the folder it points to untouched */
    snprintf(p, sizeof p, "%s/step-000000000001", ck);
    CHECK(symlink(vdir, p) == 0);
    so.step = 1;
    CHECK(ember_save(c, ck, &so) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(c), "step-000000000001 is a symbolic link"), "%s", ember_errmsg(c));
    CHECK(file_is(vfile, PRECIOUS));
    unlink(p);
    /* a link at a leftover's name: never emptied */
    snprintf(p, sizeof p, "%s/.tmp-step-000000000009-1-1", ck);
    CHECK(symlink(vdir, p) == 0);
    so.step = 2;
    CHECK_MSG(ember_save(c, ck, &so) == EMBER_OK, "%s", ember_errmsg(c));
    CHECK_MSG(file_is(vfile, PRECIOUS), "cleaning leftovers followed a link");
    unlink(p);
    /* a link at an older step that keep = 1 deletes: it is not a checkpoint */
    snprintf(p, sizeof p, "%s/step-000000000000", ck);
    CHECK(symlink(vdir, p) == 0);
    so.step = 3;
    so.keep = 1;
    CHECK_MSG(ember_save(c, ck, &so) == EMBER_OK, "%s", ember_errmsg(c));
    CHECK_MSG(file_is(vfile, PRECIOUS), "keep deleted through a link");
    snprintf(p, sizeof p, "%s/step-000000000002", ck);
    CHECK_MSG(!exists(p), "keep = 1 keeps one checkpoint");
    snprintf(p, sizeof p, "%s/step-000000000003/manifest.json", ck);
    CHECK(exists(p));
    ember_checkpoint *k = NULL;
    CHECK_MSG(ember_checkpoint_open(ck, &k) == EMBER_OK, "%s", ember_errmsg(NULL));
    ember_checkpoint_close(k);
    ember_collection_destroy(c);
}

/* ------------------------------------------------------------ data files */

static void batch_files(void)
{
    char d[300], p[700];
    snprintf(d, sizeof d, "%s/data", root);
    mkdir(d, 0700);
    int64_t rows[1] = {10};
    int32_t ft[1] = {0};
    ember_batch_file_info info = {1, rows, 1, ft};
    ember_batch_writer *w = NULL;
    plant(d, "a.batches");
    snprintf(p, sizeof p, "%s/a.batches", d);
    CHECK(ember_batch_writer_create(p, &info, &w) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "a.batches is a symbolic link"), "%s", ember_errmsg(NULL));
    CHECK(file_is(victim(), PRECIOUS));
    safe_file_tmpfile_off(1);
    plant(d, "b.batches.tmp");
    snprintf(p, sizeof p, "%s/b.batches", d);
    CHECK(ember_batch_writer_create(p, &info, &w) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "b.batches.tmp exists (a symbolic link)"), "%s", ember_errmsg(NULL));
    CHECK(file_is(victim(), PRECIOUS) && !exists(p));
    safe_file_tmpfile_off(0);
}

static void exports(void)
{
    char ck[300], p[700];
    snprintf(ck, sizeof ck, "%s/eck", root);
    ember_collection *c = memory_collection();
    ember_save_options so = {0};
    CHECK(ember_save(c, ck, &so) == EMBER_OK);
    ember_collection_destroy(c);
    ember_checkpoint *k = NULL;
    CHECK(ember_checkpoint_open(ck, &k) == EMBER_OK);
    plant(root, "t.rows");
    snprintf(p, sizeof p, "%s/t.rows", root);
    CHECK(ember_export(k, "t", p) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "t.rows is a symbolic link"), "%s", ember_errmsg(NULL));
    CHECK(file_is(victim(), PRECIOUS));
    unlink(p);
    CHECK_MSG(ember_export(k, "t", p) == EMBER_OK, "%s", ember_errmsg(NULL));
    ember_checkpoint_close(k);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/ember-files-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    put_file(victim(), PRECIOUS);
    outputs(0);
    outputs(1);
    trees();
    store_files();
    checkpoints();
    batch_files();
    exports();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_report("test_files");
}
