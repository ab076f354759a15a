"""The frameworks under test: how each makes a small CPU tensor, takes one
through DLPack, and where its data lies (the oracle for zero-copy, read
without DLPack where the framework allows it).

Imported by the programs in this folder; run with the venv's Python
(make venv).  Paddle is imported before TensorFlow: the other order crashes
in `import paddle` (TensorFlow 2.21 and Paddle 3.3.1, without dlshim too)."""
import ctypes
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import paddle  # noqa: E402  (first: see above)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import tvm_ffi  # noqa: E402
import warp as wp  # noqa: E402

wp.config.quiet = True
wp.init()

NAMES = ["torch", "numpy", "jax", "tensorflow", "paddle", "mlx", "tvm_ffi", "pyarrow", "warp"]
CONSUMERS = [n for n in NAMES if n != "pyarrow"]  # PyArrow has no from_dlpack
VERSIONS = {
    "torch": torch.__version__, "numpy": np.__version__, "jax": jax.__version__,
    "tensorflow": tf.__version__, "paddle": paddle.__version__, "mlx": mx.__version__,
    "tvm_ffi": tvm_ffi.__version__, "pyarrow": pa.__version__, "warp": wp.config.version,
}
DISTRIBUTIONS = {
    "torch": "torch", "numpy": "numpy", "jax": "jax", "tensorflow": "tensorflow-cpu",
    "paddle": "paddlepaddle", "mlx": "mlx", "tvm_ffi": "apache-tvm-ffi", "pyarrow": "pyarrow",
    "warp": "warp-lang",
}


def mark(name):
    sys.stderr.write(f"MARK {name}\n")
    sys.stderr.flush()


def aligned(values, alignment=64):
    """A copy of `values` whose data starts on an `alignment`-byte boundary:
    JAX takes CPU data without a copy only when it is 64-byte aligned, and
    NumPy's small arrays are aligned to 16 only, so that zero-copy or copy
    is the same in every run."""
    raw = np.empty(values.nbytes + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


# How each framework makes a float32 tensor from NumPy values (tvm-ffi and
# PyArrow wrap the NumPy buffer itself).
MAKERS = {
    "torch": lambda v: torch.arange(len(v), dtype=torch.float32),
    "numpy": lambda v: v,
    "jax": lambda v: jnp.arange(len(v), dtype=jnp.float32),
    "tensorflow": lambda v: tf.range(len(v), dtype=tf.float32),
    "paddle": lambda v: paddle.arange(len(v), dtype="float32"),
    "mlx": lambda v: mx.arange(len(v), dtype=mx.float32),
    "tvm_ffi": tvm_ffi.from_dlpack,
    "pyarrow": pa.array,
    "warp": lambda v: wp.array(v, dtype=wp.float32, device="cpu"),
}

# How each takes a tensor through DLPack, its documented way.
TAKERS = {
    "torch": torch.from_dlpack,
    "numpy": np.from_dlpack,
    "jax": jnp.from_dlpack,
    "tensorflow": lambda x: tf.experimental.dlpack.from_dlpack(x.__dlpack__()),  # a capsule
    "paddle": paddle.from_dlpack,
    "mlx": mx.array,
    "tvm_ffi": tvm_ffi.from_dlpack,
    "warp": wp.from_dlpack,
}


def make(name, n=6):
    """A fresh float32 tensor [0, n) of framework `name`, on the CPU.  Where
    the data comes from NumPy it is 64-byte aligned (see aligned()); the
    frameworks' own allocators align it so, but for MLX's (8 past a 16-byte
    boundary, so JAX copies what MLX hands it)."""
    return MAKERS[name](aligned(np.arange(n, dtype=np.float32)))


def take(name, x):
    """Framework `name` takes `x` through DLPack."""
    return TAKERS[name](x)


# ctypes views of the C API, for reading capsules without a framework.
_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]


def capsule_name(capsule):
    return _api.PyCapsule_GetName(capsule).decode()


def capsule_data(capsule):
    """Where the tensor in an unconsumed capsule starts (data + byte_offset)."""
    name = capsule_name(capsule)
    managed = _api.PyCapsule_GetPointer(capsule, name.encode())
    dl_tensor = managed + (32 if name.endswith("_versioned") else 0)
    data = ctypes.c_void_p.from_address(dl_tensor).value or 0
    return data + ctypes.c_uint64.from_address(dl_tensor + 40).value


def data_ptr(name, x):
    """Where framework `name`'s tensor `x` keeps its data."""
    if name in ("torch", "paddle"):
        return x.data_ptr()
    if name == "numpy":
        return x.ctypes.data
    if name == "jax":
        return x.unsafe_buffer_pointer()
    if name == "mlx":
        return np.asarray(memoryview(x)).ctypes.data  # the buffer protocol
    if name == "tvm_ffi":
        return x.data_ptr()
    if name == "warp":
        return x.ptr
    if name == "pyarrow":
        return x.buffers()[1].address
    if name == "tensorflow":  # no pointer in its Python API: read its own capsule
        return capsule_data(tf.experimental.dlpack.to_dlpack(x))
    raise ValueError(name)


def exchange_api_of(x):
    """Whether x's type publishes the DLPack C exchange table."""
    return hasattr(type(x), "__dlpack_c_exchange_api__")
