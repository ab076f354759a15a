"""make demo, part 4: an unmodified PyTorch/NumPy program under dlshim.

Nothing here knows about dlshim: the shim sees the DLPack capsules that
torch and numpy hand each other."""
import numpy as np
import torch

weights = torch.randn(256, 256)
as_numpy = np.from_dlpack(weights)          # torch -> numpy, zero-copy
print("numpy sees the same memory:", as_numpy.__array_interface__["data"][0] == weights.data_ptr())
del as_numpy

batch = np.ones((64, 256), dtype=np.float32)
as_torch = torch.from_dlpack(batch)         # numpy -> torch, zero-copy
print("result:", float((as_torch @ weights).sum()) != 0.0)
del as_torch

forgotten = torch.utils.dlpack.to_dlpack(torch.zeros(8))   # exported, never consumed
del forgotten
