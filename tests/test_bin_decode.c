/*
 * test_bin_decode.c: the binary reader's batches, decoded in parallel by
 * the calling thread's OpenMP team (src/data/ctr_bin_decode.c), against a
 * naive sample-by-sample reader of the format (src/ref/ref_ctr_bin.c), on
 * fresh random files: the synthetic task with row ids and 64-bit keys
 * (format versions 1 and 2) and a CSV with float labels and weighted keys
 * (version 3), written in blocks of 1, 3, 250, 1000 and 4096 samples, read
 * by 1, 2 and 3 threads as rank r of worlds 1 and 2, in file order and
 * shuffled, over two epochs in batches of random sizes.  Every batch must
 * be the reference's bit for bit: the same samples in the same order, so
 * the batch does not depend on the thread count.  A corrupt block must
 * fail with the same message at every thread count.  The synthetic task's
 * batches are also compared across 1 and 2 threads, and every file's
 * batches through the trainer's prefetch (weights included).
 *
 *   test_bin_decode [SEED]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "data/ctr.h"
#include "data/ctr_visits.h"
#include "train/prefetch.h"
#include "util.h"

static char tmpdir[256];

/* The batch of n samples at items[0..n) of the file, as the reference has
 * them, against b: 1 when equal bit for bit. */
static int batch_matches(const ref_ctr_file *f, const int64_t *items, int64_t n, const ctr_batch *b, const char *what)
{
    const int64_t S = f->S, D = f->D;
    if (b->batch_size != n || b->num_sparse != S || b->num_dense != D) {
        fprintf(stderr, "%s: batch of %d samples, want %lld\n", what, b->batch_size, (long long)n);
        return 0;
    }
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t s = items[i];
        if (memcmp(&b->label[i], &f->label[s], 4) || memcmp(b->dense + i * D, f->dense + s * D, (size_t)D * 4)) {
            fprintf(stderr, "%s: sample %lld (file %lld): label or dense differs\n", what, (long long)i, (long long)s);
            return 0;
        }
    }
    for (int64_t t = 0; t < S; t++)
        for (int64_t i = 0; i < n; i++) {
            const int64_t s = items[i], len = f->len[s * S + t], at = f->first[s * S + t];
            if (b->sparse.lengths[t * n + i] != len) {
                fprintf(stderr, "%s: sample %lld feature %lld: length %d, want %lld\n", what, (long long)i,
                        (long long)t, b->sparse.lengths[t * n + i], (long long)len);
                return 0;
            }
            for (int64_t j = 0; j < len; j++, k++)
                if (b->sparse.ids[k] != f->ids[at + j] ||
                    (b->sparse.weights && memcmp(&b->sparse.weights[k], &f->w[at + j], 4))) {
                    fprintf(stderr, "%s: sample %lld feature %lld id %lld differs\n", what, (long long)i, (long long)t,
                            (long long)j);
                    return 0;
                }
        }
    return b->sparse.num_ids == k;
}

/* Two epochs of rank r's share of path, read by `threads` threads in
 * batches of random sizes (shuffled with seed when shuffle), against the
 * reference. */
static void check_reads(const char *path, const ref_ctr_file *f, int64_t K, int threads, int32_t rank, int32_t world,
                        int shuffle, test_rng *r)
{
    char err[512], what[600];
    snprintf(what, sizeof what, "%s (K %lld, %d threads, rank %d of %d%s)", path, (long long)K, threads, rank, world,
             shuffle ? ", shuffled" : "");
    ctr_source *s = NULL;
    CHECK_MSG(ctr_source_binary(path, rank, world, &s, err, sizeof err) == 0, "%s", err);
    if (!s)
        return;
    const uint64_t seed = test_next(r);
    if (shuffle)
        CHECK_MSG(ctr_source_shuffle(s, seed, err, sizeof err) == 0, "%s", err);
    const int64_t begin = f->N * rank / world, end = f->N * (rank + 1) / world, L = end - begin;
    int64_t *items = malloc((size_t)(L + 1) * sizeof *items);
    ctr_visits v;
    memset(&v, 0, sizeof v);
    CHECK(ctr_visits_init(&v, seed, rank, begin, end, K, 0) == 0);
    omp_set_num_threads(threads);
    int ok = 1;
    for (int epoch = 0; epoch < 2 && ok; epoch++) {
        ctr_visits_start(&v, epoch, 0);
        for (int64_t i = 0; i < L; i++, v.lpos++)
            items[i] = shuffle ? ctr_visits_item(&v) : begin + i;
        for (int64_t at = 0; ok;) {
            ctr_batch b;
            int32_t max = (int32_t)test_range(r, 1, test_range(r, 0, 2) ? 64 : 3000);
            int64_t n = ctr_source_next(s, max, &b, err, sizeof err);
            CHECK_MSG(n >= 0, "%s: %s", what, err);
            if (n <= 0)
                break;
            ok = batch_matches(f, items + at, n, &b, what);
            at += n;
        }
        ctr_source_rewind(s);
    }
    CHECK_MSG(ok, "%s", what);
    omp_set_num_threads(1);
    ctr_visits_free(&v);
    free(items);
    ctr_source_destroy(s);
}

/* One epoch of path through the trainer's prefetch (a reader thread or
 * not): the reference's batches, a weighted file's weights included. */
static void check_prefetch(const char *path, const ref_ctr_file *f, int threaded)
{
    char err[512], what[600];
    snprintf(what, sizeof what, "%s through the prefetch (%s)", path, threaded ? "reader thread" : "caller's thread");
    ctr_source *s = NULL;
    CHECK_MSG(ctr_source_binary(path, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    train_prefetch *p = NULL;
    CHECK(s && train_prefetch_start(s, 97, 1, threaded, 2, &p) == 0);
    int weighted = 0;
    for (int32_t t = 0; s && t < ctr_source_schema(s)->num_sparse; t++)
        weighted |= ctr_source_schema(s)->weighted[t];
    int64_t *items = malloc((size_t)(f->N + 1) * sizeof *items);
    for (int64_t i = 0; i < f->N; i++)
        items[i] = i;
    int ok = p != NULL;
    for (int64_t at = 0; ok && at < f->N;) {
        ctr_batch b;
        int64_t n = train_prefetch_next(p, &b, err, sizeof err);
        CHECK_MSG(n > 0, "%s: %s", what, err);
        if (n <= 0)
            break;
        ok = batch_matches(f, items + at, n, &b, what) && (!weighted || b.sparse.weights != NULL);
        at += n;
    }
    CHECK_MSG(ok, "%s: batches differ from the file's (or lost their weights)", what);
    train_prefetch_stop(p);
    free(items);
    ctr_source_destroy(s);
}

/* Every block size, thread count, share and order on the samples of `open`. */
static void check_file(const char *name, int (*open)(test_rng *, const char *, ctr_source **), int64_t N, test_rng *r)
{
    static const int64_t KS[] = {1, 3, 250, 1000, 4096};
    for (size_t k = 0; k < sizeof KS / sizeof KS[0]; k++) {
        char src_path[400], path[400], err[512];
        snprintf(src_path, sizeof src_path, "%s/%s.csv", tmpdir, name);
        snprintf(path, sizeof path, "%s/%s-%lld.bin", tmpdir, name, (long long)KS[k]);
        ctr_source *src = NULL;
        test_rng again = *r; /* the same samples for every block size */
        CHECK(open(&again, src_path, &src) == 0);
        CHECK_MSG(src && ctr_convert_source_blocks(src, path, N, (int32_t)KS[k], NULL, err, sizeof err) == 0, "%s",
                  err);
        ctr_source_destroy(src);
        ref_ctr_file f;
        CHECK_MSG(ref_ctr_file_read(path, &f) == 0 && f.N == N, "%s", path);
        for (int threads = 1; threads <= 3; threads++)
            for (int32_t world = 1; world <= 2; world++)
                for (int32_t rank = 0; rank < world; rank++)
                    for (int shuffle = 0; shuffle <= 1; shuffle++)
                        check_reads(path, &f, KS[k], threads, rank, world, shuffle, r);
        for (int threaded = 0; threaded <= 1; threaded++)
            check_prefetch(path, &f, threaded);
        ref_ctr_file_free(&f);
    }
    test_next(r);
}

/* The synthetic task with some features keyed (64-bit keys: version 2). */
static int open_synth(test_rng *r, const char *unused, ctr_source **out)
{
    (void)unused;
    char err[256];
    ctr_synth_config c = ctr_synth_config_default();
    c.num_sparse = 6;
    c.num_dense = (int32_t)test_range(r, 0, 5);
    for (int f = 0; f < c.num_sparse; f++) {
        c.rows[f] = test_range(r, 1, 3000);
        c.pooling[f] = test_range(r, 0, 3) ? 1 : 1 + 4 * test_uniform(r);
        c.keyed[f] = test_range(r, 0, 3) == 0;
    }
    c.seed = test_next(r);
    return ctr_source_synth(&c, 0, 0, 1, out, err, sizeof err);
}

/* A CSV of float labels, two floats, an id and a weighted multi-hot of
 * keys, some bags empty (version 3). */
static ctr_column CSV_COLS[5];
static int open_csv(test_rng *r, const char *path, ctr_source **out)
{
    char err[512];
    const char *names[5] = {"y", "a", "b", "c", "tags"};
    memset(CSV_COLS, 0, sizeof CSV_COLS);
    for (int i = 0; i < 5; i++)
        snprintf(CSV_COLS[i].name, sizeof CSV_COLS[i].name, "%s", names[i]);
    CSV_COLS[0].type = CTR_COL_LABEL;
    CSV_COLS[0].float_label = 1;
    CSV_COLS[1].type = CSV_COLS[2].type = CTR_COL_FLOAT;
    CSV_COLS[3].type = CTR_COL_CATEGORICAL;
    CSV_COLS[3].encoding = CTR_ENC_INT;
    CSV_COLS[3].rows = 50;
    CSV_COLS[4].type = CTR_COL_MULTI_HOT;
    CSV_COLS[4].encoding = CTR_ENC_INT;
    CSV_COLS[4].separator = '|';
    CSV_COLS[4].weighted = 1;
    ctr_text_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.delimiter = ',';
    sc.max_line = 4096;
    sc.num_columns = 5;
    sc.columns = CSV_COLS;
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    for (int i = 0; i < 3000; i++) {
        fprintf(fp, "%.3f,%.4f,%.2f,%d,", test_uniform(r), test_float(r, -9, 9), test_float(r, 0, 100),
                (int)test_range(r, 0, 50));
        for (int j = 0, nt = (int)test_range(r, 0, 5); j < nt; j++)
            fprintf(fp, "%s%llu:%.3f", j ? "|" : "", (unsigned long long)(test_next(r) >> 1), test_float(r, -2, 2));
        fputc('\n', fp);
    }
    fclose(fp);
    int rc = ctr_source_text(path, &sc, CTR_BAD_FAIL, 0, 1, out, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    return rc;
}

/* A file whose header gives a feature fewer rows than its ids need (the
 * header's checksum made right): reading fails at a block's check, with one
 * message whatever the thread count, after the same batches. */
static void check_corrupt(void)
{
    char path[400], bad[440], err[512], first[512] = "";
    snprintf(path, sizeof path, "%s/synth-250.bin", tmpdir);
    snprintf(bad, sizeof bad, "%s/corrupt.bin", tmpdir);
    long size = 0;
    FILE *fp = fopen(path, "rb");
    unsigned char *c = NULL;
    if (fp && !fseek(fp, 0, SEEK_END) && (size = ftell(fp)) > 0 && !fseek(fp, 0, SEEK_SET) && (c = malloc((size_t)size)))
        CHECK(fread(c, 1, (size_t)size, fp) == (size_t)size);
    if (fp)
        fclose(fp);
    if (!c)
        return;
    const uint32_t version = c[8], S = c[20];
    const int64_t H = 56 + 40 * S + (version >= 3 ? 8 : 0) + 8;
    int f = -1;
    for (uint32_t k = 0; k < S && f < 0; k++) /* the first feature of row ids with more than one row */
        if (c[56 + 8 * k] > 1 || c[57 + 8 * k])
            f = (int)k;
    CHECK(f >= 0);
    memset(c + 56 + 8 * f, 0, 8);
    c[56 + 8 * f] = 1; /* rows 1: any id above 0 is out of them */
    uint64_t h = XXH64(c, (size_t)H - 8, 0);
    for (int i = 0; i < 8; i++)
        c[H - 8 + i] = (unsigned char)(h >> (8 * i));
    fp = fopen(bad, "wb");
    CHECK(fp && fwrite(c, 1, (size_t)size, fp) == (size_t)size);
    if (fp)
        fclose(fp);
    free(c);
    int64_t good_first = -1;
    for (int threads = 1; threads <= 3; threads++) {
        ctr_source *s = NULL;
        CHECK_MSG(ctr_source_binary(bad, 0, 1, &s, err, sizeof err) == 0, "%s", err);
        if (!s)
            continue;
        omp_set_num_threads(threads);
        int64_t good = 0, n;
        ctr_batch b;
        while ((n = ctr_source_next(s, 100, &b, err, sizeof err)) > 0)
            good += n;
        CHECK_MSG(n < 0 && strstr(err, "outside [0, 1)"), "%d threads: %s", threads, err);
        if (threads == 1) {
            snprintf(first, sizeof first, "%s", err);
            good_first = good;
        }
        CHECK_MSG(!strcmp(first, err) && good == good_first, "%d threads: %s (after %lld samples), 1 thread: %s "
                  "(after %lld)", threads, err, (long long)good, first, (long long)good_first);
        ctr_source_destroy(s);
        omp_set_num_threads(1);
    }
}

/* The synthetic task's batches, drawn by 1 and 2 threads, bit for bit. */
static void check_synth_threads(test_rng *r)
{
    ref_ctr_file f[2];
    char path[2][400], err[512];
    for (int t = 0; t < 2; t++) {
        test_rng again = *r;
        ctr_source *s = NULL;
        snprintf(path[t], sizeof path[t], "%s/synth-t%d.bin", tmpdir, t + 1);
        omp_set_num_threads(t + 1);
        CHECK(open_synth(&again, NULL, &s) == 0);
        CHECK_MSG(s && ctr_convert_source_blocks(s, path[t], 5000, 2048, NULL, err, sizeof err) == 0, "%s", err);
        ctr_source_destroy(s);
        CHECK(ref_ctr_file_read(path[t], &f[t]) == 0);
    }
    omp_set_num_threads(1);
    int64_t ids = f[0].N ? f[0].first[f[0].N * f[0].S - 1] + f[0].len[f[0].N * f[0].S - 1] : 0;
    CHECK(f[0].N == 5000 && f[1].N == 5000);
    CHECK(!memcmp(f[0].label, f[1].label, 5000 * 4) && !memcmp(f[0].dense, f[1].dense, (size_t)(5000 * f[0].D) * 4));
    CHECK(!memcmp(f[0].len, f[1].len, (size_t)(5000 * f[0].S) * 4) && !memcmp(f[0].ids, f[1].ids, (size_t)ids * 8));
    ref_ctr_file_free(&f[0]);
    ref_ctr_file_free(&f[1]);
    test_next(r);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    snprintf(tmpdir, sizeof tmpdir, "%s/ember-test-bin-decode-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    check_file("synth", open_synth, 2000 + test_range(&r, 0, 3000), &r);
    check_file("csv", open_csv, 3000, &r);
    check_corrupt();
    check_synth_threads(&r);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report("test_bin_decode");
}
