/*
 * dlshim.h — the user's contract with dlshim.
 *
 * Annotation API for C and C++ code that exchanges DLPack tensors without
 * Python: call dlshim_export() when a producer hands out a managed tensor and
 * dlshim_import() when a consumer takes ownership of one.
 *
 * Like Valgrind's client requests, the calls cost nothing and need no link
 * flag: include this header and call them.  Each call looks the shim up once
 * (dlsym in the global scope, cached per translation unit) and does nothing
 * when the program runs without libdlshim.so preloaded.  Define
 * DLSHIM_LINK_DIRECTLY before including this header to get plain prototypes
 * instead, for code that links with -ldlshim.
 *
 * DLPack comes from the installed <dlpack/dlpack.h>, or from dlshim/dlpack.h
 * beside this header where none is installed (and always in the library's
 * own build); the header also declares the DLPack 1.x versioned structures
 * when the installed one is older (Debian ships 0.6), so the same code
 * compiles against old and new DLPack headers.
 */
#ifndef DLSHIM_H
#define DLSHIM_H

#if !defined(DLSHIM_BUILDING) && defined(__has_include)
#if __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
#endif
#endif
#include "dlshim/dlpack.h" /* DLPack's own guard: nothing after the real one */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- DLPack 1.x declarations missing from pre-1.0 headers ------------- */
#ifndef DLPACK_MAJOR_VERSION
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
#endif /* !DLPACK_MAJOR_VERSION */

/* The versioned ABI that dlshim reads; a tensor announcing a higher major
 * version may only have its deleter called (DLPack spec). */
#define DLSHIM_DLPACK_MAJOR 1u

/* Layout checks: the shim reads these structures field by field. */
#if defined(__cplusplus)
#define DLSHIM_STATIC_ASSERT static_assert
#else
#define DLSHIM_STATIC_ASSERT _Static_assert
#endif
DLSHIM_STATIC_ASSERT(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
DLSHIM_STATIC_ASSERT(sizeof(DLManagedTensor) == 64, "DLManagedTensor is 64 bytes");
DLSHIM_STATIC_ASSERT(sizeof(DLManagedTensorVersioned) == 80,
                     "DLManagedTensorVersioned is 80 bytes");
DLSHIM_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, version) == 0, "version@0");
DLSHIM_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "manager_ctx@8");
DLSHIM_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, deleter) == 16, "deleter@16");
DLSHIM_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, flags) == 24, "flags@24");
DLSHIM_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor@32");
DLSHIM_STATIC_ASSERT(offsetof(DLManagedTensor, manager_ctx) == 48, "manager_ctx@48");
DLSHIM_STATIC_ASSERT(offsetof(DLManagedTensor, deleter) == 56, "deleter@56");

/* ---- Annotation API ---------------------------------------------------- */
/*
 * dlshim_export: `producer` hands out `t`.  The shim validates the tensor,
 *   logs an `export` event and wraps t->deleter to see the release.  Call it
 *   after the tensor is fully filled in and before the consumer sees it.
 * dlshim_import: `consumer` takes ownership of `t` (logs `import`; reports
 *   double_import and import_after_release).
 * Names are copied (at most 47 bytes kept); NULL means "unknown".
 */
/* ---- Test runners and tools -------------------------------------------- */
/*
 * dlshim_set_test: the test that runs from now on, by its id (pytest's node
 *   id, say); every event carries it as `test` until the next call.  NULL or
 *   "" means none.  At most 255 bytes are kept.  Call it from one thread.
 * dlshim_get_status: what the shim has seen so far, for a tool that reports
 *   per test or per phase: set s->size to sizeof(dlshim_status) first (later
 *   versions add fields at the end and fill only what the caller knows).
 *   Returns 0, or -1 when the shim does not track this process (disabled, or
 *   not preloaded: the run-time variant below).  The counts are those of
 *   the exit summary (docs/events.md), since start (a forked child: since
 *   the fork); violations_of[k] counts kind k, in the order of
 *   DLSHIM_VIOLATION_KINDS (later kinds are added at the end).
 * dlshim_attach: starts a shim that a running process loaded (dlopen with
 *   the environment variable _DLSHIM_ATTACHING set, which leaves it waiting:
 *   Python's dlshim.attach() does this), from now on.  `options` holds
 *   "DLSHIM_X=value" lines that override the environment.  Returns 0 when
 *   it started, 1 when the shim already tracks this process (preloaded, or
 *   attached before), 2 when it is disabled, -1 when an option is unknown or
 *   not valid: `error` (error_cap bytes) then holds the warning the same
 *   variable would give, and nothing started.  Only through dlsym on the
 *   handle that loaded it: no run-time variant below.
 */
typedef struct dlshim_status {
    uint32_t size;                 /* in: sizeof(dlshim_status) */
    uint32_t reserved;
    uint64_t violations;           /* since start */
    uint64_t outstanding;          /* shares exported and not released, now */
    char last_violation[48];       /* the latest violation's kind; "" when none */
    char last_violation_py[192];   /* where, in Python ("file.py:LINE in f"); "" */
    /* Added later: filled when s->size reaches them. */
    uint64_t shares;               /* handoffs imported */
    uint64_t copies;               /* of them, the consumer got a copy */
    uint64_t bytes_shared;
    uint64_t bytes_copied;
    uint64_t barriers_inserted;    /* by DLSHIM_SYNC=enforce */
    uint64_t violations_of[16];    /* by kind, DLSHIM_VIOLATION_KINDS order */
} dlshim_status;

/* The violation kinds, comma-separated, in violations_of's order (the
 * names of docs/events.md). */
#define DLSHIM_VIOLATION_KINDS                                                 \
    "double_release,import_after_release,double_import,malformed_tensor,"   \
    "free_while_shared,invalid_free,leak,unsynchronized_handoff,"           \
    "tensor_changed,use_after_free,unload_while_shared"

#if defined(DLSHIM_LINK_DIRECTLY) || defined(DLSHIM_BUILDING)

void dlshim_set_test(const char *test);
int dlshim_get_status(dlshim_status *s);
int dlshim_attach(const char *options, char *error, size_t error_cap);
void dlshim_export(DLManagedTensor *t, const char *producer);
void dlshim_export_versioned(struct DLManagedTensorVersioned *t, const char *producer);
void dlshim_import(DLManagedTensor *t, const char *consumer);
void dlshim_import_versioned(struct DLManagedTensorVersioned *t, const char *consumer);

#else /* resolved at run time: no link flag, a no-op without the shim */

/* glibc >= 2.34 has dlsym in libc itself, so no -ldl is needed. */
#include <dlfcn.h>

/* Looks `name` up in the global scope once and caches the answer (the
 * "absent" answer too) in *slot; benign races only repeat the lookup. */
static inline void *dlshim__resolve(void **slot, const char *name)
{
    static char dlshim__absent;
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f == (void *)0) {
        f = dlsym((void *)0 /* RTLD_DEFAULT */, name);
        if (f == (void *)0)
            f = &dlshim__absent;
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f == (void *)&dlshim__absent ? (void *)0 : f;
}

/* The union turns dlsym's object pointer into a function pointer without
 * the cast that ISO C (-pedantic) rejects. */
#define DLSHIM__FORWARD(fn, tensor_type)                                     \
    static inline void fn(tensor_type *t, const char *name)                 \
    {                                                                        \
        static void *slot;                                                   \
        union {                                                              \
            void *object;                                                    \
            void (*call)(tensor_type *, const char *);                       \
        } real;                                                              \
        real.object = dlshim__resolve(&slot, #fn);                           \
        if (real.object)                                                     \
            real.call(t, name);                                              \
    }

DLSHIM__FORWARD(dlshim_export, DLManagedTensor)
DLSHIM__FORWARD(dlshim_export_versioned, struct DLManagedTensorVersioned)
DLSHIM__FORWARD(dlshim_import, DLManagedTensor)
DLSHIM__FORWARD(dlshim_import_versioned, struct DLManagedTensorVersioned)
#undef DLSHIM__FORWARD

static inline void dlshim_set_test(const char *test)
{
    static void *slot;
    union {
        void *object;
        void (*call)(const char *);
    } real;
    real.object = dlshim__resolve(&slot, "dlshim_set_test");
    if (real.object)
        real.call(test);
}

static inline int dlshim_get_status(dlshim_status *s)
{
    static void *slot;
    union {
        void *object;
        int (*call)(dlshim_status *);
    } real;
    real.object = dlshim__resolve(&slot, "dlshim_get_status");
    return real.object ? real.call(s) : -1;
}

#endif

#ifdef __cplusplus
}
#endif

#endif /* DLSHIM_H */
