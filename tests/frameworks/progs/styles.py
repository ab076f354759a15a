"""Each way current frameworks consume (or drop) a DLPack capsule, between
marks named after it.  Prints one line: RESULT <json> with what the
frameworks report (whether each consumer shares the producer's bytes)."""
import gc
import json

import frameworks as fw
from frameworks import jnp, mark, mx, np, tf, torch, tvm_ffi

shared = {}


def scenario(name, make, take, ptr):
    x = make()
    src = fw.data_ptr(*ptr[0], x) if ptr else None
    mark(name)
    y = take(x)
    mark(f"{name}: taken")
    if ptr:
        shared[name] = fw.data_ptr(ptr[1], y) == src
    mark(f"{name}: measured")
    del y
    gc.collect()
    mark(f"{name}: dropped")
    del x
    gc.collect()


def unaligned(n=6):
    """Float32 data 16 bytes past a 64-byte boundary: JAX copies it."""
    raw = np.zeros(n * 4 + 128, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64 + 16
    out = raw[start:start + n * 4].view(np.float32)
    out[...] = np.arange(n, dtype=np.float32)
    return out


def numpy_then_torch():
    """NumPy's array around an imported tensor, handed on to PyTorch: the
    array keeps the import in a capsule of its own ("numpy_dltensor")."""
    a = np.from_dlpack(torch.arange(6, dtype=torch.float32))
    mark("numpy re-exports: imported")
    t = torch.from_dlpack(a)
    mark("numpy re-exports: taken")
    del t, a
    gc.collect()
    mark("numpy re-exports: dropped")


def dropped_capsule(name, make_capsule):
    capsule = make_capsule()
    mark(f"{name}: made")
    del capsule
    gc.collect()
    mark(f"{name}: dropped")


scenario("rename", lambda: fw.make("torch"), np.from_dlpack, (("torch",), "numpy"))
scenario("rename, then clear the destructor (JAX)", lambda: fw.make("numpy"),
         jnp.from_dlpack, (("numpy",), "jax"))
scenario("rename, then clear the destructor (TensorFlow)", lambda: fw.make("numpy"),
         lambda x: tf.experimental.dlpack.from_dlpack(x.__dlpack__()), (("numpy",), "tensorflow"))
scenario("clear the destructor, then rename (tvm-ffi)", lambda: fw.make("numpy"),
         tvm_ffi.from_dlpack, (("numpy",), "tvm_ffi"))
scenario("clear the destructor only (MLX)", lambda: fw.make("numpy"), mx.array,
         (("numpy",), "mlx"))
scenario("take, let go, then rename (JAX copying)", unaligned, jnp.from_dlpack,
         (("numpy",), "jax"))
numpy_then_torch()
dropped_capsule("TensorFlow's destructor releases and clears itself",
                lambda: tf.experimental.dlpack.to_dlpack(fw.make("tensorflow")))
dropped_capsule("JAX's destructor frees without the deleter",
                lambda: fw.make("jax").__dlpack__())
dropped_capsule("PyTorch's destructor calls the deleter",
                lambda: fw.make("torch").__dlpack__(max_version=(1, 0)))
mark("end")
print("RESULT " + json.dumps(shared), flush=True)
