/*
 * hip.c — allocations through HIP (libamdhip64).
 *
 * Wraps, through every module's GOT, dlsym and hipGetProcAddress:
 *   hipMalloc, hipMallocAsync, hipMallocManaged, hipHostMalloc,
 *   hipExtMallocWithFlags, hipFree, hipFreeAsync, hipHostFree,
 *   hipGetProcAddress (HIP >= 6.2): the functions it hands out come back
 *   wrapped.
 * Leaves out: hipMallocPitch, arrays, the virtual memory API, and
 *   hipMallocFromPoolAsync (not in HIP 5).
 *
 * Same shape as cuda_runtime.c.  Signatures come from Debian's HIP headers;
 * nothing links to libamdhip64.
 */
#include <hip/hip_runtime_api.h>

#include "internal.h"

#define FAMILY DS_FAMILY_HIP

/* HIP 6.2's lookup function; Debian's HIP 5 headers predate it. */
typedef hipError_t hip_get_proc_address(const char *symbol, void **pfn, int hipVersion,
                                        uint64_t flags, void *symbolStatus);

static __typeof__(hipMalloc) *real_hipMalloc;
static __typeof__(hipMallocAsync) *real_hipMallocAsync;
static __typeof__(hipMallocManaged) *real_hipMallocManaged;
static __typeof__(hipHostMalloc) *real_hipHostMalloc;
static __typeof__(hipExtMallocWithFlags) *real_hipExtMallocWithFlags;
static __typeof__(hipFree) *real_hipFree;
static __typeof__(hipFreeAsync) *real_hipFreeAsync;
static __typeof__(hipHostFree) *real_hipHostFree;
static hip_get_proc_address *real_hipGetProcAddress;

static int current_device(const void *real)
{
    static __typeof__(hipGetDevice) *get_device;
    __typeof__(hipGetDevice) *get =
        DS_LAZY(get_device, ds_resolve_beside(real, "hipGetDevice"));
    int device = 0;
    if (!get || get(&device) != hipSuccess)
        device = 0;
    return device;
}

#define ALLOCATED(kind, ptr, bytes, stream, real)                                              \
    ds_device_allocated(FAMILY, kind, ptr, sizeof(void *), bytes, current_device((void *)(real)), \
                        (void *)(stream), caller)

static hipError_t wrap_hipMalloc(void **ptr, size_t size)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_hipMalloc) real = DS_REAL(wrap_hipMalloc, real_hipMalloc, "hipMalloc");
    hipError_t r = real(ptr, size);
    if (outer && r == hipSuccess)
        ALLOCATED(DS_ALLOC_DEVICE, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static hipError_t wrap_hipMallocAsync(void **ptr, size_t size, hipStream_t stream)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_hipMallocAsync) real =
        DS_REAL(wrap_hipMallocAsync, real_hipMallocAsync, "hipMallocAsync");
    hipError_t r = real(ptr, size, stream);
    if (outer && r == hipSuccess)
        ALLOCATED(DS_ALLOC_ASYNC, ptr, size, stream, real);
    ds_api_leave();
    return r;
}

static hipError_t wrap_hipMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_hipMallocManaged) real =
        DS_REAL(wrap_hipMallocManaged, real_hipMallocManaged, "hipMallocManaged");
    hipError_t r = real(ptr, size, flags);
    if (outer && r == hipSuccess)
        ALLOCATED(DS_ALLOC_MANAGED, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static hipError_t wrap_hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_hipHostMalloc) real =
        DS_REAL(wrap_hipHostMalloc, real_hipHostMalloc, "hipHostMalloc");
    hipError_t r = real(ptr, size, flags);
    if (outer && r == hipSuccess)
        ALLOCATED(DS_ALLOC_HOST, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static hipError_t wrap_hipExtMallocWithFlags(void **ptr, size_t size, unsigned int flags)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_hipExtMallocWithFlags) real =
        DS_REAL(wrap_hipExtMallocWithFlags, real_hipExtMallocWithFlags, "hipExtMallocWithFlags");
    hipError_t r = real(ptr, size, flags);
    if (outer && r == hipSuccess)
        ALLOCATED(DS_ALLOC_DEVICE, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static hipError_t stopped(int action)
{
    return action == DS_FREE_DEFER ? hipSuccess : hipErrorInvalidValue;
}

static hipError_t wrap_hipFree(void *ptr)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_DEVICE, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    hipError_t r = action != DS_FREE_FORWARD ? stopped(action)
                                             : DS_REAL(wrap_hipFree, real_hipFree, "hipFree")(ptr);
    if (outer && action == DS_FREE_FORWARD && r == hipSuccess)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static hipError_t wrap_hipFreeAsync(void *ptr, hipStream_t stream)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_ASYNC, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    hipError_t r = action != DS_FREE_FORWARD
                       ? stopped(action)
                       : DS_REAL(wrap_hipFreeAsync, real_hipFreeAsync, "hipFreeAsync")(ptr, stream);
    if (outer && action == DS_FREE_FORWARD && r == hipSuccess)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static hipError_t wrap_hipHostFree(void *ptr)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_HOST, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    hipError_t r = action != DS_FREE_FORWARD
                       ? stopped(action)
                       : DS_REAL(wrap_hipHostFree, real_hipHostFree, "hipHostFree")(ptr);
    if (outer && action == DS_FREE_FORWARD && r == hipSuccess)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static void release_deferred(uintptr_t base, int kind)
{
    if (kind == DS_ALLOC_HOST) {
        __typeof__(real_hipHostFree) free_fn =
            DS_LAZY(real_hipHostFree, ds_resolve_real("hipHostFree", (void *)wrap_hipHostFree));
        if (free_fn)
            free_fn((void *)base);
    } else {
        __typeof__(real_hipFree) free_fn =
            DS_LAZY(real_hipFree, ds_resolve_real("hipFree", (void *)wrap_hipFree));
        if (free_fn)
            free_fn((void *)base);
    }
}

static hipError_t wrap_hipGetProcAddress(const char *symbol, void **pfn, int version,
                                         uint64_t flags, void *status)
{
    const void *caller = __builtin_return_address(0);
    hipError_t r = DS_REAL(wrap_hipGetProcAddress, real_hipGetProcAddress,
                           "hipGetProcAddress")(symbol, pfn, version, flags, status);
    void *f = NULL;
    if (r == hipSuccess && pfn && symbol && ds_safe_read(&f, pfn, sizeof(f)) == sizeof(f) && f &&
        ds_active()) {
        void *w = ds_hook_for_lookup(symbol, f, caller); /* HIP names carry no versions */
        if (w != f)
            ds_safe_write(pfn, &w, sizeof(w));
    }
    return r;
}

#define HOOK(name) {#name, (void *)wrap_##name, (void **)&real_##name, NULL}
static const ds_got_hook hip_hooks[] = {
    HOOK(hipMalloc),     HOOK(hipMallocAsync), HOOK(hipMallocManaged),
    HOOK(hipHostMalloc), HOOK(hipExtMallocWithFlags), HOOK(hipFree),
    HOOK(hipFreeAsync),  HOOK(hipHostFree),    HOOK(hipGetProcAddress),
};
#undef HOOK

void ds_hip_install(void)
{
    ds_got_hooks_add(hip_hooks, DS_ARRAY_LEN(hip_hooks));
    ds_alloc_set_releaser(FAMILY, release_deferred);
}
