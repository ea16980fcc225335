/*
 * module.c: the extension module ember._ember: its error type, the checks
 * every array argument goes through, and the registration of the types
 * (collection.c, predictor.c, trainer.c).
 */
#include <string.h>

#include "ember_py.h"

PyObject *ember_py_error;

PyObject *ember_py_raise(int status, const char *message)
{
    /* a message cut at its buffer's end, or holding a path's bytes, need not
     * be UTF-8: undecodable bytes show as \xNN */
    const char *m = message && *message ? message : ember_status_str(status);
    PyObject *text = PyUnicode_DecodeUTF8(m, (Py_ssize_t)strlen(m), "backslashreplace");
    if (!text)
        return NULL;
    PyObject *args = PyTuple_Pack(1, text);
    Py_DECREF(text);
    if (!args)
        return NULL;
    PyObject *exc = PyObject_Call(ember_py_error, args, NULL);
    Py_DECREF(args);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(status);
    if (code) {
        PyObject_SetAttrString(exc, "status", code);
        Py_DECREF(code);
    }
    PyErr_SetObject(ember_py_error, exc);
    Py_DECREF(exc);
    return NULL;
}

/* DLPack's C structs (the DLPack specification, dlpack.h, ABI 0.x: what
 * __dlpack__ returns in a capsule named "dltensor"). */
typedef struct py_dl_device { int32_t device_type, device_id; } py_dl_device; /* device_type 1: CPU */
typedef struct py_dl_dtype { uint8_t code, bits; uint16_t lanes; } py_dl_dtype; /* code 0 int, 2 float */
typedef struct py_dl_tensor {
    void *data;
    py_dl_device device;
    int32_t ndim;
    py_dl_dtype dtype;
    int64_t *shape, *strides; /* strides NULL: C-contiguous */
    uint64_t byte_offset;
} py_dl_tensor;
struct py_dlpack_tensor {
    py_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct py_dlpack_tensor *self);
};

static const char *dtype_name(py_dtype d)
{
    return d == PY_INT32 ? "int32" : d == PY_INT64 ? "int64" : "float32";
}

/* The element type a struct-module format describes on this machine, or -1. */
static int format_dtype(const char *format, Py_ssize_t itemsize)
{
    if (!format)
        return -1; /* no format: plain bytes */
    if (*format == '@' || *format == '=' || *format == '<')
        format++;
    if (format[0] == '\0' || format[1] != '\0')
        return -1;
    switch (format[0]) {
    case 'i': case 'l': case 'q':
        return itemsize == 4 ? PY_INT32 : itemsize == 8 ? PY_INT64 : -1;
    case 'f':
        return itemsize == 4 ? PY_FLOAT32 : -1;
    default:
        return -1;
    }
}

/* obj.__dlpack__() read as `dtype`: the tensor is ours until release. */
static int dlpack_get(PyObject *obj, const char *name, py_dtype dtype, py_array *out)
{
    PyObject *capsule = PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (!capsule)
        return -1;
    struct py_dlpack_tensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    if (!m || PyCapsule_SetName(capsule, "used_dltensor") < 0) {
        Py_DECREF(capsule);
        return -1;
    }
    Py_DECREF(capsule); /* renamed: its destructor leaves the tensor to us */
    out->dl = m;
    const py_dl_tensor *t = &m->dl_tensor;
    static const uint8_t codes[] = {0, 0, 2}, bits[] = {32, 64, 32};
    if (t->device.device_type != 1) {
        PyErr_Format(PyExc_ValueError, "%s: a tensor on device type %d; ember runs on the CPU", name,
                     (int)t->device.device_type);
        return -1;
    }
    if (t->dtype.code != codes[dtype] || t->dtype.bits != bits[dtype] || t->dtype.lanes != 1) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s elements, got DLPack type code %d with %d bits", name,
                     dtype_name(dtype), (int)t->dtype.code, (int)t->dtype.bits);
        return -1;
    }
    int64_t count = 1, expect = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (t->strides && t->shape[d] > 1 && t->strides[d] != expect) {
            PyErr_Format(PyExc_ValueError, "%s: not C-contiguous (pass a contiguous copy, e.g. .contiguous())", name);
            return -1;
        }
        expect *= t->shape[d];
        count *= t->shape[d];
    }
    out->data = (char *)t->data + t->byte_offset;
    out->count = (Py_ssize_t)count;
    return 0;
}

int py_array_get(PyObject *obj, const char *name, py_dtype dtype, int writable, int optional, py_array *out)
{
    memset(out, 0, sizeof *out);
    if (obj == Py_None) {
        if (optional)
            return 0;
        PyErr_Format(PyExc_TypeError, "%s: an array is required, got None", name);
        return -1;
    }
    if (!PyObject_CheckBuffer(obj) && PyObject_HasAttrString(obj, "__dlpack__")) {
        if (dlpack_get(obj, name, dtype, out) == 0)
            return 0;
        py_array_release(out);
        return -1;
    }
    if (!PyObject_CheckBuffer(obj)) {
        PyObject *type_name = PyType_GetName(Py_TYPE(obj));
        PyErr_Format(PyExc_TypeError, "%s: expected a %s array (numpy array or CPU torch tensor), got %S", name,
                     dtype_name(dtype), type_name ? type_name : Py_None);
        Py_XDECREF(type_name);
        return -1;
    }
    if (PyObject_GetBuffer(obj, &out->view, PyBUF_RECORDS_RO) < 0)
        return -1;
    out->held = 1;
    int got = format_dtype(out->view.format, out->view.itemsize);
    if (got != (int)dtype) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s elements, got format '%s' (%zd bytes each)", name,
                     dtype_name(dtype), out->view.format ? out->view.format : "B", out->view.itemsize);
        py_array_release(out);
        return -1;
    }
    if (!PyBuffer_IsContiguous(&out->view, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: not C-contiguous (pass a contiguous copy, e.g. .contiguous())", name);
        py_array_release(out);
        return -1;
    }
    if (writable && out->view.readonly) {
        PyErr_Format(PyExc_ValueError, "%s: read-only, and the call writes into it", name);
        py_array_release(out);
        return -1;
    }
    out->data = out->view.buf;
    out->count = out->view.len / out->view.itemsize;
    return 0;
}

void py_array_release(py_array *a)
{
    if (a->held)
        PyBuffer_Release(&a->view);
    a->held = 0;
    if (a->dl && a->dl->deleter)
        a->dl->deleter(a->dl);
    a->dl = NULL;
}

int py_claim(int *busy, int open, const char *what)
{
    char msg[96];
    if (!open || *busy) {
        snprintf(msg, sizeof msg, open ? "the %s is in use by another thread" : "the %s is closed", what);
        ember_py_raise(EMBER_ESTATE, msg);
        return -1;
    }
    *busy = 1;
    return 0;
}

int py_add_type(PyObject *module, PyType_Spec *spec, const char *name)
{
    PyObject *type = PyType_FromSpec(spec);
    if (!type)
        return -1;
    int rc = PyModule_AddObjectRef(module, name, type);
    Py_DECREF(type);
    return rc;
}

void py_free_object(PyObject *obj, PyTypeObject *tp)
{
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(obj);
    Py_DECREF(tp);
}

static PyObject *py_version(PyObject *self, PyObject *args)
{
    return PyUnicode_FromString(ember_version());
}

static PyObject *py_status_str(PyObject *self, PyObject *args)
{
    int status;
    if (!PyArg_ParseTuple(args, "i", &status))
        return NULL;
    return PyUnicode_FromString(ember_status_str(status));
}

static PyMethodDef module_methods[] = {
    {"version", py_version, METH_NOARGS, "ember's library version, e.g. \"0.1.0\"."},
    {"status_str", py_status_str, METH_VARARGS, "The name and meaning of an ember status code."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *m)
{
    ember_py_error = PyErr_NewExceptionWithDoc("ember.Error",
                                               "A failed ember call; str() is ember's message (it names the "
                                               "feature, sample, id, table, file or line at fault) and .status "
                                               "its status code.",
                                               PyExc_RuntimeError, NULL);
    if (!ember_py_error || PyModule_AddObjectRef(m, "Error", ember_py_error) < 0)
        return -1;
    return py_collection_register(m) || py_predictor_register(m) || py_reader_register(m) || py_world_register(m) || py_synth_register(m) ||
           py_trainer_register(m) ? -1 : 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._ember", "ember's C library: collections, predictors, the trainer.", 0,
    module_methods, module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ember(void)
{
    return PyModuleDef_Init(&module_def);
}
