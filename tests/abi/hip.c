/* The HIP declarations of hooks/abi/ against hip_runtime_api.h (facts.h
 * says how). */
#ifdef DS_ABI_SDK_TYPES
#include <hip/hip_runtime_api.h>
#endif
#include "abi/hip.h"
#include "facts.h"

DS_FACTS(hip) = {
    DS_FACT(hipSuccess), DS_FACT(hipErrorInvalidValue), DS_FACT(sizeof(hipError_t)),
    DS_FACT(hipMemcpyHostToHost), DS_FACT(hipMemcpyHostToDevice), DS_FACT(hipMemcpyDeviceToHost),
    DS_FACT(hipMemcpyDeviceToDevice), DS_FACT(hipMemcpyDefault), DS_FACT(sizeof(hipMemcpyKind)),
    DS_FACT(hipExternalMemoryHandleTypeOpaqueFd), DS_FACT(sizeof(hipExternalMemoryHandleType)),
    DS_TYPE(dim3), DS_FIELD(dim3, x), DS_FIELD(dim3, y), DS_FIELD(dim3, z),
    DS_TYPE(hipExternalMemoryHandleDesc), DS_FIELD(hipExternalMemoryHandleDesc, type),
    DS_FIELD(hipExternalMemoryHandleDesc, handle), DS_FIELD(hipExternalMemoryHandleDesc, handle.fd),
    DS_FIELD(hipExternalMemoryHandleDesc, size), DS_FIELD(hipExternalMemoryHandleDesc, flags),
    DS_FACT(hipExternalSemaphoreHandleTypeOpaqueFd),
    DS_FACT(sizeof(hipExternalSemaphoreHandleType)),
    DS_TYPE(hipExternalSemaphoreHandleDesc), DS_FIELD(hipExternalSemaphoreHandleDesc, type),
    DS_FIELD(hipExternalSemaphoreHandleDesc, handle),
    DS_FIELD(hipExternalSemaphoreHandleDesc, handle.fd),
    DS_FIELD(hipExternalSemaphoreHandleDesc, flags),
    DS_TYPE(hipExternalMemoryBufferDesc), DS_FIELD(hipExternalMemoryBufferDesc, offset),
    DS_FIELD(hipExternalMemoryBufferDesc, size), DS_FIELD(hipExternalMemoryBufferDesc, flags),
    DS_TYPE(hipExternalSemaphoreSignalParams),
    DS_FIELD(hipExternalSemaphoreSignalParams, params),
    DS_FIELD(hipExternalSemaphoreSignalParams, params.fence.value),
    DS_FIELD(hipExternalSemaphoreSignalParams, params.keyedMutex),
    DS_FIELD(hipExternalSemaphoreSignalParams, params.reserved),
    DS_FIELD(hipExternalSemaphoreSignalParams, flags),
    DS_FIELD(hipExternalSemaphoreSignalParams, reserved),
    DS_TYPE(hipExternalSemaphoreWaitParams),
    DS_FIELD(hipExternalSemaphoreWaitParams, params),
    DS_FIELD(hipExternalSemaphoreWaitParams, params.fence.value),
    DS_FIELD(hipExternalSemaphoreWaitParams, params.keyedMutex),
    DS_FIELD(hipExternalSemaphoreWaitParams, params.keyedMutex.timeoutMs),
    DS_FIELD(hipExternalSemaphoreWaitParams, params.reserved),
    DS_FIELD(hipExternalSemaphoreWaitParams, flags),
    DS_FIELD(hipExternalSemaphoreWaitParams, reserved),
    {NULL, 0}};
