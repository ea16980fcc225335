/*
 * comm.h: the communicator behind an ember_world, a small vtable with two
 * implementations: comm_self.c (a world of one, plain copies, no MPI at run
 * time) and comm_mpi.c (an MPI communicator with MPI_ERRORS_RETURN).
 *
 * Every call is collective over the world and moves bytes.  Counts and
 * displacements are per rank, in bytes.  A call returns EMBER_OK or
 * EMBER_ECOMM with w->errmsg naming the operation and the rank.  Bytes sent
 * to and received from other ranks, and the time spent, are counted in the
 * world's counters (payload calls only; agreement calls are not counted).
 */
#ifndef EMBER_COMM_H
#define EMBER_COMM_H

#include <stdint.h>

#include "core/status.h"
#include "ember.h"

typedef struct ember_comm_ops {
    /* Rank r sends send + sdispl[d] (scount[d] bytes) to every rank d and
     * receives rcount[s] bytes from rank s at recv + rdispl[s].  Send
     * regions may overlap (the same block to every rank). */
    int (*alltoallv)(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                     void *recv, const int64_t *rcount, const int64_t *rdispl);
    /* recv[r * bytes ..] = rank r's send[0 .. bytes) for every r. */
    int (*allgather)(ember_world *w, const void *send, int64_t bytes, void *recv);
    /* buf (bytes) of rank root to every rank. */
    int (*bcast)(ember_world *w, void *buf, int64_t bytes, int32_t root);
    /* The same exchange, started: *req is the implementation's request
     * (NULL when it completed at once).  Buffers and counts belong to the
     * exchange until test reports it done or wait returns; until then the
     * ranks may run other collectives, in the same order on every rank. */
    int (*ialltoallv)(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                      void *recv, const int64_t *rcount, const int64_t *rdispl, void **req);
    /* Progress: *done = 1 (and req freed) once complete. */
    int (*test)(ember_world *w, void *req, int *done);
    /* Completes and frees req. */
    int (*wait)(ember_world *w, void *req);
    /* A new world over the same processes with its own message space
     * (MPI_Comm_dup): collectives on it never match those on w.  Collective. */
    int (*dup)(ember_world *w, ember_world **out);
    void (*destroy)(ember_world *w);
    /* Point to point (pipeline stages): bytes to rank dest under tag,
     * started (*req: wait completes it; the buffer is the send's until
     * then); bytes from rank src under tag, blocking.  A world of one has
     * no other rank to talk to (EMBER_ECOMM). */
    int (*isend)(ember_world *w, const void *buf, int64_t bytes, int32_t dest, int32_t tag, void **req);
    int (*recv)(ember_world *w, void *buf, int64_t bytes, int32_t src, int32_t tag);
    /* The ranks of w with this rank's color, ordered by key (then rank), as
     * a new world (MPI_Comm_split).  Collective. */
    int (*split)(ember_world *w, int32_t color, int32_t key, ember_world **out);
} ember_comm_ops;

struct ember_world {
    ember_handle_msg head;   /* first: ember_errmsg's, over errmsg         */
    const ember_comm_ops *ops;
    int32_t rank, size;
    void *impl;              /* the MPI communicator, for comm_mpi.c       */
    int32_t local_size;      /* ranks on this rank's machine; 0: unknown   */
    int64_t bytes_sent, bytes_received;
    double seconds;          /* wall time inside payload calls             */
    int counting;            /* 1: payload calls update the counters       */
    char errmsg[256];
};

/* Payload calls: counted in bytes_sent/bytes_received/seconds. */
int ember_comm_alltoallv(ember_world *w, const void *send, const int64_t *scount,
                         const int64_t *sdispl, void *recv, const int64_t *rcount,
                         const int64_t *rdispl);
/* A started exchange (ember_comm_ialltoallv): its bytes are counted when
 * it starts, the time inside the start, test and wait calls when counting
 * is on.  A request that is not pending has impl NULL. */
typedef struct ember_comm_req {
    void *impl;
    int pending;
} ember_comm_req;
int ember_comm_ialltoallv(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                          void *recv, const int64_t *rcount, const int64_t *rdispl, ember_comm_req *req);
/* Drives a pending exchange on; *done = 1 once it completed (or none was
 * pending). */
int ember_comm_test(ember_world *w, ember_comm_req *req, int *done);
/* Completes a pending exchange (nothing when none is pending). */
int ember_comm_wait(ember_world *w, ember_comm_req *req);
/* Exchanges one int64 per pair: recv[s] = what rank s put in send[rank]. */
int ember_comm_alltoall_i64(ember_world *w, const int64_t *send, int64_t *recv);
/* Not counted (small control messages). */
int ember_comm_allgather(ember_world *w, const void *send, int64_t bytes, void *recv);
int ember_comm_bcast(ember_world *w, void *buf, int64_t bytes, int32_t root);

/* Point to point (counted): ops->isend, then ember_comm_wait_send on its
 * request; ops->recv. */
int ember_comm_isend(ember_world *w, const void *buf, int64_t bytes, int32_t dest, int32_t tag, void **req);
int ember_comm_wait_send(ember_world *w, void *req);
int ember_comm_recv(ember_world *w, void *buf, int64_t bytes, int32_t src, int32_t tag);
/* ops->split; EMBER_ECOMM (w->errmsg) or EMBER_ENOMEM on failure. */
int ember_world_split(ember_world *w, int32_t color, int32_t key, ember_world **out);

/* ops->dup; EMBER_ECOMM (w->errmsg) or EMBER_ENOMEM on failure. */
int ember_world_dup(ember_world *w, ember_world **out);

double ember_now(void); /* monotonic seconds */

#endif
