/*
 * CUDA driver allocations, for the device tests: `drv_alloc direct|dlsym|getproc`
 * allocates and frees once with each driver allocation function, reached
 * directly, through dlopen("libcuda.so.1") + dlsym, or through
 * cuGetProcAddress.  Real API calls only.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                            \
    do {                                                       \
        CUresult e_ = (call);                                  \
        if (e_ != CUDA_SUCCESS) {                              \
            printf("%s failed: %d\n", #call, (int)e_);         \
            exit(1);                                           \
        }                                                      \
    } while (0)

static struct {
    __typeof__(cuMemAlloc) *alloc;
    __typeof__(cuMemAllocPitch) *alloc_pitch;
    __typeof__(cuMemAllocAsync) *alloc_async;
    __typeof__(cuMemAllocManaged) *alloc_managed;
    __typeof__(cuMemAllocHost) *alloc_host;
    __typeof__(cuMemHostAlloc) *host_alloc;
    __typeof__(cuMemFree) *free_;
    __typeof__(cuMemFreeAsync) *free_async;
    __typeof__(cuMemFreeHost) *free_host;
} api;

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "direct";
    CHECK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    if (!strcmp(mode, "direct")) {
        api.alloc = cuMemAlloc;
        api.alloc_pitch = cuMemAllocPitch;
        api.alloc_async = cuMemAllocAsync;
        api.alloc_managed = cuMemAllocManaged;
        api.alloc_host = cuMemAllocHost;
        api.host_alloc = cuMemHostAlloc;
        api.free_ = cuMemFree;
        api.free_async = cuMemFreeAsync;
        api.free_host = cuMemFreeHost;
    } else if (!strcmp(mode, "dlsym")) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
#define SYM(field, name) *(void **)&api.field = dlsym(h, name)
        SYM(alloc, "cuMemAlloc_v2");
        SYM(alloc_pitch, "cuMemAllocPitch_v2");
        SYM(alloc_async, "cuMemAllocAsync");
        SYM(alloc_managed, "cuMemAllocManaged");
        SYM(alloc_host, "cuMemAllocHost_v2");
        SYM(host_alloc, "cuMemHostAlloc");
        SYM(free_, "cuMemFree_v2");
        SYM(free_async, "cuMemFreeAsync");
        SYM(free_host, "cuMemFreeHost");
#undef SYM
    } else {
        CUdriverProcAddressQueryResult status;
#define PROC(field, name) CHECK(cuGetProcAddress(name, (void **)&api.field, 13000, 0, &status))
        PROC(alloc, "cuMemAlloc");
        PROC(alloc_pitch, "cuMemAllocPitch");
        PROC(alloc_async, "cuMemAllocAsync");
        PROC(alloc_managed, "cuMemAllocManaged");
        PROC(alloc_host, "cuMemAllocHost");
        PROC(host_alloc, "cuMemHostAlloc");
        PROC(free_, "cuMemFree");
        PROC(free_async, "cuMemFreeAsync");
        PROC(free_host, "cuMemFreeHost");
#undef PROC
        /* Version 13000 answers "cuCtxSynchronize" with the new function,
         * which takes the context: handed out as it is (a wrapper of the
         * old one would drop the context), and it works. */
        __typeof__(cuCtxSynchronize_v2) *sync_ctx;
        CHECK(cuGetProcAddress("cuCtxSynchronize", (void **)&sync_ctx, 13000, 0, &status));
        if (sync_ctx != cuCtxSynchronize_v2) {
            printf("cuCtxSynchronize at version 13000: %p, not cuCtxSynchronize_v2\n",
                   (void *)sync_ctx);
            return 1;
        }
        CHECK(sync_ctx(ctx));
    }
    CUdeviceptr d, a, m, pitched;
    void *h1, *h2;
    size_t pitch;
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(api.alloc(&d, 1 << 16));
    CHECK(api.alloc_pitch(&pitched, &pitch, 100, 10, 4));
    CHECK(api.alloc_async(&a, 4096, s));
    CHECK(api.alloc_managed(&m, 512, CU_MEM_ATTACH_GLOBAL));
    CHECK(api.alloc_host(&h1, 256));
    CHECK(api.host_alloc(&h2, 128, 0));
    CHECK(api.free_(d));
    CHECK(api.free_(pitched));
    CHECK(api.free_async(a, s));
    CHECK(api.free_(m));
    CHECK(api.free_host(h1));
    CHECK(api.free_host(h2));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy(s));
    printf("done\n");
    return 0;
}
