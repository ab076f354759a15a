"""RW19: a producer left its tensor's shape in its own stack frame, and TVM's
FromDLPack kept the producer's shape pointer: by the time the consumer read
the shape, another call had reused the frame ("people keep data on the heap
but forget to do the same for the shape").

https://github.com/apache/tvm/pull/5301 (TVM <= 0.6).  The producer is a C
library (tests/realworld/progs/libkernel.c) whose shape lives on its stack;
the consumer is rebuilt with ctypes as TVM 0.6 took a tensor.  `fixed`: the
shape beside the tensor.
"""
import ctypes
import os
import sys

from dlpack_ctypes import DLManagedTensor, api, mark

fixed = sys.argv[1:] == ["fixed"]
lib = ctypes.CDLL(os.path.join(os.environ["REALWORLD_BUILD"], "libkernel.so"))
lib.kernel_make_shaped.restype = ctypes.c_void_p
lib.kernel_make_shaped.argtypes = [ctypes.c_int, ctypes.c_int]
lib.kernel_other_call.restype = ctypes.c_int64

mark("start")
t = lib.kernel_make_shaped(4, int(fixed))
cap = api.PyCapsule_New(t, b"dltensor", None)  # the export
lib.kernel_other_call()  # a call as deep: the dead frame's bytes are its now
managed = api.PyCapsule_GetPointer(cap, b"dltensor")  # TVM 0.6's FromDLPack
api.PyCapsule_SetName(cap, b"used_dltensor")  # the import
tensor = DLManagedTensor.from_address(managed)
print("extent the consumer reads:", tensor.dl_tensor.shape[0])
tensor.deleter(managed)
mark("end")
