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
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "dense/layers.h"
#include "ember.h"

#define DLRM_LAYERS (2 * DENSE_MAX_LAYERS + 1)
#define DLRM_BLOCKS DENSE_MAX_BLOCKS
#define DLRM_MAX_WIDTH 65536
#define DLRM_CHUNK 256 /* samples per chunk: fixed, so results do not depend on threads */
#define DLRM_SLOTS 16  /* chunks whose grads are held at once (cgrad's rows) */

struct dlrm {
    dlrm_config cfg;
    int32_t nb, nl;          /* bottom layers; all layers (nb + num_top + 1) */
    int32_t in[DLRM_LAYERS], out[DLRM_LAYERS];
    int64_t w_off[DLRM_LAYERS], b_off[DLRM_LAYERS];
    int32_t vw, width, maxw; /* (F+1) d; interaction width; widest layer end */
    int64_t num_params, max_layer; /* parameters held; the largest held layer's */
    int64_t full_params;     /* the whole model's parameters                  */
    int32_t ncross, crank;   /* DCN cross layers and their rank (0: none)    */
    int64_t c_off[DENSE_MAX_CROSS]; /* each cross layer's parameters          */
    int32_t nblocks;         /* nl + 1 + ncross                              */
    uint8_t held[DLRM_BLOCKS];     /* the blocks whose parameters are here    */
    int64_t canon[DLRM_BLOCKS];    /* a block's offset in the whole model's
                                      vector; w_off, b_off and c_off are in
                                      the held vector (the same when whole)   */
    float *params, *grads;
    int shares;              /* 1: params and grads are another model's     */
    int32_t threads;         /* dlrm_set_threads; 0: omp_get_max_threads()  */
    int32_t blas_threads;    /* dlrm_set_threads; 0: OpenBLAS's as it is    */

    void (*progress)(void *); /* called after every layer (dlrm_set_progress) */
    void *progress_arg;
    int32_t cap, B;          /* activations sized for cap; last forward's B */
    float *slab;
    float *x0, *act[DLRM_LAYERS], *pre[DLRM_LAYERS], *v, *z, *dz, *dv, *g0, *g1;
    float *xc[DENSE_MAX_CROSS], *cu[DENSE_MAX_CROSS], *ch[DENSE_MAX_CROSS], *cdu, *cdh;
    float *cgrad;            /* [slots][max_layer]: a group of chunks' grads */
};

static int32_t num_chunks(int32_t B) { return (B + DLRM_CHUNK - 1) / DLRM_CHUNK; }

/* cgrad's rows for B samples: a chunk each, at most DLRM_SLOTS. */
static int32_t num_slots(int32_t B) { return num_chunks(B) < DLRM_SLOTS ? num_chunks(B) : DLRM_SLOTS; }

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

static int fail(char *err, size_t errlen, const char *msg, int32_t value)
{
    if (err && errlen)
        snprintf(err, errlen, msg, value);
    return EMBER_EINVAL;
}

static int validate(const dlrm_config *c, char *err, size_t errlen)
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
        if (!m->held[L < m->nb ? L : L + 1 + m->ncross])
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

/* The blocks (dense.h): bottom layers 0 .. nb-1, the interaction nb, DCN's
 * cross layers nb+1 .. nb+ncross, then the top layers and the logit.  A
 * layer block's layer, or -1; a cross block's cross layer, or -1. */
static int32_t block_layer(const dlrm *m, int32_t b)
{
    return b < m->nb ? b : b > m->nb + m->ncross ? b - 1 - m->ncross : -1;
}

static int32_t block_cross(const dlrm *m, int32_t b)
{
    return b > m->nb && b <= m->nb + m->ncross ? b - m->nb - 1 : -1;
}

/* Block b's range of the parameter vector, from the offsets as they are
 * (the whole model's before hold()). */
static void block_range(const dlrm *m, int32_t b, int64_t *off, int64_t *len)
{
    const int32_t L = block_layer(m, b), l = block_cross(m, b);
    if (L >= 0) {
        *off = m->w_off[L];
        *len = m->b_off[L] + m->out[L] - m->w_off[L];
    } else if (l >= 0) {
        *off = m->c_off[l];
        *len = dense_cross_params(m->vw, m->crank);
    } else { /* the interaction: nothing, where the top layers begin */
        *off = m->ncross ? m->c_off[0] : m->b_off[m->nb - 1] + m->out[m->nb - 1];
        *len = 0;
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
        int64_t off = m->canon[b], len;
        block_range(m, b, &off, &len);
        m->held[b] = held[b] != 0;
        const int64_t shift = at - off;
        const int32_t l = b - m->nb - 1, L = b < m->nb ? b : b - 1 - m->ncross;
        if (b == m->nb || !m->held[b])
            continue; /* the interaction holds nothing; offsets of blocks not held are never read */
        if (l >= 0 && l < m->ncross) {
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

/* Whether block b exists and is held. */
static int held_block(const dlrm *m, int32_t b) { return b >= 0 && b < m->nblocks && m->held[b]; }

/* The activation views of B samples carved from slab (NULL: none, only
 * counted), for the held blocks only: a view is there when a held block
 * writes or reads it.  Returns the floats carved. */
static int64_t carve_views(dlrm *m, float *slab, int32_t B)
{
    const int dot = m->cfg.interaction == DENSE_INTERACT_DOT, keep = dense_act_keeps_pre(m->cfg.activation);
    const int32_t nb = m->nb, top0 = nb + 1 + m->ncross; /* the first top layer's block */
    int any_cross = 0;
    for (int32_t l = 0; l < m->ncross; l++)
        any_cross |= held_block(m, nb + 1 + l);
    int64_t at = 0;
#define CARVE(view, need, floats) \
    ((view) = (need) && slab ? slab + at : NULL, at += (need) ? (int64_t)B * (floats) : 0)
    CARVE(m->x0, held_block(m, 0), m->cfg.num_dense);
    for (int32_t L = 0; L < m->nl - 1; L++) { /* layer L's block and the block after it */
        const int32_t bl = L < nb ? L : L + 1 + m->ncross;
        CARVE(m->act[L], held_block(m, bl) || held_block(m, bl + 1), m->out[L]);
        CARVE(m->pre[L], keep && held_block(m, bl), m->out[L]);
    }
    /* v: the interaction's, every cross layer's x0, and CAT's z (the top's input) */
    const int vneed = held_block(m, nb) || any_cross ||
                      (m->cfg.interaction == DENSE_INTERACT_CAT && held_block(m, top0));
    CARVE(m->v, vneed, m->vw);
    CARVE(m->dv, vneed, m->vw);
    if (dot) {
        CARVE(m->z, held_block(m, nb) || held_block(m, top0), m->width);
        CARVE(m->dz, held_block(m, nb) || held_block(m, top0), m->width);
    } else if (m->ncross) {
        for (int32_t l = 0; l < m->ncross; l++) { /* x_(l+1) is read by the next cross layer or the top */
            const int32_t bl = nb + 1 + l;
            CARVE(m->xc[l], held_block(m, bl) || held_block(m, bl + 1), m->vw);
            CARVE(m->cu[l], held_block(m, bl), m->vw);
            CARVE(m->ch[l], held_block(m, bl), m->crank);
        }
        CARVE(m->cdu, any_cross, m->vw);
        CARVE(m->cdh, any_cross, m->crank);
        CARVE(m->dz, any_cross || held_block(m, top0), m->vw);
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

/* Floats of activations per sample (reserve()'s slab); m's views are
 * cleared. */
static int64_t activation_floats(dlrm *m) { return carve_views(m, NULL, 1); }

int64_t dlrm_memory_bytes(const dlrm_config *cfg, const uint8_t *held, int32_t batch, int32_t state_floats)
{
    if (validate(cfg, NULL, 0))
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
    if (validate(cfg, err, errlen))
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

/* Carves the activation slab for B samples (grown, never shrunk). */
static int reserve(dlrm *m, int32_t B)
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

/* Chunk c of B: its first sample and its size. */
#define CHUNK_LO(c) ((int32_t)(c) * DLRM_CHUNK)
#define CHUNK_N(c, B) ((B) - CHUNK_LO(c) < DLRM_CHUNK ? (B) - CHUNK_LO(c) : DLRM_CHUNK)

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

int64_t dlrm_block_local(const dlrm *m, int32_t b)
{
    int64_t off, len;
    if (!dlrm_holds(m, b))
        return -1;
    block_range(m, b, &off, &len);
    return off;
}

int64_t dlrm_full_params(const dlrm *m) { return m->full_params; }

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
    if (B < 0 || b0 < 0 || b1 > m->nblocks || b0 >= b1 || !holds_range(m, b0, b1) || reserve(m, B))
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
