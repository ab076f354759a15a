"""`dlshim [OPTIONS] [--] PROGRAM [ARGS...]` and `python -m dlshim ...`: the
launcher (bin/dlshim) with the library installed in this package."""
import os
import signal
import sys

from . import launcher_path, library_path


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    launcher, lib = launcher_path(), library_path()
    if not launcher or not lib:
        sys.stderr.write("dlshim: this installation has no libdlshim.so; reinstall it "
                         "(pip install .) or build it with make\n")
        return 2
    if argv[:1] not in (["-h"], ["--help"]):
        argv = ["--lib", lib] + argv  # a --lib of the user's, later, wins
    # Python ignored SIGPIPE and SIGXFSZ when it started (so that a write
    # fails instead of killing it); the program gets the dispositions a
    # shell would give it, as subprocess's restore_signals does.
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.execv("/bin/sh", ["/bin/sh", launcher] + argv)
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
