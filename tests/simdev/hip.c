/*
 * The simulated device's HIP runtime (libamdhip64.so.5): the subset of HIP
 * the tests use, with HIP's names and error codes, plus hipGetProcAddress,
 * hipLaunchHostFunc and the _spt twins of HIP 6, declared here (Debian's
 * headers are HIP 5).
 */
#include <hip/hip_runtime_api.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* HIP 6's per-thread-default-stream twins (name_spt, the same parameters)
 * are exported beside each function, as libamdhip64 exports them: stream 0
 * there is the calling thread's default stream. */
static sim_stream *stream_of(hipStream_t s, bool spt)
{
    return sim_stream_of(spt && !s ? (void *)hipStreamPerThread : (void *)s);
}

#define EXPORT __attribute__((visibility("default")))
#define CHECK_DEVICE                  \
    do {                              \
        if (sim_no_device())          \
            return hipErrorNoDevice;  \
    } while (0)

EXPORT hipError_t hipInit(unsigned int flags)
{
    (void)flags;
    CHECK_DEVICE;
    return hipSuccess;
}

EXPORT hipError_t hipGetDeviceCount(int *count)
{
    CHECK_DEVICE;
    if (!count)
        return hipErrorInvalidValue;
    *count = 1;
    return hipSuccess;
}

EXPORT hipError_t hipGetDevice(int *device)
{
    CHECK_DEVICE;
    if (!device)
        return hipErrorInvalidValue;
    *device = 0;
    return hipSuccess;
}

EXPORT hipError_t hipSetDevice(int device)
{
    CHECK_DEVICE;
    return device == 0 ? hipSuccess : hipErrorInvalidDevice;
}

EXPORT hipError_t hipDeviceSynchronize(void)
{
    CHECK_DEVICE;
    sim_device_sync();
    return hipSuccess;
}

EXPORT const char *hipGetErrorString(hipError_t error)
{
    return error == hipSuccess ? "no error" : "simulated device error";
}

static hipError_t alloc(void **ptr, size_t size, int kind)
{
    CHECK_DEVICE;
    if (!ptr)
        return hipErrorInvalidValue;
    *ptr = sim_alloc(size, kind);
    return *ptr ? hipSuccess : hipErrorOutOfMemory;
}

EXPORT hipError_t hipMalloc(void **ptr, size_t size) { return alloc(ptr, size, SIM_DEVICE); }

EXPORT hipError_t hipMallocAsync(void **ptr, size_t size, hipStream_t stream)
{
    (void)stream;
    return alloc(ptr, size, SIM_DEVICE);
}

EXPORT hipError_t hipMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    return alloc(ptr, size, SIM_MANAGED);
}

EXPORT hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    return alloc(ptr, size, SIM_HOST);
}

EXPORT hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    return alloc(ptr, size, SIM_DEVICE);
}

static hipError_t release(void *p, int kind)
{
    CHECK_DEVICE;
    if (!p)
        return hipSuccess;
    sim_log("free", p);
    if (sim_free(p, kind) == 0)
        return hipSuccess;
    /* hipFree also takes managed memory and external memory's buffers. */
    if (kind == SIM_DEVICE && (sim_free(p, SIM_MANAGED) == 0 || sim_extmem_free_buffer(p) == 0))
        return hipSuccess;
    return hipErrorInvalidValue;
}

EXPORT hipError_t hipFree(void *p) { return release(p, SIM_DEVICE); }

EXPORT hipError_t hipFreeAsync(void *p, hipStream_t stream)
{
    (void)stream;
    return release(p, SIM_DEVICE);
}

EXPORT hipError_t hipHostFree(void *p) { return release(p, SIM_HOST); }

static hipError_t memcpy_on(void *dst, const void *src, size_t n, hipMemcpyKind kind, bool spt)
{
    (void)kind;
    CHECK_DEVICE;
    sim_memcpy(dst, src, n, stream_of(NULL, spt), true);
    return hipSuccess;
}

EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind)
{
    return memcpy_on(dst, src, n, kind, false);
}

EXPORT hipError_t hipMemcpy_spt(void *dst, const void *src, size_t n, hipMemcpyKind kind)
{
    return memcpy_on(dst, src, n, kind, true);
}

static hipError_t memcpyAsync_on(void *dst, const void *src, size_t n, hipMemcpyKind kind,
                                 hipStream_t stream, bool spt)
{
    (void)kind;
    CHECK_DEVICE;
    sim_memcpy(dst, src, n, stream_of(stream, spt), false);
    return hipSuccess;
}

EXPORT hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind,
                                 hipStream_t stream)
{
    return memcpyAsync_on(dst, src, n, kind, stream, false);
}

EXPORT hipError_t hipMemcpyAsync_spt(void *dst, const void *src, size_t n, hipMemcpyKind kind,
                                     hipStream_t stream)
{
    return memcpyAsync_on(dst, src, n, kind, stream, true);
}

static hipError_t memset_on(void *dst, int value, size_t n, bool spt)
{
    CHECK_DEVICE;
    sim_memset(dst, value, n, stream_of(NULL, spt), true);
    return hipSuccess;
}

EXPORT hipError_t hipMemset(void *dst, int value, size_t n)
{
    return memset_on(dst, value, n, false);
}

EXPORT hipError_t hipMemset_spt(void *dst, int value, size_t n)
{
    return memset_on(dst, value, n, true);
}

static hipError_t memsetAsync_on(void *dst, int value, size_t n, hipStream_t stream, bool spt)
{
    CHECK_DEVICE;
    sim_memset(dst, value, n, stream_of(stream, spt), false);
    return hipSuccess;
}

EXPORT hipError_t hipMemsetAsync(void *dst, int value, size_t n, hipStream_t stream)
{
    return memsetAsync_on(dst, value, n, stream, false);
}

EXPORT hipError_t hipMemsetAsync_spt(void *dst, int value, size_t n, hipStream_t stream)
{
    return memsetAsync_on(dst, value, n, stream, true);
}

EXPORT hipError_t hipStreamCreate(hipStream_t *stream)
{
    CHECK_DEVICE;
    if (!stream)
        return hipErrorInvalidValue;
    *stream = (hipStream_t)sim_stream_create(0);
    return hipSuccess;
}

EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags)
{
    CHECK_DEVICE;
    if (!stream)
        return hipErrorInvalidValue;
    *stream = (hipStream_t)sim_stream_create(flags & hipStreamNonBlocking ? SIM_STREAM_NON_BLOCKING : 0);
    return hipSuccess;
}

EXPORT hipError_t hipStreamDestroy(hipStream_t stream)
{
    CHECK_DEVICE;
    sim_stream_destroy(sim_stream_of(stream));
    return hipSuccess;
}

static hipError_t streamSynchronize_on(hipStream_t stream, bool spt)
{
    CHECK_DEVICE;
    sim_stream_sync(stream_of(stream, spt));
    return hipSuccess;
}

EXPORT hipError_t hipStreamSynchronize(hipStream_t stream)
{
    return streamSynchronize_on(stream, false);
}

EXPORT hipError_t hipStreamSynchronize_spt(hipStream_t stream)
{
    return streamSynchronize_on(stream, true);
}

static hipError_t streamQuery_on(hipStream_t stream, bool spt)
{
    CHECK_DEVICE;
    sim_stream_sync(stream_of(stream, spt)); /* the simulation answers "done" by finishing */
    return hipSuccess;
}

EXPORT hipError_t hipStreamQuery(hipStream_t stream)
{
    return streamQuery_on(stream, false);
}

EXPORT hipError_t hipStreamQuery_spt(hipStream_t stream)
{
    return streamQuery_on(stream, true);
}

static hipError_t streamWaitEvent_on(hipStream_t stream, hipEvent_t event, unsigned int flags,
                                     bool spt)
{
    (void)flags;
    CHECK_DEVICE;
    if (!event)
        return hipErrorInvalidHandle;
    sim_stream_wait_event(stream_of(stream, spt), (sim_event *)event);
    return hipSuccess;
}

EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
    return streamWaitEvent_on(stream, event, flags, false);
}

EXPORT hipError_t hipStreamWaitEvent_spt(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
    return streamWaitEvent_on(stream, event, flags, true);
}

EXPORT hipError_t hipEventCreate(hipEvent_t *event)
{
    CHECK_DEVICE;
    if (!event)
        return hipErrorInvalidValue;
    *event = (hipEvent_t)sim_event_create();
    return hipSuccess;
}

EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags)
{
    (void)flags;
    return hipEventCreate(event);
}

static hipError_t eventRecord_on(hipEvent_t event, hipStream_t stream, bool spt)
{
    CHECK_DEVICE;
    if (!event)
        return hipErrorInvalidHandle;
    sim_event_record((sim_event *)event, stream_of(stream, spt));
    return hipSuccess;
}

EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)
{
    return eventRecord_on(event, stream, false);
}

EXPORT hipError_t hipEventRecord_spt(hipEvent_t event, hipStream_t stream)
{
    return eventRecord_on(event, stream, true);
}

EXPORT hipError_t hipEventQuery(hipEvent_t event)
{
    CHECK_DEVICE;
    return sim_event_done((sim_event *)event) ? hipSuccess : hipErrorNotReady;
}

EXPORT hipError_t hipEventSynchronize(hipEvent_t event)
{
    CHECK_DEVICE;
    sim_event_sync((sim_event *)event);
    return hipSuccess;
}

EXPORT hipError_t hipEventDestroy(hipEvent_t event)
{
    CHECK_DEVICE;
    sim_event_destroy((sim_event *)event);
    return hipSuccess;
}

typedef void (*host_fn)(void *);
typedef struct {
    host_fn fn;
    void *data;
} host_call;

static void call_host(void *arg)
{
    host_call *c = arg;
    c->fn(c->data);
    free(c);
}

static hipError_t launchHostFunc_on(hipStream_t stream, host_fn fn, void *data, bool spt)
{
    CHECK_DEVICE;
    if (!fn)
        return hipErrorInvalidValue;
    host_call *c = malloc(sizeof(*c));
    *c = (host_call){fn, data};
    sim_enqueue(stream_of(stream, spt), call_host, c);
    return hipSuccess;
}

EXPORT hipError_t hipLaunchHostFunc(hipStream_t stream, host_fn fn, void *data)
{
    return launchHostFunc_on(stream, fn, data, false);
}

EXPORT hipError_t hipLaunchHostFunc_spt(hipStream_t stream, host_fn fn, void *data)
{
    return launchHostFunc_on(stream, fn, data, true);
}

typedef struct {
    hipStreamCallback_t fn;
    hipStream_t stream;
    void *data;
} callback_call;

static void call_stream_callback(void *arg)
{
    callback_call *c = arg;
    c->fn(c->stream, hipSuccess, c->data);
    free(c);
}

/* As HIP documents it: flags must be 0. */
static hipError_t streamAddCallback_on(hipStream_t stream, hipStreamCallback_t fn, void *data,
                                       unsigned int flags, bool spt)
{
    CHECK_DEVICE;
    if (!fn || flags)
        return hipErrorInvalidValue;
    callback_call *c = malloc(sizeof(*c));
    *c = (callback_call){fn, stream, data};
    sim_enqueue(stream_of(stream, spt), call_stream_callback, c);
    return hipSuccess;
}

EXPORT hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t fn, void *data,
                                       unsigned int flags)
{
    return streamAddCallback_on(stream, fn, data, flags, false);
}

EXPORT hipError_t hipStreamAddCallback_spt(hipStream_t stream, hipStreamCallback_t fn,
                                           void *data, unsigned int flags)
{
    return streamAddCallback_on(stream, fn, data, flags, true);
}

/* ---- external memory: an opaque descriptor (Vulkan's export) mapped, as
 * the simulated CUDA driver does ------------------------------------------------ */

EXPORT hipError_t hipImportExternalMemory(hipExternalMemory_t *out,
                                          const hipExternalMemoryHandleDesc *desc)
{
    CHECK_DEVICE;
    if (!out || !desc)
        return hipErrorInvalidValue;
    if (desc->type != hipExternalMemoryHandleTypeOpaqueFd)
        return hipErrorNotSupported;
    sim_extmem *m;
    int e = sim_extmem_import(desc->handle.fd, desc->size, &m);
    if (e == 0)
        *out = m;
    return e == 0 ? hipSuccess : e == EBADF ? hipErrorInvalidHandle : hipErrorInvalidValue;
}

EXPORT hipError_t hipExternalMemoryGetMappedBuffer(void **ptr, hipExternalMemory_t mem,
                                                   const hipExternalMemoryBufferDesc *desc)
{
    CHECK_DEVICE;
    if (!ptr || !mem || !desc)
        return hipErrorInvalidValue;
    return sim_extmem_map(mem, desc->offset, desc->size, ptr) == 0 ? hipSuccess
                                                                   : hipErrorInvalidValue;
}

EXPORT hipError_t hipDestroyExternalMemory(hipExternalMemory_t mem)
{
    CHECK_DEVICE;
    return mem && sim_extmem_destroy(mem) == 0 ? hipSuccess : hipErrorInvalidHandle;
}

/* ---- external semaphores: engine events, as the simulated CUDA driver's
 * (sim_semaphore_import) ----------------------------------------------------------- */

/* ROCm 6's hipExternalSemaphoreHandleTypeTimelineSemaphoreFd, which the HIP
 * 5 headers built against here do not name. */
#define SIM_HIP_TIMELINE_SEMAPHORE_FD 9

EXPORT hipError_t hipImportExternalSemaphore(hipExternalSemaphore_t *out,
                                             const hipExternalSemaphoreHandleDesc *desc)
{
    CHECK_DEVICE;
    if (!out || !desc)
        return hipErrorInvalidValue;
    bool timeline = (int)desc->type == SIM_HIP_TIMELINE_SEMAPHORE_FD;
    if (desc->type != hipExternalSemaphoreHandleTypeOpaqueFd && !timeline)
        return hipErrorNotSupported;
    sim_semaphore *e;
    if (sim_semaphore_import(desc->handle.fd, timeline, &e) != 0)
        return hipErrorInvalidHandle;
    *out = e;
    return hipSuccess;
}

static hipError_t semaphores(const hipExternalSemaphore_t *sems, const void *params,
                             size_t stride, unsigned n, hipStream_t stream, bool signal)
{
    CHECK_DEVICE;
    int e = sim_semaphores((void *const *)sems, params, stride, n, stream_of(stream, false),
                           signal);
    return e == 0 ? hipSuccess : e == EBADF ? hipErrorInvalidHandle : hipErrorInvalidValue;
}

EXPORT hipError_t hipSignalExternalSemaphoresAsync(const hipExternalSemaphore_t *extSemArray,
                                                   const hipExternalSemaphoreSignalParams *paramsArray,
                                                   unsigned int numExtSems, hipStream_t stream)
{
    return semaphores(extSemArray, paramsArray, sizeof(*paramsArray), numExtSems, stream, true);
}

EXPORT hipError_t hipWaitExternalSemaphoresAsync(const hipExternalSemaphore_t *extSemArray,
                                                 const hipExternalSemaphoreWaitParams *paramsArray,
                                                 unsigned int numExtSems, hipStream_t stream)
{
    return semaphores(extSemArray, paramsArray, sizeof(*paramsArray), numExtSems, stream, false);
}

EXPORT hipError_t hipDestroyExternalSemaphore(hipExternalSemaphore_t extSem)
{
    CHECK_DEVICE;
    if (!extSem)
        return hipErrorInvalidHandle;
    sim_semaphore_destroy(extSem);
    return hipSuccess;
}

#define ENTRY(name) {#name, (void *)name}
static const struct {
    const char *name;
    void *fn;
} entries[] = {
    ENTRY(hipMalloc),      ENTRY(hipMallocAsync), ENTRY(hipMallocManaged), ENTRY(hipHostMalloc),
    ENTRY(hipExtMallocWithFlags), ENTRY(hipFree), ENTRY(hipFreeAsync),     ENTRY(hipHostFree),
    ENTRY(hipMemcpy),      ENTRY(hipMemset),      ENTRY(hipGetDevice),
};
#undef ENTRY

EXPORT hipError_t hipGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags,
                                    void *status);
hipError_t hipGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags,
                             void *status)
{
    (void)version;
    (void)flags;
    (void)status;
    if (!symbol || !pfn)
        return hipErrorInvalidValue;
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        if (!strcmp(entries[i].name, symbol)) {
            *pfn = entries[i].fn;
            return hipSuccess;
        }
    *pfn = NULL;
    return hipErrorNotFound;
}
