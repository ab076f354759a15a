/*
 * cuda_driver.c — the CUDA driver API (libcuda): allocations, frees, streams,
 * events, copies, fills and launches, through every module's GOT, dlsym and
 * cuGetProcAddress (the driver's own lookup, which hands out wrappers).  The
 * functions and what each does are the table cuda_driver.def; the wrapper
 * shape is device.h's.  Calls the runtime makes into the driver on the
 * program's behalf are recorded once, as the runtime call.
 */
#include <string.h>

#include "abi/cuda.h"
#include "device.h"

#define DS_RESULT CUresult
#define DS_OK CUDA_SUCCESS
#define DS_INVALID CUDA_ERROR_INVALID_VALUE
static int ds_api = -1;

DS_CURRENT_DEVICE(cuCtxGetDevice, CUdevice)

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

#define DRIVER_ENTRY(symbol, fn, version, flags)                                               \
    do {                                                                                       \
        char name_[DS_NAME_MAX];                                                               \
        if (symbol)                                                                            \
            ds_device_lookup_result(                                                           \
                ds_cuda_driver_hook_name(symbol, version, flags, name_, sizeof(name_)), fn,    \
                caller);                                                                       \
    } while (0)

/* A CUDA_MEMCPY2D as the shim reads it: each side's address, pitch, kind. */
static uintptr_t side_of(CUmemorytype type, const void *host, CUdeviceptr device)
{
    return type == CU_MEMORYTYPE_HOST ? P(host) : (uintptr_t)device;
}

static void copy_2d(const CUDA_MEMCPY2D *p, uintptr_t stream, bool ptsz, const void *caller)
{
    CUDA_MEMCPY2D c;
    if (!p || ds_safe_read(&c, p, sizeof(c)) != sizeof(c))
        return;
    ds_device_copy(ds_api, stream, ptsz, side_of(c.dstMemoryType, c.dstHost, c.dstDevice),
                   side_of(c.srcMemoryType, c.srcHost, c.srcDevice),
                   (uint64_t)c.WidthInBytes * c.Height,
                   ds_pitched_span(c.dstPitch, c.WidthInBytes, c.Height),
                   ds_pitched_span(c.srcPitch, c.WidthInBytes, c.Height), DS_COPY_INFER, caller);
}

/* The stream of a cuLaunchKernelEx configuration (0 when unreadable). */
static CUstream stream_of(const CUlaunchConfig *config)
{
    CUstream s = NULL;
    if (config)
        ds_safe_read(&s, &config->hStream, sizeof(s));
    return s;
}

#include "cuda_driver.def"

/* The functions with per-thread-default-stream twins: the table's _PTSZ
 * and _PTDS rows. */
#define DS_PER_THREAD_NAME(name, suffix) {#name, #suffix},
static const struct {
    const char *name, *suffix;
} per_thread[] = {
#include "device_per_thread.h"
#include "cuda_driver.def"
};

/* The function a lookup of `symbol` hands out: the variant of the requested
 * version, and with the per-thread flag its twin (as the driver's). */
const char *ds_cuda_driver_hook_name(const char *symbol, int version, uint64_t flags, char *buf,
                                     size_t cap)
{
    const char *name = symbol;
    for (size_t i = 0; i < DS_ARRAY_LEN(renamed); i++)
        if (!strcmp(symbol, renamed[i].base)) {
            name = version >= renamed[i].since ? renamed[i].versioned : symbol;
            break;
        }
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        for (size_t i = 0; i < DS_ARRAY_LEN(per_thread); i++)
            if (!strcmp(name, per_thread[i].name)) {
                ds_fmt(buf, cap, "%s%s", name, per_thread[i].suffix);
                return buf;
            }
    return name;
}


static void **const known[] = {(void **)&real_cuMemcpyAsync, (void **)&real_cuMemsetD8Async,
                               (void **)&real_cuLaunchKernel, (void **)&real_cuMemcpy,
                               (void **)&real_cuStreamSynchronize, (void **)&real_cuEventRecord,
                               (void **)&real_cuMemAlloc_v2, (void **)&real_cuMemcpyAsync_ptsz,
                               (void **)&real_cuMemsetD8Async_ptsz,
                               (void **)&real_cuLaunchKernel_ptsz};
DS_BARRIER(CUstream, CUevent, cuEventCreate, cuEventRecord, cuStreamWaitEvent, cuEventDestroy_v2,
           CU_EVENT_DISABLE_TIMING, known)
DS_RELEASE(cuMemFree_v2, cuMemFreeHost, CUdeviceptr)

DS_DEVICE_API("cuda_driver", "cuda", "cuda_host", "cuda_managed", CU_STREAM_LEGACY,
              CU_STREAM_PER_THREAD);

#define DS_TABLE "cuda_driver.def"
#define DS_OPTION "cuda"
#include "device_family.h"
