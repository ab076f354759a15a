"""RW05: CuPy's fromDlpack took PyTorch's tensor (renamed the capsule) and
never called its deleter when the CuPy array died: every torch tensor handed
over stayed allocated.

https://github.com/pytorch/pytorch/issues/9261, fixed in
https://github.com/cupy/cupy/pull/1445 (CuPy 4.x).  The producer is the real
torch; the consumer is rebuilt with ctypes as CuPy 4 took a tensor.
`fixed`: the consumer calls the deleter when its array dies.
"""
import ctypes
import gc
import sys

import torch

from dlpack_ctypes import DLManagedTensor, api, mark

fixed = sys.argv[1:] == ["fixed"]


class CupyArray:
    """What CuPy 4's fromDlpack made: the tensor taken, the capsule renamed."""

    def __init__(self, cap):
        self.managed = api.PyCapsule_GetPointer(cap, b"dltensor")
        api.PyCapsule_SetName(cap, b"used_dltensor")  # the import
        t = DLManagedTensor.from_address(self.managed)
        self.first = ctypes.c_float.from_address(t.dl_tensor.data).value

    def __del__(self):
        if fixed:  # the fix: the memory goes back to its producer
            DLManagedTensor.from_address(self.managed).deleter(self.managed)


mark("start")
x = CupyArray(torch.utils.dlpack.to_dlpack(torch.ones(1000)))
print("first value:", x.first)
del x
gc.collect()
mark("end")
