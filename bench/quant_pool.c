/*
 * quant_pool.c: the pooled lookup over quantized rows (src/quant/qpool.h)
 * on the peer's workload shapes, per encoding, against a plain gather
 * measured in the same run: it touches every cache line of the same rows in
 * the same order with the same prefetching and does nothing else (a floor
 * for the memory traffic, not a bound: its scalar loop can be slower than
 * the kernel's vector loads).  Rows sit in 2 MiB pages (MADV_HUGEPAGE), as in ember's stores.  bench/peer_fbgemm_nbit.py runs FBGEMM's
 * IntNBitTableBatchedEmbeddingBagsCodegen on the same shapes and law.
 * JSON lines, one per (encoding, threads): median ms per batch over reps,
 * ids per second, the limit's ms and the share of it.
 *
 *   bench_quant_pool [--preset W1|W2|W3] [--threads 1,2] [--reps R] [--encodings fp32,fp16,int8,int4]
 *
 * Ids: ember_synth (bounded Zipf(1.05), or uniform for W3), a fresh batch
 * per repetition; pooling sums, unweighted, as the peer's.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "core/huge.h"
#include "ember.h"
#include "quant/qpool.h"
#include "quant/quant.h"

typedef struct shape {
    const char *name;
    int32_t tables, dim, batch, pooling;
    int64_t rows;
    int zipf;
} shape;

static const shape SHAPES[] = {
    {"W1", 8, 64, 4096, 20, 1000000, 1},
    {"W2", 26, 128, 2048, 1, 100000, 1},
    {"W3", 1, 128, 8192, 10, 10000000, 0},
};

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* The plain gather: every cache line of every looked-up row read (one byte
 * of each), prefetched 16 ids ahead, and nothing else. */
static uint64_t gather(const uint8_t *rows, int64_t rb, const uint32_t *ids, int64_t n, int threads)
{
    uint64_t sum = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : sum)
    for (int64_t i = 0; i < n; i++) {
        if (i + 16 < n) { /* every line of the row, its last byte's too (rows are not line-aligned) */
            const uint8_t *pf = rows + (int64_t)ids[i + 16] * rb;
            for (int64_t c = 0; c < rb; c += 64)
                __builtin_prefetch(pf + c, 0, 0);
            __builtin_prefetch(pf + rb - 1, 0, 0);
        }
        const uint8_t *r = rows + (int64_t)ids[i] * rb;
        for (int64_t c = 0; c < rb; c += 64)
            sum += r[c];
        sum += r[rb - 1];
    }
    return sum;
}

int main(int argc, char **argv)
{
    const shape *sh = &SHAPES[0];
    int reps = 10, max_threads = 2;
    char encs[64] = "fp32,fp16,int8,int4";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) {
            const char *p = argv[++i];
            sh = NULL;
            for (size_t k = 0; k < sizeof SHAPES / sizeof *SHAPES; k++)
                if (!strcmp(p, SHAPES[k].name))
                    sh = &SHAPES[k];
            if (!sh) {
                fprintf(stderr, "unknown preset %s (W1, W2, W3)\n", p);
                return 2;
            }
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            max_threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--encodings") && i + 1 < argc) {
            snprintf(encs, sizeof encs, "%s", argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--preset W1|W2|W3] [--threads T] [--reps R] [--encodings LIST]\n", argv[0]);
            return 2;
        }
    }
    /* ids: one synth stream over the shape's tables; table k's ids index
     * rows [k * rows, (k+1) * rows) of one array (every table's copy) */
    ember_synth_config sc = ember_synth_config_default();
    sc.tables = sh->tables;
    sc.rows = sh->rows;
    sc.batch_size = sh->batch;
    sc.pooling = sh->pooling;
    sc.zipf = sh->zipf;
    sc.alpha = 1.05;
    ember_synth *syn = NULL;
    if (ember_synth_create(&sc, &syn) != EMBER_OK)
        return fprintf(stderr, "synth: %s\n", ember_errmsg(NULL)), 1;
    int64_t bags = (int64_t)sh->batch * sh->tables, n = 0;
    uint32_t **ids = malloc(sizeof *ids * (size_t)reps);
    int64_t **offs = malloc(sizeof *offs * (size_t)reps), *nids = malloc(sizeof(int64_t) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        ember_batch b;
        ember_synth_next(syn, &b);
        ids[r] = malloc(sizeof(uint32_t) * (size_t)(b.num_ids + 1));
        offs[r] = malloc(sizeof(int64_t) * (size_t)(bags + 1));
        offs[r][0] = 0;
        for (int64_t g = 0, e = 0; g < bags; g++) { /* bags feature-major, as the batch */
            int64_t table = g / sh->batch;
            for (int32_t k = 0; k < b.lengths[g]; k++, e++)
                ids[r][e] = (uint32_t)(b.ids[e] + table * sh->rows);
            offs[r][g + 1] = offs[r][g] + b.lengths[g];
        }
        nids[r] = b.num_ids;
        n += b.num_ids;
    }
    ember_synth_destroy(syn);
    float *out = malloc(sizeof(float) * (size_t)(bags * sh->dim));
    double *t = malloc(sizeof(double) * (size_t)reps), *tl = malloc(sizeof(double) * (size_t)reps);
    float *x = malloc(sizeof(float) * (size_t)sh->dim);
    uint64_t seed = 7, sink = 0;
    for (char *tok = strtok(encs, ","); tok; tok = strtok(NULL, ",")) {
        int e = ember_encoding_parse(tok);
        if (e < 0)
            return fprintf(stderr, "unknown encoding %s\n", tok), 2;
        int64_t rb = ember_quant_row_bytes((ember_encoding)e, sh->dim);
        /* one table's rows stand for every table (each table's ids index its own copy in a
         * real store; the bytes touched per id are the same) */
        int64_t bytes = rb * sh->rows * sh->tables;
        uint8_t *rows = ember_huge_alloc(bytes); /* 2 MiB pages, as ember's stores */
        if (!rows)
            return fprintf(stderr, "out of memory for %s rows\n", tok), 1;
        for (int64_t r = 0; r < sh->rows * sh->tables; r++) {
            for (int32_t k = 0; k < sh->dim; k++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                x[k] = (float)((double)(seed >> 11) * 0x1.0p-53 - 0.5) * 0.1f;
            }
            ember_quant_row((ember_encoding)e, sh->dim, x, rows + r * rb);
        }
        for (int threads = 1; threads <= max_threads; threads++) {
            for (int r = 0; r < reps; r++) {
                ember_qpool_args a = {(ember_encoding)e, sh->dim, rows, rb, bags, offs[r], ids[r], NULL, NULL, out, NULL, NULL};
                double t0 = bench_now();
                ember_qpool(&a, threads);
                t[r] = (bench_now() - t0) * 1e3;
                t0 = bench_now();
                sink += gather(rows, rb, ids[r], nids[r], threads);
                tl[r] = (bench_now() - t0) * 1e3;
                sink += (uint64_t)out[0];
            }
            double ms = median(t, reps), lim = median(tl, reps);
            printf("{\"bench\":\"quant_pool\",\"impl\":\"ember\",\"workload\":\"%s\",\"encoding\":\"%s\",\"threads\":%d,"
                   "\"tables\":%d,\"rows\":%lld,\"dim\":%d,\"batch\":%d,\"pooling\":%d,\"row_bytes\":%lld,"
                   "\"ms_median\":%.3f,\"ids_per_s\":%.4g,\"gather_ms_median\":%.3f,\"gather_over_kernel\":%.3f,"
                   "\"reps\":%d,\"compiler\":\"gcc %d.%d\"}\n",
                   sh->name, tok, threads, sh->tables, (long long)sh->rows, sh->dim, sh->batch, sh->pooling,
                   (long long)rb, ms, (double)n / reps / (ms * 1e-3), lim, lim / ms, reps, __GNUC__, __GNUC_MINOR__);
            fflush(stdout);
        }
        ember_huge_free(rows, bytes);
    }
    fprintf(stderr, "(checksum %llu)\n", (unsigned long long)sink);
    return 0;
}
