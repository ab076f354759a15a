"""The installed wheel's first run: `torch` hands a tensor to NumPy, or
`jax`: NumPy hands an array to JAX; each through DLPack, zero-copy."""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import numpy as np  # noqa: E402

if sys.argv[1] == "torch":
    import torch
    t = torch.arange(1024, dtype=torch.float32)
    a = np.from_dlpack(t)                          # HANDOFF
    assert a.ctypes.data == t.data_ptr()
    del a
else:
    import jax.numpy as jnp
    # XLA takes host memory in place only 64-byte aligned (else it copies)
    buf = np.empty(1024 + 16, dtype=np.float32)
    start = (-buf.ctypes.data % 64) // 4
    a = buf[start:start + 1024]
    a[:] = np.arange(1024)
    j = jnp.from_dlpack(a)                         # HANDOFF
    assert float(j.sum()) == float(a.sum())
    del j
print("done")
