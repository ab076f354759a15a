/*
 * CUDA runtime allocations, for the device tests: `rt_alloc MODE`.  Written
 * against the CUDA 13 headers with real API calls only, so it runs the same
 * on the simulated device (LD_LIBRARY_PATH=build/simdev) and on a GPU.
 *
 *   direct | dlsym     every allocation and free function, called directly
 *                      or through dlopen("libcudart.so.13") + dlsym
 *   entry_point        driver allocations through cudaGetDriverEntryPoint
 *   threads N          8 threads x N cudaMalloc/cudaFree
 *   errors             NULL and bogus arguments: the runtime's own errors
 *   share_then_free    a consumer imports a tensor inside a buffer, then the
 *                      producer frees the buffer before the consumer reads it
 *   double_free | interior_free | leak_shared | cached_block
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <dlshim.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"

/* The runtime functions this program uses, reached one way or the other. */
static struct {
    __typeof__(cudaMalloc) *malloc_;
    __typeof__(cudaMallocAsync) *malloc_async;
    __typeof__(cudaMallocFromPoolAsync) *malloc_from_pool;
    __typeof__(cudaMallocManaged) *malloc_managed;
    __typeof__(cudaMallocPitch) *malloc_pitch;
    __typeof__(cudaMallocHost) *malloc_host;
    __typeof__(cudaHostAlloc) *host_alloc;
    __typeof__(cudaFree) *free_;
    __typeof__(cudaFreeAsync) *free_async;
    __typeof__(cudaFreeHost) *free_host;
} api;

static void bind_direct(void)
{
    api.malloc_ = cudaMalloc;
    api.malloc_async = cudaMallocAsync;
    api.malloc_from_pool = cudaMallocFromPoolAsync;
    api.malloc_managed = cudaMallocManaged;
    api.malloc_pitch = cudaMallocPitch;
    api.malloc_host = cudaMallocHost;
    api.host_alloc = cudaHostAlloc;
    api.free_ = cudaFree;
    api.free_async = cudaFreeAsync;
    api.free_host = cudaFreeHost;
}

static void bind_dlsym(void)
{
    void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        exit(1);
    }
#define SYM(field, name) *(void **)&api.field = dlsym(h, name)
    SYM(malloc_, "cudaMalloc");
    SYM(malloc_async, "cudaMallocAsync");
    SYM(malloc_from_pool, "cudaMallocFromPoolAsync");
    SYM(malloc_managed, "cudaMallocManaged");
    SYM(malloc_pitch, "cudaMallocPitch");
    SYM(malloc_host, "cudaMallocHost");
    SYM(host_alloc, "cudaHostAlloc");
    SYM(free_, "cudaFree");
    SYM(free_async, "cudaFreeAsync");
    SYM(free_host, "cudaFreeHost");
#undef SYM
}

/* One of each: 7 allocations, 7 frees. */
static void every_function(void)
{
    void *d, *a, *p, *m, *pitched, *h1, *h2;
    size_t pitch;
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(api.malloc_(&d, 1 << 20));
    CUDA_CHECK(api.malloc_async(&a, 4096, s));
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CUDA_CHECK(api.malloc_from_pool(&p, 8192, pool, s));
    CUDA_CHECK(api.malloc_managed(&m, 512, cudaMemAttachGlobal));
    CUDA_CHECK(api.malloc_pitch(&pitched, &pitch, 100, 10));
    CUDA_CHECK(api.malloc_host(&h1, 256));
    CUDA_CHECK(api.host_alloc(&h2, 128, cudaHostAllocDefault));
    CUDA_CHECK(api.free_(d));
    CUDA_CHECK(api.free_async(a, s));
    CUDA_CHECK(api.free_async(p, s));
    CUDA_CHECK(api.free_(m));
    CUDA_CHECK(api.free_(pitched));
    CUDA_CHECK(api.free_host(h1));
    CUDA_CHECK(api.free_host(h2));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaStreamDestroy(s));
    printf("pitch %zu\n", pitch);
}

static void entry_point(void)
{
    CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
    CUresult (*release)(CUdeviceptr) = NULL;
    enum cudaDriverEntryPointQueryResult status;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemAlloc", (void **)&alloc, 13000,
                                           cudaEnableDefault, &status));
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemFree", (void **)&release, 13000,
                                           cudaEnableDefault, &status));
    CUDA_CHECK(cudaFree(NULL)); /* make the runtime set up its context */
    CUdeviceptr p;
    if (alloc(&p, 2048) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS) {
        printf("driver calls failed\n");
        exit(1);
    }
}

static int per_thread;

static void *churn(void *arg)
{
    (void)arg;
    for (int i = 0; i < per_thread; i++) {
        void *p;
        CUDA_CHECK(cudaMalloc(&p, (size_t)(64 + i)));
        CUDA_CHECK(cudaFree(p));
    }
    return NULL;
}

static void threads(int n)
{
    pthread_t t[8];
    per_thread = n;
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
}

static void errors(void)
{
    printf("malloc NULL: %d\n", (int)cudaMalloc(NULL, 16));
    printf("free bogus: %d\n", (int)cudaFree((void *)(uintptr_t)0x1234));
    printf("free NULL: %d\n", (int)cudaFree(NULL));
    printf("free host bogus: %d\n", (int)cudaFreeHost((void *)(uintptr_t)0x5678));
}

/* ---- a DLPack tensor living inside a device buffer ------------------------------ */

static int64_t shape[1] = {16};
static int released;

static void tensor_deleter(DLManagedTensor *t)
{
    released++;
    free(t);
}

/* 16 floats at element offset 16 of buf, exported by "producer". */
static DLManagedTensor *export_inside(float *buf)
{
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor.data = buf + 16;
    t->dl_tensor.device.device_type = kDLCUDA;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLFloat;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = tensor_deleter;
    dlshim_export(t, "producer");
    return t;
}

static float *filled_buffer(void)
{
    float host[64];
    for (int i = 0; i < 64; i++)
        host[i] = (float)i;
    float *buf;
    CUDA_CHECK(cudaMalloc((void **)&buf, sizeof(host)));
    CUDA_CHECK(cudaMemcpy(buf, host, sizeof(host), cudaMemcpyHostToDevice));
    return buf;
}

static void share_then_free(void)
{
    float *buf = filled_buffer();
    DLManagedTensor *t = export_inside(buf);
    dlshim_import(t, "consumer");
    printf("producer frees: %d\n", (int)cudaFree(buf)); /* the bug: the consumer still holds it */
    float seen[16];
    /* A GPU refuses the read (an invalid value: the memory is gone); the
     * simulated device reads its poison. */
    cudaError_t e = cudaMemcpy(seen, t->dl_tensor.data, sizeof(seen), cudaMemcpyDeviceToHost);
    float sum = 0;
    for (int i = 0; i < 16; i++)
        sum += e == cudaSuccess ? seen[i] : 0;
    printf("consumer reads: %d, sum %g (expected 376)\n", (int)e, sum);
    t->deleter(t);
    printf("released %d\n", released);
}

static void double_free(void)
{
    void *p;
    CUDA_CHECK(cudaMalloc(&p, 256));
    printf("first free: %d\n", (int)cudaFree(p));
    printf("second free: %d\n", (int)cudaFree(p));
}

static void interior_free(void)
{
    char *p;
    CUDA_CHECK(cudaMalloc((void **)&p, 1024));
    printf("interior free: %d\n", (int)cudaFree(p + 64));
    printf("real free: %d\n", (int)cudaFree(p));
}

static void leak_shared(void)
{
    float *buf = filled_buffer();
    DLManagedTensor *t = export_inside(buf);
    dlshim_import(t, "consumer"); /* and never released */
}

/* A caching allocator hands out tensors carved from one block. */
static void cached_block(void)
{
    float *block;
    CUDA_CHECK(cudaMalloc((void **)&block, 1 << 20));
    DLManagedTensor *a = export_inside(block);
    DLManagedTensor *b = export_inside(block + 1024);
    dlshim_import(a, "consumer");
    dlshim_import(b, "consumer");
    a->deleter(a);
    b->deleter(b);
    CUDA_CHECK(cudaFree(block));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "direct";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "direct") || !strcmp(mode, "dlsym")) {
        if (!strcmp(mode, "direct"))
            bind_direct();
        else
            bind_dlsym();
        every_function();
    } else if (!strcmp(mode, "entry_point")) {
        entry_point();
    } else if (!strcmp(mode, "threads")) {
        threads(argc > 2 ? atoi(argv[2]) : 100);
    } else if (!strcmp(mode, "errors")) {
        errors();
    } else if (!strcmp(mode, "share_then_free")) {
        share_then_free();
    } else if (!strcmp(mode, "double_free")) {
        double_free();
    } else if (!strcmp(mode, "interior_free")) {
        interior_free();
    } else if (!strcmp(mode, "leak_shared")) {
        leak_shared();
    } else if (!strcmp(mode, "cached_block")) {
        cached_block();
    } else if (!strcmp(mode, "no_device")) {
        void *p;
        printf("malloc: %d\n", (int)cudaMalloc(&p, 16));
    } else {
        printf("unknown mode %s\n", mode);
        return 2;
    }
    printf("done\n");
    return 0;
}
