/*
 * xchg.h: the exchange state of one physical table in a world of W > 1
 * (docs/distributed.md): what this rank sent as a requester, and the route
 * of entries it received as an owner.  Buffers are grow-only.
 */
#ifndef EMBER_EXCHANGE_XCHG_H
#define EMBER_EXCHANGE_XCHG_H

#include <stdint.h>

#include "comm/comm.h"
#include "prep/route.h"

/* Counts per (round, peer) of one direction, as exchanged. */
enum { XC_SEGS = 0, XC_ENTS, XC_UNIQ, XC_WEIGHTED, XC_STATUS, XC_N };

/* Where a started forward of one table is (exchange/xchg_chain.c). */
enum { XS_NONE = 0,  /* not started: the finish runs the whole forward  */
       XS_COUNTS,    /* round `round`'s counts in flight               */
       XS_AGREE,     /* its agreement in flight                        */
       XS_IDS,       /* its ids in flight                              */
       XS_VECTORS,   /* its vectors in flight                          */
       XS_SENT_IDS,  /* OVERLAP: ids in flight, lookups left to the end */
       XS_LOOKED_UP  /* STALE: last round's vectors in flight          */
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
    float *rows_in;          /* rows / partials / slices received (ROWS:
                                encoded rows as the owners hold them, or fp32
                                rows then the round's hot rows copied here) */
    int64_t *hot_list;       /* the round's hot rows by slot (exchange/hot.h)   */
    int64_t hot_used, hot_list_cap;
    int32_t *hot_of;         /* [route entries] hot index of the entry's row,
                                -1 for none (set by the round's counting)   */
    int64_t hot_of_cap;
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
    /* a started forward (exchange/xchg_chain.c) */
    ember_comm_req req;      /* the exchange in flight                      */
    int stage;               /* XS_*                                        */
    int32_t round;           /* the round it is at                          */
    int64_t *ctl;            /* [4 W] counts and displacements of control
                                exchanges in flight                        */
    int64_t *agree;          /* [2 + 2 W] this rank's status, everyone's    */
} ember_xchg;

struct ember_collection;
struct ember_ptable;
/* The table's exchange state, created on first use; NULL when out of memory. */
ember_xchg *ember_xchg_get(struct ember_collection *c, int32_t p);

/* The phases of table p's forward (xchg_fwd.c), for ember_dist_forward
 * and the started forward (xchg_chain.c).  `start`: the phase's exchange
 * is started (x->req, completed by ember_comm_wait / _test) instead of
 * completed.  Per round m: counts (this rank's status travels with them),
 * reserve (the local status to agree on), the agreement (started:
 * agree_start, then ember_dist_agree_gathered on x->agree + 2), ids,
 * lookup (the ids received; outputs of REPLICATED written, else vectors
 * sent), assemble (the vectors received: outputs written).  After the
 * last round, finish puts the owner's route in order (agree after it). */
int ember_xchg_prepare(struct ember_collection *c, int32_t p, ember_xchg **x);
int ember_xchg_counts(struct ember_collection *c, struct ember_ptable *pt, ember_xchg *x, int32_t m, int start);
int ember_xchg_reserve(struct ember_collection *c, struct ember_ptable *pt, ember_xchg *x, int32_t m);
int ember_xchg_agree_start(struct ember_collection *c, ember_xchg *x, int st);
int ember_xchg_send_ids(struct ember_collection *c, struct ember_ptable *pt, ember_xchg *x, int32_t m, int start);
int ember_xchg_lookup(struct ember_collection *c, struct ember_ptable *pt, ember_xchg *x, int32_t m, int start,
                      float *pooled, float *sequence);
void ember_xchg_assemble(struct ember_collection *c, struct ember_ptable *pt, ember_xchg *x, int32_t m,
                         float *pooled, float *sequence);
int ember_xchg_finish(struct ember_collection *c, struct ember_ptable *pt, ember_xchg *x);
int ember_xchg_wait(struct ember_collection *c, ember_xchg *x);

#endif
