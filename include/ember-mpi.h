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
 * EMBER_ENOMEM; detail in ember_errmsg(NULL). */
EMBER_API int ember_world_from_mpi_comm(MPI_Comm comm, ember_world **out);

/* The world of a process an MPI launcher started (Open MPI's mpirun sets
 * OMPI_COMM_WORLD_SIZE; PMI_SIZE or PMIX_RANK for other launchers), the
 * rule of the `ember` tool and of the Python package.  Launched so, it
 * initialises MPI with MPI_THREAD_FUNNELED unless the program already did,
 * and makes a world over MPI_COMM_WORLD (collective); otherwise it calls
 * nothing and *out is NULL (a world of one).  *initialised: 1 when this
 * call initialised MPI (the caller finalises it after destroying every
 * world), else 0; *provided: MPI's thread level (each caller decides what
 * too little means).  Either may be NULL.  Errors: EMBER_ECOMM
 * (MPI_Init_thread failed; *out NULL) and ember_world_from_mpi_comm's,
 * which are this rank's alone (MPI is initialised then). */
EMBER_API int ember_world_from_launcher(ember_world **out, int *initialised, int *provided);

#ifdef __cplusplus
}
#endif
#endif
