"""RW03: Genesis quadrants' to_dlpack(versioned=True) gave its
"dltensor_versioned" capsule an empty destructor, so an unconsumed capsule
never called the versioned tensor's deleter.

https://github.com/Genesis-Embodied-AI/quadrants/pull/598 (the review of its
dlpack_funcs.cpp: `capsule_deleter = [](PyObject*){}`).  Rebuilt with ctypes:
a DLManagedTensorVersioned and the empty destructor.  `fixed`: the
destructor runs the deleter of an unconsumed capsule.
"""
import ctypes
import gc
import sys

import numpy as np

from dlpack_ctypes import (DELETER, DLDataType, DLDevice, DLManagedTensorVersioned, api,
                           capsule_args, keep, kDLCPU, kDLFloat, mark, releasing_destructor)

fixed = sys.argv[1:] == ["fixed"]
released = []
buf = np.zeros(4, dtype=np.float32)
shape = keep((ctypes.c_int64 * 1)(4))
made = keep(DLManagedTensorVersioned())
made.version.major, made.version.minor = 1, 0
made.dl_tensor.data = buf.ctypes.data
made.dl_tensor.device = DLDevice(kDLCPU, 0)
made.dl_tensor.ndim = 1
made.dl_tensor.dtype = DLDataType(kDLFloat, 32, 1)
made.dl_tensor.shape = shape
made.deleter = keep(DELETER(lambda addr: released.append(addr)))


def empty(cap):
    pass
destructor = releasing_destructor(made, b"dltensor_versioned")

mark("start")
c = api.PyCapsule_New(*capsule_args(made, destructor if fixed else empty,
                                    name=b"dltensor_versioned"))  # the export
del c  # the reviewer's trigger: `c = f.to_dlpack(versioned=True); del c`
gc.collect()
mark("end")
print("deleter calls:", len(released))
