/*
 * abi/cuda_runtime.h — the part of the CUDA runtime API
 * (cuda_runtime_api.h, CUDA 13) that cuda_runtime.c and cuda_runtime.def
 * use: error codes, handles, flags, the structures the shim reads, and the
 * functions it calls itself.  The shim must build with a C compiler and
 * libc alone, and nothing links to libcudart, so the few declarations it
 * needs are its own.  Left out: everything else; structures the shim only
 * passes on stay incomplete.
 *
 * tests/abi checks every declaration against the real header, as
 * abi/cuda.h says (DS_ABI_SDK_TYPES).
 */
#ifndef DS_ABI_CUDA_RUNTIME_H
#define DS_ABI_CUDA_RUNTIME_H

#include <stddef.h>

/* The runtime version the tables are written against: a driver entry point
 * fetched through the runtime is the variant of this version. */
#define CUDART_VERSION 13000

#ifndef DS_ABI_SDK_TYPES
enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaDriverEntryPointQueryResult {
    cudaDriverEntryPointSuccess = 0,
    cudaDriverEntryPointSymbolNotFound = 1,
    cudaDriverEntryPointVersionNotSufficent = 2
};
/* Only the file descriptor's types matter to the shim. */
enum cudaExternalMemoryHandleType { cudaExternalMemoryHandleTypeOpaqueFd = 1 };
enum cudaExternalSemaphoreHandleType {
    cudaExternalSemaphoreHandleTypeOpaqueFd = 1,
    cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd = 9
};

struct dim3 {
    unsigned int x, y, z;
};

struct cudaExternalMemoryHandleDesc {
    enum cudaExternalMemoryHandleType type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciBufObject;
    } handle;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
};

struct cudaExternalSemaphoreHandleDesc {
    enum cudaExternalSemaphoreHandleType type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciSyncObj;
    } handle;
    unsigned int flags;
    unsigned int reserved[16];
};

/* A timeline semaphore's value to signal or wait for: params.fence.value. */
struct cudaExternalSemaphoreSignalParams {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
        } keyedMutex;
        unsigned int reserved[12];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
};

struct cudaExternalSemaphoreWaitParams {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
            unsigned int timeoutMs;
        } keyedMutex;
        unsigned int reserved[10];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
};

struct cudaExternalMemoryBufferDesc {
    unsigned long long offset;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
};
#endif

typedef enum cudaError cudaError_t;
typedef struct dim3 dim3;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUexternalMemory_st *cudaExternalMemory_t;
typedef struct CUexternalSemaphore_st *cudaExternalSemaphore_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;

#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaEventDisableTiming 0x02

typedef void (*cudaHostFn_t)(void *userData);
typedef void (*cudaStreamCallback_t)(cudaStream_t stream, cudaError_t status, void *userData);

/* What the shim calls itself (the current device; an event barrier). */
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);

#endif /* DS_ABI_CUDA_RUNTIME_H */
