/*
 * bench/calls.c — the cost of one interposed call, measured by bench/run
 * with and without the shim preloaded.  Real CUDA and DLPack calls only, so
 * the same program runs on the simulated device and on a GPU.
 *
 *   calls MODE N     prints {"mode":…,"ns":<per operation>}
 *
 *   alloc_direct   cudaMalloc + cudaFree (the program's own GOT)
 *   alloc_dlsym    the same through dlsym(dlopen("libcudart.so"))
 *   alloc_getproc  cuMemAlloc + cuMemFree through cuGetProcAddress
 *   cycle          dlshim_export + dlshim_import + deleter (annotation API)
 *   trampoline     the deleter call alone (the shim's trampoline in front)
 *   host_free [S]  malloc(64) + free, with S tensors in host memory exported,
 *                  imported and held (S = 0: one shared and released first,
 *                  so the free hook is in place with no share live)
 *   host_free_cold the same with no tensor ever exported (no free hook)
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlshim.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int64_t shape[2] = {1000, 1000};
static float data[16];
static long deleted;

static void deleter(DLManagedTensor *t)
{
    (void)t;
    deleted++;
}

static DLManagedTensor make(DLManagedTensor *t)
{
    memset(t, 0, sizeof(*t));
    t->dl_tensor = (DLTensor){data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
    t->deleter = deleter;
    return *t;
}

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);

static int fail(const char *what)
{
    fprintf(stderr, "calls: %s failed\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return fail("usage: calls MODE N; the arguments");
    const char *mode = argv[1];
    long n = atol(argv[2]);
    double spent = 0;
    if (!strcmp(mode, "alloc_direct") || !strcmp(mode, "alloc_dlsym")) {
        malloc_fn m = cudaMalloc;
        free_fn f = cudaFree;
        if (!strcmp(mode, "alloc_dlsym")) {
            void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
            m = h ? (malloc_fn)dlsym(h, "cudaMalloc") : NULL;
            f = h ? (free_fn)dlsym(h, "cudaFree") : NULL;
            if (!m || !f)
                return fail("dlsym of cudaMalloc");
        }
        void *p;
        if (m(&p, 256) != cudaSuccess || f(p) != cudaSuccess)
            return fail("cudaMalloc");
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            m(&p, 256);
            f(p);
        }
        spent = now_ns() - t0;
    } else if (!strcmp(mode, "alloc_getproc")) {
        CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
        CUresult (*release)(CUdeviceptr) = NULL;
        CUdevice dev;
        CUcontext ctx;
        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
            cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx))
            return fail("cuInit");
        if (cuGetProcAddress("cuMemAlloc", (void **)&alloc, 12000, 0, NULL) != CUDA_SUCCESS ||
            cuGetProcAddress("cuMemFree", (void **)&release, 12000, 0, NULL) != CUDA_SUCCESS)
            return fail("cuGetProcAddress");
        CUdeviceptr p;
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            alloc(&p, 256);
            release(p);
        }
        spent = now_ns() - t0;
    } else if (!strcmp(mode, "cycle")) {
        DLManagedTensor t;
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            make(&t);
            dlshim_export(&t, "bench-producer");
            dlshim_import(&t, "bench-consumer");
            t.deleter(&t);
        }
        spent = now_ns() - t0;
    } else if (!strcmp(mode, "trampoline")) {
        DLManagedTensor t;
        for (long i = 0; i < n; i++) {
            make(&t);
            dlshim_export(&t, "bench-producer");
            dlshim_import(&t, "bench-consumer");
            double t0 = now_ns();
            t.deleter(&t);
            spent += now_ns() - t0;
        }
    } else if (!strcmp(mode, "host_free") || !strcmp(mode, "host_free_cold")) {
        long shares = argc > 3 ? atol(argv[3]) : 0;
        static DLManagedTensor held[1000];
        static int64_t four = 4;
        static float buffers[1000][4];
        if (shares < 0 || shares > 1000)
            return fail("the share count (0 to 1000)");
        if (!strcmp(mode, "host_free")) {
            DLManagedTensor t;
            make(&t);
            dlshim_export(&t, "bench-producer");
            dlshim_import(&t, "bench-consumer");
            t.deleter(&t);
        }
        for (long i = 0; i < shares; i++) {
            make(&held[i]);
            held[i].dl_tensor.data = buffers[i];
            held[i].dl_tensor.shape = &four;
            held[i].dl_tensor.ndim = 1;
            dlshim_export(&held[i], "bench-producer");
            dlshim_import(&held[i], "bench-consumer");
        }
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            void *volatile p = malloc(64);
            free(p);
        }
        spent = now_ns() - t0;
        for (long i = 0; i < shares; i++)
            held[i].deleter(&held[i]);
    } else {
        return fail("the mode");
    }
    if ((!strcmp(mode, "cycle") || !strcmp(mode, "trampoline")) && deleted != n)
        return fail("the deleter count");
    printf("{\"mode\":\"%s\",\"ns\":%.2f}\n", mode, spent / (double)n);
    return 0;
}
