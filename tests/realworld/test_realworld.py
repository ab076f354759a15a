"""Bugs people reported against DLPack producers and consumers, reproduced
(tests/realworld/cases, each with its thread and buggy version in its
header) and run under the shim: what dlshim reports for each, exactly (kind,
tensor, the Python line of the buggy statement, who released first), and
that the fixed behaviour (`fixed`) reports nothing.  docs/realworld.md is
the table."""
import os
import pathlib

import pytest

from conftest import BUILD, SIMDEV, SYSTEM_PYTHON, VENV_PYTHON, Runner

CASES = pathlib.Path(__file__).resolve().parent / "cases"
ENV = {"REALWORLD_BUILD": str(BUILD / "tests" / "realworld"), "JAX_PLATFORMS": "cpu",
       "LD_LIBRARY_PATH": str(SIMDEV)}


_runners = {}


def run(tmp_path, case, *args, host=VENV_PYTHON, on_error="warn", log_file=False):
    env = dict(ENV, DLSHIM_ON_ERROR=on_error)
    runner = _runners.setdefault(tmp_path, Runner(tmp_path))  # one per test: fresh log files
    if log_file:  # the log in a file, buffered as by default
        return runner.run([host, CASES / f"{case}.py", *args], env=env, timeout=300)
    return runner.python(f"{case}.py", *args, host=host, folder=CASES, env=env)


@pytest.fixture(params=["warn", "protect"])
def mode(request):
    """DLSHIM_ON_ERROR: protect changes nothing these cases report."""
    return request.param


def line(case, text, function="<module>"):
    """The `py` of the line of `case` that holds `text`."""
    path = CASES / f"{case}.py"
    lines = path.read_text().splitlines()
    [n] = [i for i, l in enumerate(lines, 1) if text in l]
    return f"{path}:{n} in {function}"


def the_export(r):
    """The one export between the marks."""
    exports = [e for e in r.events if e["event"] == "export"]
    assert len(exports) == 1, exports
    return exports[0]


def clean(r):
    assert r.rc == 0, r.stderr[-3000:]
    assert r.violations() == [], r.violations()


# ---- class 1: a capsule that dies unconsumed, its deleter never run --------

@pytest.mark.parametrize("case, dropped, versioned", [
    ("rw01_torch_capsule_no_destructor", "del b", False),
    ("rw02_kornia_inverted_check", "del image", False),
    ("rw03_quadrants_empty_versioned", "del c", True),
])
def test_a_capsule_dropped_with_its_deleter_never_run_leaks(tmp_path, mode, case, dropped,
                                                            versioned):
    r = run(tmp_path, case, on_error=mode)
    assert r.rc == 0 and "deleter calls: 0" in r.stdout
    exp = the_export(r)
    assert exp["versioned"] is versioned
    [v] = r.violations()
    assert (v["kind"], v["tensor"], v["py"]) == ("leak", exp["tensor"], line(case, dropped))
    assert not r.of("release")  # never a release that did not happen
    assert r.summary["outstanding"] == 1
    fixed = run(tmp_path, case, "fixed")
    clean(fixed)
    assert "deleter calls: 1" in fixed.stdout
    [rel] = fixed.of("release")
    assert rel["consumed"] is False and fixed.summary["outstanding"] == 0


def test_numpy_drops_the_capsule_with_an_exception_set(tmp_path, mode):
    case = "rw04_numpy_error_path"
    r = run(tmp_path, case, on_error=mode)
    assert r.rc == 0 and "failed: SystemError" in r.stdout and "deleter calls: 0" in r.stdout
    [v] = r.violations()
    assert (v["kind"], v["tensor"]) == ("leak", the_export(r)["tensor"])
    assert v["py"] == line(case, "np.from_dlpack(Producer())")
    assert v["export_py"] == line(case, "the export", "Producer.__dlpack__")
    fixed = run(tmp_path, case, "fixed")
    clean(fixed)
    assert [e["consumer"] for e in fixed.of("import")] == ["numpy"]


def test_a_consumer_that_never_releases_leaves_the_share_outstanding(tmp_path):
    """CuPy 4 took torch's tensor and never called its deleter: the summary
    names the share, producer and consumer (the ctypes consumer by its
    Python package, not libffi)."""
    case = "rw05_cupy_consumer_never_releases"
    r = run(tmp_path, case)
    assert r.rc == 0 and r.violations() == []
    s = r.summary
    assert s["outstanding"] == 1
    [share] = s["outstanding_shares"]
    assert (share["producer"], share["consumer"], share["bytes"]) == ("torch", case, 4000)
    fixed = run(tmp_path, case, "fixed")
    clean(fixed)
    assert fixed.summary["outstanding"] == 0


def test_torch_1_13_never_releases_an_empty_tensor(tmp_path):
    """Debian's torch 1.13 keeps the NULL-data tensor's deleter uncalled;
    the venv's torch 2.13 calls it."""
    case = "rw09_torch_null_data"
    r = run(tmp_path, case, host=SYSTEM_PYTHON)
    assert r.rc == 0 and "deleter calls: 0" in r.stdout
    [share] = r.summary["outstanding_shares"]
    assert share["consumer"] == "torch" and share["tensor"] == the_export(r)["tensor"]
    fixed = run(tmp_path, case)
    clean(fixed)
    assert "deleter calls: 1" in fixed.stdout and fixed.summary["outstanding"] == 0


# ---- class 2: the Python line where the thread let the GIL go --------------

def test_torch_releases_without_the_gil_and_the_line_is_named(tmp_path, mode):
    """torch runs a tensor's deleter after it let the GIL go: the release
    still names the `del t` that caused it."""
    case = "rw13_torch_releases_without_gil"
    for args in ((), ("fixed",)):
        r = run(tmp_path, case, *args, on_error=mode)
        clean(r)
        exp = [e for e in r.of("export") if e["producer"] == case]
        [rel] = [e for e in r.of("release") if e["tensor"] == exp[0]["tensor"]]
        assert rel["consumer"] == "torch"
        assert rel["py"] == line(case, "del t  # torch lets the GIL go")


# ---- class 3: host memory freed under a live share --------------------------

def test_a_producer_that_keeps_no_owner_lets_the_buffer_go(tmp_path):
    case = "rw16_paddle_no_owner_reference"
    r = run(tmp_path, case)
    exp = the_export(r)
    [v] = r.violations()
    assert (v["kind"], v["tensor"], v["data"]) == ("free_while_shared", exp["tensor"], exp["data"])
    assert v["py"] == line(case, "cap = to_dlpack()")
    assert v["export_py"] == line(case, "the export", "to_dlpack")
    assert v["detail"].startswith("numpy freed ")
    protected = run(tmp_path, case, on_error="protect")
    assert protected.rc == 0 and "sum: 28672.0" in protected.stdout  # the free waited
    assert [v["kind"] for v in protected.violations()] == ["free_while_shared"]
    clean(run(tmp_path, case, "fixed"))


def test_share_memory_frees_the_buffer_a_consumer_reads(tmp_path):
    case = "rw18_torch_share_memory"
    r = run(tmp_path, case)
    exp = the_export(r)
    [v] = r.violations()
    assert (v["kind"], v["tensor"]) == ("free_while_shared", exp["tensor"])
    assert v["py"] == line(case, "a.share_memory_()  # frees")
    assert v["detail"].startswith("torch freed ") and "imported by numpy" in v["detail"]
    protected = run(tmp_path, case, on_error="protect")
    assert "first values: [0.0, 1.0, 2.0]" in protected.stdout
    clean(run(tmp_path, case, "fixed"))


# ---- class 4: device memory freed between export and import ----------------

def test_device_memory_freed_before_the_import(tmp_path, mode):
    case = "rw16_device_freed_before_import"
    r = run(tmp_path, case, on_error=mode)
    exp = the_export(r)
    free, *use = r.violations()
    assert (free["kind"], free["data"]) == ("free_while_shared", exp["allocation"])
    assert free["py"] == line(case, "cudart.cudaFree(self.ptr)", "DeviceTensor.free")
    if mode == "protect":  # the free waits for the release: the import reads live memory
        assert r.rc == 0 and use == [] and r.summary["allocations_live"] == 0
    else:
        [use] = use
        assert (use["kind"], use["tensor"]) == ("use_after_free", exp["tensor"])
        assert use["py"] == line(case, "the import")
    clean(run(tmp_path, case, "fixed"))


# ---- class 5: a tensor that changed between export and import ---------------

@pytest.mark.parametrize("case", ["rw17_mxnet_shape_in_a_temporary",
                                  "rw19_tvm_shape_on_the_stack"])
def test_a_shape_that_died_with_its_owner_is_a_changed_tensor(tmp_path, mode, case):
    r = run(tmp_path, case, on_error=mode)
    assert r.rc == 0
    exp = the_export(r)
    [v] = r.violations()
    assert (v["kind"], v["tensor"]) == ("tensor_changed", exp["tensor"])
    assert v["py"] == line(case, "the import")
    assert v["export_py"] == exp["py"]
    fixed = run(tmp_path, case, "fixed")
    clean(fixed)


def test_the_consumer_reads_extent_minus_eight(tmp_path):
    r = run(tmp_path, "rw17_mxnet_shape_in_a_temporary")
    [v] = r.violations()
    assert "extent the consumer reads: -8" in r.stdout and "-8" in v["detail"]


# ---- class 6: a library unloaded while its deleter is needed ----------------

def test_a_module_unloaded_under_a_live_tensor(tmp_path):
    """Warn: reported at the dlclose, then the release crashes as it would
    without the shim, and the buffered log survives the crash.  Protect:
    the library stays until the release."""
    case = "rw24_tvm_ffi_module_unloaded"
    r = run(tmp_path, case, log_file=True)
    assert r.rc == -11  # SIGSEGV, as without the shim
    exp = the_export(r)
    [v] = r.violations()
    assert (v["kind"], v["tensor"], v["library"]) == ("unload_while_shared", exp["tensor"],
                                                      "libkernel.so")
    assert v["py"] == line(case, "_ctypes.dlclose(handle)  # the Module dies")
    assert [e["event"] for e in r.events][:3] == ["export", "import", "violation"]
    protected = run(tmp_path, case, on_error="protect", log_file=True)
    assert protected.rc == 0 and "released" in protected.stdout
    assert [v["kind"] for v in protected.violations()] == ["unload_while_shared"]
    clean(run(tmp_path, case, "fixed"))


# ---- class 7: who released first, and copies made -------------------------

def test_a_failed_import_releases_and_the_producer_releases_again(tmp_path, mode):
    case = "rw26_torch_failed_import"
    r = run(tmp_path, case, on_error=mode)
    calls = 1 if mode == "protect" else 2  # protect swallows the second call
    assert r.rc == 0 and f"deleter calls: {calls}" in r.stdout
    exp = the_export(r)
    [v] = r.violations()
    assert (v["kind"], v["tensor"]) == ("double_release", exp["tensor"])
    assert (v["first_released_by"], v["first_releaser"]) == ("consumer", "torch18")
    assert v["first_release_py"].endswith("torch18.py:14 in from_dlpack")
    assert "by the producer's capsule destructor" in v["detail"]
    assert not r.of("import")  # no import of a copy: none was made
    clean(run(tmp_path, case, "fixed"))


def test_a_destructor_that_ignores_the_name_releases_under_its_consumer(tmp_path, mode):
    case = "rw27_cupy_destructor_ignores_name"
    r = run(tmp_path, case, on_error=mode)
    calls = 1 if mode == "protect" else 2
    assert r.rc == 0 and f"deleter calls: {calls}" in r.stdout
    exp = the_export(r)
    [v] = r.violations()
    assert (v["kind"], v["tensor"]) == ("double_release", exp["tensor"])
    assert v["first_released_by"] == "producer"
    assert v["py"] == line(case, "del t  # torch releases it again")  # without the GIL
    clean(run(tmp_path, case, "fixed"))


def test_jax_copies_a_misaligned_buffer(tmp_path, mode):
    case = "rw30_jax_misaligned_copy"
    r = run(tmp_path, case, on_error=mode)
    clean(r)
    assert "shared: False" in r.stdout
    [imp] = r.of("import")
    assert imp["consumer"] == "jax" and imp["zero_copy"] is False
    [rel] = [e for e in r.of("release") if e["tensor"] == imp["tensor"]]
    assert rel["copy_on_import"] is True
    assert r.summary["copies"] == 1
    fixed = run(tmp_path, case, "fixed")
    clean(fixed)
    assert "shared: True" in fixed.stdout and fixed.summary["copies"] == 0


def test_every_case_is_in_the_table():
    table = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "realworld.md").read_text()
    for case in sorted(CASES.glob("rw*.py")):
        assert f"`{case.stem}`" in table, case.stem
