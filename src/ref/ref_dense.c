/*
 * ref_dense.c: the dense model of docs/training.md ("Dense model") in
 * double, literally: one loop per formula, the parameter layout worked out
 * here again rather than taken from src/dense, and the forward recomputed
 * inside backward so that nothing is cached.  Slow and obviously right;
 * test_dense checks it against central differences and src/dense against it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/rng.h"
#include "ref/ref.h"

#define REF_LAYERS (2 * DENSE_MAX_LAYERS + 1)

/* The activation of dense.h, in double: y = f(x); dx = f'(x) dy. */
static double act(dense_activation k, double x)
{
    switch (k) {
    case DENSE_ACT_RELU: return x > 0 ? x : 0;
    case DENSE_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case DENSE_ACT_SILU: return x / (1 + exp(-x));
    case DENSE_ACT_TANH: return tanh(x);
    default: return x;
    }
}

static double act_slope(dense_activation k, double x)
{
    switch (k) {
    case DENSE_ACT_RELU: return x > 0 ? 1 : 0;
    case DENSE_ACT_GELU: return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    case DENSE_ACT_SILU: {
        double sg = 1 / (1 + exp(-x));
        return sg + x * sg * (1 - sg);
    }
    case DENSE_ACT_TANH: return 1 - tanh(x) * tanh(x);
    default: return 1;
    }
}

void ref_dense_act(dense_activation kind, int64_t n, const double *x, double *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = act(kind, x[i]);
}

void ref_dense_act_backward(dense_activation kind, int64_t n, const double *x, const double *dy, double *dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = act_slope(kind, x[i]) * dy[i];
}

static void *ref_alloc(int64_t n, size_t size)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), size);
    EMBER_ASSERT(p != NULL);
    return p;
}

void ref_dense_linear(int32_t B, int32_t in, int32_t out, const double *x, const double *W,
                      const double *b, double *y)
{
    for (int32_t s = 0; s < B; s++)
        for (int32_t o = 0; o < out; o++) {
            double sum = b[o];
            for (int32_t i = 0; i < in; i++)
                sum += x[s * in + i] * W[o * in + i];
            y[s * out + o] = sum;
        }
}

void ref_dense_linear_backward(int32_t B, int32_t in, int32_t out, const double *x, const double *W,
                               const double *dy, double *dW, double *db, double *dx)
{
    for (int32_t o = 0; o < out; o++)
        for (int32_t i = 0; i < in; i++)
            for (int32_t s = 0; s < B; s++)
                dW[o * in + i] += dy[s * out + o] * x[s * in + i];
    for (int32_t o = 0; o < out; o++)
        for (int32_t s = 0; s < B; s++)
            db[o] += dy[s * out + o];
    if (dx)
        for (int32_t s = 0; s < B; s++)
            for (int32_t i = 0; i < in; i++) {
                double sum = 0;
                for (int32_t o = 0; o < out; o++)
                    sum += dy[s * out + o] * W[o * in + i];
                dx[s * in + i] = sum;
            }
}

void ref_dense_relu(int64_t n, const double *x, double *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
}

void ref_dense_relu_backward(int64_t n, const double *x, const double *dy, double *dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = x[i] > 0 ? dy[i] : 0;
}

int64_t ref_dense_interact_width(dense_interaction kind, int32_t F, int32_t d)
{
    int64_t pairs = 0;
    for (int32_t i = 0; i <= F; i++)
        for (int32_t j = i + 1; j <= F; j++)
            pairs++;
    return kind == DENSE_INTERACT_DOT ? d + pairs : (int64_t)d * (F + 1); /* CAT, DCN */
}

/* Vector k of sample s: 0 the bottom output, 1..F the pooled embeddings. */
static const double *vec(const double *bottom, const double *pooled, int32_t F, int32_t d, int32_t s,
                         int32_t k)
{
    return k == 0 ? bottom + (int64_t)s * d : pooled + ((int64_t)s * F + (k - 1)) * d;
}

void ref_dense_interact(dense_interaction kind, int32_t B, int32_t F, int32_t d, const double *bottom,
                        const double *pooled, double *z)
{
    int64_t w = ref_dense_interact_width(kind, F, d);
    for (int32_t s = 0; s < B; s++) {
        double *zs = z + s * w;
        int64_t p = 0;
        for (int32_t k = 0; k < d; k++)
            zs[p++] = bottom[(int64_t)s * d + k];
        if (kind == DENSE_INTERACT_CAT) {
            for (int32_t f = 1; f <= F; f++)
                for (int32_t k = 0; k < d; k++)
                    zs[p++] = vec(bottom, pooled, F, d, s, f)[k];
        } else {
            for (int32_t i = 0; i <= F; i++)
                for (int32_t j = i + 1; j <= F; j++) {
                    double sum = 0;
                    for (int32_t k = 0; k < d; k++)
                        sum += vec(bottom, pooled, F, d, s, i)[k] * vec(bottom, pooled, F, d, s, j)[k];
                    zs[p++] = sum;
                }
        }
    }
}

void ref_dense_interact_backward(dense_interaction kind, int32_t B, int32_t F, int32_t d,
                                 const double *bottom, const double *pooled, const double *dz,
                                 double *d_bottom, double *d_pooled)
{
    int64_t w = ref_dense_interact_width(kind, F, d);
    memset(d_bottom, 0, (size_t)B * (size_t)d * sizeof *d_bottom);
    memset(d_pooled, 0, (size_t)B * (size_t)F * (size_t)d * sizeof *d_pooled);
    for (int32_t s = 0; s < B; s++) {
        const double *dzs = dz + s * w;
        int64_t p = 0;
        double *dv[4097];
        for (int32_t k = 0; k <= F && k < 4097; k++)
            dv[k] = (double *)vec(d_bottom, d_pooled, F, d, s, k);
        for (int32_t k = 0; k < d; k++)
            dv[0][k] += dzs[p++];
        if (kind == DENSE_INTERACT_CAT) {
            for (int32_t f = 1; f <= F; f++)
                for (int32_t k = 0; k < d; k++)
                    dv[f][k] += dzs[p++];
        } else {
            for (int32_t i = 0; i <= F; i++)
                for (int32_t j = i + 1; j <= F; j++) {
                    for (int32_t k = 0; k < d; k++) {
                        dv[i][k] += dzs[p] * vec(bottom, pooled, F, d, s, j)[k];
                        dv[j][k] += dzs[p] * vec(bottom, pooled, F, d, s, i)[k];
                    }
                    p++;
                }
        }
    }
}

int64_t ref_dense_cross_params(int32_t w, int32_t rank)
{
    return rank > 0 ? (int64_t)rank * w + (int64_t)w * rank + w : (int64_t)w * w + w;
}

/* u [w] (and h [rank]) of one row x. */
static void cross_u(int32_t w, int32_t rank, const double *p, const double *x, double *h, double *u)
{
    const double *b = p + ref_dense_cross_params(w, rank) - w;
    if (rank > 0) {
        const double *V = p, *U = p + (int64_t)rank * w;
        for (int32_t k = 0; k < rank; k++) {
            h[k] = 0;
            for (int32_t i = 0; i < w; i++)
                h[k] += V[(int64_t)k * w + i] * x[i];
        }
        for (int32_t o = 0; o < w; o++) {
            u[o] = b[o];
            for (int32_t k = 0; k < rank; k++)
                u[o] += U[(int64_t)o * rank + k] * h[k];
        }
    } else {
        for (int32_t o = 0; o < w; o++) {
            u[o] = b[o];
            for (int32_t i = 0; i < w; i++)
                u[o] += p[(int64_t)o * w + i] * x[i];
        }
    }
}

void ref_dense_cross(int32_t B, int32_t w, int32_t rank, const double *p, const double *x0, const double *x,
                     double *y)
{
    double *h = ref_alloc(rank, sizeof *h), *u = ref_alloc(w, sizeof *u);
    for (int32_t s = 0; s < B; s++) {
        const int64_t r = (int64_t)s * w;
        cross_u(w, rank, p, x + r, h, u);
        for (int32_t o = 0; o < w; o++)
            y[r + o] = x0[r + o] * u[o] + x[r + o];
    }
    free(h), free(u);
}

void ref_dense_cross_backward(int32_t B, int32_t w, int32_t rank, const double *p, const double *x0,
                              const double *x, const double *dy, double *dp, double *dx0, double *dx)
{
    double *h = ref_alloc(rank, sizeof *h), *u = ref_alloc(w, sizeof *u);
    double *du = ref_alloc(w, sizeof *du), *dh = ref_alloc(rank, sizeof *dh);
    double *db = dp + ref_dense_cross_params(w, rank) - w;
    for (int32_t s = 0; s < B; s++) {
        const int64_t r = (int64_t)s * w;
        cross_u(w, rank, p, x + r, h, u);
        for (int32_t o = 0; o < w; o++) {
            du[o] = dy[r + o] * x0[r + o];
            dx0[r + o] += dy[r + o] * u[o];
            db[o] += du[o];
        }
        if (rank > 0) {
            const double *V = p, *U = p + (int64_t)rank * w;
            double *dV = dp, *dU = dp + (int64_t)rank * w;
            for (int32_t k = 0; k < rank; k++) {
                dh[k] = 0;
                for (int32_t o = 0; o < w; o++) {
                    dh[k] += du[o] * U[(int64_t)o * rank + k];
                    dU[(int64_t)o * rank + k] += du[o] * h[k];
                }
            }
            for (int32_t i = 0; i < w; i++) {
                dx[r + i] = dy[r + i];
                for (int32_t k = 0; k < rank; k++) {
                    dx[r + i] += dh[k] * V[(int64_t)k * w + i];
                    dV[(int64_t)k * w + i] += dh[k] * x[r + i];
                }
            }
        } else {
            for (int32_t i = 0; i < w; i++) {
                dx[r + i] = dy[r + i];
                for (int32_t o = 0; o < w; o++) {
                    dx[r + i] += du[o] * p[(int64_t)o * w + i];
                    dp[(int64_t)o * w + i] += du[o] * x[r + i];
                }
            }
        }
    }
    free(h), free(u), free(du), free(dh);
}

double ref_dense_bce(const double *logit, const double *label, int32_t B, double *dlogit)
{
    double sum = 0;
    for (int32_t s = 0; s < B; s++) {
        double z = logit[s], y = label[s];
        /* -y log(p) - (1 - y) log(1 - p) with p = sigmoid(z), in log-sum-exp form */
        double log_p = z >= 0 ? -log1p(exp(-z)) : z - log1p(exp(z));
        double log_1mp = z >= 0 ? -z - log1p(exp(-z)) : -log1p(exp(z));
        sum += -y * log_p - (1 - y) * log_1mp;
        if (dlogit)
            dlogit[s] = exp(log_p) - y;
    }
    return sum;
}

/* DCN: the cross layers and their width (F+1) d; 0 without DCN. */
static int32_t cross_count(const dlrm_config *c)
{
    return c->interaction == DENSE_INTERACT_DCN ? c->num_cross : 0;
}

static int32_t cross_width(const dlrm_config *c) { return (c->num_sparse + 1) * c->emb_dim; }

/* Layer shapes: bottom layers, top hidden layers, the logit layer (the
 * cross layers' parameters sit between the bottom and the top ones). */
static int32_t shapes(const dlrm_config *c, int32_t *in, int32_t *out)
{
    int32_t n = 0, prev = c->num_dense;
    for (int32_t l = 0; l < c->num_bottom; l++, n++) {
        in[n] = prev;
        out[n] = prev = c->bottom[l];
    }
    prev = (int32_t)ref_dense_interact_width(c->interaction, c->num_sparse, c->emb_dim);
    for (int32_t l = 0; l < c->num_top; l++, n++) {
        in[n] = prev;
        out[n] = prev = c->top[l];
    }
    in[n] = prev;
    out[n] = 1;
    return n + 1;
}

int64_t ref_dlrm_num_params(const dlrm_config *cfg)
{
    int32_t in[REF_LAYERS], out[REF_LAYERS], n = shapes(cfg, in, out);
    int64_t total = 0;
    for (int32_t L = 0; L < n; L++)
        total += (int64_t)out[L] * in[L] + out[L];
    return total + cross_count(cfg) * ref_dense_cross_params(cross_width(cfg), cfg->cross_rank);
}

void ref_dlrm_init(const dlrm_config *cfg, float *params)
{
    int32_t in[REF_LAYERS], out[REF_LAYERS], n = shapes(cfg, in, out);
    uint64_t key = ember_rng_table_key(cfg->seed, DENSE_RNG_NAME);
    for (int32_t L = 0; L < n; L++) {
        for (int32_t l = 0; L == cfg->num_bottom && l < cross_count(cfg); l++) {
            /* W [w][w] (layer 1000 + 2l), or V [r][w] (1000 + 2l) and U [w][r] (1001 + 2l); b = 0 */
            int32_t w = cross_width(cfg), r = cfg->cross_rank;
            int32_t rows[2] = {r > 0 ? r : w, w}, cols[2] = {w, r};
            for (int32_t k = 0; k < (r > 0 ? 2 : 1); k++) {
                float limit = sqrtf(6.0f / (float)(rows[k] + cols[k]));
                for (int64_t e = 0; e < (int64_t)rows[k] * cols[k]; e++)
                    *params++ = (2.0f * ember_rng_uniform(key, (uint64_t)(1000 + 2 * l + k), (uint64_t)e, 0) - 1.0f) *
                                limit;
            }
            for (int32_t o = 0; o < w; o++)
                *params++ = 0.0f;
        }
        float limit = sqrtf(6.0f / (float)(in[L] + out[L]));
        for (int32_t o = 0; o < out[L]; o++)
            for (int32_t i = 0; i < in[L]; i++) {
                uint64_t k = (uint64_t)o * (uint64_t)in[L] + (uint64_t)i;
                *params++ = (2.0f * ember_rng_uniform(key, (uint64_t)L, k, 0) - 1.0f) * limit;
            }
        for (int32_t o = 0; o < out[L]; o++)
            *params++ = 0.0f;
    }
}

/* Forward keeping every layer's pre-activation (pre[L]) and input (x[L]). */
typedef struct ref_acts {
    int32_t n, in[REF_LAYERS], out[REF_LAYERS];
    const double *W[REF_LAYERS], *b[REF_LAYERS];
    double *x[REF_LAYERS], *pre[REF_LAYERS], *post[REF_LAYERS];
    double *bottom, *z;                   /* z: the interaction's output (DCN: x_0) */
    int32_t nc;                           /* DCN: cross layers, their parameters, */
    const double *cp[DENSE_MAX_CROSS];    /* and outputs cx[l + 1] (cx[0] = z)    */
    double *cx[DENSE_MAX_CROSS + 1];
} ref_acts;

static void acts_forward(ref_acts *a, const dlrm_config *c, const double *params, int32_t B,
                         const double *dense, const double *pooled)
{
    a->n = shapes(c, a->in, a->out);
    a->nc = cross_count(c);
    for (int32_t L = 0; L < a->n; L++) {
        for (int32_t l = 0; L == c->num_bottom && l < a->nc; l++) {
            a->cp[l] = params;
            params += ref_dense_cross_params(cross_width(c), c->cross_rank);
        }
        a->W[L] = params;
        params += (int64_t)a->out[L] * a->in[L];
        a->b[L] = params;
        params += a->out[L];
    }
    const double *x = dense;
    for (int32_t L = 0; L < a->n; L++) {
        if (L == c->num_bottom) { /* the interaction sits between bottom and top */
            a->bottom = (double *)x;
            a->z = ref_alloc((int64_t)B * a->in[L], sizeof(double));
            ref_dense_interact(a->nc ? DENSE_INTERACT_CAT : c->interaction, B, c->num_sparse, c->emb_dim,
                               a->bottom, pooled, a->z);
            x = a->cx[0] = a->z;
            for (int32_t l = 0; l < a->nc; l++) { /* DCN: x_(l+1) = cross_l(x_0 = z, x_l) */
                a->cx[l + 1] = ref_alloc((int64_t)B * a->in[L], sizeof(double));
                ref_dense_cross(B, a->in[L], c->cross_rank, a->cp[l], a->z, a->cx[l], a->cx[l + 1]);
                x = a->cx[l + 1];
            }
        }
        a->x[L] = (double *)x;
        a->pre[L] = ref_alloc((int64_t)B * a->out[L], sizeof(double));
        a->post[L] = ref_alloc((int64_t)B * a->out[L], sizeof(double));
        ref_dense_linear(B, a->in[L], a->out[L], x, a->W[L], a->b[L], a->pre[L]);
        if (L < a->n - 1)
            ref_dense_act(c->activation, (int64_t)B * a->out[L], a->pre[L], a->post[L]);
        else
            memcpy(a->post[L], a->pre[L], (size_t)B * sizeof(double));
        x = a->post[L];
    }
}

static void acts_free(ref_acts *a)
{
    for (int32_t L = 0; L < a->n; L++) {
        free(a->pre[L]);
        free(a->post[L]);
    }
    for (int32_t l = 1; l <= a->nc; l++)
        free(a->cx[l]);
    free(a->z);
}

void ref_dlrm_forward(const dlrm_config *cfg, const double *params, int32_t B, const double *dense,
                      const double *pooled, double *logit)
{
    ref_acts a;
    memset(&a, 0, sizeof a);
    acts_forward(&a, cfg, params, B, dense, pooled);
    memcpy(logit, a.post[a.n - 1], (size_t)B * sizeof *logit);
    acts_free(&a);
}

void ref_dlrm_backward(const dlrm_config *cfg, const double *params, int32_t B, const double *dense,
                       const double *pooled, const double *dlogit, double *grads, double *d_pooled,
                       double *d_dense)
{
    ref_acts a;
    memset(&a, 0, sizeof a);
    acts_forward(&a, cfg, params, B, dense, pooled);
    int32_t F = cfg->num_sparse, d = cfg->emb_dim;
    double *dpool = ref_alloc((int64_t)B * F * d, sizeof(double));
    double *dy = ref_alloc(B, sizeof(double));
    memcpy(dy, dlogit, (size_t)B * sizeof *dy);
    const int64_t cross_len = ref_dense_cross_params(cross_width(cfg), cfg->cross_rank);
    for (int32_t L = a.n - 1; L >= 0; L--) {
        int64_t off = L > cfg->num_bottom - 1 ? a.nc * cross_len : 0;
        for (int32_t k = 0; k < L; k++)
            off += (int64_t)a.out[k] * a.in[k] + a.out[k];
        if (L < a.n - 1) /* through the activation */
            ref_dense_act_backward(cfg->activation, (int64_t)B * a.out[L], a.pre[L], dy, dy);
        double *dx = ref_alloc((int64_t)B * a.in[L], sizeof(double));
        ref_dense_linear_backward(B, a.in[L], a.out[L], a.x[L], a.W[L], dy,
                                  grads + off, grads + off + (int64_t)a.out[L] * a.in[L], dx);
        free(dy);
        dy = dx;
        if (L == cfg->num_bottom && a.nc) { /* DCN: back through the cross layers to x_0 */
            int64_t nz = (int64_t)B * a.in[L], coff = off - a.nc * cross_len;
            double *dx0 = ref_alloc(nz, sizeof(double));
            for (int32_t l = a.nc - 1; l >= 0; l--) {
                double *dxl = ref_alloc(nz, sizeof(double));
                ref_dense_cross_backward(B, a.in[L], cfg->cross_rank, a.cp[l], a.z, a.cx[l], dy,
                                         grads + coff + l * cross_len, dx0, dxl);
                free(dy);
                dy = dxl;
            }
            for (int64_t i = 0; i < nz; i++) /* x_0 is layer 0's input and every layer's x0 */
                dy[i] += dx0[i];
            free(dx0);
        }
        if (L == cfg->num_bottom) { /* back through the interaction */
            double *dbottom = ref_alloc((int64_t)B * d, sizeof(double));
            ref_dense_interact_backward(a.nc ? DENSE_INTERACT_CAT : cfg->interaction, B, F, d, a.bottom, pooled,
                                        dy, dbottom, dpool);
            free(dy);
            dy = dbottom;
        }
    }
    if (d_pooled)
        memcpy(d_pooled, dpool, (size_t)B * (size_t)F * (size_t)d * sizeof *dpool);
    if (d_dense)
        memcpy(d_dense, dy, (size_t)B * (size_t)cfg->num_dense * sizeof *dy);
    free(dy);
    free(dpool);
    acts_free(&a);
}

double ref_dlrm_kink_margin(const dlrm_config *cfg, const double *params, int32_t B,
                            const double *dense, const double *pooled)
{
    int64_t n = ref_dlrm_num_params(cfg), nd = (int64_t)B * cfg->num_dense;
    int64_t np = (int64_t)B * cfg->num_sparse * cfg->emb_dim;
    double *pa = ref_alloc(n, sizeof(double)), *xa = ref_alloc(nd, sizeof(double));
    double *ea = ref_alloc(np, sizeof(double)), margin = INFINITY;
    for (int64_t i = 0; i < n; i++)
        pa[i] = fabs(params[i]);
    for (int64_t i = 0; i < nd; i++)
        xa[i] = fabs(dense[i]);
    for (int64_t i = 0; i < np; i++)
        ea[i] = fabs(pooled[i]);
    ref_acts a, m;
    if (cfg->activation != DENSE_ACT_RELU) { /* smooth: no kink anywhere */
        free(pa), free(xa), free(ea);
        return INFINITY;
    }
    memset(&a, 0, sizeof a);
    memset(&m, 0, sizeof m);
    acts_forward(&a, cfg, params, B, dense, pooled);
    acts_forward(&m, cfg, pa, B, xa, ea);
    for (int32_t L = 0; L < a.n - 1; L++)
        for (int64_t i = 0; i < (int64_t)B * a.out[L]; i++)
            if (m.pre[L][i] > 0 && fabs(a.pre[L][i]) / m.pre[L][i] < margin)
                margin = fabs(a.pre[L][i]) / m.pre[L][i];
    acts_free(&a);
    acts_free(&m);
    free(pa), free(xa), free(ea);
    return margin;
}

void ref_dense_optim_step(const dense_optim_config *c, int64_t t, int64_t n, float *params, float *m,
                          float *v, const float *grads)
{
    double corr = sqrt(1.0 - pow((double)c->beta2, (double)t)) / (1.0 - pow((double)c->beta1, (double)t));
    for (int64_t i = 0; i < n; i++) {
        float g = grads[i] + (c->kind == DENSE_ADAMW ? 0.0f : c->weight_decay) * params[i];
        if (c->kind == DENSE_SGD) {
            params[i] -= c->lr * g;
        } else if (c->kind == DENSE_MOMENTUM) { /* m holds the velocity */
            m[i] = c->momentum * m[i] + g;
            params[i] -= c->lr * (c->nesterov ? g + c->momentum * m[i] : m[i]);
        } else {
            if (c->kind == DENSE_ADAMW)
                params[i] *= 1.0f - c->lr * c->weight_decay;
            m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * g;
            v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * g * g;
            params[i] -= (float)(c->lr * corr) * m[i] / (sqrtf(v[i]) + c->eps);
        }
    }
}
