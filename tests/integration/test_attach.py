"""dlshim.attach() (python/dlshim/_attach.py, dlshim_attach): the shim
loaded into a running Python, no preload.  The system Python links
libpython into its executable, so the executable's own GOT is patched too
(tests/frameworks/test_attach.py: the venv's, with a shared libpython)."""
import json
import re

import pytest

from conftest import LIB, PRELOAD_FIRST, PYTHON_DIR, SIMDEV, between

BUILT = {"TEST_DLSHIM_LIB": str(LIB)}  # the library of the build under test
# A ThreadSanitizer build of the shim leaves the host-free hooks out
# (hooks/host_free.c says why): no free of host memory is seen there.
HOST_FREES = "libtsan" not in PRELOAD_FIRST


def line_of(script, name):
    for n, text in enumerate((PYTHON_DIR / script).read_text().splitlines(), 1):
        if text.endswith(f"# line: {name}"):
            return f"{PYTHON_DIR / script}:{n} in <module>"
    raise AssertionError(name)


@pytest.mark.parametrize("on_error", ["protect", "warn"])
def test_each_violation_after_attach_names_the_scripts_line(dlshim, on_error):
    r = dlshim.python("attach_violations.py", on_error, shim=False, env=BUILT)
    assert r.rc == 0, r.stderr[-3000:]
    # Nothing from before the attach is a violation: a share made before and
    # taken after, one taken before, a free of memory allocated before.
    assert [e for e in between(r.events, "attach", "double") if e["event"] == "violation"] == []
    [double] = [e for e in between(r.events, "double", "after release") if e["event"] == "violation"]
    assert (double["kind"], double["py"]) == ("double_release", line_of("attach_violations.py",
                                                                        "double"))
    [after] = [e for e in between(r.events, "after release", "free") if e["event"] == "violation"]
    assert after["kind"] == "import_after_release"
    assert after["py"].startswith(f"{PYTHON_DIR / 'attach_violations.py'}:")
    frees = [e for e in between(r.events, "free", "end") if e["event"] == "violation"]
    expected = {"double_release": 1, "import_after_release": 1}
    if HOST_FREES:
        [freed] = frees
        assert (freed["kind"], freed["py"]) == ("free_while_shared",
                                                line_of("attach_violations.py", "free"))
        expected["free_while_shared"] = 1
    else:
        assert frees == []
    [summary] = r.of("summary")
    assert summary["violations"] == expected
    # dlshim.status() before the free counts what the exit summary does, by
    # kind, less the free's violation and its one share
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.startswith(("BY_", "CO")))
    assert json.loads(out["BY_KIND"]) == {"double_release": 1, "import_after_release": 1}
    assert json.loads(out["COUNTS"]) == {"shares": summary["shares"] - 1,
                                         "zero_copy": summary["zero_copy"] - 1, "copies": 0}
    assert summary["shares"] > 1


def test_the_package_knows_the_violation_kinds_in_the_headers_order():
    """violations_of's names: the library's build checks DLSHIM_VIOLATION_KINDS
    against its table; the package's list must be the same table."""
    import importlib.util
    from conftest import ROOT
    table = re.findall(r'^DS_VIOLATION\(\w+, "(\w+)"\)',
                       (ROOT / "shim/base/violations.def").read_text(), re.M)
    spec = importlib.util.spec_from_file_location("attach", ROOT / "python/dlshim/_attach.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert list(module.VIOLATION_KINDS) == table and len(table) <= 16


def test_options_are_checked_and_a_second_attach_says_so(dlshim):
    r = dlshim.python("attach_api.py", shim=False, env={"DLSHIM_ON_ERROR": "protect", **BUILT})
    assert r.rc == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert out[:2] == [
        'RAISED dlshim: DLSHIM_ON_ERROR="bogus" is not valid (expected warn|protect|abort)',
        "RAISED dlshim: unknown variable DLSHIM_COLOUR ignored; the options are listed by "
        "DLSHIM_VERBOSE=1 and in the README"]
    assert out[2:4] == ["FIRST True", "SECOND False"]
    assert "dlshim: already tracking this process" in r.stderr
    # keyword arguments (format, events) over the environment (on_error: protect)
    assert {e["event"] for e in r.events} == {"export", "import", "release", "violation"}
    assert out[4] == ("STATUS [('barriers_inserted', 0), ('bytes_copied', 0), "
                      "('bytes_shared', 16), ('copies', 0), ('last_violation', ''), "
                      "('last_violation_py', ''), ('outstanding', 0), ('shares', 1), "
                      "('violations', 0), ('violations_by_kind', {}), ('zero_copy', 1)]")
    line = line_of("attach_api.py", "strict").replace(" in <module>", "")
    assert re.fullmatch(rf"STRICT dlshim: 1 violation\(s\) in the block, last double_release at "
                        rf"{re.escape(line)} in <module>", out[5])


def test_attach_under_the_preload_changes_nothing(dlshim):
    r = dlshim.python("attach_api.py", env={"DLSHIM_ON_ERROR": "protect"})
    assert r.rc != 0  # the script expects to start it: its first assert fails
    assert "assert dlshim.status() is None" in r.stderr
    r = dlshim.run(["/usr/bin/python3", "-c",
                    f"import sys; sys.path.insert(0, {str(PYTHON_DIR.parents[1] / 'python')!r}); "
                    "import dlshim; print(dlshim.attach(on_error='protect'))"],
                   env={"ASAN_OPTIONS": "detect_leaks=0"})  # CPython is not built for LSan
    assert r.rc == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"
    assert "dlshim: already tracking this process" in r.stderr


@pytest.mark.parametrize("runtime", ["cuda", "hip"])
def test_device_runtime_loaded_before_the_attach(dlshim, runtime):
    """A simulated runtime (tests/simdev), loaded before the attach: its
    callers' slots are patched then.  A free of memory allocated before is
    not a violation; a free of shared memory allocated after is.  The limit:
    a function pointer looked up before the attach (ctypes keeps them) is
    the real function: that free is unseen, and the allocation, still
    shared, is a leak at exit."""
    r = dlshim.python("attach_device.py", runtime, shim=False,
                      env={"LD_LIBRARY_PATH": str(SIMDEV), **BUILT})
    assert r.rc == 0, r.stderr[-3000:]
    assert between(r.events, "attach", "shared free") == []
    [v] = [e for e in between(r.events, "shared free", "unseen free") if e["event"] == "violation"]
    assert (v["kind"], v["py"]) == ("free_while_shared", line_of("attach_device.py", "free"))
    unseen = between(r.events, "unseen free", "end")
    assert [e["event"] for e in unseen] == ["alloc", "export", "import"]  # no free, no violation
    [leak] = [e for e in r.events if e["event"] == "violation" and e["kind"] == "leak"]
    assert leak["data"] == unseen[0]["base"]
