/*
 * cuda_driver.c — allocations through the CUDA driver API (libcuda).
 *
 * Wraps, through every module's GOT, dlsym and cuGetProcAddress:
 *   cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocAsync(_ptsz),
 *   cuMemAllocFromPoolAsync(_ptsz), cuMemAllocManaged, cuMemAllocHost_v2,
 *   cuMemHostAlloc, cuMemFree_v2, cuMemFreeAsync(_ptsz), cuMemFreeHost,
 *   cuGetProcAddress and cuGetProcAddress_v2: the driver functions it hands
 *   out come back wrapped, cuGetProcAddress itself included (how the CUDA
 *   runtime and PyTorch fetch driver entry points).
 * Leaves out: the virtual memory API (cuMemCreate, cuMemMap, cuMemRelease:
 *   PyTorch's expandable segments; a follow-up issue), the 32-bit v1 ABI
 *   (cuMemAlloc without _v2, CUDA < 3.2), arrays.
 *
 * Same shape as cuda_runtime.c; calls the runtime makes into the driver on
 * the program's behalf are recorded once, as the runtime call.
 */
#include <cuda.h>
#include <string.h>

#include "internal.h"

#define FAMILY DS_FAMILY_CUDA

/* The pre-12.0 cuGetProcAddress, which cuda.h now renames to _v2. */
typedef CUresult cu_get_proc_address_v1(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags);

static __typeof__(cuMemAlloc_v2) *real_cuMemAlloc_v2;
static __typeof__(cuMemAllocPitch_v2) *real_cuMemAllocPitch_v2;
static __typeof__(cuMemAllocAsync) *real_cuMemAllocAsync, *real_cuMemAllocAsync_ptsz;
static __typeof__(cuMemAllocFromPoolAsync) *real_cuMemAllocFromPoolAsync,
    *real_cuMemAllocFromPoolAsync_ptsz;
static __typeof__(cuMemAllocManaged) *real_cuMemAllocManaged;
static __typeof__(cuMemAllocHost_v2) *real_cuMemAllocHost_v2;
static __typeof__(cuMemHostAlloc) *real_cuMemHostAlloc;
static __typeof__(cuMemFree_v2) *real_cuMemFree_v2;
static __typeof__(cuMemFreeAsync) *real_cuMemFreeAsync, *real_cuMemFreeAsync_ptsz;
static __typeof__(cuMemFreeHost) *real_cuMemFreeHost;
static cu_get_proc_address_v1 *real_cuGetProcAddress;
static __typeof__(cuGetProcAddress_v2) *real_cuGetProcAddress_v2;

/* The current context's device, asked of the same driver. */
static int current_device(const void *real)
{
    static __typeof__(cuCtxGetDevice) *get_device;
    __typeof__(cuCtxGetDevice) *get =
        DS_LAZY(get_device, ds_resolve_beside(real, "cuCtxGetDevice"));
    CUdevice device = 0;
    if (!get || get(&device) != CUDA_SUCCESS)
        device = 0;
    return (int)device;
}

#define ALLOCATED(kind, ptr, bytes, stream, real)                                  \
    ds_device_allocated(FAMILY, kind, ptr, sizeof(*(ptr)), bytes,                   \
                        current_device((void *)(real)), (void *)(stream), caller)

/* ---- allocations ---------------------------------------------------------- */

static CUresult wrap_cuMemAlloc_v2(CUdeviceptr *ptr, size_t size)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cuMemAlloc_v2) real =
        DS_REAL(wrap_cuMemAlloc_v2, real_cuMemAlloc_v2, "cuMemAlloc_v2");
    CUresult r = real(ptr, size);
    if (outer && r == CUDA_SUCCESS)
        ALLOCATED(DS_ALLOC_DEVICE, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static CUresult wrap_cuMemAllocPitch_v2(CUdeviceptr *ptr, size_t *pitch, size_t width,
                                        size_t height, unsigned int element)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cuMemAllocPitch_v2) real =
        DS_REAL(wrap_cuMemAllocPitch_v2, real_cuMemAllocPitch_v2, "cuMemAllocPitch_v2");
    CUresult r = real(ptr, pitch, width, height, element);
    size_t row = 0;
    if (outer && r == CUDA_SUCCESS && ds_safe_read(&row, pitch, sizeof(row)) == sizeof(row))
        ALLOCATED(DS_ALLOC_DEVICE, ptr, (uint64_t)row * height, NULL, real);
    ds_api_leave();
    return r;
}

static CUresult alloc_async(__typeof__(real_cuMemAllocAsync) real, CUdeviceptr *ptr, size_t size,
                            CUstream stream, const void *caller)
{
    bool outer = ds_api_enter();
    CUresult r = real(ptr, size, stream);
    if (outer && r == CUDA_SUCCESS)
        ALLOCATED(DS_ALLOC_ASYNC, ptr, size, stream, real);
    ds_api_leave();
    return r;
}

static CUresult wrap_cuMemAllocAsync(CUdeviceptr *ptr, size_t size, CUstream stream)
{
    return alloc_async(DS_REAL(wrap_cuMemAllocAsync, real_cuMemAllocAsync, "cuMemAllocAsync"), ptr,
                       size, stream, __builtin_return_address(0));
}

static CUresult wrap_cuMemAllocAsync_ptsz(CUdeviceptr *ptr, size_t size, CUstream stream)
{
    return alloc_async(
        DS_REAL(wrap_cuMemAllocAsync_ptsz, real_cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz"),
        ptr, size, stream, __builtin_return_address(0));
}

static CUresult from_pool(__typeof__(real_cuMemAllocFromPoolAsync) real, CUdeviceptr *ptr,
                          size_t size, CUmemoryPool pool, CUstream stream, const void *caller)
{
    bool outer = ds_api_enter();
    CUresult r = real(ptr, size, pool, stream);
    if (outer && r == CUDA_SUCCESS)
        ALLOCATED(DS_ALLOC_ASYNC, ptr, size, stream, real);
    ds_api_leave();
    return r;
}

static CUresult wrap_cuMemAllocFromPoolAsync(CUdeviceptr *ptr, size_t size, CUmemoryPool pool,
                                             CUstream stream)
{
    return from_pool(DS_REAL(wrap_cuMemAllocFromPoolAsync, real_cuMemAllocFromPoolAsync,
                             "cuMemAllocFromPoolAsync"),
                     ptr, size, pool, stream, __builtin_return_address(0));
}

static CUresult wrap_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *ptr, size_t size,
                                                  CUmemoryPool pool, CUstream stream)
{
    return from_pool(DS_REAL(wrap_cuMemAllocFromPoolAsync_ptsz, real_cuMemAllocFromPoolAsync_ptsz,
                             "cuMemAllocFromPoolAsync_ptsz"),
                     ptr, size, pool, stream, __builtin_return_address(0));
}

static CUresult wrap_cuMemAllocManaged(CUdeviceptr *ptr, size_t size, unsigned int flags)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cuMemAllocManaged) real =
        DS_REAL(wrap_cuMemAllocManaged, real_cuMemAllocManaged, "cuMemAllocManaged");
    CUresult r = real(ptr, size, flags);
    if (outer && r == CUDA_SUCCESS)
        ALLOCATED(DS_ALLOC_MANAGED, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static CUresult wrap_cuMemAllocHost_v2(void **ptr, size_t size)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cuMemAllocHost_v2) real =
        DS_REAL(wrap_cuMemAllocHost_v2, real_cuMemAllocHost_v2, "cuMemAllocHost_v2");
    CUresult r = real(ptr, size);
    if (outer && r == CUDA_SUCCESS)
        ALLOCATED(DS_ALLOC_HOST, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

static CUresult wrap_cuMemHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    __typeof__(real_cuMemHostAlloc) real =
        DS_REAL(wrap_cuMemHostAlloc, real_cuMemHostAlloc, "cuMemHostAlloc");
    CUresult r = real(ptr, size, flags);
    if (outer && r == CUDA_SUCCESS)
        ALLOCATED(DS_ALLOC_HOST, ptr, size, NULL, real);
    ds_api_leave();
    return r;
}

/* ---- frees ------------------------------------------------------------------ */

static CUresult stopped(int action)
{
    return action == DS_FREE_DEFER ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult wrap_cuMemFree_v2(CUdeviceptr ptr)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_DEVICE, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    CUresult r = action != DS_FREE_FORWARD
                     ? stopped(action)
                     : DS_REAL(wrap_cuMemFree_v2, real_cuMemFree_v2, "cuMemFree_v2")(ptr);
    if (outer && action == DS_FREE_FORWARD && r == CUDA_SUCCESS)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static CUresult free_async(__typeof__(real_cuMemFreeAsync) real, CUdeviceptr ptr, CUstream stream,
                           const void *caller)
{
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_ASYNC, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    CUresult r = action != DS_FREE_FORWARD ? stopped(action) : real(ptr, stream);
    if (outer && action == DS_FREE_FORWARD && r == CUDA_SUCCESS)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static CUresult wrap_cuMemFreeAsync(CUdeviceptr ptr, CUstream stream)
{
    return free_async(DS_REAL(wrap_cuMemFreeAsync, real_cuMemFreeAsync, "cuMemFreeAsync"), ptr,
                      stream, __builtin_return_address(0));
}

static CUresult wrap_cuMemFreeAsync_ptsz(CUdeviceptr ptr, CUstream stream)
{
    return free_async(
        DS_REAL(wrap_cuMemFreeAsync_ptsz, real_cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz"), ptr,
        stream, __builtin_return_address(0));
}

static CUresult wrap_cuMemFreeHost(void *ptr)
{
    const void *caller = __builtin_return_address(0);
    bool outer = ds_api_enter();
    int action = outer ? ds_device_free_check(FAMILY, DS_ALLOC_HOST, (uintptr_t)ptr, caller)
                       : DS_FREE_FORWARD;
    CUresult r = action != DS_FREE_FORWARD
                     ? stopped(action)
                     : DS_REAL(wrap_cuMemFreeHost, real_cuMemFreeHost, "cuMemFreeHost")(ptr);
    if (outer && action == DS_FREE_FORWARD && r == CUDA_SUCCESS)
        ds_device_freed((uintptr_t)ptr, caller);
    ds_api_leave();
    return r;
}

static void release_deferred(uintptr_t base, int kind)
{
    if (kind == DS_ALLOC_HOST) {
        __typeof__(real_cuMemFreeHost) free_fn =
            DS_LAZY(real_cuMemFreeHost, ds_resolve_real("cuMemFreeHost", (void *)wrap_cuMemFreeHost));
        if (free_fn)
            free_fn((void *)base);
    } else {
        __typeof__(real_cuMemFree_v2) free_fn =
            DS_LAZY(real_cuMemFree_v2, ds_resolve_real("cuMemFree_v2", (void *)wrap_cuMemFree_v2));
        if (free_fn)
            free_fn((CUdeviceptr)base);
    }
}

/* ---- cuGetProcAddress: the driver's own lookup ------------------------------ */

/* Base names whose ABI changed (the version from which the new one applies);
 * cuGetProcAddress hands out the variant of the requested version. */
static const struct {
    const char *base, *versioned;
    int since;
} renamed[] = {
    {"cuMemAlloc", "cuMemAlloc_v2", 3020},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020},
    {"cuMemFree", "cuMemFree_v2", 3020},
    {"cuMemAllocHost", "cuMemAllocHost_v2", 3020},
    {"cuMemcpyHtoD", "cuMemcpyHtoD_v2", 3020},
    {"cuMemcpyDtoH", "cuMemcpyDtoH_v2", 3020},
    {"cuMemcpyDtoD", "cuMemcpyDtoD_v2", 3020},
    {"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", 3020},
    {"cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", 3020},
    {"cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2", 3020},
    {"cuMemcpy2D", "cuMemcpy2D_v2", 3020},
    {"cuMemcpy2DAsync", "cuMemcpy2DAsync_v2", 3020},
    {"cuMemsetD8", "cuMemsetD8_v2", 3020},
    {"cuMemsetD32", "cuMemsetD32_v2", 3020},
    {"cuStreamDestroy", "cuStreamDestroy_v2", 4000},
    {"cuEventDestroy", "cuEventDestroy_v2", 4000},
    {"cuGetProcAddress", "cuGetProcAddress_v2", 12000},
};

/* Functions taking a stream, which have per-thread-default-stream variants. */
static const char *const per_stream[] = {"cuMemAllocAsync", "cuMemFreeAsync",
                                         "cuMemAllocFromPoolAsync"};

const char *ds_cuda_driver_hook_name(const char *symbol, int version, uint64_t flags, char *buf,
                                     size_t cap)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(renamed); i++)
        if (!strcmp(symbol, renamed[i].base))
            return version >= renamed[i].since ? renamed[i].versioned : symbol;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        for (size_t i = 0; i < DS_ARRAY_LEN(per_stream); i++)
            if (!strcmp(symbol, per_stream[i])) {
                ds_fmt(buf, cap, "%s_ptsz", symbol);
                return buf;
            }
    return symbol;
}

static void wrap_result(const char *symbol, void **pfn, int version, cuuint64_t flags,
                        const void *caller)
{
    void *f = NULL;
    if (pfn && symbol && ds_safe_read(&f, pfn, sizeof(f)) == sizeof(f) && f && ds_active()) {
        char name[DS_NAME_MAX];
        void *w = ds_hook_for_lookup(ds_cuda_driver_hook_name(symbol, version, flags, name,
                                                              sizeof(name)),
                                     f, caller);
        if (w != f)
            ds_safe_write(pfn, &w, sizeof(w));
    }
}

static CUresult wrap_cuGetProcAddress(const char *symbol, void **pfn, int version,
                                      cuuint64_t flags)
{
    const void *caller = __builtin_return_address(0);
    CUresult r =
        DS_REAL(wrap_cuGetProcAddress, real_cuGetProcAddress, "cuGetProcAddress")(symbol, pfn,
                                                                                  version, flags);
    if (r == CUDA_SUCCESS)
        wrap_result(symbol, pfn, version, flags, caller);
    return r;
}

static CUresult wrap_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    const void *caller = __builtin_return_address(0);
    CUresult r = DS_REAL(wrap_cuGetProcAddress_v2, real_cuGetProcAddress_v2,
                         "cuGetProcAddress_v2")(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS)
        wrap_result(symbol, pfn, version, flags, caller);
    return r;
}

/* ---- registration ----------------------------------------------------------- */

#define HOOK(name) {#name, (void *)wrap_##name, (void **)&real_##name, NULL}
static const ds_got_hook driver_hooks[] = {
    HOOK(cuMemAlloc_v2),
    HOOK(cuMemAllocPitch_v2),
    HOOK(cuMemAllocAsync),
    HOOK(cuMemAllocAsync_ptsz),
    HOOK(cuMemAllocFromPoolAsync),
    HOOK(cuMemAllocFromPoolAsync_ptsz),
    HOOK(cuMemAllocManaged),
    HOOK(cuMemAllocHost_v2),
    HOOK(cuMemHostAlloc),
    HOOK(cuMemFree_v2),
    HOOK(cuMemFreeAsync),
    HOOK(cuMemFreeAsync_ptsz),
    HOOK(cuMemFreeHost),
    HOOK(cuGetProcAddress),
    HOOK(cuGetProcAddress_v2),
};
#undef HOOK

void ds_cuda_driver_install(void)
{
    ds_got_hooks_add(driver_hooks, DS_ARRAY_LEN(driver_hooks));
    ds_alloc_set_releaser(FAMILY, release_deferred);
}
