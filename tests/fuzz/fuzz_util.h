/*
 * fuzz_util.h: what the libFuzzer targets of tests/fuzz/ share.
 *
 * The readers under test take a path, so each target writes its input into
 * one memfd made at start-up and hands the readers "/proc/self/fd/N": no
 * disk traffic, no temporary files left behind by a crash, and a fresh open
 * (own offset) every time.  FUZZ_REQUIRE is the harness's own invariant
 * check: a reader that said "success" but handed out something impossible
 * (an id outside its table, lengths that do not add up) is a bug, reported
 * to libFuzzer as a crash by abort().
 */
#ifndef EMBER_FUZZ_UTIL_H
#define EMBER_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_REQUIRE(cond, ...)                                                          \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            abort();                                                                     \
        }                                                                                \
    } while (0)

typedef struct fuzz_file {
    int fd;
    char path[64];
} fuzz_file;

/* Makes the memfd once (name shows in /proc and in messages). */
static inline void fuzz_file_init(fuzz_file *f, const char *name)
{
    if (f->path[0])
        return;
    f->fd = memfd_create(name, 0);
    FUZZ_REQUIRE(f->fd >= 0, "memfd_create failed");
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

/* Replaces the file's contents with data[0, n). */
static inline void fuzz_file_set(fuzz_file *f, const void *data, size_t n)
{
    FUZZ_REQUIRE(ftruncate(f->fd, 0) == 0, "ftruncate failed");
    const unsigned char *p = data;
    size_t done = 0;
    while (done < n) {
        ssize_t k = pwrite(f->fd, p + done, n - done, (off_t)done);
        FUZZ_REQUIRE(k > 0, "pwrite failed");
        done += (size_t)k;
    }
}

/* Little-endian fields of the binary formats (the harness's own copies, so
 * that the targets do not depend on library-internal headers). */
static inline uint32_t fz_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fz_get_u64(const unsigned char *p)
{
    return (uint64_t)fz_get_u32(p) | (uint64_t)fz_get_u32(p + 4) << 32;
}

static inline void fz_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Runs the input as it is, then (when that changes it) with its checksums
 * made right by fix, so the fuzzer also reaches the checks behind them. */
static inline void fuzz_as_is_and_fixed(const uint8_t *data, size_t size, void (*run)(const uint8_t *, size_t),
                                        void (*fix)(unsigned char *, size_t))
{
    run(data, size);
    unsigned char *fixed = malloc(size ? size : 1);
    FUZZ_REQUIRE(fixed != NULL, "out of memory");
    memcpy(fixed, data, size);
    fix(fixed, size);
    if (memcmp(fixed, data, size) != 0)
        run(fixed, size);
    free(fixed);
}

#endif
