/*
 * fault_shim.c: an LD_PRELOAD library that makes write-side system calls
 * fail, for the SSD tier's and the checkpoint's fault tests
 * (tests/fault_io.sh, tests/test_fault_io.c; docs/RELIABILITY.md, "The SSD
 * tier").  Built only with the tests; never linked into libember.
 *
 * It wraps write, writev, pwrite, pwrite64, pwritev, pwritev64, pwritev2,
 * pwritev64v2, fsync, fdatasync and close.  A call is *matching* when its
 * kind is in EMBER_FAULT_CALLS and the path of its file descriptor (read
 * from /proc/self/fd/N at every call, so however the file was opened:
 * open, openat, O_TMPFILE, a dup) contains EMBER_FAULT_PATH.  Matching
 * calls are numbered from 0 across all threads (one atomic counter); calls
 * AFTER .. AFTER + COUNT - 1 fail with errno ERRNO without touching the file
 * (close: the descriptor is closed, then -1 is returned, as NFS does).
 *
 *   EMBER_FAULT_PATH    substring of the descriptor's path (required; unset: the shim does
 *                       nothing); a trailing $ anchors it at the end ("/ck$": the folder ck
 *                       itself, not the files under it).  Paths are as /proc shows them:
 *                       absolute, symbolic links resolved, " (deleted)" after an unlinked file
 *   EMBER_FAULT_CALLS   comma list of write, writev, pwrite, pwritev, fsync, fdatasync, close,
 *                       or "writes" (the five write calls; the default), "syncs" (fsync,
 *                       fdatasync), "all" (everything but close).  pwrite covers pwrite64,
 *                       pwritev covers pwritev64, pwritev2, pwritev64v2
 *   EMBER_FAULT_AFTER   matching calls that pass before the first failure (default 0)
 *   EMBER_FAULT_COUNT   how many fail (default 0: every one from then on)
 *   EMBER_FAULT_ERRNO   ENOSPC (default), EIO, EDQUOT, EROFS, EFBIG, EINTR... or a number
 *   EMBER_FAULT_SHORT   1: the first failure of a write call is a short write instead (half
 *                       the bytes, rounded down to 4096 under O_DIRECT, are really written
 *                       and their count returned), as a filling disk does before ENOSPC;
 *                       where that half is 0 (a 512-byte O_DIRECT record) it is a failure
 *   EMBER_FAULT_ARM_PATH, EMBER_FAULT_ARM_CALLS (default "all"), EMBER_FAULT_ARM_AFTER
 *                       (default 1): when ARM_PATH is set, nothing is counted or failed until
 *                       ARM_AFTER calls of the ARM_CALLS kinds on a path matching ARM_PATH
 *                       have been made (they are never failed themselves).  Example:
 *                       ARM_PATH=manifest.json ARM_CALLS=fsync ARM_AFTER=1: from the first
 *                       completed checkpoint on
 *   EMBER_FAULT_NO_TMPFILE  1: open and openat with O_TMPFILE fail with EOPNOTSUPP, as on a
 *                       file system without unnamed files: ember then writes its outputs under
 *                       NAME.tmp (src/core/safe_file.c), the names the save cases match.  Works
 *                       without EMBER_FAULT_PATH too
 *   EMBER_FAULT_LOG     file the shim appends its lines to (default: standard error)
 *   EMBER_FAULT_TRACE   1: also a line for every matching call that passes
 *
 * Each injected failure is one line:
 *   ember-fault: injected ENOSPC into pwrite(fd 9 /tmp/x/emb.rank0.ember-store, 512 bytes at 1536) (failure 1, matching call 4)
 * and at exit, in a process that made matching calls: "ember-fault: pid P: N matching
 * calls, M failed".  A program that has the shim preloaded may reconfigure it:
 * setenv the variables, then call ember_fault_reload() (found with dlsym(RTLD_DEFAULT, ...));
 * ember_fault_injected() returns the failures injected since the last reload.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { K_WRITE = 1, K_WRITEV = 2, K_PWRITE = 4, K_PWRITEV = 8, K_FSYNC = 16, K_FDATASYNC = 32, K_CLOSE = 64 };
#define K_WRITES (K_WRITE | K_WRITEV | K_PWRITE | K_PWRITEV)
#define K_SYNCS (K_FSYNC | K_FDATASYNC)

typedef struct config {
    struct config *older; /* kept (a late reader may hold it) and reachable (no leak reported) */
    char path[1024], arm_path[1024], log[1024];
    int calls, arm_calls, err, shortw, trace;
    long long after, count, arm_after;
} config;

static config *volatile cfg;    /* published with release, read with acquire */
static long long seen;          /* matching calls since the config (atomic)     */
static long long armed_by;      /* arming calls seen (atomic)                   */
static long long injected;      /* failures injected (atomic)                   */
static long long short_done;    /* the short write was made (atomic)            */
static long long total_seen, total_injected; /* over the process, for the exit line */

/* the next definitions, found once */
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);
static int (*real_openat)(int, const char *, int, ...);
static int no_tmpfile; /* EMBER_FAULT_NO_TMPFILE */

static void resolve(void)
{
    if (real_close)
        return;
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    real_writev = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_pwritev = (ssize_t(*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
    real_pwritev2 = (ssize_t(*)(int, const struct iovec *, int, off_t, int))dlsym(RTLD_NEXT, "pwritev2");
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    __atomic_store_n(&real_close, (int (*)(int))dlsym(RTLD_NEXT, "close"), __ATOMIC_RELEASE);
    real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
}

/* ------------------------------------------------------------- logging */

/* One line, one write(2) straight to the kernel (never through a wrapper). */
static void logf_(const config *c, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    int fd = 2, own = 0;
    if (c && c->log[0]) {
        fd = (int)syscall(SYS_openat, AT_FDCWD, c->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        own = fd >= 0;
        if (fd < 0)
            fd = 2;
    }
    syscall(SYS_write, fd, line, (size_t)n);
    if (own)
        syscall(SYS_close, fd);
}

/* ------------------------------------------------------------- config */

static int parse_calls(const config *c, const char *var, int dflt)
{
    const char *s = getenv(var);
    if (!s || !*s)
        return dflt;
    static const struct {
        const char *name;
        int bits;
    } names[] = {{"write", K_WRITE},   {"writev", K_WRITEV},   {"pwrite", K_PWRITE},
                 {"pwrite64", K_PWRITE}, {"pwritev", K_PWRITEV}, {"pwritev2", K_PWRITEV},
                 {"fsync", K_FSYNC},   {"fdatasync", K_FDATASYNC}, {"close", K_CLOSE},
                 {"writes", K_WRITES}, {"syncs", K_SYNCS},     {"all", K_WRITES | K_SYNCS}};
    int bits = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        size_t i = 0;
        for (; i < sizeof names / sizeof names[0] && strcmp(t, names[i].name) != 0; i++)
            ;
        if (i == sizeof names / sizeof names[0]) {
            logf_(c, "ember-fault: %s: unknown call \"%s\" (write, writev, pwrite, pwritev, "
                     "fsync, fdatasync, close, writes, syncs, all)", var, t);
            _exit(97);
        }
        bits |= names[i].bits;
    }
    return bits;
}

static const struct {
    const char *name;
    int err;
} ERRNOS[] = {{"ENOSPC", ENOSPC}, {"EIO", EIO},     {"EDQUOT", EDQUOT}, {"EROFS", EROFS}, {"EFBIG", EFBIG},
              {"EINTR", EINTR},   {"EAGAIN", EAGAIN}, {"EBADF", EBADF}, {"EINVAL", EINVAL}, {"EPERM", EPERM}};

static const char *errno_name(int e)
{
    for (size_t i = 0; i < sizeof ERRNOS / sizeof ERRNOS[0]; i++)
        if (ERRNOS[i].err == e)
            return ERRNOS[i].name;
    return "errno";
}

static long long env_ll(const config *c, const char *name, long long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < 0) {
        logf_(c, "ember-fault: %s: \"%s\" is not a count", name, s);
        _exit(97);
    }
    return v;
}

static config *load(void)
{
    const char *p = getenv("EMBER_FAULT_PATH");
    if (!p || !*p)
        return NULL;
    config *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    snprintf(c->path, sizeof c->path, "%s", p);
    const char *s;
    if ((s = getenv("EMBER_FAULT_ARM_PATH")))
        snprintf(c->arm_path, sizeof c->arm_path, "%s", s);
    if ((s = getenv("EMBER_FAULT_LOG")))
        snprintf(c->log, sizeof c->log, "%s", s);
    c->calls = parse_calls(c, "EMBER_FAULT_CALLS", K_WRITES);
    c->arm_calls = parse_calls(c, "EMBER_FAULT_ARM_CALLS", K_WRITES | K_SYNCS);
    c->after = env_ll(c, "EMBER_FAULT_AFTER", 0);
    c->count = env_ll(c, "EMBER_FAULT_COUNT", 0);
    c->arm_after = env_ll(c, "EMBER_FAULT_ARM_AFTER", 1);
    c->shortw = env_ll(c, "EMBER_FAULT_SHORT", 0) != 0;
    c->trace = env_ll(c, "EMBER_FAULT_TRACE", 0) != 0;
    c->err = ENOSPC;
    if ((s = getenv("EMBER_FAULT_ERRNO")) && *s) {
        c->err = 0;
        for (size_t i = 0; i < sizeof ERRNOS / sizeof ERRNOS[0]; i++)
            if (strcmp(s, ERRNOS[i].name) == 0)
                c->err = ERRNOS[i].err;
        if (!c->err)
            c->err = atoi(s);
        if (c->err <= 0) {
            logf_(c, "ember-fault: EMBER_FAULT_ERRNO: \"%s\" is neither a known name nor a number", s);
            _exit(97);
        }
    }
    return c;
}

EXPORT long long ember_fault_injected(void) { return __atomic_load_n(&injected, __ATOMIC_ACQUIRE); }

/* Reads the variables again and restarts the counts.  Call it while no
 * other thread is inside a wrapped call. */
EXPORT int ember_fault_reload(void)
{
    resolve();
    const char *nt = getenv("EMBER_FAULT_NO_TMPFILE");
    __atomic_store_n(&no_tmpfile, nt && atoi(nt) != 0, __ATOMIC_RELEASE);
    config *c = load(), *old = __atomic_load_n(&cfg, __ATOMIC_ACQUIRE);
    static config *retired; /* configs replaced while set (ones never set were NULL) */
    if (old) {
        old->older = retired;
        retired = old;
    }
    __atomic_store_n(&seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&armed_by, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&injected, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&short_done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cfg, c, __ATOMIC_RELEASE);
    return c != NULL;
}

__attribute__((constructor)) static void shim_init(void) { ember_fault_reload(); }

__attribute__((destructor)) static void shim_fini(void)
{
    const config *c = __atomic_load_n(&cfg, __ATOMIC_ACQUIRE);
    if (c && (c->trace || __atomic_load_n(&total_seen, __ATOMIC_RELAXED) > 0))
        logf_(c, "ember-fault: pid %ld: %lld matching calls, %lld failed", (long)getpid(),
              __atomic_load_n(&total_seen, __ATOMIC_RELAXED), __atomic_load_n(&total_injected, __ATOMIC_RELAXED));
}

/* ------------------------------------------------------------- the decision */

static const char *kind_name(int k)
{
    switch (k) {
    case K_WRITE: return "write";
    case K_WRITEV: return "writev";
    case K_PWRITE: return "pwrite";
    case K_PWRITEV: return "pwritev";
    case K_FSYNC: return "fsync";
    case K_FDATASYNC: return "fdatasync";
    default: return "close";
    }
}

typedef struct verdict {
    int fail, shortw; /* fail: return -1 with err; shortw: write half instead */
    int err;
    const config *c;
    char path[1100];
    long long failure, call;
} verdict;

/* Whether path contains pat (pat ending in $: ends with the rest). */
static int path_match(const char *path, const char *pat)
{
    size_t n = strlen(pat), m = strlen(path);
    if (n == 0 || pat[n - 1] != '$')
        return strstr(path, pat) != NULL;
    return m >= n - 1 && memcmp(path + m - (n - 1), pat, n - 1) == 0;
}

/* Whether this call fails.  *v gets the path for the log line. */
static int decide(int kind, int fd, verdict *v)
{
    const config *c = __atomic_load_n(&cfg, __ATOMIC_ACQUIRE);
    v->fail = v->shortw = 0;
    v->c = c;
    if (!c || fd < 0 || !((c->calls | (c->arm_path[0] ? c->arm_calls : 0)) & kind))
        return 0;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = (ssize_t)syscall(SYS_readlinkat, AT_FDCWD, link, v->path, sizeof v->path - 1);
    if (n <= 0)
        return 0;
    v->path[n] = 0;
    if (c->arm_path[0] && __atomic_load_n(&armed_by, __ATOMIC_ACQUIRE) < c->arm_after) {
        if ((c->arm_calls & kind) && path_match(v->path, c->arm_path)) {
            long long a = __atomic_add_fetch(&armed_by, 1, __ATOMIC_ACQ_REL);
            if (a == c->arm_after)
                logf_(c, "ember-fault: armed by %s(fd %d %s) (arming call %lld)", kind_name(kind), fd, v->path, a);
        }
        return 0;
    }
    if (!(c->calls & kind) || !path_match(v->path, c->path))
        return 0;
    long long k = __atomic_fetch_add(&seen, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&total_seen, 1, __ATOMIC_RELAXED);
    v->call = k;
    if (k < c->after || (c->count > 0 && k >= c->after + c->count)) {
        if (c->trace)
            logf_(c, "ember-fault: passed %s(fd %d %s) (matching call %lld)", kind_name(kind), fd, v->path, k);
        return 0;
    }
    if (c->shortw && (kind & K_WRITES) && __atomic_exchange_n(&short_done, 1, __ATOMIC_ACQ_REL) == 0)
        v->shortw = 1;
    else
        v->fail = 1;
    v->err = c->err;
    v->failure = __atomic_add_fetch(&injected, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&total_injected, 1, __ATOMIC_RELAXED);
    return 1;
}

static void log_injected(const verdict *v, int kind, int fd, size_t bytes, long long off, ssize_t wrote)
{
    char what[96] = "";
    if (kind & K_WRITES) {
        if (off >= 0)
            snprintf(what, sizeof what, ", %zu bytes at %lld", bytes, off);
        else
            snprintf(what, sizeof what, ", %zu bytes", bytes);
    }
    if (v->shortw)
        logf_(v->c, "ember-fault: injected a short write (%zd of %zu bytes) into %s(fd %d %s%s) (failure %lld, "
                    "matching call %lld)", wrote, bytes, kind_name(kind), fd, v->path, what, v->failure, v->call);
    else
        logf_(v->c, "ember-fault: injected %s into %s(fd %d %s%s) (failure %lld, matching call %lld)",
              errno_name(v->err), kind_name(kind), fd, v->path, what, v->failure, v->call);
}

static size_t iov_bytes(const struct iovec *iov, int cnt)
{
    size_t b = 0;
    for (int i = 0; i < cnt; i++)
        b += iov[i].iov_len;
    return b;
}

/* The half that a short write writes: 4096-aligned under O_DIRECT. */
static size_t short_len(int fd, size_t bytes)
{
    size_t h = bytes / 2;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT))
        h &= ~(size_t)4095;
    return h;
}

/* iov cut to its first `keep` bytes, in out (at most 64 entries). */
static int iov_cut(const struct iovec *iov, int cnt, size_t keep, struct iovec *out)
{
    int n = 0;
    for (int i = 0; i < cnt && keep > 0 && n < 64; i++) {
        out[n] = iov[i];
        if (out[n].iov_len > keep)
            out[n].iov_len = keep;
        keep -= out[n].iov_len;
        n++;
    }
    return n;
}

/* ------------------------------------------------------------- the wrappers */

#define FAIL_WITH(v) (errno = (v).err, -1)

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    resolve();
    verdict v;
    if (!decide(K_WRITE, fd, &v))
        return real_write(fd, buf, n);
    ssize_t r = -1;
    size_t h = v.shortw ? short_len(fd, n) : 0;
    v.shortw = h > 0; /* nothing to write short: a failure */
    if (v.shortw)
        r = real_write(fd, buf, h);
    log_injected(&v, K_WRITE, fd, n, -1, r);
    return v.shortw ? r : FAIL_WITH(v);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    resolve();
    verdict v;
    if (!decide(K_PWRITE, fd, &v))
        return real_pwrite(fd, buf, n, off);
    ssize_t r = -1;
    size_t h = v.shortw ? short_len(fd, n) : 0;
    v.shortw = h > 0;
    if (v.shortw)
        r = real_pwrite(fd, buf, h, off);
    log_injected(&v, K_PWRITE, fd, n, (long long)off, r);
    return v.shortw ? r : FAIL_WITH(v);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { return pwrite(fd, buf, n, off); }

/* v2: pwritev2 (off -1: at the file position, as writev) */
static ssize_t vec(int fd, const struct iovec *iov, int cnt, off_t off, int flags, int positioned, int v2)
{
    resolve();
    int kind = positioned ? K_PWRITEV : K_WRITEV;
    verdict v;
    struct iovec cut[64];
    if (decide(kind, fd, &v)) {
        size_t bytes = iov_bytes(iov, cnt);
        ssize_t r = -1;
        size_t h = v.shortw ? short_len(fd, bytes) : 0;
        int m = h ? iov_cut(iov, cnt, h, cut) : 0;
        v.shortw = m > 0;
        if (v.shortw)
            r = v2 ? real_pwritev2(fd, cut, m, off, flags)
                   : positioned ? real_pwritev(fd, cut, m, off) : real_writev(fd, cut, m);
        log_injected(&v, kind, fd, bytes, positioned ? (long long)off : -1, r);
        return v.shortw ? r : FAIL_WITH(v);
    }
    if (v2)
        return real_pwritev2(fd, iov, cnt, off, flags);
    return positioned ? real_pwritev(fd, iov, cnt, off) : real_writev(fd, iov, cnt);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt) { return vec(fd, iov, cnt, 0, 0, 0, 0); }
EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return vec(fd, iov, cnt, off, 0, 1, 0);
}
EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return vec(fd, iov, cnt, off, 0, 1, 0);
}
EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    return vec(fd, iov, cnt, off, flags, off != -1, 1);
}
EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    return vec(fd, iov, cnt, off, flags, off != -1, 1);
}

static int sync_call(int kind, int fd)
{
    resolve();
    verdict v;
    if (!decide(kind, fd, &v))
        return kind == K_FSYNC ? real_fsync(fd) : real_fdatasync(fd);
    log_injected(&v, kind, fd, 0, -1, -1);
    return FAIL_WITH(v);
}

EXPORT int fsync(int fd) { return sync_call(K_FSYNC, fd); }
EXPORT int fdatasync(int fd) { return sync_call(K_FDATASYNC, fd); }

EXPORT int close(int fd)
{
    if (!__atomic_load_n(&real_close, __ATOMIC_ACQUIRE))
        resolve();
    verdict v;
    if (!decide(K_CLOSE, fd, &v))
        return real_close(fd);
    real_close(fd); /* the descriptor is gone either way, as after a real failed close */
    log_injected(&v, K_CLOSE, fd, 0, -1, -1);
    return FAIL_WITH(v);
}

/* ------------------------------------------------------------- O_TMPFILE */

static int open_common(int dirfd, const char *path, int flags, mode_t mode)
{
    if ((flags & O_TMPFILE) == O_TMPFILE && __atomic_load_n(&no_tmpfile, __ATOMIC_ACQUIRE)) {
        errno = EOPNOTSUPP;
        return -1;
    }
    if (!real_openat)
        resolve();
    return real_openat(dirfd, path, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(dirfd, path, flags, m);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(dirfd, path, flags, m);
}

EXPORT int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, path, flags, m);
}

EXPORT int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, path, flags, m);
}
