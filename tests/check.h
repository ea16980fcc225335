/*
 * check.h: the tests' tiny check macros.  A failed CHECK prints file:line and
 * the condition, counts the failure and carries on; a test's main returns
 * check_report(), which prints "N passed, N failed" and is 1 when any failed.
 */
#ifndef EMBER_TESTS_CHECK_H
#define EMBER_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int check_passed_, check_failed_;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            check_passed_++;                                                           \
        } else {                                                                       \
            check_failed_++;                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

#define CHECK_MSG(cond, ...)                                                           \
    do {                                                                               \
        if (cond) {                                                                    \
            check_passed_++;                                                           \
        } else {                                                                       \
            check_failed_++;                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

/* |a - b| <= atol + rtol * |b| for every element; reports the first miss. */
static inline int check_close_(const float *a, const float *b, long n, double rtol, double atol,
                               const char *what, const char *file, int line)
{
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= atol + rtol * fabs((double)b[i]))) {
            fprintf(stderr, "%s:%d: %s: element %ld: got %.9g want %.9g (rtol %g atol %g)\n",
                    file, line, what, i, a[i], b[i], rtol, atol);
            check_failed_++;
            return 0;
        }
    }
    check_passed_++;
    return 1;
}
#define CHECK_CLOSE(a, b, n, rtol, atol, what) \
    check_close_((a), (b), (long)(n), (rtol), (atol), (what), __FILE__, __LINE__)

static inline int check_report(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

#endif
