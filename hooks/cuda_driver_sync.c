/*
 * cuda_driver_sync.c — what the stream model (shim/sync.c) and copy
 * accounting (shim/copies.c) need of the CUDA driver API.
 *
 * Wraps, through every module's GOT, dlsym and cuGetProcAddress:
 *   cuStreamCreate, cuStreamCreateWithPriority, cuStreamDestroy_v2,
 *   cuEventRecord, cuEventRecordWithFlags, cuEventDestroy_v2,
 *   cuStreamWaitEvent, cuStreamSynchronize, cuStreamQuery,
 *   cuEventSynchronize, cuEventQuery, cuCtxSynchronize,
 *   cuMemcpy, cuMemcpyAsync, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2,
 *   cuMemcpyDtoD_v2, cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2,
 *   cuMemcpyDtoDAsync_v2, cuMemcpyPeer, cuMemcpyPeerAsync, cuMemcpy2D_v2,
 *   cuMemcpy2DAsync_v2, cuMemsetD8_v2, cuMemsetD8Async, cuMemsetD32_v2,
 *   cuMemsetD32Async, cuLaunchKernel, cuLaunchKernelEx, cuLaunchHostFunc.
 * Leaves out: _ptsz/_ptds variants, 3D copies, arrays, 16-bit and 2D fills,
 *   graphs.  Launch buffers are unknown (cuFuncGetParamInfo would name them;
 *   not yet): a launch counts as the calling module's use of its imports.
 * Calls the runtime makes on the program's behalf stay silent (nesting
 * guard), so nothing is ticked twice.  Same shape as cuda_runtime_sync.c.
 */
#include <cuda.h>

#include "internal.h"

#define FAMILY DS_FAMILY_CUDA

static __typeof__(cuStreamCreate) *real_cuStreamCreate;
static __typeof__(cuStreamCreateWithPriority) *real_cuStreamCreateWithPriority;
static __typeof__(cuStreamDestroy_v2) *real_cuStreamDestroy_v2;
static __typeof__(cuEventRecord) *real_cuEventRecord;
static __typeof__(cuEventRecordWithFlags) *real_cuEventRecordWithFlags;
static __typeof__(cuEventDestroy_v2) *real_cuEventDestroy_v2;
static __typeof__(cuStreamWaitEvent) *real_cuStreamWaitEvent;
static __typeof__(cuStreamSynchronize) *real_cuStreamSynchronize;
static __typeof__(cuStreamQuery) *real_cuStreamQuery;
static __typeof__(cuEventSynchronize) *real_cuEventSynchronize;
static __typeof__(cuEventQuery) *real_cuEventQuery;
static __typeof__(cuCtxSynchronize) *real_cuCtxSynchronize;
static __typeof__(cuMemcpy) *real_cuMemcpy;
static __typeof__(cuMemcpyAsync) *real_cuMemcpyAsync;
static __typeof__(cuMemcpyHtoD_v2) *real_cuMemcpyHtoD_v2;
static __typeof__(cuMemcpyDtoH_v2) *real_cuMemcpyDtoH_v2;
static __typeof__(cuMemcpyDtoD_v2) *real_cuMemcpyDtoD_v2;
static __typeof__(cuMemcpyHtoDAsync_v2) *real_cuMemcpyHtoDAsync_v2;
static __typeof__(cuMemcpyDtoHAsync_v2) *real_cuMemcpyDtoHAsync_v2;
static __typeof__(cuMemcpyDtoDAsync_v2) *real_cuMemcpyDtoDAsync_v2;
static __typeof__(cuMemcpyPeer) *real_cuMemcpyPeer;
static __typeof__(cuMemcpyPeerAsync) *real_cuMemcpyPeerAsync;
static __typeof__(cuMemcpy2D_v2) *real_cuMemcpy2D_v2;
static __typeof__(cuMemcpy2DAsync_v2) *real_cuMemcpy2DAsync_v2;
static __typeof__(cuMemsetD8_v2) *real_cuMemsetD8_v2;
static __typeof__(cuMemsetD8Async) *real_cuMemsetD8Async;
static __typeof__(cuMemsetD32_v2) *real_cuMemsetD32_v2;
static __typeof__(cuMemsetD32Async) *real_cuMemsetD32Async;
static __typeof__(cuLaunchKernel) *real_cuLaunchKernel;
static __typeof__(cuLaunchKernelEx) *real_cuLaunchKernelEx;
static __typeof__(cuLaunchHostFunc) *real_cuLaunchHostFunc;

#define ENTER                                          \
    const void *caller = __builtin_return_address(0); \
    bool outer = ds_api_enter()
#define LEAVE ds_api_leave()
#define REAL(name) DS_REAL(wrap_##name, real_##name, #name)
#define PTR(p) ((uintptr_t)(p))

/* ---- streams, events, waits -------------------------------------------------------- */

static CUresult created(CUresult r, CUstream *stream, bool outer, unsigned int flags)
{
    CUstream s = NULL;
    if (outer && r == CUDA_SUCCESS && ds_safe_read(&s, stream, sizeof(s)) == sizeof(s))
        ds_sync_stream_created(FAMILY, PTR(s), flags & CU_STREAM_NON_BLOCKING);
    return r;
}

static CUresult wrap_cuStreamCreate(CUstream *stream, unsigned int flags)
{
    ENTER;
    (void)caller;
    CUresult r = created(REAL(cuStreamCreate)(stream, flags), stream, outer, flags);
    LEAVE;
    return r;
}

static CUresult wrap_cuStreamCreateWithPriority(CUstream *stream, unsigned int flags, int priority)
{
    ENTER;
    (void)caller;
    CUresult r =
        created(REAL(cuStreamCreateWithPriority)(stream, flags, priority), stream, outer, flags);
    LEAVE;
    return r;
}

static CUresult wrap_cuStreamDestroy_v2(CUstream stream)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuStreamDestroy_v2)(stream);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_stream_destroyed(FAMILY, PTR(stream));
    LEAVE;
    return r;
}

static CUresult wrap_cuEventRecord(CUevent event, CUstream stream)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuEventRecord)(event, stream);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_event_recorded(FAMILY, PTR(event), PTR(stream), false);
    LEAVE;
    return r;
}

static CUresult wrap_cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned int flags)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuEventRecordWithFlags)(event, stream, flags);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_event_recorded(FAMILY, PTR(event), PTR(stream), false);
    LEAVE;
    return r;
}

static CUresult wrap_cuEventDestroy_v2(CUevent event)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuEventDestroy_v2)(event);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_event_destroyed(FAMILY, PTR(event));
    LEAVE;
    return r;
}

static CUresult wrap_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuStreamWaitEvent)(stream, event, flags);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_stream_waits(FAMILY, PTR(stream), PTR(event), false);
    LEAVE;
    return r;
}

static CUresult wrap_cuStreamSynchronize(CUstream stream)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuStreamSynchronize)(stream);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_host_waits_stream(FAMILY, PTR(stream), false);
    LEAVE;
    return r;
}

static CUresult wrap_cuStreamQuery(CUstream stream)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuStreamQuery)(stream);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_host_waits_stream(FAMILY, PTR(stream), false);
    LEAVE;
    return r;
}

static CUresult wrap_cuEventSynchronize(CUevent event)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuEventSynchronize)(event);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_host_waits_event(FAMILY, PTR(event));
    LEAVE;
    return r;
}

static CUresult wrap_cuEventQuery(CUevent event)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuEventQuery)(event);
    if (outer && r == CUDA_SUCCESS)
        ds_sync_host_waits_event(FAMILY, PTR(event));
    LEAVE;
    return r;
}

static CUresult wrap_cuCtxSynchronize(void)
{
    ENTER;
    (void)caller;
    CUresult r = REAL(cuCtxSynchronize)();
    if (outer && r == CUDA_SUCCESS)
        ds_sync_host_waits_all(FAMILY);
    LEAVE;
    return r;
}

/* ---- copies and fills -------------------------------------------------------------- */

/* A copy of n bytes in `direction`; sync copies are done when they return
 * (legacy stream). */
static void copy_op(uintptr_t dst, uintptr_t src, size_t n, CUstream stream, int direction,
                    const void *caller)
{
    ds_device_copy(FAMILY, stream, dst, src, n, n, n, direction, caller);
}

static void fill_op(uintptr_t dst, size_t bytes, CUstream stream, const void *caller)
{
    ds_range r = {dst, bytes, true};
    ds_device_op(FAMILY, stream, false, &r, 1, caller);
}

static CUresult synced(CUresult r, bool outer)
{
    if (outer && r == CUDA_SUCCESS)
        ds_sync_host_waits_stream(FAMILY, 0, false);
    return r;
}

static CUresult wrap_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    ENTER;
    if (outer)
        copy_op(dst, src, n, NULL, DS_COPY_INFER, caller);
    CUresult r = synced(REAL(cuMemcpy)(dst, src, n), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    ENTER;
    if (outer)
        copy_op(dst, src, n, stream, DS_COPY_INFER, caller);
    CUresult r = REAL(cuMemcpyAsync)(dst, src, n, stream);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    ENTER;
    if (outer)
        copy_op(dst, PTR(src), n, NULL, DS_COPY_H2D, caller);
    CUresult r = synced(REAL(cuMemcpyHtoD_v2)(dst, src, n), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    ENTER;
    if (outer)
        copy_op(PTR(dst), src, n, NULL, DS_COPY_D2H, caller);
    CUresult r = synced(REAL(cuMemcpyDtoH_v2)(dst, src, n), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    ENTER;
    if (outer)
        copy_op(dst, src, n, NULL, DS_COPY_D2D, caller);
    CUresult r = synced(REAL(cuMemcpyDtoD_v2)(dst, src, n), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n,
                                          CUstream stream)
{
    ENTER;
    if (outer)
        copy_op(dst, PTR(src), n, stream, DS_COPY_H2D, caller);
    CUresult r = REAL(cuMemcpyHtoDAsync_v2)(dst, src, n, stream);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
    ENTER;
    if (outer)
        copy_op(PTR(dst), src, n, stream, DS_COPY_D2H, caller);
    CUresult r = REAL(cuMemcpyDtoHAsync_v2)(dst, src, n, stream);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                          CUstream stream)
{
    ENTER;
    if (outer)
        copy_op(dst, src, n, stream, DS_COPY_D2D, caller);
    CUresult r = REAL(cuMemcpyDtoDAsync_v2)(dst, src, n, stream);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                  CUcontext src_ctx, size_t n)
{
    ENTER;
    if (outer)
        copy_op(dst, src, n, NULL, DS_COPY_PEER, caller);
    CUresult r = synced(REAL(cuMemcpyPeer)(dst, dst_ctx, src, src_ctx, n), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                       CUcontext src_ctx, size_t n, CUstream stream)
{
    ENTER;
    if (outer)
        copy_op(dst, src, n, stream, DS_COPY_PEER, caller);
    CUresult r = REAL(cuMemcpyPeerAsync)(dst, dst_ctx, src, src_ctx, n, stream);
    LEAVE;
    return r;
}

/* A CUDA_MEMCPY2D as the shim reads it: one side's address, pitch, kind. */
static uintptr_t side_of(CUmemorytype type, const void *host, CUdeviceptr device)
{
    return type == CU_MEMORYTYPE_HOST ? PTR(host) : (uintptr_t)device;
}

static void copy_2d(const CUDA_MEMCPY2D *p, CUstream stream, const void *caller)
{
    CUDA_MEMCPY2D c;
    if (!p || ds_safe_read(&c, p, sizeof(c)) != sizeof(c))
        return;
    uintptr_t dst = side_of(c.dstMemoryType, c.dstHost, c.dstDevice);
    uintptr_t src = side_of(c.srcMemoryType, c.srcHost, c.srcDevice);
    uint64_t dspan = c.Height ? (uint64_t)c.dstPitch * (c.Height - 1) + c.WidthInBytes : 0;
    uint64_t sspan = c.Height ? (uint64_t)c.srcPitch * (c.Height - 1) + c.WidthInBytes : 0;
    ds_device_copy(FAMILY, stream, dst, src, (uint64_t)c.WidthInBytes * c.Height, dspan, sspan,
                   DS_COPY_INFER, caller);
}

static CUresult wrap_cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
    ENTER;
    if (outer)
        copy_2d(p, NULL, caller);
    CUresult r = synced(REAL(cuMemcpy2D_v2)(p), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream stream)
{
    ENTER;
    if (outer)
        copy_2d(p, stream, caller);
    CUresult r = REAL(cuMemcpy2DAsync_v2)(p, stream);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n)
{
    ENTER;
    if (outer)
        fill_op(dst, n, NULL, caller);
    CUresult r = synced(REAL(cuMemsetD8_v2)(dst, value, n), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n,
                                     CUstream stream)
{
    ENTER;
    if (outer)
        fill_op(dst, n, stream, caller);
    CUresult r = REAL(cuMemsetD8Async)(dst, value, n, stream);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t n)
{
    ENTER;
    if (outer)
        fill_op(dst, n * 4, NULL, caller);
    CUresult r = synced(REAL(cuMemsetD32_v2)(dst, value, n), outer);
    LEAVE;
    return r;
}

static CUresult wrap_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n,
                                      CUstream stream)
{
    ENTER;
    if (outer)
        fill_op(dst, n * 4, stream, caller);
    CUresult r = REAL(cuMemsetD32Async)(dst, value, n, stream);
    LEAVE;
    return r;
}

/* ---- launches ---------------------------------------------------------------------- */

static CUresult wrap_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                    unsigned int gz, unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int shared, CUstream stream,
                                    void **params, void **extra)
{
    ENTER;
    if (outer)
        ds_device_op(FAMILY, stream, false, NULL, -1, caller);
    CUresult r = REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
    LEAVE;
    return r;
}

static CUresult wrap_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra)
{
    ENTER;
    CUstream stream = NULL;
    if (outer && config &&
        ds_safe_read(&stream, &config->hStream, sizeof(stream)) == sizeof(stream))
        ds_device_op(FAMILY, stream, false, NULL, -1, caller);
    CUresult r = REAL(cuLaunchKernelEx)(config, f, params, extra);
    LEAVE;
    return r;
}

static CUresult wrap_cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data)
{
    ENTER;
    if (outer)
        ds_device_op(FAMILY, stream, false, NULL, 0, caller);
    CUresult r = REAL(cuLaunchHostFunc)(stream, fn, data);
    LEAVE;
    return r;
}

/* ---- the barrier DLSHIM_SYNC=enforce inserts ----------------------------------------- */

static void *driver_fn(const char *name)
{
    const void *known[] = {(void *)real_cuMemcpyAsync, (void *)real_cuMemsetD8Async,
                           (void *)real_cuLaunchKernel, (void *)real_cuMemcpy,
                           (void *)real_cuStreamSynchronize, (void *)real_cuEventRecord};
    for (size_t i = 0; i < DS_ARRAY_LEN(known); i++)
        if (known[i])
            return ds_resolve_beside(known[i], name);
    return NULL;
}

static bool barrier(uintptr_t producer, uintptr_t consumer, long producer_tid)
{
    if (producer == (uintptr_t)CU_STREAM_PER_THREAD && producer_tid != ds_tid())
        return false;
    static __typeof__(cuEventCreate) *create;
    static __typeof__(cuEventRecord) *record;
    static __typeof__(cuStreamWaitEvent) *wait;
    static __typeof__(cuEventDestroy_v2) *destroy;
    if (!create) {
        record = (__typeof__(record))driver_fn("cuEventRecord");
        wait = (__typeof__(wait))driver_fn("cuStreamWaitEvent");
        destroy = (__typeof__(destroy))driver_fn("cuEventDestroy_v2");
        create = (__typeof__(create))driver_fn("cuEventCreate");
    }
    CUevent e;
    if (!create || !record || !wait || !destroy || create(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return false;
    bool ok = record(e, (CUstream)producer) == CUDA_SUCCESS &&
              wait((CUstream)consumer, e, 0) == CUDA_SUCCESS;
    destroy(e);
    return ok;
}

/* ---- registration ------------------------------------------------------------------ */

#define HOOK(name) {#name, (void *)wrap_##name, (void **)&real_##name, NULL}
static const ds_got_hook hooks[] = {
    HOOK(cuStreamCreate),       HOOK(cuStreamCreateWithPriority), HOOK(cuStreamDestroy_v2),
    HOOK(cuEventRecord),        HOOK(cuEventRecordWithFlags),     HOOK(cuEventDestroy_v2),
    HOOK(cuStreamWaitEvent),    HOOK(cuStreamSynchronize),        HOOK(cuStreamQuery),
    HOOK(cuEventSynchronize),   HOOK(cuEventQuery),               HOOK(cuCtxSynchronize),
    HOOK(cuMemcpy),             HOOK(cuMemcpyAsync),              HOOK(cuMemcpyHtoD_v2),
    HOOK(cuMemcpyDtoH_v2),      HOOK(cuMemcpyDtoD_v2),            HOOK(cuMemcpyHtoDAsync_v2),
    HOOK(cuMemcpyDtoHAsync_v2), HOOK(cuMemcpyDtoDAsync_v2),       HOOK(cuMemcpyPeer),
    HOOK(cuMemcpyPeerAsync),    HOOK(cuMemcpy2D_v2),              HOOK(cuMemcpy2DAsync_v2),
    HOOK(cuMemsetD8_v2),
    HOOK(cuMemsetD8Async),      HOOK(cuMemsetD32_v2),             HOOK(cuMemsetD32Async),
    HOOK(cuLaunchKernel),       HOOK(cuLaunchKernelEx),           HOOK(cuLaunchHostFunc),
};
#undef HOOK

void ds_cuda_driver_sync_install(void)
{
    ds_got_hooks_add(hooks, DS_ARRAY_LEN(hooks));
    ds_sync_set_barrier(FAMILY, barrier);
}
