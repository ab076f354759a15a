"""RW04: NumPy's from_dlpack drops the producer's capsule on an error path
with an exception still set, so a producer's capsule destructor written in
Python cannot run, and the tensor's deleter never does: a leak.

https://github.com/numpy/numpy/issues/32697 (numpy 2.5.2; reproduced here on
numpy 2.4.6 and on Debian's 1.24).  The producer is rebuilt with ctypes, as a
Python producer writes it (Warp's, PyArrow's tests): its destructor is a
ctypes callback.  `fixed`: a dtype NumPy knows, so the import succeeds and
the deleter runs when the array dies.
"""
import gc
import sys

import numpy as np

from dlpack_ctypes import (api, capsule_args, kDLFloat, kDLOpaqueHandle, mark, releasing_destructor,
                           tensor)

fixed = sys.argv[1:] == ["fixed"]
released = []
buf = np.zeros(4, dtype=np.float32)


def deleter(addr):
    released.append(addr)


class Producer:
    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return api.PyCapsule_New(*capsule_args(made, destructor))  # the export

    def __dlpack_device__(self):
        return (1, 0)


made = tensor(buf.ctypes.data, [4], dtype=(kDLFloat, 32) if fixed else (kDLOpaqueHandle, 8),
              deleter=deleter)
destructor = releasing_destructor(made)
mark("start")
try:
    a = np.from_dlpack(Producer())  # the capsule dies here, in NumPy's error path
    print("imported", a.dtype)
    del a
except Exception as e:  # numpy 2.4: SystemError, the BufferError lost
    print("failed:", type(e).__name__)
gc.collect()
mark("end")
print("deleter calls:", len(released))
