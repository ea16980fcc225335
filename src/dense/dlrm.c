/*
 * dlrm.c: the DLRM dense model (Naumov et al. 2019) over the layers of
 * layers.h: bottom MLP over the dense features, interaction with the pooled
 * embeddings (DOT, CAT, or DCN: concat then DCNv2 cross layers), top MLP to
 * one logit.
 *
 * Layers are numbered L = 0 .. nb-1 (bottom, the activation after every
 * one, including the last, as DLRM does) then nb .. nb+nt (top: the
 * activation after the nt hidden layers, none after the final 1-wide logit
 * layer).  Parameters, one flat vector, layer after layer: W_L [out][in]
 * then b_L [out], DCN's cross layers (cross.c's layout) between the bottom
 * and the top layers; grads the same.
 *
 * Blocks and parts.  The chain of blocks (dense.h) runs over those layers:
 * the bottom layers, the interaction, each cross layer, the top layers.  A
 * part model (a pipeline stage's) holds some blocks only: hold() moves the
 * offsets of its blocks into a vector of theirs alone (canon[] keeps where
 * each block sits in the whole model's), and the activation views are
 * carved only where a held block writes or reads them (carve_views).
 * Activations live in one slab carved into named views for the largest
 * batch seen, so a warm model allocates nothing per step:
 *   x0  [B][num_dense]       copy of the dense input (layer 0's x)
 *   act [B][out_L]           activated output of every layer but the logit
 *   pre [B][out_L]           its pre-activation (GELU and SiLU only)
 *   v   [B][(F+1) d]         [bottom output, pooled]: the interaction input
 *   xc, cu, ch               DCN: each cross layer's output, u and h
 *   z   [B][width]           interaction output (v itself for CAT, the last
 *                            cross layer's output for DCN)
 *   dz, dv, g0, g1           gradients flowing back (dz is dv for CAT)
 *
 * The passes themselves are dlrm_run.c; dlrm_impl.h holds the struct both
 * files see.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "dense/dlrm_impl.h"
#include "ember.h"

static int fail(char *err, size_t errlen, const char *msg, int32_t value)
{
    if (err && errlen)
        snprintf(err, errlen, msg, value);
    return EMBER_EINVAL;
}

int dlrm_validate(const dlrm_config *c, char *err, size_t errlen)
{
    if (c->num_dense < 1 || c->num_dense > DLRM_MAX_WIDTH)
        return fail(err, errlen, "dense model: num_dense %d outside [1, 65536]", c->num_dense);
    if (c->num_sparse < 1 || c->num_sparse > 4096)
        return fail(err, errlen, "dense model: num_sparse %d outside [1, 4096]", c->num_sparse);
    if (c->emb_dim < 1 || c->emb_dim > DLRM_MAX_WIDTH)
        return fail(err, errlen, "dense model: emb_dim %d outside [1, 65536]", c->emb_dim);
    if (c->num_bottom < 1 || c->num_bottom > DENSE_MAX_LAYERS)
        return fail(err, errlen, "dense model: %d bottom layers (1 to 64 allowed)", c->num_bottom);
    if (c->num_top < 0 || c->num_top > DENSE_MAX_LAYERS)
        return fail(err, errlen, "dense model: %d top hidden layers (0 to 64 allowed)", c->num_top);
    for (int32_t l = 0; l < c->num_bottom; l++)
        if (c->bottom[l] < 1 || c->bottom[l] > DLRM_MAX_WIDTH)
            return fail(err, errlen, "dense model: bottom layer width %d outside [1, 65536]",
                        c->bottom[l]);
    for (int32_t l = 0; l < c->num_top; l++)
        if (c->top[l] < 1 || c->top[l] > DLRM_MAX_WIDTH)
            return fail(err, errlen, "dense model: top layer width %d outside [1, 65536]",
                        c->top[l]);
    if (c->bottom[c->num_bottom - 1] != c->emb_dim) {
        if (err && errlen)
            snprintf(err, errlen, "dense model: the last bottom layer is %d wide, emb_dim is %d",
                     c->bottom[c->num_bottom - 1], c->emb_dim);
        return EMBER_EINVAL;
    }
    if (c->interaction != DENSE_INTERACT_DOT && c->interaction != DENSE_INTERACT_CAT &&
        c->interaction != DENSE_INTERACT_DCN)
        return fail(err, errlen, "dense model: unknown interaction %d", (int32_t)c->interaction);
    if (c->interaction == DENSE_INTERACT_DCN && (c->num_cross < 1 || c->num_cross > DENSE_MAX_CROSS))
        return fail(err, errlen, "dense model: %d cross layers (1 to 16 with interaction dcn)", c->num_cross);
    if (c->interaction != DENSE_INTERACT_DCN && (c->num_cross != 0 || c->cross_rank != 0))
        return fail(err, errlen, "dense model: cross layers need interaction dcn (num_cross %d)", c->num_cross);
    if (c->cross_rank < 0 || c->cross_rank > DLRM_MAX_WIDTH)
        return fail(err, errlen, "dense model: cross rank %d outside [0, 65536]", c->cross_rank);
    if ((unsigned)c->activation > DENSE_ACT_NONE)
        return fail(err, errlen, "dense model: unknown activation %d", (int32_t)c->activation);
    if (dense_interact_width(c->interaction, c->num_sparse, c->emb_dim) > (1 << 24))
        return fail(err, errlen, "dense model: interaction wider than 2^24 (num_sparse %d)",
                    c->num_sparse);
    return 0;
}

/* Glorot-uniform W and zero b, each element a function of (seed, L, k). */
static void init_params(dlrm *m)
{
    uint64_t key = ember_rng_table_key(m->cfg.seed, DENSE_RNG_NAME);
    for (int32_t L = 0; L < m->nl; L++) {
        if (!m->held[layer_block(m, L)])
            continue;
        int64_t n = (int64_t)m->out[L] * m->in[L];
        float limit = sqrtf(6.0f / (float)(m->in[L] + m->out[L]));
        float *W = m->params + m->w_off[L];
        for (int64_t k = 0; k < n; k++)
            W[k] = (2.0f * ember_rng_uniform(key, (uint64_t)L, (uint64_t)k, 0) - 1.0f) * limit;
        memset(m->params + m->b_off[L], 0, (size_t)m->out[L] * sizeof(float));
    }
    /* cross layer l: W (or V) as layer 1000 + 2l, U as 1001 + 2l, b = 0 */
    for (int32_t l = 0; l < m->ncross; l++) {
        if (!m->held[m->nb + 1 + l])
            continue;
        const int32_t w = m->vw, r = m->crank;
        float *P = m->params + m->c_off[l];
        const int32_t rows[2] = {r > 0 ? r : w, w}, cols[2] = {w, r > 0 ? r : w};
        for (int32_t k = 0; k < (r > 0 ? 2 : 1); k++) {
            const int64_t n = (int64_t)rows[k] * cols[k];
            const float limit = sqrtf(6.0f / (float)(rows[k] + cols[k]));
            for (int64_t e = 0; e < n; e++)
                P[e] = (2.0f * ember_rng_uniform(key, (uint64_t)(1000 + 2 * l + k), (uint64_t)e, 0) - 1.0f) * limit;
            P += n;
        }
        memset(P, 0, (size_t)w * sizeof(float));
    }
}

/* The layer shapes, offsets and widths of cfg into m (no allocation). */
static void layout(dlrm *m, const dlrm_config *cfg)
{
    m->cfg = *cfg;
    m->nb = cfg->num_bottom;
    m->nl = cfg->num_bottom + cfg->num_top + 1;
    m->vw = (cfg->num_sparse + 1) * cfg->emb_dim;
    m->width = (int32_t)dense_interact_width(cfg->interaction, cfg->num_sparse, cfg->emb_dim);
    m->ncross = cfg->interaction == DENSE_INTERACT_DCN ? cfg->num_cross : 0;
    m->crank = cfg->cross_rank;
    int32_t prev = cfg->num_dense;
    for (int32_t L = 0; L < m->nl; L++) {
        if (L == m->nb) {
            prev = m->width;
            for (int32_t l = 0; l < m->ncross; l++) { /* between the bottom and the top layers */
                const int64_t n = dense_cross_params(m->vw, m->crank);
                m->c_off[l] = m->num_params;
                m->num_params += n;
                m->max_layer = n > m->max_layer ? n : m->max_layer;
            }
        }
        int32_t o = L < m->nb ? cfg->bottom[L] : L < m->nl - 1 ? cfg->top[L - m->nb] : 1;
        m->in[L] = prev;
        m->out[L] = o;
        m->w_off[L] = m->num_params;
        m->b_off[L] = m->num_params + (int64_t)o * prev;
        m->num_params = m->b_off[L] + o;
        if (m->num_params - m->w_off[L] > m->max_layer)
            m->max_layer = m->num_params - m->w_off[L];
        prev = o;
    }
    m->maxw = m->vw;
    for (int32_t L = 0; L < m->nl; L++)
        m->maxw = m->out[L] > m->maxw ? m->out[L] : m->maxw;
    m->nblocks = m->nl + 1 + m->ncross;
    m->full_params = m->num_params;
    for (int32_t b = 0; b < m->nblocks; b++) {
        int64_t len;
        block_range(m, b, &m->canon[b], &len);
        m->local[b] = m->canon[b];
        m->held[b] = 1;
    }
}

/* Keeps the parameters of the blocks held[b] != 0 only (NULL: all): the
 * offsets move to a vector of those blocks, in block order. */
static void hold(dlrm *m, const uint8_t *held)
{
    if (!held)
        return;
    int64_t at = 0;
    m->max_layer = 0;
    for (int32_t b = 0; b < m->nblocks; b++) {
        int64_t off, len;
        block_range(m, b, &off, &len);
        m->held[b] = held[b] != 0;
        m->local[b] = m->held[b] ? at : -1;
        const int64_t shift = at - off;
        const int32_t l = block_cross(m, b), L = block_layer(m, b);
        if (b == m->nb || !m->held[b])
            continue; /* the interaction holds nothing; offsets of blocks not held are never read */
        if (l >= 0) {
            m->c_off[l] += shift;
        } else {
            m->w_off[L] += shift;
            m->b_off[L] += shift;
        }
        at += len;
        m->max_layer = len > m->max_layer ? len : m->max_layer;
    }
    m->num_params = at;
}

/* The activation views of B samples carved from slab (NULL: none, only
 * counted), for the held blocks only: a view is there when a held block
 * writes or reads it.  Returns the floats carved. */
static int64_t carve_views(dlrm *m, float *slab, int32_t B)
{
    const int dot = m->cfg.interaction == DENSE_INTERACT_DOT, keep = dense_act_keeps_pre(m->cfg.activation);
    const int32_t nb = m->nb, top0 = layer_block(m, nb); /* the first top layer's block */
    int any_cross = 0;
    for (int32_t l = 0; l < m->ncross; l++)
        any_cross |= dlrm_holds(m, nb + 1 + l);
    int64_t at = 0;
#define CARVE(view, need, floats) \
    ((view) = (need) && slab ? slab + at : NULL, at += (need) ? (int64_t)B * (floats) : 0)
    CARVE(m->x0, dlrm_holds(m, 0), m->cfg.num_dense);
    for (int32_t L = 0; L < m->nl - 1; L++) { /* layer L's block and the block after it */
        const int32_t bl = layer_block(m, L);
        CARVE(m->act[L], dlrm_holds(m, bl) || dlrm_holds(m, bl + 1), m->out[L]);
        CARVE(m->pre[L], keep && dlrm_holds(m, bl), m->out[L]);
    }
    /* v: the interaction's, every cross layer's x0, and CAT's z (the top's input) */
    const int vneed = dlrm_holds(m, nb) || any_cross ||
                      (m->cfg.interaction == DENSE_INTERACT_CAT && dlrm_holds(m, top0));
    CARVE(m->v, vneed, m->vw);
    CARVE(m->dv, vneed, m->vw);
    if (dot) {
        CARVE(m->z, dlrm_holds(m, nb) || dlrm_holds(m, top0), m->width);
        CARVE(m->dz, dlrm_holds(m, nb) || dlrm_holds(m, top0), m->width);
    } else if (m->ncross) {
        for (int32_t l = 0; l < m->ncross; l++) { /* x_(l+1) is read by the next cross layer or the top */
            const int32_t bl = nb + 1 + l;
            CARVE(m->xc[l], dlrm_holds(m, bl) || dlrm_holds(m, bl + 1), m->vw);
            CARVE(m->cu[l], dlrm_holds(m, bl), m->vw);
            CARVE(m->ch[l], dlrm_holds(m, bl), m->crank);
        }
        CARVE(m->cdu, any_cross, m->vw);
        CARVE(m->cdh, any_cross, m->crank);
        CARVE(m->dz, any_cross || dlrm_holds(m, top0), m->vw);
        m->z = m->xc[m->ncross - 1];
    } else {
        m->z = m->v;
        m->dz = m->dv;
    }
    CARVE(m->g0, 1, m->maxw);
    CARVE(m->g1, 1, m->maxw);
#undef CARVE
    return at;
}

/* Floats of activations per sample (dlrm_reserve's slab); m's views are
 * cleared. */
static int64_t activation_floats(dlrm *m) { return carve_views(m, NULL, 1); }

int64_t dlrm_memory_bytes(const dlrm_config *cfg, const uint8_t *held, int32_t batch, int32_t state_floats)
{
    if (dlrm_validate(cfg, NULL, 0))
        return -1;
    dlrm m;
    memset(&m, 0, sizeof m);
    layout(&m, cfg);
    hold(&m, held);
    return 4 * (m.num_params * (2 + (int64_t)state_floats) + m.max_layer * num_slots(batch) +
                (int64_t)batch * activation_floats(&m));
}

int dlrm_create(const dlrm_config *cfg, dlrm **out, char *err, size_t errlen)
{
    return dlrm_create_part(cfg, NULL, out, err, errlen);
}

int dlrm_create_part(const dlrm_config *cfg, const uint8_t *held, dlrm **out, char *err, size_t errlen)
{
    *out = NULL;
    if (dlrm_validate(cfg, err, errlen))
        return EMBER_EINVAL;
    dlrm *m = calloc(1, sizeof *m);
    if (!m)
        return fail(err, errlen, "dense model: out of memory%.0d", 0);
    layout(m, cfg);
    hold(m, held);
    m->params = malloc((size_t)(m->num_params > 0 ? m->num_params : 1) * sizeof(float));
    m->grads = calloc((size_t)(m->num_params > 0 ? m->num_params : 1), sizeof(float));
    if (!m->params || !m->grads) {
        dlrm_destroy(m);
        return fail(err, errlen, "dense model: out of memory%.0d", 0);
    }
    init_params(m);
    *out = m;
    return 0;
}

int dlrm_create_shared(dlrm *src, dlrm **out)
{
    *out = NULL;
    dlrm *m = calloc(1, sizeof *m);
    if (!m)
        return EMBER_ENOMEM;
    layout(m, &src->cfg);
    hold(m, src->held);
    m->params = src->params;
    m->grads = src->grads;
    m->shares = 1;
    m->progress = src->progress;
    m->progress_arg = src->progress_arg;
    m->threads = src->threads;
    m->blas_threads = src->blas_threads;
    *out = m;
    return 0;
}

void dlrm_set_threads(dlrm *m, int32_t threads, int32_t blas_threads)
{
    m->threads = threads;
    m->blas_threads = blas_threads;
}

void dlrm_get_threads(const dlrm *m, int32_t *threads, int32_t *blas_threads)
{
    *threads = m->threads;
    *blas_threads = m->blas_threads;
}

int64_t dlrm_block_kept_floats(const dlrm *m, int32_t b)
{
    if (b == m->nb) /* v, then z (DOT) */
        return m->vw + (m->cfg.interaction == DENSE_INTERACT_DOT ? m->width : 0);
    if (block_cross(m, b) >= 0) /* the cross layer's output, u and h */
        return 2 * (int64_t)m->vw + m->crank;
    const int32_t L = block_layer(m, b);
    int64_t n = (b == 0 ? m->cfg.num_dense : 0) + (L < m->nl - 1 ? m->out[L] : 0);
    return n + (L < m->nl - 1 && dense_act_keeps_pre(m->cfg.activation) ? m->out[L] : 0);
}

int64_t dlrm_blocks_kept_floats(const dlrm *m, int32_t b0, int32_t b1)
{
    int64_t floats = 0;
    for (int32_t b = b0; b < b1; b++)
        floats += dlrm_block_kept_floats(m, b);
    return floats;
}

void dlrm_destroy(dlrm *m)
{
    if (!m)
        return;
    if (!m->shares) {
        free(m->params);
        free(m->grads);
    }
    free(m->slab);
    free(m->cgrad);
    free(m);
}

const dlrm_config *dlrm_get_config(const dlrm *m) { return &m->cfg; }
int64_t dlrm_num_params(const dlrm *m) { return m->num_params; }
float *dlrm_params(dlrm *m) { return m->params; }
float *dlrm_grads(dlrm *m) { return m->grads; }
int32_t dlrm_interaction_width(const dlrm *m) { return m->width; }

void dlrm_zero_grads(dlrm *m) { memset(m->grads, 0, (size_t)m->num_params * sizeof(float)); }

int dlrm_reserve(dlrm *m, int32_t B)
{
    if (B <= m->cap)
        return 0;
    int64_t per = activation_floats(m);
    float *slab = malloc((size_t)(per * B + 1) * sizeof(float));
    float *cgrad = malloc((size_t)(num_slots(B) * m->max_layer + 1) * sizeof(float));
    if (!slab || !cgrad) {
        free(slab);
        free(cgrad);
        carve_views(m, m->slab, m->cap); /* the old views back */
        return EMBER_ENOMEM;
    }
    free(m->cgrad);
    m->cgrad = cgrad;
    free(m->slab);
    m->slab = slab;
    m->cap = B;
    const int64_t carved = carve_views(m, slab, B);
    EMBER_ASSERT(carved == per * B);
    return 0;
}

void dlrm_get_progress(const dlrm *m, dlrm_progress_hook *out)
{
    out->fn = m->progress;
    out->arg = m->progress_arg;
}

void dlrm_set_progress(dlrm *m, void (*fn)(void *), void *arg)
{
    m->progress = fn;
    m->progress_arg = arg;
}

int32_t dlrm_num_blocks(const dlrm *m) { return m->nblocks; }

int32_t dlrm_config_blocks(const dlrm_config *cfg)
{
    return cfg->num_bottom + 1 + (cfg->interaction == DENSE_INTERACT_DCN ? cfg->num_cross : 0) + cfg->num_top + 1;
}

int32_t dlrm_block_in_width(const dlrm *m, int32_t b)
{
    const int32_t L = block_layer(m, b), l = block_cross(m, b);
    return L >= 0 ? m->in[L] : l >= 0 ? (l ? 2 * m->vw : m->vw) : m->cfg.emb_dim;
}

int32_t dlrm_block_out_width(const dlrm *m, int32_t b)
{
    const int32_t L = block_layer(m, b), l = block_cross(m, b);
    return L >= 0 ? m->out[L] : l >= 0 ? (l < m->ncross - 1 ? 2 * m->vw : m->vw) : m->ncross ? m->vw : m->width;
}

void dlrm_block_params(const dlrm *m, int32_t b, int64_t *off, int64_t *len)
{
    int64_t local;
    block_range(m, b, &local, len);
    *off = m->canon[b];
}

int dlrm_holds(const dlrm *m, int32_t b) { return b >= 0 && b < m->nblocks && m->held[b]; }

int64_t dlrm_block_local(const dlrm *m, int32_t b) { return dlrm_holds(m, b) ? m->local[b] : -1; }

int64_t dlrm_full_params(const dlrm *m) { return m->full_params; }

int32_t dlrm_widest_carry(const dlrm *m)
{
    int32_t w = m->cfg.num_dense; /* block 0's input; every other input is the block before's output */
    for (int32_t b = 0; b < m->nblocks; b++)
        w = dlrm_block_out_width(m, b) > w ? dlrm_block_out_width(m, b) : w;
    return w;
}
