"""RW01: PyTorch's to_dlpack made its capsule without a destructor that runs
the deleter, so every capsule dropped unconsumed leaked its tensor.

https://github.com/pytorch/pytorch/pull/9297 (torch 0.4.0; fixed in 0.4.1).
The producer is rebuilt with ctypes as torch 0.4 made it: a capsule with no
destructor.  `fixed`: a destructor that runs the deleter of an unconsumed
capsule.
"""
import gc
import sys

import numpy as np

from dlpack_ctypes import api, capsule_args, mark, releasing_destructor, tensor

fixed = sys.argv[1:] == ["fixed"]
released = []
buf = np.zeros(16, dtype=np.float32)
made = tensor(buf.ctypes.data, [16], deleter=lambda addr: released.append(addr))
destructor = releasing_destructor(made)

mark("start")
b = api.PyCapsule_New(*capsule_args(made, destructor if fixed else None))  # the export
del b  # dropped unconsumed: the tensor's deleter never runs
gc.collect()
mark("end")
print("deleter calls:", len(released))
