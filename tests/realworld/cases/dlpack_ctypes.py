"""DLPack through ctypes, for the cases that rebuild a framework's buggy side
as the framework had it: the structs, a producer's tensor and capsule, a
consumer's steps, and marks in the log (the test reads the events between
them)."""
import ctypes
import sys

kDLCPU, kDLCUDA = 1, 2
kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle = 0, 1, 2, 3


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


api = ctypes.pythonapi
DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
# The same, taking the capsule as a plain pointer (a destructor must not
# resurrect it): its own function object, with its own argument types.
api_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
# Bound once: a destructor that runs with an exception pending (NumPy's error
# path) must fail at its first call into Python's API, every time.  Looking
# the function up on `api` there would ask CPython's type attribute cache
# first, and on a miss that lookup clears the pending exception: whether it
# misses depends on addresses, so the destructor would run through now and
# then.
api_is_valid = api.PyCapsule_IsValid

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

_keep = []  # what the producers' structs and callbacks need kept alive


def keep(*objects):
    _keep.extend(objects)
    return objects[0]


def mark(name):
    """A mark between the events (the log is stderr: in order with them)."""
    sys.stderr.write(f"MARK {name}\n")
    sys.stderr.flush()


def tensor(data, shape, dtype=(kDLFloat, 32), device=kDLCPU, deleter=None, ctx=None,
           byte_offset=0):
    """A legacy DLManagedTensor over `data` (an address), kept alive here."""
    shape_arr = keep((ctypes.c_int64 * len(shape))(*shape))
    t = keep(DLManagedTensor())
    t.dl_tensor.data = data
    t.dl_tensor.device = DLDevice(device, 0)
    t.dl_tensor.ndim = len(shape)
    t.dl_tensor.dtype = DLDataType(dtype[0], dtype[1], 1)
    t.dl_tensor.shape = shape_arr
    t.dl_tensor.byte_offset = byte_offset
    t.manager_ctx = ctx
    if deleter is not None:
        t.deleter = keep(DELETER(deleter))
    return t


def capsule_args(t, destructor=None, name=b"dltensor"):
    """PyCapsule_New's arguments for tensor t, with `destructor` (a Python
    function of the capsule's address, or None for none): the case makes
    the capsule itself, so that its own line is the export's."""
    d = keep(DESTRUCTOR(destructor)) if destructor else None
    return ctypes.addressof(t), name, ctypes.cast(d, ctypes.c_void_p) if d else None


def unconsumed(cap_address, name=b"dltensor"):
    """Inside a capsule destructor: the tensor if the capsule died unconsumed."""
    if not api_is_valid(cap_address, name):
        return None
    return api_get_pointer_raw(cap_address, name)


def releasing_destructor(t, name=b"dltensor"):
    """The usual producer's destructor for tensor t: a capsule that dies
    unconsumed releases t through its deleter."""
    def destructor(cap):
        managed = unconsumed(cap, name)
        if managed:
            t.deleter(managed)
    return destructor


class Exporter:
    """An object with __dlpack__ handing out a capsule made beforehand."""

    def __init__(self, cap, device=(kDLCPU, 0)):
        self.cap, self.device = cap, device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.cap

    def __dlpack_device__(self):
        return self.device
