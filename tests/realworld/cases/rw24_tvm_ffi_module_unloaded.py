"""RW24: tvm-ffi dlclosed a module when its Python Module object died, while a
tensor the module made (its deleter the module's code) was still shared:
the later release jumped into unmapped code ("SEGV in functions returning
Tensor that outlives the Module").

https://github.com/apache/tvm-ffi/issues/264 (tvm-ffi before
https://github.com/apache/tvm-ffi/pull/334, which keeps modules loaded by
default; 0.1.15's load_module(keep_module_alive=False) still does it).  The
module is a C library (tests/realworld/progs/libkernel.c) loaded and
unloaded through ctypes as tvm-ffi loads and unloads its modules; the
consumer is the real torch.  `fixed`: the module is unloaded after the
tensor's release.
"""
import _ctypes
import ctypes
import gc
import os
import sys

import torch

from dlpack_ctypes import Exporter, api, mark

fixed = sys.argv[1:] == ["fixed"]
path = os.path.join(os.environ["REALWORLD_BUILD"], "libkernel.so")
module = ctypes.CDLL(path)
module.kernel_make.restype = ctypes.c_void_p
module.kernel_make.argtypes = [ctypes.c_int]

mark("start")
tt = torch.from_dlpack(Exporter(api.PyCapsule_New(module.kernel_make(4), b"dltensor", None)))
print("sum:", float(tt.sum()))
handle = module._handle
del module
if not fixed:
    _ctypes.dlclose(handle)  # the Module dies: its library goes
del tt  # the release calls the library's deleter
gc.collect()
if fixed:
    _ctypes.dlclose(handle)
mark("end")
print("released", flush=True)
