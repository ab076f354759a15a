/*
 * The simulated device's CUDA driver (libcuda.so.1): the subset of the
 * driver API the tests use, with the real names, ABI versions and error
 * codes (cuda.h's macros map cuMemAlloc to cuMemAlloc_v2 and so on), and
 * cuGetProcAddress, through which the simulated runtime reaches it.
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

#define EXPORT __attribute__((visibility("default")))
#define CHECK_DEVICE                        \
    do {                                    \
        if (sim_no_device())                \
            return CUDA_ERROR_NO_DEVICE;    \
    } while (0)

/* Code built with --default-stream per-thread calls the _ptsz (stream) and
 * _ptds (synchronous) twins, and cuGetProcAddress hands them out with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.  They are separate exports,
 * as the real driver's: each twin and its legacy function are one static
 * core, told which it is by `pt` (never a call to another export).  Stream 0
 * in a per-thread call is the calling thread's default stream. */
static sim_stream *stream_of(CUstream s, bool pt)
{
    return sim_stream_of(pt && !s ? (void *)CU_STREAM_PER_THREAD : (void *)s);
}
/* The legacy function `name` and its twin `twin`, both calling `core` with
 * the arguments that follow it and `pt` last. */
#define TWINS(name, twin, params, core, ...)                         \
    EXPORT CUresult name params { return core(__VA_ARGS__, false); } \
    EXPORT CUresult twin params { return core(__VA_ARGS__, true); }

static int current = 0; /* one device; contexts are the device's primary one */
#define PRIMARY_CONTEXT ((CUcontext)(uintptr_t)0x1000)

EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    CHECK_DEVICE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    CHECK_DEVICE;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CHECK_DEVICE;
    if (!device || ordinal != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CHECK_DEVICE;
    if (!ctx || dev != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = PRIMARY_CONTEXT; /* an opaque handle */
    return CUDA_SUCCESS;
}

/* The context current on this thread: the older context calls need one, as
 * on a GPU, and CUDA 13's runtime makes none current (it names its context). */
static __thread CUcontext current_ctx;

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CHECK_DEVICE;
    if (ctx && ctx != PRIMARY_CONTEXT)
        return CUDA_ERROR_INVALID_CONTEXT;
    current_ctx = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    CHECK_DEVICE;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = current;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    CHECK_DEVICE;
    if (!current_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_device_sync();
    return CUDA_SUCCESS;
}

/* CUDA 13's synchronize of a given context (NULL: the current one), which
 * cuGetProcAddress hands out for "cuCtxSynchronize" from version 13000 on,
 * as the real driver does: a wrapper that called it as the old one would
 * pass garbage for the context. */
EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    CHECK_DEVICE;
    if (!ctx)
        ctx = current_ctx;
    if (ctx != PRIMARY_CONTEXT)
        return ctx ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_ERROR_INVALID_CONTEXT;
    sim_device_sync();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = error == CUDA_SUCCESS ? "no error" : "simulated device error";
    return CUDA_SUCCESS;
}

/* ---- memory ------------------------------------------------------------------- */

static CUresult alloc(CUdeviceptr *ptr, size_t size, int kind)
{
    CHECK_DEVICE;
    if (!ptr)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = sim_alloc(size, kind);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc(CUdeviceptr *ptr, size_t size)
{
    return alloc(ptr, size, SIM_DEVICE);
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr *ptr, size_t *pitch, size_t width, size_t height,
                                unsigned int element)
{
    (void)element;
    if (!pitch)
        return CUDA_ERROR_INVALID_VALUE;
    size_t row = (width + 255) / 256 * 256;
    CUresult r = alloc(ptr, row * height, SIM_DEVICE);
    if (r == CUDA_SUCCESS)
        *pitch = row;
    return r;
}

static CUresult alloc_async(CUdeviceptr *ptr, size_t size, CUstream stream, bool pt)
{
    (void)stream, (void)pt;
    return alloc(ptr, size, SIM_DEVICE);
}
TWINS(cuMemAllocAsync, cuMemAllocAsync_ptsz, (CUdeviceptr *ptr, size_t size, CUstream stream),
      alloc_async, ptr, size, stream)

/* The device's one memory pool, an opaque handle. */
#define DEFAULT_POOL ((CUmemoryPool)(uintptr_t)0x2000)

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CHECK_DEVICE;
    if (!pool || dev != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *pool = DEFAULT_POOL;
    return CUDA_SUCCESS;
}

/* A pool is required, as the real driver requires it (a NULL one is an
 * invalid value there). */
static CUresult alloc_from_pool(CUdeviceptr *ptr, size_t size, CUmemoryPool pool,
                                CUstream stream, bool pt)
{
    (void)stream, (void)pt;
    if (pool != DEFAULT_POOL)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc(ptr, size, SIM_DEVICE);
}
TWINS(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz,
      (CUdeviceptr *ptr, size_t size, CUmemoryPool pool, CUstream stream), alloc_from_pool, ptr,
      size, pool, stream)

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *ptr, size_t size, unsigned int flags)
{
    (void)flags;
    return alloc(ptr, size, SIM_MANAGED);
}

EXPORT CUresult cuMemAllocHost(void **ptr, size_t size)
{
    CHECK_DEVICE;
    if (!ptr)
        return CUDA_ERROR_INVALID_VALUE;
    *ptr = sim_alloc(size, SIM_HOST);
    return *ptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    return cuMemAllocHost(ptr, size);
}

/* Each free that reaches the device is logged once (SIMDEV_LOG). */
static CUresult release(void *p, int kind)
{
    CHECK_DEVICE;
    if (!p)
        return CUDA_SUCCESS;
    sim_log("free", p);
    if (sim_free(p, kind) == 0)
        return CUDA_SUCCESS;
    /* cuMemFree also takes managed memory and external memory's buffers. */
    if (kind == SIM_DEVICE && (sim_free(p, SIM_MANAGED) == 0 || sim_extmem_free_buffer(p) == 0))
        return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemFree(CUdeviceptr ptr)
{
    return release((void *)(uintptr_t)ptr, SIM_DEVICE);
}

static CUresult free_async(CUdeviceptr ptr, CUstream stream, bool pt)
{
    (void)stream, (void)pt;
    return release((void *)(uintptr_t)ptr, SIM_DEVICE);
}
TWINS(cuMemFreeAsync, cuMemFreeAsync_ptsz, (CUdeviceptr ptr, CUstream stream), free_async, ptr,
      stream)

EXPORT CUresult cuMemFreeHost(void *p)
{
    return release(p, SIM_HOST);
}

/* A copy or a fill on `stream`; `sync`: the call returns when it is done. */
static CUresult copy(void *dst, const void *src, size_t n, CUstream stream, bool sync, bool pt)
{
    CHECK_DEVICE;
    sim_memcpy(dst, src, n, stream_of(stream, pt), sync);
    return CUDA_SUCCESS;
}
#define DEV(p) ((void *)(uintptr_t)(p))
TWINS(cuMemcpy, cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), copy, DEV(dst),
      DEV(src), n, NULL, true)
TWINS(cuMemcpyHtoD, cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void *src, size_t n), copy,
      DEV(dst), src, n, NULL, true)
TWINS(cuMemcpyDtoH, cuMemcpyDtoH_v2_ptds, (void *dst, CUdeviceptr src, size_t n), copy, dst,
      DEV(src), n, NULL, true)
TWINS(cuMemcpyAsync, cuMemcpyAsync_ptsz,
      (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream), copy, DEV(dst), DEV(src), n,
      stream, false)
TWINS(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2_ptsz,
      (void *dst, CUdeviceptr src, size_t n, CUstream stream), copy, dst, DEV(src), n, stream,
      false)

static CUresult fill(void *dst, unsigned char value, size_t n, CUstream stream, bool sync,
                     bool pt)
{
    CHECK_DEVICE;
    sim_memset(dst, value, n, stream_of(stream, pt), sync);
    return CUDA_SUCCESS;
}
TWINS(cuMemsetD8, cuMemsetD8_v2_ptds, (CUdeviceptr dst, unsigned char value, size_t n), fill,
      DEV(dst), value, n, NULL, true)
TWINS(cuMemsetD8Async, cuMemsetD8Async_ptsz,
      (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream), fill, DEV(dst), value, n,
      stream, false)

/* ---- streams and events ---------------------------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
    CHECK_DEVICE;
    if (!stream)
        return CUDA_ERROR_INVALID_VALUE;
    *stream = (CUstream)sim_stream_create(flags & CU_STREAM_NON_BLOCKING ? SIM_STREAM_NON_BLOCKING : 0);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy(CUstream stream)
{
    CHECK_DEVICE;
    sim_stream_destroy(sim_stream_of(stream));
    return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream stream, bool pt)
{
    CHECK_DEVICE;
    sim_stream_sync(stream_of(stream, pt));
    return CUDA_SUCCESS;
}
TWINS(cuStreamSynchronize, cuStreamSynchronize_ptsz, (CUstream stream), stream_sync, stream)

static CUresult wait_event(CUstream stream, CUevent event, unsigned int flags, bool pt)
{
    (void)flags;
    CHECK_DEVICE;
    if (!event)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_stream_wait_event(stream_of(stream, pt), (sim_event *)event);
    return CUDA_SUCCESS;
}
TWINS(cuStreamWaitEvent, cuStreamWaitEvent_ptsz,
      (CUstream stream, CUevent event, unsigned int flags), wait_event, stream, event, flags)

EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
    (void)flags;
    CHECK_DEVICE;
    if (!event)
        return CUDA_ERROR_INVALID_VALUE;
    *event = (CUevent)sim_event_create();
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent event, CUstream stream, bool pt)
{
    CHECK_DEVICE;
    if (!event)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_event_record((sim_event *)event, stream_of(stream, pt));
    return CUDA_SUCCESS;
}
TWINS(cuEventRecord, cuEventRecord_ptsz, (CUevent event, CUstream stream), event_record, event,
      stream)

EXPORT CUresult cuEventQuery(CUevent event)
{
    CHECK_DEVICE;
    return sim_event_done((sim_event *)event) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent event)
{
    CHECK_DEVICE;
    sim_event_sync((sim_event *)event);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy(CUevent event)
{
    CHECK_DEVICE;
    sim_event_destroy((sim_event *)event);
    return CUDA_SUCCESS;
}

typedef struct {
    CUhostFn fn;
    void *data;
} host_call;

static void call_host(void *arg)
{
    host_call *c = arg;
    c->fn(c->data);
    free(c);
}

/* The older form: the callback also gets its stream and a status. */
typedef struct {
    CUstreamCallback fn;
    CUstream stream;
    void *data;
} stream_call;

static void call_stream_callback(void *arg)
{
    stream_call *c = arg;
    c->fn(c->stream, CUDA_SUCCESS, c->data);
    free(c);
}

/* The callback is told the stream as the program named it (0 stays 0). */
static CUresult add_callback(CUstream stream, CUstreamCallback fn, void *data, unsigned int flags,
                             bool pt)
{
    CHECK_DEVICE;
    if (!fn || flags)
        return CUDA_ERROR_INVALID_VALUE; /* flags: reserved, 0 */
    stream_call *c = malloc(sizeof(*c));
    *c = (stream_call){fn, stream, data};
    sim_enqueue(stream_of(stream, pt), call_stream_callback, c);
    return CUDA_SUCCESS;
}
TWINS(cuStreamAddCallback, cuStreamAddCallback_ptsz,
      (CUstream stream, CUstreamCallback fn, void *data, unsigned int flags), add_callback, stream,
      fn, data, flags)

static CUresult host_func(CUstream stream, CUhostFn fn, void *data, bool pt)
{
    CHECK_DEVICE;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    host_call *c = malloc(sizeof(*c));
    *c = (host_call){fn, data};
    sim_enqueue(stream_of(stream, pt), call_host, c);
    return CUDA_SUCCESS;
}
TWINS(cuLaunchHostFunc, cuLaunchHostFunc_ptsz, (CUstream stream, CUhostFn fn, void *data),
      host_func, stream, fn, data)

/* ---- libraries and launches --------------------------------------------------------- */

/* A library keeps its code, PTX text: its kernels are the names after
 * ".entry".  A kernel computes nothing here; its launch is an operation in
 * its stream's order like any other (what the shim models). */
struct CUkern_st {
    struct CUkern_st *next;
    char name[64];
};
struct CUlib_st {
    char *code;
    struct CUkern_st *kernels;
};

EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    CHECK_DEVICE;
    if (!library || !code)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUlib_st *l = calloc(1, sizeof(*l));
    if (!l || !(l->code = strdup(code))) {
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *library = l;
    return CUDA_SUCCESS;
}

/* Whether the PTX text declares the kernel `name` (".entry name(" or a space). */
static int declares(const char *code, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(code, ".entry "); p; p = strstr(p + 1, ".entry ")) {
        const char *q = p + strlen(".entry ");
        while (*q == ' ')
            q++;
        if (!strncmp(q, name, n) && (q[n] == '(' || q[n] == ' ' || q[n] == '\n'))
            return 1;
    }
    return 0;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name)
{
    CHECK_DEVICE;
    if (!kernel || !library || !name || strlen(name) >= sizeof((*kernel)->name))
        return CUDA_ERROR_INVALID_VALUE;
    if (!declares(library->code, name))
        return CUDA_ERROR_NOT_FOUND;
    struct CUkern_st *k = calloc(1, sizeof(*k));
    if (!k)
        return CUDA_ERROR_OUT_OF_MEMORY;
    strcpy(k->name, name);
    k->next = library->kernels;
    library->kernels = k;
    *kernel = k;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    CHECK_DEVICE;
    if (!library)
        return CUDA_ERROR_INVALID_HANDLE;
    for (struct CUkern_st *k = library->kernels, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    free(library->code);
    free(library);
    return CUDA_SUCCESS;
}

static void run_kernel(void *arg)
{
    (void)arg;
}

/* A CUkernel passed as the function, as CUDA allows. */
static CUresult launch(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream stream,
                       void **kernelParams, void **extra, bool pt)
{
    (void)sharedMemBytes, (void)kernelParams, (void)extra; /* nothing the simulation uses */
    CHECK_DEVICE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
        return CUDA_ERROR_INVALID_VALUE;
    sim_enqueue(stream_of(stream, pt), run_kernel, NULL);
    return CUDA_SUCCESS;
}
TWINS(cuLaunchKernel, cuLaunchKernel_ptsz,
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
       unsigned int sharedMemBytes, CUstream stream, void **kernelParams, void **extra),
      launch, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
      stream, kernelParams, extra)

/* ---- external memory and semaphores ------------------------------------------------ */

/* Only opaque file descriptors, the Linux Vulkan export (lavapipe's is a
 * memfd); others are Windows, Direct3D or NvSci handles. */
EXPORT CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
                                       const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc)
{
    CHECK_DEVICE;
    if (!extMem_out || !memHandleDesc)
        return CUDA_ERROR_INVALID_VALUE;
    if (memHandleDesc->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (memHandleDesc->flags & ~(unsigned)CUDA_EXTERNAL_MEMORY_DEDICATED)
        return CUDA_ERROR_INVALID_VALUE;
    sim_extmem *m;
    switch (sim_extmem_import(memHandleDesc->handle.fd, memHandleDesc->size, &m)) {
    case 0:
        *extMem_out = (CUexternalMemory)m;
        return CUDA_SUCCESS;
    case EBADF: return CUDA_ERROR_INVALID_HANDLE;
    case EINVAL: return CUDA_ERROR_INVALID_VALUE;
    case ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
    default: return CUDA_ERROR_OPERATING_SYSTEM;
    }
}

/* The buffer is the mapping plus the offset; cuMemFree releases it. */
EXPORT CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr, CUexternalMemory extMem,
                                                const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
    CHECK_DEVICE;
    if (!devPtr || !bufferDesc || bufferDesc->flags)
        return CUDA_ERROR_INVALID_VALUE;
    void *p;
    switch (sim_extmem_map((sim_extmem *)extMem, bufferDesc->offset, bufferDesc->size, &p)) {
    case 0:
        *devPtr = (CUdeviceptr)(uintptr_t)p;
        return CUDA_SUCCESS;
    case EBADF: return CUDA_ERROR_INVALID_HANDLE;
    case ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuDestroyExternalMemory(CUexternalMemory extMem)
{
    CHECK_DEVICE;
    return sim_extmem_destroy((sim_extmem *)extMem) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A semaphore is an engine event (sim_semaphore_import says how it orders),
 * of a binary semaphore or a timeline one (Vulkan's, either as an opaque
 * descriptor). */
EXPORT CUresult cuImportExternalSemaphore(CUexternalSemaphore *extSem_out,
                                          const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *semHandleDesc)
{
    CHECK_DEVICE;
    if (!extSem_out || !semHandleDesc)
        return CUDA_ERROR_INVALID_VALUE;
    bool timeline = semHandleDesc->type == CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
    if (semHandleDesc->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD && !timeline)
        return CUDA_ERROR_NOT_SUPPORTED;
    sim_semaphore *e;
    if (sim_semaphore_import(semHandleDesc->handle.fd, timeline, &e) != 0)
        return CUDA_ERROR_INVALID_HANDLE;
    *extSem_out = (CUexternalSemaphore)e;
    return CUDA_SUCCESS;
}

/* Signals (or waits for, on `stream`) each semaphore.  Refused: no arrays,
 * or a null semaphore. */
static CUresult semaphores(const CUexternalSemaphore *sems, const void *params, size_t stride,
                           unsigned n, CUstream stream, bool signal, bool pt)
{
    CHECK_DEVICE;
    int e = sim_semaphores((void *const *)sems, params, stride, n, stream_of(stream, pt), signal);
    return e == 0 ? CUDA_SUCCESS : e == EBADF ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

static CUresult signal_sems(const CUexternalSemaphore *sems,
                            const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *params, unsigned n,
                            CUstream stream, bool pt)
{
    return semaphores(sems, params, sizeof(*params), n, stream, true, pt);
}
TWINS(cuSignalExternalSemaphoresAsync, cuSignalExternalSemaphoresAsync_ptsz,
      (const CUexternalSemaphore *extSemArray,
       const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems,
       CUstream stream),
      signal_sems, extSemArray, paramsArray, numExtSems, stream)

static CUresult wait_sems(const CUexternalSemaphore *sems,
                          const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *params, unsigned n,
                          CUstream stream, bool pt)
{
    return semaphores(sems, params, sizeof(*params), n, stream, false, pt);
}
TWINS(cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync_ptsz,
      (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
       unsigned int numExtSems, CUstream stream),
      wait_sems, extSemArray, paramsArray, numExtSems, stream)

EXPORT CUresult cuDestroyExternalSemaphore(CUexternalSemaphore extSem)
{
    CHECK_DEVICE;
    if (!extSem)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_semaphore_destroy((sim_semaphore *)extSem);
    return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress ------------------------------------------------------------- */

/* Requested base names → this driver's functions (cuda.h's macros turn each
 * name below into its current ABI version). */
#define ENTRY(name) {#name, (void *)name}
static const struct {
    const char *name;
    void *fn;
} entries[] = {
    ENTRY(cuInit), ENTRY(cuDriverGetVersion), ENTRY(cuDeviceGet), ENTRY(cuDeviceGetCount),
    ENTRY(cuDevicePrimaryCtxRetain), ENTRY(cuCtxSetCurrent), ENTRY(cuCtxGetDevice),
    ENTRY(cuCtxSynchronize), ENTRY(cuGetErrorString), ENTRY(cuMemAlloc), ENTRY(cuMemAllocPitch),
    ENTRY(cuMemAllocAsync), ENTRY(cuMemAllocFromPoolAsync), ENTRY(cuDeviceGetDefaultMemPool),
    ENTRY(cuMemAllocManaged), ENTRY(cuMemAllocHost), ENTRY(cuMemHostAlloc), ENTRY(cuMemFree),
    ENTRY(cuMemFreeAsync), ENTRY(cuMemFreeHost), ENTRY(cuMemcpy), ENTRY(cuMemcpyHtoD),
    ENTRY(cuMemcpyDtoH), ENTRY(cuMemcpyAsync), ENTRY(cuMemcpyDtoHAsync), ENTRY(cuMemsetD8),
    ENTRY(cuMemsetD8Async), ENTRY(cuStreamCreate), ENTRY(cuStreamDestroy),
    ENTRY(cuStreamSynchronize), ENTRY(cuStreamWaitEvent), ENTRY(cuEventCreate),
    ENTRY(cuEventRecord), ENTRY(cuEventQuery), ENTRY(cuEventSynchronize), ENTRY(cuEventDestroy),
    ENTRY(cuLaunchHostFunc), ENTRY(cuStreamAddCallback), ENTRY(cuLibraryLoadData),
    ENTRY(cuLibraryGetKernel), ENTRY(cuLibraryUnload), ENTRY(cuLaunchKernel),
    ENTRY(cuImportExternalMemory),
    ENTRY(cuExternalMemoryGetMappedBuffer), ENTRY(cuDestroyExternalMemory),
    ENTRY(cuImportExternalSemaphore), ENTRY(cuSignalExternalSemaphoresAsync),
    ENTRY(cuWaitExternalSemaphoresAsync), ENTRY(cuDestroyExternalSemaphore),
    ENTRY(cuGetProcAddress),
};
/* With CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: the per-thread ones. */
#define PT_ENTRY(name, fn) {#name, (void *)fn}
static const struct {
    const char *name;
    void *fn;
} per_thread_entries[] = {
    PT_ENTRY(cuMemAllocAsync, cuMemAllocAsync_ptsz),
    PT_ENTRY(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
    PT_ENTRY(cuMemFreeAsync, cuMemFreeAsync_ptsz), PT_ENTRY(cuMemcpy, cuMemcpy_ptds),
    PT_ENTRY(cuMemcpyHtoD, cuMemcpyHtoD_v2_ptds), PT_ENTRY(cuMemcpyDtoH, cuMemcpyDtoH_v2_ptds),
    PT_ENTRY(cuMemcpyAsync, cuMemcpyAsync_ptsz),
    PT_ENTRY(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2_ptsz),
    PT_ENTRY(cuMemsetD8, cuMemsetD8_v2_ptds), PT_ENTRY(cuMemsetD8Async, cuMemsetD8Async_ptsz),
    PT_ENTRY(cuStreamSynchronize, cuStreamSynchronize_ptsz),
    PT_ENTRY(cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    PT_ENTRY(cuEventRecord, cuEventRecord_ptsz),
    PT_ENTRY(cuStreamAddCallback, cuStreamAddCallback_ptsz),
    PT_ENTRY(cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
    PT_ENTRY(cuLaunchKernel, cuLaunchKernel_ptsz),
    PT_ENTRY(cuSignalExternalSemaphoresAsync, cuSignalExternalSemaphoresAsync_ptsz),
    PT_ENTRY(cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync_ptsz),
};
#undef ENTRY
#undef PT_ENTRY

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        for (size_t i = 0; i < sizeof(per_thread_entries) / sizeof(per_thread_entries[0]); i++)
            if (!strcmp(per_thread_entries[i].name, symbol)) {
                *pfn = per_thread_entries[i].fn;
                if (status)
                    *status = CU_GET_PROC_ADDRESS_SUCCESS;
                return CUDA_SUCCESS;
            }
    if (!strcmp(symbol, "cuCtxSynchronize") && version >= 13000) {
        *pfn = (void *)cuCtxSynchronize_v2;
        if (status)
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        if (!strcmp(entries[i].name, symbol)) {
            *pfn = entries[i].fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

/* The pre-12.0 entry point, without the status argument. */
#undef cuGetProcAddress
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
