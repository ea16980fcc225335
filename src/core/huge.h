/*
 * huge.h: large zero-filled allocations that ask for transparent huge pages.
 *
 * Tables, key maps and per-slot metadata are read at random; with 4 KiB
 * pages nearly every such access also misses the TLB, and on the project
 * machine MADV_HUGEPAGE alone speeds random row gathers up by up to 2x.
 * Machines whose THP setting is "madvise" (Debian's default) only give huge
 * pages to mappings that ask.
 */
#ifndef EMBER_CORE_HUGE_H
#define EMBER_CORE_HUGE_H

#include <stdint.h>

/* NULL when bytes <= 0 or out of memory; free with ember_huge_free and the
 * same size. */
void *ember_huge_alloc(int64_t bytes);
void ember_huge_free(void *p, int64_t bytes);

#endif
