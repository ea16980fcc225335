/*
 * comm_mpi.c: a world over an MPI communicator (include/ember-mpi.h).
 *
 * The caller's communicator is duplicated, and the duplicate returns errors
 * (MPI_ERRORS_RETURN) instead of aborting, so a failed call becomes
 * EMBER_ECOMM naming the operation and this rank.  MPI counts are int: a
 * message over 2^31-1 bytes is refused with EMBER_ECOMM (it would need
 * derived datatypes; no step of ember sends that much to one rank).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "ember-mpi.h"

static MPI_Comm comm_of(const ember_world *w) { return *(const MPI_Comm *)w->impl; }

static int mpi_fail(ember_world *w, const char *op, int code)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", code);
    snprintf(w->errmsg, sizeof w->errmsg, "%s failed on rank %d: %.160s", op, w->rank, msg);
    return EMBER_ECOMM;
}

/* int counts for MPI, or -1 when a count does not fit. */
static int to_int(const int64_t *in, int *out, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        if (in[i] < 0 || in[i] > INT_MAX)
            return EMBER_EINVAL;
        out[i] = (int)in[i];
    }
    return 0;
}

static int mpi_alltoallv(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                         void *recv, const int64_t *rcount, const int64_t *rdispl)
{
    int32_t n = w->size;
    int *buf = malloc(sizeof(int) * 4 * (size_t)n);
    if (!buf) {
        snprintf(w->errmsg, sizeof w->errmsg, "MPI_Alltoallv on rank %d: out of memory", w->rank);
        return EMBER_ECOMM;
    }
    int *sc = buf, *sd = buf + n, *rc = buf + 2 * n, *rd = buf + 3 * n;
    if (to_int(scount, sc, n) || to_int(sdispl, sd, n) || to_int(rcount, rc, n) || to_int(rdispl, rd, n)) {
        free(buf);
        snprintf(w->errmsg, sizeof w->errmsg,
                 "MPI_Alltoallv on rank %d: a message over 2^31-1 bytes (split the batch)", w->rank);
        return EMBER_ECOMM;
    }
    int code = MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, comm_of(w));
    free(buf);
    return code == MPI_SUCCESS ? EMBER_OK : mpi_fail(w, "MPI_Alltoallv", code);
}

/* A started MPI_Ialltoallv: the int counts must live until it completes. */
typedef struct mpi_req {
    MPI_Request request;
    int counts[];
} mpi_req;

static int mpi_ialltoallv(ember_world *w, const void *send, const int64_t *scount, const int64_t *sdispl,
                          void *recv, const int64_t *rcount, const int64_t *rdispl, void **out)
{
    int32_t n = w->size;
    *out = NULL;
    mpi_req *q = malloc(sizeof *q + sizeof(int) * 4 * (size_t)n);
    if (!q) {
        snprintf(w->errmsg, sizeof w->errmsg, "MPI_Ialltoallv on rank %d: out of memory", w->rank);
        return EMBER_ECOMM;
    }
    int *sc = q->counts, *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    if (to_int(scount, sc, n) || to_int(sdispl, sd, n) || to_int(rcount, rc, n) || to_int(rdispl, rd, n)) {
        free(q);
        snprintf(w->errmsg, sizeof w->errmsg,
                 "MPI_Ialltoallv on rank %d: a message over 2^31-1 bytes (split the batch)", w->rank);
        return EMBER_ECOMM;
    }
    int code = MPI_Ialltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, comm_of(w), &q->request);
    if (code != MPI_SUCCESS) {
        free(q);
        return mpi_fail(w, "MPI_Ialltoallv", code);
    }
    *out = q;
    return EMBER_OK;
}

static int mpi_test(ember_world *w, void *req, int *done)
{
    mpi_req *q = req;
    int flag = 0, code = MPI_Test(&q->request, &flag, MPI_STATUS_IGNORE);
    *done = flag || code != MPI_SUCCESS;
    if (*done)
        free(q);
    return code == MPI_SUCCESS ? EMBER_OK : mpi_fail(w, "MPI_Test (MPI_Ialltoallv)", code);
}

static int mpi_wait(ember_world *w, void *req)
{
    mpi_req *q = req;
    int code = MPI_Wait(&q->request, MPI_STATUS_IGNORE);
    free(q);
    return code == MPI_SUCCESS ? EMBER_OK : mpi_fail(w, "MPI_Wait (MPI_Ialltoallv)", code);
}

static int mpi_allgather(ember_world *w, const void *send, int64_t bytes, void *recv)
{
    if (bytes < 0 || bytes > INT_MAX)
        return mpi_fail(w, "MPI_Allgather", MPI_ERR_COUNT);
    int code = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm_of(w));
    return code == MPI_SUCCESS ? EMBER_OK : mpi_fail(w, "MPI_Allgather", code);
}

static int mpi_bcast(ember_world *w, void *buf, int64_t bytes, int32_t root)
{
    if (bytes < 0 || bytes > INT_MAX)
        return mpi_fail(w, "MPI_Bcast", MPI_ERR_COUNT);
    int code = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, comm_of(w));
    return code == MPI_SUCCESS ? EMBER_OK : mpi_fail(w, "MPI_Bcast", code);
}

static void mpi_destroy(ember_world *w)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free((MPI_Comm *)w->impl);
    free(w->impl);
    ember_handle_end(&w->head);
    free(w);
}

static int mpi_dup(ember_world *w, ember_world **out)
{
    int st = ember_world_from_mpi_comm(comm_of(w), out);
    if (st == EMBER_ECOMM)
        snprintf(w->errmsg, sizeof w->errmsg, "MPI_Comm_dup failed on rank %d", w->rank);
    return st;
}

/* A send's request is an mpi_req without counts, so mpi_wait completes it. */
static int mpi_isend(ember_world *w, const void *buf, int64_t bytes, int32_t dest, int32_t tag, void **out)
{
    *out = NULL;
    if (bytes < 0 || bytes > INT_MAX)
        return mpi_fail(w, "MPI_Isend", MPI_ERR_COUNT);
    mpi_req *q = malloc(sizeof *q);
    if (!q) {
        snprintf(w->errmsg, sizeof w->errmsg, "MPI_Isend on rank %d: out of memory", w->rank);
        return EMBER_ECOMM;
    }
    int code = MPI_Isend(buf, (int)bytes, MPI_BYTE, dest, tag, comm_of(w), &q->request);
    if (code != MPI_SUCCESS) {
        free(q);
        return mpi_fail(w, "MPI_Isend", code);
    }
    *out = q;
    return EMBER_OK;
}

static int mpi_recv(ember_world *w, void *buf, int64_t bytes, int32_t src, int32_t tag)
{
    if (bytes < 0 || bytes > INT_MAX)
        return mpi_fail(w, "MPI_Recv", MPI_ERR_COUNT);
    MPI_Status status;
    int code = MPI_Recv(buf, (int)bytes, MPI_BYTE, src, tag, comm_of(w), &status);
    int got = 0;
    if (code == MPI_SUCCESS && (MPI_Get_count(&status, MPI_BYTE, &got) != MPI_SUCCESS || got != (int)bytes)) {
        snprintf(w->errmsg, sizeof w->errmsg, "MPI_Recv on rank %d: %d bytes from rank %d, expected %lld",
                 w->rank, got, (int)src, (long long)bytes);
        return EMBER_ECOMM;
    }
    return code == MPI_SUCCESS ? EMBER_OK : mpi_fail(w, "MPI_Recv", code);
}

static int mpi_split(ember_world *w, int32_t color, int32_t key, ember_world **out)
{
    MPI_Comm part;
    int code = MPI_Comm_split(comm_of(w), color, key, &part);
    if (code != MPI_SUCCESS)
        return mpi_fail(w, "MPI_Comm_split", code);
    int st = ember_world_from_mpi_comm(part, out);
    MPI_Comm_free(&part);
    if (st == EMBER_ECOMM)
        snprintf(w->errmsg, sizeof w->errmsg, "MPI_Comm_dup after MPI_Comm_split failed on rank %d", w->rank);
    return st;
}

static const ember_comm_ops mpi_ops = {mpi_alltoallv, mpi_allgather, mpi_bcast, mpi_ialltoallv,
                                       mpi_test,      mpi_wait,      mpi_dup,   mpi_destroy,
                                       mpi_isend,     mpi_recv,      mpi_split};

int ember_world_from_mpi_comm(MPI_Comm comm, ember_world **out)
{
    if (!out)
        return ember_fail_create(EMBER_EINVAL, "ember_world_from_mpi_comm: out is NULL");
    *out = NULL;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return ember_fail_create(EMBER_ECOMM, "a world over MPI: MPI is %s", finalized ? "finalized" : "not initialised");
    ember_world *w = calloc(1, sizeof *w);
    MPI_Comm *dup = malloc(sizeof *dup);
    if (!w || !dup) {
        free(w);
        free(dup);
        return ember_fail_create(EMBER_ENOMEM, "a world over MPI: out of memory");
    }
    if (MPI_Comm_dup(comm, dup) != MPI_SUCCESS) {
        free(w);
        free(dup);
        return ember_fail_create(EMBER_ECOMM, "a world over MPI: MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(*dup, &rank);
    MPI_Comm_size(*dup, &size);
    /* the ranks sharing this machine's memory, asked once here (collective,
     * as the dup is); 0 when MPI cannot tell: collect.c falls back */
    MPI_Comm node;
    int local = 0;
    if (MPI_Comm_split_type(*dup, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        if (MPI_Comm_size(node, &local) != MPI_SUCCESS)
            local = 0;
        MPI_Comm_free(&node);
    }
    ember_handle_begin(&w->head, w->errmsg, sizeof w->errmsg);
    w->ops = &mpi_ops;
    w->impl = dup;
    w->rank = rank;
    w->size = size;
    w->local_size = local;
    *out = w;
    return EMBER_OK;
}

int ember_world_from_launcher(ember_world **out, int *initialised, int *provided)
{
    int init = 0, level = 0;
    *out = NULL;
    if (initialised)
        *initialised = 0;
    if (provided)
        *provided = 0;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK"))
        return EMBER_OK;
    MPI_Initialized(&init);
    if (!init) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &level) != MPI_SUCCESS)
            return ember_fail_create(EMBER_ECOMM, "a world from the launcher: MPI_Init_thread failed");
        if (initialised)
            *initialised = 1;
    } else {
        MPI_Query_thread(&level);
    }
    if (provided)
        *provided = level;
    return ember_world_from_mpi_comm(MPI_COMM_WORLD, out);
}
