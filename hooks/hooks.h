/*
 * hooks.h — what the hook families share, and how each declares itself.
 *
 * A hook family is one file (or a table and a file) that intercepts one
 * API and feeds the core through shim/shim.h.  It declares itself with
 * DS_FAMILY; the core finds every declaration in the ds_families section
 * (shim/start/families.c) and calls `install` at start-up when DLSHIM_HOOKS turns
 * the family on.  Nothing else registers a family: adding one is a new file.
 */
#ifndef DS_HOOKS_H
#define DS_HOOKS_H

#include "shim.h"

/* DS_FAMILY(id, .option = "cuda", .order = 30, .install = install): the
 * fields of a ds_family (shim/shim.h). */
#define DS_FAMILY(id, ...)                                                                   \
    __attribute__((used, section("ds_families"))) static const ds_family ds_family_##id = { \
        __VA_ARGS__}

/* Install order: the module namer before anything names a module; families
 * whose installs ask whether others are on, after those. */
enum {
    DS_ORDER_NAMES = 0,
    DS_ORDER_CAPSULES = 10,
    DS_ORDER_LIBTORCH = 20, /* asks whether the capsule family is on */
    DS_ORDER_DEVICES = 30,
    DS_ORDER_OTHER = 50,
};

/* ---- frameworks.c: which framework a module or a Python file belongs to -- */
void ds_framework_name(const char *path, char *out, size_t cap);
/* The modules that only pass calls on (libffi, ctypes): their name ids,
 * interned by the names family's install, before any other family's (0:
 * none), and the same as a bit per id below 64 (they are among the first):
 * the common caller, not a bridge, costs one test. */
#define DS_BRIDGES_MAX 4
extern uint16_t ds_bridges[DS_BRIDGES_MAX];
extern uint64_t ds_bridge_bits;
static inline bool ds_call_bridge(uint16_t id)
{
    if (id < 64)
        return (ds_bridge_bits >> id) & 1;
    for (int i = 0; i < DS_BRIDGES_MAX && ds_bridges[i]; i++)
        if (id == ds_bridges[i])
            return true;
    return false;
}
/* A call through the bridge `id`: the Python package that made it, where
 * Python says, else the bridge. */
uint16_t ds_package_behind(uint16_t bridge);
/* Who makes a call from `caller` (a return address), as a name id: its
 * module, or, for a call through a bridge, the Python package behind it.
 * Inline, for the capsule hooks; the ledger, below the hooks, reaches the
 * same answer through ds_module_caller_at. */
static inline uint16_t ds_caller_id(const void *caller)
{
    uint16_t id = ds_module_id_at(caller);
    if (__builtin_expect(!ds_call_bridge(id), 1))
        return id;
    return ds_package_behind(id);
}
/* A Python source file's package ("warp"), or a script's stem. */
void ds_python_package_name(const char *file, char *out, size_t cap);
/* Whether the file is part of an installed framework's package (or dlshim's). */
bool ds_python_framework_file(const char *file);

/* ---- python_frames.c, python_locations.c: the Python code behind a call -- */
/* Finds CPython's C API beside one of its functions (once).  Every capsule
 * call that hands a tensor over asks: after the first, a load. */
extern atomic_bool ds_py_bind_tried;
void ds_py_bind_first(const void *python_function);
static inline void ds_py_bind(const void *python_function)
{
    if (__builtin_expect(!atomic_load_explicit(&ds_py_bind_tried, memory_order_relaxed), 0))
        ds_py_bind_first(python_function);
}
/* Binds to the Python in the global scope (the executable's, or a shared
 * libpython it links), where there is one: at start-up, so that events a
 * program causes before its first capsule (the annotation API through
 * ctypes, a device call) name their line too. */
void ds_py_bind_global(void);
/* Binds and checks the frame layout now, where this thread holds the GIL
 * (Python's import machinery calls dlopen with it held): from then on any
 * thread's own frames can be read without it. */
void ds_py_settle(void);
/* Where this thread's Python code is: its innermost frame and instruction.
 * Called from inside a Python C API call (a capsule function), so with the
 * GIL held; false where that cannot be read (no Python, no frame, a CPython
 * before 3.11). */
typedef struct ds_py_mark {
    const void *frame;
    uintptr_t at; /* the instruction */
} ds_py_mark;
bool ds_py_mark_here(ds_py_mark *out);
/* Whether this thread is still at `m` (its innermost frame and instruction):
 * from anywhere, any thread, with or without the GIL (false without it). */
bool ds_py_at_mark(const ds_py_mark *m);
/* Nonzero while this thread runs the shim's part of a capsule function (a
 * Python C API call, so it holds the GIL): source lines are then read from
 * the frame list without asking Python whether it may. */
extern DS_TLS unsigned ds_py_in_capsule_call;
/* The package of the innermost frame's file (ds_python_package_name):
 * python_locations.c. */
bool ds_py_package_here(char *out, size_t cap);

/* ---- entry.c: DLSHIM_ENTRY specs ----------------------------------------- */
/* Specs whose function was not loaded yet: looked up again (after dlopen). */
void ds_entry_resolve(void);

/* ---- cuda_driver.c: the driver's own lookup ------------------------------ */
/* The driver hook name for a cuGetProcAddress-style request (e.g.
 * "cuMemAlloc" at version 12000 → "cuMemAlloc_v2"), in buf. */
const char *ds_cuda_driver_hook_name(const char *symbol, int version, uint64_t flags, char *buf,
                                     size_t cap);

#endif /* DS_HOOKS_H */
