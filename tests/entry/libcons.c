/* A consumer library with no dlshim annotation: "libcons.so:cons_take(T@import,ptr)->i32"
 * takes ownership and keeps the tensor until cons_drop. */
#include <dlpack/dlpack.h>
#include <stddef.h>

int32_t cons_take(DLManagedTensor *t, void *ctx);
void cons_drop(void);
void cons_drop_twice(void);

static DLManagedTensor *kept;
static void (*kept_deleter)(DLManagedTensor *);

int32_t cons_take(DLManagedTensor *t, void *ctx)
{
    (void)ctx;
    kept = t;
    kept_deleter = t->deleter;
    if (t->dl_tensor.ndim != 2)
        return -1;
    int64_t n = t->dl_tensor.shape[0] * t->dl_tensor.shape[1];
    float sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += ((float *)t->dl_tensor.data)[i];
    return (int32_t)sum;
}

void cons_drop(void)
{
    kept_deleter(kept);
}

/* The bug: the deleter called twice. */
void cons_drop_twice(void)
{
    kept_deleter(kept);
    kept_deleter(kept);
}
