"""attach(), status() and strict() of the dlshim package (__init__.py).

The library is loaded with the environment variable _DLSHIM_ATTACHING set,
which leaves its constructor waiting; dlshim_attach (include/dlshim.h) then
checks the options and starts it, patching every module already loaded and
their dlopen/dlclose.  RTLD_GLOBAL, so that the public API is found in the
global scope (the pytest plugin, the header's run-time variant)."""
import ctypes
import os
import sys
import threading

_lock = threading.Lock()
_MARKER = "_DLSHIM_ATTACHING"


class Status(ctypes.Structure):
    """struct dlshim_status of include/dlshim.h."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("violations", ctypes.c_uint64),
        ("outstanding", ctypes.c_uint64),
        ("last_violation", ctypes.c_char * 48),
        ("last_violation_py", ctypes.c_char * 192),
        ("shares", ctypes.c_uint64),
        ("copies", ctypes.c_uint64),
        ("bytes_shared", ctypes.c_uint64),
        ("bytes_copied", ctypes.c_uint64),
        ("barriers_inserted", ctypes.c_uint64),
        ("violations_of", ctypes.c_uint64 * 16),
    ]


# violations_of's order: the shim's table of kinds, as DLSHIM_VIOLATION_KINDS
# of include/dlshim.h lists it (the library's build checks that list against
# the table, and test_attach.py this one).
VIOLATION_KINDS = ("double_release", "import_after_release", "double_import", "malformed_tensor",
                   "free_while_shared", "invalid_free", "leak", "unsynchronized_handoff",
                   "tensor_changed", "use_after_free", "unload_while_shared")


class Violation(AssertionError):
    """A violation inside `with dlshim.strict():`."""


def _value(key, value):
    if value is True or value is False:
        return "1" if value else "0"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(v) for v in value)
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _entries(options):
    """The keyword arguments as DLSHIM_X=value lines."""
    lines = []
    for key, value in options.items():
        text = _value(key, value)
        if "\n" in text or "\0" in text:
            raise ValueError(f"dlshim: {key}: a value holds no newline or NUL")
        lines.append(f"DLSHIM_{key.upper()}={text}")
    return "\n".join(lines).encode("utf-8", "surrogateescape")


def _global(name):
    """`name` of a shim already in the global scope (preloaded, or attached
    before), or None."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except AttributeError:
        return None


def _say(message):
    sys.stderr.write(f"dlshim: {message}\n")
    sys.stderr.flush()


def attach(options):
    text = _entries(options)
    with _lock:
        entry = _global("dlshim_attach")
        if entry is None and _global("dlshim_get_status") is not None:
            _say("already preloaded (a build without attach); attach() changes nothing")
            return False
        if entry is None:
            from . import library_path
            path = library_path()
            if not path:
                raise OSError("dlshim: no libdlshim.so: build it with make, or reinstall "
                              "the package")
            os.environ[_MARKER] = "1"
            try:
                entry = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL).dlshim_attach
            finally:
                del os.environ[_MARKER]
        entry.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        entry.restype = ctypes.c_int
        error = ctypes.create_string_buffer(1024)
        r = entry(text, error, len(error))
    if r < 0:
        # The environment's warning, less what it does then (nothing starts).
        why = error.value.decode("utf-8", "replace").split("; using the default")[0]
        raise ValueError("dlshim: " + why)
    if r == 1:
        _say("already tracking this process (preloaded, or attached before); "
             "attach() changes nothing")
    elif r == 2:
        _say("disabled (DLSHIM_DISABLE, or a secure-execution process); nothing is traced")
    return r == 0


def _raw_status():
    get = _global("dlshim_get_status")
    if get is None:
        return None
    get.argtypes, get.restype = [ctypes.POINTER(Status)], ctypes.c_int
    s = Status(size=ctypes.sizeof(Status))
    return s if get(ctypes.byref(s)) == 0 else None


def status():
    s = _raw_status()
    if s is None:
        return None
    return {"violations": s.violations, "outstanding": s.outstanding,
            "last_violation": s.last_violation.decode("utf-8", "replace"),
            "last_violation_py": s.last_violation_py.decode("utf-8", "replace"),
            "violations_by_kind": {kind: s.violations_of[k]
                                   for k, kind in enumerate(VIOLATION_KINDS)
                                   if s.violations_of[k]},
            "shares": s.shares, "zero_copy": s.shares - s.copies, "copies": s.copies,
            "bytes_shared": s.bytes_shared, "bytes_copied": s.bytes_copied,
            "barriers_inserted": s.barriers_inserted}


class Strict:
    """The context manager of strict(): compares the violation count at the
    block's start and end (the shim cannot raise inside the C call that
    caused one; the block's end is the first place Python can)."""

    def __enter__(self):
        s = _raw_status()
        if s is None:
            raise RuntimeError("dlshim.strict(): the shim does not track this process: "
                               "call dlshim.attach() first, or run under the launcher")
        self.before = s.violations
        return self

    def __exit__(self, kind, value, tb):
        s = _raw_status()
        new = s.violations - self.before if s else 0
        if new > 0 and kind is None:
            where = s.last_violation_py.decode("utf-8", "replace")
            raise Violation(f"dlshim: {new} violation(s) in the block, last "
                            f"{s.last_violation.decode('utf-8', 'replace')}"
                            + (f" at {where}" if where else ""))
        return False
