/*
 * cuda_runtime.c — the CUDA runtime (libcudart): allocations, frees, streams,
 * events, copies, fills and launches, through every module's GOT and dlsym.
 * The functions and what each does are the table cuda_runtime.def; the
 * wrapper shape is device.h's.  The runtime reaches the driver through
 * pointers from cuGetProcAddress, which come back wrapped (cuda_driver.c):
 * the nesting guard records such a call once, as the runtime call the
 * program made.  Signatures come from the CUDA headers; nothing links to
 * libcudart.
 */
#include "abi/cuda_runtime.h"
#include "device.h"

#define DS_RESULT cudaError_t
#define DS_OK cudaSuccess
#define DS_INVALID cudaErrorInvalidValue
static int ds_api = -1;

DS_CURRENT_DEVICE(cudaGetDevice, int)

/* A driver function fetched through the runtime comes back wrapped; the
 * runtime's own CUDA version stands for "the newest variant".  A _ptsz
 * lookup's default (flags without cudaEnableLegacyStream, 1) is the
 * per-thread twin (cudaEnablePerThreadDefaultStream, 2, as the driver's
 * flag). */
#define DRIVER_ENTRY(symbol, fn, version, flags)                                               \
    do {                                                                                       \
        char name_[DS_NAME_MAX];                                                               \
        uint64_t flags_ = (flags) | (ds_ptsz && !((flags) & 1) ? 2 : 0);                       \
        ds_device_lookup_result(                                                               \
            ds_cuda_driver_hook_name(symbol, version, flags_, name_, sizeof(name_)), fn, caller); \
    } while (0)

/* cudaGetDriverEntryPoint is deprecated in CUDA 13 and still called (PyTorch
 * 2.x): the table spells its type out, so the deprecation does not stop the
 * build. */
#include "cuda_runtime.def"

static void **const known[] = {(void **)&real_cudaMemcpyAsync, (void **)&real_cudaMemsetAsync,
                               (void **)&real_cudaLaunchKernel, (void **)&real_cudaMemcpy,
                               (void **)&real_cudaStreamSynchronize, (void **)&real_cudaEventRecord,
                               (void **)&real_cudaMalloc, (void **)&real_cudaMemcpyAsync_ptsz,
                               (void **)&real_cudaMemsetAsync_ptsz,
                               (void **)&real_cudaLaunchKernel_ptsz};
DS_BARRIER(cudaStream_t, cudaEvent_t, cudaEventCreateWithFlags, cudaEventRecord,
           cudaStreamWaitEvent, cudaEventDestroy, cudaEventDisableTiming, known)
DS_RELEASE(cudaFree, cudaFreeHost, void *)

DS_DEVICE_API("cuda_runtime", "cuda", "cuda_host", "cuda_managed", cudaStreamLegacy,
              cudaStreamPerThread);

#define DS_TABLE "cuda_runtime.def"
#define DS_OPTION "cuda"
#include "device_family.h"
