"""NumPy alone: a handoff between NumPy arrays two calls deep, for the
interpreters that have NumPy and no other framework (the CPython 3.14 root,
tests/py314).  Lines tagged `# line: NAME` are what the events must name."""
from common import mark

import numpy as np


def inner(a):
    b = np.from_dlpack(a)  # line: take
    mark("taken")
    del b  # line: drop
    mark("dropped")


def outer():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    inner(a)  # line: outer


mark("start")
outer()  # line: module
mark("end")
