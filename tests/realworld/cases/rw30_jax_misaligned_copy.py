"""RW30: JAX's from_dlpack silently copies a buffer that is not 64-byte
aligned (and did so even with copy=False): the in-place sharing a program
counted on is a copy.

https://github.com/jax-ml/jax/issues/29810 (jaxlib < 0.6.3; with copy=None,
still a silent copy in jax 0.10).  Both sides are real: numpy exports a view
4 bytes into its buffer, jax imports.  `fixed`: an aligned buffer, which
jax shares.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from dlpack_ctypes import mark  # noqa: E402

fixed = sys.argv[1:] == ["fixed"]
base = np.zeros(64, np.float32)
aligned = (-base.ctypes.data % 64) // 4  # the first element on a 64-byte boundary
x = base[aligned:aligned + 16] if fixed else base[aligned + 1:aligned + 17]
mark("start")
y = jnp.from_dlpack(x)
print("shared:", y.unsafe_buffer_pointer() == x.ctypes.data)
mark("end")
