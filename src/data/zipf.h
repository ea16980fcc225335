/*
 * zipf.h: the id laws of ember's synthetic data (synth.c, ctr_synth.c), kept
 * in one place so that both generators draw the same ids from the same bits.
 *
 * A bag's random numbers come from a splitmix64 stream (stream_next) whose
 * start is a hash of its coordinates; zipf_rank draws a rank k in 1..n from
 * the bounded Zipf(s) law by rejection-inversion and rank_to_row scatters
 * ranks over the table; uniform_row is Lemire's unbiased multiply-and-reject.
 * Everything is static inline: each generator keeps its own copies.
 */
#ifndef EMBER_DATA_ZIPF_H
#define EMBER_DATA_ZIPF_H

#include <math.h>
#include <stdint.h>

#include "core/rng.h"
#include "ember.h"

#define SYNTH_GAMMA 0x9e3779b97f4a7c15ULL /* splitmix64 increment        */
#define SYNTH_BAG_MUL 0xd1b54a32d192ed03ULL /* spreads bag counters        */
#define SYNTH_SCRAMBLE 2654435761ULL /* rank -> row multiplier          */

/* Bounded Zipf on 1..n with exponent s by rejection-inversion.
 *   h(x) = x^-s,   H(x) = integral of h from 1 to x = (x^(1-s) - 1) / (1-s)
 * (ln x when s = 1).  A point u drawn uniformly from (H(1.5) - h(1), H(n+0.5)]
 * is inverted to x = H^-1(u) and rounded to k; the piece of that interval
 * that belongs to k is at least h(k) wide (h is convex), and k is kept when u
 * falls in its last h(k), so P(k) ~ h(k) exactly.  Most draws are kept by the
 * cheap squeeze test k - x <= squeeze before H is evaluated again. */
typedef struct zipf_law {
    double s;
    double u_lo, u_hi; /* the interval u is drawn from                    */
    double squeeze;
    int64_t n;
} zipf_law;

/* log1p(t) / t and expm1(t) / t, both -> 1 as t -> 0 (series near 0). */
static inline double log1p_over(double t)
{
    if (fabs(t) < 1e-8)
        return 1.0 - t * (0.5 - t * (1.0 / 3.0 - t * 0.25));
    return log1p(t) / t;
}

static inline double expm1_over(double t)
{
    if (fabs(t) < 1e-8)
        return 1.0 + t * 0.5 * (1.0 + t / 3.0 * (1.0 + t * 0.25));
    return expm1(t) / t;
}

/* H(x) = ln(x) * (e^((1-s) ln x) - 1) / ((1-s) ln x): one form for every s. */
static inline double zipf_H(const zipf_law *z, double x)
{
    double lx = log(x);
    return lx * expm1_over((1.0 - z->s) * lx);
}

static inline double zipf_h(const zipf_law *z, double x)
{
    return exp(-z->s * log(x));
}

/* H^-1(y) = (1 + (1-s) y)^(1/(1-s)) = exp(y * log1p(t) / t), t = (1-s) y. */
static inline double zipf_H_inv(const zipf_law *z, double y)
{
    double t = (1.0 - z->s) * y;
    if (t < -1.0)
        t = -1.0; /* rounding at the far end of the interval */
    return exp(y * log1p_over(t));
}

static inline void zipf_law_init(zipf_law *z, int64_t n, double s)
{
    z->s = s;
    z->n = n;
    z->u_lo = zipf_H(z, 1.5) - 1.0; /* h(1) = 1 */
    z->u_hi = zipf_H(z, (double)n + 0.5);
    z->squeeze = 2.0 - zipf_H_inv(z, zipf_H(z, 2.5) - zipf_h(z, 2.0));
}

/* splitmix64 stream of one bag */
static inline uint64_t stream_next(uint64_t *state)
{
    *state += SYNTH_GAMMA;
    return ember_mix64(*state);
}

static inline double stream_unit(uint64_t *state) /* [0, 1), 53 bits */
{
    return (double)(stream_next(state) >> 11) * 0x1.0p-53;
}

static inline int64_t zipf_rank(const zipf_law *z, uint64_t *state)
{
    for (;;) {
        double u = z->u_hi - stream_unit(state) * (z->u_hi - z->u_lo);
        double x = zipf_H_inv(z, u);
        int64_t k = (int64_t)(x + 0.5);
        if (k < 1)
            k = 1;
        else if (k > z->n)
            k = z->n;
        if ((double)k - x <= z->squeeze || u >= zipf_H(z, (double)k + 0.5) - zipf_h(z, (double)k))
            return k;
    }
}

/* Uniform on [0, n) without modulo bias (Lemire 2019). */
static inline int64_t uniform_row(uint64_t n, uint64_t *state)
{
    unsigned __int128 m = (unsigned __int128)stream_next(state) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t floor_mod = (0 - n) % n; /* 2^64 mod n */
        while (low < floor_mod) {
            m = (unsigned __int128)stream_next(state) * n;
            low = (uint64_t)m;
        }
    }
    return (int64_t)(m >> 64);
}

/* rank k (1-based) -> row, exact for any rows (128-bit product; the same
 * value in 64 bits when the product fits, k - 1 < 2^32, which is cheaper). */
static inline int64_t rank_to_row(int64_t k, uint64_t rows)
{
    if ((uint64_t)(k - 1) < (UINT64_C(1) << 32))
        return (int64_t)((uint64_t)(k - 1) * SYNTH_SCRAMBLE % rows);
    return (int64_t)(((unsigned __int128)(uint64_t)(k - 1) * SYNTH_SCRAMBLE) % rows);
}

/* Drift (ember_drift, docs/adaptive.md "Drifting ids"): the law of epoch e.
 * grow draws its ranks from the first min(rows, start + e R) ranks (each
 * epoch R ranks, new ids, join the law; start 0 means R); rotate shifts
 * rank k to rank ((k - 1 + e R) mod rows) + 1, so the hot set moves R
 * ranks down the table every epoch.  The products are exact in 128 bits. */
static inline int64_t drift_support(int kind, int64_t rows, int64_t R, int64_t start, int64_t e)
{
    if (kind != EMBER_DRIFT_GROW)
        return rows;
    unsigned __int128 n = (unsigned __int128)(uint64_t)(start > 0 ? start : R) + (unsigned __int128)(uint64_t)R * (uint64_t)e;
    return n < (unsigned __int128)(uint64_t)rows ? (int64_t)n : rows;
}

static inline int64_t drift_row(int kind, int64_t k, int64_t R, int64_t e, uint64_t rows)
{
    if (kind == EMBER_DRIFT_ROTATE && e > 0)
        k = (int64_t)(((unsigned __int128)(uint64_t)(k - 1) + (unsigned __int128)(uint64_t)e * (uint64_t)R) % rows) +
            1;
    return rank_to_row(k, rows);
}

#endif
