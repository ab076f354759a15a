"""Capsules made and taken through ctypes.pythonapi, as Warp and PyArrow's
tests do: a DLManagedTensor built here, with dtype and device codes outside
dlshim's tables, handed to NumPy; NumPy's capsule made on one thread, let
go and renamed on another; NumPy's capsule taken here and never let go (an
outstanding share at exit).  Usage: ctypes_capsules.py"""
import ctypes
import gc
import pathlib
import sys
import threading

import numpy as np


def mark(name):
    sys.stderr.write(f"MARK {name}\n")
    sys.stderr.flush()


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]

# ctypes.pythonapi with the capsule functions typed, as the package test's
# framework-free handoffs declare it.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "package" / "cases"))
from handoffs import api  # noqa: E402

alive = {}  # what each tensor keeps alive, by address
released = []


@DELETER
def deleter(managed):
    address = ctypes.addressof(managed.contents)
    released.append(address)
    alive.pop(address, None)


def tensor(code, bits, device_type=1, n=4):
    data = (ctypes.c_uint8 * (n * bits // 8))()
    shape = (ctypes.c_int64 * 1)(n)
    t = DLManagedTensor()
    t.dl_tensor = DLTensor(ctypes.cast(data, ctypes.c_void_p), DLDevice(device_type, 0), 1,
                           DLDataType(code, bits, 1), shape, None, 0)
    t.deleter = deleter
    alive[ctypes.addressof(t)] = (t, data, shape)
    return t


def capsule_of(t):
    """A capsule made through ctypes, without a destructor (the consumer, or
    the end of this program, releases it)."""
    return api.PyCapsule_New(ctypes.addressof(t), b"dltensor", None)


def take(capsule):
    """Consumes a legacy capsule through ctypes; the tensor is never let go."""
    managed = api.PyCapsule_GetPointer(capsule, b"dltensor")
    api.PyCapsule_SetName(capsule, b"used_dltensor")
    return managed


# A tensor of a made-up dtype code (42) on a made-up device type (99): logged
# by number, not malformed; dropped unconsumed, it is released by hand.
mark("codes")
odd = tensor(code=42, bits=8, device_type=99)
c = capsule_of(odd)
t = take(c)
mark("codes: taken")
odd.deleter(ctypes.pointer(odd))
mark("codes: released")

# DLPack 1.1's float4 (code 17) in a capsule made here, taken the same way.
mark("float4")
f4 = tensor(code=17, bits=4, n=8)
take(capsule_of(f4))
f4.deleter(ctypes.pointer(f4))
mark("float4: released")

# A capsule made before its tensor is filled in (as CuPy 14 does): the
# export is what the tensor holds when it is handed over, not the garbage
# it held when the capsule was made.
mark("late")
late = tensor(code=2, bits=32)  # float32
filled = DLTensor()
ctypes.memmove(ctypes.byref(filled), ctypes.byref(late.dl_tensor), ctypes.sizeof(DLTensor))
ctypes.memset(ctypes.byref(late.dl_tensor), 0x65, ctypes.sizeof(DLTensor))  # "eeee..."
c = capsule_of(late)
late.dl_tensor = filled
take(c)
mark("late: taken")
late.deleter(ctypes.pointer(late))
mark("late: released")

# NumPy's capsule made on one thread and taken on another the way JAX takes
# data it copies: opened, let go through its deleter, then renamed.  The
# taking thread never saw the capsule made: it is remembered when opened.
mark("across threads")
made = {}
maker = threading.Thread(
    target=lambda: made.update(c=np.arange(4, dtype=np.float32).__dlpack__()))
maker.start()
maker.join()


# The deleter called with the GIL held (as a C consumer calls it), so that the
# Python code behind the call through ctypes can be named.
HELD_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


def let_go_then_rename(capsule):
    managed = api.PyCapsule_GetPointer(capsule, b"dltensor")
    deleter = ctypes.cast(managed, ctypes.POINTER(DLManagedTensor)).contents.deleter
    HELD_DELETER(ctypes.cast(deleter, ctypes.c_void_p).value)(managed)
    api.PyCapsule_SetName(capsule, b"used_dltensor")


taker = threading.Thread(target=let_go_then_rename, args=(made["c"],))
taker.start()
taker.join()
mark("across threads: taken")
del made
gc.collect()
mark("across threads: dropped")

# NumPy's capsule, taken here and never released: outstanding at exit.
mark("kept")
kept = np.arange(6, dtype=np.float32)
take(kept.__dlpack__())
mark("kept: taken")
gc.collect()
mark("end")
