"""A capsule nobody consumes: the producer's destructor releases it."""
import torch
import torch.utils.dlpack

from common import mark

capsule = torch.utils.dlpack.to_dlpack(torch.ones(3))
mark("capsule dropped")
del capsule
mark("end")
print("ok")
