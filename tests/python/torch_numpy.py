"""torch -> numpy and numpy -> torch, each dropped at a marked point."""
import numpy as np
import torch

from common import mark

t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
a = np.from_dlpack(t)
print("numpy sees", a.tolist())
mark("numpy array dropped")
del a
mark("numpy to torch")

b = np.arange(4, dtype=np.int64)
u = torch.from_dlpack(b)
print("torch sees", u.tolist())
mark("torch tensor dropped")
del u
mark("end")
