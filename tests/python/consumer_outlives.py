"""The consumer keeps the data after the producer's tensor is gone."""
import gc

import numpy as np
import torch

from common import mark

t = torch.arange(1000, dtype=torch.float64)
a = np.from_dlpack(t)
mark("producer deleted")
del t
gc.collect()
print("sum after producer died", a.sum())
mark("consumer deleted")
del a
mark("end")
