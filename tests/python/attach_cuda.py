"""dlshim.attach() with the CUDA runtime (the simulated one, tests/simdev)
loaded before it: an allocation made before and freed after (no report),
memory allocated after, shared and freed while shared (reported), and the
limit: a cudaFree that ctypes looked up before the attach is the real
function, unseen.  Usage: attach_cuda.py"""
import ctypes
import os
import sys

from common import dlshim_package, mark

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "package",
                                "cases"))
dlshim = dlshim_package()

kDLCUDA = 2


def runtime():
    """The runtime's functions as ctypes looks them up now."""
    rt = ctypes.CDLL("libcudart.so.13")
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]
    return rt


def allocate(rt, size=64):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), size) == 0
    return p.value


def shared(data):
    """A capsule of 4 floats on cuda:0 at `data`, taken by a consumer."""
    h = sys.modules["handoffs"]
    shape = (ctypes.c_int64 * 1)(4)
    t = h.DLManagedTensor()
    t.dl_tensor = h.DLTensor(data, (kDLCUDA, 0), 1, (2, 32, 1, 0), shape, None, 0)
    t.deleter = ctypes.cast(h._deleter, ctypes.c_void_p)
    h.keep.append((t, shape))
    capsule = h.api.PyCapsule_New(ctypes.addressof(t), b"dltensor", None)
    h.api.PyCapsule_GetPointer(capsule, b"dltensor")
    h.api.PyCapsule_SetName(capsule, b"used_dltensor")


early_rt = runtime()
early = allocate(early_rt)
mark("attach")
assert dlshim.attach(format="jsonl", log="stderr", events="all", summary=True)
import handoffs  # noqa: E402,F401  (its ctypes lookups made now)
rt = runtime()
mark("early free")
assert rt.cudaFree(early) == 0  # allocated before the attach: not a violation
mark("shared free")
p = allocate(rt)
shared(p)
assert rt.cudaFree(p) == 0  # line: free
mark("unseen free")
q = allocate(rt)
shared(q)
assert early_rt.cudaFree(q) == 0  # looked up before the attach: unseen (a limit)
mark("end")
