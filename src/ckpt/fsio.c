/*
 * fsio.c: the file-system steps of a durable save (Redis rdbSave, LMDB):
 * write under a temporary name, fsync the file, rename it into place, fsync
 * the folder so the rename itself survives a power cut.  Folders are only
 * ever published by rename, and only ever deleted after a rename to a
 * .trash-* name, so a folder named step-* is always complete.  Every name is
 * resolved relative to the checkpoint root's descriptor and nothing here
 * follows a link (core/safe_file.h): a link planted at a step or leftover
 * name is never taken for a checkpoint, moved, or emptied.
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

int ckpt_write_atomic(const safe_dir *dir, const char *name, const void *data, int64_t bytes, char *msg, size_t cap)
{
    safe_out o;
    int st = safe_out_open(&o, dir, name, 0, msg, cap);
    if (st != EMBER_OK)
        return st;
    safe_out_write(&o, data, bytes);
    return safe_out_commit(&o, msg, cap);
}

void ckpt_clean_leftovers(const safe_dir *root)
{
    int fd = fcntl(root->fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(d); /* a dup shares the offset of an earlier listing */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) /* only real folders of ours: never a link's target */
        if ((!strncmp(e->d_name, ".tmp-", 5) || !strncmp(e->d_name, ".trash-", 7)) &&
            safe_kind(root, e->d_name) == SAFE_DIR)
            safe_remove_tree(root, e->d_name);
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
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int64_t n = ckpt_list_steps_at(fd, steps);
    close(fd);
    return n;
}

int64_t ckpt_list_steps_at(int root_fd, int64_t **steps)
{
    *steps = NULL;
    int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(d); /* a dup shares the offset of an earlier listing */
    int64_t n = 0, cap = 0;
    struct dirent *e;
    char sub[64];
    while ((e = readdir(d)) != NULL) {
        int64_t s = step_of(e->d_name);
        struct stat sb;
        if (s < 0)
            continue;
        snprintf(sub, sizeof sub, "%.20s/" CKPT_MANIFEST, e->d_name);
        /* a step folder ember published: a real folder, not a link to one */
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode) ||
            fstatat(dirfd(d), sub, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
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

/* A fresh .trash-* name. */
static void trash_name(char *out, size_t cap, const char *what)
{
    static unsigned counter;
    snprintf(out, cap, ".trash-%s-%ld-%u", what, (long)getpid(), counter++);
}

int ckpt_discard(const safe_dir *root, int64_t step, char *msg, size_t cap)
{
    char name[32], trash[320], p[4400];
    snprintf(name, sizeof name, "step-%012lld", (long long)step);
    if (safe_kind(root, name) != SAFE_DIR) /* listed as a folder; now something else: not ours to touch */
        return EMBER_OK;
    trash_name(trash, sizeof trash, name);
    if (renameat(root->fd, name, root->fd, trash) != 0) {
        snprintf(msg, cap, "cannot rename %s: %s", safe_path(root, name, p, sizeof p), strerror(errno));
        return EMBER_EIO;
    }
    int st = safe_dir_sync(root, msg, cap);
    safe_remove_tree(root, trash);
    return st;
}

/* An undo that failed is said, never silent: what root holds now. */
static void undo_failed(const safe_dir *root, const char *dst, char *msg, size_t cap)
{
    size_t n = strlen(msg);
    snprintf(msg + n, cap - n, "; undoing the rename failed too (%s): %s stays, a complete checkpoint",
             strerror(errno), dst);
}

/* The previous checkpoint, moved aside to trash, could not come back to
 * dst: it is kept under a name that no save removes, and said. */
static void keep_aside(const safe_dir *root, const char *trash, const char *dst, char *msg, size_t cap)
{
    char kept[400];
    static unsigned counter;
    snprintf(kept, sizeof kept, "%s.kept-%ld-%u", dst, (long)getpid(), counter++);
    size_t n = strlen(msg);
    if (renameat(root->fd, trash, root->fd, kept) == 0)
        snprintf(msg + n, cap - n, "; the previous %s could not be put back: it is kept as %s", dst, kept);
    else
        snprintf(msg + n, cap - n, "; the previous %s could not be put back: it is at %s (the next save removes "
                 "it: copy it first)", dst, trash);
}

int ckpt_publish(const safe_dir *root, const char *tmp, const char *dst, char *msg, size_t cap)
{
    char trash[320], p[4400];
    int st = safe_expect(root, dst, SAFE_DIR, msg, cap); /* a link or a file there is refused, never moved */
    if (st != EMBER_OK)
        return st;
    trash_name(trash, sizeof trash, dst);
    /* A failed fsync of root after a rename undoes the rename: the save
     * reports a failure, so root must hold what it held before (the caller
     * then removes tmp), not a checkpoint whose name may not be on disk. */
    if (safe_kind(root, dst) == SAFE_ABSENT) {
        if ((st = safe_rename_new(root, tmp, dst, msg, cap)) != EMBER_OK)
            return EMBER_EIO; /* named by safe_rename_new (something came at dst meanwhile: two saves at once) */
        if ((st = safe_dir_sync(root, msg, cap)) != EMBER_OK && renameat(root->fd, dst, root->fd, tmp) != 0)
            undo_failed(root, dst, msg, cap);
        return st;
    }
    /* replacing: swap the two names atomically where the system can, so
     * step-<step> names a complete checkpoint at every instant */
    if (renameat2(root->fd, tmp, root->fd, dst, RENAME_EXCHANGE) == 0) {
        if ((st = safe_dir_sync(root, msg, cap)) != EMBER_OK) { /* swap back: the caller removes the new one */
            if (renameat2(root->fd, tmp, root->fd, dst, RENAME_EXCHANGE) != 0)
                undo_failed(root, dst, msg, cap);
            return st;
        }
        if (renameat(root->fd, tmp, root->fd, trash) == 0)
            safe_remove_tree(root, trash);
        return st;
    }
    /* else move the old one aside (a crash now leaves the step missing,
     * the other checkpoints intact), and put it back if the new one cannot
     * take its place */
    if (renameat(root->fd, dst, root->fd, trash) != 0) {
        snprintf(msg, cap, "cannot rename %s: %s", safe_path(root, dst, p, sizeof p), strerror(errno));
        return EMBER_EIO;
    }
    if (renameat(root->fd, tmp, root->fd, dst) != 0) {
        snprintf(msg, cap, "cannot rename to %s: %s", safe_path(root, dst, p, sizeof p), strerror(errno));
        if (renameat(root->fd, trash, root->fd, dst) != 0)
            keep_aside(root, trash, dst, msg, cap);
        return EMBER_EIO;
    }
    if ((st = safe_dir_sync(root, msg, cap)) != EMBER_OK) { /* the new one back to tmp, the old one in place */
        if (renameat(root->fd, dst, root->fd, tmp) != 0)
            undo_failed(root, dst, msg, cap);
        else if (renameat(root->fd, trash, root->fd, dst) != 0)
            keep_aside(root, trash, dst, msg, cap);
        return st;
    }
    safe_remove_tree(root, trash);
    return st;
}
