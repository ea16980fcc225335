/*
 * trainer.c: ember._ember.train (filled in with the library's trainer API).
 */
#include "ember_py.h"

int py_trainer_register(PyObject *module)
{
    return 0;
}
