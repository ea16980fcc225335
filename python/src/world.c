/*
 * world.c: ember._ember.mpi_world(): the process's world under mpirun, by
 * the CLI's rule (ember_world_from_launcher, include/ember-mpi.h): the
 * first call initialises MPI unless the program already did (mpi4py) and
 * makes one world over MPI_COMM_WORLD for the life of the process; alone it
 * returns None (a world of one, no MPI).  Less than MPI_THREAD_FUNNELED is
 * refused (ember's OpenMP threads run beside its MPI calls).  At exit the
 * world goes, then MPI is finalised if this module initialised it.
 */
#include <mpi.h>

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
        int init = 0, provided = 0, status = ember_world_from_launcher(&process_world, &init, &provided);
        if (init) {
            initialised_here = 1;
            if (Py_AtExit(finish_world) < 0)
                return ember_py_raise(EMBER_ENOMEM, "cannot register MPI's finalisation at exit");
        }
        if (status)
            return ember_py_raise(status, "cannot initialise MPI or make a world over MPI_COMM_WORLD");
        if (!process_world)
            Py_RETURN_NONE; /* not launched by mpirun: a world of one */
        if (provided < MPI_THREAD_FUNNELED) {
            ember_world_destroy(process_world);
            process_world = NULL;
            return ember_py_raise(EMBER_ECOMM, "MPI gives single-threaded support only: ember needs at least "
                                               "MPI_THREAD_FUNNELED (its OpenMP threads run beside the MPI calls)");
        }
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
