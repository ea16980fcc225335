/*
 * xchg.h: the exchange state of one physical table in a world of W > 1
 * (docs/distributed.md): what this rank sent as a requester, and the route
 * of entries it received as an owner.  Buffers are grow-only.
 */
#ifndef EMBER_DIST_XCHG_H
#define EMBER_DIST_XCHG_H

#include <stdint.h>

#include "comm/comm.h"
#include "prep/route.h"

/* Counts per (round, peer) of one direction, as exchanged. */
enum { XC_SEGS = 0, XC_ENTS, XC_UNIQ, XC_WEIGHTED, XC_STATUS, XC_N };

/* What a started forward has done (ember_dist_forward_start). */
enum { XS_NONE = 0, /* nothing: the finish runs every round            */
       XS_IDS,      /* round 0's ids are in flight                     */
       XS_VECTORS   /* every round looked up; the last vectors in flight */
};

typedef struct ember_xchg {
    int32_t W;
    int32_t rounds;          /* rounds of the current batch               */
    /* requester side */
    int64_t *sent;           /* [rounds][W][XC_N] counts sent               */
    int64_t *seg_list;       /* local segments sent, by (round, dest)       */
    int64_t *seg_list_at;    /* [rounds * W + 1] start of each (round, dest) */
    int64_t seg_list_cap, sent_cap, seg_list_at_cap;
    uint32_t *remap;         /* ROWS: entry -> row of rows_in (+ padding)  */
    int64_t remap_cap;
    uint64_t *keys, *keys_tmp; /* ROWS: (row << 32 | entry) of a round      */
    int64_t keys_cap, keys_tmp_cap, nkeys;
    int64_t *pos;            /* [W * 6] packing cursors                     */
    void *views;             /* [W] message views while packing             */
    float *rows_in;          /* rows / partials / slices received          */
    int64_t rows_in_cap;
    /* owner side */
    int64_t *recv;           /* [rounds][W][XC_N] counts received           */
    int64_t recv_cap;
    int64_t *block;          /* [rounds][W][4] rr seg start, count, entry start, count */
    int64_t block_cap;
    ember_route rr;          /* received entries, by source rank then round */
    ember_route rr_tmp;      /* reorder scratch (rounds > 1)                */
    float *rows_out;         /* gathered rows / partial sums to send        */
    int64_t rows_out_cap;
    int rr_weighted;
    /* both */
    char *sbuf, *rbuf;       /* packed messages                             */
    int64_t sbuf_cap, rbuf_cap;
    int64_t *scnt, *sdsp, *rcnt, *rdsp; /* [W] each, bytes                  */
    float *grad_out, *grad_in;
    int64_t grad_out_cap, grad_in_cap;
    int grads_ready;         /* grad_in holds this batch's gradients        */
    /* a started forward (ember_dist_forward_start) */
    ember_comm_req req;      /* the exchange in flight                      */
    int started;             /* XS_*: what the finish still has to do       */
} ember_xchg;

struct ember_collection;
/* The table's exchange state, created on first use; NULL when out of memory. */
ember_xchg *ember_xchg_get(struct ember_collection *c, int32_t p);

#endif
