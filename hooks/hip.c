/*
 * hip.c — HIP (libamdhip64): allocations, frees, streams, events, copies,
 * fills and launches, through every module's GOT, dlsym and
 * hipGetProcAddress.  The functions and what each does are the table
 * hip.def; the wrapper shape is device.h's.  Signatures come from Debian's
 * HIP headers; nothing links to libamdhip64.
 */
#include "abi/hip.h"
#include "device.h"

#define DS_RESULT hipError_t
#define DS_OK hipSuccess
#define DS_INVALID hipErrorInvalidValue
static int ds_api = -1;

DS_CURRENT_DEVICE(hipGetDevice, int)

#include "hip.def"

static void **const known[] = {(void **)&real_hipMemcpyAsync, (void **)&real_hipMemsetAsync,
                               (void **)&real_hipMemcpy, (void **)&real_hipStreamSynchronize,
                               (void **)&real_hipEventRecord, (void **)&real_hipMalloc};
DS_BARRIER(hipStream_t, hipEvent_t, hipEventCreateWithFlags, hipEventRecord, hipStreamWaitEvent,
           hipEventDestroy, hipEventDisableTiming, known)
DS_RELEASE(hipFree, hipHostFree, void *)

/* HIP 5 has no hipStreamLegacy (0 is the null stream), and its managed
 * memory is a plain ROCm device to DLPack. */
DS_DEVICE_API("hip", "rocm", "rocm_host", "rocm", 0, hipStreamPerThread);

#define DS_TABLE "hip.def"
#define DS_OPTION "hip"
#include "device_family.h"
