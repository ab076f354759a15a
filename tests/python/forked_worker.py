"""A run of two processes for the report: the parent shares (one share a copy
the producer flagged, one held until exit), forks a worker that shares after
a pause and leaves with os._exit as DataLoader workers do (a share it holds
is never released), then shares again once the worker is done.  Prints the
worker's pid."""
import os
import time

from common import HERE  # noqa: F401  (first: it puts the built extensions on sys.path)

import dlpack1ext as ext  # noqa: E402

IS_COPIED = 2


def copied_share():
    return ext.consume(ext.make(64, IS_COPIED))


def share(n):
    return ext.consume(ext.make(n))


before = share(4)
del before
copied = copied_share()
del copied
held = share(8)  # released as the interpreter finalizes
pid = os.fork()
if pid == 0:
    time.sleep(0.2)
    worker = share(16)
    del worker
    kept = share(2)  # os._exit skips its release: outstanding
    os._exit(0)
os.waitpid(pid, 0)
after = share(32)
del after
print(pid, flush=True)
