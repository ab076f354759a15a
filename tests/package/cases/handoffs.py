"""DLPack handoffs made with ctypes alone (no framework: the package test's
venv has none): a tensor exported through PyCapsule_New, taken, released;
with `double`, released twice (run it with DLSHIM_ON_ERROR=protect: the
shim swallows the second call).  Importable by tests (cases/)."""
import ctypes
import sys


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", ctypes.c_int32 * 2), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint8 * 4), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


# PYFUNCTYPE: called with the GIL held, as a framework's C code calls a deleter.
DELETER = ctypes.PYFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.c_void_p)]

api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

keep = []


@DELETER
def _deleter(managed):
    pass


def export():
    """A capsule of a fresh 4-float tensor, as a producer hands it out."""
    data = (ctypes.c_float * 4)()
    shape = (ctypes.c_int64 * 1)(4)
    t = DLManagedTensor()
    t.dl_tensor = DLTensor(ctypes.cast(data, ctypes.c_void_p), (1, 0), 1, (2, 32, 1, 0), shape,
                           None, 0)
    t.deleter = ctypes.cast(_deleter, ctypes.c_void_p)
    keep.append((t, data, shape))
    return api.PyCapsule_New(ctypes.addressof(t), b"dltensor", None)


def consume(capsule, times=1):
    """Takes the tensor as a consumer does and lets it go `times` times
    (through the deleter the tensor holds now: the shim's)."""
    managed = api.PyCapsule_GetPointer(capsule, b"dltensor")
    api.PyCapsule_SetName(capsule, b"used_dltensor")
    deleter = DELETER(ctypes.cast(managed, ctypes.POINTER(DLManagedTensor)).contents.deleter)
    for _ in range(times):
        deleter(ctypes.cast(managed, ctypes.POINTER(DLManagedTensor)))


if __name__ == "__main__":
    consume(export(), times=2 if sys.argv[1:] == ["double"] else 1)
