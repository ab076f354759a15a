"""Copies of a shared CPU buffer: numpy.array() and torch.tensor() copy what
np.from_dlpack() shared.  With DLSHIM_HOOKS=default,host-copy the shim sees
the copies made with memcpy (NumPy's); PyTorch 1.13 copies with its own
vectorized loops, which no memcpy hook can see."""
import numpy as np
import torch

from common import mark

t = torch.ones(1 << 20)          # 4 MiB of float32
a = np.from_dlpack(t)            # zero-copy: a shares t's buffer
mark("numpy.array")
b = np.array(a)                  # a copy of the shared buffer
mark("torch.tensor")
c = torch.tensor(a)              # another copy of it
mark("end")
print(float(b.sum()), float(c.sum()))
