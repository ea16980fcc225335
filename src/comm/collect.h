/*
 * collect.h: small collectives over a world for code around the step: the
 * trainer's set-up, evaluation and summary (src/train/), and the `ember`
 * tool's subcommands (agreeing on failures, reducing statistics, gathering
 * scores to rank 0).
 *
 * A NULL world is a world of one: nothing is sent and every call is a
 * local no-op (or a copy).  Every call is collective otherwise: every rank
 * makes the same calls in the same order.  None is counted in the world's
 * byte counters (comm.h): they are control messages, not the step's.
 * Reductions combine the ranks' values in rank order 0, 1, ..., R-1 on
 * every rank, so every rank gets the same bits.  A failed exchange returns
 * EMBER_ECOMM (w->errmsg says which call and rank).
 */
#ifndef EMBER_COMM_COLLECT_H
#define EMBER_COMM_COLLECT_H

#include <stdint.h>

#include "ember.h"

typedef enum ember_reduce_op { EMBER_REDUCE_MAX = 0, EMBER_REDUCE_SUM = 1 } ember_reduce_op;

/* 1 on every rank when `failed` is true on any rank (or the exchange
 * failed), else 0; *first (may be NULL) gets the lowest failing rank, or
 * -1: none failed, or the exchange itself failed (there is then no root
 * every rank would agree on: broadcast nothing). */
int ember_comm_any_failed(ember_world *w, int failed, int32_t *first);
/* The largest `status` over ranks (exit codes 0, 1, 2), on every rank. */
int ember_comm_agree_max(ember_world *w, int status);
/* In place: v[i] = the max or the sum over ranks of v[i].  EMBER_OK or
 * EMBER_ECOMM. */
int ember_comm_reduce_i64(ember_world *w, int64_t *v, int64_t n, ember_reduce_op op);
int ember_comm_reduce_double(ember_world *w, double *v, int64_t n, ember_reduce_op op);
/* Rank 0 gets every rank's n values, in rank order, in a new array *out
 * (free it) of *total values; the other ranks get *out NULL and *total.
 * EMBER_OK, or on every rank EMBER_ENOMEM (rank 0 is out of memory) or
 * EMBER_ECOMM, with *out NULL. */
int ember_comm_gather_floats(ember_world *w, const float *v, int64_t n, float **out, int64_t *total);
int ember_comm_gather_i64(ember_world *w, const int64_t *v, int64_t n, int64_t **out, int64_t *total);
/* Returns when every rank has called it. */
int ember_comm_barrier(ember_world *w);
/* The ranks of w on this machine: those sharing its memory
 * (MPI_COMM_TYPE_SHARED, asked when w was made); when MPI could not tell,
 * Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, else w's size; 1 alone.  Local. */
int32_t ember_comm_local_ranks(const ember_world *w);

#endif
