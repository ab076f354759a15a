/*
 * python_capsule.c — DLPack through Python capsules, in unmodified programs.
 *
 * Wraps, through every module's GOT (shim/image/modules.c) and dlsym, so it works
 * whether libpython is linked into the executable or is a shared library,
 * and for capsules made through ctypes:
 *   PyCapsule_New          named "dltensor" / "dltensor_versioned": an export
 *                          by the calling module; its destructor is wrapped
 *                          (see "Capsule destructors")
 *   PyCapsule_SetName      to "used_dltensor[_versioned]": the import, by
 *                          the calling module
 *   PyCapsule_SetDestructor to NULL on a DLPack capsule not yet renamed: an
 *                          import by a consumer that takes ownership that way
 *                          (nanobind, so MLX; JAX and TensorFlow rename first)
 *   PyCapsule_GetPointer   named "dlpack_exchange_api": hands out a wrapped
 *                          copy of the DLPack 1.3 exchange table, whose entries
 *                          record exports and imports and forward
 *                          (python_exchange.c); named
 *                          "dltensor[_versioned]", on a capsule this thread
 *                          did not make: remembered for the rename or release
 *                          that follows (see fresh_capsule)
 * The ways current frameworks consume a capsule, each one import:
 *   rename (NumPy, PyTorch, Paddle, Warp); rename, then clear the destructor
 *   (JAX, TensorFlow); clear the destructor, then rename (tvm-ffi); clear it
 *   without renaming (MLX); take the tensor, let it go, then rename (JAX
 *   copying an unaligned buffer: an import of a copy, seen at the release).
 * Not an import: PyCapsule_GetPointer on a DLPack capsule (producers call it
 * in their own capsule destructors); a rename or cleared destructor from
 * inside the capsule's own destructor (TensorFlow's calls the deleter, then
 * clears itself).  Not an export: NumPy's internal "numpy_dltensor*" capsules
 * around an imported tensor.
 * A capsule made or taken through ctypes (Warp, PyArrow's tests) is named
 * after the Python package that made the call (python_frames.c), not libffi.
 * A consumer that lets the tensor go inside the very Python instruction that
 * imported it (MLX copies every import) kept a copy: the release says so.
 *
 * No Python header: the few types needed are declared below, so the shim
 * builds and loads without Python.  Each wrapper: remember the caller, keep
 * errno, call the real function, record, return the real result.
 */
#include <errno.h>
#include <string.h>

#include "python_capsule.h"

typedef void (*capsule_destructor)(PyObject *);

static PyObject *(*real_New)(void *, const char *, capsule_destructor);
static int (*real_SetName)(PyObject *, const char *);
static int (*real_SetDestructor)(PyObject *, capsule_destructor);
typedef void *(*get_pointer_fn)(PyObject *, const char *);
static get_pointer_fn real_GetPointer;
static int (*real_IsValid)(PyObject *, const char *); /* used, not wrapped */

enum { NOT_DLPACK, LEGACY, VERSIONED };

/* LEGACY for "<prefix>dltensor", VERSIONED for "<prefix>dltensor_versioned",
 * else NOT_DLPACK (`stem` is the prefix and "dltensor", of length `len`).
 * Every capsule call in the process comes through here.  Byte by byte,
 * unrolled against the constant stem, cheaper than a call to strncmp.  A
 * shorter name differs at its NUL, so no
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

static uint16_t capsule_api(void)
{
    return DS_NAME_ONCE("capsule");
}

/* ds_active(), keeping errno only where it has to find out (start-up): the
 * settled answer touches nothing, so a hook need not save errno before the
 * real call. */
static inline bool active_keeping_errno(void)
{
    if (ds_active_now())
        return true;
    int saved = errno;
    bool active = ds_active();
    errno = saved;
    return active;
}

static void *wrap_GetPointer(PyObject *capsule, const char *name);

/* The real PyCapsule_GetPointer for a call from `caller` (NULL: the
 * global one). */
static get_pointer_fn original_get_pointer(const void *caller)
{
    return (get_pointer_fn)ds_got_original((void *)wrap_GetPointer, (void **)&real_GetPointer,
                                           "PyCapsule_GetPointer", caller);
}

/* The tensor in a DLPack capsule nobody consumed yet, else NULL.  Asks with
 * the exact name, so no Python exception is ever raised.  `caller`: whose
 * GetPointer to use (NULL: the global one). */
static void *unconsumed_tensor(PyObject *capsule, int kind, const void *caller)
{
    int (*is_valid)(PyObject *, const char *) =
        DS_LAZY(real_IsValid, ds_resolve_real("PyCapsule_IsValid", NULL));
    const char *name = kind == VERSIONED ? "dltensor_versioned" : "dltensor";
    get_pointer_fn get = original_get_pointer(caller);
    if (!is_valid || !get || !is_valid(capsule, name))
        return NULL;
    return get(capsule, name);
}

/* The same, whichever the kind (*kind says). */
static void *unconsumed_tensor_any(PyObject *capsule, int *kind, const void *caller)
{
    void *tensor = unconsumed_tensor(capsule, LEGACY, caller);
    *kind = LEGACY;
    if (!tensor) {
        tensor = unconsumed_tensor(capsule, VERSIONED, caller);
        *kind = VERSIONED;
    }
    return tensor;
}

/* ---- what this thread is in the middle of -------------------------------- */

/* The DLPack capsule this thread last made (or opened by its unconsumed
 * name, where another thread made it), not yet taken.  A consumer takes
 * the tensor from the capsule that its producer made just before on the
 * same thread (`__dlpack__` runs inside the consumer's call), then renames
 * it or clears its destructor: the tensor of that rename is the one
 * remembered here, where asking Python again (IsValid, then GetPointer)
 * was a third of a rename's cost.  Remembered when made, the capsule's
 * PyCapsule_GetPointer only notes its opener (remembering it there was ~90
 * instructions a handoff).  `released`: the tensor's deleter ran since it
 * was opened (the consumer let it go before marking the capsule taken, or
 * the capsule's own destructor released it): the rename that follows
 * completes that, and is no import.  Cleared when taken, when a capsule is
 * made where it was (it is gone) and when it dies, so a stale one is asked
 * afresh.  Per thread; a signal handler that makes or opens a capsule
 * between the reads below changes `capsule` first and last, so the reader
 * sees it. */
typedef struct {
    PyObject *capsule;
    void *tensor;
    int kind;
    const void *opener; /* the call site that opened it, if any: named only when needed */
    bool released;
    bool marked;        /* `mark`: where the Python code was when it was opened */
    ds_py_mark mark;
} fresh_capsule;
static DS_TLS fresh_capsule fresh;

static void remember_fresh(PyObject *capsule, void *tensor, int kind, const void *opener)
{
    fresh.capsule = NULL;
    atomic_signal_fence(memory_order_seq_cst);
    fresh.tensor = tensor;
    fresh.kind = kind;
    fresh.opener = opener;
    fresh.released = false;
    fresh.marked = opener && ds_py_mark_here(&fresh.mark);
    atomic_signal_fence(memory_order_seq_cst);
    fresh.capsule = capsule;
}

/* The fresh capsule's record if it is `capsule`, taken (a second rename
 * asks Python); false otherwise. */
static inline __attribute__((always_inline)) bool take_fresh(PyObject *capsule,
                                                             fresh_capsule *out)
{
    if (fresh.capsule != capsule)
        return false;
    atomic_signal_fence(memory_order_seq_cst);
    fresh_capsule o = fresh;
    atomic_signal_fence(memory_order_seq_cst);
    if (o.capsule != capsule || fresh.capsule != capsule)
        return false;
    fresh.capsule = NULL;
    *out = o;
    return true;
}

/* The capsule whose destructor this thread is running (nested ones saved on
 * the stack), and the unconsumed tensor in it: what that destructor does
 * to its own capsule is no import, and its release of that tensor is the
 * producer's. */
static DS_TLS PyObject *destroying;
static DS_TLS void *destroying_tensor;
/* Nonzero while this thread runs the destructor of a consumed capsule. */
static DS_TLS unsigned char in_consumed_destructor;

/* This thread's last import through a capsule, with where the Python code
 * was: a release at the same frame and instruction comes from inside the
 * consumer's call that imported it.  Forgotten at the next capsule made (or
 * opened where another thread made it), so a later release is never
 * matched with a stale import. */
static DS_TLS struct {
    uintptr_t tensor;
    ds_py_mark mark;
} last_import;

/* ---- capsules made before their tensor was filled in ---------------------
 * CuPy 14 makes its capsule first and fills the tensor in it after: the
 * export waits for the capsule to be handed over (opened, imported or
 * dropped), and keeps the producer that made it.  A consumer takes a capsule
 * as it is made, so a few slots suffice; when they are full, the export is
 * recorded at once (and reported malformed, as it then is). */
#define DS_PENDING_SLOTS 8
#define DS_PENDING_CLAIMED ((uintptr_t)1)
static struct {
    _Atomic uintptr_t tensor; /* 0: free */
    uint16_t producer;
    bool versioned;
} pending[DS_PENDING_SLOTS];
static atomic_int pending_count;

static void pending_add(void *tensor, int kind, uint16_t producer)
{
    for (int i = 0; i < DS_PENDING_SLOTS; i++) {
        uintptr_t free_ = 0;
        if (atomic_compare_exchange_strong(&pending[i].tensor, &free_, DS_PENDING_CLAIMED)) {
            pending[i].producer = producer;
            pending[i].versioned = kind == VERSIONED;
            atomic_store_explicit(&pending[i].tensor, (uintptr_t)tensor, memory_order_release);
            atomic_fetch_add_explicit(&pending_count, 1, memory_order_relaxed);
            return;
        }
    }
    ds_tensor_export_by(tensor, kind == VERSIONED, producer, capsule_api());
}

/* The waiting export of `tensor`, if any, recorded now. */
static void pending_export(void *tensor)
{
    if (__builtin_expect(!atomic_load_explicit(&pending_count, memory_order_relaxed), 1))
        return;
    for (int i = 0; i < DS_PENDING_SLOTS; i++) {
        uintptr_t t = (uintptr_t)tensor;
        if (atomic_load_explicit(&pending[i].tensor, memory_order_acquire) != t)
            continue;
        uint16_t producer = pending[i].producer;
        bool versioned = pending[i].versioned;
        if (atomic_compare_exchange_strong(&pending[i].tensor, &t, 0)) {
            atomic_fetch_sub_explicit(&pending_count, 1, memory_order_relaxed);
            ds_tensor_export_by(tensor, versioned, producer, capsule_api());
        }
        return;
    }
}

static inline __attribute__((always_inline)) void import_by(void *tensor, int kind,
                                                            uint16_t consumer)
{
    pending_export(tensor);
    ds_py_in_capsule_call++;
    ds_tensor_import_by(tensor, kind == VERSIONED, consumer, capsule_api());
    ds_py_in_capsule_call--;
    ds_py_mark mark;
    last_import.tensor = 0;
    if (ds_py_mark_here(&mark)) {
        last_import.mark = mark;
        last_import.tensor = (uintptr_t)tensor;
    }
}

/* The ledger asks before each release (ds_release_context). */
static void observe_release(uintptr_t tensor, ds_release_context *ctx)
{
    ctx->by_producer =
        in_consumed_destructor || (destroying && (uintptr_t)destroying_tensor == tensor);
    if (fresh.capsule && fresh.opener && (uintptr_t)fresh.tensor == tensor) {
        fresh.released = true;
        if (fresh.capsule != destroying) { /* the opener, not the destructor, lets it go */
            ctx->taker = ds_caller_id(fresh.opener);
            ctx->taker_api = capsule_api();
            /* Inside the Python instruction that opened it (a consumer's
             * own call: JAX copies, then renames), or in a later one (a
             * helper that read it in place and let it go). */
            ctx->taken_in_call = fresh.marked && ds_py_at_mark(&fresh.mark);
        }
    }
    if (last_import.tensor == tensor) {
        last_import.tensor = 0;
        ctx->copy_on_import = ds_py_at_mark(&last_import.mark);
    }
}

/* ---- capsule destructors ------------------------------------------------- */

/* Each DLPack capsule gets a destructor of ours in place of the producer's
 * (one per distinct producer destructor: C has no closures, so each slot has
 * its own function).  It runs the producer's, with `destroying` set and the
 * host frees watched; then, if the capsule died unconsumed, the ledger
 * decides what that was (ds_tensor_dropped): a release through the deleter,
 * a release without it (JAX's destructor frees the tensor itself), or
 * neither, a leak (an empty destructor, one that returns early on the wrong
 * name, one that cannot run with an exception pending).  Slots fill once
 * and never change; when they are full, destructors stay as they are. */
#define DS_DTOR_SLOTS 16
static _Atomic(capsule_destructor) dtor_orig[DS_DTOR_SLOTS];
static atomic_int dtor_claimed;

/* The tensor of a capsule being destroyed, if it is an unconsumed DLPack
 * capsule.  Its name says (a capsule given to its own destructor is valid,
 * so PyCapsule_GetName raises nothing): most die consumed, renamed, and cost
 * a compare, where asking IsValid for both names is two calls into Python. */
static const char *(*real_GetName)(PyObject *); /* used, not wrapped */

static void *dying_tensor(PyObject *capsule)
{
    const char *(*get_name)(PyObject *) =
        DS_LAZY(real_GetName, ds_resolve_real("PyCapsule_GetName", NULL));
    int kind;
    if (!get_name)
        return unconsumed_tensor_any(capsule, &kind, NULL);
    const char *name = get_name(capsule);
    if (KIND_OF(name, "dltensor") == NOT_DLPACK)
        return NULL;
    get_pointer_fn get = original_get_pointer(NULL);
    return get ? get(capsule, name) : NULL;
}

/* Whether the interpreter is finalizing: what its modules still held dies
 * then, without having leaked.  Py_IsFinalizing from 3.13, _Py_IsFinalizing
 * before. */
static int (*real_is_finalizing)(void); /* used, not wrapped */

static bool python_finalizing(void)
{
    int (*fn)(void) = DS_LAZY(real_is_finalizing, ds_resolve_real("Py_IsFinalizing", NULL));
    if (!fn)
        fn = DS_LAZY(real_is_finalizing, ds_resolve_real("_Py_IsFinalizing", NULL));
    return fn && fn();
}

static inline __attribute__((always_inline)) void capsule_destroyed(int i, PyObject *capsule)
{
    capsule_destructor orig = atomic_load_explicit(&dtor_orig[i], memory_order_acquire);
    /* Most capsules die consumed, renamed "used_...": their producer's
     * destructor frees nothing (the DLPack protocol), and nothing it could
     * do to its own capsule is an import (imported_tensor asks by the
     * unconsumed name), so it runs as it would without the shim.
     * PyCapsule_GetName on a valid capsule leaves errno alone. */
    const char *(*get_name)(PyObject *) =
        DS_LAZY(real_GetName, ds_resolve_real("PyCapsule_GetName", NULL));
    if (get_name) {
        const char *name = get_name(capsule);
        if (name && name[0] != 'd') {
            /* A deleter it calls all the same (CuPy 4's destructor did) is
             * the producer's own release of a tensor its consumer holds. */
            in_consumed_destructor++;
            orig(capsule);
            in_consumed_destructor--;
            return;
        }
    }
    int saved = errno;
    void *tensor = ds_active() ? dying_tensor(capsule) : NULL;
    ds_drop_watch watch;
    if (tensor) {
        pending_export(tensor);
        ds_tensor_drop_watch(tensor, &watch); /* what the destructor frees, watched */
    }
    PyObject *outer = destroying;
    void *outer_tensor = destroying_tensor;
    destroying = capsule;
    destroying_tensor = tensor;
    ds_py_in_capsule_call++; /* a capsule's destructor runs with the GIL held */
    errno = saved;
    orig(capsule);
    saved = errno;
    destroying = outer;
    destroying_tensor = outer_tensor;
    if (fresh.capsule == capsule)
        fresh.capsule = NULL; /* it dies untaken */
    if (tensor)
        ds_tensor_dropped(tensor, &watch, python_finalizing());
    ds_py_in_capsule_call--;
    errno = saved;
}

#define DS_DTOR(i) \
    static void dtor_##i(PyObject *capsule) { capsule_destroyed(i, capsule); }
DS_DTOR(0) DS_DTOR(1) DS_DTOR(2) DS_DTOR(3) DS_DTOR(4) DS_DTOR(5) DS_DTOR(6) DS_DTOR(7)
DS_DTOR(8) DS_DTOR(9) DS_DTOR(10) DS_DTOR(11) DS_DTOR(12) DS_DTOR(13) DS_DTOR(14) DS_DTOR(15)
#undef DS_DTOR
static const capsule_destructor dtor_fns[DS_DTOR_SLOTS] = {
    dtor_0, dtor_1, dtor_2,  dtor_3,  dtor_4,  dtor_5,  dtor_6,  dtor_7,
    dtor_8, dtor_9, dtor_10, dtor_11, dtor_12, dtor_13, dtor_14, dtor_15,
};

/* A capsule made with no destructor (PyTorch 0.4's): one of ours all the
 * same, so that dying unconsumed is seen (then a leak). */
static void no_destructor(PyObject *capsule)
{
    (void)capsule;
}

/* Ours for `d`, claiming a slot on first sight (NULL: the slot of
 * no_destructor); `d` itself when it is already ours or the slots are full.
 * Two threads may claim a slot each for one destructor: harmless. */
static inline __attribute__((always_inline)) capsule_destructor
wrapped_destructor(capsule_destructor d)
{
    if (!d)
        d = no_destructor;
    for (int i = 0; i < DS_DTOR_SLOTS; i++) {
        capsule_destructor o = atomic_load_explicit(&dtor_orig[i], memory_order_acquire);
        if (o == d)
            return dtor_fns[i];
        if (dtor_fns[i] == d)
            return d;
    }
    int i = atomic_fetch_add_explicit(&dtor_claimed, 1, memory_order_relaxed);
    if (i >= DS_DTOR_SLOTS)
        return d;
    atomic_store_explicit(&dtor_orig[i], d, memory_order_release);
    return dtor_fns[i];
}

/* ---- the capsule wrappers ----------------------------------------------- */

/* A capsule named "dltensor[_versioned]" made: the export. */
__attribute__((noinline)) static PyObject *
new_dlpack(void *pointer, const char *name, capsule_destructor destructor, int kind,
           const void *caller, PyObject *(*real)(void *, const char *, capsule_destructor))
{
    bool track = active_keeping_errno();
    if (track) {
        destructor = wrapped_destructor(destructor);
        last_import.tensor = 0;
    }
    PyObject *capsule = real(pointer, name, destructor);
    if (capsule == fresh.capsule)
        fresh.capsule = NULL; /* made where the fresh one was: that one is gone */
    if (capsule && track) {
        int saved = errno;
        remember_fresh(capsule, pointer, kind, NULL);
        ds_py_bind((const void *)real);
        ds_py_in_capsule_call++;
        uint16_t producer = ds_caller_id(caller);
        if (!ds_tensor_export_when_filled(pointer, kind == VERSIONED, producer, capsule_api()))
            pending_add(pointer, kind, producer);
        ds_py_in_capsule_call--;
        errno = saved;
    }
    return capsule;
}

/* Most capsules a Python program makes are no DLPack's: those pass at a
 * compare, with nothing else done. */
static PyObject *wrap_New(void *pointer, const char *name, capsule_destructor destructor)
{
    PyObject *(*real)(void *, const char *, capsule_destructor) =
        DS_REAL(wrap_New, real_New, "PyCapsule_New");
    int kind = KIND_OF(name, "dltensor");
    if (__builtin_expect(kind != NOT_DLPACK, 0))
        return new_dlpack(pointer, name, destructor, kind, __builtin_return_address(0), real);
    PyObject *capsule = real(pointer, name, destructor);
    if (capsule == fresh.capsule)
        fresh.capsule = NULL;
    return capsule;
}

/* The tensor a rename to `kind` or a cleared destructor (kind NOT_DLPACK:
 * either) imports, or NULL: none, or the operation it completes was already
 * recorded (the capsule's destructor at work, or a release by its taker). */
static inline __attribute__((always_inline)) void *imported_tensor(PyObject *capsule, int *kind,
                                                                   const void *caller)
{
    if (capsule == destroying)
        return NULL;
    fresh_capsule o;
    if (take_fresh(capsule, &o)) {
        if (o.released) { /* its taker let it go first: a copy it kept */
            if (o.opener)
                ds_tensor_taken_after_release(o.tensor, ds_caller_id(caller), capsule_api());
            return NULL;
        }
        if (*kind == NOT_DLPACK || o.kind == *kind) {
            *kind = o.kind;
            return o.tensor;
        }
    }
    int saved = errno; /* asking Python may set it */
    void *tensor = *kind != NOT_DLPACK ? unconsumed_tensor(capsule, *kind, caller)
                                       : unconsumed_tensor_any(capsule, kind, caller);
    errno = saved;
    return tensor;
}

/* A rename to "used_dltensor[_versioned]": the import. */
__attribute__((noinline)) static int rename_dlpack(PyObject *capsule, const char *name, int kind,
                                                  const void *caller,
                                                  int (*real)(PyObject *, const char *))
{
    void *tensor = active_keeping_errno() ? imported_tensor(capsule, &kind, caller) : NULL;
    int result = real(capsule, name);
    int saved = errno;
    if (result == 0 && tensor) {
        ds_py_bind((const void *)real);
        import_by(tensor, kind, ds_caller_id(caller));
    }
    errno = saved;
    return result;
}

static int wrap_SetName(PyObject *capsule, const char *name)
{
    int (*real)(PyObject *, const char *) = DS_REAL(wrap_SetName, real_SetName, "PyCapsule_SetName");
    int kind = KIND_OF(name, "used_dltensor");
    if (__builtin_expect(kind != NOT_DLPACK, 0))
        return rename_dlpack(capsule, name, kind, __builtin_return_address(0), real);
    return real(capsule, name);
}

static int wrap_SetDestructor(PyObject *capsule, capsule_destructor destructor)
{
    const void *caller = __builtin_return_address(0);
    int saved = errno;
    void *tensor = NULL;
    int kind = NOT_DLPACK;
    if (ds_active()) {
        if (!destructor)
            tensor = imported_tensor(capsule, &kind, caller);
        else if (capsule != destroying && unconsumed_tensor_any(capsule, &kind, caller))
            destructor = wrapped_destructor(destructor); /* a producer setting it late */
    }
    errno = saved;
    int (*real)(PyObject *, capsule_destructor) =
        DS_REAL(wrap_SetDestructor, real_SetDestructor, "PyCapsule_SetDestructor");
    int result = real(capsule, destructor);
    saved = errno;
    if (result == 0 && tensor) {
        ds_py_bind((const void *)real);
        import_by(tensor, kind, ds_caller_id(caller));
    }
    errno = saved;
    return result;
}


/* A capsule opened by a name that starts with 'd': a DLPack capsule made on
 * another thread (or waiting for its export) to remember, or the exchange
 * table to wrap.  Out of line: most capsules opened in a Python program are
 * no DLPack's, and pass at a compare. */
__attribute__((noinline)) static void *opened_d(PyObject *capsule, const char *name,
                                               const void *caller, get_pointer_fn real)
{
    void *pointer = real(capsule, name);
    if (!pointer)
        return NULL;
    int kind = KIND_OF(name, "dltensor");
    if (kind != NOT_DLPACK) {
        if (ds_active()) {
            int saved = errno;
            ds_py_bind((const void *)real);
            last_import.tensor = 0;
            pending_export(pointer);
            remember_fresh(capsule, pointer, kind, caller);
            errno = saved;
        }
    } else if (!strcmp(name, "dlpack_exchange_api") && ds_active()) {
        int saved = errno;
        ds_py_bind((const void *)real);
        pointer = ds_py_exchange_api(pointer);
        errno = saved;
    }
    return pointer;
}

/* wrap_GetPointer past its common case: the real function for this
 * caller where the modules' definitions diverge, and the 'd' names. */
__attribute__((noinline)) static void *get_pointer_slow(PyObject *capsule, const char *name,
                                                       const void *caller)
{
    get_pointer_fn real = original_get_pointer(caller);
    if (!name || name[0] != 'd')
        return real(capsule, name);
    return opened_d(capsule, name, caller, real);
}

/* The name is looked at before the call (PyCapsule_GetPointer compares
 * it too), so that every other capsule is passed on as a tail call, with
 * nothing kept across it and no register saved: a Python program opens
 * capsules by the thousand, few of them DLPack's.  So is the fresh capsule
 * (remembered when it was made), once its opener is noted, unless an
 * export waits. */
static void *wrap_GetPointer(PyObject *capsule, const char *name)
{
    get_pointer_fn real = (get_pointer_fn)ds_got_global((void **)&real_GetPointer);
    if (__builtin_expect(real && (!name || name[0] != 'd'), 1)) /* neither name above */
        return real(capsule, name);
    if (real && capsule == fresh.capsule && capsule &&
        !atomic_load_explicit(&pending_count, memory_order_relaxed)) {
        fresh.opener = __builtin_return_address(0);
        fresh.released = false; /* as at every open: a release before it is no taker's */
        fresh.marked = ds_py_mark_here(&fresh.mark);
        return real(capsule, name);
    }
    if (real) /* a 'd' name, and the one real function known */
        return opened_d(capsule, name, __builtin_return_address(0), real);
    return get_pointer_slow(capsule, name, __builtin_return_address(0));
}

/* ---- registration ------------------------------------------------------- */

static const ds_got_hook capsule_hooks[] = {
    {"PyCapsule_New", (void *)wrap_New, (void **)&real_New, NULL},
    {"PyCapsule_SetName", (void *)wrap_SetName, (void **)&real_SetName, NULL},
    {"PyCapsule_SetDestructor", (void *)wrap_SetDestructor, (void **)&real_SetDestructor, NULL},
    {"PyCapsule_GetPointer", (void *)wrap_GetPointer, (void **)&real_GetPointer, NULL},
};

static void install(void)
{
    ds_tensor_set_release_observer(observe_release);
    ds_got_hooks_add(capsule_hooks, DS_ARRAY_LEN(capsule_hooks));
}

DS_FAMILY(python, .option = "python", .order = DS_ORDER_CAPSULES, .install = install,
          .started = ds_py_bind_global);
