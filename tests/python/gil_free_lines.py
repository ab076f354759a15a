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
import ctypes
import gc
import sys
import threading

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 200

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
FREE = ctypes.cast(libc.free, ctypes.c_void_p).value
api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # a foreign call: the GIL let go

# DLManagedTensor: DLTensor (data, device, ndim, dtype, shape, strides,
# byte_offset: 48 bytes), manager_ctx, deleter; then the shape's one extent.
SIZE, DELETER_AT, SHAPE_AT = 64, 56, 64


def export():
    m = libc.malloc(SIZE + 8)
    ctypes.memset(m, 0, SIZE + 8)
    ctypes.c_void_p.from_address(m).value = m + SHAPE_AT  # data: any readable bytes
    ctypes.c_int32.from_address(m + 8).value = 1           # kDLCPU
    ctypes.c_int32.from_address(m + 16).value = 1          # ndim
    ctypes.c_uint32.from_address(m + 20).value = 0x00010801  # uint8, lanes 1
    ctypes.c_void_p.from_address(m + 24).value = m + SHAPE_AT
    ctypes.c_int64.from_address(m + SHAPE_AT).value = 8
    ctypes.c_void_p.from_address(m + DELETER_AT).value = FREE
    return api.PyCapsule_New(m, b"dltensor", None)


def take(cap):
    m = api.PyCapsule_GetPointer(cap, b"dltensor")
    api.PyCapsule_SetName(cap, b"used_dltensor")
    return m


def release_in_a(m):
    DELETER(ctypes.c_void_p.from_address(m + DELETER_AT).value)(m)  # released in a


def release_in_b(m):
    DELETER(ctypes.c_void_p.from_address(m + DELETER_AT).value)(m)  # released in b


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
