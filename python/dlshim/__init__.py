"""dlshim: see, check and fix what happens to tensors shared through DLPack.

The tracer is a C library preloaded into the program (LD_PRELOAD); this
package carries it, starts programs under it (the `dlshim` command, `python
-m dlshim`), reports on its jsonl logs (the `dlshim-report` command:
report.py) and adds a pytest plugin (`pytest -p dlshim.pytest`).

attach() starts it in a process that is already running instead (a
notebook, a test session, an IDE's runner): see _attach.py.  Importing this
package loads nothing; attach() does."""
import os

__all__ = ["library_path", "launcher_path", "attach", "status", "strict", "Violation"]

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


def attach(**options):
    """Loads libdlshim.so into this process and starts tracing from now on:
    options are the launcher's (log, format, on_error, events, hooks, ...) as
    keyword arguments, over the DLSHIM_* environment.  True when it started;
    False, saying so, when the shim already tracks the process (preloaded, or
    attached before) or is disabled; ValueError for an unknown option or a
    bad value."""
    from . import _attach
    return _attach.attach(options)


def status():
    """What the shim has seen since it started (dlshim_get_status), as a
    dict: violations (and violations_by_kind, the kinds seen), outstanding
    shares now, the last violation's kind and line, and the exit summary's
    shares, zero_copy, copies, bytes_shared, bytes_copied and
    barriers_inserted; None when it does not track this process."""
    from . import _attach
    return _attach.status()


def strict():
    """`with dlshim.strict(): ...` raises dlshim.Violation when the block
    caused a violation, naming its kind and Python line."""
    from . import _attach
    return _attach.Strict()


def __getattr__(name):
    if name == "Violation":
        from . import _attach
        return _attach.Violation
    raise AttributeError(name)


def load_ipython_extension(ip):
    """`%load_ext dlshim`: attaches and adds the %dlshim magic (_ipython.py)."""
    from . import _ipython
    _ipython.load(ip)
