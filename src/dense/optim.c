/*
 * optim.c: SGD, momentum, Adam and AdamW on the dense model's flat
 * parameter vector.
 *
 * Purely elementwise (formulas in dense.h), so a static OpenMP split over
 * elements gives the same bits for any thread count.  Adam's bias
 * correction is one factor per step, computed in double and rounded once,
 * as the sparse Adam of src/optim/ does.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "dense/layers.h"
#include "ember.h"

struct dense_optim {
    dense_optim_config cfg;
    int64_t n, step;
    float lr_scale; /* dense_optim_set_lr_scale (1: as configured) */
    int32_t threads; /* dense_optim_set_threads (0: omp_get_max_threads()) */
    float *state; /* Adam, AdamW: m [n] then v [n]; momentum: b [n]; NULL for SGD */
};

dense_optim_config dense_optim_config_default(dense_optim_kind kind)
{
    dense_optim_config c = {kind, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.9f, 0};
    if (kind == DENSE_ADAM || kind == DENSE_ADAMW)
        c.lr = 0.001f;
    if (kind == DENSE_ADAMW)
        c.weight_decay = 0.01f;
    return c;
}

const char *dense_optim_name(dense_optim_kind kind)
{
    static const char *const names[DENSE_OPTIM_KINDS] = {"sgd", "adam", "momentum", "adamw"};
    return (unsigned)kind < DENSE_OPTIM_KINDS ? names[kind] : "?";
}

int dense_optim_state_floats(dense_optim_kind kind)
{
    return kind == DENSE_ADAM || kind == DENSE_ADAMW ? 2 : kind == DENSE_MOMENTUM ? 1 : 0;
}

int dense_optim_create(const dense_optim_config *cfg, int64_t n, dense_optim **out)
{
    *out = NULL;
    if (n < 0 || (unsigned)cfg->kind >= DENSE_OPTIM_KINDS)
        return EMBER_EINVAL;
    dense_optim *o = calloc(1, sizeof *o);
    if (!o)
        return EMBER_ENOMEM;
    o->cfg = *cfg;
    o->n = n;
    o->lr_scale = 1.0f;
    if (dense_optim_state_floats(cfg->kind) > 0) {
        o->state = calloc((size_t)(dense_optim_state_floats(cfg->kind) * n + 1), sizeof *o->state);
        if (!o->state) {
            free(o);
            return EMBER_ENOMEM;
        }
    }
    *out = o;
    return 0;
}

void dense_optim_set_lr_scale(dense_optim *o, float scale) { o->lr_scale = scale; }

void dense_optim_set_threads(dense_optim *o, int32_t threads) { o->threads = threads; }

void dense_optim_destroy(dense_optim *o)
{
    if (!o)
        return;
    free(o->state);
    free(o);
}

void dense_optim_step(dense_optim *o, float *params, const float *grads)
{
    const int64_t n = o->n;
    const float lr = o->cfg.lr * o->lr_scale, wd = o->cfg.weight_decay; /* scale 1: lr's bits */
    const int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    o->step++;
    if (o->cfg.kind == DENSE_SGD) {
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > (1 << 15))
        for (int64_t i = 0; i < n; i++)
            params[i] -= lr * (grads[i] + wd * params[i]);
        return;
    }
    if (o->cfg.kind == DENSE_MOMENTUM) {
        const float mu = o->cfg.momentum;
        const int nesterov = o->cfg.nesterov;
        float *b = o->state;
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > (1 << 15))
        for (int64_t i = 0; i < n; i++) {
            float g = grads[i] + wd * params[i];
            b[i] = mu * b[i] + g;
            params[i] -= lr * (nesterov ? g + mu * b[i] : b[i]);
        }
        return;
    }
    const int decoupled = o->cfg.kind == DENSE_ADAMW;
    const float l2 = decoupled ? 0.0f : wd, shrink = decoupled ? 1.0f - lr * wd : 1.0f;
    const float b1 = o->cfg.beta1, b2 = o->cfg.beta2, eps = o->cfg.eps;
    double t = (double)o->step;
    double corr = sqrt(1.0 - pow((double)b2, t)) / (1.0 - pow((double)b1, t));
    const float step = (float)(lr * corr);
    float *m = o->state, *v = o->state + n;
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > (1 << 15))
    for (int64_t i = 0; i < n; i++) {
        float g = grads[i] + l2 * params[i];
        params[i] *= shrink;
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        params[i] -= step * m[i] / (sqrtf(v[i]) + eps);
    }
}

float *dense_optim_state(dense_optim *o, int64_t *floats, int64_t *step)
{
    if (floats)
        *floats = dense_optim_state_floats(o->cfg.kind);
    if (step)
        *step = o->step;
    return o->state;
}

void dense_optim_set_step(dense_optim *o, int64_t step) { o->step = step; }
