"""RW09: PyTorch's from_dlpack never called the deleter of an empty tensor
whose data pointer is NULL (legal in DLPack): the metadata and whatever the
producer's context holds leaked.

https://github.com/pytorch/pytorch/issues/117058 (torch 2.1.2; reproduced
here with Debian's torch 1.13, fixed by torch 2.3).  The producer is rebuilt
with ctypes (the issue's own reproducer); the consumer is the real torch:
run with Debian's python3 (torch 1.13) for the bug, with the venv's (torch
2.13) for the fixed behaviour.
"""
import gc

import torch

from dlpack_ctypes import api, capsule_args, mark, releasing_destructor, tensor

released = []
made = tensor(None, [0], deleter=lambda addr: released.append(addr))
destructor = releasing_destructor(made)

mark("start")
t = torch.utils.dlpack.from_dlpack(api.PyCapsule_New(*capsule_args(made, destructor)))
print("torch", torch.__version__, "shape", tuple(t.shape))
del t  # torch 1.13 never calls the deleter of a NULL-data tensor
gc.collect()
mark("end")
print("deleter calls:", len(released))
