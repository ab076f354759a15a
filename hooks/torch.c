/*
 * torch.c — PyTorch's C++ DLPack functions, traced with no configuration.
 *
 * Wraps, through every module's GOT and dlsym (the mangled names of several
 * PyTorch releases; a name a release lacks is simply never bound):
 *   at::toDLPack(const Tensor&)                 _ZN2at8toDLPackERKNS_6TensorE
 *   at::toDLPackVersioned(const Tensor&)        _ZN2at17toDLPackVersionedERKNS_6TensorE
 *   at::fromDLPack(const DLManagedTensor*)      _ZN2at10fromDLPackEPK15DLManagedTensor
 *   at::fromDLPack(DLManagedTensor*)            _ZN2at10fromDLPackEP15DLManagedTensor
 *   at::fromDLPack(…, std::function<void(void*)>)  both pointer constnesses
 *   at::fromDLPackVersioned(DLManagedTensorVersioned*) [, std::function]
 * An export's producer and an import's consumer are the module defining the
 * function ("torch").
 * Leaves out: inlined calls inside libtorch itself (no GOT entry), and, while
 * the Python capsule family is on, the calls of PyTorch's Python binding
 * (libtorch_python): its every at::toDLPack goes into a capsule and its
 * every at::fromDLPack consumes one (torch.to_dlpack / from_dlpack), so the
 * capsule hooks record the same handoffs.  Wrapped there as well, each
 * would be seen twice: the ledger merged the two views into one export and
 * one import, a large part of what the shim adds to a torch -> numpy ->
 * torch round trip.
 * A pointer to these functions from dlsym is still wrapped, whoever asks.
 *
 * x86-64 C++ ABI: at::Tensor is returned through a hidden pointer (first
 * argument, returned in rax) and std::function is passed by reference, so
 * every signature here is plain pointers.
 */
#include <errno.h>

#include "hooks.h"

typedef void *export_fn(const void *tensor);
typedef void *import_fn(void *result, void *managed);
typedef void *import_deleter_fn(void *result, void *managed, void *deleter);

static export_fn *real_to, *real_to_versioned;
static import_fn *real_from_const, *real_from, *real_from_versioned;
static import_deleter_fn *real_from_const_fn, *real_from_fn, *real_from_versioned_fn;

/* The producer or consumer: the module that defines `fn`. */
static void *exported(void *managed, bool versioned, const void *fn)
{
    int saved = errno;
    if (managed && ds_active())
        ds_tensor_export_by(managed, versioned, ds_module_id_at(fn), DS_NAME_ONCE("libtorch"));
    errno = saved;
    return managed;
}

static void importing(void *managed, bool versioned, const void *fn)
{
    int saved = errno;
    if (managed && ds_active())
        ds_tensor_import_by(managed, versioned, ds_module_id_at(fn), DS_NAME_ONCE("libtorch"));
    errno = saved;
}

#define REAL(w, r, name) DS_REAL(w, r, name)

static void *wrap_to(const void *tensor)
{
    export_fn *real = REAL(wrap_to, real_to, "_ZN2at8toDLPackERKNS_6TensorE");
    return exported(real(tensor), false, (void *)real);
}

static void *wrap_to_versioned(const void *tensor)
{
    export_fn *real =
        REAL(wrap_to_versioned, real_to_versioned, "_ZN2at17toDLPackVersionedERKNS_6TensorE");
    return exported(real(tensor), true, (void *)real);
}

/* Imports are recorded before the call: the tensor's ownership moves in. */
static void *wrap_from_const(void *result, void *managed)
{
    import_fn *real =
        REAL(wrap_from_const, real_from_const, "_ZN2at10fromDLPackEPK15DLManagedTensor");
    importing(managed, false, (void *)real);
    return real(result, managed);
}

static void *wrap_from(void *result, void *managed)
{
    import_fn *real = REAL(wrap_from, real_from, "_ZN2at10fromDLPackEP15DLManagedTensor");
    importing(managed, false, (void *)real);
    return real(result, managed);
}

static void *wrap_from_versioned(void *result, void *managed)
{
    import_fn *real = REAL(wrap_from_versioned, real_from_versioned,
                           "_ZN2at19fromDLPackVersionedEP24DLManagedTensorVersioned");
    importing(managed, true, (void *)real);
    return real(result, managed);
}

static void *wrap_from_const_fn(void *result, void *managed, void *deleter)
{
    import_deleter_fn *real =
        REAL(wrap_from_const_fn, real_from_const_fn,
             "_ZN2at10fromDLPackEPK15DLManagedTensorSt8functionIFvPvEE");
    importing(managed, false, (void *)real);
    return real(result, managed, deleter);
}

static void *wrap_from_fn(void *result, void *managed, void *deleter)
{
    import_deleter_fn *real = REAL(wrap_from_fn, real_from_fn,
                                   "_ZN2at10fromDLPackEP15DLManagedTensorSt8functionIFvPvEE");
    importing(managed, false, (void *)real);
    return real(result, managed, deleter);
}

static void *wrap_from_versioned_fn(void *result, void *managed, void *deleter)
{
    import_deleter_fn *real =
        REAL(wrap_from_versioned_fn, real_from_versioned_fn,
             "_ZN2at19fromDLPackVersionedEP24DLManagedTensorVersionedSt8functionIFvPvEE");
    importing(managed, true, (void *)real);
    return real(result, managed, deleter);
}

static const ds_got_hook hooks[] = {
    {"_ZN2at8toDLPackERKNS_6TensorE", (void *)wrap_to, (void **)&real_to, NULL},
    {"_ZN2at17toDLPackVersionedERKNS_6TensorE", (void *)wrap_to_versioned,
     (void **)&real_to_versioned, NULL},
    {"_ZN2at10fromDLPackEPK15DLManagedTensor", (void *)wrap_from_const,
     (void **)&real_from_const, NULL},
    {"_ZN2at10fromDLPackEP15DLManagedTensor", (void *)wrap_from, (void **)&real_from, NULL},
    {"_ZN2at19fromDLPackVersionedEP24DLManagedTensorVersioned", (void *)wrap_from_versioned,
     (void **)&real_from_versioned, NULL},
    {"_ZN2at10fromDLPackEPK15DLManagedTensorSt8functionIFvPvEE", (void *)wrap_from_const_fn,
     (void **)&real_from_const_fn, NULL},
    {"_ZN2at10fromDLPackEP15DLManagedTensorSt8functionIFvPvEE", (void *)wrap_from_fn,
     (void **)&real_from_fn, NULL},
    {"_ZN2at19fromDLPackVersionedEP24DLManagedTensorVersionedSt8functionIFvPvEE",
     (void *)wrap_from_versioned_fn, (void **)&real_from_versioned_fn, NULL},
};

/* PyTorch's Python binding is left to the capsule family when that is on. */
static void install(void)
{
    static const char *const python_binding[] = {"libtorch_python", NULL};
    ds_got_hooks_add_except(hooks, DS_ARRAY_LEN(hooks),
                            ds_hook_option_on("python") ? python_binding : NULL);
}

DS_FAMILY(torch, .option = "torch", .order = DS_ORDER_LIBTORCH, .install = install);
