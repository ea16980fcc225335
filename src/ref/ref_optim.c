/*
 * ref_optim.c: the optimizer formulas of ember.h for one row, literally.
 *
 * Weight decay is folded into g first (L2, as torch), or shrinks w first
 * (decoupled, as torch's AdamW), then one of SGD,
 * Adagrad, row-wise Adagrad (FBGEMM: one accumulator per row, mean of g^2)
 * or lazy Adam with the collection's global step t in the bias correction
 * (torch SparseAdam), or SGD with momentum (torch.optim.SGD, dampening 0,
 * on the batch's rows only), or FTRL-Proximal (McMahan et al., per
 * coordinate), or FBGEMM's partial row-wise Adam, LAMB and LARS-SGD (their
 * norms over the row summed in double, naively).  Float math except the
 * bias factors, which are taken in double as torch does on the host.
 */
#include <math.h>
#include <stdlib.h>

#include "core/assert.h"
#include "ref/ref.h"

void ref_optimizer_apply(const ember_optimizer *o, int64_t t, int32_t dim, float *w, float *state,
                         const float *g_in)
{
    float *g = malloc((size_t)dim * sizeof *g);
    EMBER_ASSERT(g != NULL);
    float *gc = malloc((size_t)dim * sizeof *gc); /* the clipped gradient */
    EMBER_ASSERT(gc != NULL);
    for (int32_t k = 0; k < dim; k++) {
        gc[k] = g_in[k];
        if (o->clip_value > 0 && gc[k] > o->clip_value)
            gc[k] = o->clip_value;
        if (o->clip_value > 0 && gc[k] < -o->clip_value)
            gc[k] = -o->clip_value;
    }
    if (o->clip_norm > 0) {
        double sq = 0;
        for (int32_t k = 0; k < dim; k++)
            sq += (double)gc[k] * gc[k];
        if (sqrt(sq) > o->clip_norm)
            for (int32_t k = 0; k < dim; k++)
                gc[k] = (float)(gc[k] * (o->clip_norm / sqrt(sq)));
    }
    g_in = gc;
    int decoupled = o->weight_decay_mode == EMBER_DECAY_DECOUPLED;
    /* LAMB's decoupled decay and LARS's L2 decay are their own (below) */
    int inner = (o->kind == EMBER_OPT_LAMB && decoupled) || (o->kind == EMBER_OPT_LARS && !decoupled);
    float wd = inner ? 0.0f : o->weight_decay, inner_wd = inner ? o->weight_decay : 0.0f;
    for (int32_t k = 0; k < dim; k++) {
        g[k] = decoupled ? g_in[k] : g_in[k] + wd * w[k];
        if (decoupled)
            w[k] *= 1.0f - o->lr * wd;
    }

    switch (o->kind) {
    case EMBER_OPT_SGD:
        for (int32_t k = 0; k < dim; k++)
            w[k] -= o->lr * g[k];
        break;
    case EMBER_OPT_ADAGRAD:
        for (int32_t k = 0; k < dim; k++) {
            state[k] += g[k] * g[k];
            w[k] -= o->lr * g[k] / (sqrtf(state[k]) + o->eps);
        }
        break;
    case EMBER_OPT_ROWWISE_ADAGRAD: {
        float sum = 0.0f;
        for (int32_t k = 0; k < dim; k++)
            sum += g[k] * g[k];
        state[0] += sum / (float)dim;
        float denom = sqrtf(state[0]) + o->eps;
        for (int32_t k = 0; k < dim; k++)
            w[k] -= o->lr * g[k] / denom;
        break;
    }
    case EMBER_OPT_ADAM: {
        float *m = state, *v = state + dim;
        double corr = sqrt(1.0 - pow((double)o->beta2, (double)t)) /
                      (1.0 - pow((double)o->beta1, (double)t));
        float step = (float)(o->lr * corr);
        for (int32_t k = 0; k < dim; k++) {
            m[k] = o->beta1 * m[k] + (1.0f - o->beta1) * g[k];
            v[k] = o->beta2 * v[k] + (1.0f - o->beta2) * g[k] * g[k];
            w[k] -= step * m[k] / (sqrtf(v[k]) + o->eps);
        }
        break;
    }
    case EMBER_OPT_FTRL: {
        float *z = state, *n = state + dim;
        for (int32_t k = 0; k < dim; k++) {
            float g2 = g[k] * g[k], n_new = n[k] + g2;
            float root_new = o->lr_power == -0.5f ? sqrtf(n_new) : powf(n_new, -o->lr_power);
            /* n_new^-p - n^-p; for p = -0.5 in the form that keeps its digits */
            float diff = o->lr_power == -0.5f ? (g2 > 0.0f ? g2 / (root_new + sqrtf(n[k])) : 0.0f)
                         : n_new > n[k]        ? root_new - powf(n[k], -o->lr_power)
                                               : 0.0f; /* g = 0, or n infinite (a half state's overflow) */
            float sigma = diff / o->lr;
            z[k] = z[k] + g[k] - sigma * w[k];
            n[k] = n_new;
            if (fabsf(z[k]) <= o->l1)
                w[k] = 0.0f;
            else
                w[k] = -(z[k] - (z[k] < 0 ? -o->l1 : o->l1)) / ((o->beta + root_new) / o->lr + o->l2);
        }
        break;
    }
    case EMBER_OPT_MOMENTUM:
        for (int32_t k = 0; k < dim; k++) {
            state[k] = o->momentum * state[k] + g[k];
            float d = o->nesterov ? g[k] + o->momentum * state[k] : state[k];
            w[k] -= o->lr * d;
        }
        break;
    case EMBER_OPT_ROWWISE_ADAM: {
        float *m = state, *v = state + dim, sum = 0.0f;
        float bc1 = (float)(1.0 - pow((double)o->beta1, (double)t));
        float bc2 = (float)(1.0 - pow((double)o->beta2, (double)t));
        for (int32_t k = 0; k < dim; k++)
            sum += g[k] * g[k];
        v[0] = o->beta2 * v[0] + (1.0f - o->beta2) * (sum / (float)dim);
        float denom = sqrtf(v[0] / bc2) + o->eps;
        for (int32_t k = 0; k < dim; k++) {
            m[k] = o->beta1 * m[k] + (1.0f - o->beta1) * g[k];
            w[k] -= o->lr * (m[k] / bc1) / denom;
        }
        break;
    }
    case EMBER_OPT_LAMB: {
        float *m = state, *v = state + dim;
        float bc1 = (float)(1.0 - pow((double)o->beta1, (double)t));
        float bc2 = (float)(1.0 - pow((double)o->beta2, (double)t));
        double wsq = 0, rsq = 0;
        for (int32_t k = 0; k < dim; k++) {
            m[k] = o->beta1 * m[k] + (1.0f - o->beta1) * g[k];
            v[k] = o->beta2 * v[k] + (1.0f - o->beta2) * g[k] * g[k];
            g[k] = (m[k] / bc1) / (sqrtf(v[k] / bc2) + o->eps) + inner_wd * w[k]; /* r */
            wsq += (double)w[k] * w[k];
            rsq += (double)g[k] * g[k];
        }
        double ratio = wsq > 0 && rsq > 0 ? sqrt(wsq) / sqrt(rsq) : 1.0;
        for (int32_t k = 0; k < dim; k++)
            w[k] -= (float)(o->lr * ratio) * g[k];
        break;
    }
    case EMBER_OPT_LARS: {
        double wsq = 0, gsq = 0;
        for (int32_t k = 0; k < dim; k++) {
            wsq += (double)w[k] * w[k];
            gsq += (double)g[k] * g[k];
        }
        double den = sqrt(gsq) + inner_wd * sqrt(wsq);
        float rate = (float)(o->lr * (wsq > 0 && den > 0 ? o->eta * sqrt(wsq) / den : 1.0));
        for (int32_t k = 0; k < dim; k++) {
            state[k] = o->momentum * state[k] + rate * (g[k] + inner_wd * w[k]);
            w[k] -= state[k];
        }
        break;
    }
    }
    free(g);
    free(gc);
}
