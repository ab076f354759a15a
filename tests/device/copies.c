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

#define N (64 * 1024)
#define CHECK(call)                                                 \
    do {                                                            \
        cudaError_t e_ = (call);                                    \
        if (e_ != cudaSuccess) {                                    \
            printf("%s failed: %d\n", #call, (int)e_);              \
            exit(1);                                                \
        }                                                           \
    } while (0)

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
    CHECK(cudaMalloc(&dev, N));
    CHECK(cudaMalloc(&dev2, N));
    CHECK(cudaMemset(dev, 7, N));
    if (!strcmp(mode, "zero_copy")) {
        share(tensor_on(dev, kDLCUDA));
    } else if (!strcmp(mode, "to_host")) {
        CHECK(cudaMemcpy(host, dev, N, cudaMemcpyDeviceToHost));
        share(tensor_on(host, kDLCPU));
    } else if (!strcmp(mode, "on_device")) {
        void *pinned;
        CHECK(cudaMallocHost(&pinned, N));
        memset(pinned, 3, N);
        CHECK(cudaMemcpy(dev, pinned, N, cudaMemcpyHostToDevice));
        share(tensor_on(dev, kDLCUDA));
        CHECK(cudaFreeHost(pinned));
    } else if (!strcmp(mode, "flagged")) {
        memset(host, 1, N);
        versioned_flagged(host);
    } else if (!strcmp(mode, "roundtrip")) {
        if (jaxlike_to_host(host, N) != 0 || torchlike_from_host(host, N) != 0)
            return 1;
    } else if (!strcmp(mode, "untracked")) {
        CHECK(cudaMemcpy(host2, host, N, cudaMemcpyHostToHost));
        CHECK(cudaMemcpy(host, dev, N, cudaMemcpyDeviceToHost));
    } else if (!strcmp(mode, "forms")) {
        CHECK(cudaMemcpy2D(dev2, 256, dev, 256, 128, 16, cudaMemcpyDeviceToDevice));
        CHECK(cudaMemcpyPeer(dev2, 0, dev, 0, 1024));
        CHECK(cudaMemcpy(dev2, host, 2048, cudaMemcpyDefault));
    } else if (!strcmp(mode, "shared_copy")) {
        DLManagedTensor *t = tensor_on(dev, kDLCUDA);
        dlshim_export(t, "producer");
        CHECK(cudaMemcpy(host, dev, N, cudaMemcpyDeviceToHost));
        t->deleter(t);
    } else if (!strcmp(mode, "managed")) {
        void *managed, *pinned;
        CHECK(cudaMallocManaged(&managed, 4096, cudaMemAttachGlobal));
        CHECK(cudaMallocHost(&pinned, 4096));
        CHECK(cudaMemcpy(managed, dev, 4096, cudaMemcpyDefault));
        CHECK(cudaMemcpy(pinned, managed, 4096, cudaMemcpyDefault));
        CHECK(cudaFree(managed));
        CHECK(cudaFreeHost(pinned));
    } else if (!strcmp(mode, "repeated")) {
        cudaStream_t s;
        CHECK(cudaStreamCreate(&s));
        for (int i = 0; i < 5; i++)
            CHECK(cudaMemcpyAsync(dev2, dev, N, cudaMemcpyDeviceToDevice, s));
        for (int i = 0; i < 3; i++)
            CHECK(cudaMemcpyAsync(host2, host, N, cudaMemcpyHostToHost, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaStreamDestroy(s));
    } else {
        printf("unknown mode %s\n", mode);
        return 2;
    }
    CHECK(cudaFree(dev));
    CHECK(cudaFree(dev2));
    printf("done %d\n", host[0]);
    free(host);
    free(host2);
    return 0;
}
