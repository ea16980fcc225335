/*
 * dlrm_run.c: the dense model's forward and backward passes (dense.h),
 * block by block over the layers of layers.h; the model's shape, its
 * parameters and activation views are dlrm.c's (dlrm_impl.h).
 *
 * Threads.  A batch is cut into chunks of DLRM_CHUNK samples, a size fixed
 * here and not derived from the thread count, and each layer runs chunk by
 * chunk over the model's OpenMP threads (dlrm_set_threads), every chunk's GEMMs on the
 * calling thread (one BLAS thread).  Rows are independent in the forward
 * pass and in the input gradients; a chunk's weight and bias gradients go
 * to its own row of cgrad and are then added to grads chunk by chunk in
 * chunk order, each element on its own (chunks go in groups of DLRM_SLOTS,
 * so cgrad holds DLRM_SLOTS x the largest layer, whatever the batch).  So every
 * bit is the same for any thread count.  With more than one BLAS thread
 * the chunks run one after another and BLAS splits each GEMM itself (the
 * pthread OpenBLAS pool would be entered by two threads at once otherwise):
 * the bits then depend on the BLAS thread count, as dense.h says.
 */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "dense/dlrm_impl.h"
#include "ember.h"

/* Threads for nc chunks: the model's, one when BLAS runs its own. */
static int team(const dlrm *m, int32_t nc)
{
    int blas = m->blas_threads > 0 ? m->blas_threads : openblas_get_num_threads();
    int t = blas > 1 ? 1 : m->threads > 0 ? m->threads : omp_get_max_threads();
    return t < nc ? t : nc > 0 ? nc : 1;
}

/* OpenBLAS's thread count is the process's: the model's is applied for the
 * span of one forward or backward, only when the two differ (a handle that
 * set the process's at its open pays nothing), and the caller's put back. */
static int32_t blas_enter(const dlrm *m)
{
    int32_t was = openblas_get_num_threads();
    if (m->blas_threads > 0 && was != m->blas_threads)
        openblas_set_num_threads(m->blas_threads);
    return was;
}

static void blas_leave(const dlrm *m, int32_t was)
{
    if (m->blas_threads > 0 && was != m->blas_threads)
        openblas_set_num_threads(was < 1 ? 1 : was);
}

static void progress(dlrm *m)
{
    if (m->progress)
        m->progress(m->progress_arg);
}

/* y = layer L of x for B rows, then the activation unless it is the logit
 * layer (its input kept in pre[L] when the activation needs it). */
static void layer_forward(dlrm *m, int32_t L, int32_t B, const float *x, float *y)
{
    const int32_t nc = num_chunks(B), in = m->in[L], out = m->out[L], act = L < m->nl - 1;
    const float *W = m->params + m->w_off[L], *bias = m->params + m->b_off[L];
    const dense_activation kind = m->cfg.activation;
    float *lin = act && m->pre[L] ? m->pre[L] : y;
#pragma omp parallel for schedule(static) num_threads(team(m, nc))
    for (int32_t c = 0; c < nc; c++) {
        const int32_t lo = CHUNK_LO(c), n = CHUNK_N(c, B);
        dense_linear_forward(n, in, out, x + (int64_t)lo * in, W, bias, lin + (int64_t)lo * out);
        if (act)
            dense_act_forward(kind, (int64_t)n * out, lin + (int64_t)lo * out, y + (int64_t)lo * out);
    }
    progress(m);
}


/* Where block b reads its input and keeps its output (the logit layer's
 * output is the caller's).  A cross block's carry [x_l | x0] is two views:
 * this one (x_l) and v (x0). */
static float *block_in(dlrm *m, int32_t b)
{
    const int32_t L = block_layer(m, b), l = block_cross(m, b);
    if (l >= 0)
        return l ? m->xc[l - 1] : m->v;
    return b == m->nb ? m->act[m->nb - 1] : L == 0 ? m->x0 : L == m->nb ? m->z : m->act[L - 1];
}

static float *block_out(dlrm *m, int32_t b)
{
    const int32_t L = block_layer(m, b), l = block_cross(m, b);
    return L >= 0 ? m->act[L] : l >= 0 ? m->xc[l] : m->ncross ? m->v : m->z;
}

/* The interaction block: v = [bottom output, pooled], then z (DOT); CAT's z
 * is v, DCN's cross layers are blocks of their own. */
static void interaction_forward(dlrm *m, int32_t B, const float *pooled)
{
    const int32_t nb = m->nb, d = m->cfg.emb_dim, pw = m->vw - d, nc = num_chunks(B);
#pragma omp parallel for schedule(static) num_threads(team(m, nc))
    for (int32_t c = 0; c < nc; c++) {
        const int32_t lo = CHUNK_LO(c), n = CHUNK_N(c, B);
        for (int32_t s = lo; s < lo + n; s++) {
            memcpy(m->v + (int64_t)s * m->vw, m->act[nb - 1] + (int64_t)s * d, (size_t)d * sizeof(float));
            memcpy(m->v + (int64_t)s * m->vw + d, pooled + (int64_t)s * pw, (size_t)pw * sizeof(float));
        }
        if (!m->ncross)
            dense_interact_forward(m->cfg.interaction, n, m->cfg.num_sparse, d, m->v + (int64_t)lo * m->vw,
                                   m->z + (int64_t)lo * m->width);
    }
}

/* Cross layer l: x_(l+1) = cross_l(x_l) with x_0 = v. */
static void cross_forward(dlrm *m, int32_t B, int32_t l)
{
    const int32_t nc = num_chunks(B);
#pragma omp parallel for schedule(static) num_threads(team(m, nc))
    for (int32_t c = 0; c < nc; c++) {
        const int32_t lo = CHUNK_LO(c), n = CHUNK_N(c, B);
        const int64_t r0 = (int64_t)lo * m->vw;
        dense_cross_forward(n, m->vw, m->crank, m->params + m->c_off[l], m->v + r0, (l ? m->xc[l - 1] : m->v) + r0,
                            m->ch[l] + (int64_t)lo * m->crank, m->cu[l] + r0, m->xc[l] + r0);
    }
    progress(m);
}

/* Blocks b0 .. b1-1 forward on B > 0 rows (activations reserved). */
static void forward_blocks(dlrm *m, int32_t B, int32_t b0, int32_t b1, const float *in, const float *pooled,
                           float *out)
{
    const int32_t nblocks = m->nblocks, lin = block_cross(m, b0), lout = block_cross(m, b1 - 1);
    float *x = block_in(m, b0);
    const size_t n0 = (size_t)B * (size_t)m->vw;
    if (lin > 0) { /* the carry [x_l | x0]: x0 is v */
        memcpy(x, in, n0 * sizeof(float));
        memcpy(m->v, in + n0, n0 * sizeof(float));
    } else if (x != in) {
        memcpy(x, in, (size_t)B * (size_t)dlrm_block_in_width(m, b0) * sizeof(float));
    }
    for (int32_t b = b0; b < b1; b++) {
        const int32_t L = block_layer(m, b);
        if (b == m->nb)
            interaction_forward(m, B, pooled);
        else if (L < 0)
            cross_forward(m, B, block_cross(m, b));
        else
            layer_forward(m, L, B, block_in(m, b), b == nblocks - 1 ? out : block_out(m, b));
    }
    if (b1 == nblocks)
        return;
    const size_t n = (size_t)B * (size_t)(lout >= 0 ? m->vw : dlrm_block_out_width(m, b1 - 1));
    memcpy(out, block_out(m, b1 - 1), n * sizeof(float));
    if (lout >= 0 && lout < m->ncross - 1) /* the carry's x0 */
        memcpy(out + n, m->v, n * sizeof(float));
}

/* Every block of [b0, b1) held here. */
static int holds_range(const dlrm *m, int32_t b0, int32_t b1)
{
    for (int32_t b = b0; b < b1; b++)
        if (!m->held[b])
            return 0;
    return 1;
}

int dlrm_forward_blocks(dlrm *m, int32_t B, int32_t b0, int32_t b1, const float *in, const float *pooled, float *out)
{
    if (B < 0 || b0 < 0 || b1 > m->nblocks || b0 >= b1 || !holds_range(m, b0, b1) || dlrm_reserve(m, B))
        return EMBER_EINVAL;
    m->B = B;
    if (B == 0)
        return 0;
    int32_t blas = blas_enter(m);
    forward_blocks(m, B, b0, b1, in, pooled, out);
    blas_leave(m, blas);
    return 0;
}

int dlrm_forward(dlrm *m, int32_t B, const float *dense, const float *pooled, float *logit)
{
    return dlrm_forward_blocks(m, B, 0, m->nblocks, dense, pooled, logit);
}

/* grads[i] += the rows of cgrad of chunks c0 .. c1-1, in chunk order,
 * i < len: the same additions as all chunks at once, in less memory. */
static void add_chunk_grads(dlrm *m, float *grads, int64_t len, int32_t c0, int32_t c1)
{
    const float *cg = m->cgrad;
    const int64_t stride = m->max_layer;
#pragma omp parallel for schedule(static) num_threads(team(m, c1 - c0)) if (len * (c1 - c0) >= 16384)
    for (int64_t i = 0; i < len; i++) {
        float g = grads[i];
        for (int32_t c = 0; c < c1 - c0; c++)
            g += cg[c * stride + i];
        grads[i] = g;
    }
}

/* A chunk's share of a parameter block's backward: writes the chunk's
 * gradient of the block into g (zeroed) and its rows' input gradients. */
typedef void (*chunk_backward_fn)(dlrm *m, const void *ctx, int32_t lo, int32_t n, float *g);

/* Runs body over the last forward's chunks on the team, groups of
 * DLRM_SLOTS at a time, and adds each chunk's gradient to grads[off ..
 * off + len) in chunk order: the same additions as all chunks at once, in
 * less memory, and the same bits for any thread count. */
static void grads_by_chunks(dlrm *m, int64_t off, int64_t len, chunk_backward_fn body, const void *ctx)
{
    const int32_t B = m->B, nc = num_chunks(B);
    for (int32_t c0 = 0; c0 < nc; c0 += DLRM_SLOTS) {
        const int32_t c1 = nc - c0 < DLRM_SLOTS ? nc : c0 + DLRM_SLOTS;
#pragma omp parallel for schedule(static) num_threads(team(m, c1 - c0))
        for (int32_t c = c0; c < c1; c++) {
            float *g = m->cgrad + (c - c0) * m->max_layer;
            memset(g, 0, (size_t)len * sizeof *g);
            body(m, ctx, CHUNK_LO(c), CHUNK_N(c, B), g);
        }
        add_chunk_grads(m, m->grads + off, len, c0, c1);
    }
}

typedef struct layer_ctx {
    int32_t L;
    int activated;
    const float *x;
    float *dy, *dx;
} layer_ctx;

/* dy through the activation after L, then L's weight and bias gradients
 * into g and dx = dL/dx for the chunk's rows. */
static void layer_chunk(dlrm *m, const void *ctx, int32_t lo, int32_t n, float *g)
{
    const layer_ctx *k = ctx;
    const int32_t in = m->in[k->L], out = m->out[k->L];
    const int64_t r0 = (int64_t)lo * out;
    float *dyc = k->dy + r0;
    if (k->activated)
        dense_act_backward(m->cfg.activation, (int64_t)n * out, m->pre[k->L] ? m->pre[k->L] + r0 : NULL,
                           m->act[k->L] + r0, dyc);
    dense_linear_backward(n, in, out, k->x + (int64_t)lo * in, m->params + m->w_off[k->L], dyc, g,
                          g + (int64_t)out * in, k->dx ? k->dx + (int64_t)lo * in : NULL);
}

/* Layer L's backward for the last forward's rows: dy first through the
 * activation after L (activated: 0 for the logit layer), then grads of L
 * += the chunks' own in chunk order; dx = dL/dx (NULL: not needed). */
static void layer_backward(dlrm *m, int32_t L, int activated, const float *x, float *dy, float *dx)
{
    const layer_ctx k = {L, activated, x, dy, dx};
    grads_by_chunks(m, m->w_off[L], m->b_off[L] + m->out[L] - m->w_off[L], layer_chunk, &k);
    progress(m);
}

typedef struct cross_ctx {
    int32_t l;
    const float *dy;
    float *dx;
} cross_ctx;

/* Cross layer l's backward for the chunk's rows; the last layer first
 * zeroes the rows of dv, into which every layer adds its x0 share. */
static void cross_chunk(dlrm *m, const void *ctx, int32_t lo, int32_t n, float *g)
{
    const cross_ctx *k = ctx;
    const int32_t w = m->vw, r = m->crank, l = k->l;
    const int64_t r0 = (int64_t)lo * w, h0 = (int64_t)lo * r;
    if (l == m->ncross - 1)
        memset(m->dv + r0, 0, (size_t)n * (size_t)w * sizeof(float));
    dense_cross_backward(n, w, r, m->params + m->c_off[l], m->v + r0, (l ? m->xc[l - 1] : m->v) + r0,
                         m->ch[l] + h0, m->cu[l] + r0, k->dy + r0, g, m->dv + r0, m->cdu + r0, m->cdh + h0,
                         k->dx + r0);
}

/* Cross block l's backward from dy, x_(l+1)'s gradient: its grads, its x0
 * share added into dv (the last layer zeroes dv first), dx_l into the other
 * of g0 and g1.  Cross layer 0 then adds its dx into dv, which becomes v's
 * gradient (v is both x_0 and every layer's x0).  Returns where the input's
 * gradient is: dx_l, or dv for layer 0. */
static float *cross_block_backward(dlrm *m, int32_t l, const float *dy)
{
    const int32_t B = m->B, nc = num_chunks(B), w = m->vw;
    const cross_ctx k = {l, dy, dy == m->g0 ? m->g1 : m->g0};
    grads_by_chunks(m, m->c_off[l], dense_cross_params(w, m->crank), cross_chunk, &k);
    progress(m);
    if (l > 0)
        return k.dx;
#pragma omp parallel for schedule(static) num_threads(team(m, nc))
    for (int32_t c = 0; c < nc; c++)
        for (int64_t i = (int64_t)CHUNK_LO(c) * w; i < (int64_t)(CHUNK_LO(c) + CHUNK_N(c, B)) * w; i++)
            m->dv[i] = m->dv[i] + k.dx[i];
    return m->dv;
}

/* The interaction block backward from its output's gradient (dz; DCN's in
 * dv): dv, split into the bottom output's gradient (g0) and d_pooled. */
static void interaction_backward(dlrm *m, float *d_pooled)
{
    const int32_t B = m->B, d = m->cfg.emb_dim, pw = m->vw - d, nc = num_chunks(B);
#pragma omp parallel for schedule(static) num_threads(team(m, nc))
    for (int32_t c = 0; c < nc; c++) {
        const int32_t lo = CHUNK_LO(c), n = CHUNK_N(c, B);
        if (!m->ncross)
            dense_interact_backward(m->cfg.interaction, n, m->cfg.num_sparse, d, m->v + (int64_t)lo * m->vw,
                                    m->dz + (int64_t)lo * m->width, m->dv + (int64_t)lo * m->vw);
        for (int32_t s = lo; s < lo + n; s++) {
            const float *row = m->dv + (int64_t)s * m->vw;
            memcpy(m->g0 + (int64_t)s * d, row, (size_t)d * sizeof(float));
            if (d_pooled)
                memcpy(d_pooled + (int64_t)s * pw, row + d, (size_t)pw * sizeof(float));
        }
    }
}

/* Blocks b1-1 .. b0 backward on the last forward's B > 0 rows. */
static void backward_blocks(dlrm *m, int32_t b0, int32_t b1, const float *dout, float *din, float *d_pooled)
{
    const int32_t B = m->B, nb = m->nb, lout = block_cross(m, b1 - 1), lin = block_cross(m, b0);
    const size_t nv = (size_t)B * (size_t)m->vw;
    /* dy: the gradient of block b's output; the logit layer leaves it alone,
     * any other block's is a buffer of ours (activations change it in place):
     * the interaction's dz (DCN: dv), the last cross layer's dz, else g0, and
     * a cross carry's x0 part goes to dv */
    float *dy = (float *)dout;
    if (b1 < m->nblocks) {
        dy = b1 - 1 == nb ? (m->ncross ? m->dv : m->dz) : lout >= 0 && lout == m->ncross - 1 ? m->dz : m->g0;
        const int two = lout >= 0 && lout < m->ncross - 1;
        memcpy(dy, dout, (two ? nv : (size_t)B * (size_t)dlrm_block_out_width(m, b1 - 1)) * sizeof(float));
        if (two)
            memcpy(m->dv, dout + nv, nv * sizeof(float));
    }
    for (int32_t b = b1 - 1; b >= b0; b--) {
        const int want_dx = b > b0 || (din && b0 > 0);
        const int32_t L = block_layer(m, b), l = block_cross(m, b);
        if (b == nb) {
            interaction_backward(m, d_pooled);
            dy = m->g0;
        } else if (l >= 0) {
            dy = cross_block_backward(m, l, dy);
        } else {
            float *dx = !want_dx ? NULL : L == nb ? m->dz : dy == m->g0 ? m->g1 : m->g0;
            layer_backward(m, L, L < m->nl - 1, block_in(m, b), dy, dx);
            dy = dx;
        }
    }
    if (!din || b0 == 0)
        return;
    memcpy(din, dy, (lin > 0 ? nv : (size_t)B * (size_t)dlrm_block_in_width(m, b0)) * sizeof(float));
    if (lin > 0) /* the carry's x0 part: the x0 shares of the layers above */
        memcpy(din + nv, m->dv, nv * sizeof(float));
}

void dlrm_backward_blocks(dlrm *m, int32_t b0, int32_t b1, const float *dout, float *din, float *d_pooled)
{
    if (m->B == 0)
        return;
    EMBER_ASSERT(m->cap >= m->B && b0 >= 0 && b0 < b1 && b1 <= m->nblocks && holds_range(m, b0, b1));
    int32_t blas = blas_enter(m);
    backward_blocks(m, b0, b1, dout, din, d_pooled);
    blas_leave(m, blas);
}

void dlrm_backward(dlrm *m, const float *dlogit, float *d_pooled)
{
    dlrm_backward_blocks(m, 0, m->nblocks, dlogit, NULL, d_pooled);
}
