"""A two-rank job for torchrun (gloo, CPU): every rank hands tensors
torch -> numpy -> torch and joins an all-reduce; rank 1 alone then
releases one tensor twice (run with DLSHIM_ON_ERROR=protect, which swallows
the second call).  Usage: torchrun --nproc-per-node 2 ranks.py"""
import ctypes

import numpy as np
import torch
import torch.distributed as dist

DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)  # with the GIL, as C code calls it
get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
set_name = ctypes.pythonapi.PyCapsule_SetName
set_name.restype, set_name.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


def release_twice(t):
    """Takes a legacy capsule of `t` as a consumer would and calls its
    deleter twice (DLManagedTensor.deleter is at byte 56)."""
    capsule = t.__dlpack__()
    managed = get_pointer(capsule, b"dltensor")
    set_name(capsule, b"used_dltensor")
    deleter = DELETER(ctypes.c_void_p.from_address(managed + 56).value)
    deleter(managed)
    deleter(managed)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.full((8,), float(rank))
    a = np.from_dlpack(t)
    back = torch.from_dlpack(a)
    dist.all_reduce(back)
    del a
    if rank == 1:
        release_twice(torch.ones(4))
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: sum {back.sum().item():.0f}")


if __name__ == "__main__":
    main()
