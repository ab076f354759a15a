"""Forked children that leave with os._exit, as DataLoader and multiprocessing
workers do: one after a handoff it never released (its summary must show
it), one that did nothing the shim tracks (no summary), one that execs a
program that fails to start (no summary from the child in between)."""
import os

import numpy as np
import torch

from common import mark

t = torch.arange(4, dtype=torch.float32)
mark("parent")
a = np.from_dlpack(t)


def child(work):
    pid = os.fork()
    if pid == 0:
        if work == "share":
            kept = np.from_dlpack(torch.ones(3))  # never released: os._exit skips it
        elif work == "exec":
            try:
                os.execv("/nonexistent/program", ["program"])
            except OSError:
                pass
        os._exit(5)
    _, status = os.waitpid(pid, 0)
    print(work, "child", pid, "exit", os.waitstatus_to_exitcode(status), flush=True)


for work in ("share", "nothing", "exec"):
    child(work)
del a
mark("end")
