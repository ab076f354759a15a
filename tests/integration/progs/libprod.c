/* The producer library of the integration tests (see prod.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "prod.h"

static atomic_int live;

typedef struct {
    int64_t shape[2];
    float *data;
} ctx;

static void free_ctx(ctx *c)
{
    free(c->data);
    free(c);
    atomic_fetch_sub(&live, 1);
}

static void delete_legacy(DLManagedTensor *t)
{
    free_ctx(t->manager_ctx);
    free(t);
}

static void delete_versioned(DLManagedTensorVersioned *t)
{
    free_ctx(t->manager_ctx);
    free(t);
}

static ctx *make_ctx(int64_t rows, int64_t cols)
{
    ctx *c = calloc(1, sizeof(*c));
    c->shape[0] = rows;
    c->shape[1] = cols;
    c->data = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++)
        c->data[i] = (float)i;
    atomic_fetch_add(&live, 1);
    return c;
}

static DLTensor tensor_of(ctx *c, int ndim)
{
    DLTensor t;
    memset(&t, 0, sizeof(t));
    t.data = c->data;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = c->shape;
    return t;
}

DLManagedTensor *prod_make(int64_t rows, int64_t cols)
{
    ctx *c = make_ctx(rows, cols);
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor = tensor_of(c, 2);
    t->manager_ctx = c;
    t->deleter = delete_legacy;
    dlshim_export(t, "prod");
    return t;
}

DLManagedTensorVersioned *prod_make_versioned(int64_t n, uint64_t flags)
{
    ctx *c = make_ctx(n, 1);
    DLManagedTensorVersioned *t = calloc(1, sizeof(*t));
    t->version.major = 1;
    t->version.minor = 1;
    t->dl_tensor = tensor_of(c, 1);
    t->flags = flags;
    t->manager_ctx = c;
    t->deleter = delete_versioned;
    dlshim_export_versioned(t, "prod");
    return t;
}

DLManagedTensorVersioned *prod_make_future_version(void)
{
    ctx *c = make_ctx(2, 2);
    DLManagedTensorVersioned *t = calloc(1, sizeof(*t));
    t->version.major = 2;
    t->dl_tensor = tensor_of(c, 2);
    t->manager_ctx = c;
    t->deleter = delete_versioned;
    return t;
}

/* The shape at the end of a readable page and the strides right after it,
 * running on into a page that is not: readable where they start, not where
 * they end.  The two pages are never unmapped (a test process). */
static void strides_past_shape_page(DLTensor *d)
{
    long page = 4096;
    char *p = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED || mprotect(p + page, (size_t)page, PROT_NONE) != 0)
        abort();
    int64_t *shape = (int64_t *)(p + page - 3 * sizeof(int64_t));
    memcpy(shape, d->shape, 2 * sizeof(int64_t));
    d->shape = shape;
    d->strides = shape + 2; /* its second element is on the PROT_NONE page */
    d->strides[0] = d->shape[1];
}

DLManagedTensor *prod_make_malformed(const char *kind)
{
    ctx *c = make_ctx(2, 3);
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor = tensor_of(c, 2);
    t->manager_ctx = c;
    t->deleter = delete_legacy;
    DLTensor *d = &t->dl_tensor;
    if (!strcmp(kind, "negative_ndim"))
        d->ndim = -1;
    else if (!strcmp(kind, "huge_ndim"))
        d->ndim = 1000000;
    else if (!strcmp(kind, "null_shape"))
        d->shape = NULL;
    else if (!strcmp(kind, "negative_extent"))
        c->shape[1] = -3;
    else if (!strcmp(kind, "null_data"))
        d->data = NULL;
    else if (!strcmp(kind, "unknown_device"))
        d->device.device_type = (DLDeviceType)99;
    else if (!strcmp(kind, "unknown_dtype"))
        d->dtype.code = 99;
    else if (!strcmp(kind, "zero_bits"))
        d->dtype.bits = 0;
    else if (!strcmp(kind, "bad_shape_pointer"))
        d->shape = (int64_t *)(uintptr_t)0x10;
    else if (!strcmp(kind, "bad_strides_pointer"))
        d->strides = (int64_t *)(uintptr_t)0xdead0000;
    else if (!strcmp(kind, "strides_past_shape_page"))
        strides_past_shape_page(d);
    return t;
}

int prod_live(void)
{
    return atomic_load(&live);
}
