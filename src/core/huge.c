/*
 * huge.c: anonymous mappings with MADV_HUGEPAGE (huge.h).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/mman.h>

#include "core/huge.h"

void *ember_huge_alloc(int64_t bytes)
{
    if (bytes <= 0)
        return NULL;
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, (size_t)bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void ember_huge_free(void *p, int64_t bytes)
{
    if (p && bytes > 0)
        munmap(p, (size_t)bytes);
}
