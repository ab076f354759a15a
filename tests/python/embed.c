/* Runs a Python script through the shared libpython (the layout where
 * PyCapsule_* live in libpython3.x.so rather than in the executable), so the
 * tests can check that events are the same in both layouts and never doubled.
 * Usage: embed SCRIPT [ARGS...] */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: embed SCRIPT [ARGS...]\n");
        return 2;
    }
    return Py_BytesMain(argc, argv);
}
