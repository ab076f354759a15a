"""dlshim.attach() and the DLPack C exchange table (tvm-ffi's echo through
PyTorch's table, both ways).  `cold`: the first echo comes after the attach;
`warm`: one echo before it, so tvm-ffi already holds PyTorch's table.
Usage: attach_exchange.py cold|warm"""
import os
import sys

import torch
import tvm_ffi
import tvm_ffi.testing  # noqa: F401  (registers testing.echo)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python"))
import dlshim  # noqa: E402

echo = tvm_ffi.get_global_func("testing.echo")
t = torch.arange(4.0)
if sys.argv[1] == "warm":
    echo(t)
assert dlshim.attach(format="jsonl", log="stderr")
sys.stderr.write("MARK attached\n")
back = echo(t)
del back
sys.stderr.write("MARK end\n")
