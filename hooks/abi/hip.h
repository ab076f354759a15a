/*
 * abi/hip.h — the part of the HIP runtime API (hip_runtime_api.h, HIP 5 on
 * AMD) that hip.c and hip.def use: error codes, handles, flags, the
 * structures the shim reads, and the functions it calls itself.  The shim
 * must build with a C compiler and libc alone, and nothing links to
 * libamdhip64, so the few declarations it needs are its own.  Left out:
 * everything else.
 *
 * tests/abi checks every declaration against the real header, as
 * abi/cuda.h says (DS_ABI_SDK_TYPES).
 */
#ifndef DS_ABI_HIP_H
#define DS_ABI_HIP_H

#include <stdint.h>

#ifndef DS_ABI_SDK_TYPES
typedef enum hipError_t { hipSuccess = 0, hipErrorInvalidValue = 1 } hipError_t;
typedef enum hipMemcpyKind {
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4
} hipMemcpyKind;
/* Only the file descriptor's type matters to the shim. */
typedef enum hipExternalMemoryHandleType_enum {
    hipExternalMemoryHandleTypeOpaqueFd = 1
} hipExternalMemoryHandleType;
/* The timeline type is ROCm 6's (hip_runtime_api.h; HIP 5's headers, which
 * tests/abi checks the rest against, have no timeline semaphores). */
typedef enum hipExternalSemaphoreHandleType_enum {
    hipExternalSemaphoreHandleTypeOpaqueFd = 1,
    hipExternalSemaphoreHandleTypeTimelineSemaphoreFd = 9
} hipExternalSemaphoreHandleType;

typedef struct dim3 {
    uint32_t x, y, z;
} dim3;

typedef struct hipExternalMemoryHandleDesc_st {
    hipExternalMemoryHandleType type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
    } handle;
    unsigned long long size;
    unsigned int flags;
} hipExternalMemoryHandleDesc;

typedef struct hipExternalSemaphoreHandleDesc_st {
    hipExternalSemaphoreHandleType type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
    } handle;
    unsigned int flags;
} hipExternalSemaphoreHandleDesc;

/* A timeline semaphore's value to signal or wait for: params.fence.value
 * (HIP 5 imports no timeline semaphore, but one exported by Vulkan as an
 * opaque descriptor is one). */
typedef struct hipExternalSemaphoreSignalParams_st {
    struct {
        struct {
            unsigned long long value;
        } fence;
        struct {
            unsigned long long key;
        } keyedMutex;
        unsigned int reserved[12];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} hipExternalSemaphoreSignalParams;

typedef struct hipExternalSemaphoreWaitParams_st {
    struct {
        struct {
            unsigned long long value;
        } fence;
        struct {
            unsigned long long key;
            unsigned int timeoutMs;
        } keyedMutex;
        unsigned int reserved[10];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} hipExternalSemaphoreWaitParams;

typedef struct hipExternalMemoryBufferDesc_st {
    unsigned long long offset;
    unsigned long long size;
    unsigned int flags;
} hipExternalMemoryBufferDesc;
#endif

typedef void *hipDeviceptr_t;
typedef void *hipExternalMemory_t;
typedef void *hipExternalSemaphore_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;

#define hipStreamNonBlocking 0x01
#define hipEventDisableTiming  0x2
#define hipStreamPerThread ((hipStream_t)2)

/* What the shim calls itself (the current device; an event barrier). */
hipError_t hipGetDevice(int *deviceId);
hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);
hipError_t hipEventDestroy(hipEvent_t event);

#endif /* DS_ABI_HIP_H */
