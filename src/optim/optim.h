/*
 * optim.h: the fused sparse optimizers, one row at a time.
 *
 * ember_optim_prepare folds the per-step constants (the learning rate times
 * the collection's schedule scale, Adam's bias correction
 * for global step t) once per backward; ember_optim_row applies the update
 * of include/ember.h to one row w[dim] with its state and summed gradient g
 * (g is scratch and may be overwritten).  Everything is static inline so
 * the backward loop compiles into one fused kernel per optimizer.
 */
#ifndef EMBER_OPTIM_H
#define EMBER_OPTIM_H

#include <math.h>
#include <stdint.h>

#include "ember.h"

typedef struct ember_optim_step {
    ember_optimizer_kind kind;
    float lr, eps, wd, beta1, beta2;
    float adam_step; /* lr * sqrt(1 - beta2^t) / (1 - beta1^t) */
    float momentum;
    int nesterov;
    float shrink; /* DECOUPLED weight decay: 1 - lr * weight_decay; else 1 */
    float beta, l1, l2, lr_power; /* FTRL */
    float clip_value, clip_norm;  /* 0: off */
    int64_t *clipped;             /* [2] values, rows clipped: added to (atomic) */
    float bc1_inv, bc2_inv;       /* 1 / (1 - beta^t): row-wise Adam, LAMB */
    float eta;                    /* LARS */
    float inner_wd;               /* weight decay inside LAMB's r (decoupled) or LARS's step (L2) */
} ember_optim_step;

static inline ember_optim_step ember_optim_prepare(const ember_optimizer *o, int64_t t, float lr_scale)
{
    float lr = o->lr * lr_scale; /* a scale of 1 keeps lr's bits */
    int decoupled = o->weight_decay_mode == EMBER_DECAY_DECOUPLED;
    ember_optim_step s = {o->kind,     lr,         o->eps,     decoupled ? 0.0f : o->weight_decay, o->beta1,
                          o->beta2,    0.0f,       o->momentum, o->nesterov,
                          decoupled ? 1.0f - lr * o->weight_decay : 1.0f,
                          o->beta,     o->l1,      o->l2,       o->lr_power,
                          o->clip_value, o->clip_norm, NULL,
                          1.0f,        1.0f,       o->eta,      0.0f};
    double bc1 = 1.0 - pow((double)o->beta1, (double)t);
    double bc2 = 1.0 - pow((double)o->beta2, (double)t);
    if (o->kind == EMBER_OPT_ADAM)
        s.adam_step = (float)((double)lr * sqrt(bc2) / bc1);
    if (o->kind == EMBER_OPT_ROWWISE_ADAM || o->kind == EMBER_OPT_LAMB) {
        s.bc1_inv = (float)(1.0 / bc1);
        s.bc2_inv = (float)(1.0 / bc2);
    }
    /* LAMB's decoupled decay goes into r, LARS's L2 decay into its step
     * (both FBGEMM's forms): not the generic g += wd w, w *= 1 - lr wd */
    if ((o->kind == EMBER_OPT_LAMB && decoupled) || (o->kind == EMBER_OPT_LARS && !decoupled)) {
        s.wd = 0.0f;
        s.shrink = 1.0f;
        s.inner_wd = o->weight_decay;
    }
    return s;
}

/* Sum of squares of g[0..n), the one summation row-wise Adagrad uses (also
 * for a COLUMN slice and for hot rows).  Its order is written out, not left
 * to an `omp simd` reduction whose order the compiler may choose apart for
 * each caller (a dim known at compile time or not): element k goes to lane
 * k mod 16, then the lanes are added pairwise in a fixed tree.  So every
 * caller, and a world of one, gets the same bits. */
static inline float ember_optim_sumsq(const float *g, int32_t n)
{
    float lane[16] = {0};
    int32_t k = 0;
    for (; k + 16 <= n; k += 16)
        for (int32_t j = 0; j < 16; j++)
            lane[j] += g[k + j] * g[k + j];
    for (int32_t j = 0; k + j < n; j++)
        lane[j] += g[k + j] * g[k + j];
    for (int32_t w = 8; w > 0; w /= 2)
        for (int32_t j = 0; j < w; j++)
            lane[j] += lane[j + w];
    return lane[0];
}

/* Gradient clipping of a row's summed g[0..n), before anything else:
 * elements to +-clip_value, then the row to L2 norm clip_norm (its sum of
 * squares in ember_optim_sumsq's fixed order).  Adds to counts[0] the
 * elements clipped and to counts[1] 1 when the row was scaled. */
static inline void ember_optim_clip(const ember_optim_step *o, int32_t n, float *restrict g, int64_t counts[2])
{
    if (o->clip_value > 0.0f) {
        const float c = o->clip_value;
        int64_t k0 = 0;
#pragma omp simd reduction(+ : k0)
        for (int32_t k = 0; k < n; k++) {
            k0 += g[k] > c || g[k] < -c;
            g[k] = g[k] > c ? c : g[k] < -c ? -c : g[k];
        }
        counts[0] += k0;
    }
    if (o->clip_norm > 0.0f) {
        float norm = sqrtf(ember_optim_sumsq(g, n));
        if (norm > o->clip_norm) {
            float scale = o->clip_norm / norm;
#pragma omp simd
            for (int32_t k = 0; k < n; k++)
                g[k] *= scale;
            counts[1]++;
        }
    }
}

/* Adds a kernel's clip counts to the step's (atomic: threads share them). */
static inline void ember_optim_count_clips(const ember_optim_step *o, const int64_t counts[2])
{
    if (o->clipped && (counts[0] || counts[1])) {
        __atomic_fetch_add(&o->clipped[0], counts[0], __ATOMIC_RELAXED);
        __atomic_fetch_add(&o->clipped[1], counts[1], __ATOMIC_RELAXED);
    }
}

/* L2 weight decay, the first step of every kind: g += wd * w (wd is 0
 * under decoupled decay, which ember_optim_shrink applies). */
static inline void ember_optim_decay(const ember_optim_step *o, int32_t n, const float *restrict w,
                                     float *restrict g)
{
    if (o->wd != 0.0f) {
#pragma omp simd
        for (int32_t k = 0; k < n; k++)
            g[k] += o->wd * w[k];
    }
}

/* Decoupled weight decay, before the update: w *= 1 - lr * wd. */
static inline void ember_optim_shrink(const ember_optim_step *o, int32_t n, float *restrict w)
{
    if (o->shrink != 1.0f) {
#pragma omp simd
        for (int32_t k = 0; k < n; k++)
            w[k] *= o->shrink;
    }
}

/* FTRL-Proximal on a row (z, nn its state vectors); sigma * lr is
 * n1^-p - n^-p, n1 = n + g^2.  The usual p = -0.5 has its own loop, free
 * of calls, that vectorises, and takes that difference as
 * g^2 / (sqrt(n1) + sqrt(n)): the difference of two close roots would lose
 * most of its digits once n is large against g^2 (src/ref uses the same
 * forms). */
static inline void ember_optim_ftrl(const ember_optim_step *o, int32_t dim, float *restrict w, float *restrict z,
                                    float *restrict nn, const float *restrict g)
{
    const float lr = o->lr, l1 = o->l1, l2 = o->l2, beta = o->beta;
    if (o->lr_power == -0.5f) {
#pragma omp simd
        for (int32_t k = 0; k < dim; k++) {
            float g2 = g[k] * g[k], n1 = nn[k] + g2, q1 = sqrtf(n1);
            float step = g2 / (q1 + sqrtf(nn[k])); /* 0 / 0 when g2 = n = 0: not taken */
            float sigma = (g2 > 0.0f ? step : 0.0f) / lr;
            float zk = z[k] + g[k] - sigma * w[k];
            z[k] = zk;
            nn[k] = n1;
            float wk = -(zk - copysignf(l1, zk)) / ((beta + q1) / lr + l2);
            w[k] = fabsf(zk) <= l1 ? 0.0f : wk;
        }
        return;
    }
    for (int32_t k = 0; k < dim; k++) {
        float n1 = nn[k] + g[k] * g[k], q1 = powf(n1, -o->lr_power);
        /* n1 = n (g = 0, or n past a half state's range: inf): no step, as above */
        float sigma = n1 > nn[k] ? (q1 - powf(nn[k], -o->lr_power)) / lr : 0.0f;
        float zk = z[k] + g[k] - sigma * w[k];
        z[k] = zk;
        nn[k] = n1;
        w[k] = fabsf(zk) <= l1 ? 0.0f : -(zk - copysignf(l1, zk)) / ((beta + q1) / lr + l2);
    }
}

/* Row-wise Adagrad given the row's mean of g^2 (over the whole row, which
 * for a COLUMN slice comes from every rank). */
static inline void ember_optim_rowwise(const ember_optim_step *o, int32_t n, float *restrict w,
                                       float *restrict state, const float *restrict g, float mean_sq)
{
    float s = state[0] + mean_sq;
    state[0] = s;
    float mult = o->lr / (sqrtf(s) + o->eps);
#pragma omp simd
    for (int32_t k = 0; k < n; k++)
        w[k] -= mult * g[k];
}

/* Row-wise Adam (FBGEMM's partial row-wise Adam) given the row's mean of
 * g^2: m has n floats, v one. */
static inline void ember_optim_rowwise_adam(const ember_optim_step *o, int32_t n, float *restrict w,
                                            float *restrict m, float *restrict v, const float *restrict g,
                                            float mean_sq)
{
    const float b1 = o->beta1, b2 = o->beta2;
    float vv = b2 * v[0] + (1.0f - b2) * mean_sq;
    v[0] = vv;
    float mult = o->lr * o->bc1_inv / (sqrtf(vv * o->bc2_inv) + o->eps);
#pragma omp simd
    for (int32_t k = 0; k < n; k++) {
        float mk = b1 * m[k] + (1.0f - b1) * g[k];
        m[k] = mk;
        w[k] -= mult * mk;
    }
}

/* Trust ratio |a| / |b| of a row from the sums of squares (1 when either
 * norm is 0). */
static inline float ember_optim_trust(float a_sq, float b_sq)
{
    return a_sq > 0.0f && b_sq > 0.0f ? sqrtf(a_sq) / sqrtf(b_sq) : 1.0f;
}

/* LAMB, first half: m and v updated, Adam's direction r written over g. */
static inline void ember_optim_lamb_direction(const ember_optim_step *o, int32_t n, const float *restrict w,
                                              float *restrict m, float *restrict v, float *restrict g)
{
    const float b1 = o->beta1, b2 = o->beta2, c1 = o->bc1_inv, c2 = o->bc2_inv, eps = o->eps, wd = o->inner_wd;
#pragma omp simd
    for (int32_t k = 0; k < n; k++) {
        float mk = b1 * m[k] + (1.0f - b1) * g[k];
        float vk = b2 * v[k] + (1.0f - b2) * g[k] * g[k];
        m[k] = mk;
        v[k] = vk;
        g[k] = mk * c1 / (sqrtf(vk * c2) + eps) + wd * w[k];
    }
}

/* LAMB, second half, given the row's sums of w^2 and r^2: w -= lr |w| / |r| r. */
static inline void ember_optim_lamb_step(const ember_optim_step *o, int32_t n, float *restrict w,
                                         const float *restrict r, float w_sq, float r_sq)
{
    float step = o->lr * ember_optim_trust(w_sq, r_sq);
#pragma omp simd
    for (int32_t k = 0; k < n; k++)
        w[k] -= step * r[k];
}

/* LARS-SGD given the row's sums of w^2 and g^2: the local rate
 * eta |w| / (|g| + wd |w|), as FBGEMM's LARS_SGD (1 when |w| or the
 * denominator is 0), then b = momentum b + lr rate (g + wd w); w -= b. */
static inline void ember_optim_lars_step(const ember_optim_step *o, int32_t n, float *restrict w,
                                         float *restrict b, const float *restrict g, float w_sq, float g_sq)
{
    const float wd = o->inner_wd, mu = o->momentum;
    float wn = sqrtf(w_sq), den = sqrtf(g_sq) + wd * wn;
    float step = o->lr * (wn > 0.0f && den > 0.0f ? o->eta * wn / den : 1.0f);
#pragma omp simd
    for (int32_t k = 0; k < n; k++) {
        float bk = mu * b[k] + step * (g[k] + wd * w[k]);
        b[k] = bk;
        w[k] -= bk;
    }
}

/* Floats per row that a kind's update sums over the row's columns (which a
 * COLUMN slice adds up over the ranks): row-wise kinds the sum of g^2, LAMB
 * of w^2 and r^2, LARS of w^2 and g^2; 0 for the element-wise kinds. */
static inline int ember_optim_row_sums(ember_optimizer_kind kind)
{
    return kind == EMBER_OPT_ROWWISE_ADAGRAD || kind == EMBER_OPT_ROWWISE_ADAM ? 1
           : kind == EMBER_OPT_LAMB || kind == EMBER_OPT_LARS                 ? 2
                                                                              : 0;
}

static inline void ember_optim_row(const ember_optim_step *o, int32_t dim, float *restrict w,
                                   float *restrict state, float *restrict g)
{
    ember_optim_decay(o, dim, w, g);
    ember_optim_shrink(o, dim, w);
    switch (o->kind) {
    case EMBER_OPT_SGD:
#pragma omp simd
        for (int32_t k = 0; k < dim; k++)
            w[k] -= o->lr * g[k];
        break;
    case EMBER_OPT_ADAGRAD:
#pragma omp simd
        for (int32_t k = 0; k < dim; k++) {
            float s = state[k] + g[k] * g[k];
            state[k] = s;
            w[k] -= o->lr * g[k] / (sqrtf(s) + o->eps);
        }
        break;
    case EMBER_OPT_ROWWISE_ADAGRAD:
        ember_optim_rowwise(o, dim, w, state, g, ember_optim_sumsq(g, dim) / (float)dim);
        break;
    case EMBER_OPT_ADAM: {
        float *m = state, *v = state + dim;
        float b1 = o->beta1, b2 = o->beta2;
#pragma omp simd
        for (int32_t k = 0; k < dim; k++) {
            float mk = b1 * m[k] + (1.0f - b1) * g[k];
            float vk = b2 * v[k] + (1.0f - b2) * g[k] * g[k];
            m[k] = mk;
            v[k] = vk;
            w[k] -= o->adam_step * mk / (sqrtf(vk) + o->eps);
        }
        break;
    }
    case EMBER_OPT_FTRL:
        ember_optim_ftrl(o, dim, w, state, state + dim, g);
        break;
    case EMBER_OPT_ROWWISE_ADAM:
        ember_optim_rowwise_adam(o, dim, w, state, state + dim, g, ember_optim_sumsq(g, dim) / (float)dim);
        break;
    case EMBER_OPT_LAMB:
        ember_optim_lamb_direction(o, dim, w, state, state + dim, g);
        ember_optim_lamb_step(o, dim, w, g, ember_optim_sumsq(w, dim), ember_optim_sumsq(g, dim));
        break;
    case EMBER_OPT_LARS:
        ember_optim_lars_step(o, dim, w, state, g, ember_optim_sumsq(w, dim), ember_optim_sumsq(g, dim));
        break;
    case EMBER_OPT_MOMENTUM: {
        float mu = o->momentum;
        if (o->nesterov) {
#pragma omp simd
            for (int32_t k = 0; k < dim; k++) {
                float b = mu * state[k] + g[k];
                state[k] = b;
                w[k] -= o->lr * (g[k] + mu * b);
            }
        } else {
#pragma omp simd
            for (int32_t k = 0; k < dim; k++) {
                float b = mu * state[k] + g[k];
                state[k] = b;
                w[k] -= o->lr * b;
            }
        }
        break;
    }
    }
}

#endif
