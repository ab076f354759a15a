"""RW27: CuPy's capsule destructor called the deleter even when PyTorch had
consumed the capsule: the tensor was released under torch, and torch's own
release later was the second ("CuPy's pycapsule calling the deleter even if
PyTorch consumed the DLPack").

https://github.com/pytorch/pytorch/issues/9260 (CuPy 4.x; fixed in
https://github.com/cupy/cupy/pull/1445).  The producer is rebuilt with
ctypes, its destructor as CuPy 4 had it; the consumer is the real torch,
which runs the second release without the GIL.  `fixed`: the destructor
leaves a consumed capsule alone.
"""
import gc
import sys

import numpy as np
import torch

from dlpack_ctypes import api, api_get_pointer_raw, capsule_args, mark, tensor, unconsumed

fixed = sys.argv[1:] == ["fixed"]
released = []
buf = np.arange(8, dtype=np.float32)
made = tensor(buf.ctypes.data, [8], deleter=lambda addr: released.append(addr))


def destructor(cap):
    t = unconsumed(cap) if fixed else (unconsumed(cap) or
                                       api_get_pointer_raw(cap, b"used_dltensor"))
    if t:
        made.deleter(t)


mark("start")
t = torch.utils.dlpack.from_dlpack(api.PyCapsule_New(*capsule_args(made, destructor)))
print("sum:", float(t.sum()))  # the capsule, a temporary, died above
del t  # torch releases it again
gc.collect()
mark("end")
print("deleter calls:", len(released))
