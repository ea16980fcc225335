/*
 * stats.c: what the planner knows about a table's ids (plan.h,
 * docs/planner.md "Id statistics").
 *
 * Two numbers drive every byte count: how many distinct rows n ids touch,
 * and how the id mass falls on the owners of a sharded table.  For the
 * synthetic generator both are computed from the law itself, not from a
 * sample: with p_k the probability of the k-th row,
 *     D(n) = sum_k 1 - (1 - p_k)^n,
 * summed exactly over the 1024 most likely rows and, for the rest of a
 * Zipf table, by Euler-Maclaurin (integral plus end corrections), which is
 * exact to well under 0.1% and costs microseconds even for 2^40 rows.  For
 * real data the builder measures D at the same n on a sample stream and
 * counts the hottest rows.  The curve is stored at n = 2^(i/4) and read by
 * log-log interpolation (under 0.3% between points).
 *
 * A dynamic table's ids are keys (keyed statistics): the synthetic task's
 * keys are its law over `keys` ids sent through a bijection per feature
 * (data/ctr.h), so their curve is the law's, summed over the features, and
 * their hot keys are the law's hot ids, mapped; measured keys are counted
 * like rows, over an unbounded key space.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/ctr.h"
#include "dyn/dyn.h"
#include "plan/plan.h"

#define ZIPF_EXACT 1024      /* ranks summed one by one                 */
#define ZIPF_PANELS 512      /* Simpson panels of the tail integral     */
#define SCRAMBLE 2654435761ULL /* rank -> row, as src/data/synth.c      */

static double curve_n(int32_t i) { return exp2((double)i / 4.0); }


/* ------------------------------------------------------------------ zipf */

typedef struct zipf_sum {
    double alpha, c; /* p_k = c * k^-alpha                                 */
    int64_t rows;
} zipf_sum;

/* integral of x^-alpha from a to b */
static double zipf_int(double alpha, double a, double b)
{
    double la = log(a), lb = log(b), s = 1.0 - alpha;
    if (fabs(s * (lb - la)) < 1e-12)
        return exp((1 - alpha) * la) * (lb - la);
    return (exp(s * lb) - exp(s * la)) / s;
}

/* sum of g(k) = 1 - (1 - c k^-alpha)^n for k in [a, b] (integers, a <= b)
 * by Euler-Maclaurin: the integral (Simpson in log k) plus (g(a)+g(b))/2. */
static double zipf_tail_distinct(const zipf_sum *z, double n, double a, double b)
{
    if (a > b)
        return 0;
    double ga = plan_touch(z->c * pow(a, -z->alpha), n), gb = plan_touch(z->c * pow(b, -z->alpha), n);
    if (b - a < 1)
        return ga;
    double ua = log(a), ub = log(b), h = (ub - ua) / ZIPF_PANELS, acc = 0;
    for (int i = 0; i <= ZIPF_PANELS; i++) {
        double u = ua + h * i, x = exp(u);
        double f = plan_touch(z->c * exp(-z->alpha * u), n) * x;
        acc += f * (i == 0 || i == ZIPF_PANELS ? 1 : (i % 2 ? 4 : 2));
    }
    return acc * h / 3.0 + 0.5 * (ga + gb);
}

static int cmp_row(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

/* Sorts hot rows by row and merges repeats (a rank->row map that is not a
 * bijection, rows sharing a factor with the multiplier). */
static void hot_merge(plan_id_stats *s)
{
    typedef struct { int64_t row; double p; } hp;
    hp *v = malloc(sizeof(hp) * (size_t)(s->hot ? s->hot : 1));
    if (!v)
        return; /* unmerged repeats only blur the owners' masses a little */
    for (int32_t i = 0; i < s->hot; i++)
        v[i] = (hp){s->hot_row[i], s->hot_p[i]};
    qsort(v, (size_t)s->hot, sizeof *v, cmp_row);
    int32_t n = 0;
    for (int32_t i = 0; i < s->hot; i++) {
        if (n && v[n - 1].row == v[i].row)
            v[n - 1].p += v[i].p;
        else
            v[n++] = v[i];
    }
    for (int32_t i = 0; i < n; i++) {
        s->hot_row[i] = v[i].row;
        s->hot_p[i] = v[i].p;
    }
    s->hot = n;
    free(v);
}

int plan_stats_zipf(int64_t rows, double alpha, plan_id_stats *out)
{
    if (rows < 1 || !(alpha > 0) || !isfinite(alpha))
        return EMBER_EINVAL;
    memset(out, 0, sizeof *out);
    out->rows = rows;
    zipf_sum z = {alpha, 0, rows};
    int64_t exact = rows < ZIPF_EXACT ? rows : ZIPF_EXACT;
    double *p = malloc(sizeof(double) * 2 * (size_t)exact), *lp = p + exact;
    if (!p)
        return EMBER_ENOMEM;
    /* H = sum k^-alpha: exact head, Euler-Maclaurin tail (to f') */
    double H = 0;
    for (int64_t k = exact; k >= 1; k--) /* small terms first */
        H += pow((double)k, -alpha);
    if (rows > exact) {
        double a = (double)exact + 1, b = (double)rows;
        double fa = pow(a, -alpha), fb = pow(b, -alpha);
        H += zipf_int(alpha, a, b) + 0.5 * (fa + fb) +
             (-alpha * fb / b + alpha * fa / a) / 12.0;
    }
    z.c = 1.0 / H;
    for (int64_t k = 1; k <= exact; k++) {
        p[k - 1] = z.c * pow((double)k, -alpha);
        lp[k - 1] = log1p(-p[k - 1]);
    }
    out->points = PLAN_CURVE_POINTS;
    for (int32_t i = 0; i < PLAN_CURVE_POINTS; i++) {
        double n = curve_n(i), d = 0;
        for (int64_t k = exact; k >= 1; k--)
            d -= expm1(n * lp[k - 1]); /* 1 - (1 - p_k)^n */
        if (rows > exact)
            d += zipf_tail_distinct(&z, n, (double)exact + 1, (double)rows);
        if (d > (double)rows)
            d = (double)rows;
        if (d > n)
            d = n;
        out->distinct[i] = d;
    }
    out->hot = (int32_t)(rows < PLAN_HOT_ROWS ? rows : PLAN_HOT_ROWS);
    for (int32_t k = 1; k <= out->hot; k++) {
        out->hot_row[k - 1] =
            (int64_t)(((unsigned __int128)(uint64_t)(k - 1) * SCRAMBLE) % (uint64_t)rows);
        out->hot_p[k - 1] = p[k - 1];
    }
    free(p);
    hot_merge(out);
    return EMBER_OK;
}

int plan_stats_uniform(int64_t rows, plan_id_stats *out)
{
    if (rows < 1)
        return EMBER_EINVAL;
    memset(out, 0, sizeof *out);
    out->rows = rows;
    out->points = PLAN_CURVE_POINTS;
    for (int32_t i = 0; i < PLAN_CURVE_POINTS; i++)
        out->distinct[i] = (double)rows * plan_touch(1.0 / (double)rows, curve_n(i));
    if (rows <= PLAN_HOT_ROWS) { /* every row, so small tables shard exactly */
        out->hot = (int32_t)rows;
        for (int32_t r = 0; r < out->hot; r++) {
            out->hot_row[r] = r;
            out->hot_p[r] = 1.0 / (double)rows;
        }
    }
    return EMBER_OK;
}

int plan_stats_synth(const ember_synth_config *sc, plan_id_stats *out)
{
    return sc->zipf ? plan_stats_zipf(sc->rows, sc->alpha, out)
                    : plan_stats_uniform(sc->rows, out);
}

typedef struct hot_key {
    int64_t key;
    double p;
} hot_key;

static int cmp_hot_p(const void *a, const void *b)
{
    const hot_key *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* The hottest keys of nf disjoint copies of `law`, copy i weighted share[i]
 * and keyed by ctr_synth_key(feat[i], id): the PLAN_HOT_ROWS most likely. */
static int hot_keys(const plan_id_stats *law, uint64_t seed, int32_t nf, const int32_t *feat,
                    const double *share, plan_id_stats *out)
{
    int64_t n = (int64_t)nf * law->hot;
    hot_key *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
    if (!v)
        return EMBER_ENOMEM;
    ctr_synth_config sc = ctr_synth_config_default();
    sc.seed = seed;
    for (int32_t i = 0; i < nf; i++)
        for (int32_t k = 0; k < law->hot; k++)
            v[(int64_t)i * law->hot + k] = (hot_key){ctr_synth_key(&sc, feat[i], law->hot_row[k]),
                                                     share[i] * law->hot_p[k]};
    qsort(v, (size_t)n, sizeof *v, cmp_hot_p);
    out->hot = (int32_t)(n < PLAN_HOT_ROWS ? n : PLAN_HOT_ROWS);
    for (int32_t k = 0; k < out->hot; k++) {
        out->hot_row[k] = v[k].key;
        out->hot_p[k] = v[k].p;
    }
    free(v);
    hot_merge(out);
    return EMBER_OK;
}

int plan_stats_synth_keys(int64_t keys, double alpha, uint64_t seed, int32_t nf, const int32_t *feat,
                          const double *share, plan_id_stats *out)
{
    if (keys < 1 || nf < 1 || !feat || !share || !out || !isfinite(alpha))
        return EMBER_EINVAL;
    double total = 0;
    for (int32_t i = 0; i < nf; i++) {
        if (!(share[i] > 0) || !isfinite(share[i]))
            return EMBER_EINVAL;
        total += share[i];
    }
    plan_id_stats *law = malloc(sizeof *law);
    double *w = malloc(sizeof *w * (size_t)nf);
    int rc = law && w ? EMBER_OK : EMBER_ENOMEM;
    if (rc == EMBER_OK)
        rc = alpha > 0 ? plan_stats_zipf(keys, alpha, law) : plan_stats_uniform(keys, law);
    if (rc == EMBER_OK) {
        memset(out, 0, sizeof *out);
        out->keyed = 1;
        out->rows = keys <= PLAN_ANY_KEYS / nf ? keys * nf : PLAN_ANY_KEYS;
        out->points = PLAN_CURVE_POINTS;
        for (int32_t i = 0; i < nf; i++)
            w[i] = share[i] / total;
        for (int32_t p = 0; p < PLAN_CURVE_POINTS; p++) {
            double d = 0;
            for (int32_t i = 0; i < nf; i++)
                d += plan_stats_distinct(law, w[i] * curve_n(p));
            out->distinct[p] = d;
        }
        rc = hot_keys(law, seed, nf, feat, w, out);
    }
    free(law);
    free(w);
    return rc;
}

double plan_stats_distinct(const plan_id_stats *s, double n)
{
    if (!(n > 0) || s->points < 1)
        return 0;
    double cap = (double)s->rows < n ? (double)s->rows : n, d;
    if (n <= 1) {
        d = n * s->distinct[0];
    } else {
        double x = 4.0 * log2(n);
        int32_t i = (int32_t)x;
        if (i >= s->points - 1) {
            d = s->distinct[s->points - 1];
        } else {
            double f = x - i, a = s->distinct[i], b = s->distinct[i + 1];
            d = a > 0 && b > 0 ? exp(log(a) + f * (log(b) - log(a))) : a + f * (b - a);
        }
    }
    return d < cap ? d : cap;
}

double plan_solve_increasing(double (*f)(const void *ctx, double n), const void *ctx, double target, double start,
                             double cap)
{
    double lo = 0, hi = start;
    while (f(ctx, hi) < target && hi < cap)
        lo = hi, hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; i++) {
        double mid = lo > 0 ? sqrt(lo * hi) : hi / 2;
        if (f(ctx, mid) < target)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

static double stats_distinct(const void *s, double n) { return plan_stats_distinct(s, n); }

/* ---------------------------------------------------------------- builder */

struct plan_stats_builder {
    int64_t rows, n;       /* ids seen                                      */
    int keyed;             /* rows 0 at create: every id is a key           */
    int64_t *key;          /* open addressing: the ids                      */
    int64_t *count;        /* their counts; 0 = an empty slot               */
    int64_t cap, used;     /* slots, filled slots (= distinct so far)       */
    int32_t next_point;    /* next curve index to record                    */
    double distinct[PLAN_CURVE_POINTS];
};

int plan_stats_builder_create(int64_t rows, plan_stats_builder **out)
{
    *out = NULL;
    if (rows < 0)
        return EMBER_EINVAL;
    plan_stats_builder *b = calloc(1, sizeof *b);
    if (!b)
        return EMBER_ENOMEM;
    b->keyed = rows == 0;
    b->rows = rows ? rows : PLAN_ANY_KEYS;
    b->cap = 1024;
    b->key = calloc((size_t)b->cap, sizeof *b->key);
    b->count = calloc((size_t)b->cap, sizeof *b->count);
    if (!b->key || !b->count) {
        plan_stats_builder_destroy(b);
        return EMBER_ENOMEM;
    }
    *out = b;
    return EMBER_OK;
}

static inline uint64_t slot_hash(int64_t id)
{
    uint64_t z = (uint64_t)id * 0x9e3779b97f4a7c15ULL;
    return z ^ (z >> 29);
}

static int builder_grow(plan_stats_builder *b)
{
    int64_t cap = b->cap * 2;
    int64_t *key = calloc((size_t)cap, sizeof *key), *count = calloc((size_t)cap, sizeof *count);
    if (!key || !count) {
        free(key);
        free(count);
        return EMBER_ENOMEM;
    }
    for (int64_t i = 0; i < b->cap; i++) {
        if (!b->count[i])
            continue;
        uint64_t h = slot_hash(b->key[i]) & (uint64_t)(cap - 1);
        while (count[h])
            h = (h + 1) & (uint64_t)(cap - 1);
        key[h] = b->key[i];
        count[h] = b->count[i];
    }
    free(b->key);
    free(b->count);
    b->key = key;
    b->count = count;
    b->cap = cap;
    return EMBER_OK;
}

int plan_stats_builder_add(plan_stats_builder *b, const int64_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (!b->keyed && (ids[i] < 0 || ids[i] >= b->rows))
            continue; /* invalid ids are not looked up */
        if (2 * (b->used + 1) > b->cap && builder_grow(b))
            return EMBER_ENOMEM;
        uint64_t m = (uint64_t)(b->cap - 1), h = slot_hash(ids[i]) & m;
        while (b->count[h] && b->key[h] != ids[i])
            h = (h + 1) & m;
        if (!b->count[h]) {
            b->key[h] = ids[i];
            b->used++;
        }
        b->count[h]++;
        b->n++;
        while (b->next_point < PLAN_CURVE_POINTS &&
               (double)b->n >= floor(curve_n(b->next_point)))
            b->distinct[b->next_point++] = (double)b->used;
    }
    return EMBER_OK;
}

int64_t plan_stats_builder_count(const plan_stats_builder *b) { return b->n; }

int64_t plan_stats_builder_distinct(const plan_stats_builder *b) { return b->used; }

int plan_stats_builder_owners(const plan_stats_builder *b, int32_t world, int64_t *out)
{
    if (!b->keyed || world < 1)
        return EMBER_EINVAL;
    memset(out, 0, sizeof *out * (size_t)world);
    for (int64_t i = 0; i < b->cap; i++)
        if (b->count[i])
            out[ember_dyn_owner(b->key[i], world)]++;
    return EMBER_OK;
}

static int cmp_count_desc(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (count, id) pairs */
    if (x[0] != y[0])
        return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

int plan_stats_builder_finish(plan_stats_builder *b, plan_id_stats *out)
{
    memset(out, 0, sizeof *out);
    out->rows = b->rows;
    if (b->n == 0) { /* nothing seen: no ids, no distinct rows */
        int rc = plan_stats_uniform(b->rows, out);
        out->keyed = b->keyed;
        return rc;
    }
    out->keyed = b->keyed;
    /* the curve: measured points, then the last doubling's rate */
    int32_t m = b->next_point;
    for (int32_t i = 0; i < m; i++)
        out->distinct[i] = b->distinct[i];
    double N = (double)b->n, DN = (double)b->used;
    double half = N / 2 >= 1 ? N / 2 : 1, Dh = DN;
    if (m > 0) { /* distinct at about N/2: the recorded point nearest */
        int32_t j = (int32_t)floor(4.0 * log2(half));
        if (j >= 0 && j < m) {
            Dh = out->distinct[j];
            half = floor(curve_n(j));
        }
    }
    double rate = N > half ? (DN - Dh) / (N - half) : 0;
    for (int32_t i = m; i < PLAN_CURVE_POINTS; i++) {
        double d = DN + rate * (curve_n(i) - N);
        out->distinct[i] = d < (double)b->rows ? d : (double)b->rows;
    }
    out->points = PLAN_CURVE_POINTS;
    /* the hottest rows: by count, then id; rows seen twice or more */
    int64_t (*pairs)[2] = malloc(sizeof *pairs * (size_t)b->used);
    if (!pairs)
        return EMBER_ENOMEM;
    int64_t k = 0;
    for (int64_t i = 0; i < b->cap; i++)
        if (b->count[i])
            pairs[k][0] = b->count[i], pairs[k][1] = b->key[i], k++;
    qsort(pairs, (size_t)k, sizeof *pairs, cmp_count_desc);
    int small = b->rows <= PLAN_HOT_ROWS;
    for (int64_t i = 0; i < k && out->hot < PLAN_HOT_ROWS; i++) {
        if (pairs[i][0] < 2 && !small)
            break;
        out->hot_row[out->hot] = pairs[i][1];
        out->hot_p[out->hot] = (double)pairs[i][0] / N;
        out->hot++;
    }
    free(pairs);
    return EMBER_OK;
}

void plan_stats_builder_destroy(plan_stats_builder *b)
{
    if (!b)
        return;
    free(b->key);
    free(b->count);
    free(b);
}

double plan_lru_hit_rate(const plan_id_stats *s, double n, double cache_rows)
{
    if (n <= 0 || cache_rows >= (double)s->rows)
        return 1.0;
    double dn = plan_stats_distinct(s, n);
    if (cache_rows < dn || dn <= 0)
        return 0.0;
    double T = plan_solve_increasing(stats_distinct, s, cache_rows, n, 1e30); /* D(T) = cache_rows */
    double hit = (dn + plan_stats_distinct(s, T) - plan_stats_distinct(s, n + T)) / dn;
    return hit < 0 ? 0 : hit > 1 ? 1 : hit;
}
