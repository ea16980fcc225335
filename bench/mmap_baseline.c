/*
 * mmap_baseline.c: the baseline a user has for free against the SSD tier:
 * the same table (rows + optimizer state, the bytes ember's memory tier
 * holds) in a file on disk, mapped with mmap(MAP_SHARED), trained with
 * plain loops, so that the kernel's page cache does the caching.  Run it
 * under a memory limit equal to the SSD tier's cache budget (a cgroup that
 * counts the mapped file's page cache): bench/mmap_baseline.sh.
 *
 *   mmap_baseline --file PATH [--tables T --rows R --dim D --batch B --pooling P
 *                 --dist zipf|uniform --alpha A --seed S --threads K --workload NAME
 *                 --optimizer rowwise_adagrad|adagrad --lr LR --iters N --warmup N
 *                 --create 1|0 --keep 0|1 --layout record|split --advice random|normal
 *                 --dev vda --check 1|0]          (default: W1, row-wise Adagrad)
 *
 * The workload is `ember bench --preset W1` (or W3 with --tables 1 --rows
 * 10000000 --dim 128 --batch 8192 --pooling 10 --dist uniform): the same
 * ember_synth batches (seed 0 by default, as ember bench), the same d_pooled
 * (a fixed uniform draw in [-1, 1), ember bench's), lr 0.01 and eps 1e-8.
 * Batch n is drawn before step n, untimed, and not kept (so the process's
 * own memory stays small: one batch and the step's buffers).
 *
 * The file: T tables stacked, table t's row r at stacked row t * R + r.
 * --layout record (default): one record per row, [values D | state sf]
 * floats (sf = 1 row-wise Adagrad, D Adagrad), so a row and its state share
 * a page; split: all values, then all state (the memory tier's arrays).
 * --create 1 (default) writes it with ember's initial rows (uniform 0.05,
 * as ember bench's tables: a function of seed, table name, row, column)
 * and zero state, with O_DIRECT so that none of it is left in the page
 * cache; --create 0 uses the file as it is (it must have the size).
 * --keep 0 (default) deletes it at the end.  --advice random (default)
 * madvise(MADV_RANDOM)s the mapping (a fault reads its page only), normal
 * leaves the kernel's read-around.
 *
 * One step (timed; fwd = dedupe + gather, bwd = accumulate + update):
 *   per table, the batch's ids deduplicated (open addressing: id -> its
 *   distinct index u, the occurrence's u kept); per sample and table, the
 *   sum of its P rows read from the mapping (OpenMP over samples);
 *   per table, the gradient of each distinct row summed in sample order
 *   (as ember sums duplicates), then the optimizer's update of the row and
 *   its state in the mapping (OpenMP over distinct rows).
 * --check 1 (default) first runs one step of a small shape (2 tables x 4096
 * rows, batch 256, this D, optimizer and distribution) in a heap buffer
 * with the same code, against ember's memory tier (ember_forward and
 * ember_backward): initial rows, pooled outputs, rows and state after the
 * step equal to 1e-5 relative.
 *
 * One JSON line: step medians and mean, major and minor faults per step
 * (getrusage), the bytes /proc/self/io says the process read and dirtied
 * (read_bytes, write_bytes: pages dirtied, written back later by the
 * kernel), and with --dev, the device's sectors read and written per step
 * from /sys/class/block/DEV/stat (every process's, the kernel's write-back too).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>
#include <xxhash.h>

#include "bench_util.h"
#include "limit_setup.h"
#include "core/rng.h"
#include "table/init.h"

typedef struct opts {
    const char *file, *optimizer, *layout, *advice, *dev;
    int iters, warmup, create, keep, check;
    double lr;
} opts;

static int opt_flag(const char *k, const char *v, void *arg)
{
    opts *o = arg;
    if (!strcmp(k, "--file")) o->file = v;
    else if (!strcmp(k, "--optimizer")) o->optimizer = v;
    else if (!strcmp(k, "--layout")) o->layout = v;
    else if (!strcmp(k, "--advice")) o->advice = v;
    else if (!strcmp(k, "--dev")) o->dev = v;
    else if (!strcmp(k, "--iters")) o->iters = atoi(v);
    else if (!strcmp(k, "--warmup")) o->warmup = atoi(v);
    else if (!strcmp(k, "--create")) o->create = atoi(v);
    else if (!strcmp(k, "--keep")) o->keep = atoi(v);
    else if (!strcmp(k, "--check")) o->check = atoi(v);
    else if (!strcmp(k, "--lr")) o->lr = atof(v);
    else return 1;
    return 0;
}

/* The table in memory (mapped or not): stacked row g's values at
 * v + g * vs floats, its state at s + g * ss. */
typedef struct table {
    float *v, *s;
    int64_t vs, ss;
    int32_t T, D, sf;
    int64_t R;
    int rowwise;
    float lr, eps;
} table;

static inline float *vrow(const table *tb, int64_t g) { return tb->v + g * tb->vs; }
static inline float *srow(const table *tb, int64_t g) { return tb->s + g * tb->ss; }

/* The step's buffers: per table, the distinct ids (urow), each occurrence's
 * distinct index (occ_u), the map, the gradient sums (acc). */
typedef struct step_buf {
    int64_t n, cap;           /* occurrences per table, map slots       */
    int64_t *keys;            /* [cap], -1 empty                        */
    int32_t *vals;            /* [cap]                                  */
    int64_t *urow;            /* [T][n]: distinct stacked rows           */
    int64_t *nu;              /* [T]                                    */
    int32_t *occ_u;           /* [T][n]                                 */
    float *acc;               /* [n][D]                                 */
} step_buf;

static int buf_alloc(step_buf *sb, int32_t T, int32_t B, int32_t P, int32_t D)
{
    sb->n = (int64_t)B * P;
    sb->cap = 1;
    while (sb->cap < 2 * sb->n)
        sb->cap <<= 1;
    sb->keys = malloc(sizeof(int64_t) * (size_t)sb->cap);
    sb->vals = malloc(sizeof(int32_t) * (size_t)sb->cap);
    sb->urow = malloc(sizeof(int64_t) * (size_t)(T * sb->n));
    sb->nu = malloc(sizeof(int64_t) * (size_t)T);
    sb->occ_u = malloc(sizeof(int32_t) * (size_t)(T * sb->n));
    sb->acc = malloc(sizeof(float) * (size_t)(sb->n * D));
    if (!sb->keys || !sb->vals || !sb->urow || !sb->nu || !sb->occ_u || !sb->acc)
        return -1;
    /* touched now, so that a run's peak memory is its own from the start */
    memset(sb->urow, 0, sizeof(int64_t) * (size_t)(T * sb->n));
    memset(sb->occ_u, 0, sizeof(int32_t) * (size_t)(T * sb->n));
    memset(sb->acc, 0, sizeof(float) * (size_t)(sb->n * D));
    memset(sb->vals, 0, sizeof(int32_t) * (size_t)sb->cap);
    return 0;
}

static void buf_free(step_buf *sb)
{
    free(sb->keys), free(sb->vals), free(sb->urow), free(sb->nu), free(sb->occ_u), free(sb->acc);
}

static inline uint64_t hash64(uint64_t x) { return ember_mix64(x); }

/* Per table, the ids of batch b deduplicated (first-seen order). */
static void dedupe(step_buf *sb, const table *tb, const ember_batch *b)
{
    const int64_t n = sb->n, mask = sb->cap - 1;
    for (int32_t t = 0; t < tb->T; t++) {
        const int64_t *ids = b->ids + t * n;
        int64_t *urow = sb->urow + t * n, nu = 0;
        int32_t *occ = sb->occ_u + t * n;
        memset(sb->keys, 0xff, sizeof(int64_t) * (size_t)sb->cap);
        for (int64_t i = 0; i < n; i++) {
            int64_t id = ids[i], h = (int64_t)(hash64((uint64_t)id) & (uint64_t)mask);
            while (sb->keys[h] != -1 && sb->keys[h] != id)
                h = (h + 1) & mask;
            if (sb->keys[h] == -1) {
                sb->keys[h] = id;
                sb->vals[h] = (int32_t)nu;
                urow[nu++] = (int64_t)t * tb->R + id;
            }
            occ[i] = sb->vals[h];
        }
        sb->nu[t] = nu;
    }
}

/* pooled [B x T*D]: per sample and table, the sum of its P rows. */
static void forward(const table *tb, const step_buf *sb, int32_t B, int32_t P, float *pooled, int threads)
{
    const int32_t T = tb->T, D = tb->D;
    for (int32_t t = 0; t < T; t++) {
        const int64_t *urow = sb->urow + t * sb->n;
        const int32_t *occ = sb->occ_u + t * sb->n;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64)
        for (int32_t b = 0; b < B; b++) {
            float *o = pooled + ((int64_t)b * T + t) * D;
            for (int32_t k = 0; k < D; k++)
                o[k] = 0.0f;
            for (int32_t p = 0; p < P; p++) {
                const float *r = vrow(tb, urow[occ[(int64_t)b * P + p]]);
                for (int32_t k = 0; k < D; k++)
                    o[k] += r[k];
            }
        }
    }
}

/* Per table, each distinct row's gradient summed in sample order, then the
 * optimizer's update of the row and its state. */
static void backward(const table *tb, step_buf *sb, int32_t B, int32_t P, const float *dp, int threads)
{
    const int32_t T = tb->T, D = tb->D;
    for (int32_t t = 0; t < T; t++) {
        const int64_t nu = sb->nu[t], *urow = sb->urow + t * sb->n;
        const int32_t *occ = sb->occ_u + t * sb->n;
        memset(sb->acc, 0, sizeof(float) * (size_t)(nu * D));
        for (int32_t b = 0; b < B; b++) {
            const float *d = dp + ((int64_t)b * T + t) * D;
            for (int32_t p = 0; p < P; p++) {
                float *a = sb->acc + (int64_t)occ[(int64_t)b * P + p] * D;
                for (int32_t k = 0; k < D; k++)
                    a[k] += d[k];
            }
        }
        const float lr = tb->lr, eps = tb->eps;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64)
        for (int64_t u = 0; u < nu; u++) {
            const float *g = sb->acc + u * D;
            float *w = vrow(tb, urow[u]), *s = srow(tb, urow[u]);
            if (tb->rowwise) {
                float sq = 0.0f;
                for (int32_t k = 0; k < D; k++)
                    sq += g[k] * g[k];
                s[0] += sq / (float)D;
                float mult = lr / (sqrtf(s[0]) + eps);
                for (int32_t k = 0; k < D; k++)
                    w[k] -= mult * g[k];
            } else {
                for (int32_t k = 0; k < D; k++) {
                    s[k] += g[k] * g[k];
                    w[k] -= lr * g[k] / (sqrtf(s[k]) + eps);
                }
            }
        }
    }
}

/* ember bench's d_pooled: one uniform draw in [-1, 1). */
static void fill_gradient(float *dp, int64_t W, unsigned long long seed)
{
    uint64_t rs = seed ^ 0x6a09e667f3bcc908ULL;
    for (int64_t i = 0; i < W; i++) {
        uint64_t z = (rs += 0x9e3779b97f4a7c15ULL);
        z = ember_mix64(z);
        dp[i] = (float)((double)(z >> 40) * 0x1.0p-23 - 1.0);
    }
}

/* Table t's rng key (ember_create's: collection seed 0, name "t<t>"). */
static uint64_t table_key(int32_t t)
{
    char name[32];
    snprintf(name, sizeof name, "t%d", t);
    return ember_rng_table_key(0, XXH64(name, strlen(name), 0));
}

/* Stacked row g's initial values into v (D floats), zero state into s (sf). */
static void init_row(const table *tb, int64_t g, float *v, float *s)
{
    ember_init_row_values(EMBER_INIT_UNIFORM, 0.05f, tb->D, table_key((int32_t)(g / tb->R)), g % tb->R, v);
    memset(s, 0, sizeof(float) * (size_t)tb->sf);
}

/* Stacked rows [g0, g1) of tb written with their initial values, zero state. */
static void init_rows(const table *tb, int64_t g0, int64_t g1)
{
    for (int64_t g = g0; g < g1; g++)
        init_row(tb, g, vrow(tb, g), srow(tb, g));
}

/* Writes the file's initial contents with O_DIRECT (8 MiB at a time, the
 * layout being tb's, on a buffer standing in for the mapping).  0 or -1. */
static int create_file(const char *path, const table *shape, int64_t bytes)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd < 0) {
        fprintf(stderr, "mmap_baseline: %s: %s\n", path, strerror(errno));
        return -1;
    }
    const int64_t chunk = 8 << 20;
    float *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, (size_t)chunk)) {
        close(fd);
        return -1;
    }
    /* the file image chunk by chunk: each row made in tmp, its bytes that
     * fall in the chunk copied (a record may straddle two chunks) */
    const int64_t rows = (int64_t)shape->T * shape->R;
    int rc = 0;
    for (int64_t off = 0; off < bytes && !rc; off += chunk) {
        int64_t len = bytes - off < chunk ? bytes - off : chunk;
        memset(buf, 0, (size_t)chunk);
        if (shape->ss == shape->vs) { /* record layout: rows [off/rec, ...) */
            const int64_t rec = shape->vs * 4;
            int64_t g0 = off / rec, g1 = (off + len + rec - 1) / rec;
            float tmp[2 * 256];
            for (int64_t g = g0; g < g1 && g < rows; g++) {
                init_row(shape, g, tmp, tmp + shape->D);
                int64_t a = g * rec, e = a + rec, lo = a > off ? a : off, hi = e < off + len ? e : off + len;
                memcpy((char *)buf + (lo - off), (char *)tmp + (lo - a), (size_t)(hi - lo));
            }
        } else { /* split: values then state (state zero) */
            const int64_t vbytes = rows * shape->D * 4, rec = (int64_t)shape->D * 4;
            if (off < vbytes) {
                int64_t end = off + len < vbytes ? off + len : vbytes, g0 = off / rec, g1 = (end + rec - 1) / rec;
                float tmp[256];
                float none[256];
                for (int64_t g = g0; g < g1; g++) {
                    init_row(shape, g, tmp, none);
                    int64_t a = g * rec, e = a + rec, lo = a > off ? a : off, hi = e < end ? e : end;
                    memcpy((char *)buf + (lo - off), (char *)tmp + (lo - a), (size_t)(hi - lo));
                }
            }
        }
        int64_t wl = (len + 4095) & ~(int64_t)4095;
        if (pwrite(fd, buf, (size_t)wl, off) != wl) {
            fprintf(stderr, "mmap_baseline: writing %s: %s\n", path, strerror(errno));
            rc = -1;
        }
    }
    if (!rc && (ftruncate(fd, bytes) || fsync(fd))) {
        fprintf(stderr, "mmap_baseline: %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    free(buf);
    close(fd);
    return rc;
}

/* The table view of a base address (file image or heap). */
static table view(void *base, const limit_shape *sh, int rowwise, int split, float lr)
{
    table tb = {0};
    tb.T = sh->T, tb.D = sh->D, tb.R = sh->R, tb.rowwise = rowwise, tb.sf = rowwise ? 1 : sh->D;
    tb.lr = lr, tb.eps = 1e-8f;
    const int64_t rows = (int64_t)sh->T * sh->R;
    if (split) {
        tb.v = base, tb.vs = tb.D;
        tb.s = (float *)base + rows * tb.D, tb.ss = tb.sf;
    } else {
        tb.v = base, tb.vs = tb.D + tb.sf;
        tb.s = (float *)base + tb.D, tb.ss = tb.vs;
    }
    return tb;
}

static int close_rel(float a, float b) { return fabsf(a - b) <= 1e-5f * fmaxf(fabsf(b), 1e-3f); }

/* --check: one step of a small shape against ember's memory tier.  Writes
 * "ok" or what differs into msg. */
static void check(const limit_shape *big, int rowwise, int split, float lr, char *msg, size_t len)
{
    limit_shape sh = *big;
    sh.T = 2, sh.R = 4096, sh.B = 256, sh.threads = 1;
    snprintf(msg, len, "ok");
    ember_optimizer opt = ember_optimizer_default(rowwise ? EMBER_OPT_ROWWISE_ADAGRAD : EMBER_OPT_ADAGRAD);
    opt.lr = lr;
    ember_collection *c;
    ember_synth *s;
    if (limit_open("mmap_baseline", &sh, opt, &c, &s)) {
        snprintf(msg, len, "could not create ember's collection");
        return;
    }
    const int32_t T = sh.T, D = sh.D, sf = rowwise ? 1 : D;
    const int64_t rows = (int64_t)T * sh.R, W = (int64_t)sh.B * T * D;
    float *img = calloc((size_t)(rows * (D + sf)), sizeof(float)), *row = malloc(sizeof(float) * (size_t)(D + sf));
    float *po = malloc(sizeof(float) * (size_t)W), *pe = malloc(sizeof(float) * (size_t)W), *dp = malloc(sizeof(float) * (size_t)W);
    table tb = view(img, &sh, rowwise, split, lr);
    step_buf sb;
    ember_batch b;
    if (!img || !row || !po || !pe || !dp || buf_alloc(&sb, T, sh.B, sh.P, D)) {
        snprintf(msg, len, "out of memory");
        goto out;
    }
    init_rows(&tb, 0, rows);
    for (int64_t g = 0; g < rows && !strcmp(msg, "ok"); g++) { /* the initial rows are ember's */
        ember_table_read(c, (int32_t)(g / sh.R), g % sh.R, 1, row);
        for (int32_t k = 0; k < D; k++)
            if (row[k] != vrow(&tb, g)[k]) {
                snprintf(msg, len, "initial row %lld col %d: ember %.9g file %.9g", (long long)g, k, row[k], vrow(&tb, g)[k]);
                break;
            }
    }
    fill_gradient(dp, W, sh.seed);
    ember_synth_next(s, &b);
    if (ember_forward(c, &b, pe, NULL) != EMBER_OK || ember_backward(c, dp, NULL) != EMBER_OK) {
        snprintf(msg, len, "ember: %s", ember_errmsg(c));
        goto out;
    }
    dedupe(&sb, &tb, &b);
    forward(&tb, &sb, sh.B, sh.P, po, 1);
    backward(&tb, &sb, sh.B, sh.P, dp, 1);
    for (int64_t i = 0; i < W && !strcmp(msg, "ok"); i++)
        if (!close_rel(po[i], pe[i]))
            snprintf(msg, len, "pooled[%lld]: ember %.9g plain %.9g", (long long)i, pe[i], po[i]);
    for (int64_t g = 0; g < rows && !strcmp(msg, "ok"); g++) {
        ember_table_read(c, (int32_t)(g / sh.R), g % sh.R, 1, row);
        ember_table_read_state(c, (int32_t)(g / sh.R), g % sh.R, 1, row + D);
        for (int32_t k = 0; k < D + sf; k++) {
            float mine = k < D ? vrow(&tb, g)[k] : srow(&tb, g)[k - D];
            if (!close_rel(mine, row[k])) {
                snprintf(msg, len, "row %lld %s %d: ember %.9g plain %.9g", (long long)g, k < D ? "col" : "state",
                         k < D ? k : k - D, row[k], mine);
                break;
            }
        }
    }
    buf_free(&sb);
out:
    free(img), free(row), free(po), free(pe), free(dp);
    ember_synth_destroy(s);
    ember_collection_destroy(c);
}

/* /proc/self/io's read_bytes and write_bytes. */
static void proc_io(long long *rd, long long *wr)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    *rd = *wr = -1;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "read_bytes: %lld", rd);
        sscanf(line, "write_bytes: %lld", wr);
    }
    if (f)
        fclose(f);
}

/* Sectors read and written of /sys/class/block/DEV/stat (fields 3 and 7). */
static void dev_io(const char *dev, long long *rd, long long *wr)
{
    char path[256];
    unsigned long long v[11] = {0};
    *rd = *wr = -1;
    if (!dev)
        return;
    snprintf(path, sizeof path, "/sys/class/block/%s/stat", dev);
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) == 7)
        *rd = (long long)v[2] * 512, *wr = (long long)v[6] * 512;
    if (f)
        fclose(f);
}

static double peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024.0;
}

int main(int argc, char **argv)
{
    limit_shape sh;
    opts o = {NULL, "rowwise_adagrad", "record", "random", NULL, 20, 5, 1, 0, 1, 0.01};
    if (limit_parse("mmap_baseline", argc, argv, &sh, opt_flag, &o))
        return 2;
    const int rowwise = !strcmp(o.optimizer, "rowwise_adagrad"), split = !strcmp(o.layout, "split");
    if (!o.file || (!rowwise && strcmp(o.optimizer, "adagrad")) || (!split && strcmp(o.layout, "record")) ||
        (strcmp(o.advice, "random") && strcmp(o.advice, "normal")) || o.iters < 1 || o.warmup < 0 ||
        sh.precision != EMBER_PRECISION_FP32 || (double)sh.B * sh.P >= 2147483647.0) {
        fprintf(stderr, "mmap_baseline: bad arguments (--file PATH needed; optimizer rowwise_adagrad or adagrad; "
                        "layout record or split; advice random or normal; iters >= 1; fp32 rows)\n");
        return 2;
    }
    const int32_t T = sh.T, D = sh.D, B = sh.B, P = sh.P, threads = sh.threads;
    const int32_t sf = rowwise ? 1 : D;
    const int64_t rows = (int64_t)T * sh.R, bytes = rows * (D + sf) * 4, W = (int64_t)B * T * D;
    const float lr = (float)o.lr;

    char chk[256] = "skipped";
    if (o.check)
        check(&sh, rowwise, split, lr, chk, sizeof chk);

    double t0 = bench_now();
    table shape = view(NULL, &sh, rowwise, split, lr);
    if (o.create && create_file(o.file, &shape, bytes))
        return 1;
    double create_ms = (bench_now() - t0) * 1e3;
    int fd = open(o.file, O_RDWR);
    struct stat stt;
    if (fd < 0 || fstat(fd, &stt) || stt.st_size != bytes) {
        fprintf(stderr, "mmap_baseline: %s: %s (needs %lld bytes)\n", o.file, fd < 0 ? strerror(errno) : "wrong size",
                (long long)bytes);
        return 1;
    }
    void *map = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        fprintf(stderr, "mmap_baseline: mmap: %s\n", strerror(errno));
        return 1;
    }
    if (!strcmp(o.advice, "random"))
        madvise(map, (size_t)bytes, MADV_RANDOM);
    table tb = view(map, &sh, rowwise, split, lr);

    ember_synth_config sc = ember_synth_config_default();
    sc.tables = T, sc.rows = sh.R, sc.batch_size = B, sc.pooling = P, sc.zipf = sh.zipf;
    sc.alpha = sh.alpha, sc.seed = sh.seed;
    ember_synth *s;
    step_buf sb;
    float *pooled = malloc(sizeof(float) * (size_t)W), *dp = malloc(sizeof(float) * (size_t)W);
    double *ts = malloc(sizeof(double) * 3 * (size_t)o.iters), *tf = ts + o.iters, *tbw = ts + 2 * o.iters;
    if (ember_synth_create(&sc, &s) != EMBER_OK || !pooled || !dp || !ts || buf_alloc(&sb, T, B, P, D)) {
        fprintf(stderr, "mmap_baseline: out of memory\n");
        return 1;
    }
    memset(pooled, 0, sizeof(float) * (size_t)W);
    fill_gradient(dp, W, sh.seed);

    struct rusage r0, r1;
    long long io_r0 = 0, io_w0 = 0, io_r1, io_w1, dv_r0 = 0, dv_w0 = 0, dv_r1, dv_w1;
    double distinct = 0, sum = 0;
    for (int n = 0; n < o.warmup + o.iters; n++) {
        ember_batch b;
        ember_synth_next(s, &b); /* untimed, as ember bench's pre-drawn batches */
        if (n == o.warmup) {
            getrusage(RUSAGE_SELF, &r0);
            proc_io(&io_r0, &io_w0);
            dev_io(o.dev, &dv_r0, &dv_w0);
        }
        double a = bench_now();
        dedupe(&sb, &tb, &b);
        forward(&tb, &sb, B, P, pooled, threads);
        double m = bench_now();
        backward(&tb, &sb, B, P, dp, threads);
        double e = bench_now();
        if (n >= o.warmup) {
            int i = n - o.warmup;
            ts[i] = e - a, tf[i] = m - a, tbw[i] = e - m, sum += e - a;
            for (int32_t t = 0; t < T; t++)
                distinct += (double)sb.nu[t];
        }
        fprintf(stderr, "mmap_baseline: step %d: %.1f ms\n", n, (e - a) * 1e3);
    }
    getrusage(RUSAGE_SELF, &r1);
    proc_io(&io_r1, &io_w1);
    dev_io(o.dev, &dv_r1, &dv_w1);
    const double it = o.iters;
    double tmin = ts[0], tmax = ts[0];
    for (int i = 1; i < o.iters; i++)
        tmin = fmin(tmin, ts[i]), tmax = fmax(tmax, ts[i]);
    double med = bench_median(ts, o.iters), fmed = bench_median(tf, o.iters), bmed = bench_median(tbw, o.iters);
    char devr[64] = "null", devw[64] = "null";
    if (o.dev && dv_r1 >= 0) {
        snprintf(devr, sizeof devr, "%.0f", (dv_r1 - dv_r0) / it);
        snprintf(devw, sizeof devw, "%.0f", (dv_w1 - dv_w0) / it);
    }
    printf("{\"bench\":\"mmap_baseline\",\"workload\":\"%s\",\"tables\":%d,\"rows\":%lld,\"dim\":%d,\"batch\":%d,"
           "\"pooling\":%d,\"dist\":\"%s\",\"alpha\":%g,\"seed\":%llu,\"optimizer\":\"%s\",\"lr\":%g,\"threads\":%d,"
           "\"layout\":\"%s\",\"advice\":\"%s\",\"iters\":%d,\"warmup\":%d,\"record_bytes\":%d,\"file_bytes\":%lld,"
           "\"ms_per_iter_median\":%.3f,\"ms_per_iter_mean\":%.3f,\"ms_per_iter_min\":%.3f,\"ms_per_iter_max\":%.3f,"
           "\"fwd_ms_median\":%.3f,\"bwd_ms_median\":%.3f,\"unique_rows_per_iter\":%.1f,"
           "\"majflt_per_iter\":%.1f,\"minflt_per_iter\":%.1f,\"io_read_bytes_per_iter\":%.0f,"
           "\"io_write_bytes_per_iter\":%.0f,\"dev\":\"%s\",\"dev_read_bytes_per_iter\":%s,"
           "\"dev_write_bytes_per_iter\":%s,\"create_ms\":%.1f,\"peak_rss_mb\":%.1f,\"check\":\"%s\"}\n",
           sh.workload, T, (long long)sh.R, D, B, P, sh.zipf ? "zipf" : "uniform", sh.alpha, sh.seed, o.optimizer,
           o.lr, threads, o.layout, o.advice, o.iters, o.warmup, (D + sf) * 4, (long long)bytes, med * 1e3,
           sum / it * 1e3, tmin * 1e3, tmax * 1e3, fmed * 1e3, bmed * 1e3, distinct / it,
           (double)(r1.ru_majflt - r0.ru_majflt) / it, (double)(r1.ru_minflt - r0.ru_minflt) / it,
           (double)(io_r1 - io_r0) / it, (double)(io_w1 - io_w0) / it, o.dev ? o.dev : "", devr, devw, create_ms,
           peak_rss_mb(), chk);
    fflush(stdout);
    munmap(map, (size_t)bytes);
    close(fd);
    if (!o.keep)
        unlink(o.file);
    ember_synth_destroy(s);
    buf_free(&sb);
    free(pooled), free(dp), free(ts);
    return strcmp(chk, "ok") && strcmp(chk, "skipped") ? 1 : 0;
}
