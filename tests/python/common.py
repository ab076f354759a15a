"""Shared by the test scripts: markers that land in the event stream.

With DLSHIM_LOG=stderr the shim's events and these markers share one file
descriptor, so the order of lines is the order of what happened."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The compiled test extensions: TEST_EXT_DIR (the build tree).
sys.path.insert(0, os.environ.get("TEST_EXT_DIR", HERE))


def mark(name):
    sys.stderr.write(f"MARK {name}\n")
    sys.stderr.flush()


def dlshim_package():
    """The checkout's dlshim package, attaching the library of the build
    under test (TEST_DLSHIM_LIB: the sanitizer runs have their own)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import dlshim
    if os.environ.get("TEST_DLSHIM_LIB"):
        dlshim.library_path = lambda: os.environ["TEST_DLSHIM_LIB"]
    return dlshim
