/*
 * dlrm_impl.h: inside a dlrm (dense.h), shared by its making, its shape
 * and its activation views (dlrm.c) and its forward and backward passes
 * (dlrm_run.c).  Nothing outside src/dense/ includes it.
 */
#ifndef EMBER_DENSE_DLRM_IMPL_H
#define EMBER_DENSE_DLRM_IMPL_H

#include <stdint.h>

#include "dense/layers.h"

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
    int64_t local[DLRM_BLOCKS];    /* a held block's offset in the held vector */
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

static inline int32_t num_chunks(int32_t B) { return (B + DLRM_CHUNK - 1) / DLRM_CHUNK; }

/* cgrad's rows for B samples: a chunk each, at most DLRM_SLOTS. */
static inline int32_t num_slots(int32_t B) { return num_chunks(B) < DLRM_SLOTS ? num_chunks(B) : DLRM_SLOTS; }

/* The blocks (dense.h): bottom layers 0 .. nb-1, the interaction nb, DCN's
 * cross layers nb+1 .. nb+ncross, then the top layers and the logit.  A
 * layer block's layer, or -1; a cross block's cross layer, or -1. */
static inline int32_t block_layer(const dlrm *m, int32_t b)
{
    return b < m->nb ? b : b > m->nb + m->ncross ? b - 1 - m->ncross : -1;
}

static inline int32_t block_cross(const dlrm *m, int32_t b)
{
    return b > m->nb && b <= m->nb + m->ncross ? b - m->nb - 1 : -1;
}

/* Layer L's block (block_layer's inverse). */
static inline int32_t layer_block(const dlrm *m, int32_t L) { return L < m->nb ? L : L + 1 + m->ncross; }

/* Block b's range of the parameter vector, from the offsets as they are
 * (the whole model's before hold()). */
static inline void block_range(const dlrm *m, int32_t b, int64_t *off, int64_t *len)
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

/* Chunk c of B: its first sample and its size. */
#define CHUNK_LO(c) ((int32_t)(c) * DLRM_CHUNK)
#define CHUNK_N(c, B) ((B) - CHUNK_LO(c) < DLRM_CHUNK ? (B) - CHUNK_LO(c) : DLRM_CHUNK)

/* The activation slab and the chunks' gradient rows grown to B samples
 * (never shrunk; dlrm.c).  0, or EMBER_ENOMEM with the old ones kept. */
int dlrm_reserve(dlrm *m, int32_t B);

#endif
