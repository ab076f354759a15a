/*
 * HIP allocations, for the device tests: `hip_alloc direct|dlsym|getproc`
 * allocates and frees once with each HIP allocation function.  Real API
 * calls only; hipGetProcAddress is HIP 6.2, found at run time since
 * Debian's HIP is 5.2 (the simulated device has it).
 */
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef hipError_t get_proc_address(const char *symbol, void **pfn, int hipVersion,
                                    uint64_t flags, void *symbolStatus);

#define CHECK(call)                                          \
    do {                                                     \
        hipError_t e_ = (call);                              \
        if (e_ != hipSuccess) {                              \
            printf("%s failed: %d\n", #call, (int)e_);       \
            exit(1);                                         \
        }                                                    \
    } while (0)

static struct {
    __typeof__(hipMalloc) *malloc_;
    __typeof__(hipMallocAsync) *malloc_async;
    __typeof__(hipMallocManaged) *malloc_managed;
    __typeof__(hipHostMalloc) *host_malloc;
    __typeof__(hipExtMallocWithFlags) *ext_malloc;
    __typeof__(hipFree) *free_;
    __typeof__(hipFreeAsync) *free_async;
    __typeof__(hipHostFree) *host_free;
} api;

static void *lookup(void *handle, const char *name, int via_proc)
{
    void *f = NULL;
    if (via_proc) {
        get_proc_address *get = NULL;
        *(void **)&get = dlsym(RTLD_DEFAULT, "hipGetProcAddress");
        if (!get) {
            printf("hipGetProcAddress: not in this HIP runtime\n");
            exit(1);
        }
        CHECK(get(name, &f, 60200, 0, NULL));
    } else
        f = dlsym(handle, name);
    return f;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "direct";
    if (!strcmp(mode, "direct")) {
        api.malloc_ = hipMalloc;
        api.malloc_async = hipMallocAsync;
        api.malloc_managed = hipMallocManaged;
        api.host_malloc = hipHostMalloc;
        api.ext_malloc = hipExtMallocWithFlags;
        api.free_ = hipFree;
        api.free_async = hipFreeAsync;
        api.host_free = hipHostFree;
    } else {
        int via_proc = !strcmp(mode, "getproc");
        void *h = via_proc ? NULL : dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
        *(void **)&api.malloc_ = lookup(h, "hipMalloc", via_proc);
        *(void **)&api.malloc_async = lookup(h, "hipMallocAsync", via_proc);
        *(void **)&api.malloc_managed = lookup(h, "hipMallocManaged", via_proc);
        *(void **)&api.host_malloc = lookup(h, "hipHostMalloc", via_proc);
        *(void **)&api.ext_malloc = lookup(h, "hipExtMallocWithFlags", via_proc);
        *(void **)&api.free_ = lookup(h, "hipFree", via_proc);
        *(void **)&api.free_async = lookup(h, "hipFreeAsync", via_proc);
        *(void **)&api.host_free = lookup(h, "hipHostFree", via_proc);
    }
    void *d, *a, *m, *h1, *e;
    hipStream_t s;
    CHECK(hipStreamCreate(&s));
    CHECK(api.malloc_(&d, 1 << 16));
    CHECK(api.malloc_async(&a, 4096, s));
    CHECK(api.malloc_managed(&m, 512, hipMemAttachGlobal));
    CHECK(api.host_malloc(&h1, 256, 0));
    CHECK(api.ext_malloc(&e, 1024, 0));
    CHECK(api.free_(d));
    CHECK(api.free_async(a, s));
    CHECK(api.free_(m));
    CHECK(api.host_free(h1));
    CHECK(api.free_(e));
    CHECK(hipStreamSynchronize(s));
    CHECK(hipStreamDestroy(s));
    printf("done\n");
    return 0;
}
