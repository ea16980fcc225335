/*
 * ember_py.h: what the files of the extension module ember._ember share:
 * the error type, array arguments, and the types each file registers.
 *
 * The module is written against CPython's limited API 3.11 (one abi3 build
 * serves 3.11 and later).  Arrays come in through the buffer protocol only
 * (numpy arrays; the Python layer hands torch tensors over as numpy views of
 * the same memory): their dtype and C-contiguity are checked against what
 * the call needs and nothing is converted, so a wrong array is a TypeError
 * or ValueError naming the argument, never a silent copy.
 */
#ifndef EMBER_PY_H
#define EMBER_PY_H

#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "ember.h"

/* ember.Error: a failed library call; .status is ember's status code. */
extern PyObject *ember_py_error;
/* Raises ember.Error(message) with .status; returns NULL. */
PyObject *ember_py_raise(int status, const char *message);

/* The element types a call takes. */
typedef enum py_dtype { PY_INT32 = 0, PY_INT64, PY_FLOAT32 } py_dtype;

/* A borrowed array argument: a C-contiguous buffer of `count` elements,
 * from the buffer protocol or from a DLPack capsule (obj.__dlpack__()). */
struct py_dlpack_tensor;
typedef struct py_array {
    Py_buffer view;
    int held;        /* view must be released                                */
    struct py_dlpack_tensor *dl; /* a consumed DLPack tensor, deleted at release */
    void *data;      /* NULL with count 0 allowed                           */
    Py_ssize_t count;
} py_array;

/* Gets obj (None allowed when optional: then data NULL, count 0) as an array
 * of dtype for argument `name`; writable for outputs.  0, or -1 with a
 * TypeError (no buffer, wrong dtype) or ValueError (not contiguous,
 * read-only) set. */
int py_array_get(PyObject *obj, const char *name, py_dtype dtype, int writable, int optional, py_array *out);
void py_array_release(py_array *a);

/* One thread at a time on a handle (`what`: "collection", ...): ember.Error
 * when it is closed (open 0) or another thread's call holds it (*busy);
 * else *busy = 1 and 0.  Called and cleared under the GIL, so the check
 * cannot race. */
int py_claim(int *busy, int open, const char *what);

/* Makes a type from spec and adds it to the module as `name`; 0 or -1. */
int py_add_type(PyObject *module, PyType_Spec *spec, const char *name);
/* The end of a heap type's tp_dealloc: frees obj, drops its type (tp, read
 * before the object's parts were freed). */
void py_free_object(PyObject *obj, PyTypeObject *tp);

/* Registers a type in the module; 0 or -1. */
int py_collection_register(PyObject *module);
int py_predictor_register(PyObject *module);
int py_trainer_register(PyObject *module);
int py_reader_register(PyObject *module);
int py_world_register(PyObject *module);
int py_synth_register(PyObject *module);

#endif
