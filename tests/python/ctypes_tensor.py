"""A DLPack tensor made, taken and released with ctypes alone, as a
framework's C code would: a malloc'd DLManagedTensor whose deleter is libc's
free, a capsule made through ctypes.pythonapi (the GIL held), a consumer's
GetPointer and rename, and a release through a CFUNCTYPE call of the
deleter, which ctypes makes with the GIL let go.  Shared by
gil_free_lines.py and free_threads.py."""
import ctypes

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
FREE = ctypes.cast(libc.free, ctypes.c_void_p).value
api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # a foreign call: the GIL let go

# DLManagedTensor: DLTensor (data, device, ndim, dtype, shape, strides,
# byte_offset: 48 bytes), manager_ctx, deleter; then the shape's one extent.
SIZE, DELETER_AT, SHAPE_AT = 64, 56, 64


def export():
    m = libc.malloc(SIZE + 8)
    ctypes.memset(m, 0, SIZE + 8)
    ctypes.c_void_p.from_address(m).value = m + SHAPE_AT  # data: any readable bytes
    ctypes.c_int32.from_address(m + 8).value = 1           # kDLCPU
    ctypes.c_int32.from_address(m + 16).value = 1          # ndim
    ctypes.c_uint32.from_address(m + 20).value = 0x00010801  # uint8, lanes 1
    ctypes.c_void_p.from_address(m + 24).value = m + SHAPE_AT
    ctypes.c_int64.from_address(m + SHAPE_AT).value = 8
    ctypes.c_void_p.from_address(m + DELETER_AT).value = FREE
    return api.PyCapsule_New(m, b"dltensor", None)  # py: ctypes export


def deleter_of(m):
    """The tensor's deleter, to call through ctypes: DELETER(...)(m)."""
    return DELETER(ctypes.c_void_p.from_address(m + DELETER_AT).value)
