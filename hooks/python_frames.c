/*
 * python_frames.c — the Python code behind a call, read through CPython's C
 * API (no Python header: the few prototypes are declared below).
 *
 * Used by the capsule hooks, which run inside a Python C API call and so on
 * a thread that holds the GIL; asked again (a release) only after
 * PyGILState_Check says this thread holds it.  Never runs Python code, never
 * leaves an exception behind, and does nothing while one is pending.
 * Needs CPython 3.11 or later (PyFrame_GetLasti); earlier ones answer false.
 */
#include <stdatomic.h>

#include "hooks.h"

typedef struct _object PyObject;

static struct {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    PyObject *(*err_occurred)(void);
    void (*err_clear)(void);
    PyObject *(*get_frame)(void);         /* PyEval_GetFrame: borrowed */
    int (*get_lasti)(PyObject *);         /* PyFrame_GetLasti */
    PyObject *(*get_code)(PyObject *);    /* PyFrame_GetCode: a new reference */
    PyObject *(*getattr)(PyObject *, const char *);
    const char *(*as_utf8)(PyObject *);
    void (*decref)(PyObject *);           /* Py_DecRef */
} py;

enum { UNBOUND, BINDING, BOUND, ABSENT };
static atomic_int state = UNBOUND;

/* `name` from the Python that defines `beside`: the global one where
 * libpython is linked into the executable, else that library's. */
static void *find(const char *name, const void *beside)
{
    void *f = ds_resolve_real(name, NULL);
    return f ? f : ds_resolve_beside(beside, name);
}

void ds_py_bind(const void *python_function)
{
    int expected = UNBOUND;
    if (atomic_load_explicit(&state, memory_order_relaxed) != UNBOUND ||
        !atomic_compare_exchange_strong(&state, &expected, BINDING))
        return; /* bound, absent, or another thread binds it */
    py.is_initialized = (int (*)(void))find("Py_IsInitialized", python_function);
    py.gil_check = (int (*)(void))find("PyGILState_Check", python_function);
    py.err_occurred = (PyObject * (*)(void)) find("PyErr_Occurred", python_function);
    py.err_clear = (void (*)(void))find("PyErr_Clear", python_function);
    py.get_frame = (PyObject * (*)(void)) find("PyEval_GetFrame", python_function);
    py.get_lasti = (int (*)(PyObject *))find("PyFrame_GetLasti", python_function);
    py.get_code = (PyObject * (*)(PyObject *)) find("PyFrame_GetCode", python_function);
    py.getattr = (PyObject * (*)(PyObject *, const char *)) find("PyObject_GetAttrString",
                                                                  python_function);
    py.as_utf8 = (const char *(*)(PyObject *))find("PyUnicode_AsUTF8", python_function);
    py.decref = (void (*)(PyObject *))find("Py_DecRef", python_function);
    bool all = py.is_initialized && py.gil_check && py.err_occurred && py.err_clear &&
               py.get_frame && py.get_lasti && py.get_code && py.getattr && py.as_utf8 &&
               py.decref;
    atomic_store_explicit(&state, all ? BOUND : ABSENT, memory_order_release);
}

/* The innermost Python frame of this thread, when it may be read now. */
static PyObject *current_frame(void)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return NULL;
    if (!py.is_initialized() || !py.gil_check() || py.err_occurred())
        return NULL;
    return py.get_frame(); /* clears only an error of its own making */
}

bool ds_py_mark_here(ds_py_mark *out)
{
    PyObject *frame = current_frame();
    if (!frame)
        return false;
    out->frame = frame;
    out->lasti = py.get_lasti(frame);
    return true;
}

bool ds_py_package_here(char *out, size_t cap)
{
    PyObject *frame = current_frame();
    if (!frame)
        return false;
    PyObject *code = py.get_code(frame);
    PyObject *file = code ? py.getattr(code, "co_filename") : NULL;
    const char *path = file ? py.as_utf8(file) : NULL;
    if (path)
        ds_python_package_name(path, out, cap);
    else
        py.err_clear(); /* ours: none was pending */
    if (file)
        py.decref(file);
    if (code)
        py.decref(code);
    return path != NULL;
}
