"""Framework cases for bin/gpu-check, one per process:

    python3 bin/gpu_frameworks.py CASE

prints one line `RESULT {json}` and exits 0 when the frameworks' own results
are right, 1 when they are wrong, 77 when the case cannot run here (a
framework is missing, has no GPU, or lacks the API; the reason is printed).
The shim's side (events) is checked by gpu-check, not here.

Cases: SRC-DST-MODE with SRC, DST in torch, cupy, jax, numpy and MODE
zero_copy or copy (copy=True through the array API's from_dlpack); race-MODE
(a late write on a torch side stream read by CuPy; gpu-check runs it under
DLSHIM_SYNC=check and enforce); train-N (N steps of torch matmuls exchanging
with CuPy, timed)."""
import json
import os
import sys
import time

UNAVAILABLE = 77
N = 1 << 20


def out(**fields):
    print("RESULT " + json.dumps(fields), flush=True)


def unavailable(why):
    out(status="unavailable", why=why)
    sys.exit(UNAVAILABLE)


def load(name):
    """The framework module, with a working GPU, or exit 77."""
    try:
        if name == "torch":
            import torch
            if not torch.cuda.is_available():
                unavailable("torch %s has no CUDA device" % torch.__version__)
            return torch
        if name == "cupy":
            import cupy
            cupy.cuda.runtime.getDeviceCount()
            return cupy
        if name == "jax":
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
            import jax
            if not [d for d in jax.devices() if d.platform == "gpu"]:
                unavailable("jax %s has no GPU device" % jax.__version__)
            return jax
        import numpy
        return numpy
    except ImportError as e:
        unavailable("%s is not installed (%s)" % (name, e))
    except Exception as e:  # a framework without a usable device
        unavailable("%s: %s" % (name, e))


def make(fw, name):
    """A float32 vector 0, 1, 2, ... on the framework's device."""
    if name == "torch":
        return fw.arange(N, dtype=fw.float32, device="cuda")
    if name == "cupy":
        return fw.arange(N, dtype=fw.float32)
    if name == "jax":
        return fw.numpy.arange(N, dtype="float32")
    return fw.arange(N, dtype=fw.float32)


def from_dlpack(fw, name, x, copy):
    kw = {"copy": True} if copy else {}
    if name == "torch":
        return fw.from_dlpack(x, **kw)
    if name == "cupy":
        return fw.from_dlpack(x, **kw)
    if name == "jax":
        return fw.numpy.from_dlpack(x, **kw)
    return fw.from_dlpack(x, **kw)


def total(name, y):
    """The sum, computed by the consuming framework, as a Python float."""
    if name == "torch":
        return float(y.double().sum().item())
    if name == "jax":
        return float(y.astype("float64").sum())
    return float(y.astype("float64").sum())


def exchange(src, dst, mode):
    fs, fd = load(src), load(dst)
    x = make(fs, src)
    expected = float(N) * (N - 1) / 2
    try:
        y = from_dlpack(fd, dst, x, mode == "copy")
    except (TypeError, BufferError, RuntimeError, ValueError) as e:
        unavailable("%s.from_dlpack(%s%s) refused: %s" % (dst, src, ", copy=True" if mode == "copy"
                                                         else "", e))
    got = total(dst, y)
    ok = got == expected
    out(status="pass" if ok else "fail", sum=got, expected=expected,
        versions={src: fs.__version__, dst: fd.__version__})
    return 0 if ok else 1


def race(mode):
    """A torch side stream writes late (a GPU sleep before the copy); CuPy
    reads the tensor on its own stream with nothing ordering the two.  The
    side stream is a non-blocking one of CuPy's: with a torch.cuda.Stream()
    CuPy read the written data on an H100, so something (the dlshim log
    showed no race either) ordered the two there."""
    torch, cupy = load("torch"), load("cupy")
    src = torch.full((N,), 7.0, device="cuda")
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    side_owner = cupy.cuda.Stream(non_blocking=True)
    side = torch.cuda.ExternalStream(side_owner.ptr)
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles before the write
        x.copy_(src)                    # cudaMemcpyAsync on the side stream
    with cupy.cuda.Stream(non_blocking=True):
        y = cupy.from_dlpack(x)         # torch orders its *current* stream only
        z = y.copy()                    # reads x's bytes on CuPy's stream
        cupy.cuda.get_current_stream().synchronize()
    seen = float(z[0])
    torch.cuda.synchronize()
    # check mode: the stale 0 is the expected (racy) outcome; enforce: 7.
    out(status="pass", seen=seen, fresh=seen == 7.0, mode=mode)
    return 0


def train(steps):
    torch, cupy = load("torch"), load("cupy")
    a = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda") / 32
    for _ in range(5):  # warm-up: kernels, cuBLAS handles, pools
        a = torch.tanh(a @ w)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        a = torch.tanh(a @ w)
        c = cupy.from_dlpack(a)
        c *= 0.5
        a = torch.from_dlpack(c)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    out(status="pass", steps=steps, seconds=seconds, us_per_step=seconds / steps * 1e6)
    return 0


def main(case):
    parts = case.split("-")
    if parts[0] == "race":
        return race(parts[1])
    if parts[0] == "train":
        return train(int(parts[1]))
    src, dst, mode = parts
    return exchange(src, dst, mode)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
