"""Handoffs whose Python lines the events must name: NumPy taking a torch
tensor (C all the way), torch taking a NumPy array (torch.from_dlpack is
Python inside torch: its frames are skipped), a release when the last
reference goes, and a double release (with DLSHIM_ON_ERROR=protect).  Each
line the events should name ends with a `# line: NAME` comment.
Usage: locations.py"""
import ctypes
import sys

import numpy as np
import torch

DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
set_name = ctypes.pythonapi.PyCapsule_SetName
set_name.restype, set_name.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


def mark(name):
    sys.stderr.write(f"MARK {name}\n")
    sys.stderr.flush()


def numpy_takes_torch():
    t = torch.arange(4.0)
    a = np.from_dlpack(t)  # line: numpy_takes
    del a  # line: numpy_lets_go


def torch_takes_numpy():
    a = np.arange(4.0)
    return torch.from_dlpack(a)  # line: torch_takes


def release_twice():
    capsule = torch.ones(4).__dlpack__()  # line: exported
    managed = get_pointer(capsule, b"dltensor")
    set_name(capsule, b"used_dltensor")
    deleter = DELETER(ctypes.c_void_p.from_address(managed + 56).value)
    deleter(managed)
    deleter(managed)  # line: twice


def outer():
    release_twice()  # line: outer


mark("numpy")
numpy_takes_torch()
mark("torch")
b = torch_takes_numpy()
del b
mark("double")
outer()
mark("end")
