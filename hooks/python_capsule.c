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
 *                          record exports and imports and forward; named
 *                          "dltensor[_versioned]": remembered for the rename
 *                          that follows (see opened_capsule)
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

/* LEGACY for "<prefix>dltensor", VERSIONED for "<prefix>dltensor_versioned",
 * else NOT_DLPACK (`stem` is the prefix and "dltensor", of length `len`).
 * Every capsule call in the process comes through here.  Byte by byte,
 * unrolled against the constant stem: 17 instructions for "dltensor", where
 * strncmp took ~21 and its call.  A shorter name differs at its NUL, so no
 * byte past it is read. */
static inline int kind_of(const char *name, const char *stem, size_t len)
{
    if (!name)
        return NOT_DLPACK;
#pragma GCC unroll 16
    for (size_t i = 0; i < len; i++)
        if (name[i] != stem[i])
            return NOT_DLPACK;
    if (!name[len])
        return LEGACY;
    return !strcmp(name + len, "_versioned") ? VERSIONED : NOT_DLPACK;
}
#define KIND_OF(name, stem) kind_of((name), (stem), sizeof(stem) - 1)

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

/* The DLPack capsule this thread last opened by its unconsumed name.  A
 * consumer opens the capsule (PyCapsule_GetPointer), takes the tensor, then
 * renames it or clears its destructor: the tensor of that rename is the one
 * just opened, and asking Python again (IsValid, then GetPointer) was a
 * third of a rename's cost.  Cleared when taken and when a capsule is made
 * at its address (the opened one was freed), so that one is asked afresh.
 * Not seen: a capsule made there outside the hooks (ctypes) and renamed
 * without being opened first, which no consumer does.  Per thread; a
 * signal handler that opens a capsule between the reads below changes
 * `capsule` first and last, so the reader sees it. */
typedef struct {
    PyObject *capsule;
    void *tensor;
    int kind;
} opened_capsule;
static DS_TLS opened_capsule opened;

static void remember_opened(PyObject *capsule, void *tensor, int kind)
{
    opened.capsule = NULL;
    atomic_signal_fence(memory_order_seq_cst);
    opened.tensor = tensor;
    opened.kind = kind;
    atomic_signal_fence(memory_order_seq_cst);
    opened.capsule = capsule;
}

/* The tensor `capsule` was opened for, if it was the last one opened here
 * (with its kind), else NULL.  Taken: a second rename asks Python. */
static void *take_opened(PyObject *capsule, int *kind)
{
    if (opened.capsule != capsule)
        return NULL;
    atomic_signal_fence(memory_order_seq_cst);
    opened_capsule o = opened;
    atomic_signal_fence(memory_order_seq_cst);
    if (o.capsule != capsule || opened.capsule != capsule)
        return NULL;
    opened.capsule = NULL;
    *kind = o.kind;
    return o.tensor;
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
    int kind = KIND_OF(name, "dltensor"); /* plain reads: errno untouched */
    if (capsule == opened.capsule)
        opened.capsule = NULL; /* made again where the opened one was */
    if (capsule && kind != NOT_DLPACK && ds_active()) {
        int saved = errno;
        ds_tensor_export_by(pointer, kind == VERSIONED, ds_module_id_at(caller));
        errno = saved;
    }
    return capsule;
}

static int wrap_SetName(PyObject *capsule, const char *name)
{
    const void *caller = __builtin_return_address(0);
    int saved = errno;
    int kind = KIND_OF(name, "used_dltensor"), opened_kind = NOT_DLPACK;
    void *tensor = NULL;
    if (kind != NOT_DLPACK && ds_active()) {
        tensor = take_opened(capsule, &opened_kind);
        if (!tensor || opened_kind != kind)
            tensor = unconsumed_tensor(capsule, kind, caller);
    }
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
        tensor = take_opened(capsule, &kind);
        if (!tensor) {
            kind = LEGACY;
            tensor = unconsumed_tensor(capsule, kind, caller);
        }
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
    if (!pointer || !name || name[0] != 'd') /* neither name below */
        return pointer;
    int kind = KIND_OF(name, "dltensor");
    if (kind != NOT_DLPACK) {
        remember_opened(capsule, pointer, kind); /* plain stores: errno untouched */
    } else if (!strcmp(name, "dlpack_exchange_api") && ds_active()) {
        int saved = errno;
        pointer = wrapped_exchange_api(pointer);
        errno = saved;
    }
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
