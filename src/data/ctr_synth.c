/*
 * ctr_synth.c: the synthetic CTR task of ctr.h, whose labels come from a
 * hidden teacher model, so the best achievable AUC is known.
 *
 * Sample i (a global index: the training stream is i = 0, 1, ...; the eval
 * stream starts at eval_offset) is a pure function of (config, i):
 *   dense[j]   = N(0,1) from ember_rng_bits(dense key, i, j)
 *   bag of f   = 1 + Poisson(pooling[f] - 1) ids, each a bounded
 *                Zipf(alpha[f]) rank scattered over the table (zipf.h, the
 *                law of ember_synth), from a splitmix64 stream started at
 *                (feature key, i); with a drift, the law of the sample's
 *                epoch (its index in its stream / drift_every)
 *   teacher    x = [dense, sum over the bag of E_f[id] for each f]
 *              z = w2 . relu(W1 x + b1);   t = (z - mean) / sd
 *   label      = 1 when u_i < sigmoid(teacher_scale * t + bias)
 * E_f[id] (teacher_dim normals), W1, b1 and w2 are drawn from the seed.
 * mean and sd normalise the teacher's output over a calibration sample
 * (indices from 2^62), so teacher_scale is the standard deviation of the
 * logit before the bias; the bias is then solved by bisection so the mean
 * click probability of the calibration sample is ctr_rate.
 *
 * Design choice: counter-based randomness (core/rng.h) and no state but the
 * position, so rank shares, world sizes and thread counts all see the same
 * samples; global batch k of size G = W * max_samples is samples [k*G,
 * (k+1)*G), rank r taking [k*G + r*max_samples, ...).  The teacher is tiny
 * (45 inputs, 16 hidden units by default); its hidden layer runs in
 * ctr_teacher.c, vectorised over the hidden units with every rounding
 * spelled out; its embeddings are tabulated at open when they fit in 64 MiB,
 * and drawn on the fly (the same bits) otherwise.  A batch's samples are
 * drawn in parallel (OpenMP), bag lengths first, each sample by its index
 * alone, so the batch is the same for any thread count.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/ctr_impl.h"
#include "data/ctr_teacher.h"
#include "data/zipf.h"

#define SYN_CALIB_FIRST (UINT64_C(1) << 62) /* calibration sample indices      */
#define SYN_CALIB_N 16384
#define SYN_TABLE_FLOATS (INT64_C(1) << 24) /* teacher embeddings tabulated    */
#define SYN_MAX_BAG 65535
#define SYN_ROW_BUF 64 /* a sample's rows drawn before their embeddings are read */
#define SYN_SALT_DENSE 0x243f6a8885a308d3ULL
#define SYN_SALT_LABEL 0x13198a2e03707344ULL
#define SYN_SALT_EMB 0xa4093822299f31d0ULL
#define SYN_SALT_MLP 0x082efa98ec4e6c89ULL

typedef struct synth_impl {
    ctr_synth_config cfg;
    int32_t rank, world;
    uint64_t first, pos;   /* stream start; global index of the next global batch */
    zipf_law zipf[CTR_MAX_FEATURES];
    uint64_t id_key[CTR_MAX_FEATURES], emb_key[CTR_MAX_FEATURES];
    uint64_t dense_key, label_key;
    float *emb[CTR_MAX_FEATURES]; /* [rows][teacher_dim] or NULL: drawn on the fly */
    int32_t in;            /* teacher inputs: num_dense + num_sparse * teacher_dim */
    double *w1t, *b1, *w2; /* W1 transposed [in][stride] (ctr_teacher.h), [hidden], [hidden] */
    double pois_limit[CTR_MAX_FEATURES]; /* exp(-(pooling - 1)): poisson's limit */
    double mean, sd, bias;
    float *prob;           /* [cap] the teacher's probabilities of the batch    */
    int32_t cap_prob;
    int64_t *first_id;     /* [num_sparse][n] feature-major offsets of the bags */
    int64_t cap_first;
} synth_impl;

int64_t ctr_synth_key(const ctr_synth_config *cfg, int32_t f, int64_t id)
{
    uint64_t salt = ember_mix64(cfg->seed ^ 0x5851f42d4c957f2dULL ^ (uint64_t)f * 0x9e3779b97f4a7c15ULL);
    return (int64_t)ember_mix64((uint64_t)id ^ salt);
}

/* Two standard normals' worth of bits -> one N(0,1) (Box-Muller, cosine). */
static inline double normal_from_bits(uint64_t bits)
{
    double u1 = ((double)(bits >> 32) + 0.5) * 0x1.0p-32; /* (0, 1) */
    double u2 = (double)(bits & 0xffffffffu) * 0x1.0p-32;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static inline float teacher_emb(const synth_impl *m, int32_t f, int64_t id, int32_t c)
{
    if (m->emb[f])
        return m->emb[f][id * m->cfg.teacher_dim + c];
    return (float)normal_from_bits(ember_rng_bits(m->emb_key[f], (uint64_t)id, (uint64_t)c, 0));
}

/* Poisson(lambda) from the bag's stream: Knuth's product of uniforms below
 * lambda 30 (limit = exp(-lambda), computed once per feature), a rounded
 * normal above (bags that long are rare in CTR data). */
static int32_t poisson(double lambda, double limit, uint64_t *st)
{
    if (lambda <= 0)
        return 0;
    if (lambda < 30) {
        double p = 1.0;
        int32_t k = -1;
        do {
            k++;
            p *= stream_unit(st);
        } while (p > limit);
        return k;
    }
    double x = lambda + sqrt(lambda) * normal_from_bits(stream_next(st)) + 0.5;
    return x < 0 ? 0 : x > SYN_MAX_BAG ? SYN_MAX_BAG : (int32_t)x;
}

static inline uint64_t bag_stream(const synth_impl *m, int32_t f, uint64_t i)
{
    return ember_mix64(m->id_key[f] ^ (i * SYNTH_BAG_MUL));
}

/* The bag length of (f, i): the first draws of its stream, *st left after them. */
static inline int32_t bag_length(const synth_impl *m, int32_t f, uint64_t i, uint64_t *st)
{
    *st = bag_stream(m, f, i);
    int32_t len = 1 + poisson(m->cfg.pooling[f] - 1.0, m->pois_limit[f], st);
    return len > SYN_MAX_BAG ? SYN_MAX_BAG : len;
}

/* Adds the teacher embeddings of the rows drawn so far to their features'
 * sums in x (each feature's rows in bag order). */
static void add_rows(const synth_impl *m, double *x, const int64_t *row, const int32_t *feat, int32_t n)
{
    const int32_t D = m->cfg.num_dense, td = m->cfg.teacher_dim;
    for (int32_t r = 0; r < n; r++) {
        double *e = x + D + (int64_t)feat[r] * td;
        for (int32_t k = 0; k < td; k++)
            e[k] += teacher_emb(m, feat[r], row[r], k);
    }
}

/* Sample i: its dense features into dense (may be NULL), its bags into
 * ids[f] (may be NULL), and the teacher's normalised output t (before the
 * scale and the bias).  x: scratch of synth_scratch(m) doubles.  A sample's
 * rows are drawn (up to SYN_ROW_BUF) before their embeddings are read, so
 * the reads' cache misses overlap; every sum keeps its order. */
static double sample_at(const synth_impl *m, uint64_t i, int64_t epoch, float *dense, int64_t *const *ids,
                        double *x)
{
    const ctr_synth_config *c = &m->cfg;
    const int32_t drifting = c->drift == EMBER_DRIFT_NONE ? 0 : c->drift_features > 0 ? c->drift_features : c->num_sparse;
    const int32_t D = c->num_dense;
    for (int32_t j = 0; j < D; j++) {
        x[j] = normal_from_bits(ember_rng_bits(m->dense_key, i, (uint64_t)j, 0));
        if (dense)
            dense[j] = (float)x[j];
    }
    for (int64_t k = D; k < m->in; k++)
        x[k] = 0;
    int64_t row[SYN_ROW_BUF];
    int32_t feat[SYN_ROW_BUF], nr = 0;
    for (int32_t f = 0; f < c->num_sparse; f++) {
        uint64_t st;
        int32_t len = bag_length(m, f, i, &st);
        const int drifts = f < drifting && epoch > 0;
        zipf_law law = m->zipf[f];
        if (drifts && c->drift == EMBER_DRIFT_GROW)
            zipf_law_init(&law, drift_support(c->drift, c->rows[f], c->drift_rows, c->drift_start, epoch), c->alpha[f]);
        for (int32_t p = 0; p < len; p++) {
            int64_t id = drifts ? drift_row(c->drift, zipf_rank(&law, &st), c->drift_rows, epoch, (uint64_t)c->rows[f])
                                : rank_to_row(zipf_rank(&law, &st), (uint64_t)c->rows[f]);
            if (ids)
                ids[f][p] = c->keyed[f]       ? ctr_synth_key(c, f, id)
                            : c->hash_rows[f] ? (int64_t)((uint64_t)ctr_synth_key(c, f, id) % (uint64_t)c->hash_rows[f])
                                              : id;
            if (nr == SYN_ROW_BUF) {
                add_rows(m, x, row, feat, nr);
                nr = 0;
            }
            row[nr] = id;
            feat[nr++] = f;
        }
    }
    add_rows(m, x, row, feat, nr);
    double z = ctr_teacher_output(m->w1t, m->b1, m->w2, m->in, c->teacher_hidden, x);
    return (z - m->mean) / m->sd;
}

/* Doubles of sample_at's scratch: the teacher's inputs. */
static size_t synth_scratch(const synth_impl *m) { return (size_t)m->in + 1; }

static inline double sigmoid(double v)
{
    return v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
}

ctr_synth_config ctr_synth_config_default(void)
{
    /* Eight features of 100 to 20,000 rows, Zipf 1.1; two multi-hot.
     * Chosen so that the student of `ember train` (dim 16, small MLPs) gets
     * within 0.01 AUC of the teacher (about 0.85) in the default run of
     * 1.5 M samples (docs/training.md); with 50,000-row tables the rare
     * ids alone cost about 0.01. */
    static const int64_t ROWS[8] = {20000, 10000, 5000, 2000, 1000, 500, 200, 100};
    static const double POOL[8] = {1, 1, 3, 1, 2, 1, 1, 1};
    ctr_synth_config c;
    memset(&c, 0, sizeof c);
    c.num_dense = 13;
    c.num_sparse = 8;
    for (int f = 0; f < CTR_MAX_FEATURES; f++) {
        c.rows[f] = ROWS[f % 8];
        c.alpha[f] = 1.1;
        c.pooling[f] = POOL[f % 8];
    }
    c.teacher_dim = 4;
    c.teacher_hidden = 16;
    c.teacher_scale = 1.75;
    c.ctr_rate = 0.25;
    c.seed = 0;
    c.eval_offset = UINT64_C(1) << 40;
    return c;
}

static int synth_check(const ctr_synth_config *c, char *err, size_t errlen)
{
    const char *w = "synthetic CTR task";
    if (c->num_dense < 0 || c->num_dense > 4096)
        return ctr_fail(err, errlen, "%s: num_dense = %d, must be in [0, 4096]", w, (int)c->num_dense);
    if (c->num_sparse < 1 || c->num_sparse > CTR_MAX_FEATURES)
        return ctr_fail(err, errlen, "%s: num_sparse = %d, must be in [1, %d]", w, (int)c->num_sparse,
                        CTR_MAX_FEATURES);
    for (int32_t f = 0; f < c->num_sparse; f++) {
        if (c->rows[f] < 1 || c->rows[f] > (INT64_C(1) << 53))
            return ctr_fail(err, errlen, "%s: rows[%d] = %lld, must be in [1, 2^53]", w, (int)f,
                            (long long)c->rows[f]);
        if (!(c->alpha[f] >= 0 && c->alpha[f] <= 100))
            return ctr_fail(err, errlen, "%s: alpha[%d] = %g, must be in [0, 100]", w, (int)f, c->alpha[f]);
        if (!(c->pooling[f] >= 1 && c->pooling[f] <= 10000))
            return ctr_fail(err, errlen, "%s: pooling[%d] = %g, must be in [1, 10000]", w, (int)f,
                            c->pooling[f]);
    }
    if (c->drift != EMBER_DRIFT_NONE &&
        (c->drift < 0 || c->drift > EMBER_DRIFT_GROW || c->drift_every < 1 || c->drift_rows < 1 ||
         c->drift_features < 0 || c->drift_features > c->num_sparse || c->drift_start < 0))
        return ctr_fail(err, errlen, "%s: drift needs every >= 1 (it is %lld), rows >= 1 (it is %lld) and features in "
                        "[0, %d] (it is %d)", w, (long long)c->drift_every, (long long)c->drift_rows,
                        (int)c->num_sparse, (int)c->drift_features);
    if (c->teacher_dim < 1 || c->teacher_dim > 1024)
        return ctr_fail(err, errlen, "%s: teacher_dim = %d, must be in [1, 1024]", w, (int)c->teacher_dim);
    if (c->teacher_hidden < 1 || c->teacher_hidden > 65536)
        return ctr_fail(err, errlen, "%s: teacher_hidden = %d, must be in [1, 65536]", w,
                        (int)c->teacher_hidden);
    if (!(c->teacher_scale >= 0 && c->teacher_scale <= 1000))
        return ctr_fail(err, errlen, "%s: teacher_scale = %g, must be in [0, 1000]", w, c->teacher_scale);
    if (!(c->ctr_rate > 0 && c->ctr_rate < 1))
        return ctr_fail(err, errlen, "%s: ctr_rate = %g, must be in (0, 1)", w, c->ctr_rate);
    return 0;
}

/* Keys, teacher weights, tabulated embeddings, then the calibration. */
static int synth_build(synth_impl *m)
{
    const ctr_synth_config *c = &m->cfg;
    const int32_t td = c->teacher_dim, H = c->teacher_hidden;
    m->in = c->num_dense + c->num_sparse * td;
    m->dense_key = ember_mix64(c->seed ^ SYN_SALT_DENSE);
    m->label_key = ember_mix64(c->seed ^ SYN_SALT_LABEL);
    uint64_t mlp_key = ember_mix64(c->seed ^ SYN_SALT_MLP);
    int64_t tab = 0;
    for (int32_t f = 0; f < c->num_sparse; f++) {
        m->id_key[f] = ember_mix64(c->seed ^ ember_mix64((uint64_t)f * SYNTH_BAG_MUL + SYNTH_GAMMA));
        m->emb_key[f] = ember_mix64(m->id_key[f] ^ SYN_SALT_EMB);
        const int drifts = c->drift != EMBER_DRIFT_NONE && (c->drift_features == 0 || f < c->drift_features);
        zipf_law_init(&m->zipf[f], drifts ? drift_support(c->drift, c->rows[f], c->drift_rows, c->drift_start, 0) : c->rows[f],
                      c->alpha[f]); /* grow: epoch 0's law */
        m->pois_limit[f] = exp(-(c->pooling[f] - 1.0));
        if (tab + c->rows[f] * td <= SYN_TABLE_FLOATS) {
            tab += c->rows[f] * td;
            m->emb[f] = malloc((size_t)(c->rows[f] * td) * sizeof(float));
            if (!m->emb[f])
                return EMBER_ENOMEM;
            for (int64_t r = 0; r < c->rows[f]; r++)
                for (int32_t k = 0; k < td; k++)
                    m->emb[f][r * td + k] =
                        (float)normal_from_bits(ember_rng_bits(m->emb_key[f], (uint64_t)r, (uint64_t)k, 0));
        }
    }
    const int32_t Hp = ctr_teacher_stride(H);
    m->w1t = calloc((size_t)Hp * (size_t)m->in + 1, sizeof *m->w1t); /* the padding stays 0 */
    m->b1 = malloc((size_t)H * sizeof *m->b1);
    m->w2 = malloc((size_t)H * sizeof *m->w2);
    double *x = malloc(synth_scratch(m) * sizeof *x);
    double *t = malloc(SYN_CALIB_N * sizeof *t);
    if (!m->w1t || !m->b1 || !m->w2 || !x || !t) {
        free(x);
        free(t);
        return EMBER_ENOMEM;
    }
    /* W1 ~ N(0, 1/in), so each pre-activation has about unit variance; b1
     * ~ N(2, 1/4) keeps most units active most of the time (about 95%): a
     * teacher with curvature but no hard switches, which a DLRM student
     * with dot interactions can match closely (with b1 centred on 0 the
     * default student stays 0.04 AUC short); w2 ~ N(0, 1) */
    const double win = 1.0 / sqrt((double)(m->in > 0 ? m->in : 1));
    for (int32_t h = 0; h < H; h++) {
        for (int32_t k = 0; k < m->in; k++)
            m->w1t[(int64_t)k * Hp + h] =
                win * normal_from_bits(ember_rng_bits(mlp_key, (uint64_t)h, (uint64_t)k, 0));
        m->b1[h] = 2.0 + 0.5 * normal_from_bits(ember_rng_bits(mlp_key, (uint64_t)h, 0, 1));
        m->w2[h] = normal_from_bits(ember_rng_bits(mlp_key, (uint64_t)h, 0, 2));
    }
    /* normalise the output, then solve the bias for the click rate */
    m->mean = 0;
    m->sd = 1;
    double s1 = 0, s2 = 0;
    for (int32_t k = 0; k < SYN_CALIB_N; k++) {
        t[k] = sample_at(m, SYN_CALIB_FIRST + (uint64_t)k, 0, NULL, NULL, x);
        s1 += t[k];
        s2 += t[k] * t[k];
    }
    double mean = s1 / SYN_CALIB_N, var = s2 / SYN_CALIB_N - mean * mean;
    m->mean = mean;
    m->sd = var > 1e-24 ? sqrt(var) : 1.0;
    for (int32_t k = 0; k < SYN_CALIB_N; k++)
        t[k] = c->teacher_scale * (t[k] - mean) / m->sd;
    double lo = -60, hi = 60;
    for (int it = 0; it < 100; it++) {
        double mid = 0.5 * (lo + hi), p = 0;
        for (int32_t k = 0; k < SYN_CALIB_N; k++)
            p += sigmoid(t[k] + mid);
        if (p / SYN_CALIB_N < c->ctr_rate)
            lo = mid;
        else
            hi = mid;
    }
    m->bias = 0.5 * (lo + hi);
    free(x);
    free(t);
    return 0;
}

static int64_t synth_next(ctr_source *s, int32_t n, char *err, size_t errlen)
{
    synth_impl *m = s->impl;
    const ctr_synth_config *c = &m->cfg;
    const int32_t S = c->num_sparse, D = c->num_dense;
    const uint64_t first = m->pos + (uint64_t)m->rank * (uint64_t)n;
    if (ctr_buf_reserve(s, n, 0))
        return ctr_fail(err, errlen, "synthetic CTR task: out of memory for %d samples", (int)n);
    if (n > m->cap_prob) {
        float *p = realloc(m->prob, (size_t)n * sizeof *p);
        if (!p)
            return ctr_fail(err, errlen, "synthetic CTR task: out of memory for %d samples", (int)n);
        m->prob = p;
        m->cap_prob = n;
    }
    if ((int64_t)n * S > m->cap_first) {
        int64_t *p = realloc(m->first_id, (size_t)n * (size_t)S * sizeof *p);
        if (!p)
            return ctr_fail(err, errlen, "synthetic CTR task: out of memory for %d samples", (int)n);
        m->first_id = p;
        m->cap_first = (int64_t)n * S;
    }
    /* pass 1: bag lengths (each a function of its sample alone), then
     * where each bag starts (feature-major) */
#pragma omp parallel for schedule(static) if (n >= 2048)
    for (int32_t b = 0; b < n; b++)
        for (int32_t f = 0; f < S; f++) {
            uint64_t st;
            s->lengths[(int64_t)f * n + b] = bag_length(m, f, first + (uint64_t)b, &st);
        }
    int64_t nids = 0;
    for (int64_t k = 0; k < (int64_t)n * S; k++) {
        m->first_id[k] = nids;
        nids += s->lengths[k];
    }
    if (ctr_buf_reserve_ids(s, nids, 0))
        return ctr_fail(err, errlen, "synthetic CTR task: out of memory for %lld ids", (long long)nids);
    /* pass 2: the samples, independent of each other */
    int failed = 0;
#pragma omp parallel if (n >= 2048)
    {
        double *x = malloc(synth_scratch(m) * sizeof *x);
        if (!x) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int32_t b = 0; b < n; b++) {
            if (!x)
                continue;
            int64_t *ids[CTR_MAX_FEATURES];
            for (int32_t f = 0; f < S; f++)
                ids[f] = s->ids + m->first_id[(int64_t)f * n + b];
            uint64_t i = first + (uint64_t)b;
            int64_t epoch = c->drift != EMBER_DRIFT_NONE ? (int64_t)((i - m->first) / (uint64_t)c->drift_every) : 0;
            double t = sample_at(m, i, epoch, s->dense + (int64_t)b * D, ids, x);
            double p = sigmoid(c->teacher_scale * t + m->bias);
            double u = (double)(ember_rng_bits(m->label_key, i, 0, 0) >> 11) * 0x1.0p-53;
            m->prob[b] = (float)p;
            s->label[b] = u < p ? 1.0f : 0.0f;
        }
        free(x);
    }
    if (failed)
        return ctr_fail(err, errlen, "synthetic CTR task: out of memory");
    m->pos += (uint64_t)n * (uint64_t)m->world;
    s->num_ids = nids;
    s->batch_first = (int64_t)first;
    s->teacher_prob = m->prob;
    return n;
}

static void synth_rewind(ctr_source *s)
{
    synth_impl *m = s->impl;
    m->pos = m->first;
}

static void synth_destroy(ctr_source *s)
{
    synth_impl *m = s->impl;
    if (!m)
        return;
    for (int32_t f = 0; f < CTR_MAX_FEATURES; f++)
        free(m->emb[f]);
    free(m->w1t);
    free(m->b1);
    free(m->w2);
    free(m->prob);
    free(m->first_id);
    free(m);
}

static void synth_tell(const ctr_source *s, ctr_position *out)
{
    const synth_impl *m = s->impl;
    out->next = (int64_t)m->pos;
}

static int synth_seek(ctr_source *s, int64_t next, char *err, size_t errlen)
{
    synth_impl *m = s->impl;
    if (next < 0)
        return ctr_fail(err, errlen, "synthetic CTR task: position %lld < 0", (long long)next);
    m->pos = (uint64_t)next;
    return 0;
}

static const ctr_source_ops SYNTH_OPS = {synth_next, synth_rewind, synth_destroy, synth_tell, synth_seek, NULL};

int ctr_source_synth(const ctr_synth_config *cfg, int eval, int32_t rank, int32_t world, ctr_source **out,
                     char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!cfg || !out)
        return ctr_fail(err, errlen, "ctr_source_synth: %s is NULL", cfg ? "out" : "cfg");
    if (synth_check(cfg, err, errlen) || ctr_check_world("synthetic CTR task", rank, world, err, errlen))
        return EMBER_EINVAL;
    synth_impl *m = calloc(1, sizeof *m);
    ctr_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.num_dense = cfg->num_dense;
    sc.num_sparse = cfg->num_sparse;
    for (int32_t f = 0; f < cfg->num_sparse; f++) {
        sc.rows[f] = cfg->keyed[f] ? 0 : cfg->hash_rows[f] ? cfg->hash_rows[f] : cfg->rows[f]; /* 0: any key */
        snprintf(sc.names[f], sizeof sc.names[f], "C%d", (int)f + 1);
    }
    ctr_source *s = m ? ctr_source_alloc(&SYNTH_OPS, m, &sc) : NULL;
    if (!s) {
        free(m);
        return ctr_fail(err, errlen, "synthetic CTR task: out of memory");
    }
    m->cfg = *cfg;
    m->rank = rank;
    m->world = world;
    m->first = m->pos = eval ? cfg->eval_offset : 0;
    if (synth_build(m)) {
        ctr_source_destroy(s);
        return ctr_fail(err, errlen, "synthetic CTR task: out of memory for the teacher");
    }
    *out = s;
    return 0;
}
