"""dlshim.attach() in a running program (no preload): a share made and an
allocation made before the attach, taken and let go after it (nothing to
report), then a double release, an import after release and a free of a
shared buffer, each on a line marked `# line: NAME`.  Usage:
attach_violations.py ON_ERROR

The capsule functions are looked up through ctypes after the attach: a
function pointer fetched before it (ctypes keeps what it looked up) is the
real function, unseen (README, limits of attach)."""
import ctypes
import json
import os
import sys

from common import dlshim_package, mark

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "package",
                                "cases"))
dlshim = dlshim_package()

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]


def take(capsule, api=None):
    """A consumer's steps, without the release: the tensor's address."""
    api = api or sys.modules["handoffs"].api
    managed = api.PyCapsule_GetPointer(capsule, b"dltensor")
    api.PyCapsule_SetName(capsule, b"used_dltensor")
    return managed


def let_go(managed):
    """The deleter the tensor holds now (the shim's, once it saw the export)."""
    h = sys.modules["handoffs"]
    m = ctypes.cast(managed, ctypes.POINTER(h.DLManagedTensor))
    h.DELETER(m.contents.deleter)(m)


def export_of(data):
    """A capsule of a 4-float tensor whose data is `data`."""
    h = sys.modules["handoffs"]
    shape = (ctypes.c_int64 * 1)(4)
    t = h.DLManagedTensor()
    t.dl_tensor = h.DLTensor(data, (1, 0), 1, (2, 32, 1, 0), shape, None, 0)
    t.deleter = ctypes.cast(h._deleter, ctypes.c_void_p)
    h.keep.append((t, shape))
    return h.api.PyCapsule_New(ctypes.addressof(t), b"dltensor", None)


# Before the attach, with lookups of their own: a share made, one taken and
# not let go, an allocation.
early_api = ctypes.PyDLL(None)
for name, res, args in (("PyCapsule_New", ctypes.py_object,
                         [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]),
                        ("PyCapsule_GetPointer", ctypes.c_void_p,
                         [ctypes.py_object, ctypes.c_char_p]),
                        ("PyCapsule_SetName", ctypes.c_int, [ctypes.py_object, ctypes.c_char_p])):
    f = getattr(early_api, name)
    f.restype, f.argtypes = res, args
early_data = (ctypes.c_float * 4)()
early_shape = (ctypes.c_int64 * 1)(4)


class Early(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("rest", ctypes.c_uint8 * 40),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def early_capsule():
    """A legacy capsule of 4 floats (the DLTensor's fields after `data`:
    cpu:0, one dimension, float32, its shape, no strides, no offset)."""
    t = Early(data=ctypes.addressof(early_data))
    ctypes.memmove(t.rest, (ctypes.c_int32 * 3)(1, 0, 1), 12)
    ctypes.memmove(ctypes.addressof(t.rest) + 12, bytes([2, 32, 1, 0]), 4)
    ctypes.c_void_p.from_address(ctypes.addressof(t.rest) + 16).value = \
        ctypes.addressof(early_shape)
    early_data_keep.append(t)
    return early_api.PyCapsule_New(ctypes.addressof(t), b"dltensor", None)


early_data_keep = []
made_before = early_capsule()  # exported before, taken after
taken_before = take(early_capsule(), early_api)  # exported and taken before
early = libc.malloc(64)  # allocated before

mark("attach")
assert dlshim.attach(format="jsonl", log="stderr", on_error=sys.argv[1], summary=True)
import handoffs  # noqa: E402  (its ctypes lookups made now)
from handoffs import export  # noqa: E402
mark("before")
take(made_before)
libc.free(early)
mark("double")
managed = take(export())
m = ctypes.cast(managed, ctypes.POINTER(handoffs.DLManagedTensor))
deleter = handoffs.DELETER(m.contents.deleter)
deleter(m)
deleter(m)  # line: double
mark("after release")
capsule = export()
let_go(handoffs.api.PyCapsule_GetPointer(capsule, b"dltensor"))  # released unconsumed
take(capsule)  # line: after_release
# Counted so far (before the free below, after which a freed chunk the
# allocator hands out again may be freed again under the live share).
status = dlshim.status()
print(f"BY_KIND {json.dumps(status['violations_by_kind'])}", flush=True)
print(f"COUNTS {json.dumps({k: status[k] for k in ('shares', 'zero_copy', 'copies')})}", flush=True)
mark("free")
data = libc.malloc(16)
take(export_of(data))
libc.free(data)  # line: free
mark("end")
