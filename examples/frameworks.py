"""make demo, part 6: current frameworks (the venv of make venv) under dlshim.

A feature map goes torch -> numpy -> jax without a copy.  Then a hand-written
consumer (the kind of ctypes helper people write to read a tensor from C)
releases the tensor when done but forgets to mark the capsule consumed: when
the capsule dies, PyTorch's destructor calls the deleter a second time.
Without dlshim that is a double free; with --on-error protect dlshim reports
it and swallows the second call."""
import ctypes
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

features = torch.arange(1024, dtype=torch.float32).reshape(32, 32)
as_numpy = np.from_dlpack(features)              # torch -> numpy, zero-copy
as_jax = jnp.from_dlpack(as_numpy)               # numpy -> jax, zero-copy (64-byte aligned)
print("jax shares torch's memory:", as_jax.unsafe_buffer_pointer() == features.data_ptr())
print("sum:", float(as_jax.sum()))
del as_jax, as_numpy


class DLManagedTensor(ctypes.Structure):
    """The start of a legacy DLManagedTensor: the data pointer; the deleter
    sits 56 bytes in."""
    _fields_ = [("data", ctypes.c_void_p)]


api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def first_value(tensor):
    """Reads a tensor's first float through DLPack, then releases it.  The
    bug: it never renames the capsule to "used_dltensor", so the capsule
    still owns the tensor and releases it again when it dies."""
    capsule = tensor.__dlpack__()
    managed = api.PyCapsule_GetPointer(capsule, b"dltensor")
    data = DLManagedTensor.from_address(managed).data
    value = ctypes.c_float.from_address(data).value
    deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p).from_address(managed + 56)
    deleter(managed)                      # done with it: released
    return value                          # ...and the capsule dies here: released again


print("first value:", first_value(torch.ones(4)), flush=True)
print("done", file=sys.stderr)
