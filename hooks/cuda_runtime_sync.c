/*
 * cuda_runtime_sync.c — what the stream model (shim/sync.c) and copy
 * accounting (shim/copies.c) need of the CUDA runtime: streams, events,
 * waits, synchronizes, and the operations that touch buffers.
 *
 * Wraps, through every module's GOT and dlsym:
 *   cudaStreamCreate, cudaStreamCreateWithFlags, cudaStreamCreateWithPriority,
 *   cudaStreamDestroy, cudaEventRecord, cudaEventRecordWithFlags,
 *   cudaEventDestroy, cudaStreamWaitEvent, cudaStreamSynchronize,
 *   cudaStreamQuery, cudaEventSynchronize, cudaEventQuery,
 *   cudaDeviceSynchronize, cudaMemcpy, cudaMemcpyAsync, cudaMemcpy2D,
 *   cudaMemcpy2DAsync, cudaMemcpyPeer, cudaMemcpyPeerAsync, cudaMemset,
 *   cudaMemsetAsync, cudaLaunchKernel, cudaLaunchHostFunc.
 * Leaves out: the per-thread-default-stream (_ptsz/_ptds) variants (code
 *   built with --default-stream per-thread; cudaStreamPerThread passed
 *   explicitly is modelled), 3D copies, arrays, 2D fills, graph launches.
 *   cudaLaunchKernel's buffers are unknown without the kernel's parameter
 *   info, so a launch counts as the calling module's use of its imports.
 *
 * Shape: note the caller, enter the nesting guard, tell the model (before
 * an operation is queued, so an enforced barrier precedes it), call the
 * caller's real function, tell the model what completed, leave, return.
 */
#include <cuda_runtime_api.h>

#include "internal.h"

#define FAMILY DS_FAMILY_CUDART

static __typeof__(cudaStreamCreate) *real_cudaStreamCreate;
static __typeof__(cudaStreamCreateWithFlags) *real_cudaStreamCreateWithFlags;
static __typeof__(cudaStreamCreateWithPriority) *real_cudaStreamCreateWithPriority;
static __typeof__(cudaStreamDestroy) *real_cudaStreamDestroy;
static __typeof__(cudaEventRecord) *real_cudaEventRecord;
static __typeof__(cudaEventRecordWithFlags) *real_cudaEventRecordWithFlags;
static __typeof__(cudaEventDestroy) *real_cudaEventDestroy;
static __typeof__(cudaStreamWaitEvent) *real_cudaStreamWaitEvent;
static __typeof__(cudaStreamSynchronize) *real_cudaStreamSynchronize;
static __typeof__(cudaStreamQuery) *real_cudaStreamQuery;
static __typeof__(cudaEventSynchronize) *real_cudaEventSynchronize;
static __typeof__(cudaEventQuery) *real_cudaEventQuery;
static __typeof__(cudaDeviceSynchronize) *real_cudaDeviceSynchronize;
static __typeof__(cudaMemcpy) *real_cudaMemcpy;
static __typeof__(cudaMemcpyAsync) *real_cudaMemcpyAsync;
static __typeof__(cudaMemcpy2D) *real_cudaMemcpy2D;
static __typeof__(cudaMemcpy2DAsync) *real_cudaMemcpy2DAsync;
static __typeof__(cudaMemcpyPeer) *real_cudaMemcpyPeer;
static __typeof__(cudaMemcpyPeerAsync) *real_cudaMemcpyPeerAsync;
static __typeof__(cudaMemset) *real_cudaMemset;
static __typeof__(cudaMemsetAsync) *real_cudaMemsetAsync;
static __typeof__(cudaLaunchKernel) *real_cudaLaunchKernel;
static __typeof__(cudaLaunchHostFunc) *real_cudaLaunchHostFunc;

#define ENTER                                          \
    const void *caller = __builtin_return_address(0); \
    bool outer = ds_api_enter()
#define LEAVE ds_api_leave()
#define REAL(name) DS_REAL(wrap_##name, real_##name, #name)

/* ---- streams ------------------------------------------------------------------ */

static cudaError_t created(cudaError_t r, cudaStream_t *stream, bool outer, bool non_blocking)
{
    cudaStream_t s = NULL;
    if (outer && r == cudaSuccess && ds_safe_read(&s, stream, sizeof(s)) == sizeof(s))
        ds_sync_stream_created(FAMILY, (uintptr_t)s, non_blocking);
    return r;
}

static cudaError_t wrap_cudaStreamCreate(cudaStream_t *stream)
{
    ENTER;
    (void)caller;
    cudaError_t r = created(REAL(cudaStreamCreate)(stream), stream, outer, false);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    ENTER;
    (void)caller;
    cudaError_t r = created(REAL(cudaStreamCreateWithFlags)(stream, flags), stream, outer,
                            flags & cudaStreamNonBlocking);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned int flags,
                                                     int priority)
{
    ENTER;
    (void)caller;
    cudaError_t r = created(REAL(cudaStreamCreateWithPriority)(stream, flags, priority), stream,
                            outer, flags & cudaStreamNonBlocking);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaStreamDestroy(cudaStream_t stream)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaStreamDestroy)(stream);
    if (outer && r == cudaSuccess)
        ds_sync_stream_destroyed(FAMILY, (uintptr_t)stream);
    LEAVE;
    return r;
}

/* ---- events and waits ------------------------------------------------------------ */

static cudaError_t wrap_cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaEventRecord)(event, stream);
    if (outer && r == cudaSuccess)
        ds_sync_event_recorded(FAMILY, (uintptr_t)event, (uintptr_t)stream, false);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                                 unsigned int flags)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaEventRecordWithFlags)(event, stream, flags);
    if (outer && r == cudaSuccess)
        ds_sync_event_recorded(FAMILY, (uintptr_t)event, (uintptr_t)stream, false);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaEventDestroy(cudaEvent_t event)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaEventDestroy)(event);
    if (outer && r == cudaSuccess)
        ds_sync_event_destroyed(FAMILY, (uintptr_t)event);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                            unsigned int flags)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaStreamWaitEvent)(stream, event, flags);
    if (outer && r == cudaSuccess)
        ds_sync_stream_waits(FAMILY, (uintptr_t)stream, (uintptr_t)event, false);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaStreamSynchronize(cudaStream_t stream)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaStreamSynchronize)(stream);
    if (outer && r == cudaSuccess)
        ds_sync_host_waits_stream(FAMILY, (uintptr_t)stream, false);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaStreamQuery(cudaStream_t stream)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaStreamQuery)(stream);
    if (outer && r == cudaSuccess) /* "all done" is a synchronization */
        ds_sync_host_waits_stream(FAMILY, (uintptr_t)stream, false);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaEventSynchronize(cudaEvent_t event)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaEventSynchronize)(event);
    if (outer && r == cudaSuccess)
        ds_sync_host_waits_event(FAMILY, (uintptr_t)event);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaEventQuery(cudaEvent_t event)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaEventQuery)(event);
    if (outer && r == cudaSuccess)
        ds_sync_host_waits_event(FAMILY, (uintptr_t)event);
    LEAVE;
    return r;
}

static cudaError_t wrap_cudaDeviceSynchronize(void)
{
    ENTER;
    (void)caller;
    cudaError_t r = REAL(cudaDeviceSynchronize)();
    if (outer && r == cudaSuccess)
        ds_sync_host_waits_all(FAMILY);
    LEAVE;
    return r;
}

/* ---- operations on buffers ------------------------------------------------------- */

#define P(x) ((uintptr_t)(x))

static cudaError_t wrap_cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER;
    if (outer)
        ds_device_copy(FAMILY, NULL, P(dst), P(src), n, n, n, ds_copy_kind_direction(kind), caller);
    cudaError_t e = REAL(cudaMemcpy)(dst, src, n, kind);
    if (outer && e == cudaSuccess) /* synchronous: the host waited for it */
        ds_sync_host_waits_stream(FAMILY, 0, false);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    ENTER;
    if (outer)
        ds_device_copy(FAMILY, stream, P(dst), P(src), n, n, n, ds_copy_kind_direction(kind),
                       caller);
    cudaError_t e = REAL(cudaMemcpyAsync)(dst, src, n, kind, stream);
    LEAVE;
    return e;
}

/* The bytes a pitched region of `height` rows of `width` bytes spans. */
static uint64_t span(size_t pitch, size_t width, size_t height)
{
    return height ? (uint64_t)pitch * (height - 1) + width : 0;
}

static cudaError_t wrap_cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind)
{
    ENTER;
    if (outer)
        ds_device_copy(FAMILY, NULL, P(dst), P(src), (uint64_t)width * height,
                       span(dpitch, width, height), span(spitch, width, height),
                       ds_copy_kind_direction(kind), caller);
    cudaError_t e = REAL(cudaMemcpy2D)(dst, dpitch, src, spitch, width, height, kind);
    if (outer && e == cudaSuccess)
        ds_sync_host_waits_stream(FAMILY, 0, false);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                          size_t spitch, size_t width, size_t height,
                                          enum cudaMemcpyKind kind, cudaStream_t stream)
{
    ENTER;
    if (outer)
        ds_device_copy(FAMILY, stream, P(dst), P(src), (uint64_t)width * height,
                       span(dpitch, width, height), span(spitch, width, height),
                       ds_copy_kind_direction(kind), caller);
    cudaError_t e = REAL(cudaMemcpy2DAsync)(dst, dpitch, src, spitch, width, height, kind, stream);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device,
                                       size_t n)
{
    ENTER;
    if (outer)
        ds_device_copy(FAMILY, NULL, P(dst), P(src), n, n, n, DS_COPY_PEER, caller);
    cudaError_t e = REAL(cudaMemcpyPeer)(dst, dst_device, src, src_device, n);
    if (outer && e == cudaSuccess)
        ds_sync_host_waits_stream(FAMILY, 0, false);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src,
                                            int src_device, size_t n, cudaStream_t stream)
{
    ENTER;
    if (outer)
        ds_device_copy(FAMILY, stream, P(dst), P(src), n, n, n, DS_COPY_PEER, caller);
    cudaError_t e = REAL(cudaMemcpyPeerAsync)(dst, dst_device, src, src_device, n, stream);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaMemset(void *dst, int value, size_t n)
{
    ENTER;
    ds_range r = {(uintptr_t)dst, n, true};
    if (outer)
        ds_device_op(FAMILY, NULL, false, &r, 1, caller);
    cudaError_t e = REAL(cudaMemset)(dst, value, n);
    if (outer && e == cudaSuccess)
        ds_sync_host_waits_stream(FAMILY, 0, false);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream)
{
    ENTER;
    ds_range r = {(uintptr_t)dst, n, true};
    if (outer)
        ds_device_op(FAMILY, stream, false, &r, 1, caller);
    cudaError_t e = REAL(cudaMemsetAsync)(dst, value, n, stream);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                         size_t shared, cudaStream_t stream)
{
    ENTER;
    if (outer)
        ds_device_op(FAMILY, stream, false, NULL, -1, caller);
    cudaError_t e = REAL(cudaLaunchKernel)(func, grid, block, args, shared, stream);
    LEAVE;
    return e;
}

static cudaError_t wrap_cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data)
{
    ENTER;
    if (outer)
        ds_device_op(FAMILY, stream, false, NULL, 0, caller); /* ordered work, no buffers */
    cudaError_t e = REAL(cudaLaunchHostFunc)(stream, fn, data);
    LEAVE;
    return e;
}

/* ---- the barrier DLSHIM_SYNC=enforce inserts --------------------------------------- */

/* A runtime function the program may never have called itself, from the
 * same runtime as the ones it did call. */
static void *runtime_fn(const char *name)
{
    const void *known[] = {(void *)real_cudaMemcpyAsync, (void *)real_cudaMemsetAsync,
                           (void *)real_cudaLaunchKernel, (void *)real_cudaMemcpy,
                           (void *)real_cudaStreamSynchronize, (void *)real_cudaEventRecord};
    for (size_t i = 0; i < DS_ARRAY_LEN(known); i++)
        if (known[i])
            return ds_resolve_beside(known[i], name);
    return NULL;
}

static bool barrier(uintptr_t producer, uintptr_t consumer, long producer_tid)
{
    /* Another thread's per-thread default stream cannot be named from here. */
    if (producer == (uintptr_t)cudaStreamPerThread && producer_tid != ds_tid())
        return false;
    static __typeof__(cudaEventCreateWithFlags) *create;
    static __typeof__(cudaEventRecord) *record;
    static __typeof__(cudaStreamWaitEvent) *wait;
    static __typeof__(cudaEventDestroy) *destroy;
    if (!create) {
        record = (__typeof__(record))runtime_fn("cudaEventRecord");
        wait = (__typeof__(wait))runtime_fn("cudaStreamWaitEvent");
        destroy = (__typeof__(destroy))runtime_fn("cudaEventDestroy");
        create = (__typeof__(create))runtime_fn("cudaEventCreateWithFlags");
    }
    cudaEvent_t e;
    if (!create || !record || !wait || !destroy || create(&e, cudaEventDisableTiming) != cudaSuccess)
        return false;
    bool ok = record(e, (cudaStream_t)producer) == cudaSuccess &&
              wait((cudaStream_t)consumer, e, 0) == cudaSuccess;
    destroy(e); /* released once the wait is satisfied */
    return ok;
}

/* ---- registration ----------------------------------------------------------------- */

#define HOOK(name) {#name, (void *)wrap_##name, (void **)&real_##name, NULL}
static const ds_got_hook hooks[] = {
    HOOK(cudaStreamCreate),        HOOK(cudaStreamCreateWithFlags),
    HOOK(cudaStreamCreateWithPriority), HOOK(cudaStreamDestroy),
    HOOK(cudaEventRecord),         HOOK(cudaEventRecordWithFlags),
    HOOK(cudaEventDestroy),        HOOK(cudaStreamWaitEvent),
    HOOK(cudaStreamSynchronize),   HOOK(cudaStreamQuery),
    HOOK(cudaEventSynchronize),    HOOK(cudaEventQuery),
    HOOK(cudaDeviceSynchronize),   HOOK(cudaMemcpy),
    HOOK(cudaMemcpyAsync),         HOOK(cudaMemcpy2D),
    HOOK(cudaMemcpy2DAsync),       HOOK(cudaMemcpyPeer),
    HOOK(cudaMemcpyPeerAsync),     HOOK(cudaMemset),
    HOOK(cudaMemsetAsync),         HOOK(cudaLaunchKernel),
    HOOK(cudaLaunchHostFunc),
};
#undef HOOK

void ds_cuda_runtime_sync_install(void)
{
    ds_got_hooks_add(hooks, DS_ARRAY_LEN(hooks));
    ds_sync_set_barrier(FAMILY, barrier);
}
