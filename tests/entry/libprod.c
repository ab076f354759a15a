/* A producer library with no dlshim annotation at all, traced only through
 * DLSHIM_ENTRY specs: "libprod.so:prod_make(i64,i64)->T@export". */
#include <dlpack/dlpack.h>
#include <stdlib.h>

DLManagedTensor *prod_make(int64_t rows, int64_t cols);
DLManagedTensor *prod_make_bad(void);

typedef struct {
    int64_t shape[2];
    float *data;
} ctx;

static void delete_tensor(DLManagedTensor *t)
{
    ctx *c = t->manager_ctx;
    free(c->data);
    free(c);
    free(t);
}

DLManagedTensor *prod_make(int64_t rows, int64_t cols)
{
    ctx *c = calloc(1, sizeof(*c));
    DLManagedTensor *t = calloc(1, sizeof(*t));
    c->shape[0] = rows;
    c->shape[1] = cols;
    c->data = calloc((size_t)(rows * cols), sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++)
        c->data[i] = 1.0f;
    t->dl_tensor.data = c->data;
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.ndim = 2;
    t->dl_tensor.dtype.code = kDLFloat;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = c->shape;
    t->manager_ctx = c;
    t->deleter = delete_tensor;
    return t;
}

/* ndim -1: a malformed tensor. */
DLManagedTensor *prod_make_bad(void)
{
    DLManagedTensor *t = prod_make(1, 1);
    t->dl_tensor.ndim = -1;
    return t;
}
