/*
 * python_capsule.c — DLPack through Python capsules, in unmodified programs.
 *
 * Wraps, through every module's GOT (shim/modules.c), so it works whether
 * libpython is linked into the executable or is a shared library:
 *   PyCapsule_New          named "dltensor" / "dltensor_versioned": an export
 *                          by the calling module
 *   PyCapsule_SetName      to "used_dltensor[_versioned]": the import, by
 *                          the calling module
 *   PyCapsule_SetDestructor to NULL on a DLPack capsule not yet renamed: an
 *                          import by a consumer that takes ownership that way
 *   PyCapsule_GetPointer   named "dlpack_exchange_api": hands out a wrapped
 *                          copy of the DLPack 1.3 exchange table, whose entries
 *                          record exports and imports and forward
 * Not an import: PyCapsule_GetPointer on a DLPack capsule (producers call it in
 * their own capsule destructors).  Not an export: NumPy's internal
 * "numpy_dltensor*" capsules around an imported tensor.
 * Leaves out: capsules made through ctypes.pythonapi or dlsym (no GOT call to
 * patch), and the exchange table's dltensor_from_py_object_no_sync (a borrowed
 * view: no ownership moves) and current_work_stream (stream issue).
 *
 * No Python header: the few types needed are declared below, so the shim
 * builds and loads without Python.  Each wrapper: remember the caller, keep
 * errno, call the real function, record, return the real result.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"

typedef struct _object PyObject;
typedef void (*capsule_destructor)(PyObject *);

static PyObject *(*real_New)(void *, const char *, capsule_destructor);
static int (*real_SetName)(PyObject *, const char *);
static int (*real_SetDestructor)(PyObject *, capsule_destructor);
static void *(*real_GetPointer)(PyObject *, const char *);
static int (*real_IsValid)(PyObject *, const char *); /* used, not wrapped */

enum { NOT_DLPACK, LEGACY, VERSIONED };

static int kind_of(const char *name, const char *legacy, const char *versioned)
{
    if (!name)
        return NOT_DLPACK;
    return !strcmp(name, legacy) ? LEGACY : !strcmp(name, versioned) ? VERSIONED : NOT_DLPACK;
}

static void *wrap_GetPointer(PyObject *capsule, const char *name);

/* The tensor in a DLPack capsule nobody consumed yet, else NULL.  Asks with
 * the exact name, so no Python exception is ever raised. */
static void *unconsumed_tensor(PyObject *capsule, int kind, const void *caller)
{
    int (*is_valid)(PyObject *, const char *) =
        DS_LAZY(real_IsValid, ds_resolve_real("PyCapsule_IsValid", NULL));
    const char *name = kind == VERSIONED ? "dltensor_versioned" : "dltensor";
    void *(*get)(PyObject *, const char *) = (void *(*)(PyObject *, const char *))ds_got_original(
        (void *)wrap_GetPointer, (void **)&real_GetPointer, "PyCapsule_GetPointer", caller);
    if (!is_valid || !get || !is_valid(capsule, name))
        return NULL;
    return get(capsule, name);
}

static void import_by(void *tensor, int kind, const void *caller)
{
    ds_tensor_import_by(tensor, kind == VERSIONED, ds_module_id_at(caller));
}

/* ---- the capsule wrappers ----------------------------------------------- */

static PyObject *wrap_New(void *pointer, const char *name, capsule_destructor destructor)
{
    const void *caller = __builtin_return_address(0);
    PyObject *capsule = DS_REAL(wrap_New, real_New, "PyCapsule_New")(pointer, name, destructor);
    int saved = errno;
    int kind = kind_of(name, "dltensor", "dltensor_versioned");
    if (capsule && kind != NOT_DLPACK && ds_active())
        ds_tensor_export_by(pointer, kind == VERSIONED, ds_module_id_at(caller));
    errno = saved;
    return capsule;
}

static int wrap_SetName(PyObject *capsule, const char *name)
{
    const void *caller = __builtin_return_address(0);
    int saved = errno;
    int kind = kind_of(name, "used_dltensor", "used_dltensor_versioned");
    void *tensor =
        kind != NOT_DLPACK && ds_active() ? unconsumed_tensor(capsule, kind, caller) : NULL;
    errno = saved;
    int result = DS_REAL(wrap_SetName, real_SetName, "PyCapsule_SetName")(capsule, name);
    saved = errno;
    if (result == 0 && tensor)
        import_by(tensor, kind, caller);
    errno = saved;
    return result;
}

static int wrap_SetDestructor(PyObject *capsule, capsule_destructor destructor)
{
    const void *caller = __builtin_return_address(0);
    int saved = errno;
    void *tensor = NULL;
    int kind = NOT_DLPACK;
    if (!destructor && ds_active()) {
        kind = LEGACY;
        tensor = unconsumed_tensor(capsule, kind, caller);
        if (!tensor) {
            kind = VERSIONED;
            tensor = unconsumed_tensor(capsule, kind, caller);
        }
    }
    errno = saved;
    int result =
        DS_REAL(wrap_SetDestructor, real_SetDestructor, "PyCapsule_SetDestructor")(capsule, destructor);
    saved = errno;
    if (result == 0 && tensor)
        import_by(tensor, kind, caller);
    errno = saved;
    return result;
}

static void *wrapped_exchange_api(void *table);

static void *wrap_GetPointer(PyObject *capsule, const char *name)
{
    void *pointer = DS_REAL(wrap_GetPointer, real_GetPointer, "PyCapsule_GetPointer")(capsule, name);
    int saved = errno;
    if (pointer && name && !strcmp(name, "dlpack_exchange_api") && ds_active())
        pointer = wrapped_exchange_api(pointer);
    errno = saved;
    return pointer;
}

/* ---- the DLPack 1.3 exchange table -------------------------------------- */

typedef int (*allocator_fn)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                            void (*set_error)(void *error_ctx, const char *kind, const char *msg));
typedef int (*from_py_fn)(void *py_object, DLManagedTensorVersioned **out);
typedef int (*to_py_fn)(DLManagedTensorVersioned *tensor, void **out_py_object);

/* DLPackExchangeAPI (dlpack.h 1.3), declared here because Debian's header
 * predates it. */
typedef struct {
    DLPackVersion version;
    void *prev_api;
    allocator_fn managed_tensor_allocator;
    from_py_fn managed_tensor_from_py_object_no_sync;
    to_py_fn managed_tensor_to_py_object_no_sync;
    void *dltensor_from_py_object_no_sync;
    void *current_work_stream;
} exchange_api;

/* Tables are static in each framework, so a few slots suffice; C has no
 * closures, so each slot has its own wrapper functions. */
#define DS_EXCHANGE_SLOTS 8
static struct {
    const exchange_api *orig;
    exchange_api wrapped;
    char owner[DS_NAME_MAX]; /* the framework the table belongs to */
} slots[DS_EXCHANGE_SLOTS];
static int nslots;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* The producer made a tensor: an export by the table's owner. */
static int exchange_allocate(int i, DLTensor *prototype, DLManagedTensorVersioned **out, void *ctx,
                             void (*set_error)(void *, const char *, const char *))
{
    int result = slots[i].orig->managed_tensor_allocator(prototype, out, ctx, set_error);
    int saved = errno;
    if (result == 0 && out && *out && ds_active())
        ds_tensor_export(*out, true, slots[i].owner);
    errno = saved;
    return result;
}

static int exchange_from_py(int i, void *py_object, DLManagedTensorVersioned **out)
{
    int result = slots[i].orig->managed_tensor_from_py_object_no_sync(py_object, out);
    int saved = errno;
    if (result == 0 && out && *out && ds_active())
        ds_tensor_export(*out, true, slots[i].owner);
    errno = saved;
    return result;
}

/* The owner takes the tensor (ownership is stolen): recorded before the
 * call, after which the tensor may already be gone. */
static int exchange_to_py(int i, DLManagedTensorVersioned *tensor, void **out)
{
    int saved = errno;
    if (ds_active())
        ds_tensor_import(tensor, true, slots[i].owner);
    errno = saved;
    return slots[i].orig->managed_tensor_to_py_object_no_sync(tensor, out);
}

#define DS_SLOT_WRAPPERS(i)                                                                  \
    static int allocate_##i(DLTensor *p, DLManagedTensorVersioned **o, void *c,              \
                            void (*e)(void *, const char *, const char *))                   \
    {                                                                                        \
        return exchange_allocate(i, p, o, c, e);                                             \
    }                                                                                        \
    static int from_py_##i(void *obj, DLManagedTensorVersioned **o)                          \
    {                                                                                        \
        return exchange_from_py(i, obj, o);                                                  \
    }                                                                                        \
    static int to_py_##i(DLManagedTensorVersioned *t, void **o) { return exchange_to_py(i, t, o); }
DS_SLOT_WRAPPERS(0)
DS_SLOT_WRAPPERS(1)
DS_SLOT_WRAPPERS(2)
DS_SLOT_WRAPPERS(3)
DS_SLOT_WRAPPERS(4)
DS_SLOT_WRAPPERS(5)
DS_SLOT_WRAPPERS(6)
DS_SLOT_WRAPPERS(7)
#undef DS_SLOT_WRAPPERS

static const struct {
    allocator_fn allocate;
    from_py_fn from_py;
    to_py_fn to_py;
} slot_fns[DS_EXCHANGE_SLOTS] = {
    {allocate_0, from_py_0, to_py_0}, {allocate_1, from_py_1, to_py_1},
    {allocate_2, from_py_2, to_py_2}, {allocate_3, from_py_3, to_py_3},
    {allocate_4, from_py_4, to_py_4}, {allocate_5, from_py_5, to_py_5},
    {allocate_6, from_py_6, to_py_6}, {allocate_7, from_py_7, to_py_7},
};

/* The wrapped copy of `table`, made on first sight; the table itself when it
 * is of an unknown major version, unreadable, or the slots are full. */
static void *wrapped_exchange_api(void *table)
{
    exchange_api copy;
    void *result = table;
    ds_lock(&slots_lock);
    for (int i = 0; i < nslots; i++)
        if (slots[i].orig == table || &slots[i].wrapped == table) {
            result = &slots[i].wrapped;
            goto done;
        }
    if (nslots == DS_EXCHANGE_SLOTS || ds_safe_read(&copy, table, sizeof(copy)) != sizeof(copy) ||
        copy.version.major != DLSHIM_DLPACK_MAJOR || !copy.managed_tensor_allocator ||
        !copy.managed_tensor_from_py_object_no_sync || !copy.managed_tensor_to_py_object_no_sync)
        goto done;
    int i = nslots;
    slots[i].orig = table;
    ds_module_name_at((const void *)copy.managed_tensor_from_py_object_no_sync, slots[i].owner,
                      sizeof(slots[i].owner));
    copy.managed_tensor_allocator = slot_fns[i].allocate;
    copy.managed_tensor_from_py_object_no_sync = slot_fns[i].from_py;
    copy.managed_tensor_to_py_object_no_sync = slot_fns[i].to_py;
    slots[i].wrapped = copy;
    __atomic_store_n(&nslots, i + 1, __ATOMIC_RELEASE);
    result = &slots[i].wrapped;
done:
    ds_unlock(&slots_lock);
    return result;
}

/* ---- registration ------------------------------------------------------- */

static const ds_got_hook capsule_hooks[] = {
    {"PyCapsule_New", (void *)wrap_New, (void **)&real_New, NULL},
    {"PyCapsule_SetName", (void *)wrap_SetName, (void **)&real_SetName, NULL},
    {"PyCapsule_SetDestructor", (void *)wrap_SetDestructor, (void **)&real_SetDestructor, NULL},
    {"PyCapsule_GetPointer", (void *)wrap_GetPointer, (void **)&real_GetPointer, NULL},
};

void ds_python_capsule_install(void)
{
    ds_got_hooks_add(capsule_hooks, DS_ARRAY_LEN(capsule_hooks));
}
