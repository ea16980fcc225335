/*
 * xchg_bwd.c: backward of one physical table over a world of W > 1 ranks.
 *
 * The requester sends, for every segment it sent an owner in forward, the
 * segment's upstream gradient row (COLUMN: the owner's slice, zero-padded;
 * REPLICATED: every segment to every rank).  The owner already holds the
 * matching entries in `rr`, in the global batch's order, so its backward is
 * the world-of-one backward over rr with the received gradients: sort by
 * row (stable), sum in order, fused optimizer (step/backward.c).  No counts
 * travel: both sides know them from forward.
 */
#include <string.h>

#include "core/reserve.h"
#include "exchange/exchange.h"
#include "exchange/xchg.h"


static int64_t sum_over_rounds(const ember_xchg *x, const int64_t *counts, int32_t peer, int field)
{
    int64_t n = 0;
    for (int32_t m = 0; m < x->rounds; m++)
        n += counts[((int64_t)m * x->W + peer) * XC_N + field];
    return n;
}

int ember_dist_send_grads(ember_collection *c, int32_t p, const float *dp, const float *ds)
{
    ember_ptable *pt = &c->ptables[p];
    ember_xchg *x = pt->xchg;
    const ember_route *r = &pt->route;
    int32_t W = c->world->size, dim = pt->dim, ld = pt->local_dim;
    int all = pt->placement == EMBER_PLACE_COLUMN || pt->placement == EMBER_PLACE_REPLICATED;
    int64_t sfl = 0, rfl = 0;
    for (int32_t d = 0; d < W; d++) {
        int64_t segs = sum_over_rounds(x, x->sent, d, XC_SEGS);
        x->scnt[d] = segs * ld * 4;
        x->sdsp[d] = pt->placement == EMBER_PLACE_REPLICATED ? 0 : sfl * 4;
        sfl = pt->placement == EMBER_PLACE_REPLICATED ? segs * ld : sfl + segs * ld;
        x->rcnt[d] = sum_over_rounds(x, x->recv, d, XC_SEGS) * ld * 4;
        x->rdsp[d] = rfl * 4;
        rfl += x->rcnt[d] / 4;
    }
    int st = EMBER_OK;
    if (ember_reserve((void **)&x->grad_out, &x->grad_out_cap, sfl + 1, sizeof(float)) ||
        ember_reserve((void **)&x->grad_in, &x->grad_in_cap, rfl + 1, sizeof(float)))
        st = ember_fail(c, EMBER_ENOMEM, "out of memory for %lld gradient floats", (long long)(sfl + rfl));
    if ((st = ember_dist_agree(c, st, NULL)) != EMBER_OK)
        return st;
    float *o = x->grad_out;
    if (pt->placement == EMBER_PLACE_REPLICATED) {
        for (int64_t g = 0; g < r->nseg; g++, o += dim)
            memcpy(o, ember_seg_out(r, g, (float *)dp, (float *)ds), sizeof(float) * (size_t)dim);
    } else if (all) { /* COLUMN: slice d of every segment, zero-padded */
        for (int32_t d = 0; d < W; d++) {
            int32_t width = dim - d * ld < ld ? dim - d * ld : ld;
            width = width < 0 ? 0 : width;
            for (int64_t g = 0; g < r->nseg; g++, o += ld) {
                memset(o, 0, sizeof(float) * (size_t)ld);
                memcpy(o, ember_seg_out(r, g, (float *)dp, (float *)ds) + d * ld, sizeof(float) * (size_t)width);
            }
        }
    } else { /* ROW / TABLE: the segments sent to d, round by round */
        for (int32_t d = 0; d < W; d++)
            for (int32_t m = 0; m < x->rounds; m++) {
                int64_t l0 = x->seg_list_at[(int64_t)m * W + d], l1 = x->seg_list_at[(int64_t)m * W + d + 1];
                for (int64_t i = l0; i < l1; i++, o += dim)
                    memcpy(o, ember_seg_out(r, x->seg_list[i], (float *)dp, (float *)ds),
                           sizeof(float) * (size_t)dim);
            }
    }
    if (ember_comm_alltoallv(c->world, x->grad_out, x->scnt, x->sdsp, x->grad_in, x->rcnt, x->rdsp) != EMBER_OK)
        return ember_dist_comm_failed(c);
    x->grads_ready = 1;
    return EMBER_OK;
}
