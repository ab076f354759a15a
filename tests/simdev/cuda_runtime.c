/*
 * The simulated device's CUDA runtime (libcudart.so.13): the subset of the
 * runtime API the tests use.  Like the real runtime it reaches the driver
 * only through pointers from cuGetProcAddress, after dlopen("libcuda.so.1"),
 * so a tracer sees the runtime call and, nested inside it, the driver call.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

/* The driver, as the runtime sees it. */
static struct {
    __typeof__(cuInit) *init;
    __typeof__(cuMemAlloc) *alloc;
    __typeof__(cuMemAllocPitch) *alloc_pitch;
    __typeof__(cuMemAllocAsync) *alloc_async;
    __typeof__(cuMemAllocFromPoolAsync) *alloc_from_pool;
    __typeof__(cuDeviceGetDefaultMemPool) *default_pool;
    __typeof__(cuMemAllocManaged) *alloc_managed;
    __typeof__(cuMemAllocHost) *alloc_host;
    __typeof__(cuMemFree) *free;
    __typeof__(cuMemFreeAsync) *free_async;
    __typeof__(cuMemFreeHost) *free_host;
    __typeof__(cuMemcpy) *copy;
    __typeof__(cuMemcpyAsync) *copy_async;
    __typeof__(cuMemsetD8) *fill;
    __typeof__(cuMemsetD8Async) *fill_async;
    __typeof__(cuStreamCreate) *stream_create;
    __typeof__(cuStreamDestroy) *stream_destroy;
    __typeof__(cuStreamSynchronize) *stream_sync;
    __typeof__(cuStreamWaitEvent) *stream_wait;
    __typeof__(cuEventCreate) *event_create;
    __typeof__(cuEventRecord) *event_record;
    __typeof__(cuEventQuery) *event_query;
    __typeof__(cuEventSynchronize) *event_sync;
    __typeof__(cuEventDestroy) *event_destroy;
    __typeof__(cuLaunchHostFunc) *host_func;
    __typeof__(cuStreamAddCallback) *stream_callback;
    __typeof__(cuLibraryLoadData) *library_load;
    __typeof__(cuLibraryGetKernel) *library_kernel;
    __typeof__(cuLibraryUnload) *library_unload;
    __typeof__(cuLaunchKernel) *launch;
    __typeof__(cuCtxSynchronize_v2) *ctx_sync; /* what version 13000 hands out */
    __typeof__(cuDevicePrimaryCtxRetain) *retain;
    __typeof__(cuCtxGetDevice) *ctx_device;
    __typeof__(cuImportExternalMemory) *import_mem;
    __typeof__(cuExternalMemoryGetMappedBuffer) *map_mem;
    __typeof__(cuDestroyExternalMemory) *destroy_mem;
    __typeof__(cuImportExternalSemaphore) *import_sem;
    __typeof__(cuSignalExternalSemaphoresAsync) *signal_sem;
    __typeof__(cuWaitExternalSemaphoresAsync) *wait_sem;
    __typeof__(cuDestroyExternalSemaphore) *destroy_sem;
} drv;
/* The driver's per-thread-default-stream twins of its stream and copy calls
 * (looked up with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), which the
 * runtime's own twins call with their arguments as they are. */
static __typeof__(drv) drv_pt;
static __typeof__(cuGetProcAddress_v2) *get_proc;
static cudaError_t init_error;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread cudaError_t last_error;

static CUcontext primary;

static void load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    get_proc = h ? (__typeof__(get_proc))dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!get_proc) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
#define GET(field, name) get_proc(name, (void **)&drv.field, 13000, 0, NULL)
    GET(init, "cuInit");
    GET(alloc, "cuMemAlloc");
    GET(alloc_pitch, "cuMemAllocPitch");
    GET(alloc_async, "cuMemAllocAsync");
    GET(alloc_from_pool, "cuMemAllocFromPoolAsync");
    GET(default_pool, "cuDeviceGetDefaultMemPool");
    GET(alloc_managed, "cuMemAllocManaged");
    GET(alloc_host, "cuMemAllocHost");
    GET(free, "cuMemFree");
    GET(free_async, "cuMemFreeAsync");
    GET(free_host, "cuMemFreeHost");
    GET(copy, "cuMemcpy");
    GET(copy_async, "cuMemcpyAsync");
    GET(fill, "cuMemsetD8");
    GET(fill_async, "cuMemsetD8Async");
    GET(stream_create, "cuStreamCreate");
    GET(stream_destroy, "cuStreamDestroy");
    GET(stream_sync, "cuStreamSynchronize");
    GET(stream_wait, "cuStreamWaitEvent");
    GET(event_create, "cuEventCreate");
    GET(event_record, "cuEventRecord");
    GET(event_query, "cuEventQuery");
    GET(event_sync, "cuEventSynchronize");
    GET(event_destroy, "cuEventDestroy");
    GET(host_func, "cuLaunchHostFunc");
    GET(stream_callback, "cuStreamAddCallback");
    GET(library_load, "cuLibraryLoadData");
    GET(library_kernel, "cuLibraryGetKernel");
    GET(library_unload, "cuLibraryUnload");
    GET(launch, "cuLaunchKernel");
    GET(ctx_sync, "cuCtxSynchronize");
    GET(retain, "cuDevicePrimaryCtxRetain");
    GET(ctx_device, "cuCtxGetDevice");
    GET(import_mem, "cuImportExternalMemory");
    GET(map_mem, "cuExternalMemoryGetMappedBuffer");
    GET(destroy_mem, "cuDestroyExternalMemory");
    GET(import_sem, "cuImportExternalSemaphore");
    GET(signal_sem, "cuSignalExternalSemaphoresAsync");
    GET(wait_sem, "cuWaitExternalSemaphoresAsync");
    GET(destroy_sem, "cuDestroyExternalSemaphore");
#undef GET
#define GET(field, name)                                                                  \
    get_proc(name, (void **)&drv_pt.field, 13000,                                         \
             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL)
    GET(alloc_async, "cuMemAllocAsync");
    GET(alloc_from_pool, "cuMemAllocFromPoolAsync");
    GET(free_async, "cuMemFreeAsync");
    GET(copy, "cuMemcpy");
    GET(copy_async, "cuMemcpyAsync");
    GET(fill, "cuMemsetD8");
    GET(fill_async, "cuMemsetD8Async");
    GET(stream_sync, "cuStreamSynchronize");
    GET(stream_wait, "cuStreamWaitEvent");
    GET(event_record, "cuEventRecord");
    GET(host_func, "cuLaunchHostFunc");
    GET(stream_callback, "cuStreamAddCallback");
    GET(launch, "cuLaunchKernel");
    GET(signal_sem, "cuSignalExternalSemaphoresAsync");
    GET(wait_sem, "cuWaitExternalSemaphoresAsync");
#undef GET
    if (drv.init(0) == CUDA_ERROR_NO_DEVICE)
        init_error = cudaErrorNoDevice;
    else
        drv.retain(&primary, 0); /* named in each call, never made current */
}

/* Driver results → runtime results, for the codes the simulation produces. */
static cudaError_t from(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDA_ERROR_OPERATING_SYSTEM: return cudaErrorOperatingSystem;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    default: return cudaErrorUnknown;
    }
}

#define CALL(expr)                                       \
    do {                                                 \
        pthread_once(&once, load_driver);                \
        if (init_error)                                  \
            return last_error = init_error;              \
        cudaError_t e_ = from(expr);                     \
        if (e_ != cudaSuccess && e_ != cudaErrorNotReady) \
            last_error = e_;                             \
        return e_;                                       \
    } while (0)

/* The per-thread-default-stream entry points (name_ptsz, name_ptds: what
 * code built with --default-stream per-thread calls) are separate exports,
 * as the real runtime's, sharing the helpers of the legacy ones, never
 * calling an export: they call the driver's twins (drv_pt), whose stream 0
 * is the calling thread's default stream. */
#define PT(stream) ((CUstream)(stream))

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    pthread_once(&once, load_driver);
    if (init_error)
        return init_error;
    if (!count)
        return cudaErrorInvalidValue;
    *count = 1;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    CALL(drv.ctx_device((CUdevice *)device));
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    pthread_once(&once, load_driver);
    if (init_error)
        return init_error;
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    CALL(drv.ctx_sync(primary));
}

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    return error == cudaSuccess ? "no error" : "simulated device error";
}

/* ---- memory ----------------------------------------------------------------------- */

EXPORT cudaError_t cudaMalloc(void **ptr, size_t size)
{
    CALL(drv.alloc((CUdeviceptr *)ptr, size));
}

EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    CALL(drv.alloc_async((CUdeviceptr *)ptr, size, (CUstream)stream));
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    CALL(drv_pt.alloc_async((CUdeviceptr *)ptr, size, PT(stream)));
}

EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t stream)
{
    CALL(drv_pt.alloc_from_pool((CUdeviceptr *)ptr, size, (CUmemoryPool)pool, PT(stream)));
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t stream)
{
    CALL(drv.alloc_from_pool((CUdeviceptr *)ptr, size, (CUmemoryPool)pool, (CUstream)stream));
}

EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    CALL(drv.default_pool((CUmemoryPool *)pool, device));
}

EXPORT cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    CALL(drv.alloc_managed((CUdeviceptr *)ptr, size, flags));
}

EXPORT cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
    CALL(drv.alloc_pitch((CUdeviceptr *)ptr, pitch, width, height, 4));
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    CALL(drv.alloc_host(ptr, size));
}

EXPORT cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    CALL(drv.alloc_host(ptr, size));
}

EXPORT cudaError_t cudaFree(void *ptr)
{
    CALL(drv.free((CUdeviceptr)(uintptr_t)ptr));
}

EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    CALL(drv.free_async((CUdeviceptr)(uintptr_t)ptr, (CUstream)stream));
}

EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    CALL(drv_pt.free_async((CUdeviceptr)(uintptr_t)ptr, PT(stream)));
}

EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    CALL(drv.free_host(ptr));
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    CALL(drv.copy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n));
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                   cudaStream_t stream)
{
    (void)kind;
    CALL(drv.copy_async((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n,
                        (CUstream)stream));
}

EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    CALL(drv_pt.copy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n));
}

EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
                                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)kind;
    CALL(drv_pt.copy_async((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n,
                           PT(stream)));
}

/* Row by row through the driver, as a runtime without a 2D engine would. */
static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, cudaStream_t stream, int async,
                           const __typeof__(drv) *d_)
{
    pthread_once(&once, load_driver);
    if (init_error)
        return init_error;
    for (size_t row = 0; row < height; row++) {
        CUdeviceptr d = (CUdeviceptr)(uintptr_t)((char *)dst + row * dpitch);
        CUdeviceptr s = (CUdeviceptr)(uintptr_t)((const char *)src + row * spitch);
        CUresult r = async ? d_->copy_async(d, s, width, (CUstream)stream) : d_->copy(d, s, width);
        if (r != CUDA_SUCCESS)
            return from(r);
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                size_t width, size_t height, enum cudaMemcpyKind kind)
{
    (void)kind;
    return copy_2d(dst, dpitch, src, spitch, width, height, NULL, 0, &drv);
}

EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind,
                                     cudaStream_t stream)
{
    (void)kind;
    return copy_2d(dst, dpitch, src, spitch, width, height, stream, 1, &drv);
}

EXPORT cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind)
{
    (void)kind;
    return copy_2d(dst, dpitch, src, spitch, width, height, NULL, 0, &drv_pt);
}

EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
                                          size_t spitch, size_t width, size_t height,
                                          enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)kind;
    return copy_2d(dst, dpitch, src, spitch, width, height, stream, 1, &drv_pt);
}

EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device,
                                  size_t n)
{
    (void)dst_device;
    (void)src_device;
    CALL(drv.copy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n));
}

EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device,
                                       size_t n, cudaStream_t stream)
{
    (void)dst_device;
    (void)src_device;
    CALL(drv.copy_async((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n,
                        (CUstream)stream));
}

EXPORT cudaError_t cudaMemset(void *dst, int value, size_t n)
{
    CALL(drv.fill((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, n));
}

EXPORT cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream)
{
    CALL(drv.fill_async((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, n, (CUstream)stream));
}

EXPORT cudaError_t cudaMemset_ptds(void *dst, int value, size_t n)
{
    CALL(drv_pt.fill((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, n));
}

EXPORT cudaError_t cudaMemsetAsync_ptsz(void *dst, int value, size_t n, cudaStream_t stream)
{
    CALL(drv_pt.fill_async((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, n, PT(stream)));
}

/* ---- streams and events ----------------------------------------------------------- */

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    CALL(drv.stream_create((CUstream *)stream, 0));
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    CALL(drv.stream_create((CUstream *)stream,
                           flags & cudaStreamNonBlocking ? CU_STREAM_NON_BLOCKING : 0));
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    CALL(drv.stream_destroy((CUstream)stream));
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    CALL(drv.stream_sync((CUstream)stream));
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    CALL(drv.stream_wait((CUstream)stream, (CUevent)event, flags));
}

EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    CALL(drv_pt.stream_sync(PT(stream)));
}

EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                            unsigned int flags)
{
    CALL(drv_pt.stream_wait(PT(stream), (CUevent)event, flags));
}

EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    CALL(drv.event_create((CUevent *)event, 0));
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    CALL(drv.event_create((CUevent *)event, flags));
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    CALL(drv.event_record((CUevent)event, (CUstream)stream));
}

EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                            unsigned int flags)
{
    (void)flags;
    CALL(drv.event_record((CUevent)event, (CUstream)stream));
}

EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    CALL(drv_pt.event_record((CUevent)event, PT(stream)));
}

EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                                 unsigned int flags)
{
    (void)flags;
    CALL(drv_pt.event_record((CUevent)event, PT(stream)));
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t event)
{
    CALL(drv.event_query((CUevent)event));
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    CALL(drv.event_sync((CUevent)event));
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    CALL(drv.event_destroy((CUevent)event));
}

EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data)
{
    CALL(drv.host_func((CUstream)stream, (CUhostFn)fn, data));
}

EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *data)
{
    CALL(drv_pt.host_func(PT(stream), (CUhostFn)fn, data));
}

/* The runtime's callback takes its own types: called from a driver one. */
typedef struct {
    cudaStreamCallback_t fn;
    void *data;
} runtime_callback;

static void CUDA_CB call_runtime_callback(CUstream stream, CUresult status, void *arg)
{
    runtime_callback c = *(runtime_callback *)arg;
    free(arg);
    c.fn((cudaStream_t)stream, status == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown, c.data);
}

static cudaError_t add_callback(CUstream stream, cudaStreamCallback_t fn, void *data,
                                unsigned int flags, const __typeof__(drv) *d)
{
    if (!fn)
        return last_error = cudaErrorInvalidValue;
    runtime_callback *c = malloc(sizeof(*c));
    *c = (runtime_callback){fn, data};
    CALL(d->stream_callback(stream, call_runtime_callback, c, flags));
}

EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t fn, void *data,
                                         unsigned int flags)
{
    return add_callback((CUstream)stream, fn, data, flags, &drv);
}

EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t fn,
                                              void *data, unsigned int flags)
{
    return add_callback(PT(stream), fn, data, flags, &drv_pt);
}

/* ---- libraries and launches: the runtime's types are the driver's ----------------- */

EXPORT cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code,
                                       enum cudaJitOption *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions,
                                       enum cudaLibraryOption *libraryOptions,
                                       void **libraryOptionValues, unsigned int numLibraryOptions)
{
    CALL(drv.library_load(library, code, (CUjit_option *)jitOptions, jitOptionsValues,
                          numJitOptions, (CUlibraryOption *)libraryOptions, libraryOptionValues,
                          numLibraryOptions));
}

EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t library,
                                        const char *name)
{
    CALL(drv.library_kernel(kernel, library, name));
}

EXPORT cudaError_t cudaLibraryUnload(cudaLibrary_t library)
{
    CALL(drv.library_unload(library));
}

/* `func`: a cudaKernel_t (there are no registered host stubs here). */
EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                    size_t shared, cudaStream_t stream)
{
    CALL(drv.launch((CUfunction)(uintptr_t)func, grid.x, grid.y, grid.z, block.x, block.y,
                    block.z, (unsigned)shared, (CUstream)stream, args, NULL));
}

EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                         size_t shared, cudaStream_t stream)
{
    CALL(drv_pt.launch((CUfunction)(uintptr_t)func, grid.x, grid.y, grid.z, block.x, block.y,
                    block.z, (unsigned)shared, PT(stream), args, NULL));
}

/* ---- external resource interoperability ------------------------------------------- */

/* The runtime's descriptors are the driver's, field for field (and the
 * handle types' values the same), so they pass through as they are. */
#define SAME_LAYOUT(rt, dr, last)                                          \
    _Static_assert(sizeof(struct rt) == sizeof(dr) &&                      \
                       offsetof(struct rt, last) == offsetof(dr, last),   \
                   #rt " is " #dr)
SAME_LAYOUT(cudaExternalMemoryHandleDesc, CUDA_EXTERNAL_MEMORY_HANDLE_DESC, flags);
SAME_LAYOUT(cudaExternalMemoryBufferDesc, CUDA_EXTERNAL_MEMORY_BUFFER_DESC, flags);
SAME_LAYOUT(cudaExternalSemaphoreHandleDesc, CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, flags);
SAME_LAYOUT(cudaExternalSemaphoreSignalParams, CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, flags);
SAME_LAYOUT(cudaExternalSemaphoreWaitParams, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, flags);
#undef SAME_LAYOUT
_Static_assert((int)cudaExternalMemoryHandleTypeOpaqueFd == (int)CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD &&
                   (int)cudaExternalSemaphoreHandleTypeOpaqueFd ==
                       (int)CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD &&
                   (int)cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd ==
                       (int)CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
               "handle types");

EXPORT cudaError_t cudaImportExternalMemory(cudaExternalMemory_t *extMem_out,
                                            const struct cudaExternalMemoryHandleDesc *memHandleDesc)
{
    CALL(drv.import_mem((CUexternalMemory *)extMem_out,
                        (const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *)memHandleDesc));
}

EXPORT cudaError_t cudaExternalMemoryGetMappedBuffer(void **devPtr, cudaExternalMemory_t extMem,
                                                     const struct cudaExternalMemoryBufferDesc *bufferDesc)
{
    CALL(drv.map_mem((CUdeviceptr *)devPtr, (CUexternalMemory)extMem,
                     (const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *)bufferDesc));
}

EXPORT cudaError_t cudaDestroyExternalMemory(cudaExternalMemory_t extMem)
{
    CALL(drv.destroy_mem((CUexternalMemory)extMem));
}

EXPORT cudaError_t cudaImportExternalSemaphore(cudaExternalSemaphore_t *extSem_out,
                                               const struct cudaExternalSemaphoreHandleDesc *semHandleDesc)
{
    CALL(drv.import_sem((CUexternalSemaphore *)extSem_out,
                        (const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *)semHandleDesc));
}

EXPORT cudaError_t cudaSignalExternalSemaphoresAsync(const cudaExternalSemaphore_t *extSemArray,
                                                     const struct cudaExternalSemaphoreSignalParams *paramsArray,
                                                     unsigned int numExtSems, cudaStream_t stream)
{
    CALL(drv.signal_sem((const CUexternalSemaphore *)extSemArray,
                        (const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)paramsArray, numExtSems,
                        (CUstream)stream));
}

EXPORT cudaError_t cudaWaitExternalSemaphoresAsync(const cudaExternalSemaphore_t *extSemArray,
                                                   const struct cudaExternalSemaphoreWaitParams *paramsArray,
                                                   unsigned int numExtSems, cudaStream_t stream)
{
    CALL(drv.wait_sem((const CUexternalSemaphore *)extSemArray,
                      (const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *)paramsArray, numExtSems,
                      (CUstream)stream));
}

EXPORT cudaError_t cudaSignalExternalSemaphoresAsync_ptsz(
    const cudaExternalSemaphore_t *extSemArray,
    const struct cudaExternalSemaphoreSignalParams *paramsArray, unsigned int numExtSems,
    cudaStream_t stream)
{
    CALL(drv_pt.signal_sem((const CUexternalSemaphore *)extSemArray,
                        (const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)paramsArray, numExtSems,
                        PT(stream)));
}

EXPORT cudaError_t cudaWaitExternalSemaphoresAsync_ptsz(
    const cudaExternalSemaphore_t *extSemArray,
    const struct cudaExternalSemaphoreWaitParams *paramsArray, unsigned int numExtSems,
    cudaStream_t stream)
{
    CALL(drv_pt.wait_sem((const CUexternalSemaphore *)extSemArray,
                      (const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *)paramsArray, numExtSems,
                      PT(stream)));
}

EXPORT cudaError_t cudaDestroyExternalSemaphore(cudaExternalSemaphore_t extSem)
{
    CALL(drv.destroy_sem((CUexternalSemaphore)extSem));
}

/* ---- driver entry points through the runtime -------------------------------------- */

/* A _ptsz lookup's default (no cudaEnableLegacyStream) is the per-thread
 * variant: the driver's per-thread flag (the same value). */
static cudaError_t entry_point(const char *symbol, void **fn, unsigned int version,
                               unsigned long long flags, int per_thread,
                               enum cudaDriverEntryPointQueryResult *status)
{
    pthread_once(&once, load_driver);
    if (init_error)
        return init_error;
    if (per_thread && !(flags & cudaEnableLegacyStream))
        flags |= cudaEnablePerThreadDefaultStream;
    CUdriverProcAddressQueryResult s;
    CUresult r = get_proc(symbol, fn, (int)version, flags, &s);
    if (status)
        *status = s == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
                                                   : cudaDriverEntryPointSymbolNotFound;
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorSymbolNotFound;
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                    unsigned int version, unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, version, flags, 0, status);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, version, flags, 1, status);
}

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult *status);
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, CUDART_VERSION, flags, 0, status);
}

EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn,
                                                unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, CUDART_VERSION, flags, 1, status);
}
