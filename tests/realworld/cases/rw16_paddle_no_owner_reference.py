"""RW16: Paddle's to_dlpack set manager_ctx to NULL and kept no reference to
the tensor it exported, so the buffer could be freed and reused while the
consumer still read it ("to_dlpack did not add a reference to x").

https://github.com/PaddlePaddle/Paddle/issues/50120 (Paddle <= 2.4; fixed by
https://github.com/PaddlePaddle/Paddle/pull/50138).  The producer is rebuilt
with ctypes as Paddle 2.4 had it: the data of a NumPy array the capsule does
not hold, a deleter that frees only the struct.  The consumer is the real
torch.  `fixed`: the tensor holds its owner until its deleter runs.
"""
import ctypes
import gc
import sys

import numpy as np
import torch

from dlpack_ctypes import Exporter, api, capsule_args, mark, releasing_destructor, tensor

fixed = sys.argv[1:] == ["fixed"]
owners = {}


def to_dlpack():
    x = np.full(4096, 7.0, dtype=np.float32)  # the owner: 16 KiB, from malloc
    made = tensor(x.ctypes.data, [4096], deleter=lambda addr: owners.pop(addr, None))
    if fixed:
        owners[ctypes.addressof(made)] = x  # the fix: the tensor holds its owner

    destructor = releasing_destructor(made)

    return api.PyCapsule_New(*capsule_args(made, destructor))  # the export


mark("start")
cap = to_dlpack()  # x, the owner, dies here: its buffer is freed under the share
t = torch.utils.dlpack.from_dlpack(cap)
print("sum:", float(t.sum()))
del t, cap
gc.collect()
mark("end")
