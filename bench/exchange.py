"""bench/exchange.py N: N round trips through DLPack between PyTorch and NumPy
of 1M-element float32 buffers; prints {"ns": <per round trip>}.  Run by
bench/run with and without the shim.

A round trip is one handoff each way: torch -> numpy, then numpy -> torch.
(NumPy 1.24 marks an array it imported through DLPack read-only and refuses
to export it again, so the way back starts from a NumPy-owned array.)"""
import json
import sys
import time

import numpy as np
import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
t = torch.ones(1_000_000, dtype=torch.float32)
a = np.ones(1_000_000, dtype=np.float32)


def round_trip():
    as_numpy = np.from_dlpack(t)
    as_torch = torch.from_dlpack(a)
    return as_numpy, as_torch


for _ in range(1000):  # warm both frameworks' paths
    round_trip()
start = time.perf_counter_ns()
for _ in range(n):
    round_trip()
elapsed = time.perf_counter_ns() - start
as_numpy, as_torch = round_trip()
assert as_numpy.ctypes.data == t.data_ptr() and as_torch.data_ptr() == a.ctypes.data
print(json.dumps({"ns": elapsed / n}))
