"""A Rust PyO3 extension (tests/rust/dlpack_rs) as producer and consumer."""
from common import mark  # first: it puts the built extensions on sys.path

import dlpack_rs  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.utils.dlpack  # noqa: E402


class FromRust:
    """An array-API object whose __dlpack__ is the Rust producer."""

    def __dlpack__(self, stream=None):
        return dlpack_rs.make(6)

    def __dlpack_device__(self):
        return (1, 0)


held = dlpack_rs.consume(dlpack_rs.make(4))
print("rust legacy", held.total())
mark("drop rust legacy")
del held
mark("rust versioned")
held = dlpack_rs.consume(dlpack_rs.make_versioned(5, 1))
print("rust versioned", held.total())
mark("drop rust versioned")
del held
mark("torch to rust")
held = dlpack_rs.consume(torch.utils.dlpack.to_dlpack(torch.arange(3.0, dtype=torch.float64)))
print("torch to rust", held.total())
del held
mark("rust to numpy")
a = np.from_dlpack(FromRust())
print("rust to numpy", a.sum())
del a
mark("unconsumed")
capsule = dlpack_rs.make(2)
del capsule
mark("end")
