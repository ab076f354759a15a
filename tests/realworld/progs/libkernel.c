/* A kernel library of the kind the real-world cases rebuild (tests/realworld):
 * tensors whose deleter is this library's code (rw24: tvm-ffi's modules), and
 * a producer that leaves its shape on its own stack (rw19: TVM's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>

typedef struct {
    DLManagedTensor managed;
    int64_t shape[1];
    float data[];
} kernel_tensor;

static void kernel_free(DLManagedTensor *t)
{
    free(t); /* the struct, its shape and its data, allocated together */
}

/* A tensor of n floats 0, 1, 2, ..., released by this library's code. */
DLManagedTensor *kernel_make(int n)
{
    kernel_tensor *k = calloc(1, sizeof(*k) + (size_t)n * sizeof(float));
    if (!k)
        return NULL;
    for (int i = 0; i < n; i++)
        k->data[i] = (float)i;
    k->shape[0] = n;
    k->managed.dl_tensor = (DLTensor){.data = k->data, .device = {kDLCPU, 0}, .ndim = 1,
                                      .dtype = {kDLFloat, 32, 1}, .shape = k->shape};
    k->managed.deleter = kernel_free;
    return &k->managed;
}

/* The same tensor, its shape in this function's stack frame (TVM's bug) or,
 * `fixed`, beside the tensor. */
__attribute__((noinline)) DLManagedTensor *kernel_make_shaped(int n, int fixed)
{
    volatile int64_t stack_shape[2] = {n, 0};
    DLManagedTensor *t = kernel_make(n);
    if (t && !fixed)
        t->dl_tensor.shape = (int64_t *)stack_shape; /* dangling once this returns */
    return t;
}

/* Another call as deep as that one, which fills its frame (a dead one's
 * bytes become its): -8 everywhere. */
__attribute__((noinline)) int64_t kernel_other_call(void)
{
    volatile int64_t frame[64];
    for (int i = 0; i < 64; i++)
        frame[i] = -8;
    return frame[0];
}
