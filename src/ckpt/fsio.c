/*
 * fsio.c: the file-system steps of a durable save (Redis rdbSave, LMDB):
 * write under a temporary name, fsync the file, rename it into place, fsync
 * the folder so the rename itself survives a power cut.  Folders are only
 * ever published by rename, and only ever deleted after a rename to a
 * .trash-* name, so a folder named step-* is always complete.
 */
#define _GNU_SOURCE /* renameat2 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "ckpt/ckpt_impl.h"

void ckpt_fmt(char *out, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(out, cap, f, ap);
    va_end(ap);
}

static int io_fail(char *msg, size_t cap, const char *what, const char *path)
{
    snprintf(msg, cap, "%s %s: %s", what, path, strerror(errno));
    return EMBER_EIO;
}

int ckpt_fsync_dir(const char *dir, char *msg, size_t cap)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return io_fail(msg, cap, "cannot open folder", dir);
    int rc = fsync(fd);
    /* some file systems refuse fsync on a folder; the rename is then as
     * durable as they make it */
    if (rc != 0 && errno != EINVAL && errno != EROFS) {
        int e = errno;
        close(fd);
        errno = e;
        return io_fail(msg, cap, "cannot fsync folder", dir);
    }
    close(fd);
    return EMBER_OK;
}

int ckpt_write_atomic(const char *dir, const char *name, const void *data, int64_t bytes, char *msg,
                      size_t cap)
{
    char tmp[4096], dst[4096];
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return io_fail(msg, cap, "cannot create", tmp);
    const char *p = data;
    while (bytes > 0) {
        ssize_t n = write(fd, p, (size_t)(bytes > (1 << 30) ? (1 << 30) : bytes));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            errno = e;
            return io_fail(msg, cap, "cannot write", tmp);
        }
        p += n;
        bytes -= n;
    }
    /* close even when fsync failed (the descriptor is not leaked), and
     * name the call that failed */
    const char *what = fsync(fd) != 0 ? "cannot fsync" : NULL;
    int err = errno;
    if (close(fd) != 0 && !what) {
        what = "cannot close";
        err = errno;
    }
    if (what) {
        unlink(tmp);
        errno = err;
        return io_fail(msg, cap, what, tmp);
    }
    if (rename(tmp, dst) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return io_fail(msg, cap, "cannot rename to", dst);
    }
    return ckpt_fsync_dir(dir, msg, cap);
}

int ckpt_mkdirs(const char *path, char *msg, size_t cap)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return io_fail(msg, cap, "cannot create folder", p);
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return io_fail(msg, cap, "cannot create folder", p);
    struct stat sb;
    if (stat(p, &sb) != 0)
        return io_fail(msg, cap, "cannot stat", p);
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return io_fail(msg, cap, "not a folder:", p);
    }
    return EMBER_OK;
}

int ckpt_remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    int rc = 0;
    struct dirent *e;
    char sub[4096];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        struct stat sb;
        if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
            rc |= ckpt_remove_tree(sub);
        else if (unlink(sub) != 0 && errno != ENOENT)
            rc = -1;
    }
    closedir(d);
    if (rmdir(path) != 0 && errno != ENOENT)
        rc = -1;
    return rc;
}

void ckpt_clean_leftovers(const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *e;
    char sub[4096];
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".tmp-", 5) != 0 && strncmp(e->d_name, ".trash-", 7) != 0)
            continue;
        snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
        ckpt_remove_tree(sub);
    }
    closedir(d);
}

/* step-<12 digits>: the step, else -1. */
static int64_t step_of(const char *name)
{
    if (strncmp(name, "step-", 5) != 0 || strlen(name) != 17)
        return -1;
    int64_t s = 0;
    for (int i = 5; i < 17; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        s = s * 10 + (name[i] - '0');
    }
    return s;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int64_t ckpt_list_steps(const char *root, int64_t **steps)
{
    *steps = NULL;
    DIR *d = opendir(root);
    if (!d)
        return -1;
    int64_t n = 0, cap = 0;
    struct dirent *e;
    char sub[4096];
    while ((e = readdir(d)) != NULL) {
        int64_t s = step_of(e->d_name);
        struct stat sb;
        snprintf(sub, sizeof sub, "%s/%s/" CKPT_MANIFEST, root, e->d_name);
        if (s < 0 || stat(sub, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *p = realloc(*steps, sizeof(int64_t) * (size_t)cap);
            if (!p) {
                closedir(d);
                free(*steps);
                *steps = NULL;
                errno = ENOMEM;
                return -1;
            }
            *steps = p;
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    if (n > 1)
        qsort(*steps, (size_t)n, sizeof(int64_t), cmp_i64);
    return n;
}

/* A fresh .trash-* name under root. */
static void trash_name(char *out, size_t cap, const char *root, const char *what)
{
    static unsigned counter;
    snprintf(out, cap, "%s/.trash-%s-%ld-%u", root, what, (long)getpid(), counter++);
}

int ckpt_discard(const char *root, int64_t step, char *msg, size_t cap)
{
    char src[4096], name[32], trash[4096];
    snprintf(name, sizeof name, "step-%012lld", (long long)step);
    snprintf(src, sizeof src, "%s/%s", root, name);
    trash_name(trash, sizeof trash, root, name);
    if (rename(src, trash) != 0)
        return io_fail(msg, cap, "cannot rename", src);
    int st = ckpt_fsync_dir(root, msg, cap);
    ckpt_remove_tree(trash);
    return st;
}

int ckpt_publish(const char *root, const char *tmp, const char *dst, char *msg, size_t cap)
{
    char trash[4096];
    struct stat sb;
    const char *base = strrchr(dst, '/');
    trash_name(trash, sizeof trash, root, base ? base + 1 : dst);
    /* A failed fsync of root after the rename undoes the rename: the save
     * reports a failure, so root must hold what it held before (the caller
     * then removes tmp), not a checkpoint whose name may not be on disk. */
    if (stat(dst, &sb) != 0) {
        if (rename(tmp, dst) != 0)
            return io_fail(msg, cap, "cannot rename to", dst);
        int st = ckpt_fsync_dir(root, msg, cap);
        if (st != EMBER_OK)
            rename(dst, tmp);
        return st;
    }
    /* replacing: swap the two names atomically where the system can, so
     * step-<step> names a complete checkpoint at every instant */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_EXCHANGE) == 0) {
        int st = ckpt_fsync_dir(root, msg, cap);
        if (st != EMBER_OK) { /* swap back: the old one at dst, the new one removed by the caller */
            renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_EXCHANGE);
            return st;
        }
        if (rename(tmp, trash) == 0)
            ckpt_remove_tree(trash);
        return st;
    }
    /* else move the old one aside (a crash now leaves the step missing,
     * the other checkpoints intact), and put it back if the new one cannot
     * take its place */
    if (rename(dst, trash) != 0)
        return io_fail(msg, cap, "cannot rename", dst);
    if (rename(tmp, dst) != 0) {
        int e = errno;
        rename(trash, dst);
        errno = e;
        return io_fail(msg, cap, "cannot rename to", dst);
    }
    int st = ckpt_fsync_dir(root, msg, cap);
    if (st != EMBER_OK) { /* the new one back to tmp, the old one back in place */
        if (rename(dst, tmp) == 0)
            rename(trash, dst);
        return st;
    }
    ckpt_remove_tree(trash);
    return st;
}
