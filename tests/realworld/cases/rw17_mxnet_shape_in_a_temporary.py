"""RW17: MXNet's to_dlpack_for_read kept a copy of the NDArray (so the data
lived on) but took the DLTensor from the caller's NDArray, whose shape the
caller's object owned: when that object died, the shape went with it, and
DGL and TVM read garbage extents.

https://github.com/apache/mxnet/issues/13658 (MXNet 1.4 pre-release; fixed by
https://github.com/apache/mxnet/pull/13698).  The producer is rebuilt with
ctypes: the shape in a block the temporary owns (malloc), freed with it and
handed to the next allocation of that size.  The consumer is rebuilt with
ctypes as DGL took a tensor.  `fixed`: the shape in the manager that lives
as long as the tensor.
"""
import ctypes
import sys

import numpy as np

from dlpack_ctypes import DLManagedTensor, api, capsule_args, libc, mark, tensor

fixed = sys.argv[1:] == ["fixed"]
data = np.arange(5, dtype=np.float32)


class NDArray:
    """The caller's NDArray: its shape in a block it owns."""

    def __init__(self, n):
        self.shape = libc.malloc(16)
        ctypes.memmove(self.shape, (ctypes.c_int64 * 2)(n, 0), 16)

    def to_dlpack_for_read(self):
        t = tensor(data.ctypes.data, [5], deleter=lambda addr: None)
        if not fixed:
            t.dl_tensor.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        return api.PyCapsule_New(*capsule_args(t))  # the export

    def __del__(self):
        libc.free(self.shape)


mark("start")
cap = NDArray(5).to_dlpack_for_read()  # the temporary NDArray dies here, its shape too
reuse = libc.malloc(16)  # the allocator hands the block on
ctypes.memmove(reuse, (ctypes.c_int64 * 2)(-8, -8), 16)
managed = api.PyCapsule_GetPointer(cap, b"dltensor")  # DGL's from_dlpack
api.PyCapsule_SetName(cap, b"used_dltensor")  # the import
print("extent the consumer reads:", DLManagedTensor.from_address(managed).dl_tensor.shape[0])
mark("end")
