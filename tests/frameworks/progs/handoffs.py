"""DLPack 1.x from real producers, each between marks: NumPy's read-only
and copied exports, PyTorch's copy on request, float8/float4 tensors, and
the C exchange table both ways (tvm-ffi's echo: PyTorch -> tvm-ffi ->
PyTorch, and Paddle -> tvm-ffi)."""
import gc

import frameworks as fw
from frameworks import jnp, mark, np, paddle, torch, tvm_ffi


def dropped(name):
    gc.collect()
    mark(f"{name}: dropped")


mark("read only")
ro = fw.make("numpy")
ro.flags.writeable = False
a = np.from_dlpack(ro)
mark("read only: taken")
print("read only consumer writeable:", a.flags.writeable)
del a
dropped("read only")

for producer in ("numpy", "torch"):
    x = fw.make(producer)
    mark(f"copy=True from {producer}")
    b = np.from_dlpack(x, copy=True)
    mark(f"copy=True from {producer}: taken")
    print(f"copy from {producer} shares bytes:", b.ctypes.data == fw.data_ptr(producer, x))
    del b
    dropped(f"copy=True from {producer}")

for name, make in (("float8 torch", lambda: torch.zeros(4, dtype=torch.float8_e4m3fn)),
                   ("float8 jax", lambda: jnp.zeros(4, dtype=jnp.float8_e5m2)),
                   ("float4 torch", lambda: torch.zeros(4, dtype=torch.float4_e2m1fn_x2))):
    x = make()
    mark(name)
    y = torch.from_dlpack(x)
    mark(f"{name}: taken")
    print(name, "->", y.dtype)
    del y
    dropped(name)

echo = tvm_ffi.get_global_func("testing.echo")
t = fw.make("torch")
mark("echo")
back = echo(t)
mark("echo: returned")
print("echo gives", type(back).__module__, "sharing bytes:", back.data_ptr() == t.data_ptr())
del back
dropped("echo")

p = fw.make("paddle")
mark("paddle to tvm_ffi")
f = tvm_ffi.from_dlpack(p)
mark("paddle to tvm_ffi: taken")
del f
dropped("paddle to tvm_ffi")
mark("end")
