/*
 * safe_file.c: the one way ember creates files and folders (safe_file.h).
 *
 * An output is an unnamed O_TMPFILE in its folder where the file system
 * has them (ext4, xfs, btrfs, tmpfs): a crash leaves nothing behind, and
 * there is no temporary name to attack.  It is named at commit by linkat
 * through /proc/self/fd (no capability needed): straight at its name when
 * nothing is there, else at name.tmp and renamed over the regular file.
 * Elsewhere the output is created at name.tmp with O_EXCL | O_NOFOLLOW.
 * Either way anything found at name.tmp is refused, never replaced.
 */
#define _GNU_SOURCE /* O_TMPFILE, O_DIRECT, renameat2 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/safe_file.h"
#include "ember.h"

static int failf(char *err, size_t len, int status, const char *f, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, f);
        vsnprintf(err, len, f, ap);
        va_end(ap);
    }
    return status;
}

const char *safe_path(const safe_dir *d, const char *name, char *buf, size_t cap)
{
    if (!strcmp(d->path, "."))
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%s%s%s", d->path, d->path[0] && d->path[strlen(d->path) - 1] == '/' ? "" : "/", name);
    return buf;
}

int safe_dir_open(safe_dir *d, const char *path, char *err, size_t len)
{
    snprintf(d->path, sizeof d->path, "%s", path && path[0] ? path : ".");
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->fd >= 0)
        return EMBER_OK;
    int e = errno;
    struct stat sb;
    if (e == ENOTDIR && stat(d->path, &sb) == 0)
        return failf(err, len, EMBER_EIO, "%s is not a folder", d->path);
    return failf(err, len, EMBER_EIO, "cannot open the folder %s: %s", d->path,
                 e == ENOENT ? "it does not exist" : strerror(e));
}

int safe_dir_of(safe_dir *d, const char *path, char *name, size_t name_cap, char *err, size_t len)
{
    d->fd = -1;
    size_t n = path ? strlen(path) : 0;
    if (n == 0)
        return failf(err, len, EMBER_EINVAL, "an empty file name");
    if (path[n - 1] == '/')
        return failf(err, len, EMBER_EINVAL, "%s: names a folder, not a file", path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!strcmp(base, ".") || !strcmp(base, ".."))
        return failf(err, len, EMBER_EINVAL, "%s: names a folder, not a file", path);
    if (strlen(base) >= name_cap)
        return failf(err, len, EMBER_EINVAL, "%s: the file name is too long", path);
    snprintf(name, name_cap, "%s", base);
    char parent[4096];
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == path)
        snprintf(parent, sizeof parent, "/");
    else
        snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    return safe_dir_open(d, parent, err, len);
}

void safe_dir_close(safe_dir *d)
{
    if (d && d->fd >= 0)
        close(d->fd);
    if (d)
        d->fd = -1;
}

int safe_dir_sync(const safe_dir *d, char *err, size_t len)
{
    if (fsync(d->fd) != 0 && errno != EINVAL && errno != EROFS)
        return failf(err, len, EMBER_EIO, "cannot fsync the folder %s: %s", d->path, strerror(errno));
    return EMBER_OK;
}

int safe_kind(const safe_dir *d, const char *name)
{
    struct stat sb;
    if (fstatat(d->fd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? SAFE_ABSENT : SAFE_ERROR;
    return S_ISREG(sb.st_mode) ? SAFE_FILE : S_ISDIR(sb.st_mode) ? SAFE_DIR : S_ISLNK(sb.st_mode) ? SAFE_LINK : SAFE_OTHER;
}

static const char *kind_words(int k)
{
    switch (k) {
    case SAFE_FILE: return "a file";
    case SAFE_DIR: return "a folder";
    case SAFE_LINK: return "a symbolic link";
    default: return "a device, FIFO or socket";
    }
}

int safe_expect(const safe_dir *d, const char *name, int want, char *err, size_t len)
{
    char p[4400];
    int k = safe_kind(d, name);
    if (k == SAFE_ABSENT || k == want)
        return EMBER_OK;
    if (k == SAFE_ERROR)
        return failf(err, len, EMBER_EIO, "cannot examine %s: %s", safe_path(d, name, p, sizeof p), strerror(errno));
    return failf(err, len, EMBER_EIO, "%s is %s, not %s: ember does not write through links or replace what it did "
                 "not create (remove it, or choose another name)", safe_path(d, name, p, sizeof p), kind_words(k),
                 kind_words(want));
}

int safe_subdir(const safe_dir *parent, const char *name, int create, safe_dir *out, char *err, size_t len)
{
    char p[4400];
    safe_path(parent, name, p, sizeof p);
    out->fd = -1;
    snprintf(out->path, sizeof out->path, "%.4000s", p);
    if (create && mkdirat(parent->fd, name, 0755) != 0 && errno != EEXIST)
        return failf(err, len, EMBER_EIO, "cannot create the folder %s: %s", p, strerror(errno));
    out->fd = openat(parent->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (out->fd >= 0)
        return EMBER_OK;
    int e = errno;
    int k = safe_kind(parent, name);
    if (k == SAFE_LINK || (k != SAFE_ABSENT && k != SAFE_DIR && k != SAFE_ERROR))
        return safe_expect(parent, name, SAFE_DIR, err, len);
    return failf(err, len, EMBER_EIO, "cannot open the folder %s: %s", p,
                 e == ENOENT ? "it does not exist" : strerror(e));
}

int safe_mkdir(const safe_dir *parent, const char *name, safe_dir *out, char *err, size_t len)
{
    char p[4400];
    out->fd = -1;
    if (mkdirat(parent->fd, name, 0755) != 0) {
        if (errno == EEXIST)
            return failf(err, len, EMBER_EIO, "%s exists (%s): ember does not replace what it did not create",
                         safe_path(parent, name, p, sizeof p), kind_words(safe_kind(parent, name)));
        return failf(err, len, EMBER_EIO, "cannot create the folder %s: %s", safe_path(parent, name, p, sizeof p),
                     strerror(errno));
    }
    return safe_subdir(parent, name, 0, out, err, len);
}

int safe_mkdirs(safe_dir *d, const char *path, char *err, size_t len)
{
    char p[4096];
    d->fd = -1;
    if (!path || !path[0])
        return safe_dir_open(d, ".", err, len);
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return failf(err, len, EMBER_EIO, "cannot create the folder %s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return failf(err, len, EMBER_EIO, "cannot create the folder %s: %s", p, strerror(errno));
    return safe_dir_open(d, path, err, len);
}

int safe_remove_tree(const safe_dir *parent, const char *name)
{
    int fd = openat(parent->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) /* a file, a link (removed, not followed), or nothing */
        return unlinkat(parent->fd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        close(fd);
        return -1;
    }
    safe_dir sub = {fd, ""};
    snprintf(sub.path, sizeof sub.path, "%.3000s/%.1000s", parent->path, name);
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            rc |= safe_remove_tree(&sub, e->d_name);
    closedir(dir); /* closes fd */
    if (unlinkat(parent->fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        rc = -1;
    return rc;
}

int safe_rename_new(const safe_dir *d, const char *from, const char *to, char *err, size_t len)
{
    char p[4400];
    if (renameat2(d->fd, from, d->fd, to, RENAME_NOREPLACE) == 0)
        return EMBER_OK;
    int e = errno;
    if ((e == EINVAL || e == ENOSYS) && safe_kind(d, to) == SAFE_ABSENT) { /* no RENAME_NOREPLACE here */
        if (renameat(d->fd, from, d->fd, to) == 0)
            return EMBER_OK;
        e = errno;
    } else if (e == EINVAL || e == ENOSYS) {
        e = EEXIST;
    }
    if (e == EEXIST || e == ENOTEMPTY)
        return failf(err, len, EMBER_EINVAL, "%s exists", safe_path(d, to, p, sizeof p));
    return failf(err, len, EMBER_EIO, "cannot rename %s to %s: %s", safe_path(d, from, p, sizeof p), to,
                 strerror(e));
}

/* EMBER_EIO: name exists where ember meant to create it. */
static int refuse_existing(const safe_dir *d, const char *name, char *err, size_t len)
{
    char p[4400];
    int k = safe_kind(d, name);
    return failf(err, len, EMBER_EIO, "%s exists (%s): ember does not write through links or replace what it did not "
                 "create (remove it, or choose another name)", safe_path(d, name, p, sizeof p),
                 k == SAFE_ABSENT ? "it came and went" : kind_words(k));
}

int safe_create(const safe_dir *d, const char *name, int flags, int mode, char *err, size_t len)
{
    char p[4400];
    int fd = openat(d->fd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0)
        return fd;
    int e = errno;
    if (e == EEXIST)
        refuse_existing(d, name, err, len);
    else
        failf(err, len, EMBER_EIO, "cannot create %s: %s", safe_path(d, name, p, sizeof p), strerror(e));
    errno = e;
    return -1;
}

/* ------------------------------------------------------------- outputs */

static int tmpfile_off;

void safe_file_tmpfile_off(int off) { tmpfile_off = off; }

static int tmpfile_usable(void)
{
    static int usable = -1; /* /proc is what names an unnamed file */
    if (usable < 0)
        usable = access("/proc/self/fd", X_OK) == 0;
    return usable && !tmpfile_off;
}

static int copy_existing(safe_out *o, char *err, size_t len)
{
    char p[4400];
    int in = openat(o->dir.fd, o->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errno == ENOENT ? EMBER_OK
                               : failf(err, len, EMBER_EIO, "cannot read %s: %s",
                                       safe_path(&o->dir, o->name, p, sizeof p), strerror(errno));
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0 && safe_out_write(o, buf, n) == 0)
            o->keep += n;
        else if (n > 0)
            break;
    int e = n < 0 ? errno : 0;
    close(in);
    if (e)
        return failf(err, len, EMBER_EIO, "cannot read %s: %s", safe_path(&o->dir, o->name, p, sizeof p), strerror(e));
    if (o->err)
        return failf(err, len, EMBER_EIO, "cannot write %s: %s", safe_path(&o->dir, o->name, p, sizeof p),
                     strerror(o->err));
    return EMBER_OK;
}

int safe_out_open(safe_out *o, const safe_dir *dir, const char *name, int flags, char *err, size_t len)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->dir.fd = fcntl(dir->fd, F_DUPFD_CLOEXEC, 0);
    snprintf(o->dir.path, sizeof o->dir.path, "%s", dir->path);
    if (o->dir.fd < 0)
        return failf(err, len, EMBER_EIO, "cannot use the folder %s: %s", dir->path, strerror(errno));
    if (strlen(name) + 5 > sizeof o->name) {
        safe_dir_close(&o->dir);
        return failf(err, len, EMBER_EINVAL, "%s: the file name is too long", name);
    }
    snprintf(o->name, sizeof o->name, "%s", name);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int st = safe_expect(&o->dir, name, SAFE_FILE, err, len);
    if (st == EMBER_OK && safe_kind(&o->dir, tmp) != SAFE_ABSENT)
        st = refuse_existing(&o->dir, tmp, err, len);
    if (st == EMBER_OK && tmpfile_usable()) {
        o->fd = openat(o->dir.fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
        o->anon = o->fd >= 0;
    }
    if (st == EMBER_OK && o->fd < 0) {
        if ((o->fd = safe_create(&o->dir, tmp, O_WRONLY, 0644, err, len)) < 0)
            st = EMBER_EIO;
        else
            snprintf(o->tmp, sizeof o->tmp, "%s", tmp);
    }
    if (st == EMBER_OK && (flags & SAFE_OUT_APPEND))
        st = copy_existing(o, err, len);
    if (st != EMBER_OK)
        safe_out_abort(o);
    return st;
}

int safe_out_open_path(safe_out *o, const char *path, int flags, char *err, size_t len)
{
    safe_dir d;
    char name[256];
    memset(o, 0, sizeof *o);
    o->fd = o->dir.fd = -1;
    int st = safe_dir_of(&d, path, name, sizeof name, err, len);
    if (st == EMBER_OK)
        st = safe_out_open(o, &d, name, flags, err, len);
    safe_dir_close(&d);
    return st;
}

int safe_out_write(safe_out *o, const void *p, int64_t n)
{
    const char *c = p;
    while (n > 0 && !o->err) {
        ssize_t k = write(o->fd, c, (size_t)(n > (1 << 30) ? (1 << 30) : n));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            o->err = k < 0 ? errno : EIO;
        else
            c += k, n -= k;
    }
    return o->err ? -1 : 0;
}

/* The stream's bytes go through safe_out_write (every failure kept, with
 * its errno, for the commit); seeks move the descriptor.  As fopencookie
 * wants them: write(2) and lseek(2) results, -1 with errno on failure. */
static ssize_t cookie_write(void *c, const char *buf, size_t n)
{
    safe_out *o = c;
    if (safe_out_write(o, buf, (int64_t)n) != 0) {
        errno = o->err;
        return -1;
    }
    return (ssize_t)n;
}

static int cookie_seek(void *c, off64_t *pos, int whence)
{
    off64_t at = lseek(((safe_out *)c)->fd, *pos, whence);
    if (at < 0)
        return -1;
    *pos = at;
    return 0;
}

static int cookie_close(void *c) { return 0; } /* the descriptor is the output's own */

FILE *safe_out_stdio(safe_out *o)
{
    if (!o->f) {
        cookie_io_functions_t io = {NULL, cookie_write, cookie_seek, cookie_close};
        if (!(o->f = fopencookie(o, "w", io)))
            o->err = o->err ? o->err : errno ? errno : ENOMEM;
    }
    return o->f;
}

int safe_out_flush(safe_out *o)
{
    if (o->f && !o->err && (fflush(o->f) != 0 || ferror(o->f)))
        o->err = errno ? errno : EIO;
    return o->err ? -1 : 0;
}

/* EMBER_OK when the output's file is the one at name (its inode). */
static int still_ours(const safe_out *o)
{
    struct stat a, b;
    return fstat(o->fd, &a) == 0 && fstatat(o->dir.fd, o->name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Gives the output its name.  Nothing there: a link (unnamed) or a rename
 * (named) straight to it.  A regular file there: the new file goes to
 * name.tmp, then the two names are swapped (RENAME_EXCHANGE), so the old
 * file waits at name.tmp until the output is done and can be swapped back
 * if anything fails before; where the file system cannot swap, a rename
 * over it (the old file is then gone at once). */
static int name_output(safe_out *o, char *err, size_t len)
{
    char p[4400], proc[64], tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->name);
    int st = safe_expect(&o->dir, o->name, SAFE_FILE, err, len); /* again: it may have changed */
    if (st != EMBER_OK)
        return st;
    if (o->anon) {
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", o->fd);
        if (linkat(AT_FDCWD, proc, o->dir.fd, o->name, AT_SYMLINK_FOLLOW) == 0)
            return EMBER_OK;
        if (errno != EEXIST)
            return failf(err, len, EMBER_EIO, "cannot name %s: %s", safe_path(&o->dir, o->name, p, sizeof p),
                         strerror(errno));
        if (linkat(AT_FDCWD, proc, o->dir.fd, tmp, AT_SYMLINK_FOLLOW) != 0)
            return errno == EEXIST ? refuse_existing(&o->dir, tmp, err, len)
                                   : failf(err, len, EMBER_EIO, "cannot name %s: %s",
                                           safe_path(&o->dir, tmp, p, sizeof p), strerror(errno));
        snprintf(o->tmp, sizeof o->tmp, "%s", tmp);
    }
    if ((st = safe_expect(&o->dir, o->name, SAFE_FILE, err, len)) != EMBER_OK)
        return st;
    if (safe_kind(&o->dir, o->name) == SAFE_FILE &&
        renameat2(o->dir.fd, o->tmp, o->dir.fd, o->name, RENAME_EXCHANGE) == 0) {
        o->old_at_tmp = 1; /* o->tmp now names the file it replaced */
        return EMBER_OK;
    }
    if (renameat(o->dir.fd, o->tmp, o->dir.fd, o->name) != 0)
        return failf(err, len, EMBER_EIO, "cannot rename %s to %s: %s", safe_path(&o->dir, o->tmp, p, sizeof p),
                     o->name, strerror(errno));
    o->tmp[0] = 0;
    return EMBER_OK;
}

/* The file an output replaced, kept at name.tmp until now: removed. */
static void drop_old(safe_out *o)
{
    if (o->old_at_tmp && unlinkat(o->dir.fd, o->tmp, 0) == 0)
        fsync(o->dir.fd); /* a power cut must not bring it back at name.tmp */
    o->old_at_tmp = 0;
    o->tmp[0] = 0;
}

int safe_out_publish(safe_out *o, char *err, size_t len)
{
    int st = name_output(o, err, len);
    if (st == EMBER_OK) {
        o->published = 1;
        drop_old(o); /* a live output starts from the old bytes (append) or none */
    }
    return st == EMBER_OK ? safe_dir_sync(&o->dir, err, len) : st;
}

/* A named output that failed: the old file back at its name where it was
 * kept, or back to the bytes it started from (appending), else its name
 * removed, if the name is still this file's. */
static void unpublish(safe_out *o)
{
    if (o->old_at_tmp) {
        if (renameat2(o->dir.fd, o->tmp, o->dir.fd, o->name, RENAME_EXCHANGE) == 0)
            fsync(o->dir.fd); /* the old file is back; o->tmp (the new one) goes in abort */
        o->old_at_tmp = 0;
    } else if (o->keep > 0) {
        if (ftruncate(o->fd, o->keep) == 0)
            fsync(o->fd);
    } else if (still_ours(o)) {
        unlinkat(o->dir.fd, o->name, 0);
    }
    o->published = 0;
}

int safe_out_commit(safe_out *o, char *err, size_t len)
{
    char p[4400];
    safe_path(&o->dir, o->name, p, sizeof p);
    int e = o->err;
    const char *what = "cannot write"; /* the call that failed, in the message */
    if (o->f) {
        if ((fflush(o->f) != 0 || ferror(o->f)) && !e)
            e = errno ? errno : EIO;
        if (fclose(o->f) != 0 && !e)
            e = errno ? errno : EIO;
        o->f = NULL;
    }
    if (!e && fsync(o->fd) != 0)
        e = errno, what = "cannot fsync";
    int st = e ? failf(err, len, EMBER_EIO, "%s %s: %s", what, p, strerror(e)) : EMBER_OK;
    if (st == EMBER_OK && !o->published && (st = name_output(o, err, len)) == EMBER_OK)
        o->published = 1;
    if (st == EMBER_OK)
        st = safe_dir_sync(&o->dir, err, len);
    if (st == EMBER_OK) { /* the last check: then the old file goes, and nothing can take the new one back */
        struct stat mine;
        int known = fstat(o->fd, &mine) == 0, closed = close(o->fd);
        o->fd = -1;
        if (closed != 0) { /* undo by name: the old file back, or the new name removed if still this file */
            st = failf(err, len, EMBER_EIO, "cannot close %s: %s", p, strerror(errno));
            struct stat now;
            if (o->old_at_tmp)
                renameat2(o->dir.fd, o->tmp, o->dir.fd, o->name, RENAME_EXCHANGE);
            else if (o->keep == 0 && known && fstatat(o->dir.fd, o->name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
                     now.st_dev == mine.st_dev && now.st_ino == mine.st_ino)
                unlinkat(o->dir.fd, o->name, 0);
            o->old_at_tmp = 0;
        } else {
            drop_old(o);
        }
        o->published = 0; /* abort has nothing more to undo */
    }
    safe_out_abort(o);
    return st;
}

void safe_out_abort(safe_out *o)
{
    if (!o)
        return;
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->published && o->fd >= 0 && o->dir.fd >= 0)
        unpublish(o);
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp[0] && o->dir.fd >= 0) /* the new file under name.tmp, never the old one */
        unlinkat(o->dir.fd, o->tmp, 0);
    o->tmp[0] = 0;
    o->old_at_tmp = 0;
    safe_dir_close(&o->dir);
}
