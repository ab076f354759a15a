/* A program that exchanges DLPack tensors through (test-double) capsules
 * the way Python extensions do.  The Makefile links it as PIE, non-PIE,
 * -fno-plt and full RELRO; under the shim each must show an export, an
 * import and a release (GOT patching of the executable itself).  With the
 * argument "reuse", the scenario of reuse() below. */
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakepy.h"

static int64_t shape[1] = {4};
static float data[4] = {1, 2, 3, 4};

static void delete_tensor(DLManagedTensor *t)
{
    free(t);
}

/* The producer's capsule destructor, as the DLPack spec prescribes. */
static void destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "used_dltensor"))
        return;
    DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
    if (t)
        t->deleter(t);
}

static void keep_tensor(DLManagedTensor *t)
{
    (void)t; /* a static tensor: nothing to free */
}

/* A capsule around `t` (NULL: a new tensor on the heap). */
static PyObject *produce_in(DLManagedTensor *t)
{
    if (!t)
        t = calloc(1, sizeof(*t));
    t->dl_tensor.data = data;
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLFloat;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = t->deleter ? t->deleter : delete_tensor;
    return PyCapsule_New(t, "dltensor", destructor);
}

static PyObject *produce(void)
{
    return produce_in(NULL);
}

/* A consumer that opens one capsule, drops it, and renames another made at
 * the same address without opening it: the rename's tensor is the second
 * capsule's, never the first's.  The first tensor is static, so the second
 * cannot reuse its address (sanitizer allocators hand a freed block straight
 * back).  Prints whether the capsule's address was reused. */
static int reuse(void)
{
    static DLManagedTensor kept = {.deleter = keep_tensor};
    PyObject *first = produce_in(&kept);
    PyCapsule_GetPointer(first, "dltensor");
    fake_capsule_free(first); /* unconsumed: its destructor releases the tensor */
    PyObject *second = produce();
    PyCapsule_SetName(second, "used_dltensor");
    DLManagedTensor *t = PyCapsule_GetPointer(second, "used_dltensor");
    t->deleter(t);
    printf("reused=%d\n", first == second);
    fake_capsule_free(second);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "reuse"))
        return reuse();
    PyObject *capsule = produce();
    DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
    PyCapsule_SetName(capsule, "used_dltensor"); /* the consumer takes it */
    float sum = 0;
    for (int i = 0; i < 4; i++)
        sum += ((float *)t->dl_tensor.data)[i];
    t->deleter(t);
    fake_capsule_free(capsule);
    fake_capsule_free(produce()); /* never consumed: the destructor releases it */
    printf("sum=%g\n", sum);
    return 0;
}
