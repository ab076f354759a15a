"""RW02: kornia-rs's capsule destructor returned early exactly when the
capsule was still unconsumed (an inverted PyCapsule_IsValid test), so a
dropped capsule leaked its tensor.

https://github.com/kornia/kornia-rs/issues/782 (kornia-py before its fix,
https://github.com/kornia/kornia-rs/pull/783).  The PyO3 destructor is
rebuilt with ctypes, its test as the issue quotes it.  `fixed`: the test the
right way round.
"""
import gc
import sys

import numpy as np

from dlpack_ctypes import api, capsule_args, mark, tensor, unconsumed

fixed = sys.argv[1:] == ["fixed"]
released = []
buf = np.zeros(8, dtype=np.float32)
made = tensor(buf.ctypes.data, [8], deleter=lambda addr: released.append(addr))


def destructor(cap):
    valid = api.PyCapsule_IsValid(cap, b"dltensor") == 1
    if valid != fixed:  # the bug: `if PyCapsule_IsValid(...) == 1 { return; }`
        return
    t = unconsumed(cap)
    if t:
        made.deleter(t)


mark("start")
image = api.PyCapsule_New(*capsule_args(made, destructor))  # the export
del image  # dropped unconsumed
gc.collect()
mark("end")
print("deleter calls:", len(released))
