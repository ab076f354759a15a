/*
 * hip_sync.c — what the stream model (shim/sync.c) and copy accounting
 * (shim/copies.c) need of HIP.
 *
 * Wraps, through every module's GOT, dlsym and hipGetProcAddress:
 *   hipStreamCreate, hipStreamCreateWithFlags, hipStreamCreateWithPriority,
 *   hipStreamDestroy, hipEventRecord, hipEventDestroy, hipStreamWaitEvent,
 *   hipStreamSynchronize, hipStreamQuery, hipEventSynchronize, hipEventQuery,
 *   hipDeviceSynchronize, hipMemcpy, hipMemcpyAsync, hipMemcpyHtoD,
 *   hipMemcpyDtoH, hipMemcpyDtoD (and their Async forms), hipMemcpyPeer,
 *   hipMemcpyPeerAsync, hipMemset, hipMemsetAsync, hipLaunchKernel,
 *   hipModuleLaunchKernel, hipLaunchHostFunc.
 * Leaves out: 2D/3D copies, graphs.
 *   Launch buffers are unknown: a launch counts as the calling module's use
 *   of its imports.  Same shape as cuda_runtime_sync.c.
 */
#include <hip/hip_runtime_api.h>

#include "internal.h"

#define FAMILY DS_FAMILY_HIP

typedef void (*hip_host_fn)(void *);
typedef hipError_t launch_host_func(hipStream_t, hip_host_fn, void *); /* HIP 6; not in 5's headers */

static __typeof__(hipStreamCreate) *real_hipStreamCreate;
static __typeof__(hipStreamCreateWithFlags) *real_hipStreamCreateWithFlags;
static __typeof__(hipStreamCreateWithPriority) *real_hipStreamCreateWithPriority;
static __typeof__(hipStreamDestroy) *real_hipStreamDestroy;
static __typeof__(hipEventRecord) *real_hipEventRecord;
static __typeof__(hipEventDestroy) *real_hipEventDestroy;
static __typeof__(hipStreamWaitEvent) *real_hipStreamWaitEvent;
static __typeof__(hipStreamSynchronize) *real_hipStreamSynchronize;
static __typeof__(hipStreamQuery) *real_hipStreamQuery;
static __typeof__(hipEventSynchronize) *real_hipEventSynchronize;
static __typeof__(hipEventQuery) *real_hipEventQuery;
static __typeof__(hipDeviceSynchronize) *real_hipDeviceSynchronize;
static __typeof__(hipMemcpy) *real_hipMemcpy;
static __typeof__(hipMemcpyAsync) *real_hipMemcpyAsync;
static __typeof__(hipMemcpyHtoD) *real_hipMemcpyHtoD;
static __typeof__(hipMemcpyDtoH) *real_hipMemcpyDtoH;
static __typeof__(hipMemcpyDtoD) *real_hipMemcpyDtoD;
static __typeof__(hipMemcpyHtoDAsync) *real_hipMemcpyHtoDAsync;
static __typeof__(hipMemcpyDtoHAsync) *real_hipMemcpyDtoHAsync;
static __typeof__(hipMemcpyDtoDAsync) *real_hipMemcpyDtoDAsync;
static __typeof__(hipMemcpyPeer) *real_hipMemcpyPeer;
static __typeof__(hipMemcpyPeerAsync) *real_hipMemcpyPeerAsync;
static __typeof__(hipMemset) *real_hipMemset;
static __typeof__(hipMemsetAsync) *real_hipMemsetAsync;
static __typeof__(hipLaunchKernel) *real_hipLaunchKernel;
static __typeof__(hipModuleLaunchKernel) *real_hipModuleLaunchKernel;
static launch_host_func *real_hipLaunchHostFunc;

#define ENTER                                          \
    const void *caller = __builtin_return_address(0); \
    bool outer = ds_api_enter()
#define LEAVE ds_api_leave()
#define REAL(name) DS_REAL(wrap_##name, real_##name, #name)
#define PTR(p) ((uintptr_t)(p))

static hipError_t created(hipError_t r, hipStream_t *stream, bool outer, unsigned int flags)
{
    hipStream_t s = NULL;
    if (outer && r == hipSuccess && ds_safe_read(&s, stream, sizeof(s)) == sizeof(s))
        ds_sync_stream_created(FAMILY, PTR(s), flags & hipStreamNonBlocking);
    return r;
}

static hipError_t wrap_hipStreamCreate(hipStream_t *stream)
{
    ENTER;
    (void)caller;
    hipError_t r = created(REAL(hipStreamCreate)(stream), stream, outer, 0);
    LEAVE;
    return r;
}

static hipError_t wrap_hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags)
{
    ENTER;
    (void)caller;
    hipError_t r = created(REAL(hipStreamCreateWithFlags)(stream, flags), stream, outer, flags);
    LEAVE;
    return r;
}

static hipError_t wrap_hipStreamCreateWithPriority(hipStream_t *stream, unsigned int flags,
                                                   int priority)
{
    ENTER;
    (void)caller;
    hipError_t r =
        created(REAL(hipStreamCreateWithPriority)(stream, flags, priority), stream, outer, flags);
    LEAVE;
    return r;
}

static hipError_t wrap_hipStreamDestroy(hipStream_t stream)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipStreamDestroy)(stream);
    if (outer && r == hipSuccess)
        ds_sync_stream_destroyed(FAMILY, PTR(stream));
    LEAVE;
    return r;
}

static hipError_t wrap_hipEventRecord(hipEvent_t event, hipStream_t stream)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipEventRecord)(event, stream);
    if (outer && r == hipSuccess)
        ds_sync_event_recorded(FAMILY, PTR(event), PTR(stream), false);
    LEAVE;
    return r;
}

static hipError_t wrap_hipEventDestroy(hipEvent_t event)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipEventDestroy)(event);
    if (outer && r == hipSuccess)
        ds_sync_event_destroyed(FAMILY, PTR(event));
    LEAVE;
    return r;
}

static hipError_t wrap_hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipStreamWaitEvent)(stream, event, flags);
    if (outer && r == hipSuccess)
        ds_sync_stream_waits(FAMILY, PTR(stream), PTR(event), false);
    LEAVE;
    return r;
}

static hipError_t wrap_hipStreamSynchronize(hipStream_t stream)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipStreamSynchronize)(stream);
    if (outer && r == hipSuccess)
        ds_sync_host_waits_stream(FAMILY, PTR(stream), false);
    LEAVE;
    return r;
}

static hipError_t wrap_hipStreamQuery(hipStream_t stream)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipStreamQuery)(stream);
    if (outer && r == hipSuccess)
        ds_sync_host_waits_stream(FAMILY, PTR(stream), false);
    LEAVE;
    return r;
}

static hipError_t wrap_hipEventSynchronize(hipEvent_t event)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipEventSynchronize)(event);
    if (outer && r == hipSuccess)
        ds_sync_host_waits_event(FAMILY, PTR(event));
    LEAVE;
    return r;
}

static hipError_t wrap_hipEventQuery(hipEvent_t event)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipEventQuery)(event);
    if (outer && r == hipSuccess)
        ds_sync_host_waits_event(FAMILY, PTR(event));
    LEAVE;
    return r;
}

static hipError_t wrap_hipDeviceSynchronize(void)
{
    ENTER;
    (void)caller;
    hipError_t r = REAL(hipDeviceSynchronize)();
    if (outer && r == hipSuccess)
        ds_sync_host_waits_all(FAMILY);
    LEAVE;
    return r;
}

static hipError_t copied(hipError_t e, bool outer, bool sync)
{
    if (outer && sync && e == hipSuccess) /* synchronous: the host waited for it */
        ds_sync_host_waits_stream(FAMILY, 0, false);
    return e;
}

#define COPY(dst, src, n, stream, direction)                                              \
    do {                                                                                  \
        if (outer)                                                                        \
            ds_device_copy(FAMILY, stream, PTR(dst), PTR(src), n, n, n, direction, caller); \
    } while (0)

static hipError_t wrap_hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind)
{
    ENTER;
    COPY(dst, src, n, NULL, ds_copy_kind_direction(kind));
    hipError_t e = copied(REAL(hipMemcpy)(dst, src, n, kind), outer, true);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyAsync(void *dst, const void *src, size_t n, hipMemcpyKind kind,
                                      hipStream_t stream)
{
    ENTER;
    COPY(dst, src, n, stream, ds_copy_kind_direction(kind));
    hipError_t e = REAL(hipMemcpyAsync)(dst, src, n, kind, stream);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyHtoD(hipDeviceptr_t dst, void *src, size_t n)
{
    ENTER;
    COPY(dst, src, n, NULL, DS_COPY_H2D);
    hipError_t e = copied(REAL(hipMemcpyHtoD)(dst, src, n), outer, true);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t n)
{
    ENTER;
    COPY(dst, src, n, NULL, DS_COPY_D2H);
    hipError_t e = copied(REAL(hipMemcpyDtoH)(dst, src, n), outer, true);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n)
{
    ENTER;
    COPY(dst, src, n, NULL, DS_COPY_D2D);
    hipError_t e = copied(REAL(hipMemcpyDtoD)(dst, src, n), outer, true);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t n,
                                          hipStream_t stream)
{
    ENTER;
    COPY(dst, src, n, stream, DS_COPY_H2D);
    hipError_t e = REAL(hipMemcpyHtoDAsync)(dst, src, n, stream);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t n,
                                          hipStream_t stream)
{
    ENTER;
    COPY(dst, src, n, stream, DS_COPY_D2H);
    hipError_t e = REAL(hipMemcpyDtoHAsync)(dst, src, n, stream);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n,
                                          hipStream_t stream)
{
    ENTER;
    COPY(dst, src, n, stream, DS_COPY_D2D);
    hipError_t e = REAL(hipMemcpyDtoDAsync)(dst, src, n, stream);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyPeer(void *dst, int dst_device, const void *src, int src_device,
                                     size_t n)
{
    ENTER;
    COPY(dst, src, n, NULL, DS_COPY_PEER);
    hipError_t e = copied(REAL(hipMemcpyPeer)(dst, dst_device, src, src_device, n), outer, true);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemcpyPeerAsync(void *dst, int dst_device, const void *src,
                                          int src_device, size_t n, hipStream_t stream)
{
    ENTER;
    COPY(dst, src, n, stream, DS_COPY_PEER);
    hipError_t e = REAL(hipMemcpyPeerAsync)(dst, dst_device, src, src_device, n, stream);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemset(void *dst, int value, size_t n)
{
    ENTER;
    ds_range r = {PTR(dst), n, true};
    if (outer)
        ds_device_op(FAMILY, NULL, false, &r, 1, caller);
    hipError_t e = REAL(hipMemset)(dst, value, n);
    if (outer && e == hipSuccess)
        ds_sync_host_waits_stream(FAMILY, 0, false);
    LEAVE;
    return e;
}

static hipError_t wrap_hipMemsetAsync(void *dst, int value, size_t n, hipStream_t stream)
{
    ENTER;
    ds_range r = {PTR(dst), n, true};
    if (outer)
        ds_device_op(FAMILY, stream, false, &r, 1, caller);
    hipError_t e = REAL(hipMemsetAsync)(dst, value, n, stream);
    LEAVE;
    return e;
}

static hipError_t wrap_hipLaunchKernel(const void *f, dim3 grid, dim3 block, void **args,
                                       size_t shared, hipStream_t stream)
{
    ENTER;
    if (outer)
        ds_device_op(FAMILY, stream, false, NULL, -1, caller);
    hipError_t e = REAL(hipLaunchKernel)(f, grid, block, args, shared, stream);
    LEAVE;
    return e;
}

static hipError_t wrap_hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int shared,
                                             hipStream_t stream, void **params, void **extra)
{
    ENTER;
    if (outer)
        ds_device_op(FAMILY, stream, false, NULL, -1, caller);
    hipError_t e =
        REAL(hipModuleLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
    LEAVE;
    return e;
}

static hipError_t wrap_hipLaunchHostFunc(hipStream_t stream, hip_host_fn fn, void *data)
{
    ENTER;
    if (outer)
        ds_device_op(FAMILY, stream, false, NULL, 0, caller);
    hipError_t e = REAL(hipLaunchHostFunc)(stream, fn, data);
    LEAVE;
    return e;
}

static void *hip_fn(const char *name)
{
    const void *known[] = {(void *)real_hipMemcpyAsync, (void *)real_hipMemsetAsync,
                           (void *)real_hipMemcpy, (void *)real_hipStreamSynchronize,
                           (void *)real_hipEventRecord};
    for (size_t i = 0; i < DS_ARRAY_LEN(known); i++)
        if (known[i])
            return ds_resolve_beside(known[i], name);
    return NULL;
}

static bool barrier(uintptr_t producer, uintptr_t consumer, long producer_tid)
{
    (void)producer_tid;
    static __typeof__(hipEventCreateWithFlags) *create;
    static __typeof__(hipEventRecord) *record;
    static __typeof__(hipStreamWaitEvent) *wait;
    static __typeof__(hipEventDestroy) *destroy;
    if (!create) {
        record = (__typeof__(record))hip_fn("hipEventRecord");
        wait = (__typeof__(wait))hip_fn("hipStreamWaitEvent");
        destroy = (__typeof__(destroy))hip_fn("hipEventDestroy");
        create = (__typeof__(create))hip_fn("hipEventCreateWithFlags");
    }
    hipEvent_t e;
    if (!create || !record || !wait || !destroy || create(&e, hipEventDisableTiming) != hipSuccess)
        return false;
    bool ok = record(e, (hipStream_t)producer) == hipSuccess &&
              wait((hipStream_t)consumer, e, 0) == hipSuccess;
    destroy(e);
    return ok;
}

#define HOOK(name) {#name, (void *)wrap_##name, (void **)&real_##name, NULL}
static const ds_got_hook hooks[] = {
    HOOK(hipStreamCreate),      HOOK(hipStreamCreateWithFlags), HOOK(hipStreamCreateWithPriority),
    HOOK(hipStreamDestroy),     HOOK(hipEventRecord),           HOOK(hipEventDestroy),
    HOOK(hipStreamWaitEvent),   HOOK(hipStreamSynchronize),     HOOK(hipStreamQuery),
    HOOK(hipEventSynchronize),  HOOK(hipEventQuery),            HOOK(hipDeviceSynchronize),
    HOOK(hipMemcpy),            HOOK(hipMemcpyAsync),           HOOK(hipMemcpyHtoD),
    HOOK(hipMemcpyDtoH),        HOOK(hipMemcpyDtoD),            HOOK(hipMemcpyHtoDAsync),
    HOOK(hipMemcpyDtoHAsync),   HOOK(hipMemcpyDtoDAsync),       HOOK(hipMemcpyPeer),
    HOOK(hipMemcpyPeerAsync),   HOOK(hipMemset),
    HOOK(hipMemsetAsync),       HOOK(hipLaunchKernel),          HOOK(hipModuleLaunchKernel),
    HOOK(hipLaunchHostFunc),
};
#undef HOOK

void ds_hip_sync_install(void)
{
    ds_got_hooks_add(hooks, DS_ARRAY_LEN(hooks));
    ds_sync_set_barrier(FAMILY, barrier);
}
