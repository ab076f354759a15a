"""pytest plugin: `pytest -p dlshim.pytest` (the launcher, `dlshim -- pytest`,
loads it by itself).

While a test runs, every dlshim event carries its node id as `test`; after
each test the plugin asks the shim (dlshim_get_status, include/dlshim.h)
what the test caused: violations, and shares it left outstanding.  They are
listed at the end of the run; with --dlshim-strict, a test that caused a
violation fails, its report naming the kind and the Python line.

Without libdlshim.so preloaded the plugin says so once and does nothing;
with --dlshim-strict it attaches the shim itself (dlshim.attach(), the
DLSHIM_* environment applying), and stops the run where it cannot (a check
that cannot fail must not pass).
Under pytest-xdist each worker logs to its own file: a DLSHIM_LOG path
without %p gets one before the workers start."""
import ctypes
import os

import pytest


from ._attach import Status


class Shim:
    """The preloaded library's public API, found in the global scope."""

    def __init__(self):
        self.set_test = self.get_status = None
        try:
            process = ctypes.CDLL(None)
            set_test, get_status = process.dlshim_set_test, process.dlshim_get_status
        except (OSError, AttributeError):
            return
        set_test.argtypes, set_test.restype = [ctypes.c_char_p], None
        get_status.argtypes, get_status.restype = [ctypes.POINTER(Status)], ctypes.c_int
        self.set_test, self.get_status = set_test, get_status

    def status(self):
        s = Status(size=ctypes.sizeof(Status))
        return s if self.get_status and self.get_status(ctypes.byref(s)) == 0 else None

    @property
    def active(self):
        return self.status() is not None


def pytest_addoption(parser):
    group = parser.getgroup("dlshim", "DLPack handoffs checked by dlshim")
    group.addoption("--dlshim-strict", action="store_true", default=False,
                    help="fail a test that caused a dlshim violation")


def _per_worker_log(config):
    """One log per xdist worker: the controller puts %p into a file path
    that has none, before the workers start (they inherit it)."""
    log = os.environ.get("DLSHIM_LOG", "")
    numprocesses = getattr(config.option, "numprocesses", None)
    if (not numprocesses or os.environ.get("PYTEST_XDIST_WORKER") or log in ("", "stderr", "off")
            or "%p" in log or "%r" in log):
        return
    stem, ext = os.path.splitext(log)
    os.environ["DLSHIM_LOG"] = f"{stem}.%p{ext}"


def pytest_configure(config):
    _per_worker_log(config)
    config.pluginmanager.register(Findings(), "dlshim-findings")
    shim = Shim()
    if not shim.active and config.getoption("dlshim_strict"):
        from . import attach
        try:
            attach()
        except (OSError, ValueError) as e:
            raise pytest.UsageError(f"dlshim: --dlshim-strict could not attach the shim ({e}): "
                                    "run `dlshim -- pytest ...`")
        shim = Shim()
    if not shim.active and config.getoption("dlshim_strict"):
        # A strict run that checks nothing must not pass.
        raise pytest.UsageError("dlshim: --dlshim-strict needs libdlshim.so preloaded or "
                                "attached: run `dlshim -- pytest ...`")
    if not shim.active:
        if not os.environ.get("PYTEST_XDIST_WORKER"):  # once, not once per worker
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    "dlshim: libdlshim.so is not preloaded (run `dlshim -- pytest ...`); "
                    "the dlshim plugin does nothing"), stacklevel=2)
        return
    config.pluginmanager.register(Tracker(shim, config.getoption("dlshim_strict")),
                                  "dlshim-tracker")


class Tracker:
    """In the process that runs the tests (an xdist worker, or pytest
    itself): names the test to the shim and compares the shim's status
    before and after."""

    def __init__(self, shim, strict):
        self.shim = shim
        self.strict = strict
        self.start = None  # the status when the test began
        self.phase = None  # ... when its current phase began (strict mode)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.shim.set_test(item.nodeid.encode("utf-8", "replace"))
        self.start = self.phase = self.shim.status()
        try:
            yield
        finally:
            self.shim.set_test(None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = (yield).get_result()
        now = self.shim.status()
        if not (self.start and now):
            return
        new = now.violations - self.phase.violations
        if self.strict and new > 0 and not report.failed:
            where = _text(now.last_violation_py)
            report.outcome = "failed"
            report.longrepr = (f"dlshim: {new} DLPack violation(s) in {report.when} of "
                               f"{item.nodeid}: {_text(now.last_violation)}"
                               + (f" at {where}" if where else "")
                               + "\n(--dlshim-strict; the events are in the dlshim log)")
        self.phase = now  # a phase fails for the violations it saw
        if call.when == "teardown":  # the test's findings, carried to the controller too
            violations = now.violations - self.start.violations
            outstanding = max(0, now.outstanding - self.start.outstanding)
            parts = []
            if violations:
                where = _text(now.last_violation_py)
                parts.append(f"{violations} violation(s), last {_text(now.last_violation)}"
                             + (f" at {where}" if where else ""))
            if outstanding:
                parts.append(f"{outstanding} share(s) still outstanding")
            if parts:
                report.user_properties.append(("dlshim", "; ".join(parts)))


class Findings:
    """Wherever the reports arrive (pytest itself, or the xdist controller):
    the tests' findings, listed at the end of the run."""

    def __init__(self):
        self.lines = []

    def pytest_runtest_logreport(self, report):
        self.lines += [f"{report.nodeid}: {value}" for name, value in report.user_properties
                       if name == "dlshim"]

    def pytest_terminal_summary(self, terminalreporter):
        if self.lines:
            terminalreporter.section("dlshim")
            for line in self.lines:
                terminalreporter.write_line(line)


def _text(raw):
    return raw.decode("utf-8", "replace")
