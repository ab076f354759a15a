"""dlshim.attach() first, then NumPy and torch imported (their extension
modules loaded by the dlopen the attach took over) and one exchange each
way.  Usage: attach_then_import.py"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python"))
import dlshim  # noqa: E402

assert dlshim.attach(format="jsonl", log="stderr")
import numpy as np  # noqa: E402
import torch  # noqa: E402

a = np.from_dlpack(torch.arange(4.0))
t = torch.from_dlpack(np.arange(4.0))
del a, t
