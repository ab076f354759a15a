"""Device memory allocated and freed through ctypes, as a Python package
that drives a GPU runtime without an extension module would: cudaMalloc
and cudaFree of the simulated runtime (tests/simdev) called from here, so
that the module calling the runtime is libffi, which only passes the call
on.  Usage: ctypes_device.py"""
import ctypes

rt = ctypes.CDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), 4096) == 0
assert rt.cudaFree(p) == 0
