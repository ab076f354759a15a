"""RW16 on a device: Paddle's to_dlpack kept no reference to the tensor it
exported, so the memory went back to the device as soon as the owner died,
before the consumer took the tensor ("to_dlpack did not add a reference to
x"): the consumer then imports device memory already freed.

https://github.com/PaddlePaddle/Paddle/issues/50120 (Paddle <= 2.4; fixed by
https://github.com/PaddlePaddle/Paddle/pull/50138).  On the simulated CUDA
device (tests/simdev, the runtime through ctypes, as a Python framework
calls it): the producer is rebuilt with ctypes as Paddle 2.4 had it, the
consumer as a framework takes a tensor.  `fixed`: the tensor holds its
owner, whose memory is freed at the release.
"""
import ctypes
import sys

from dlpack_ctypes import DLManagedTensor, api, capsule_args, kDLCUDA, mark, tensor

fixed = sys.argv[1:] == ["fixed"]
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]


class DeviceTensor:
    """The owner: device memory, freed when it dies."""

    def __init__(self, n):
        self.ptr = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(self.ptr), n * 4) == 0

    def free(self):
        cudart.cudaFree(self.ptr)


owner = DeviceTensor(256)
made = tensor(owner.ptr.value, [256], device=kDLCUDA,
              deleter=(lambda addr: owner.free()) if fixed else (lambda addr: None))
mark("start")
cap = api.PyCapsule_New(*capsule_args(made))  # the export
if not fixed:
    owner.free()  # the owner dies: its memory goes, under the share
managed = api.PyCapsule_GetPointer(cap, b"dltensor")
api.PyCapsule_SetName(cap, b"used_dltensor")  # the import
DLManagedTensor.from_address(managed).deleter(managed)
mark("end")
