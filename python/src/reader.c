/*
 * reader.c: ember._ember.Reader, one ember_reader (include/ember-data.h):
 * the labelled samples `ember train` would read from a config, for a
 * training loop written in Python.  next() returns read-only memoryviews of
 * the reader's arrays, valid until the next call; the Python layer copies
 * them into numpy arrays it owns.
 */
#include "ember-data.h"
#include "ember_py.h"

typedef struct py_reader {
    PyObject_HEAD
    ember_reader *r;
} py_reader;

static int reader_init(PyObject *obj, PyObject *args, PyObject *kwargs)
{
    py_reader *self = (py_reader *)obj;
    static char *kwlist[] = {"config", "path", "eval", "rank", "world", NULL};
    const char *config = NULL, *path = NULL;
    int eval = 0, rank = 0, world = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|zzpii", kwlist, &config, &path, &eval, &rank, &world))
        return -1;
    if (self->r) {
        PyErr_SetString(PyExc_TypeError, "Reader: already open");
        return -1;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_reader_open(config, path, eval, rank, world, &self->r);
    Py_END_ALLOW_THREADS
    if (status) {
        ember_py_raise(status, ember_data_errmsg());
        return -1;
    }
    return 0;
}

static void reader_dealloc(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    ember_reader_close(((py_reader *)obj)->r);
    py_free_object(obj, tp);
}

static PyObject *view(const void *data, Py_ssize_t bytes)
{
    if (!data || bytes == 0)
        return PyMemoryView_FromMemory((char *)"", 0, PyBUF_READ);
    return PyMemoryView_FromMemory((char *)data, bytes, PyBUF_READ);
}

/* next(max_samples) -> None at the end, else (batch_size, labels, dense,
 * lengths, values, weights or None, teacher or None): memoryviews of bytes */
static PyObject *reader_next(PyObject *obj, PyObject *args)
{
    py_reader *self = (py_reader *)obj;
    int max_samples;
    if (!PyArg_ParseTuple(args, "i", &max_samples))
        return NULL;
    if (!self->r)
        return ember_py_raise(EMBER_ESTATE, "the reader is closed");
    ember_samples s;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    n = ember_reader_next(self->r, max_samples, &s);
    Py_END_ALLOW_THREADS
    if (n < 0)
        return ember_py_raise((int)n, ember_reader_errmsg(self->r));
    if (n == 0)
        Py_RETURN_NONE;
    Py_ssize_t b = s.batch_size, ids = (Py_ssize_t)s.sparse.num_ids;
    const float *teacher = ember_reader_teacher(self->r);
    PyObject *weights = s.sparse.weights ? view(s.sparse.weights, ids * 4) : Py_NewRef(Py_None);
    PyObject *teach = teacher ? view(teacher, b * 4) : Py_NewRef(Py_None);
    return Py_BuildValue("(nNNNNNN)", b, view(s.labels, b * 4), view(s.dense, b * s.num_dense * 4),
                         view(s.sparse.lengths, b * s.sparse.num_features * 4), view(s.sparse.ids, ids * 8),
                         weights, teach);
}

static PyObject *reader_describe(PyObject *obj, PyObject *args)
{
    py_reader *self = (py_reader *)obj;
    if (!self->r)
        return ember_py_raise(EMBER_ESTATE, "the reader is closed");
    PyObject *features = PyList_New(0);
    for (int32_t f = 0; features && f < ember_reader_num_features(self->r); f++) {
        PyObject *item = Py_BuildValue("(sL)", ember_reader_feature_name(self->r, f),
                                       (long long)ember_reader_feature_rows(self->r, f));
        if (!item || PyList_Append(features, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(features);
        } else {
            Py_DECREF(item);
        }
    }
    if (!features)
        return NULL;
    return Py_BuildValue("{sisN}", "num_dense", (int)ember_reader_num_dense(self->r), "features", features);
}

static PyObject *reader_rewind(PyObject *obj, PyObject *args)
{
    py_reader *self = (py_reader *)obj;
    if (!self->r)
        return ember_py_raise(EMBER_ESTATE, "the reader is closed");
    ember_reader_rewind(self->r);
    Py_RETURN_NONE;
}

static PyObject *reader_close(PyObject *obj, PyObject *args)
{
    py_reader *self = (py_reader *)obj;
    ember_reader_close(self->r);
    self->r = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef reader_methods[] = {
    {"next", reader_next, METH_VARARGS, "next(max_samples): the next batch's views, or None at the end."},
    {"describe", reader_describe, METH_NOARGS, "The dense width and the sparse features (name, rows)."},
    {"rewind", reader_rewind, METH_NOARGS, "Back to the start of this rank's share."},
    {"close", reader_close, METH_NOARGS, "Frees the reader."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot reader_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, reader_init},
    {Py_tp_dealloc, reader_dealloc},
    {Py_tp_methods, reader_methods},
    {Py_tp_doc, "Reader(config=None, path=None, eval=False, rank=0, world=1): CTR samples."},
    {0, NULL},
};

static PyType_Spec reader_spec = {
    "ember._ember.Reader", sizeof(py_reader), 0, Py_TPFLAGS_DEFAULT, reader_slots,
};

int py_reader_register(PyObject *module)
{
    return py_add_type(module, &reader_spec, "Reader");
}
