"""The shim dlopen'ed by a process that already holds PyTorch and NumPy (as
ctypes here, or the Vulkan loader loading it as a layer, would), then a
tensor handed from one to the other."""
import ctypes
import os

import numpy as np
import torch

ctypes.CDLL(os.environ["DLSHIM_LIB"])  # raises OSError where it cannot load
a = np.from_dlpack(torch.arange(6.0))
assert float(a.sum()) == 15.0
