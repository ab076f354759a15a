"""dlshim: see, check and fix what happens to tensors shared through DLPack.

The tracer is a C library preloaded into the program (LD_PRELOAD); this
package carries it, starts programs under it (the `dlshim` command, `python
-m dlshim`), reports on its jsonl logs (the `dlshim-report` command:
report.py) and adds a pytest plugin (`pytest -p dlshim.pytest`)."""
import os

__all__ = ["library_path", "launcher_path"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def _checkout_root():
    """The repository this package sits in, when it runs from a checkout."""
    root = os.path.dirname(os.path.dirname(_HERE))
    return root if os.path.isfile(os.path.join(root, "shim", "base", "options.def")) else None


def library_path():
    """The libdlshim.so to preload: the installed one, else a checkout's build."""
    installed = os.path.join(_HERE, "libdlshim.so")
    if os.path.isfile(installed):
        return installed
    root = _checkout_root()
    built = os.path.join(root, "build", "libdlshim.so") if root else None
    return built if built and os.path.isfile(built) else None


def launcher_path():
    """The shell launcher (bin/dlshim), installed beside the library."""
    installed = os.path.join(_HERE, "launcher.sh")
    if os.path.isfile(installed):
        return installed
    root = _checkout_root()
    return os.path.join(root, "bin", "dlshim") if root else None
