/* A test double of CPython's capsule API (the names and signatures of
 * Python.h's PyCapsule_*), so that GOT patching can be tested on programs
 * linked every way without building CPython that way. */
#ifndef FAKEPY_H
#define FAKEPY_H

typedef struct fake_capsule PyObject;
typedef void (*PyCapsule_Destructor)(PyObject *);

PyObject *PyCapsule_New(void *pointer, const char *name, PyCapsule_Destructor destructor);
void *PyCapsule_GetPointer(PyObject *capsule, const char *name);
int PyCapsule_SetName(PyObject *capsule, const char *name);
int PyCapsule_IsValid(PyObject *capsule, const char *name);
int PyCapsule_SetDestructor(PyObject *capsule, PyCapsule_Destructor destructor);
void fake_capsule_free(PyObject *capsule); /* runs the destructor, like Py_DECREF */

#endif
