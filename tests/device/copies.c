/*
 * Copies and handoffs, for the copy-accounting tests: `copies MODE`.  Real
 * CUDA runtime calls only.
 *   zero_copy    a device tensor shared as is
 *   to_host      a device buffer copied to host memory, then exported as a
 *                CPU tensor (the export-from-copy case), imported
 *   on_device    a device buffer filled by a copy from pinned host memory
 *                (as jax.device_put does), then exported as it is
 *   flagged      a CPU tensor exported with DLPACK_FLAG_BITMASK_IS_COPIED
 *   roundtrip    libjaxlike copies its device data to the host, libtorchlike
 *                copies the same host bytes to its device memory
 *   untracked    a host-to-host cudaMemcpy of plain malloc memory, then a
 *                copy out of a tracked buffer that no tensor shares
 *   forms        2D, peer and cudaMemcpyDefault copies between tracked buffers
 *   shared_copy  a copy that reads a live share
 *   managed      copies into and out of managed and pinned memory
 *   repeated     the same async copy between two tracked buffers five
 *                times, and between two untracked ones three times, on a
 *                stream (a repeat takes the hooks' way that calls nothing
 *                unless copy events are written)
 */
#include <cuda_runtime_api.h>
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"

#define N (64 * 1024)
int jaxlike_to_host(void *host, size_t n);
int torchlike_from_host(const void *host, size_t n);

static int64_t shape[1] = {N};

static void drop(DLManagedTensor *t)
{
    free(t);
}

static DLManagedTensor *tensor_on(void *data, int device_type)
{
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor.data = data;
    t->dl_tensor.device.device_type = device_type;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLUInt;
    t->dl_tensor.dtype.bits = 8;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = drop;
    return t;
}

static void share(DLManagedTensor *t)
{
    dlshim_export(t, "producer");
    dlshim_import(t, "consumer");
    t->deleter(t);
}

static void versioned_flagged(void *data)
{
    DLManagedTensorVersioned *t = calloc(1, sizeof(*t));
    t->version.major = 1;
    t->flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    t->dl_tensor.data = data;
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLUInt;
    t->dl_tensor.dtype.bits = 8;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = (void (*)(DLManagedTensorVersioned *))free;
    dlshim_export_versioned(t, "producer");
    dlshim_import_versioned(t, "consumer");
    t->deleter(t);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "zero_copy";
    char *host = malloc(N), *host2 = malloc(N);
    memset(host, 0, N);
    void *dev, *dev2;
    CUDA_CHECK(cudaMalloc(&dev, N));
    CUDA_CHECK(cudaMalloc(&dev2, N));
    CUDA_CHECK(cudaMemset(dev, 7, N));
    if (!strcmp(mode, "zero_copy")) {
        share(tensor_on(dev, kDLCUDA));
    } else if (!strcmp(mode, "to_host")) {
        CUDA_CHECK(cudaMemcpy(host, dev, N, cudaMemcpyDeviceToHost));
        share(tensor_on(host, kDLCPU));
    } else if (!strcmp(mode, "on_device")) {
        void *pinned;
        CUDA_CHECK(cudaMallocHost(&pinned, N));
        memset(pinned, 3, N);
        CUDA_CHECK(cudaMemcpy(dev, pinned, N, cudaMemcpyHostToDevice));
        share(tensor_on(dev, kDLCUDA));
        CUDA_CHECK(cudaFreeHost(pinned));
    } else if (!strcmp(mode, "flagged")) {
        memset(host, 1, N);
        versioned_flagged(host);
    } else if (!strcmp(mode, "roundtrip")) {
        if (jaxlike_to_host(host, N) != 0 || torchlike_from_host(host, N) != 0)
            return 1;
    } else if (!strcmp(mode, "untracked")) {
        CUDA_CHECK(cudaMemcpy(host2, host, N, cudaMemcpyHostToHost));
        CUDA_CHECK(cudaMemcpy(host, dev, N, cudaMemcpyDeviceToHost));
    } else if (!strcmp(mode, "forms")) {
        CUDA_CHECK(cudaMemcpy2D(dev2, 256, dev, 256, 128, 16, cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaMemcpyPeer(dev2, 0, dev, 0, 1024));
        CUDA_CHECK(cudaMemcpy(dev2, host, 2048, cudaMemcpyDefault));
    } else if (!strcmp(mode, "shared_copy")) {
        DLManagedTensor *t = tensor_on(dev, kDLCUDA);
        dlshim_export(t, "producer");
        CUDA_CHECK(cudaMemcpy(host, dev, N, cudaMemcpyDeviceToHost));
        t->deleter(t);
    } else if (!strcmp(mode, "managed")) {
        void *managed, *pinned;
        CUDA_CHECK(cudaMallocManaged(&managed, 4096, cudaMemAttachGlobal));
        CUDA_CHECK(cudaMallocHost(&pinned, 4096));
        CUDA_CHECK(cudaMemcpy(managed, dev, 4096, cudaMemcpyDefault));
        CUDA_CHECK(cudaMemcpy(pinned, managed, 4096, cudaMemcpyDefault));
        CUDA_CHECK(cudaFree(managed));
        CUDA_CHECK(cudaFreeHost(pinned));
    } else if (!strcmp(mode, "repeated")) {
        cudaStream_t s;
        CUDA_CHECK(cudaStreamCreate(&s));
        for (int i = 0; i < 5; i++)
            CUDA_CHECK(cudaMemcpyAsync(dev2, dev, N, cudaMemcpyDeviceToDevice, s));
        for (int i = 0; i < 3; i++)
            CUDA_CHECK(cudaMemcpyAsync(host2, host, N, cudaMemcpyHostToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        CUDA_CHECK(cudaStreamDestroy(s));
    } else {
        printf("unknown mode %s\n", mode);
        return 2;
    }
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaFree(dev2));
    printf("done %d\n", host[0]);
    free(host);
    free(host2);
    return 0;
}
