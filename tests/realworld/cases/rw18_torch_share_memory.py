"""RW18: Tensor.share_memory_() moves a tensor's storage into shared memory
in place, freeing the old buffer, while a DLPack consumer of the tensor
still points at it: the consumer reads freed memory (garbage).

https://github.com/pytorch/pytorch/issues/36922 (torch 1.4; still open:
reproduced here with torch 2.13 and Debian's 1.13).  Both sides are real:
torch exports, numpy imports, torch moves the storage.  `fixed`: the storage
is moved before it is shared.
"""
import sys

import numpy as np
import torch

from dlpack_ctypes import mark

fixed = sys.argv[1:] == ["fixed"]
mark("start")
a = torch.arange(4096.0)
if fixed:
    a.share_memory_()
n = np.from_dlpack(a)
if not fixed:
    a.share_memory_()  # frees the buffer numpy reads
print("first values:", n[:3].tolist())
del n
mark("end")
