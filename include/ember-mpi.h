/*
 * ember-mpi.h: hands ember an existing MPI communicator.
 *
 * The caller initialises MPI (MPI_Init or MPI_Init_thread; ember calls MPI
 * only from the thread that calls ember, so MPI_THREAD_FUNNELED suffices)
 * and finalises it after destroying every world.  ember duplicates the
 * communicator, so its messages never mix with the caller's, and sets
 * MPI_ERRORS_RETURN on the duplicate: a failed MPI call returns
 * EMBER_ECOMM instead of aborting the job.
 */
#ifndef EMBER_MPI_H
#define EMBER_MPI_H

#include <mpi.h>

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A world over the ranks of comm (collective over comm).  Errors:
 * EMBER_ECOMM (MPI is not initialised, or MPI_Comm_dup failed),
 * EMBER_ENOMEM. */
int ember_world_from_mpi_comm(MPI_Comm comm, ember_world **out);

#ifdef __cplusplus
}
#endif
#endif
