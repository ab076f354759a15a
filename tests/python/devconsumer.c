/*
 * devconsumer — a CPython extension that takes a device tensor from a
 * "dltensor" capsule and copies it to the host on its own stream, with no
 * synchronization against the producer (the bug the stream model finds).
 *   start(capsule)   import, then an async copy on s2; returns a handle
 *   copied(handle, seconds)  waits up to `seconds` for the copy; True if done
 *   finish(handle)   synchronizes, releases the tensor, returns host[0]
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>
#include <time.h>

#define N 256

typedef struct {
    DLManagedTensor *tensor;
    cudaEvent_t done;
    int host[N];
} copy;

static void drop_handle(PyObject *capsule)
{
    free(PyCapsule_GetPointer(capsule, "devconsumer.copy"));
}

static PyObject *start(PyObject *self, PyObject *capsule)
{
    (void)self;
    DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
    if (!t || PyCapsule_SetName(capsule, "used_dltensor") != 0)
        return NULL;
    copy *c = calloc(1, sizeof(*c));
    c->tensor = t;
    cudaStream_t s2;
    if (cudaStreamCreate(&s2) != cudaSuccess || cudaEventCreate(&c->done) != cudaSuccess ||
        cudaMemcpyAsync(c->host, t->dl_tensor.data, sizeof(c->host), cudaMemcpyDeviceToHost,
                        s2) != cudaSuccess ||
        cudaEventRecord(c->done, s2) != cudaSuccess)
        return PyErr_Format(PyExc_RuntimeError, "CUDA call failed");
    return PyCapsule_New(c, "devconsumer.copy", drop_handle);
}

static PyObject *copied(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *handle;
    double seconds;
    if (!PyArg_ParseTuple(args, "Od", &handle, &seconds))
        return NULL;
    copy *c = PyCapsule_GetPointer(handle, "devconsumer.copy");
    if (!c)
        return NULL;
    for (int i = 0; i < (int)(seconds * 100); i++) {
        if (cudaEventQuery(c->done) == cudaSuccess)
            Py_RETURN_TRUE;
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    Py_RETURN_FALSE;
}

static PyObject *finish(PyObject *self, PyObject *handle)
{
    (void)self;
    copy *c = PyCapsule_GetPointer(handle, "devconsumer.copy");
    if (!c || cudaDeviceSynchronize() != cudaSuccess)
        return NULL;
    c->tensor->deleter(c->tensor);
    return PyLong_FromLong(c->host[0]);
}

static PyMethodDef methods[] = {
    {"start", start, METH_O, NULL},
    {"copied", copied, METH_VARARGS, NULL},
    {"finish", finish, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "devconsumer", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_devconsumer(void)
{
    return PyModule_Create(&module);
}
