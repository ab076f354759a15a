"""Exchanges from several Python threads at once."""
import threading

import numpy as np
import torch

PER_THREAD = 50
THREADS = 4
results = [0] * THREADS


def work(i):
    total = 0
    for k in range(PER_THREAD):
        t = torch.full((8,), float(k))
        a = np.from_dlpack(t)
        total += int(a.sum())
        del a, t
    results[i] = total


threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
for th in threads:
    th.start()
for th in threads:
    th.join()
print("totals", results)
