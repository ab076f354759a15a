/*
 * dlpack1ext — a DLPack 1.x producer and consumer, as a CPython extension,
 * for the Python tests (Debian's NumPy 1.24 and PyTorch 1.13 speak only
 * legacy DLPack).  It uses the capsule protocol exactly as the spec says:
 *
 *   make(n, flags)          a "dltensor_versioned" capsule holding 0..n-1 (int32)
 *   consume(capsule)        renames it "used_dltensor_versioned" and returns a
 *                           Holder that calls the deleter when it dies
 *   consume_jax_style(c)    renames, then sets the destructor to NULL (as JAX does)
 *   consume_by_destructor(c) only sets the destructor to NULL (no rename)
 *   total(holder)           the sum of the held tensor's elements
 *   exchange_api()          a "dlpack_exchange_api" capsule on this module's
 *                           static DLPackExchangeAPI table (DLPack 1.3)
 *   exchange(api, n)        a consumer of that table: from_py_object(n), then
 *                           to_py_object → a Holder; and allocator → a Holder
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlshim.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t shape[1];
    int32_t *data;
} ctx;

static void delete_versioned(DLManagedTensorVersioned *t)
{
    ctx *c = t->manager_ctx;
    free(c->data);
    free(c);
    free(t);
}

static DLManagedTensorVersioned *new_tensor(int64_t n, uint64_t flags)
{
    ctx *c = calloc(1, sizeof(*c));
    DLManagedTensorVersioned *t = calloc(1, sizeof(*t));
    c->shape[0] = n;
    c->data = calloc((size_t)(n ? n : 1), sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        c->data[i] = (int32_t)i;
    t->version.major = 1;
    t->version.minor = 3;
    t->manager_ctx = c;
    t->deleter = delete_versioned;
    t->flags = flags;
    t->dl_tensor.data = c->data;
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLInt;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = c->shape;
    return t;
}

/* The producer's capsule destructor, as the spec prescribes. */
static void capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "used_dltensor_versioned"))
        return;
    DLManagedTensorVersioned *t = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (t)
        t->deleter(t);
    else
        PyErr_Clear();
}

/* ---- Holder: owns an imported tensor ------------------------------------ */
typedef struct {
    PyObject_HEAD DLManagedTensorVersioned *tensor;
} Holder;

static void holder_dealloc(Holder *h)
{
    if (h->tensor && h->tensor->deleter)
        h->tensor->deleter(h->tensor);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyTypeObject HolderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dlpack1ext.Holder",
    .tp_basicsize = sizeof(Holder),
    .tp_dealloc = (destructor)holder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static PyObject *hold(DLManagedTensorVersioned *t)
{
    Holder *h = PyObject_New(Holder, &HolderType);
    if (h)
        h->tensor = t;
    return (PyObject *)h;
}

/* ---- the capsule protocol ------------------------------------------------ */
static PyObject *make(PyObject *self, PyObject *args)
{
    (void)self;
    long long n;
    unsigned long long flags = 0;
    if (!PyArg_ParseTuple(args, "L|K", &n, &flags))
        return NULL;
    return PyCapsule_New(new_tensor(n, flags), "dltensor_versioned", capsule_destructor);
}

static DLManagedTensorVersioned *take(PyObject *capsule)
{
    return PyCapsule_GetPointer(capsule, "dltensor_versioned");
}

static PyObject *consume(PyObject *self, PyObject *capsule)
{
    (void)self;
    DLManagedTensorVersioned *t = take(capsule);
    if (!t || PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0)
        return NULL;
    return hold(t);
}

static PyObject *consume_jax_style(PyObject *self, PyObject *capsule)
{
    (void)self;
    DLManagedTensorVersioned *t = take(capsule);
    if (!t || PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0 ||
        PyCapsule_SetDestructor(capsule, NULL) != 0)
        return NULL;
    return hold(t);
}

static PyObject *consume_by_destructor(PyObject *self, PyObject *capsule)
{
    (void)self;
    DLManagedTensorVersioned *t = take(capsule);
    if (!t || PyCapsule_SetDestructor(capsule, NULL) != 0)
        return NULL;
    return hold(t);
}

static PyObject *total(PyObject *self, PyObject *holder)
{
    (void)self;
    if (!PyObject_TypeCheck(holder, &HolderType))
        return PyErr_Format(PyExc_TypeError, "not a Holder");
    const DLTensor *d = &((Holder *)holder)->tensor->dl_tensor;
    long long sum = 0;
    for (int64_t i = 0; i < d->shape[0]; i++)
        sum += ((const int32_t *)d->data)[i];
    return PyLong_FromLongLong(sum);
}

/* ---- the DLPack 1.3 exchange table (declared here: Debian's dlpack.h is 0.6) */
typedef struct {
    DLPackVersion version;
    void *prev_api;
    int (*managed_tensor_allocator)(DLTensor *, DLManagedTensorVersioned **, void *,
                                    void (*)(void *, const char *, const char *));
    int (*managed_tensor_from_py_object_no_sync)(void *, DLManagedTensorVersioned **);
    int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned *, void **);
    int (*dltensor_from_py_object_no_sync)(void *, DLTensor *);
    int (*current_work_stream)(int32_t, int32_t, void **);
} exchange_api_t;

static int api_allocate(DLTensor *proto, DLManagedTensorVersioned **out, void *ctx_,
                        void (*set_error)(void *, const char *, const char *))
{
    (void)ctx_;
    (void)set_error;
    *out = new_tensor(proto->ndim ? proto->shape[0] : 0, 0);
    return 0;
}

static int api_from_py(void *obj, DLManagedTensorVersioned **out)
{
    long long n = PyLong_AsLongLong(obj);
    if (n < 0 && PyErr_Occurred())
        return -1;
    *out = new_tensor(n, 0);
    return 0;
}

static int api_to_py(DLManagedTensorVersioned *t, void **out)
{
    *out = hold(t);
    return *out ? 0 : -1;
}

static int api_stream(int32_t type, int32_t id, void **out)
{
    (void)type;
    (void)id;
    *out = NULL;
    return 0;
}

static exchange_api_t api = {{1, 3}, NULL, api_allocate, api_from_py, api_to_py, NULL, api_stream};

static PyObject *exchange_api(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyCapsule_New(&api, "dlpack_exchange_api", NULL);
}

static PyObject *exchange(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *n;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &n))
        return NULL;
    exchange_api_t *table = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
    if (!table)
        return NULL;
    DLManagedTensorVersioned *t = NULL;
    if (table->managed_tensor_from_py_object_no_sync(n, &t) != 0)
        return NULL;
    void *converted = NULL;
    if (table->managed_tensor_to_py_object_no_sync(t, &converted) != 0)
        return NULL;
    int64_t shape[1] = {3};
    DLTensor proto;
    memset(&proto, 0, sizeof(proto));
    proto.ndim = 1;
    proto.shape = shape;
    DLManagedTensorVersioned *allocated = NULL;
    if (table->managed_tensor_allocator(&proto, &allocated, NULL, NULL) != 0)
        return NULL;
    return Py_BuildValue("(NN)", (PyObject *)converted, hold(allocated));
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS, NULL},
    {"consume", consume, METH_O, NULL},
    {"consume_jax_style", consume_jax_style, METH_O, NULL},
    {"consume_by_destructor", consume_by_destructor, METH_O, NULL},
    {"total", total, METH_O, NULL},
    {"exchange_api", exchange_api, METH_NOARGS, NULL},
    {"exchange", exchange, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "dlpack1ext", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_dlpack1ext(void)
{
    if (PyType_Ready(&HolderType) < 0)
        return NULL;
    return PyModule_Create(&module);
}
