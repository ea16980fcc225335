/*
 * synth.c: ember._ember.synth_batches(): the benchmark workloads' batches
 * (ember_synth, include/ember.h), the very ids `ember bench` times, so a
 * Python benchmark measures the same work.  Returns a list of (lengths,
 * ids, weights or None) bytes objects, copies the caller owns.
 */
#include "ember_py.h"

static PyObject *py_synth_batches(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"tables", "rows", "batch_size", "pooling", "zipf", "alpha", "weighted", "seed",
                             "count", NULL};
    ember_synth_config c = ember_synth_config_default();
    unsigned long long seed = c.seed;
    int count = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|iLiipdpKi", kwlist, &c.tables, &c.rows, &c.batch_size,
                                     &c.pooling, &c.zipf, &c.alpha, &c.weighted, &seed, &count))
        return NULL;
    c.seed = seed;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "count: must not be negative");
        return NULL;
    }
    ember_synth *s = NULL;
    int status = ember_synth_create(&c, &s);
    if (status)
        return ember_py_raise(status, ember_errmsg(NULL));
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < count; i++) {
        ember_batch b;
        if ((status = ember_synth_next(s, &b))) {
            ember_py_raise(status, ember_errmsg(s));
            Py_CLEAR(list);
            break;
        }
        PyObject *item = Py_BuildValue(
            "(NNN)", PyBytes_FromStringAndSize((const char *)b.lengths, (Py_ssize_t)b.batch_size * b.num_features * 4),
            PyBytes_FromStringAndSize((const char *)b.ids, (Py_ssize_t)b.num_ids * 8),
            b.weights ? PyBytes_FromStringAndSize((const char *)b.weights, (Py_ssize_t)b.num_ids * 4)
                      : Py_NewRef(Py_None));
        if (!item || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    ember_synth_destroy(s);
    return list;
}

static PyMethodDef synth_methods[] = {
    {"synth_batches", (PyCFunction)(void (*)(void))py_synth_batches, METH_VARARGS | METH_KEYWORDS,
     "synth_batches(tables, rows, batch_size, pooling, zipf, alpha, weighted, seed, count)"},
    {NULL, NULL, 0, NULL},
};

int py_synth_register(PyObject *module)
{
    return PyModule_AddFunctions(module, synth_methods);
}
