/*
 * bench_util.h: the clock, the comparator, the median and the page-mode
 * probe the C benchmark programs share (each program is its own executable; this keeps them from
 * repeating these).
 */
#ifndef EMBER_BENCH_UTIL_H
#define EMBER_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* qsort comparator of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* MiB of transparent huge pages (AnonHugePages) in the mappings that
 * overlap [p, p + bytes): the table's page mode (-1 if unknown). */
static inline double bench_huge_mb(const void *p, size_t bytes)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    unsigned long lo, hi, a = (unsigned long)p, b = a + bytes;
    int in = 0;
    double kb, sum = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            in = lo < b && hi > a;
        else if (in && sscanf(line, "AnonHugePages: %lf kB", &kb) == 1)
            sum += kb;
    }
    fclose(f);
    return sum / 1024.0;
}

/* Median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

#endif
