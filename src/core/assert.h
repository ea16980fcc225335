/*
 * assert.h: EMBER_ASSERT, the one way a module states an invariant of its
 * own (a bug, not bad input or a failing system call: those return a status,
 * core/status.h).  On failure it prints "FILE:LINE: assertion failed: COND"
 * to stderr and aborts.  Compiled in every build: unlike <assert.h> it does
 * not vanish under NDEBUG (Release defines NDEBUG).  The condition is
 * evaluated exactly once; keep it cheap and free of side effects.
 */
#ifndef EMBER_CORE_ASSERT_H
#define EMBER_CORE_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define EMBER_ASSERT(cond)                                                                 \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
