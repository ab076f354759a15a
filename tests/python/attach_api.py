"""dlshim.attach()'s answers and dlshim.status()/strict(): a bad option
raises the environment's message and starts nothing, attaching twice says
so, a clean block passes strict() and a double release in one raises,
naming the kind and the line.  Usage: attach_api.py"""
import ctypes
import os
import sys

from common import dlshim_package

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "package",
                                "cases"))
dlshim = dlshim_package()

assert "dlshim._attach" not in sys.modules  # importing the package loads nothing
assert dlshim.status() is None
try:
    dlshim.attach(on_error="bogus")
except ValueError as e:
    print(f"RAISED {e}", flush=True)
else:
    raise AssertionError("a bad value was taken")
try:
    dlshim.attach(colour="blue")
except ValueError as e:
    print(f"RAISED {e}", flush=True)
assert dlshim.status() is None  # nothing started
print(f"FIRST {dlshim.attach(format='jsonl', events=['export', 'import', 'release', 'violation'])}",
      flush=True)
print(f"SECOND {dlshim.attach()}", flush=True)

import handoffs  # noqa: E402

with dlshim.strict():
    handoffs.consume(handoffs.export())
print(f"STATUS {sorted(dlshim.status().items())}", flush=True)
try:
    with dlshim.strict():
        capsule = handoffs.export()
        managed = handoffs.api.PyCapsule_GetPointer(capsule, b"dltensor")
        handoffs.api.PyCapsule_SetName(capsule, b"used_dltensor")
        m = ctypes.cast(managed, ctypes.POINTER(handoffs.DLManagedTensor))
        deleter = handoffs.DELETER(m.contents.deleter)
        deleter(m)
        deleter(m)  # line: strict
except dlshim.Violation as e:
    print(f"STRICT {e}", flush=True)
