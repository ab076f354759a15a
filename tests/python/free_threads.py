"""Many threads exchanging tensors at once, each letting the GIL go around
every exchange: NumPy to NumPy, a tensor made with ctypes to NumPy, and one
made and taken with ctypes and released through a CFUNCTYPE call of its
deleter (the GIL let go: the shim reads the thread's frames without it).
In a free-threaded CPython these threads would run truly in parallel; here
the GIL switches between them at every foreign call.  The tensors are C
(malloc'd, libc's free) or NumPy's: nothing but NumPy and ctypes.
Each thread runs kinds 0, 1, 2, 0, 1, 2, ... in order, so its events are
export, import, release of kind i % 3 for i = 0..HANDOFFS-1; each line that
causes one is tagged `# py: TAG` here or in ctypes_tensor.py (the test
reads the tags).
Usage: free_threads.py [THREADS] [HANDOFFS]"""
import sys
import threading

import numpy as np

from ctypes_tensor import api, deleter_of, export, libc

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 8
HANDOFFS = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
let_go = libc.sched_yield  # a foreign call: the GIL let go, other threads run


class Made:
    """A producer in Python: its capsule made with ctypes."""
    def __init__(self):
        self.capsule = export()

    def __dlpack__(self, stream=None, **kw):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def numpy_to_numpy(a):
    b = np.from_dlpack(a)  # py: numpy handoff
    let_go()
    del b  # py: numpy release


def ctypes_to_numpy():
    b = np.from_dlpack(Made())  # py: ctypes to numpy
    let_go()
    del b  # py: numpy frees ctypes'


def ctypes_to_ctypes():
    cap = export()
    m = api.PyCapsule_GetPointer(cap, b"dltensor")
    api.PyCapsule_SetName(cap, b"used_dltensor")  # py: ctypes import
    del cap
    let_go()
    deleter_of(m)(m)  # py: released without the GIL


def exchange():
    a = np.arange(4, dtype=np.int64)
    kinds = (lambda: numpy_to_numpy(a), ctypes_to_numpy, ctypes_to_ctypes)
    for i in range(HANDOFFS):
        let_go()
        kinds[i % 3]()


workers = [threading.Thread(target=exchange) for _ in range(THREADS)]
for t in workers:
    t.start()
for t in workers:
    t.join()
print("tids", " ".join(str(t.native_id) for t in workers))
