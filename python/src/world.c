/*
 * world.c: ember._ember.mpi_world(): the process's world under mpirun, by
 * the CLI's rule.  Launched by mpirun (Open MPI sets OMPI_COMM_WORLD_SIZE;
 * PMI_SIZE or PMIX_RANK for other launchers), the first call initialises
 * MPI (MPI_THREAD_FUNNELED: ember calls MPI from the calling thread only)
 * unless the program already did (mpi4py), and makes one world over
 * MPI_COMM_WORLD for the life of the process; alone it returns None (a
 * world of one, no MPI).  At exit the world goes, then MPI is finalised if
 * this module initialised it.
 */
#include <mpi.h>
#include <stdlib.h>

#include "ember-mpi.h"
#include "ember_py.h"

static ember_world *process_world;
static int initialised_here;

static void finish_world(void)
{
    ember_world_destroy(process_world);
    process_world = NULL;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initialised_here && !finalized)
        MPI_Finalize();
}

static PyObject *py_mpi_world(PyObject *self, PyObject *args)
{
    if (!process_world) {
        if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK"))
            Py_RETURN_NONE;
        int init = 0, provided = 0;
        MPI_Initialized(&init);
        if (!init) {
            if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
                return ember_py_raise(EMBER_ECOMM, "MPI_Init_thread failed");
            initialised_here = 1;
        } else {
            MPI_Query_thread(&provided);
        }
        if (provided < MPI_THREAD_FUNNELED)
            return ember_py_raise(EMBER_ECOMM, "MPI gives single-threaded support only: ember needs at least "
                                               "MPI_THREAD_FUNNELED (its OpenMP threads run beside the MPI calls)");
        int status = ember_world_from_mpi_comm(MPI_COMM_WORLD, &process_world);
        if (status)
            return ember_py_raise(status, ember_data_errmsg());
        if (Py_AtExit(finish_world) < 0)
            return ember_py_raise(EMBER_ENOMEM, "cannot register MPI's finalisation at exit");
    }
    return Py_BuildValue("(Nii)", PyCapsule_New(process_world, "ember.world", NULL),
                         (int)ember_world_rank(process_world), (int)ember_world_size(process_world));
}

static PyMethodDef world_methods[] = {
    {"mpi_world", py_mpi_world, METH_NOARGS,
     "mpi_world(): (capsule, rank, size) under mpirun, else None."},
    {NULL, NULL, 0, NULL},
};

int py_world_register(PyObject *module)
{
    return PyModule_AddFunctions(module, world_methods);
}
