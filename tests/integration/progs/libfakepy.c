/* The test double declared in fakepy.h. */
#include <stdlib.h>
#include <string.h>

#include "fakepy.h"

struct fake_capsule {
    void *pointer;
    const char *name;
    PyCapsule_Destructor destructor;
};

static int same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* Like CPython's object free lists: the capsule freed last is the next one
 * made, at the same address, whatever the allocator (ASan and valgrind hold
 * freed blocks back). */
static PyObject *spare;

PyObject *PyCapsule_New(void *pointer, const char *name, PyCapsule_Destructor destructor)
{
    PyObject *c = spare ? spare : malloc(sizeof(*c));
    spare = NULL;
    if (c)
        *c = (PyObject){pointer, name, destructor};
    return c;
}

void *PyCapsule_GetPointer(PyObject *c, const char *name)
{
    return c && same(c->name, name) ? c->pointer : NULL;
}

int PyCapsule_SetName(PyObject *c, const char *name)
{
    if (!c)
        return -1;
    c->name = name;
    return 0;
}

int PyCapsule_IsValid(PyObject *c, const char *name)
{
    return c && c->pointer && same(c->name, name);
}

int PyCapsule_SetDestructor(PyObject *c, PyCapsule_Destructor destructor)
{
    if (!c)
        return -1;
    c->destructor = destructor;
    return 0;
}

void fake_capsule_free(PyObject *c)
{
    if (c && c->destructor)
        c->destructor(c);
    if (!spare)
        spare = c;
    else
        free(c);
}
