"""dlshim.attach() with a device runtime (the simulated CUDA runtime or HIP,
tests/simdev) loaded before it: an allocation made before and freed after
(no report), memory allocated after, shared and freed while shared
(reported), and the limit: a free that ctypes looked up before the attach
is the real function, unseen.  Usage: attach_device.py cuda|hip"""
import ctypes
import os
import sys

from common import dlshim_package, mark

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "package",
                                "cases"))
dlshim = dlshim_package()

# library, allocate, free, DLPack device type
LIBRARY, MALLOC, FREE, DEVICE_TYPE = {
    "cuda": ("libcudart.so.13", "cudaMalloc", "cudaFree", 2),
    "hip": ("libamdhip64.so.5", "hipMalloc", "hipFree", 10),
}[sys.argv[1]]


class Runtime:
    """The runtime's functions as ctypes looks them up now."""

    def __init__(self):
        lib = ctypes.CDLL(LIBRARY)
        self.malloc, self.free = getattr(lib, MALLOC), getattr(lib, FREE)
        self.malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        self.free.argtypes = [ctypes.c_void_p]


def allocate(rt, size=64):
    p = ctypes.c_void_p()
    assert rt.malloc(ctypes.byref(p), size) == 0
    return p.value


def shared(data):
    """A capsule of 4 floats on the device at `data`, taken by a consumer."""
    h = sys.modules["handoffs"]
    shape = (ctypes.c_int64 * 1)(4)
    t = h.DLManagedTensor()
    t.dl_tensor = h.DLTensor(data, (DEVICE_TYPE, 0), 1, (2, 32, 1, 0), shape, None, 0)
    t.deleter = ctypes.cast(h._deleter, ctypes.c_void_p)
    h.keep.append((t, shape))
    capsule = h.api.PyCapsule_New(ctypes.addressof(t), b"dltensor", None)
    h.api.PyCapsule_GetPointer(capsule, b"dltensor")
    h.api.PyCapsule_SetName(capsule, b"used_dltensor")


early_rt = Runtime()
early = allocate(early_rt)
mark("attach")
assert dlshim.attach(format="jsonl", log="stderr", events="all", summary=True)
import handoffs  # noqa: E402,F401  (its ctypes lookups made now)
rt = Runtime()
mark("early free")
assert rt.free(early) == 0  # allocated before the attach: not a violation
mark("shared free")
p = allocate(rt)
shared(p)
assert rt.free(p) == 0  # line: free
mark("unseen free")
q = allocate(rt)
shared(q)
assert early_rt.free(q) == 0  # looked up before the attach: unseen (a limit)
mark("end")
