/* Uses libprod, libcons and libbridge as an ordinary program would, with no
 * dlshim annotation: `spec_user clean|double_release|malformed|dlsym|bridge`. */
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlshim.h" /* only for DLManagedTensorVersioned on DLPack 0.6 */

DLManagedTensor *prod_make(int64_t rows, int64_t cols);
DLManagedTensor *prod_make_bad(void);
int32_t cons_take(DLManagedTensor *t, void *ctx);
void cons_drop(void);
void cons_drop_twice(void);
void bridge_share(DLManagedTensorVersioned *t, int32_t flags);
DLManagedTensorVersioned *bridge_take(void);

static int64_t shape[1] = {4};
static float data[4] = {1, 2, 3, 4};

static void drop_versioned(DLManagedTensorVersioned *t)
{
    free(t);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "clean";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "clean")) {
        printf("sum %d\n", cons_take(prod_make(2, 3), NULL));
        cons_drop();
    } else if (!strcmp(mode, "double_release")) {
        printf("sum %d\n", cons_take(prod_make(2, 3), NULL));
        cons_drop_twice();
    } else if (!strcmp(mode, "malformed")) {
        printf("sum %d\n", cons_take(prod_make_bad(), NULL));
        cons_drop();
    } else if (!strcmp(mode, "dlsym")) {
        void *h = dlopen("libprod.so", RTLD_NOW | RTLD_LOCAL);
        DLManagedTensor *(*make)(int64_t, int64_t);
        *(void **)&make = h ? dlsym(h, "prod_make") : NULL;
        if (!make) {
            printf("dlopen/dlsym failed\n");
            return 1;
        }
        printf("sum %d\n", cons_take(make(3, 3), NULL));
        cons_drop();
    } else if (!strcmp(mode, "bridge")) {
        DLManagedTensorVersioned *t = calloc(1, sizeof(*t));
        t->version.major = 1;
        t->dl_tensor.data = data;
        t->dl_tensor.device.device_type = kDLCPU;
        t->dl_tensor.ndim = 1;
        t->dl_tensor.dtype.code = kDLFloat;
        t->dl_tensor.dtype.bits = 32;
        t->dl_tensor.dtype.lanes = 1;
        t->dl_tensor.shape = shape;
        t->deleter = drop_versioned;
        bridge_share(t, 1);
        DLManagedTensorVersioned *got = bridge_take();
        printf("flags %llu\n", (unsigned long long)got->flags);
        got->deleter(got);
    } else {
        printf("unknown mode %s\n", mode);
        return 2;
    }
    printf("done\n");
    return 0;
}
