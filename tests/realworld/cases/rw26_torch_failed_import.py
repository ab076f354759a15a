"""RW26: PyTorch's from_dlpack stole the tensor from the capsule and marked
the capsule used only afterwards; when a step between raised, the half-made
torch tensor released it, and the producer's capsule destructor, seeing
"dltensor" still, released it again ("double free detected in tcache").

https://github.com/pytorch/pytorch/pull/56789 (torch <= 1.8, with CuPy as
the producer).  Both sides are rebuilt with ctypes: the producer as CuPy and
NumPy make theirs (a destructor that releases an unconsumed capsule; its
struct kept, so that the second release is seen whatever the allocator
does), the consumer with torch 1.8's steps in their order.  `fixed`: the
capsule is marked used at once, as the fix does.
"""
import gc
import sys

import numpy as np

import torch18
from dlpack_ctypes import api, capsule_args, mark, releasing_destructor, tensor

fixed = sys.argv[1:] == ["fixed"]
released = []
a = np.arange(16, dtype=np.float32)
made = tensor(a.ctypes.data, [16], deleter=lambda addr: released.append(addr))
destructor = releasing_destructor(made)

mark("start")
try:
    torch18.from_dlpack(api.PyCapsule_New(*capsule_args(made, destructor)), fixed)  # the export
except RuntimeError as e:
    print("failed:", e)
gc.collect()  # the capsule dies, named "dltensor" still
mark("end")
print("deleter calls:", len(released))
