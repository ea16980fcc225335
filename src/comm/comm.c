/*
 * comm.c: the counted front of the communicator (comm.h) and the world of
 * one.  The world of one copies buffers and never touches MPI, so a program
 * that never calls MPI_Init works; it is the same code path as a world of N
 * with every exchange going to rank 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"

double ember_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Payload bytes of an exchange, to and from the other ranks. */
static void count_bytes(ember_world *w, const int64_t *scount, const int64_t *rcount)
{
    for (int32_t r = 0; r < w->size; r++)
        if (r != w->rank) {
            w->bytes_sent += scount[r];
            w->bytes_received += rcount[r];
        }
}

int ember_comm_alltoallv(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                         void *recv, const int64_t *rcount, const int64_t *rdispl)
{
    double t0 = ember_now();
    int st = w->ops->alltoallv(w, send, scount, sdispl, recv, rcount, rdispl);
    if (w->counting) {
        count_bytes(w, scount, rcount);
        w->seconds += ember_now() - t0;
    }
    return st;
}

int ember_comm_ialltoallv(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                          void *recv, const int64_t *rcount, const int64_t *rdispl, ember_comm_req *req)
{
    double t0 = ember_now();
    req->impl = NULL;
    int st = w->ops->ialltoallv(w, send, scount, sdispl, recv, rcount, rdispl, &req->impl);
    req->pending = st == EMBER_OK;
    if (w->counting) {
        count_bytes(w, scount, rcount);
        w->seconds += ember_now() - t0;
    }
    return st;
}

int ember_comm_test(ember_world *w, ember_comm_req *req, int *done)
{
    *done = 1;
    if (!req->pending)
        return EMBER_OK;
    int st = EMBER_OK;
    double t0 = ember_now();
    if (req->impl)
        st = w->ops->test(w, req->impl, done);
    if (*done || st != EMBER_OK) {
        req->impl = NULL;
        req->pending = 0;
        *done = 1;
    }
    if (w->counting)
        w->seconds += ember_now() - t0;
    return st;
}

int ember_comm_wait(ember_world *w, ember_comm_req *req)
{
    if (!req->pending)
        return EMBER_OK;
    int st = EMBER_OK;
    double t0 = ember_now();
    if (req->impl)
        st = w->ops->wait(w, req->impl);
    req->impl = NULL;
    req->pending = 0;
    if (w->counting)
        w->seconds += ember_now() - t0;
    return st;
}

int ember_comm_alltoall_i64(ember_world *w, const int64_t *send, int64_t *recv)
{
    int64_t n = w->size;
    int64_t cnt[n > 0 ? n : 1], dsp[n > 0 ? n : 1];
    for (int64_t r = 0; r < n; r++) {
        cnt[r] = (int64_t)sizeof(int64_t);
        dsp[r] = r * (int64_t)sizeof(int64_t);
    }
    double t0 = ember_now();
    int st = w->ops->alltoallv(w, send, cnt, dsp, recv, cnt, dsp);
    if (w->counting)
        w->seconds += ember_now() - t0;
    return st;
}

int ember_comm_allgather(ember_world *w, const void *send, int64_t bytes, void *recv)
{
    return w->ops->allgather(w, send, bytes, recv);
}

int ember_comm_bcast(ember_world *w, void *buf, int64_t bytes, int32_t root)
{
    return w->ops->bcast(w, buf, bytes, root);
}

/* ---------------------------------------------------------- world of one */

static int self_alltoallv(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                          void *recv, const int64_t *rcount, const int64_t *rdispl)
{
    (void)w;
    if (scount[0] != rcount[0])
        return EMBER_ECOMM;
    if (scount[0] > 0)
        memmove((char *)recv + rdispl[0], (const char *)send + sdispl[0], (size_t)scount[0]);
    return EMBER_OK;
}

static int self_allgather(ember_world *w, const void *send, int64_t bytes, void *recv)
{
    (void)w;
    if (bytes > 0 && recv != send)
        memmove(recv, send, (size_t)bytes);
    return EMBER_OK;
}

static int self_bcast(ember_world *w, void *buf, int64_t bytes, int32_t root)
{
    (void)w, (void)buf, (void)bytes, (void)root;
    return EMBER_OK;
}

/* A world of one completes an exchange when it starts. */
static int self_ialltoallv(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                           void *recv, const int64_t *rcount, const int64_t *rdispl, void **req)
{
    *req = NULL;
    return self_alltoallv(w, send, scount, sdispl, recv, rcount, rdispl);
}

static int self_test(ember_world *w, void *req, int *done)
{
    (void)w, (void)req;
    *done = 1;
    return EMBER_OK;
}

static int self_wait(ember_world *w, void *req)
{
    (void)w, (void)req;
    return EMBER_OK;
}

static void self_destroy(ember_world *w)
{
    ember_handle_end(&w->head);
    free(w);
}

static int self_dup(ember_world *w, ember_world **out)
{
    (void)w;
    return ember_world_self(out);
}

int ember_world_dup(ember_world *w, ember_world **out) { return w->ops->dup(w, out); }

static int self_isend(ember_world *w, const void *buf, int64_t bytes, int32_t dest, int32_t tag, void **req)
{
    (void)buf, (void)bytes, (void)dest, (void)tag;
    *req = NULL;
    snprintf(w->errmsg, sizeof w->errmsg, "a send in a world of one (no other rank)");
    return EMBER_ECOMM;
}

static int self_recv(ember_world *w, void *buf, int64_t bytes, int32_t src, int32_t tag)
{
    (void)buf, (void)bytes, (void)src, (void)tag;
    snprintf(w->errmsg, sizeof w->errmsg, "a receive in a world of one (no other rank)");
    return EMBER_ECOMM;
}

static int self_split(ember_world *w, int32_t color, int32_t key, ember_world **out)
{
    (void)color, (void)key;
    return self_dup(w, out);
}

static const ember_comm_ops self_ops = {self_alltoallv, self_allgather, self_bcast, self_ialltoallv,
                                        self_test,      self_wait,      self_dup,   self_destroy,
                                        self_isend,     self_recv,      self_split};

int ember_comm_isend(ember_world *w, const void *buf, int64_t bytes, int32_t dest, int32_t tag, void **req)
{
    double t0 = w->counting ? ember_now() : 0;
    int st = w->ops->isend(w, buf, bytes, dest, tag, req);
    if (w->counting && st == EMBER_OK) {
        w->bytes_sent += bytes;
        w->seconds += ember_now() - t0;
    }
    return st;
}

int ember_comm_wait_send(ember_world *w, void *req)
{
    double t0 = w->counting ? ember_now() : 0;
    int st = req ? w->ops->wait(w, req) : EMBER_OK;
    if (w->counting)
        w->seconds += ember_now() - t0;
    return st;
}

int ember_comm_recv(ember_world *w, void *buf, int64_t bytes, int32_t src, int32_t tag)
{
    double t0 = w->counting ? ember_now() : 0;
    int st = w->ops->recv(w, buf, bytes, src, tag);
    if (w->counting && st == EMBER_OK) {
        w->bytes_received += bytes;
        w->seconds += ember_now() - t0;
    }
    return st;
}

int ember_world_split(ember_world *w, int32_t color, int32_t key, ember_world **out)
{
    return w->ops->split(w, color, key, out);
}

int ember_world_self(ember_world **out)
{
    if (!out)
        return ember_fail_create(EMBER_EINVAL, "ember_world_self: out is NULL");
    ember_world *w = calloc(1, sizeof *w);
    if (!w)
        return ember_fail_create(EMBER_ENOMEM, "a world of one: out of memory");
    ember_handle_begin(&w->head, w->errmsg, sizeof w->errmsg);
    w->ops = &self_ops;
    w->rank = 0;
    w->size = 1;
    *out = w;
    return EMBER_OK;
}

int32_t ember_world_rank(const ember_world *w) { return w ? w->rank : 0; }
int32_t ember_world_size(const ember_world *w) { return w ? w->size : 1; }

void ember_world_destroy(ember_world *w)
{
    if (w)
        w->ops->destroy(w);
}
