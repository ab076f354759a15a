"""CPython 3.14 under the library built here: Debian unstable's python3.14
and python3-numpy, in the root scripts/py314-root builds once into a cache
folder (`make check-py314` builds it, or finds it, first).  The programs
that need only NumPy and ctypes run there through tests/py314/python3.14
(a chroot in a mount namespace of its own, the clone and /tmp at the same
paths inside): events exact, `py` and `py_stack` right, and the frames read
through the layout checked at start-up, not only through the C API."""
import os
import re
import subprocess

import pytest

from conftest import PYTHON_DIR, ROOT, between, run_free_threads

PY314 = ROOT / "tests" / "py314" / "python3.14"


@pytest.fixture(scope="module")
def root():
    """The root's folder: PY314_ROOT (make check-py314 sets it), else what
    scripts/py314-root builds or finds."""
    if os.environ.get("PY314_ROOT"):
        return os.environ["PY314_ROOT"]
    r = subprocess.run([ROOT / "scripts" / "py314-root"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture
def py314(dlshim, root):
    """dlshim.python on 3.14."""
    def run(script, *args, env=None, **kw):
        return dlshim.python(script, *args, host=PY314, env={"PY314_ROOT": root, **(env or {})},
                             **kw)
    return run


def test_the_root_runs_cpython_3_14_with_numpy(dlshim, root):
    r = dlshim.run([PY314, "-c", "import sys, numpy; print(sys.version_info[:2], numpy.__version__)"],
                   shim=False, env={"PY314_ROOT": root})
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("(3, 14) 2.")


def test_frames_are_read_through_the_checked_layout(py314):
    """The shim says which way it reads frames once it has checked: 3.14's
    row of the layout table, checked against the C API in this process."""
    r = py314("numpy_lines.py", env={"DLSHIM_VERBOSE": "1"})
    assert r.rc == 0, r.stderr[-2000:]
    assert ("dlshim: python frames: CPython 3.14, frames read through its checked layout, "
            "names in place") in r.stderr.splitlines()


def test_numpy_handoff_events_lines_and_stack(py314):
    script = PYTHON_DIR / "numpy_lines.py"
    lines = {m.group(1): n for n, text in enumerate(script.read_text().splitlines(), 1)
             for m in [re.search(r"# line: (\w+)", text)] if m}
    at = lambda name, function: f"{script}:{lines[name]} in {function}"
    r = py314("numpy_lines.py", env={"DLSHIM_PYSTACK": "4", "DLSHIM_PYSTACK_EXPORTS": "1"})
    assert r.rc == 0, r.stderr[-2000:]
    [exp, imp] = between(r.events, "start", "taken")
    assert (exp["event"], exp["producer"], exp["dtype"], exp["shape"]) == (
        "export", "numpy", "float32", [2, 3])
    assert (imp["event"], imp["producer"], imp["consumer"], imp["zero_copy"], imp["bytes"]) == (
        "import", "numpy", "numpy", True, 24)
    assert exp["tensor"] == imp["tensor"]
    assert exp["py"] == imp["py"] == at("take", "inner")
    assert exp["py_stack"] == [at("take", "inner"), at("outer", "outer"), at("module", "<module>")]
    [rel] = between(r.events, "taken", "dropped")
    assert (rel["event"], rel["tensor"], rel["consumed"], rel["py"]) == (
        "release", exp["tensor"], True, at("drop", "inner"))
    assert between(r.events, "dropped", "end") == []
    assert r.violations() == []
    s = r.summary
    assert (s["shares"], s["zero_copy"], s["outstanding"]) == (1, 1, 0)


def test_lines_read_without_the_gil(py314):
    """Releases from a CFUNCTYPE call (the GIL let go) on four threads while
    two others collect garbage and make frame objects: only the checked
    layout can name these lines (the C API needs the GIL)."""
    rounds = 100
    r = py314("gil_free_lines.py", "4", str(rounds))
    assert r.rc == 0, r.stderr[-2000:]
    side = dict(pair.split(":") for pair in r.stdout.split("ids ")[1].split())
    script = PYTHON_DIR / "gil_free_lines.py"
    where = {s: f"{script}:{n} in release_in_{s}" for s in "ab"
             for n, text in enumerate(script.read_text().splitlines(), 1)
             if text.endswith(f"# released in {s}")}
    releases = r.of("release")
    assert len(releases) == 4 * rounds
    assert all(e["py"] == where[side[str(e["tid"])]] for e in releases)
    assert r.violations() == [] and r.summary["outstanding"] == 0


def test_eight_threads_exchanging_at_once(dlshim, root):
    """tests/python/free_threads.py on 3.14: 8 threads, 10^4 handoffs each
    (10^5 in the host's suite), each event in its thread's order and line."""
    n = run_free_threads(dlshim, PY314, 8, 10_000, env={"PY314_ROOT": root})
    assert n == 8 * 3 * 10_000
