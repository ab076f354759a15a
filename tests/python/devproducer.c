/*
 * devproducer — a CPython extension that exports a device tensor through a
 * "dltensor" capsule after a late write on its own stream (see
 * tests/device/handoff.c for the gate), for the stream-model tests.
 * Real CUDA runtime calls only.
 *   produce()    256 int32 on the device, filled with 0x01 bytes late on s1
 *   open_gate()  lets the write run
 * and, for the copy-accounting tests, a CPU tensor whose bytes come from a
 * device buffer:
 *   host_copy()     copied inside the call that makes the capsule (as
 *                   __dlpack__(dl_device=cpu) copies for its consumer)
 *   copy_to_host()  the copy alone, into a host buffer of the module's
 *   host_capsule()  a capsule of that buffer, as it is
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>
#include <pthread.h>
#include <stdlib.h>

#define N 256

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;
static int64_t shape[1] = {N};

static void CUDART_CB wait_gate(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate_lock);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
}

static void delete_tensor(DLManagedTensor *t)
{
    cudaFree(t->dl_tensor.data);
    free(t);
}

static void capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "used_dltensor"))
        return;
    DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
    if (t)
        t->deleter(t);
    else
        PyErr_Clear();
}

/* A "dltensor" capsule of N int32 at data. */
static PyObject *capsule_of(int *data, int device_type, void (*deleter)(DLManagedTensor *))
{
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor.data = data;
    t->dl_tensor.device.device_type = device_type;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLInt;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = deleter;
    return PyCapsule_New(t, "dltensor", capsule_destructor);
}

static PyObject *produce(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int *buf;
    cudaStream_t s1;
    if (cudaMalloc((void **)&buf, N * sizeof(int)) != cudaSuccess ||
        cudaMemset(buf, 0, N * sizeof(int)) != cudaSuccess || cudaStreamCreate(&s1) != cudaSuccess ||
        cudaLaunchHostFunc(s1, wait_gate, NULL) != cudaSuccess ||
        cudaMemsetAsync(buf, 1, N * sizeof(int), s1) != cudaSuccess)
        return PyErr_Format(PyExc_RuntimeError, "CUDA call failed");
    return capsule_of(buf, kDLCUDA, delete_tensor);
}

static int *device_source(void)
{
    static int *dev;
    if (!dev && (cudaMalloc((void **)&dev, N * sizeof(int)) != cudaSuccess ||
                 cudaMemset(dev, 2, N * sizeof(int)) != cudaSuccess))
        dev = NULL;
    return dev;
}

static int host_bytes[N];

/* The bytes are the module's: only the struct goes. */
static void free_struct(DLManagedTensor *t)
{
    free(t);
}

static PyObject *copy_to_host(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int *dev = device_source();
    if (!dev || cudaMemcpy(host_bytes, dev, sizeof(host_bytes), cudaMemcpyDeviceToHost) != cudaSuccess)
        return PyErr_Format(PyExc_RuntimeError, "CUDA call failed");
    Py_RETURN_NONE;
}

static PyObject *host_capsule(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return capsule_of(host_bytes, kDLCPU, free_struct);
}

static PyObject *host_copy(PyObject *self, PyObject *unused)
{
    PyObject *done = copy_to_host(self, unused);
    if (!done)
        return NULL;
    Py_DECREF(done);
    return capsule_of(host_bytes, kDLCPU, free_struct);
}

static PyObject *open_gate(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"produce", produce, METH_NOARGS, NULL},
    {"open_gate", open_gate, METH_NOARGS, NULL},
    {"host_copy", host_copy, METH_NOARGS, NULL},
    {"copy_to_host", copy_to_host, METH_NOARGS, NULL},
    {"host_capsule", host_capsule, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "devproducer", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_devproducer(void)
{
    return PyModule_Create(&module);
}
