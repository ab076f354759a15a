"""numpy is imported (dlopen'ed) long after the shim started."""
import importlib

from common import mark  # first: it puts the built extensions on sys.path

import dlpack1ext as ext  # noqa: E402

holder = ext.consume(ext.make(3))
print("before numpy", ext.total(holder))
del holder
mark("importing numpy")
np = importlib.import_module("numpy")
src = np.arange(5, dtype=np.int32)
torch = importlib.import_module("torch")
t = torch.from_dlpack(src)
print("after numpy", int(t.sum()))
del t
mark("end")
