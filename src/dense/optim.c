/*
 * optim.c: SGD and Adam on the dense model's flat parameter vector.
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
    float *state; /* Adam: m [n] then v [n]; NULL for SGD */
};

dense_optim_config dense_optim_config_default(dense_optim_kind kind)
{
    dense_optim_config c = {kind, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f};
    if (kind == DENSE_ADAM)
        c.lr = 0.001f;
    return c;
}

int dense_optim_create(const dense_optim_config *cfg, int64_t n, dense_optim **out)
{
    *out = NULL;
    if (n < 0 || (cfg->kind != DENSE_SGD && cfg->kind != DENSE_ADAM))
        return EMBER_EINVAL;
    dense_optim *o = calloc(1, sizeof *o);
    if (!o)
        return EMBER_ENOMEM;
    o->cfg = *cfg;
    o->n = n;
    o->lr_scale = 1.0f;
    if (cfg->kind == DENSE_ADAM) {
        o->state = calloc((size_t)(2 * n + 1), sizeof *o->state);
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
    const float b1 = o->cfg.beta1, b2 = o->cfg.beta2, eps = o->cfg.eps;
    double t = (double)o->step;
    double corr = sqrt(1.0 - pow((double)b2, t)) / (1.0 - pow((double)b1, t));
    const float step = (float)(lr * corr);
    float *m = o->state, *v = o->state + n;
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > (1 << 15))
    for (int64_t i = 0; i < n; i++) {
        float g = grads[i] + wd * params[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        params[i] -= step * m[i] / (sqrtf(v[i]) + eps);
    }
}

float *dense_optim_state(dense_optim *o, int64_t *floats, int64_t *step)
{
    if (floats)
        *floats = o->cfg.kind == DENSE_ADAM ? 2 : 0;
    if (step)
        *step = o->step;
    return o->state;
}

void dense_optim_set_step(dense_optim *o, int64_t step) { o->step = step; }
