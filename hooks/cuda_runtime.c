/*
 * cuda_runtime.c — allocations through the CUDA runtime (libcudart).
 *
 * Wraps, through every module's GOT and through dlsym:
 *   cudaMalloc, cudaMallocAsync(_ptsz), cudaMallocFromPoolAsync(_ptsz),
 *   cudaMallocManaged, cudaMallocPitch, cudaMallocHost, cudaHostAlloc,
 *   cudaFree, cudaFreeAsync(_ptsz), cudaFreeHost,
 *   cudaGetDriverEntryPoint(ByVersion)(_ptsz): driver functions fetched
 *   through the runtime come back wrapped (how PyTorch reaches the driver).
 * Leaves out: arrays and mipmaps (cudaMallocArray, cudaMalloc3DArray: not
 * DLPack-shareable), cudaMalloc3D, graph-node allocations, and the virtual
 * memory API (cuMemCreate/cuMemMap, see cuda_driver.c).
 *
 * The runtime reaches the driver through pointers it gets from
 * cuGetProcAddress, which come back wrapped: the nesting guard
 * (ds_api_enter) records such a call once, as the runtime call the program
 * made.  Signatures come from the CUDA headers; nothing links to libcudart.
 * Every wrapper: note the caller, enter, call its caller's real function,
 * record what succeeded, leave, return the real result unchanged.
 */
#include <cuda_runtime_api.h>

#include "internal.h"

#define FAMILY DS_FAMILY_CUDART

static __typeof__(cudaMalloc) *real_cudaMalloc;
static __typeof__(cudaMallocAsync) *real_cudaMallocAsync, *real_cudaMallocAsync_ptsz;
static __typeof__(cudaMallocFromPoolAsync) *real_cudaMallocFromPoolAsync,
    *real_cudaMallocFromPoolAsync_ptsz;
static __typeof__(cudaMallocManaged) *real_cudaMallocManaged;
static __typeof__(cudaMallocPitch) *real_cudaMallocPitch;
static __typeof__(cudaMallocHost) *real_cudaMallocHost;
static __typeof__(cudaHostAlloc) *real_cudaHostAlloc;
static __typeof__(cudaFree) *real_cudaFree;
static __typeof__(cudaFreeAsync) *real_cudaFreeAsync, *real_cudaFreeAsync_ptsz;
static __typeof__(cudaFreeHost) *real_cudaFreeHost;
/* Deprecated in CUDA 13 but still called (PyTorch 2.x): its type is spelled
 * out so the header's deprecation does not stop the build. */
typedef cudaError_t driver_entry_point(const char *symbol, void **funcPtr,
                                       unsigned long long flags,
                                       enum cudaDriverEntryPointQueryResult *driverStatus);
static driver_entry_point *real_cudaGetDriverEntryPoint, *real_cudaGetDriverEntryPoint_ptsz;
static __typeof__(cudaGetDriverEntryPointByVersion) *real_cudaGetDriverEntryPointByVersion,
    *real_cudaGetDriverEntryPointByVersion_ptsz;

/* The current device, asked of the same runtime that made the allocation. */
static int current_device(const void *real)
{
    static __typeof__(cudaGetDevice) *get_device;
    __typeof__(cudaGetDevice) *get =
        DS_LAZY(get_device, ds_resolve_beside(real, "cudaGetDevice"));
    int device = 0;
    if (!get || get(&device) != cudaSuccess)
        device = 0;
    return device;
}

#define ALLOCATED(kind, ptr, bytes, stream, real)                                              \
    ds_device_allocated(FAMILY, kind, ptr, sizeof(void *), bytes, current_device((void *)(real)), \
                        stream, caller)

/* ---- allocations ---------------------------------------------------------- */

static cudaError_t wrap_cudaMalloc(void **ptr, size_t size)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cudaMalloc) real = DS_REAL(wrap_cudaMalloc, real_cudaMalloc, "cudaMalloc");
    cudaError_t r = real(ptr, size);
    if (outer && r == cudaSuccess)
        ALLOCATED(DS_ALLOC_DEVICE, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static cudaError_t malloc_async(__typeof__(real_cudaMallocAsync) real, void **ptr, size_t size,
                                cudaStream_t stream, const void *caller)
{
    bool outer = ds_api_enter();
    cudaError_t r = real(ptr, size, stream);
    if (outer && r == cudaSuccess)
        ALLOCATED(DS_ALLOC_ASYNC, ptr, size, stream, real);
    ds_api_leave();
    return r;
}

static cudaError_t wrap_cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    return malloc_async(DS_REAL(wrap_cudaMallocAsync, real_cudaMallocAsync, "cudaMallocAsync"),
                        ptr, size, stream, __builtin_return_address(0));
}

static cudaError_t wrap_cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    return malloc_async(DS_REAL(wrap_cudaMallocAsync_ptsz, real_cudaMallocAsync_ptsz,
                                "cudaMallocAsync_ptsz"),
                        ptr, size, stream, __builtin_return_address(0));
}

static cudaError_t from_pool(__typeof__(real_cudaMallocFromPoolAsync) real, void **ptr,
                             size_t size, cudaMemPool_t pool, cudaStream_t stream,
                             const void *caller)
{
    bool outer = ds_api_enter();
    cudaError_t r = real(ptr, size, pool, stream);
    if (outer && r == cudaSuccess)
        ALLOCATED(DS_ALLOC_ASYNC, ptr, size, stream, real);
    ds_api_leave();
    return r;
}

static cudaError_t wrap_cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t stream)
{
    return from_pool(DS_REAL(wrap_cudaMallocFromPoolAsync, real_cudaMallocFromPoolAsync,
                             "cudaMallocFromPoolAsync"),
                     ptr, size, pool, stream, __builtin_return_address(0));
}

static cudaError_t wrap_cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                     cudaStream_t stream)
{
    return from_pool(DS_REAL(wrap_cudaMallocFromPoolAsync_ptsz, real_cudaMallocFromPoolAsync_ptsz,
                             "cudaMallocFromPoolAsync_ptsz"),
                     ptr, size, pool, stream, __builtin_return_address(0));
}

static cudaError_t wrap_cudaMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cudaMallocManaged) real =
        DS_REAL(wrap_cudaMallocManaged, real_cudaMallocManaged, "cudaMallocManaged");
    cudaError_t r = real(ptr, size, flags);
    if (outer && r == cudaSuccess)
        ALLOCATED(DS_ALLOC_MANAGED, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static cudaError_t wrap_cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cudaMallocPitch) real =
        DS_REAL(wrap_cudaMallocPitch, real_cudaMallocPitch, "cudaMallocPitch");
    cudaError_t r = real(ptr, pitch, width, height);
    size_t row = 0;
    if (outer && r == cudaSuccess && ds_safe_read(&row, pitch, sizeof(row)) == sizeof(row))
        ALLOCATED(DS_ALLOC_DEVICE, ptr, (uint64_t)row * height, NULL, real);
    ds_api_leave();
    return r;
}

static cudaError_t wrap_cudaMallocHost(void **ptr, size_t size)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cudaMallocHost) real =
        DS_REAL(wrap_cudaMallocHost, real_cudaMallocHost, "cudaMallocHost");
    cudaError_t r = real(ptr, size);
    if (outer && r == cudaSuccess)
        ALLOCATED(DS_ALLOC_HOST, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static cudaError_t wrap_cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cudaHostAlloc) real =
        DS_REAL(wrap_cudaHostAlloc, real_cudaHostAlloc, "cudaHostAlloc");
    cudaError_t r = real(ptr, size, flags);
    if (outer && r == cudaSuccess)
        ALLOCATED(DS_ALLOC_HOST, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

/* ---- frees ------------------------------------------------------------------ */

/* What a free the shim stopped reports: success when deferred (it happens at
 * the last release), the runtime's own error for an invalid one. */
static cudaError_t stopped(int action)
{
    return action == DS_FREE_DEFER ? cudaSuccess : cudaErrorInvalidValue;
}

static cudaError_t wrap_cudaFree(void *ptr)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_DEVICE, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    cudaError_t r = action != DS_FREE_FORWARD
                        ? stopped(action)
                        : DS_REAL(wrap_cudaFree, real_cudaFree, "cudaFree")(ptr);
    if (outer && action == DS_FREE_FORWARD && r == cudaSuccess)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static cudaError_t free_async(__typeof__(real_cudaFreeAsync) real, void *ptr, cudaStream_t stream,
                              const void *caller)
{
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_ASYNC, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    cudaError_t r = action != DS_FREE_FORWARD ? stopped(action) : real(ptr, stream);
    if (outer && action == DS_FREE_FORWARD && r == cudaSuccess)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static cudaError_t wrap_cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    return free_async(DS_REAL(wrap_cudaFreeAsync, real_cudaFreeAsync, "cudaFreeAsync"), ptr,
                      stream, __builtin_return_address(0));
}

static cudaError_t wrap_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    return free_async(
        DS_REAL(wrap_cudaFreeAsync_ptsz, real_cudaFreeAsync_ptsz, "cudaFreeAsync_ptsz"), ptr,
        stream, __builtin_return_address(0));
}

static cudaError_t wrap_cudaFreeHost(void *ptr)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_HOST, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    cudaError_t r = action != DS_FREE_FORWARD
                        ? stopped(action)
                        : DS_REAL(wrap_cudaFreeHost, real_cudaFreeHost, "cudaFreeHost")(ptr);
    if (outer && action == DS_FREE_FORWARD && r == cudaSuccess)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

/* A free deferred under protect, performed at the last release. */
static void release_deferred(uintptr_t base, int kind)
{
    if (kind == DS_ALLOC_HOST) {
        __typeof__(real_cudaFreeHost) free_fn =
            DS_LAZY(real_cudaFreeHost, ds_resolve_real("cudaFreeHost", (void *)wrap_cudaFreeHost));
        if (free_fn)
            free_fn((void *)base);
    } else {
        __typeof__(real_cudaFree) free_fn =
            DS_LAZY(real_cudaFree, ds_resolve_real("cudaFree", (void *)wrap_cudaFree));
        if (free_fn)
            free_fn((void *)base); /* also right for stream-ordered allocations */
    }
}

/* ---- driver entry points fetched through the runtime ------------------------ */

static void wrap_entry_point(const char *symbol, void **fn, int version, unsigned long long flags,
                             const void *caller)
{
    void *f = NULL;
    if (fn && ds_safe_read(&f, fn, sizeof(f)) == sizeof(f) && f && symbol && ds_active()) {
        char name[DS_NAME_MAX];
        void *w = ds_hook_for_lookup(ds_cuda_driver_hook_name(symbol, version, flags, name,
                                                              sizeof(name)),
                                     f, caller);
        if (w != f)
            ds_safe_write(fn, &w, sizeof(w));
    }
}

/* The runtime's own CUDA version stands for "the newest variant". */
#define DS_CUDART_VERSION CUDART_VERSION

static cudaError_t entry_point(__typeof__(real_cudaGetDriverEntryPoint) real, const char *symbol,
                               void **fn, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status, const void *caller)
{
    cudaError_t r = real(symbol, fn, flags, status);
    if (r == cudaSuccess)
        wrap_entry_point(symbol, fn, DS_CUDART_VERSION, flags, caller);
    return r;
}

static cudaError_t wrap_cudaGetDriverEntryPoint(const char *symbol, void **fn,
                                                unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(DS_REAL(wrap_cudaGetDriverEntryPoint, real_cudaGetDriverEntryPoint,
                               "cudaGetDriverEntryPoint"),
                       symbol, fn, flags, status, __builtin_return_address(0));
}

static cudaError_t wrap_cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn,
                                                     unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(DS_REAL(wrap_cudaGetDriverEntryPoint_ptsz,
                               real_cudaGetDriverEntryPoint_ptsz, "cudaGetDriverEntryPoint_ptsz"),
                       symbol, fn, flags, status, __builtin_return_address(0));
}

static cudaError_t by_version(__typeof__(real_cudaGetDriverEntryPointByVersion) real,
                              const char *symbol, void **fn, unsigned int version,
                              unsigned long long flags,
                              enum cudaDriverEntryPointQueryResult *status, const void *caller)
{
    cudaError_t r = real(symbol, fn, version, flags, status);
    if (r == cudaSuccess)
        wrap_entry_point(symbol, fn, (int)version, flags, caller);
    return r;
}

static cudaError_t wrap_cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return by_version(DS_REAL(wrap_cudaGetDriverEntryPointByVersion,
                              real_cudaGetDriverEntryPointByVersion,
                              "cudaGetDriverEntryPointByVersion"),
                      symbol, fn, version, flags, status, __builtin_return_address(0));
}

static cudaError_t wrap_cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return by_version(DS_REAL(wrap_cudaGetDriverEntryPointByVersion_ptsz,
                              real_cudaGetDriverEntryPointByVersion_ptsz,
                              "cudaGetDriverEntryPointByVersion_ptsz"),
                      symbol, fn, version, flags, status, __builtin_return_address(0));
}

/* ---- registration ----------------------------------------------------------- */

#define HOOK(name) {#name, (void *)wrap_##name, (void **)&real_##name, NULL}
static const ds_got_hook runtime_hooks[] = {
    HOOK(cudaMalloc),
    HOOK(cudaMallocAsync),
    HOOK(cudaMallocAsync_ptsz),
    HOOK(cudaMallocFromPoolAsync),
    HOOK(cudaMallocFromPoolAsync_ptsz),
    HOOK(cudaMallocManaged),
    HOOK(cudaMallocPitch),
    HOOK(cudaMallocHost),
    HOOK(cudaHostAlloc),
    HOOK(cudaFree),
    HOOK(cudaFreeAsync),
    HOOK(cudaFreeAsync_ptsz),
    HOOK(cudaFreeHost),
    HOOK(cudaGetDriverEntryPoint),
    HOOK(cudaGetDriverEntryPoint_ptsz),
    HOOK(cudaGetDriverEntryPointByVersion),
    HOOK(cudaGetDriverEntryPointByVersion_ptsz),
};
#undef HOOK

void ds_cuda_runtime_install(void)
{
    ds_got_hooks_add(runtime_hooks, DS_ARRAY_LEN(runtime_hooks));
    ds_alloc_set_releaser(FAMILY, release_deferred);
}
