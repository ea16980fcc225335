/*
 * test_ctr.c: the CTR data sources (src/data/ctr*.c, ctr.h).
 *
 * Synthetic: same seed same bits, another seed other bits; for W = 1..4 the
 * ranks' local batches concatenate to the W = 1 global batch; the eval
 * stream differs from the training one; teacher probabilities lie in (0, 1),
 * the click rate is near ctr_rate and the teacher's AUC is well above 0.5.
 * TSV: fresh random lines (empty fields, signs, upper and lower case hex)
 * against a naive reference parser (strtok-free splitting, strtoll,
 * strtoul, XXH64); each class of bad line counted with its line number and
 * message under skip, and failing under fail; rank shares tile the file;
 * integers at int64's limits and with a point and zeros ("-000.00", the
 * line fuzz_tsv found).
 * Binary: ctr_convert_tsv then the reader equals the TSV reader sample for
 * sample; its rank shares tile the file; every flipped byte and every
 * truncation is an error, never a crash.  Version 2 (64-bit keys): a random
 * mix of keyed (rows 0) and hashed features, TSV -> binary -> samples equal
 * to TSV -> samples and the reference, shares and positions; a truncated
 * block, a cut file, a bad checksum (the position stays after the last
 * good batch), keyed features read as row numbers (a version 1 header, a
 * header that disagrees with the blocks' key masks) each give a message
 * naming the file, block or sample, and feature.  `test_ctr SEED` reruns a
 * seed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <xxhash.h>

#include "check.h"
#include "data/ctr.h"
#include "util.h"

static char tmpdir[256];

/* ------------------------------------------------------------ samples */

/* One batch copied sample-major, so batches of any size compare. */
typedef struct samples {
    int64_t n, cap, nids, cap_ids;
    int32_t D, S;
    float *label, *dense, *prob;
    int64_t *start;  /* [n*S + 1] offsets into ids, sample-major bags */
    int64_t *ids;
} samples;

static void samples_init(samples *a, int32_t D, int32_t S)
{
    memset(a, 0, sizeof *a);
    a->D = D;
    a->S = S;
    a->start = calloc(1, sizeof *a->start);
}

static void samples_free(samples *a)
{
    free(a->label);
    free(a->dense);
    free(a->prob);
    free(a->start);
    free(a->ids);
    memset(a, 0, sizeof *a);
}

static void samples_add(samples *a, const ctr_batch *b, const float *prob)
{
    int64_t n = b->batch_size, S = a->S, D = a->D;
    if (a->n + n > a->cap) {
        a->cap = (a->n + n) * 2;
        a->label = realloc(a->label, (size_t)a->cap * sizeof(float));
        a->prob = realloc(a->prob, (size_t)a->cap * sizeof(float));
        a->dense = realloc(a->dense, (size_t)(a->cap * D + 1) * sizeof(float));
        a->start = realloc(a->start, (size_t)(a->cap * S + 1) * sizeof(int64_t));
    }
    if (a->nids + b->sparse.num_ids > a->cap_ids) {
        a->cap_ids = (a->nids + b->sparse.num_ids) * 2 + 1;
        a->ids = realloc(a->ids, (size_t)a->cap_ids * sizeof(int64_t));
    }
    int64_t off[CTR_MAX_FEATURES], acc = 0;
    for (int64_t f = 0; f < S; f++) {
        off[f] = acc;
        for (int64_t i = 0; i < n; i++)
            acc += b->sparse.lengths[f * n + i];
    }
    CHECK(acc == b->sparse.num_ids);
    for (int64_t i = 0; i < n; i++) {
        a->label[a->n + i] = b->label[i];
        a->prob[a->n + i] = prob ? prob[i] : 0;
        memcpy(a->dense + (a->n + i) * D, b->dense + i * D, (size_t)D * sizeof(float));
        for (int64_t f = 0; f < S; f++) {
            int32_t len = b->sparse.lengths[f * n + i];
            memcpy(a->ids + a->nids, b->sparse.ids + off[f], (size_t)len * sizeof(int64_t));
            off[f] += len;
            a->nids += len;
            a->start[(a->n + i) * S + f + 1] = a->nids;
        }
    }
    a->n += n;
}

/* 1 when samples [ai, ai+n) of a equal [bi, bi+n) of b bit for bit. */
static int samples_equal(const samples *a, int64_t ai, const samples *b, int64_t bi, int64_t n, const char *what)
{
    int64_t S = a->S, D = a->D;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = ai + i, y = bi + i;
        int same = a->label[x] == b->label[y] && a->prob[x] == b->prob[y] &&
                   !memcmp(a->dense + x * D, b->dense + y * D, (size_t)D * sizeof(float));
        for (int64_t f = 0; f < S && same; f++) {
            int64_t la = a->start[x * S + f + 1] - a->start[x * S + f];
            int64_t lb = b->start[y * S + f + 1] - b->start[y * S + f];
            same = la == lb && !memcmp(a->ids + a->start[x * S + f], b->ids + b->start[y * S + f],
                                       (size_t)la * sizeof(int64_t));
        }
        if (!same) {
            fprintf(stderr, "%s: sample %lld differs from %lld\n", what, (long long)x, (long long)y);
            return 0;
        }
    }
    return 1;
}

/* Reads a whole share with batches of max samples. */
static int read_all(ctr_source *s, int32_t max, samples *out)
{
    char err[512];
    ctr_batch b;
    int64_t n;
    while ((n = ctr_source_next(s, max, &b, err, sizeof err)) > 0)
        samples_add(out, &b, ctr_source_teacher_prob(s));
    if (n < 0)
        fprintf(stderr, "read_all: %s\n", err);
    return n < 0 ? -1 : 0;
}

/* Reads `steps` batches of max samples (fewer when the share ends). */
static int read_all_n(ctr_source *s, int32_t max, int steps, samples *out)
{
    char err[512];
    ctr_batch b;
    for (int k = 0; k < steps; k++) {
        int64_t n = ctr_source_next(s, max, &b, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "read_all_n: %s\n", err);
            return -1;
        }
        samples_add(out, &b, ctr_source_teacher_prob(s));
    }
    return 0;
}

/* ----------------------------------------------------------- synthetic */

static ctr_synth_config small_task(uint64_t seed)
{
    ctr_synth_config c = ctr_synth_config_default();
    c.num_sparse = 5;
    c.num_dense = 3;
    c.rows[0] = 1000;
    c.rows[1] = 7;
    c.rows[2] = 300;
    c.rows[3] = 1; /* one row: every id 0 */
    c.rows[4] = 5000;
    c.pooling[2] = 2.5;
    c.pooling[4] = 40; /* the normal approximation of the bag length */
    c.seed = seed;
    return c;
}

static int64_t scatter(int64_t k, int64_t n) /* rank k (1-based) -> row, as the law scatters it */
{
    return (int64_t)(((unsigned __int128)(uint64_t)(k - 1) * 2654435761ULL) % (uint64_t)n);
}

/* The task's drift against its definition: with rotate, sample i of a
 * stream (epoch i / every) has the undrifted sample's bags with each id of
 * the first two features moved from rank k to ((k-1 + e R) mod rows) + 1,
 * the dense features and the other bags unchanged; the held-out stream
 * drifts from its own start.  With grow, those ids are rows of the first
 * start + e R ranks. */
static void test_synth_drift(uint64_t seed)
{
    char err[512];
    ctr_synth_config c = small_task(seed), d = c;
    d.drift = EMBER_DRIFT_ROTATE, d.drift_every = 100, d.drift_rows = 37, d.drift_features = 2;
    int64_t *rank_of[2];
    for (int f = 0; f < 2; f++) {
        rank_of[f] = malloc(sizeof(int64_t) * (size_t)c.rows[f]);
        for (int64_t k = 1; k <= c.rows[f]; k++)
            rank_of[f][scatter(k, c.rows[f])] = k;
    }
    for (int eval = 0; eval < 2; eval++) {
        ctr_source *a = NULL, *b = NULL;
        CHECK(ctr_source_synth(&c, eval, 0, 1, &a, err, sizeof err) == 0);
        CHECK(ctr_source_synth(&d, eval, 0, 1, &b, err, sizeof err) == 0);
        int64_t bad = 0;
        for (int k = 0; a && b && k < 4; k++) {
            ctr_batch x, y;
            CHECK(ctr_source_next(a, 150, &x, err, sizeof err) == 150);
            int64_t *ids = malloc(sizeof(int64_t) * (size_t)(x.sparse.num_ids + 1));
            memcpy(ids, x.sparse.ids, sizeof(int64_t) * (size_t)x.sparse.num_ids);
            int64_t nids = x.sparse.num_ids;
            CHECK(ctr_source_next(b, 150, &y, err, sizeof err) == 150);
            CHECK(y.sparse.num_ids == nids);
            for (int64_t i = 0; i < 150 * c.num_dense; i++)
                bad += x.dense[i] != y.dense[i];
            int64_t o = 0;
            for (int32_t f = 0; f < c.num_sparse; f++)
                for (int32_t i = 0; i < 150; i++) {
                    int64_t e = (150 * k + i) / 100; /* the sample's epoch in its stream */
                    for (int32_t p = 0; p < y.sparse.lengths[f * 150 + i] && o < nids; p++, o++) {
                        int64_t want = f < 2 ? scatter((rank_of[f][ids[o]] - 1 + e * 37) % c.rows[f] + 1, c.rows[f])
                                             : ids[o];
                        bad += y.sparse.ids[o] != want;
                    }
                }
            free(ids);
        }
        CHECK_MSG(bad == 0, "rotate (%s stream): %lld values differ from the definition", eval ? "eval" : "train",
                  (long long)bad);
        ctr_source_destroy(a);
        ctr_source_destroy(b);
    }
    d.drift = EMBER_DRIFT_GROW, d.drift_start = 20, d.drift_rows = 90;
    ctr_source *g = NULL;
    CHECK(ctr_source_synth(&d, 0, 0, 1, &g, err, sizeof err) == 0);
    int64_t bad = 0;
    for (int k = 0; g && k < 4; k++) {
        ctr_batch y;
        CHECK(ctr_source_next(g, 150, &y, err, sizeof err) == 150);
        int64_t o = 0;
        for (int32_t f = 0; f < c.num_sparse; f++)
            for (int32_t i = 0; i < 150; i++) {
                int64_t e = (150 * k + i) / 100, support = 20 + e * 90;
                for (int32_t p = 0; p < y.sparse.lengths[f * 150 + i]; p++, o++)
                    if (f < 2)
                        bad += y.sparse.ids[o] < 0 || y.sparse.ids[o] >= c.rows[f] ||
                               (support < c.rows[f] && rank_of[f][y.sparse.ids[o]] > support);
            }
    }
    CHECK_MSG(bad == 0, "grow: %lld ids outside their epoch's ranks", (long long)bad);
    ctr_source_destroy(g);
    d.drift_features = 9; /* more than the task has */
    CHECK(ctr_source_synth(&d, 0, 0, 1, &g, err, sizeof err) != 0 && strstr(err, "drift"));
    free(rank_of[0]);
    free(rank_of[1]);
}

static void test_synth_determinism(uint64_t seed)
{
    char err[512];
    ctr_synth_config c = small_task(seed);
    ctr_source *a = NULL, *b = NULL, *d = NULL, *e = NULL;
    CHECK(ctr_source_synth(&c, 0, 0, 1, &a, err, sizeof err) == 0);
    CHECK(ctr_source_synth(&c, 0, 0, 1, &b, err, sizeof err) == 0);
    c.seed = seed + 1;
    CHECK(ctr_source_synth(&c, 0, 0, 1, &d, err, sizeof err) == 0);
    c.seed = seed;
    CHECK(ctr_source_synth(&c, 1, 0, 1, &e, err, sizeof err) == 0);
    if (!a || !b || !d || !e)
        goto done;
    samples sa, sb, sd, se;
    samples_init(&sa, c.num_dense, c.num_sparse);
    samples_init(&sb, c.num_dense, c.num_sparse);
    samples_init(&sd, c.num_dense, c.num_sparse);
    samples_init(&se, c.num_dense, c.num_sparse);
    ctr_batch bt;
    for (int k = 0; k < 3; k++) {
        CHECK(ctr_source_next(a, 300, &bt, err, sizeof err) == 300);
        CHECK(bt.first_sample == 300 * k);
        samples_add(&sa, &bt, ctr_source_teacher_prob(a));
        for (int32_t f = 0; f < c.num_sparse; f++)
            for (int32_t i = 0; i < bt.batch_size; i++)
                CHECK(bt.sparse.lengths[f * bt.batch_size + i] >= 1);
        for (int64_t i = 0; i < bt.sparse.num_ids; i++)
            CHECK(bt.sparse.ids[i] >= 0);
        /* another batch split gives the same samples */
        CHECK(ctr_source_next(b, k == 1 ? 500 : 200, &bt, err, sizeof err) > 0);
        samples_add(&sb, &bt, ctr_source_teacher_prob(b));
        CHECK(ctr_source_next(d, 300, &bt, err, sizeof err) == 300);
        samples_add(&sd, &bt, ctr_source_teacher_prob(d));
        CHECK(ctr_source_next(e, 300, &bt, err, sizeof err) == 300);
        CHECK(bt.first_sample == (int64_t)c.eval_offset + 300 * k);
        samples_add(&se, &bt, ctr_source_teacher_prob(e));
    }
    CHECK(sa.n == 900 && sb.n == 900);
    CHECK(samples_equal(&sa, 0, &sb, 0, 900, "same seed"));
    int diff_seed = 0, diff_eval = 0;
    for (int64_t i = 0; i < 900; i++) {
        diff_seed += sa.dense[i * c.num_dense] != sd.dense[i * c.num_dense] || sa.prob[i] != sd.prob[i];
        diff_eval += sa.dense[i * c.num_dense] != se.dense[i * c.num_dense] || sa.prob[i] != se.prob[i];
    }
    CHECK_MSG(diff_seed > 890, "another seed: only %d of 900 samples differ", diff_seed);
    CHECK_MSG(diff_eval > 890, "eval stream: only %d of 900 samples differ", diff_eval);
    /* ids inside their tables; the one-row table always 0; mean bag lengths */
    double len_sum[CTR_MAX_FEATURES] = {0};
    for (int64_t i = 0; i < sa.n; i++)
        for (int32_t f = 0; f < c.num_sparse; f++)
            for (int64_t k = sa.start[i * c.num_sparse + f]; k < sa.start[i * c.num_sparse + f + 1]; k++) {
                CHECK(sa.ids[k] >= 0 && sa.ids[k] < c.rows[f]);
                len_sum[f] += 1;
            }
    for (int32_t f = 0; f < c.num_sparse; f++) {
        double mean = len_sum[f] / (double)sa.n, sd_ = sqrt((c.pooling[f] - 1) / (double)sa.n);
        CHECK_MSG(fabs(mean - c.pooling[f]) <= 5 * sd_ + 1e-12, "feature %d: mean bag %g, pooling %g", (int)f,
                  mean, c.pooling[f]);
    }
    /* rewind starts the stream again */
    ctr_source_rewind(a);
    samples sr;
    samples_init(&sr, c.num_dense, c.num_sparse);
    CHECK(ctr_source_next(a, 450, &bt, err, sizeof err) == 450);
    samples_add(&sr, &bt, ctr_source_teacher_prob(a));
    CHECK(samples_equal(&sr, 0, &sa, 0, 450, "after rewind"));
    samples_free(&sa);
    samples_free(&sb);
    samples_free(&sd);
    samples_free(&se);
    samples_free(&sr);
done:
    ctr_source_destroy(a);
    ctr_source_destroy(b);
    ctr_source_destroy(d);
    ctr_source_destroy(e);
}

/* For W = 1..4, rank r's batches of m samples are samples [r*m, (r+1)*m) of
 * the global batches of G = W*m, i.e. of the W = 1 stream read in any
 * batch size. */
static void test_synth_shares(uint64_t seed)
{
    char err[512];
    ctr_synth_config c = small_task(seed ^ 0x5eed);
    const int32_t m = 23, steps = 3;
    ctr_source *g = NULL;
    CHECK(ctr_source_synth(&c, 0, 0, 1, &g, err, sizeof err) == 0);
    samples sg;
    samples_init(&sg, c.num_dense, c.num_sparse);
    if (g)
        CHECK(read_all_n(g, 4 * m * steps, 1, &sg) == 0);
    ctr_source_destroy(g);
    for (int32_t W = 1; W <= 4 && sg.n == 4 * m * steps; W++) {
        for (int32_t r = 0; r < W; r++) {
            ctr_source *s = NULL;
            CHECK(ctr_source_synth(&c, 0, r, W, &s, err, sizeof err) == 0);
            samples sr;
            samples_init(&sr, c.num_dense, c.num_sparse);
            if (s)
                CHECK(read_all_n(s, m, steps, &sr) == 0);
            for (int32_t k = 0; k < steps && sr.n == m * steps; k++) {
                char what[64];
                snprintf(what, sizeof what, "W=%d rank %d step %d", (int)W, (int)r, (int)k);
                CHECK(samples_equal(&sr, (int64_t)k * m, &sg, (int64_t)k * W * m + r * m, m, what));
            }
            CHECK(sr.n == m * steps);
            samples_free(&sr);
            ctr_source_destroy(s);
        }
    }
    samples_free(&sg);
    ctr_source *s = NULL;
    CHECK(ctr_source_synth(&c, 0, 2, 2, &s, err, sizeof err) == -1 && strstr(err, "rank 2 of world 2"));
    c.rows[1] = 0;
    CHECK(ctr_source_synth(&c, 0, 0, 1, &s, err, sizeof err) == -1 && strstr(err, "rows[1] = 0"));
    CHECK(s == NULL);
}

/* Mann-Whitney AUC (no ties expected among float probabilities). */
static int cmp_pair(const void *a, const void *b)
{
    const float *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static double auc_of(const float *score, const float *label, int64_t n)
{
    float *p = malloc((size_t)n * 2 * sizeof *p);
    for (int64_t i = 0; i < n; i++) {
        p[2 * i] = score[i];
        p[2 * i + 1] = label[i];
    }
    qsort(p, (size_t)n, 2 * sizeof *p, cmp_pair);
    double pos = 0, rank_sum = 0;
    for (int64_t i = 0; i < n; i++)
        if (p[2 * i + 1] > 0.5f) {
            pos++;
            rank_sum += (double)(i + 1);
        }
    free(p);
    double neg = (double)n - pos;
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

static void test_synth_teacher(uint64_t seed)
{
    char err[512];
    ctr_synth_config c = ctr_synth_config_default();
    c.seed = seed;
    ctr_source *s = NULL;
    CHECK(ctr_source_synth(&c, 1, 0, 1, &s, err, sizeof err) == 0);
    if (!s)
        return;
    const ctr_schema *sc = ctr_source_schema(s);
    CHECK(sc->num_dense == 13 && sc->num_sparse == 8 && !strcmp(sc->names[0], "C1"));
    samples a;
    samples_init(&a, c.num_dense, c.num_sparse);
    CHECK(read_all_n(s, 4096, 5, &a) == 0);
    double clicks = 0, prob = 0;
    int inside = 1;
    for (int64_t i = 0; i < a.n; i++) {
        clicks += a.label[i];
        prob += a.prob[i];
        inside &= a.prob[i] > 0 && a.prob[i] < 1 && (a.label[i] == 0 || a.label[i] == 1);
    }
    CHECK(inside);
    double n = (double)a.n, sd = sqrt(c.ctr_rate * (1 - c.ctr_rate) / n);
    CHECK_MSG(fabs(clicks / n - c.ctr_rate) < 5 * sd + 0.01, "click rate %g, ctr_rate %g", clicks / n, c.ctr_rate);
    CHECK_MSG(fabs(prob / n - c.ctr_rate) < 0.01, "mean teacher probability %g, ctr_rate %g", prob / n, c.ctr_rate);
    double auc = auc_of(a.prob, a.label, a.n);
    CHECK_MSG(auc > 0.8 && auc < 0.9, "teacher AUC %g outside (0.8, 0.9)", auc);
    samples_free(&a);
    ctr_source_destroy(s);
}

/* ----------------------------------------------------------------- TSV */

static const int64_t TSV_ROWS[26] = {1000, 7, 100000, 1, 50, 65536, 3, 999, 10, 10, 10, 10, 10,
                                     4096, 2,  123,    5, 6, 7,     8, 9,   1 << 20, 77, 5, 300, 11};
/* The rows the reference hashes into (rows 0: a dynamic table's whole 64-bit key). */
static const int64_t *ref_rows = TSV_ROWS;

/* A random valid line (no newline) into buf. */
static void random_line(test_rng *r, char *buf, size_t n)
{
    static const char HEX[] = "0123456789abcdefABCDEF";
    size_t k = (size_t)snprintf(buf, n, "%d", (int)test_range(r, 0, 2));
    for (int j = 0; j < 13; j++) {
        buf[k++] = '\t';
        if (test_uniform(r) < 0.2)
            continue;
        int64_t v = test_uniform(r) < 0.1 ? -test_range(r, 1, 5) : test_range(r, 0, 100000);
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", test_uniform(r) < 0.05 && v >= 0 ? "+" : "",
                              (long long)v);
    }
    for (int j = 0; j < 26; j++) {
        buf[k++] = '\t';
        if (test_uniform(r) < 0.2)
            continue;
        int len = (int)test_range(r, 1, 9);
        for (int d = 0; d < len; d++)
            buf[k++] = HEX[test_range(r, 0, (int64_t)sizeof HEX - 1)];
    }
    buf[k] = '\0';
}

/* The naive reading of one valid line: appends to a (sample-major). */
static void reference_parse(const char *line, samples *a)
{
    char copy[8192], *field[40];
    int nf = 0;
    snprintf(copy, sizeof copy, "%s", line);
    char *p = copy;
    for (;;) {
        field[nf++] = p;
        char *t = strchr(p, '\t');
        if (!t)
            break;
        *t = '\0';
        p = t + 1;
    }
    CHECK(nf == 40);
    float label = (float)atoi(field[0]), dense[13];
    for (int j = 0; j < 13; j++) {
        long long v = field[1 + j][0] ? strtoll(field[1 + j], NULL, 10) : 0;
        dense[j] = (float)log1p((double)(v > 0 ? v : 0));
    }
    int32_t lengths[26];
    int64_t ids[26];
    for (int f = 0; f < 26; f++) {
        lengths[f] = field[14 + f][0] != '\0';
        uint32_t v = (uint32_t)strtoul(field[14 + f], NULL, 16);
        unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                               (unsigned char)(v >> 24)};
        uint64_t h = XXH64(le, 4, (XXH64_hash_t)f);
        ids[f] = ref_rows[f] ? (int64_t)(h % (uint64_t)ref_rows[f]) : (int64_t)h;
    }
    /* a one-sample batch in ctr_batch layout */
    int64_t packed[26], k = 0;
    for (int f = 0; f < 26; f++)
        if (lengths[f])
            packed[k++] = ids[f];
    ctr_batch b;
    memset(&b, 0, sizeof b);
    b.batch_size = 1;
    b.num_dense = 13;
    b.num_sparse = 26;
    b.label = &label;
    b.dense = dense;
    b.sparse.batch_size = 1;
    b.sparse.num_features = 26;
    b.sparse.lengths = lengths;
    b.sparse.ids = packed;
    b.sparse.num_ids = k;
    samples_add(a, &b, NULL);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

/* n random lines, with the bad ones of `bad` (NULL-terminated) put at
 * random places; the reference gets the good ones.  Returns malloc'd text. */
static char *random_file(test_rng *r, int n, const char *const *bad, samples *ref, int *bad_line_numbers)
{
    size_t cap = (size_t)n * 600 + 100000, k = 0;
    char *text = malloc(cap), line[4096];
    int nbad = 0;
    while (bad && bad[nbad])
        nbad++;
    int next_bad = 0;
    for (int i = 0; i < n + nbad; i++) {
        int put_bad = next_bad < nbad && (test_range(r, 0, n / (nbad + 1) + 1) == 0 || n + nbad - i <= nbad - next_bad);
        if (put_bad) {
            bad_line_numbers[next_bad] = i + 1;
            k += (size_t)snprintf(text + k, cap - k, "%s\n", bad[next_bad++]);
            continue;
        }
        random_line(r, line, sizeof line);
        reference_parse(line, ref);
        k += (size_t)snprintf(text + k, cap - k, "%s%s", line, test_uniform(r) < 0.05 ? "\r\n" : "\n");
    }
    if (k > 1 && text[k - 2] != '\n' && test_uniform(r) < 0.5)
        text[--k] = '\0'; /* the last line (not an empty one) without its newline */
    return text;
}

static void test_tsv_reference(uint64_t seed, const int64_t *rows)
{
    ref_rows = rows;
    test_rng r = {seed ^ 0x7573};
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/random.tsv", tmpdir);
    samples ref;
    samples_init(&ref, 13, 26);
    int n = 700;
    char *text = random_file(&r, n, NULL, &ref, NULL);
    write_file(path, text);
    free(text);
    ctr_source *s = NULL;
    CHECK(ctr_source_tsv(path, rows, CTR_BAD_FAIL, 0, 1, &s, err, sizeof err) == 0);
    ref_rows = TSV_ROWS;
    if (!s)
        return;
    samples got;
    samples_init(&got, 13, 26);
    CHECK(read_all(s, (int32_t)test_range(&r, 1, 300), &got) == 0);
    CHECK(got.n == n && ref.n == n);
    CHECK(got.n == n && samples_equal(&got, 0, &ref, 0, n, "tsv vs reference"));
    ctr_stats st;
    ctr_source_stats(s, &st);
    CHECK(st.lines == n && st.bad_lines == 0 && st.samples == n && st.first_bad[0] == '\0');
    CHECK(ctr_source_teacher_prob(s) == NULL);
    /* rewind: the same samples again, lines not counted twice */
    ctr_source_rewind(s);
    samples again;
    samples_init(&again, 13, 26);
    CHECK(read_all(s, 64, &again) == 0);
    CHECK(again.n == n && samples_equal(&again, 0, &ref, 0, n, "tsv after rewind"));
    ctr_source_stats(s, &st);
    CHECK(st.lines == n && st.samples == 2 * n);
    samples_free(&again);
    samples_free(&got);
    samples_free(&ref);
    ctr_source_destroy(s);

    /* missing file, bad rows */
    snprintf(path, sizeof path, "%s/missing.tsv", tmpdir);
    CHECK(ctr_source_tsv(path, TSV_ROWS, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "missing.tsv: cannot open") != NULL, "%s", err);
    int64_t bad_rows[26];
    memcpy(bad_rows, TSV_ROWS, sizeof bad_rows);
    bad_rows[3] = -1;
    CHECK(ctr_source_tsv(path, bad_rows, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) == -1 && strstr(err, "C4"));
}

static char *overlong_line(void)
{
    char *l = malloc(5001);
    memset(l, '1', 5000);
    l[5000] = '\0';
    return l;
}

/* Every class of bad line: counted with its line number under skip, the
 * first one's message kept; under fail, the read fails with the message. */
static void test_tsv_bad_lines(uint64_t seed)
{
    test_rng r = {seed ^ 0xbad};
    char path[512], err[512], good[4096], line[8192];
    char *longl = overlong_line();
    const char *const bad[] = {
        "1\t2", /* wrong field count */
        NULL,   /* hex: filled below */
        NULL,   /* integer */
        NULL,   /* label */
        longl,  /* overlong */
        "",     /* empty line: 1 field */
        NULL,
    };
    const char *want[] = {
        "2 fields, expected 40 (label, I1..I13, C1..C26)",
        "field 17 (C4): \"zz12\" is not hexadecimal",
        "field 3 (I3): \"12a\" is not an integer",
        "field 0 (label): \"2\" is not 0 or 1",
        "line longer than 4096 bytes",
        "1 fields, expected 40 (label, I1..I13, C1..C26)",
    };
    char hexl[4096], intl[4096], labl[4096];
    /* a valid line with one field replaced */
    random_line(&r, good, sizeof good);
    char *f[40], copy[4096];
    snprintf(copy, sizeof copy, "%s", good);
    int nf = 0;
    for (char *p = copy;;) {
        f[nf++] = p;
        char *t = strchr(p, '\t');
        if (!t)
            break;
        *t = '\0';
        p = t + 1;
    }
    const char *repl[3][2] = {{"17", "zz12"}, {"3", "12a"}, {"0", "2"}};
    char *outs[3] = {hexl, intl, labl};
    for (int c = 0; c < 3; c++) {
        size_t k = 0;
        int at = atoi(repl[c][0]);
        for (int j = 0; j < 40; j++)
            k += (size_t)snprintf(outs[c] + k, 4096 - k, "%s%s", j ? "\t" : "", j == at ? repl[c][1] : f[j]);
    }
    const char *bad_lines[7] = {bad[0], hexl, intl, labl, bad[4], bad[5], NULL};

    /* all of them in one file, skipped */
    snprintf(path, sizeof path, "%s/bad.tsv", tmpdir);
    samples ref;
    samples_init(&ref, 13, 26);
    int at[6];
    char *text = random_file(&r, 300, bad_lines, &ref, at);
    write_file(path, text);
    free(text);
    ctr_source *s = NULL;
    CHECK(ctr_source_tsv(path, TSV_ROWS, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) == 0);
    if (s) {
        samples got;
        samples_init(&got, 13, 26);
        CHECK(read_all(s, 37, &got) == 0);
        CHECK(got.n == 300 && samples_equal(&got, 0, &ref, 0, 300, "tsv skipping bad lines"));
        ctr_stats st;
        ctr_source_stats(s, &st);
        CHECK_MSG(st.lines == 306 && st.bad_lines == 6, "lines %lld bad %lld", (long long)st.lines,
                  (long long)st.bad_lines);
        snprintf(line, sizeof line, "%s:%d: %s", path, at[0], want[0]);
        CHECK_MSG(!strcmp(st.first_bad, line), "first_bad \"%s\", want \"%s\"", st.first_bad, line);
        samples_free(&got);
        ctr_source_destroy(s);
    }
    samples_free(&ref);

    /* each alone, after two good lines, failing */
    for (int c = 0; c < 6; c++) {
        snprintf(path, sizeof path, "%s/bad%d.tsv", tmpdir, c);
        FILE *fp = fopen(path, "wb");
        fprintf(fp, "%s\n%s\n%s\n%s\n", good, good, bad_lines[c], good);
        fclose(fp);
        CHECK(ctr_source_tsv(path, TSV_ROWS, CTR_BAD_FAIL, 0, 1, &s, err, sizeof err) == 0);
        if (!s)
            continue;
        ctr_batch b;
        snprintf(line, sizeof line, "%s:3: %s", path, want[c]);
        CHECK(ctr_source_next(s, 10, &b, err, sizeof err) == -1);
        CHECK_MSG(!strcmp(err, line), "got \"%s\", want \"%s\"", err, line);
        err[0] = '\0';
        CHECK(ctr_source_next(s, 10, &b, err, sizeof err) == -1 && !strcmp(err, line)); /* it sticks */
        ctr_stats st;
        ctr_source_stats(s, &st);
        CHECK(st.bad_lines == 1 && !strcmp(st.first_bad, line));
        ctr_source_destroy(s);
        /* skip: 3 samples, 4 lines */
        CHECK(ctr_source_tsv(path, TSV_ROWS, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) == 0);
        if (!s)
            continue;
        CHECK(ctr_source_next(s, 10, &b, err, sizeof err) == 3);
        CHECK(b.first_sample == 0);
        CHECK(ctr_source_next(s, 10, &b, err, sizeof err) == 0);
        ctr_source_stats(s, &st);
        CHECK(st.lines == 4 && st.bad_lines == 1 && st.samples == 3);
        ctr_source_destroy(s);
    }
    free(longl);
}

/* Rank shares of a file source tile it: for W = 1..4 the shares, in rank
 * order, are the W = 1 samples, and rank r's share is lines [r*N/W, ...). */
static void test_file_shares(const char *path, int binary, const samples *all, int64_t lines)
{
    char err[512];
    for (int32_t W = 1; W <= 4; W++) {
        int64_t at = 0;
        for (int32_t r = 0; r < W; r++) {
            ctr_source *s = NULL;
            int rc = binary ? ctr_source_binary(path, r, W, &s, err, sizeof err)
                            : ctr_source_tsv(path, TSV_ROWS, CTR_BAD_SKIP, r, W, &s, err, sizeof err);
            CHECK_MSG(rc == 0, "%s", err);
            if (!s)
                continue;
            samples got;
            samples_init(&got, 13, 26);
            CHECK(read_all(s, 1000, &got) == 0);
            char what[64];
            snprintf(what, sizeof what, "%s W=%d rank %d", binary ? "binary" : "tsv", (int)W, (int)r);
            CHECK(at + got.n <= all->n && samples_equal(&got, 0, all, at, got.n, what));
            ctr_stats st;
            ctr_source_stats(s, &st);
            if (!binary) /* lines [r*N/W, (r+1)*N/W) */
                CHECK(st.lines == (r + 1) * lines / W - r * lines / W);
            else
                CHECK(got.n == (r + 1) * all->n / W - r * all->n / W);
            at += got.n;
            samples_free(&got);
            ctr_source_destroy(s);
        }
        CHECK_MSG(at == all->n, "W=%d: shares hold %lld of %lld samples", (int)W, (long long)at, (long long)all->n);
    }
}

/* ---------------------------------------------------------------- binary */

/* 0 when the file opens and reads to the end without an error. */
static int reads_cleanly(const char *path, char *err, size_t errlen)
{
    ctr_source *s = NULL;
    if (ctr_source_binary(path, 0, 1, &s, err, errlen))
        return -1;
    ctr_batch b;
    int64_t n;
    while ((n = ctr_source_next(s, 999, &b, err, errlen)) > 0)
        ;
    ctr_source_destroy(s);
    return n < 0 ? -1 : 0;
}

static void test_binary(uint64_t seed)
{
    test_rng r = {seed ^ 0xb1};
    char tsv[512], bin[512], bad[512], err[512];
    snprintf(tsv, sizeof tsv, "%s/conv.tsv", tmpdir);
    snprintf(bin, sizeof bin, "%s/conv.bin", tmpdir);
    snprintf(bad, sizeof bad, "%s/corrupt.bin", tmpdir);
    samples ref;
    samples_init(&ref, 13, 26);
    /* wrong field count; a label of 2 on an otherwise empty line */
    const char *const bad_lines[] = {"0\t1\tx", "2\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t"
                                                  "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t",
                                     NULL};
    int at[2];
    const int n = 9000; /* three blocks of 4096 */
    char *text = random_file(&r, n, bad_lines, &ref, at);
    write_file(tsv, text);
    free(text);

    /* the TSV reader's samples (checked against the reference above) */
    ctr_source *s = NULL;
    samples from_tsv;
    samples_init(&from_tsv, 13, 26);
    CHECK(ctr_source_tsv(tsv, TSV_ROWS, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) == 0);
    if (s)
        CHECK(read_all(s, 512, &from_tsv) == 0);
    ctr_source_destroy(s);
    CHECK(from_tsv.n == n && samples_equal(&from_tsv, 0, &ref, 0, n, "tsv (9000 lines)"));

    ctr_stats st;
    CHECK(ctr_convert_tsv(tsv, bin, TSV_ROWS, CTR_BAD_FAIL, &st, err, sizeof err) == -1);
    CHECK(access(bin, F_OK) != 0); /* nothing written on failure, no .tmp left */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", bin);
    CHECK(access(tmp, F_OK) != 0);
    CHECK_MSG(ctr_convert_tsv(tsv, bin, TSV_ROWS, CTR_BAD_SKIP, &st, err, sizeof err) == 0, "%s", err);
    CHECK(st.samples == n && st.lines == n + 2 && st.bad_lines == 2);
    CHECK(access(tmp, F_OK) != 0);

    CHECK_MSG(ctr_source_binary(bin, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    if (s) {
        const ctr_schema *sc = ctr_source_schema(s);
        CHECK(sc->num_dense == 13 && sc->num_sparse == 26 && sc->rows[21] == TSV_ROWS[21] &&
              !strcmp(sc->names[25], "C26"));
        samples got;
        samples_init(&got, 13, 26);
        CHECK(read_all(s, (int32_t)test_range(&r, 1, 5000), &got) == 0);
        CHECK(got.n == n && samples_equal(&got, 0, &from_tsv, 0, n, "binary vs tsv"));
        ctr_source_rewind(s);
        ctr_batch b;
        CHECK(ctr_source_next(s, 5, &b, err, sizeof err) == 5 && b.first_sample == 0);
        samples_free(&got);
        ctr_source_destroy(s);
    }
    test_file_shares(bin, 1, &from_tsv, n);
    test_file_shares(tsv, 0, &from_tsv, n + 2);

    /* corruption: every flipped byte and every truncation is an error */
    long size = 0;
    unsigned char *orig = test_read_file(bin, &size);
    CHECK(orig != NULL && size > 1000);
    CHECK(orig && orig[8] == 1); /* no feature with rows 0: version 1, as ember always wrote */
    CHECK(reads_cleanly(bin, err, sizeof err) == 0);
    for (int trial = 0; orig && trial < 60; trial++) {
        long pos = trial < 8 ? trial * 9 : trial < 12 ? size - 1 - (trial - 8) * 5 : (long)test_range(&r, 0, size);
        unsigned char *c = malloc((size_t)size);
        memcpy(c, orig, (size_t)size);
        c[pos] ^= (unsigned char)(1u << test_range(&r, 0, 8));
        FILE *fp = fopen(bad, "wb");
        fwrite(c, 1, (size_t)size, fp);
        fclose(fp);
        err[0] = '\0';
        CHECK_MSG(reads_cleanly(bad, err, sizeof err) == -1, "flipped byte %ld of %ld read cleanly", pos, size);
        CHECK_MSG(strstr(err, "corrupt.bin") != NULL, "message does not name the file: %s", err);
        free(c);
    }
    const long cuts[] = {0, 7, 8, 60, 1097, 1104, 5000, size / 2, size - 9, size - 1};
    for (int k = 0; orig && k < (int)(sizeof cuts / sizeof cuts[0]); k++) {
        FILE *fp = fopen(bad, "wb");
        fwrite(orig, 1, (size_t)cuts[k], fp);
        fclose(fp);
        CHECK_MSG(reads_cleanly(bad, err, sizeof err) == -1, "cut at %ld of %ld read cleanly", cuts[k], size);
    }
    /* a message names the place */
    if (orig) {
        FILE *fp = fopen(bad, "wb");
        fwrite(orig, 1, (size_t)size, fp);
        fclose(fp);
        fp = fopen(bad, "r+b");
        fseek(fp, 1104 + 20, SEEK_SET); /* inside block 0 */
        fputc(orig[1104 + 20] ^ 0xff, fp);
        fclose(fp);
        CHECK(reads_cleanly(bad, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "block 0 (byte 1104; samples 0..4095): checksum mismatch") != NULL, "%s", err);
    }
    snprintf(bad, sizeof bad, "%s/none.bin", tmpdir);
    CHECK(ctr_source_binary(bad, 0, 1, &s, err, sizeof err) == -1 && strstr(err, "none.bin: cannot open"));
    free(orig);
    samples_free(&from_tsv);
    samples_free(&ref);
}

/* Each class of damage to a binary file gets its own message (docs/
 * RELIABILITY.md), and an empty TSV file is a file of no samples. */
static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void test_binary_messages(void)
{
    char tsv[512], bin[512], bad[512], err[512], line[1024], text[2100];
    snprintf(tsv, sizeof tsv, "%s/msg.tsv", tmpdir);
    snprintf(bin, sizeof bin, "%s/msg.bin", tmpdir);
    snprintf(bad, sizeof bad, "%s/msg-bad.bin", tmpdir);
    /* two samples; C1 of the first is its first id in the block */
    size_t k = (size_t)snprintf(line, sizeof line, "1");
    for (int i = 0; i < 13; i++)
        k += (size_t)snprintf(line + k, sizeof line - k, "\t%d", i);
    for (int f = 0; f < 26; f++)
        k += (size_t)snprintf(line + k, sizeof line - k, "\t%x", 0x100 + f);
    snprintf(text, sizeof text, "%s\n%s\n", line, line);
    write_file(tsv, text);
    ctr_stats st;
    CHECK_MSG(ctr_convert_tsv(tsv, bin, TSV_ROWS, CTR_BAD_FAIL, &st, err, sizeof err) == 0, "%s", err);
    long size = 0;
    unsigned char *orig = test_read_file(bin, &size), *c = malloc((size_t)size);
    if (!orig || !c || size < 1200) {
        CHECK(!"msg.bin written");
        free(orig);
        free(c);
        return;
    }
    struct {
        const char *what, *want;
    } cases[] = {
        {"magic", "msg-bad.bin: byte 0: not an ember CTR file (bad magic)"},
        {"version", "msg-bad.bin: byte 8: version 4, this reader reads versions 1 to 3 (written by a newer ember"},
        {"truncated", "msg-bad.bin: byte 48: index at byte"},
        {"header checksum", "msg-bad.bin: byte 1096: header checksum mismatch"},
        {"block checksum", "msg-bad.bin: block 0 (byte 1104; samples 0..1): checksum mismatch"},
        {"id >= rows", "msg-bad.bin: sample 0 (block 0, byte 1330): C1 id 1000 outside [0, 1000)"},
        {"keys in version 1", "msg-bad.bin: byte 64: feature 1 (C2) has rows 0 (64-bit keys), which needs format "
                              "version 2; the file says version 1"},
        {"bag past the ids", "msg-bad.bin: sample 1 (block 0, byte 1328): C26: a bag of 2 ids runs past the block's "
                             "52 ids"},
    };
    const int64_t H = 56 + 40 * 26 + 8, ix = (int64_t)le64(orig + 48);
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        long n = size;
        memcpy(c, orig, (size_t)size);
        switch (i) {
        case 0: c[0] ^= 0xff; break;
        case 1: c[8] = 4; break;
        case 2: n = size - 5; break;
        case 3: c[60] ^= 1; break;
        case 4: c[H + 20] ^= 0x40; break;
        case 5: /* the first id (C1 of sample 0) set to rows, the block's checksum made right */
            for (int b = 0; b < 4; b++) /* u32 at 1104 + 16 + 2 labels + 104 dense + 104 lengths */
                c[1330 + b] = (unsigned char)(1000u >> (8 * b));
            put_le64(c + ix - 8, XXH64(c + H, (size_t)(ix - 8 - H), 0));
            break;
        case 6: /* C2 with rows 0 in a version 1 header, the header's checksum made right */
            put_le64(c + 56 + 8, 0);
            put_le64(c + H - 8, XXH64(c, (size_t)(H - 8), 0));
            break;
        case 7: /* the last bag (C26 of sample 1, u16 at 1104 + 16 + 2 + 104 + 2 * 51) says 2 ids */
            c[1328] = 2;
            put_le64(c + ix - 8, XXH64(c + H, (size_t)(ix - 8 - H), 0));
            break;
        }
        test_write_file(bad, c, n);
        err[0] = '\0';
        CHECK_MSG(reads_cleanly(bad, err, sizeof err) == -1 && strstr(err, cases[i].want) != NULL,
                  "%s: got \"%s\", want \"%s\"", cases[i].what, err, cases[i].want);
    }
    free(orig);
    free(c);

    /* an empty TSV file: it opens, and holds no samples and no lines */
    write_file(tsv, "");
    ctr_source *s = NULL;
    CHECK_MSG(ctr_source_tsv(tsv, TSV_ROWS, CTR_BAD_FAIL, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    if (s) {
        ctr_batch b;
        CHECK(ctr_source_next(s, 8, &b, err, sizeof err) == 0);
        ctr_source_stats(s, &st);
        CHECK(st.lines == 0 && st.samples == 0 && st.bad_lines == 0);
        ctr_source_destroy(s);
    }
}

/* Integers at and past int64's limits: 20 digits used to wrap around in the
 * parser and pass as a wrong number (found reading ctr_tsv.c for the fuzzing
 * work); now anything outside [INT64_MIN, INT64_MAX] is "not an integer",
 * and INT64_MIN itself is read. */
static void test_tsv_integer_limits(void)
{
    static const struct {
        const char *value;
        int ok;
    } cases[] = {
        {"9223372036854775807", 1}, {"-9223372036854775807", 1}, {"-9223372036854775808", 1}, {"+0", 1},
        {"9223372036854775808", 0}, {"-9223372036854775809", 0}, {"20000000000000000000", 0}, {"99999999999999999999", 0},
        {"18446744073709551616", 0}, {"-", 0}, {"1-", 0},
        /* a point and zeros (docs/ctr-format.md, docs/data.md's int rule): the integer, below 2^53 */
        {"-000.00", 1}, {"84.0", 1}, {"-3.000", 1}, {"+7.0", 1}, {"9007199254740991.0", 1},
        {"-9007199254740991.00", 1}, {"9007199254740992.0", 0}, {"-9007199254740992.0", 0}, {"84.5", 0},
        {"84.", 0}, {".0", 0}, {"-.0", 0}, {"1e2", 0}, {"84.0.0", 0}, {"84.0 ", 0},
    };
    char path[512], err[512], line[1024];
    snprintf(path, sizeof path, "%s/ints.tsv", tmpdir);
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        size_t k = (size_t)snprintf(line, sizeof line, "0\t%s", cases[i].value);
        for (int j = 1; j < 13; j++)
            k += (size_t)snprintf(line + k, sizeof line - k, "\t1");
        for (int f = 0; f < 26; f++)
            k += (size_t)snprintf(line + k, sizeof line - k, "\t");
        snprintf(line + k, sizeof line - k, "\n");
        write_file(path, line);
        ctr_source *s = NULL;
        CHECK_MSG(ctr_source_tsv(path, TSV_ROWS, CTR_BAD_FAIL, 0, 1, &s, err, sizeof err) == 0, "%s", err);
        if (!s)
            continue;
        ctr_batch b;
        err[0] = '\0';
        int64_t n = ctr_source_next(s, 4, &b, err, sizeof err);
        if (cases[i].ok) {
            double want = strtoll(cases[i].value, NULL, 10) > 0 ? log1p((double)strtoll(cases[i].value, NULL, 10)) : 0;
            CHECK_MSG(n == 1 && b.dense[0] == (float)want, "I1 = %s: %lld samples, %s", cases[i].value,
                      (long long)n, err);
        } else {
            CHECK_MSG(n == -1 && strstr(err, "ints.tsv:1: field 1 (I1):") && strstr(err, "is not an integer"),
                      "I1 = %s: %lld samples, message \"%s\"", cases[i].value, (long long)n, err);
        }
        ctr_source_destroy(s);
    }
}

/* The line fuzz_tsv found (tests/fuzz/corpus/fuzz_tsv/regress-int-point-zeros):
 * I1 = "-000.00" is an integer with a point and zeros, read as 0, so the line
 * is a sample, as docs/ctr-format.md now says; the fuzz target's reference
 * parser had refused it.  With anything but zeros after the point the line
 * is bad, and the message names the file, the line and the field. */
static void test_tsv_int_point_zeros(void)
{
    static const char line[] = "1\t-000.00\t1\t2\t3\t4\t5\t7\t\t\t\t\t\t\t"
                               "\t\t\t\t\t\t\t\t\t\ta1b2\t\tffffffff\t\t\t\t\t\t\t\t\t\t\t\t\t";
    char path[512], err[512], text[1024], want[600];
    snprintf(path, sizeof path, "%s/point.tsv", tmpdir);
    snprintf(text, sizeof text, "%s\n", line);
    write_file(path, text);
    samples ref, got;
    samples_init(&ref, 13, 26);
    samples_init(&got, 13, 26);
    reference_parse(line, &ref); /* strtoll: "-000.00" is 0 */
    ctr_source *s = NULL;
    CHECK_MSG(ctr_source_tsv(path, TSV_ROWS, CTR_BAD_FAIL, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    if (s) {
        CHECK(read_all(s, 4, &got) == 0);
        CHECK_MSG(got.n == 1 && samples_equal(&got, 0, &ref, 0, 1, "I1 = -000.00"), "%lld samples",
                  (long long)got.n);
        CHECK(got.n == 1 && got.label[0] == 1.0f && got.dense[0] == 0.0f && got.dense[1] == (float)log1p(1.0));
        ctr_stats st;
        ctr_source_stats(s, &st);
        CHECK(st.lines == 1 && st.bad_lines == 0 && st.samples == 1);
        ctr_source_destroy(s);
    }
    samples_free(&ref);
    samples_free(&got);

    /* the same line, I1 = "-000.01" and then "84.": line 2 and 3 are bad, named */
    static const char *const bad[] = {"-000.01", "84."};
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text, "%s\n1\t%s%s\n", line, bad[i], line + strlen("1\t-000.00"));
        write_file(path, text);
        CHECK_MSG(ctr_source_tsv(path, TSV_ROWS, CTR_BAD_FAIL, 0, 1, &s, err, sizeof err) == 0, "%s", err);
        if (!s)
            continue;
        ctr_batch b;
        err[0] = '\0';
        CHECK(ctr_source_next(s, 1, &b, err, sizeof err) == 1);
        CHECK(ctr_source_next(s, 1, &b, err, sizeof err) == -1);
        snprintf(want, sizeof want, "%s:2: field 1 (I1): \"%s\" is not an integer", path, bad[i]);
        CHECK_MSG(!strcmp(err, want), "got \"%s\", want \"%s\"", err, want);
        ctr_source_destroy(s);
    }
}

/* ------------------------------------------------------------ positions */

typedef int (*open_fn)(const char *path, int32_t rank, int32_t world, ctr_source **out);

static const ctr_synth_config *pos_task;
static int open_synth(const char *path, int32_t rank, int32_t world, ctr_source **out)
{
    char err[512];
    (void)path;
    return ctr_source_synth(pos_task, 0, rank, world, out, err, sizeof err);
}
static int open_tsv(const char *path, int32_t rank, int32_t world, ctr_source **out)
{
    char err[512];
    return ctr_source_tsv(path, TSV_ROWS, CTR_BAD_SKIP, rank, world, out, err, sizeof err);
}
static int open_bin(const char *path, int32_t rank, int32_t world, ctr_source **out)
{
    char err[512];
    return ctr_source_binary(path, rank, world, out, err, sizeof err);
}

/* `steps` batches as `ember train` reads them: a share that ran out is
 * rewound (another epoch). */
static int read_epochs(ctr_source *s, int32_t max, int steps, samples *out)
{
    char err[512];
    ctr_batch b;
    for (int k = 0; k < steps; k++) {
        int64_t n = ctr_source_next(s, max, &b, err, sizeof err);
        if (n == 0) {
            ctr_source_rewind(s);
            n = ctr_source_next(s, max, &b, err, sizeof err);
        }
        if (n < 0) {
            fprintf(stderr, "read_epochs: %s\n", err);
            return -1;
        }
        samples_add(out, &b, ctr_source_teacher_prob(s));
    }
    return 0;
}

/* A source told after k batches, then seeked to by a fresh one, returns the
 * same batches as the first going on (epochs included), for several cut
 * points, batch sizes and rank shares. */
static void test_positions_of(const char *what, open_fn op, const char *path, int32_t D, int32_t S)
{
    static const struct { int32_t world, rank, max; int cut, more; } CASES[] = {
        {1, 0, 700, 3, 25}, {1, 0, 4096, 1, 4}, {3, 2, 500, 5, 9}, {2, 0, 333, 0, 7}, {1, 0, 128, 70, 3},
    };
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        ctr_source *a = NULL, *b = NULL;
        char err[512], msg[128];
        snprintf(msg, sizeof msg, "%s: world %d rank %d, %d after %d batches of %d", what, (int)CASES[c].world,
                 (int)CASES[c].rank, CASES[c].more, CASES[c].cut, (int)CASES[c].max);
        CHECK(op(path, CASES[c].rank, CASES[c].world, &a) == 0 && op(path, CASES[c].rank, CASES[c].world, &b) == 0);
        if (!a || !b) {
            ctr_source_destroy(a);
            ctr_source_destroy(b);
            continue;
        }
        samples skip, x, y;
        samples_init(&skip, D, S);
        samples_init(&x, D, S);
        samples_init(&y, D, S);
        ctr_position pa, pb, fresh;
        CHECK(ctr_source_tell(b, &fresh) == 0 && fresh.epochs == 0 && fresh.next == fresh.begin);
        CHECK(read_epochs(a, CASES[c].max, CASES[c].cut, &skip) == 0);
        CHECK(ctr_source_tell(a, &pa) == 0);
        CHECK_MSG(ctr_source_seek(b, &pa, err, sizeof err) == 0, "%s: %s", msg, err);
        CHECK(read_epochs(a, CASES[c].max, CASES[c].more, &x) == 0);
        CHECK(read_epochs(b, CASES[c].max, CASES[c].more, &y) == 0);
        CHECK_MSG(x.n == y.n && x.n > 0 && samples_equal(&x, 0, &y, 0, x.n, msg), "%s", msg);
        CHECK(ctr_source_tell(a, &pa) == 0 && ctr_source_tell(b, &pb) == 0);
        CHECK_MSG(pa.next == pb.next && pa.epochs == pb.epochs && pa.begin == pb.begin && pa.end == pb.end, "%s",
                  msg);
        samples_free(&skip);
        samples_free(&x);
        samples_free(&y);
        ctr_source_destroy(a);
        ctr_source_destroy(b);
    }
    /* files: a position outside this rank's share fails, naming the file */
    if (path) {
        ctr_source *s = NULL;
        char err[512] = "";
        CHECK(op(path, 0, 2, &s) == 0);
        ctr_position p;
        CHECK(s && ctr_source_tell(s, &p) == 0);
        if (s) {
            p.next = p.end + 1;
            CHECK(ctr_source_seek(s, &p, err, sizeof err) == -1 && strstr(err, path) && strstr(err, "outside"));
        }
        ctr_source_destroy(s);
    }
}

static void test_positions(uint64_t seed)
{
    ctr_synth_config c = small_task(seed);
    pos_task = &c;
    char tsv[512], bin[512];
    snprintf(tsv, sizeof tsv, "%s/conv.tsv", tmpdir); /* written by test_binary: 9002 lines */
    snprintf(bin, sizeof bin, "%s/conv.bin", tmpdir);
    test_positions_of("synthetic", open_synth, NULL, c.num_dense, c.num_sparse);
    test_positions_of("tsv", open_tsv, tsv, 13, 26);
    test_positions_of("binary", open_bin, bin, 13, 26);
}

/* ------------------------------------------------- binary, 64-bit keys */

/* Rows mixing keyed features (rows 0: a dynamic table's whole 64-bit
 * keys) and hashed ones, at least one of each. */
static void random_keyed_rows(test_rng *r, int64_t rows[26])
{
    for (int f = 0; f < 26; f++)
        rows[f] = test_uniform(r) < 0.4 ? 0 : TSV_ROWS[f];
    rows[test_range(r, 0, 26)] = 0;
    int f = (int)test_range(r, 0, 26);
    rows[f] = TSV_ROWS[f];
}

/* The checksums of a file laid out as docs/ctr-format.md says, made right
 * after an edit: every block's (by the index), the index's, the header's. */
static void fix_checksums(unsigned char *c, long size)
{
    const int64_t H = 56 + 40 * 26 + 8, ix = (int64_t)le64(c + 48), nb = (int64_t)le64(c + 40);
    for (int64_t b = 0; b < nb && ix + 8 * nb + 8 == size; b++) {
        int64_t off = (int64_t)le64(c + ix + 8 * b), stop = b + 1 < nb ? (int64_t)le64(c + ix + 8 * b + 8) : ix;
        put_le64(c + stop - 8, XXH64(c + off, (size_t)(stop - off - 8), 0));
    }
    if (ix + 8 * nb + 8 == size)
        put_le64(c + ix + 8 * nb, XXH64(c + ix, (size_t)(8 * nb), 0));
    put_le64(c + H - 8, XXH64(c, (size_t)(H - 8), 0));
}

/* TSV -> binary -> samples equals TSV -> samples and the reference parser,
 * for a random mix of keyed and hashed features; the file is version 2,
 * its shares tile it and positions resume it. */
static void test_binary_keys(uint64_t seed)
{
    test_rng r = {seed ^ 0x6b657973};
    char tsv[512], bin[512], err[512];
    snprintf(tsv, sizeof tsv, "%s/keys.tsv", tmpdir);
    snprintf(bin, sizeof bin, "%s/keys.bin", tmpdir);
    int64_t rows[26];
    random_keyed_rows(&r, rows);
    samples ref;
    samples_init(&ref, 13, 26);
    const char *const bad_lines[] = {"1\t2\t3", NULL};
    int at[1];
    const int n = 4096 + (int)test_range(&r, 300, 3000); /* two blocks */
    ref_rows = rows;
    char *text = random_file(&r, n, bad_lines, &ref, at);
    ref_rows = TSV_ROWS;
    write_file(tsv, text);
    free(text);

    ctr_source *s = NULL;
    samples from_tsv;
    samples_init(&from_tsv, 13, 26);
    CHECK_MSG(ctr_source_tsv(tsv, rows, CTR_BAD_SKIP, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    if (s)
        CHECK(read_all(s, (int32_t)test_range(&r, 1, 700), &from_tsv) == 0);
    ctr_source_destroy(s);
    CHECK(from_tsv.n == n && samples_equal(&from_tsv, 0, &ref, 0, n, "keyed tsv vs reference"));

    ctr_stats st;
    CHECK_MSG(ctr_convert_tsv(tsv, bin, rows, CTR_BAD_SKIP, &st, err, sizeof err) == 0, "%s", err);
    CHECK(st.samples == n && st.bad_lines == 1);
    long size = 0;
    unsigned char *head = test_read_file(bin, &size);
    CHECK(head && size > 1104 && head[8] == 2);
    free(head);
    CHECK_MSG(ctr_source_binary(bin, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    if (s) {
        const ctr_schema *sc = ctr_source_schema(s);
        for (int f = 0; f < 26; f++)
            CHECK_MSG(sc->rows[f] == rows[f], "C%d: rows %lld, want %lld", f + 1, (long long)sc->rows[f],
                      (long long)rows[f]);
        samples got;
        samples_init(&got, 13, 26);
        CHECK(read_all(s, (int32_t)test_range(&r, 1, 5000), &got) == 0);
        CHECK(got.n == n && samples_equal(&got, 0, &ref, 0, n, "keyed binary vs reference"));
        samples_free(&got);
        ctr_source_destroy(s);
    }
    test_file_shares(bin, 1, &ref, n);
    test_positions_of("binary with keys", open_bin, bin, 13, 26);
    samples_free(&from_tsv);
    samples_free(&ref);

    /* every feature keyed: blocks without row ids */
    int64_t all_keys[26] = {0};
    samples_init(&ref, 13, 26);
    ref_rows = all_keys;
    text = random_file(&r, 300, NULL, &ref, NULL);
    ref_rows = TSV_ROWS;
    write_file(tsv, text);
    free(text);
    CHECK_MSG(ctr_convert_tsv(tsv, bin, all_keys, CTR_BAD_FAIL, &st, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(ctr_source_binary(bin, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    if (s) {
        samples got;
        samples_init(&got, 13, 26);
        CHECK(read_all(s, 77, &got) == 0);
        CHECK(got.n == 300 && samples_equal(&got, 0, &ref, 0, 300, "all keyed binary vs reference"));
        samples_free(&got);
        ctr_source_destroy(s);
    }
    samples_free(&ref);
}

/* A damaged version 2 file: what the reader says, naming the file, the
 * block or sample, and the feature where one is at fault. */
static int fails_with(const char *path, const unsigned char *c, long n, const char *const *want, const char *what)
{
    char err[512] = "";
    test_write_file(path, c, n);
    int rc = reads_cleanly(path, err, sizeof err);
    CHECK_MSG(rc == -1, "%s: read cleanly", what);
    for (int i = 0; want[i]; i++)
        CHECK_MSG(strstr(err, want[i]) != NULL, "%s: \"%s\" does not say \"%s\"", what, err, want[i]);
    return rc;
}

/* The first feature of rows (26) that has (keyed) or lacks (!keyed) rows 0. */
static int first_feature(const int64_t *rows, int keyed)
{
    for (int f = 0; f < 26; f++)
        if ((rows[f] == 0) == keyed)
            return f;
    return -1;
}

static void test_binary_keys_errors(uint64_t seed)
{
    test_rng r = {seed ^ 0xe7705};
    char tsv[512], bin[512], bad[512], err[512], want[3][160];
    snprintf(tsv, sizeof tsv, "%s/kerr.tsv", tmpdir);
    snprintf(bin, sizeof bin, "%s/kerr.bin", tmpdir);
    snprintf(bad, sizeof bad, "%s/kerr-bad.bin", tmpdir);
    int64_t rows[26];
    random_keyed_rows(&r, rows);
    samples ref;
    samples_init(&ref, 13, 26);
    char *text = random_file(&r, 5000, NULL, &ref, NULL);
    samples_free(&ref);
    write_file(tsv, text);
    free(text);
    ctr_stats st;
    CHECK_MSG(ctr_convert_tsv(tsv, bin, rows, CTR_BAD_FAIL, &st, err, sizeof err) == 0, "%s", err);
    long size = 0;
    unsigned char *orig = test_read_file(bin, &size), *c = malloc((size_t)size);
    if (!orig || !c || size < 4000) {
        CHECK(!"kerr.bin written");
        free(orig);
        free(c);
        return;
    }
    const int64_t H = 56 + 40 * 26 + 8, ix = (int64_t)le64(orig + 48), off1 = (int64_t)le64(orig + ix + 8);
    CHECK(le64(orig + 40) == 2 && le64(orig + ix) == (uint64_t)H);
    const char *const names_file[] = {"kerr-bad.bin: ", NULL};

    /* a truncated block: 8 bytes of block 1's keys lost, offsets and checksums made right */
    memcpy(c, orig, (size_t)size);
    memmove(c + ix - 16, c + ix - 8, (size_t)(size - ix + 8));
    put_le64(c + 48, (uint64_t)(ix - 8));
    fix_checksums(c, size - 8);
    snprintf(want[0], sizeof want[0], "kerr-bad.bin: block 1 (byte %lld; samples 4096..4999): ", (long long)off1);
    fails_with(bad, c, size - 8, (const char *const[]){want[0], "truncated block", NULL}, "truncated block");

    /* a file cut inside block 1: open names the block the file ends in */
    snprintf(want[0], sizeof want[0], "block 1 (byte %lld; samples 4096..4999) is cut short", (long long)off1);
    fails_with(bad, orig, (long)off1 + 100, (const char *const[]){names_file[0], want[0], "100 bytes into it", NULL},
               "cut file");

    /* a bad checksum in block 1: the batches before it are read; the one
     * that reaches it fails and the position stays after the last good one */
    memcpy(c, orig, (size_t)size);
    c[ix - 20] ^= 0x10; /* a key or row id of block 1's last sample */
    test_write_file(bad, c, size);
    ctr_source *s = NULL;
    CHECK_MSG(ctr_source_binary(bad, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    if (s) {
        ctr_batch b;
        for (int k = 0; k < 4; k++)
            CHECK(ctr_source_next(s, 1000, &b, err, sizeof err) == 1000);
        snprintf(want[0], sizeof want[0], "kerr-bad.bin: block 1 (byte %lld; samples 4096..4999): checksum mismatch",
                 (long long)off1);
        CHECK(ctr_source_next(s, 1000, &b, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, want[0]) != NULL, "bad checksum: \"%s\"", err);
        ctr_position pos;
        CHECK(ctr_source_tell(s, &pos) == 0 && pos.next == 4000); /* nothing half-done */
        CHECK(ctr_source_next(s, 1000, &b, err, sizeof err) == -1 && strstr(err, want[0])); /* it sticks */
        ctr_source_destroy(s);
    }

    /* a keyed feature in a file read as row numbers: a version 1 header */
    int kf = first_feature(rows, 1), rf = first_feature(rows, 0);
    memcpy(c, orig, (size_t)size);
    c[8] = 1;
    fix_checksums(c, size);
    snprintf(want[0], sizeof want[0], "kerr-bad.bin: byte %d: feature %d (C%d) has rows 0 (64-bit keys), which needs "
             "format version 2; the file says version 1", 56 + 8 * kf, kf, kf + 1);
    fails_with(bad, c, size, (const char *const[]){want[0], NULL}, "keys in version 1");

    /* ... and a version 2 header whose keyed feature says rows (or whose
     * row feature says keys): the blocks' key masks disagree with it */
    for (int k = 0; k < 2; k++) {
        int f = k == 0 ? kf : rf;
        memcpy(c, orig, (size_t)size);
        put_le64(c + 56 + 8 * f, k == 0 ? 1u << 20 : 0);
        fix_checksums(c, size);
        if (k == 0)
            snprintf(want[0], sizeof want[0], "kerr-bad.bin: block 0 (byte %lld; samples 0..4095): C%d carries 64-bit "
                     "keys in this block, but the header gives it 1048576 rows", (long long)H, f + 1);
        else
            snprintf(want[0], sizeof want[0], "kerr-bad.bin: block 0 (byte %lld; samples 0..4095): C%d carries row ids "
                     "in this block, but the header gives it rows 0 (64-bit keys)", (long long)H, f + 1);
        fails_with(bad, c, size, (const char *const[]){want[0], NULL}, k == 0 ? "keys read as rows" : "rows read as keys");
    }
    free(orig);
    free(c);
}

/* ------------------------------------------------------------- shuffle */

/* Reads one epoch (or until n samples) of s in random batch sizes: the file
 * line of every sample, from I1 = its line number. */
static int64_t read_lines(test_rng *r, ctr_source *s, int64_t *out, int64_t n)
{
    char err[512];
    int64_t k = 0;
    while (k < n) {
        ctr_batch b;
        int32_t want = (int32_t)test_range(r, 1, 3000);
        if (want > n - k)
            want = (int32_t)(n - k);
        int64_t got = ctr_source_next(s, want, &b, err, sizeof err);
        CHECK_MSG(got >= 0, "%s", err);
        if (got <= 0)
            break;
        for (int64_t i = 0; i < got; i++)
            out[k + i] = (int64_t)llround(expm1((double)b.dense[i * 13]));
        k += got;
    }
    return k;
}

/* A plain text file shuffles as its binary conversion does, line for
 * sample (no bad lines: line k is sample k): every epoch, from a told
 * position, at every rank; a gzip one is refused by name. */
static void test_shuffle_text(test_rng *r, const char *tsv, const char *bin, int64_t L, int64_t *a, int64_t *b)
{
    char err[512], gz[600];
    for (int32_t W = 1; W <= 3; W += 2)
        for (int32_t rank = 0; rank < W; rank++) {
            ctr_source *sb = NULL, *st = NULL, *again = NULL;
            CHECK_MSG(ctr_source_binary(bin, rank, W, &sb, err, sizeof err) == 0, "%s", err);
            CHECK_MSG(ctr_source_tsv(tsv, TSV_ROWS, CTR_BAD_FAIL, rank, W, &st, err, sizeof err) == 0, "%s", err);
            if (!sb || !st) {
                ctr_source_destroy(sb);
                ctr_source_destroy(st);
                continue;
            }
            ctr_position p0;
            ctr_source_tell(sb, &p0);
            const int64_t n = p0.end - p0.begin;
            CHECK(ctr_source_shuffle(sb, 42, err, sizeof err) == 0);
            CHECK_MSG(ctr_source_shuffle(st, 42, err, sizeof err) == 0, "%s", err);
            for (int epoch = 0; epoch < 3; epoch++) {
                int64_t nb = read_lines(r, sb, a, n), nt = read_lines(r, st, b, n);
                CHECK_MSG(nb == n && nt == n && !memcmp(a, b, sizeof(int64_t) * (size_t)n),
                          "W %d rank %d epoch %d: the text order differs from the binary's", W, rank, epoch);
                ctr_source_rewind(sb);
                ctr_source_rewind(st);
            }
            int64_t part = test_range(r, 0, n + 1);
            read_lines(r, st, b, part);
            ctr_position mid;
            ctr_source_tell(st, &mid);
            int64_t rest = read_lines(r, st, b, n - part);
            read_lines(r, sb, a, n);
            CHECK_MSG(ctr_source_tsv(tsv, TSV_ROWS, CTR_BAD_FAIL, rank, W, &again, err, sizeof err) == 0, "%s", err);
            if (again) {
                CHECK(ctr_source_shuffle(again, 42, err, sizeof err) == 0);
                CHECK_MSG(ctr_source_seek(again, &mid, err, sizeof err) == 0, "%s", err);
                int64_t got = read_lines(r, again, b, n - part);
                CHECK_MSG(got == rest && rest == n - part && !memcmp(a + part, b, sizeof(int64_t) * (size_t)rest),
                          "W %d rank %d: the text resumed at %lld of epoch 3 reads otherwise", W, rank,
                          (long long)part);
                ctr_stats cs;
                ctr_source_stats(again, &cs); /* a resumed run counts the lines it reads */
                CHECK_MSG(cs.lines == rest && cs.samples == rest, "W %d rank %d: resumed, %lld lines counted of %lld",
                          W, rank, (long long)cs.lines, (long long)rest);
                ctr_source_destroy(again);
            }
            ctr_source_destroy(sb);
            ctr_source_destroy(st);
        }
    (void)L;
    snprintf(gz, sizeof gz, "%s.gz", tsv);
    FILE *in = fopen(tsv, "rb");
    gzFile out = gzopen(gz, "wb");
    char buf[1 << 14];
    size_t k;
    while (in && out && (k = fread(buf, 1, sizeof buf, in)) > 0)
        gzwrite(out, buf, (unsigned)k);
    if (in)
        fclose(in);
    if (out)
        gzclose(out);
    ctr_source *s = NULL;
    CHECK(ctr_source_tsv(gz, TSV_ROWS, CTR_BAD_FAIL, 0, 1, &s, err, sizeof err) == 0);
    if (s) {
        CHECK_MSG(ctr_source_shuffle(s, 1, err, sizeof err) == -1 && strstr(err, "a gzip file cannot be shuffled"),
                  "%s", err);
        ctr_source_destroy(s);
    }
}

/* ctr_source_shuffle: every epoch is a permutation of the rank's share, in
 * runs of the file's blocks cut at the share's ends, different between
 * epochs and seeds, the same for the same seed, and a source seeked to a
 * told position (also in a later epoch) continues the same order. */
static void test_shuffle(uint64_t seed)
{
    test_rng r = {seed ^ 0x5bd1e995u};
    const int64_t L = 23 * 4096 / 2 + 77; /* blocks of 4096: 11 whole ones and a partial */
    char tsv[512], bin[512], err[512], line[600];
    snprintf(tsv, sizeof tsv, "%s/shuffle.tsv", tmpdir);
    snprintf(bin, sizeof bin, "%s/shuffle.bin", tmpdir);
    FILE *f = fopen(tsv, "w");
    for (int64_t i = 0; f && i < L; i++) { /* I1 = the line number: the sample's name */
        int k = snprintf(line, sizeof line, "%d\t%lld", (int)(i % 2), (long long)i);
        for (int j = 1; j < 13; j++)
            k += snprintf(line + k, sizeof line - (size_t)k, "\t%d", j);
        for (int c = 0; c < 26; c++)
            k += snprintf(line + k, sizeof line - (size_t)k, "\t%x", (unsigned)(i * 31 + c));
        fprintf(f, "%s\n", line);
    }
    if (f)
        fclose(f);
    ctr_stats st;
    CHECK_MSG(ctr_convert_tsv(tsv, bin, TSV_ROWS, CTR_BAD_FAIL, &st, err, sizeof err) == 0, "%s", err);
    int64_t *a = malloc(sizeof(int64_t) * (size_t)L * 2), *b = a + L;
    for (int32_t W = 1; W <= 3; W += 2)
        for (int32_t rank = 0; rank < W; rank++) {
            ctr_source *s = NULL, *t = NULL;
            CHECK_MSG(ctr_source_binary(bin, rank, W, &s, err, sizeof err) == 0, "%s", err);
            if (!s)
                continue;
            ctr_position p0;
            ctr_source_tell(s, &p0);
            int64_t begin = p0.begin, n = p0.end - p0.begin;
            CHECK(ctr_source_shuffle(s, 42, err, sizeof err) == 0);
            int64_t prev_first = -1;
            for (int epoch = 0; epoch < 3; epoch++) {
                int64_t got = read_lines(&r, s, a, n);
                CHECK_MSG(got == n, "W %d rank %d epoch %d: %lld of %lld samples", W, rank, epoch, (long long)got,
                          (long long)n);
                /* a permutation of the share, block by block */
                char *seen = calloc((size_t)n + 1, 1);
                int ok = 1, runs = 1;
                for (int64_t i = 0; i < got && ok; i++) {
                    int64_t x = a[i] - begin;
                    ok = x >= 0 && x < n && !seen[x];
                    if (ok)
                        seen[x] = 1;
                    if (i == 0 || a[i] != a[i - 1] + 1) { /* a part ends where a block or the share ends, and one starts */
                        runs += i > 0;
                        int64_t e = i > 0 ? a[i - 1] + 1 : 0;
                        ok = ok && (i == 0 || e % 4096 == 0 || e == begin + n) && (a[i] % 4096 == 0 || a[i] == begin);
                    }
                }
                CHECK_MSG(ok, "W %d rank %d epoch %d: not a block-wise permutation of the share", W, rank, epoch);
                CHECK_MSG(n < 3 * 4096 || a[0] != prev_first || epoch == 0, "W %d rank %d: epochs %d and %d start alike",
                          W, rank, epoch - 1, epoch);
                CHECK_MSG(n < 3 * 4096 || runs > 1, "W %d rank %d epoch %d: in file order", W, rank, epoch);
                prev_first = a[0];
                free(seen);
                ctr_batch eb;
                CHECK(ctr_source_next(s, 10, &eb, err, sizeof err) == 0); /* the epoch is over */
                ctr_source_rewind(s);
            }
            /* resume: a told position in epoch 4, a fresh source seeked to it */
            int64_t part = test_range(&r, 0, n + 1);
            CHECK(read_lines(&r, s, a, n) == n); /* epoch 3 */
            ctr_source_rewind(s);
            CHECK(read_lines(&r, s, a, part) == part);
            ctr_position mid;
            ctr_source_tell(s, &mid);
            int64_t rest = read_lines(&r, s, a, n - part);
            CHECK_MSG(ctr_source_binary(bin, rank, W, &t, err, sizeof err) == 0, "%s", err);
            if (t) {
                CHECK(ctr_source_shuffle(t, 42, err, sizeof err) == 0);
                CHECK_MSG(ctr_source_seek(t, &mid, err, sizeof err) == 0, "%s", err);
                int64_t again = read_lines(&r, t, b, n - part);
                CHECK_MSG(again == rest && memcmp(a, b, sizeof(int64_t) * (size_t)rest) == 0,
                          "W %d rank %d: resumed at %lld of epoch 4, the rest differs", W, rank, (long long)part);
                /* the same seed from the start gives epoch 0 again; another seed another order */
                ctr_position zero = {begin, 0, begin, begin + n};
                CHECK(ctr_source_seek(t, &zero, err, sizeof err) == 0);
                ctr_source *u = NULL;
                CHECK_MSG(ctr_source_binary(bin, rank, W, &u, err, sizeof err) == 0, "%s", err);
                if (u) {
                    CHECK(ctr_source_shuffle(u, 43, err, sizeof err) == 0);
                    read_lines(&r, t, a, n);
                    read_lines(&r, u, b, n);
                    CHECK_MSG(n < 3 * 4096 || memcmp(a, b, sizeof(int64_t) * (size_t)n) != 0,
                              "W %d rank %d: seeds 42 and 43 give one order", W, rank);
                    ctr_source_destroy(u);
                }
                ctr_source_destroy(t);
            }
            ctr_source_destroy(s);
        }
    test_shuffle_text(&r, tsv, bin, L, a, b);
    free(a);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "%s/ember-test-ctr-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_synth_determinism(seed);
    test_synth_drift(seed);
    test_synth_shares(seed);
    test_synth_teacher(seed);
    test_tsv_reference(seed, TSV_ROWS);
    int64_t keyed[26]; /* every third feature feeds a dynamic table: whole 64-bit keys */
    for (int f = 0; f < 26; f++)
        keyed[f] = f % 3 ? TSV_ROWS[f] : 0;
    test_tsv_reference(seed, keyed);
    test_tsv_bad_lines(seed);
    test_binary(seed);
    test_binary_messages();
    test_tsv_integer_limits();
    test_tsv_int_point_zeros();
    test_positions(seed);
    test_binary_keys(seed);
    test_binary_keys_errors(seed);
    test_shuffle(seed);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report("test_ctr");
}
