/*
 * The simulated device's CUDA driver (libcuda.so.1): the subset of the
 * driver API the tests use, with the real names, ABI versions and error
 * codes (cuda.h's macros map cuMemAlloc to cuMemAlloc_v2 and so on), and
 * cuGetProcAddress, through which the simulated runtime reaches it.
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define EXPORT __attribute__((visibility("default")))
#define CHECK_DEVICE                        \
    do {                                    \
        if (sim_no_device())                \
            return CUDA_ERROR_NO_DEVICE;    \
    } while (0)

static int current = 0; /* one device; contexts are the device's primary one */

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
    *ctx = (CUcontext)(uintptr_t)0x1000; /* an opaque handle */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    (void)ctx;
    CHECK_DEVICE;
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

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *ptr, size_t size, CUstream stream)
{
    (void)stream;
    return alloc(ptr, size, SIM_DEVICE);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *ptr, size_t size, CUmemoryPool pool,
                                        CUstream stream)
{
    (void)pool;
    (void)stream;
    return alloc(ptr, size, SIM_DEVICE);
}

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
    return kind == SIM_DEVICE && sim_free(p, SIM_MANAGED) == 0 ? CUDA_SUCCESS
                                                                : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemFree(CUdeviceptr ptr)
{
    return release((void *)(uintptr_t)ptr, SIM_DEVICE);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream)
{
    (void)stream;
    return cuMemFree(ptr);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    return release(p, SIM_HOST);
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    CHECK_DEVICE;
    sim_memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, sim_stream_of(NULL), true);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
    CHECK_DEVICE;
    sim_memcpy((void *)(uintptr_t)dst, src, n, sim_stream_of(NULL), true);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
    CHECK_DEVICE;
    sim_memcpy(dst, (const void *)(uintptr_t)src, n, sim_stream_of(NULL), true);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    CHECK_DEVICE;
    sim_memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, sim_stream_of(stream),
               false);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n)
{
    CHECK_DEVICE;
    sim_memset((void *)(uintptr_t)dst, value, n, sim_stream_of(NULL), true);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream)
{
    CHECK_DEVICE;
    sim_memset((void *)(uintptr_t)dst, value, n, sim_stream_of(stream), false);
    return CUDA_SUCCESS;
}

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

EXPORT CUresult cuStreamSynchronize(CUstream stream)
{
    CHECK_DEVICE;
    sim_stream_sync(sim_stream_of(stream));
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
    (void)flags;
    CHECK_DEVICE;
    if (!event)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_stream_wait_event(sim_stream_of(stream), (sim_event *)event);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
    (void)flags;
    CHECK_DEVICE;
    if (!event)
        return CUDA_ERROR_INVALID_VALUE;
    *event = (CUevent)sim_event_create();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent event, CUstream stream)
{
    CHECK_DEVICE;
    if (!event)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_event_record((sim_event *)event, sim_stream_of(stream));
    return CUDA_SUCCESS;
}

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

EXPORT CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data)
{
    CHECK_DEVICE;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    host_call *c = malloc(sizeof(*c));
    *c = (host_call){fn, data};
    sim_enqueue(sim_stream_of(stream), call_host, c);
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
    ENTRY(cuMemAllocAsync), ENTRY(cuMemAllocFromPoolAsync), ENTRY(cuMemAllocManaged),
    ENTRY(cuMemAllocHost), ENTRY(cuMemHostAlloc), ENTRY(cuMemFree), ENTRY(cuMemFreeAsync),
    ENTRY(cuMemFreeHost), ENTRY(cuMemcpy), ENTRY(cuMemcpyHtoD), ENTRY(cuMemcpyDtoH),
    ENTRY(cuMemcpyAsync), ENTRY(cuMemsetD8), ENTRY(cuMemsetD8Async), ENTRY(cuStreamCreate),
    ENTRY(cuStreamDestroy), ENTRY(cuStreamSynchronize), ENTRY(cuStreamWaitEvent),
    ENTRY(cuEventCreate), ENTRY(cuEventRecord), ENTRY(cuEventQuery), ENTRY(cuEventSynchronize),
    ENTRY(cuEventDestroy), ENTRY(cuLaunchHostFunc), ENTRY(cuGetProcAddress),
};
#undef ENTRY

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    (void)version;
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
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
