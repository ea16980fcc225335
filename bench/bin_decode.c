/*
 * bin_decode.c: how long a binary CTR file's batches take to read (checked
 * and decoded into ember's batch) by 1..T OpenMP threads, the work a
 * training run's reader does per step (docs/PERFORMANCE.md, "Training:
 * threads").  One JSON line per thread count: the median over rounds of
 * the seconds for `batches` batches of `batch` samples from the file's
 * start.
 *
 *   bench_bin_decode FILE [batches=1000] [batch=2048] [threads=2] [rounds=5]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "data/ctr.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [batches] [batch] [threads] [rounds]\n", argv[0]);
        return 2;
    }
    const int batches = argc > 2 ? atoi(argv[2]) : 1000, batch = argc > 3 ? atoi(argv[3]) : 2048;
    const int threads = argc > 4 ? atoi(argv[4]) : 2, rounds = argc > 5 ? atoi(argv[5]) : 5;
    double t[64];
    for (int th = 1; th <= threads; th++) {
        int64_t samples = 0;
        for (int r = 0; r < rounds && r < 64; r++) {
            char err[1024];
            ctr_source *s = NULL;
            if (ctr_source_binary(argv[1], 0, 1, &s, err, sizeof err)) { /* a fresh source: every block checked */
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            omp_set_num_threads(th);
            samples = 0;
            double t0 = bench_now();
            ctr_batch b;
            int64_t n = 0;
            for (int k = 0; k < batches && (n = ctr_source_next(s, batch, &b, err, sizeof err)) > 0; k++)
                samples += n;
            t[r] = bench_now() - t0;
            ctr_source_destroy(s);
            if (n < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
        }
        qsort(t, (size_t)rounds, sizeof t[0], bench_cmp_double);
        printf("{\"bench\":\"bin_decode\",\"threads\":%d,\"samples\":%lld,\"seconds\":%.4f,\"ns_per_sample\":%.1f}\n",
               th, (long long)samples, t[rounds / 2], samples ? 1e9 * t[rounds / 2] / (double)samples : 0.0);
    }
    return 0;
}
