"""dlshim.attach() late, in a process that already imported torch, NumPy and
JAX, while other threads exchange tensors: exchanges on the `before` lines
run until the attach returns, then each thread makes ROUNDS on the `after`
lines.  Prints the attach's time (ATTACH_MS).  Usage: attach_threads.py"""
import os
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python"))
import dlshim  # noqa: E402

ROUNDS = 50
THREADS = 3  # one for each pair below
attached = threading.Event()
running = threading.Barrier(THREADS + 1)


def exchange(source, take):
    """`take` (a consumer's from_dlpack) of `source`, over and over."""
    take(source)  # a first exchange (JAX compiles things) before the test waits
    running.wait()
    while not attached.is_set():
        take(source)  # line: before
    for _ in range(ROUNDS):
        take(source)  # line: after


pairs = [(torch.arange(8.0), np.from_dlpack), (np.arange(8.0), torch.from_dlpack),
         (jnp.arange(8.0), np.from_dlpack)]
threads = [threading.Thread(target=exchange, args=pair) for pair in pairs]
for t in threads:
    t.start()
running.wait()
start = time.perf_counter()
assert dlshim.attach(format="jsonl", log="stderr")
took = time.perf_counter() - start
attached.set()
for t in threads:
    t.join()
print(f"ATTACH_MS {took * 1000:.1f}", flush=True)
print(f"JAX {jax.__version__}", flush=True)
