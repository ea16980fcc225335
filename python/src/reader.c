/*
 * reader.c: ember._ember.Reader, one ember_reader (include/ember-data.h):
 * the labelled samples `ember train` would read from a config, for a
 * training loop written in Python.  next() copies the batch out of the
 * reader into bytearrays the caller owns (numpy then views them), while
 * the reader is still claimed: a reader serves one thread at a time, as a
 * collection does, and a second thread's call raises ember.Error.
 */
#include "ember-data.h"
#include "ember_py.h"

typedef struct py_reader {
    PyObject_HEAD
    ember_reader *r;
    int busy;
} py_reader;

/* Claims the reader for one call: ember.Error when closed or busy. */
static int claim(py_reader *self)
{
    return py_claim(&self->busy, self->r != NULL, "reader");
}

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
        ember_py_raise(status, ember_errmsg(NULL));
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

static PyObject *copy(const void *data, Py_ssize_t bytes)
{
    return PyByteArray_FromStringAndSize(data && bytes ? (const char *)data : "", data ? bytes : 0);
}

/* next(max_samples) -> None at the end, else (batch_size, labels, dense,
 * lengths, values, weights or None, teacher or None): bytearrays */
static PyObject *reader_next(PyObject *obj, PyObject *args)
{
    py_reader *self = (py_reader *)obj;
    int max_samples;
    if (!PyArg_ParseTuple(args, "i", &max_samples) || claim(self))
        return NULL;
    ember_samples s;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    n = ember_reader_next(self->r, max_samples, &s);
    Py_END_ALLOW_THREADS
    PyObject *ret;
    if (n < 0) {
        ret = ember_py_raise((int)n, ember_errmsg(self->r));
    } else if (n == 0) {
        ret = Py_NewRef(Py_None);
    } else {
        Py_ssize_t b = s.batch_size, ids = (Py_ssize_t)s.sparse.num_ids;
        const float *teacher = ember_reader_teacher(self->r);
        PyObject *weights = s.sparse.weights ? copy(s.sparse.weights, ids * 4) : Py_NewRef(Py_None);
        PyObject *teach = teacher ? copy(teacher, b * 4) : Py_NewRef(Py_None);
        ret = Py_BuildValue("(nNNNNNN)", b, copy(s.labels, b * 4), copy(s.dense, b * s.num_dense * 4),
                            copy(s.sparse.lengths, b * s.sparse.num_features * 4), copy(s.sparse.ids, ids * 8),
                            weights, teach);
    }
    self->busy = 0;
    return ret;
}

static PyObject *reader_describe(PyObject *obj, PyObject *args)
{
    py_reader *self = (py_reader *)obj;
    if (claim(self))
        return NULL;
    self->busy = 0;
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
    if (claim(self))
        return NULL;
    ember_reader_rewind(self->r);
    self->busy = 0;
    Py_RETURN_NONE;
}

static PyObject *reader_close(PyObject *obj, PyObject *args)
{
    py_reader *self = (py_reader *)obj;
    if (self->busy && claim(self)) /* another thread's call holds it: "in use" */
        return NULL;
    ember_reader_close(self->r);
    self->r = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef reader_methods[] = {
    {"next", reader_next, METH_VARARGS, "next(max_samples): the next batch (copies), or None at the end."},
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
