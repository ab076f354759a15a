"""Python lines read without the GIL, under threads and a busy collector.

Each exchanging thread makes a DLPack capsule (ctypes.pythonapi: the GIL
held), takes it as a consumer does, and releases the tensor through a
CFUNCTYPE call of its deleter, which ctypes makes with the GIL let go: the
shim reads the thread's own frames while other threads run Python.  Those
others allocate, collect garbage and ask for every thread's frame objects
(sys._current_frames writes into the frames being read).  Each exchanging
thread releases from a function of its own, so a line read from the wrong
thread's frames shows.  The tensor and its deleter are C (malloc'd, libc's
free): nothing in the release needs the GIL.
Usage: gil_free_lines.py [THREADS] [ROUNDS]"""
import gc
import sys
import threading

from ctypes_tensor import api, deleter_of, export

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 200


def take(cap):
    m = api.PyCapsule_GetPointer(cap, b"dltensor")
    api.PyCapsule_SetName(cap, b"used_dltensor")
    return m


def release_in_a(m):
    deleter_of(m)(m)  # released in a


def release_in_b(m):
    deleter_of(m)(m)  # released in b


def exchange(release):
    for _ in range(ROUNDS):
        cap = export()
        m = take(cap)
        del cap
        release(m)


done = threading.Event()


def churn():
    while not done.is_set():
        junk = [[object()] * 8 for _ in range(200)]
        del junk
        gc.collect()
        sys._current_frames()


workers = [threading.Thread(target=exchange, args=(release_in_a if i % 2 == 0 else release_in_b,))
           for i in range(THREADS)]
churners = [threading.Thread(target=churn) for _ in range(2)]
for t in churners + workers:
    t.start()
for t in workers:
    t.join()
done.set()
for t in churners:
    t.join()
print("ids", " ".join(f"{t.native_id}:{'a' if i % 2 == 0 else 'b'}"
                      for i, t in enumerate(workers)))
