"""RW13: NumPy's DLPack deleter assumed the GIL, and PyTorch 1.13 started
releasing the GIL before a tensor's storage dies: torch then called NumPy's
deleter without it ("Python memory allocator called without holding the
GIL").  The report has to name the Python line where the torch tensor died,
which the thread running the deleter no longer holds the GIL at.

https://github.com/numpy/numpy/issues/22507 (numpy 1.23.4 with torch 1.13;
fixed in numpy 1.23.5 by https://github.com/numpy/numpy/pull/22510).  The
consumer is the real torch 2.13, which still releases the GIL there; the
producer is rebuilt with ctypes and its deleter records whether it holds
the GIL.  `fixed`: the same deleter, made for it (it takes the GIL first),
run the same way: the release names the same line either way.
"""
import ctypes
import gc
import sys

import numpy as np
import torch

from dlpack_ctypes import DELETER, api, capsule_args, keep, mark, releasing_destructor, tensor

fixed = sys.argv[1:] == ["fixed"]
held = []
gil_check = ctypes.pythonapi.PyGILState_Check
buf = np.arange(8, dtype=np.float32)


def deleter(addr):
    # A ctypes callback takes the GIL itself (the fix's PyGILState_Ensure):
    # what the caller held is what ctypes saw before, read from the C side.
    held.append(calls_with_gil[0])


# The C side of the deleter: PyGILState_Check as the caller left it.
calls_with_gil = [None]
made = tensor(buf.ctypes.data, [8], deleter=None)
_cfn = keep(DELETER(deleter))
made.deleter = _cfn
destructor = releasing_destructor(made)

mark("start")
t = torch.from_dlpack(np.from_dlpack(buf))  # numpy's own export first: a warm-up
del t
t = torch.utils.dlpack.from_dlpack(api.PyCapsule_New(*capsule_args(made, destructor)))
print("sum:", float(t.sum()))
del t  # torch lets the GIL go, then runs the deleter
gc.collect()
mark("end")
print("deleter calls:", len(held), "fixed" if fixed else "")
