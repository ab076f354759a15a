/*
 * python_capsule.h — what python_capsule.c and python_exchange.c share, and
 * nothing else.
 */
#ifndef DS_PYTHON_CAPSULE_H
#define DS_PYTHON_CAPSULE_H

#include "hooks.h"

typedef struct _object PyObject;

/* The wrapped copy of an exchange table, made on first sight; the table
 * itself when it is of an unknown major version, unreadable, or every slot
 * is taken (python_exchange.c). */
void *ds_py_exchange_api(void *table);

#endif
