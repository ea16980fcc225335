/*
 * trainer.c: ember._ember.train(), the trainer of `ember train`
 * (include/ember-train.h) in-process: overrides from a dict of option names
 * to text (ember_train_overrides_set parses them as the command line
 * does), events to a Python callable, the summary's JSON back.
 *
 * The run holds no GIL; each event takes it for the callback.  An exception
 * in the callback cannot stop the C trainer mid-step: the first one is kept,
 * later events are dropped, and it is raised when the run returns.
 */
#include "ember-train.h"
#include "ember_py.h"

typedef struct event_ctx {
    PyObject *callback;  /* borrowed; NULL: no callback      */
    PyObject *type, *value, *traceback; /* the first exception it raised */
} event_ctx;

static void on_event(void *p, const char *json)
{
    event_ctx *e = p;
    if (!e->callback)
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!e->type) {
        PyObject *r = PyObject_CallFunction(e->callback, "s", json);
        if (r)
            Py_DECREF(r);
        else
            PyErr_Fetch(&e->type, &e->value, &e->traceback);
    }
    PyGILState_Release(g);
}

/* train(config, overrides, on_event, world) -> the summary's JSON text */
static PyObject *py_train(PyObject *self, PyObject *args)
{
    const char *config;
    PyObject *overrides, *callback, *world;
    if (!PyArg_ParseTuple(args, "zO!OO", &config, &PyDict_Type, &overrides, &callback, &world))
        return NULL;
    ember_world *w = NULL;
    if (world != Py_None && !(w = PyCapsule_GetPointer(world, "ember.world")))
        return NULL;
    ember_train_overrides o;
    ember_train_overrides_init(&o);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(overrides, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8AndSize(key, NULL), *v = k ? PyUnicode_AsUTF8AndSize(value, NULL) : NULL;
        if (!k || !v)
            return NULL; /* the Python layer passes str -> str */
        char why[256] = "";
        int rc = ember_train_overrides_set_msg(&o, k, v, why, sizeof why);
        if (rc == 1) {
            PyErr_Format(PyExc_TypeError, "train: unexpected keyword argument '%s'", k);
            return NULL;
        }
        if (rc) {
            PyErr_Format(PyExc_ValueError, "train: %s", why[0] ? why : "not a valid value");
            return NULL;
        }
    }
    event_ctx e = {callback == Py_None ? NULL : callback, NULL, NULL, NULL};
    ember_trainer *t = NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_trainer_open(config, &o, w, on_event, &e, &t);
    if (status == EMBER_OK)
        status = ember_trainer_run(t);
    Py_END_ALLOW_THREADS
    PyObject *ret = NULL;
    if (e.type) {
        PyErr_Restore(e.type, e.value, e.traceback);
    } else if (status) {
        ember_py_raise(status, ember_errmsg(t));
    } else {
        const char *summary = ember_trainer_summary(t);
        ret = PyUnicode_FromString(summary ? summary : "{}");
    }
    ember_trainer_close(t);
    return ret;
}

static PyMethodDef trainer_methods[] = {
    {"train", py_train, METH_VARARGS, "train(config, overrides, on_event, world): the summary JSON."},
    {NULL, NULL, 0, NULL},
};

int py_trainer_register(PyObject *module)
{
    return PyModule_AddFunctions(module, trainer_methods);
}
