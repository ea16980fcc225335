/*
 * predictor.c: ember._ember.Predictor, one ember_predictor: opens a
 * checkpoint of `ember train` or an inference bundle and scores samples
 * exactly as the trainer's evaluation does (docs/inference.md).  Same rules
 * as collection.c: the GIL released in the library, one thread at a time,
 * close() then ember.Error.
 */
#include <string.h>

#include "ember-serve.h"
#include "ember_py.h"

typedef struct py_predictor {
    PyObject_HEAD
    ember_predictor *p;
    int busy;
} py_predictor;

static int predictor_init(PyObject *obj, PyObject *args, PyObject *kwargs)
{
    py_predictor *self = (py_predictor *)obj;
    static char *kwlist[] = {"path", "threads", "world", NULL};
    const char *path;
    ember_predictor_options o = {0};
    PyObject *world = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|iO", kwlist, &path, &o.threads, &world))
        return -1;
    if (self->p) {
        PyErr_SetString(PyExc_TypeError, "Predictor: already open");
        return -1;
    }
    if (world != Py_None && !(o.world = PyCapsule_GetPointer(world, "ember.world")))
        return -1;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_predictor_open(path, &o, &self->p);
    Py_END_ALLOW_THREADS
    if (status) {
        self->p = NULL;
        ember_py_raise(status, ember_errmsg(NULL));
        return -1;
    }
    return 0;
}

static void predictor_dealloc(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    py_predictor *self = (py_predictor *)obj;
    if (self->p)
        ember_predictor_close(self->p);
    py_free_object(obj, tp);
}

static int claim(py_predictor *self)
{
    return py_claim(&self->busy, self->p != NULL, "predictor");
}

/* score(batch_size, dense, lengths, values, weights, out) */
static PyObject *predictor_score(PyObject *obj, PyObject *args)
{
    py_predictor *self = (py_predictor *)obj;
    int batch_size;
    PyObject *dobj, *lobj, *iobj, *wobj, *oobj;
    if (!PyArg_ParseTuple(args, "iOOOOO", &batch_size, &dobj, &lobj, &iobj, &wobj, &oobj) || claim(self))
        return NULL;
    py_array dense = {0}, lengths = {0}, ids = {0}, weights = {0}, out = {0};
    PyObject *ret = NULL;
    const ember_collection_config *cc = ember_predictor_config(self->p);
    int32_t nd = ember_predictor_num_dense(self->p);
    if (py_array_get(dobj, "dense", PY_FLOAT32, 0, 0, &dense) || py_array_get(lobj, "lengths", PY_INT32, 0, 0, &lengths) ||
        py_array_get(iobj, "values", PY_INT64, 0, 0, &ids) || py_array_get(wobj, "weights", PY_FLOAT32, 0, 1, &weights) ||
        py_array_get(oobj, "out", PY_FLOAT32, 1, 0, &out))
        goto done;
    if (batch_size < 0 || dense.count != (Py_ssize_t)batch_size * nd ||
        lengths.count != (Py_ssize_t)batch_size * cc->num_features || out.count != batch_size ||
        (wobj != Py_None && weights.count != ids.count)) {
        PyErr_Format(PyExc_ValueError,
                     "score: %d samples need dense of %d x %d floats (got %zd), lengths of %d x %d (got %zd), "
                     "out of %d (got %zd), and weights as many as values",
                     batch_size, batch_size, nd, dense.count, cc->num_features, batch_size, lengths.count,
                     batch_size, out.count);
        goto done;
    }
    ember_batch b = {batch_size, cc->num_features, lengths.data, ids.data, weights.data, ids.count};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_predictor_score(self->p, batch_size, dense.data, &b, out.data);
    Py_END_ALLOW_THREADS
    if (status)
        ember_py_raise(status, ember_errmsg(self->p));
    else
        ret = Py_NewRef(Py_None);
done:
    self->busy = 0;
    py_array_release(&dense);
    py_array_release(&lengths);
    py_array_release(&ids);
    py_array_release(&weights);
    py_array_release(&out);
    return ret;
}

/* score_body(body: bytes, format: int) -> bytes of float32 scores: raw rows
 * (a JSON {"rows": [...]} body, or CSV/TSV text) through the library's
 * decoding by the model's input schema (ember_predictor_score_body). */
static PyObject *predictor_score_body(PyObject *obj, PyObject *args)
{
    py_predictor *self = (py_predictor *)obj;
    Py_buffer body;
    int format;
    if (!PyArg_ParseTuple(args, "y*i", &body, &format))
        return NULL;
    if (format < EMBER_BODY_JSON || format > EMBER_BODY_TSV) {
        PyBuffer_Release(&body);
        PyErr_SetString(PyExc_ValueError, "score_body: format 0 (JSON) to 3 (TSV)");
        return NULL;
    }
    if (claim(self)) {
        PyBuffer_Release(&body);
        return NULL;
    }
    float *scores = NULL;
    int32_t n = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_predictor_score_body(self->p, body.buf, (size_t)body.len, (ember_body_format)format, &scores, &n);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    PyBuffer_Release(&body);
    if (status) {
        ember_py_raise(status, ember_errmsg(NULL));
        return NULL;
    }
    PyObject *ret = PyBytes_FromStringAndSize((const char *)scores, (Py_ssize_t)n * (Py_ssize_t)sizeof(float));
    free(scores);
    return ret;
}

/* {"num_dense": n, "features": [(name, table name, dim, combiner)...]} */
static PyObject *predictor_describe(PyObject *obj, PyObject *args)
{
    py_predictor *self = (py_predictor *)obj;
    if (claim(self))
        return NULL;
    self->busy = 0;
    const ember_collection_config *cc = ember_predictor_config(self->p);
    PyObject *features = PyList_New(0);
    if (!features)
        return NULL;
    for (int32_t f = 0; f < cc->num_features; f++) {
        const ember_table_config *t = &cc->tables[cc->features[f].table];
        PyObject *item = Py_BuildValue("(ssii)", cc->features[f].name, t->name, (int)t->dim,
                                       (int)cc->features[f].combiner);
        if (!item || PyList_Append(features, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(features);
            return NULL;
        }
        Py_DECREF(item);
    }
    return Py_BuildValue("{sisN}", "num_dense", (int)ember_predictor_num_dense(self->p), "features", features);
}

static PyObject *predictor_close(PyObject *obj, PyObject *args)
{
    py_predictor *self = (py_predictor *)obj;
    if (self->busy && claim(self)) /* another thread's call holds it: "in use" */
        return NULL;
    if (self->p)
        ember_predictor_close(self->p);
    self->p = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef predictor_methods[] = {
    {"score", predictor_score, METH_VARARGS, "score(batch_size, dense, lengths, values, weights, out)"},
    {"score_body", predictor_score_body, METH_VARARGS, "score_body(body, format): float32 scores of raw rows"},
    {"describe", predictor_describe, METH_NOARGS, "The model's dense width and features."},
    {"close", predictor_close, METH_NOARGS, "Frees the model; later calls raise ember.Error."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot predictor_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, predictor_init},
    {Py_tp_dealloc, predictor_dealloc},
    {Py_tp_methods, predictor_methods},
    {Py_tp_doc, "Predictor(path, threads=0): a trained model from a checkpoint or bundle."},
    {0, NULL},
};

static PyType_Spec predictor_spec = {
    "ember._ember.Predictor", sizeof(py_predictor), 0, Py_TPFLAGS_DEFAULT, predictor_slots,
};

int py_predictor_register(PyObject *module)
{
    return py_add_type(module, &predictor_spec, "Predictor");
}
