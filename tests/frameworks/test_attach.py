"""dlshim.attach() late, in the venv's Python (a shared libpython), after
torch, NumPy and JAX were imported and while three threads exchange tensors
(progs/attach_threads.py): nothing from before is a false report, and every
exchange made after the attach returned is seen, whole."""
import collections
import re

import pytest

from conftest import FRAMEWORK_PROGS

PROG = FRAMEWORK_PROGS / "attach_threads.py"
LINES = {m.group(1): n for n, text in enumerate(PROG.read_text().splitlines(), 1)
         for m in [re.search(r"# line: (\w+)", text)] if m}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from conftest import Runner
    r = Runner(tmp_path_factory.mktemp("attach")).framework("attach_threads.py", shim=False)
    assert r.rc == 0, r.stderr[-3000:]
    return r


def test_nothing_before_the_attach_is_a_false_report(run):
    assert [e for e in run.events if e["event"] == "violation"] == []
    [summary] = [e for e in run.events if e["event"] == "summary"]
    assert summary["violations"] == {} and summary["outstanding"] == 0


def test_every_exchange_after_the_attach_is_seen(run):
    where = f"{PROG}:{LINES['after']} in exchange"
    seen = collections.Counter((e["event"], e.get("producer"), e.get("consumer"))
                               for e in run.events if e.get("py") == where)
    rounds = 50
    assert seen == {(event, producer, consumer if event != "export" else None): rounds
                    for producer, consumer in (("torch", "numpy"), ("numpy", "torch"),
                                               ("jax", "numpy"))
                    for event in ("export", "import", "release")}


def test_attach_time(run):
    [ms] = [float(l.split()[1]) for l in run.stdout.splitlines() if l.startswith("ATTACH_MS")]
    assert ms < 1000  # the target (50 ms) is measured for the note, not held on a busy machine


def test_modules_loaded_after_the_attach_are_patched(dlshim):
    """NumPy's and torch's extension modules are dlopen'ed after the attach:
    the interpreter's dlopen, taken through its GOT, patches them."""
    r = dlshim.framework("attach_then_import.py", shim=False)
    assert r.rc == 0, r.stderr[-3000:]
    assert [(e["event"], e.get("producer"), e.get("consumer")) for e in r.events
            if e["event"] in ("import", "release")] == [
        ("import", "torch", "numpy"), ("import", "numpy", "torch"),
        ("release", "torch", "numpy"), ("release", "numpy", "torch")]


LAVAPIPE = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
VULKAN = {"VK_ICD_FILENAMES": LAVAPIPE, "XDG_RUNTIME_DIR": "/tmp"}


def test_vulkan_instances_created_after_the_attach_get_the_layer(dlshim):
    r = dlshim.framework("attach_wgpu.py", "after", shim=False, env=VULKAN)
    assert r.rc == 0, r.stdout + r.stderr
    assert "sum 16777216" in r.stdout
    allocs = [e for e in r.events if e["event"] == "alloc" and e["api"] == "vulkan"]
    frees = [e for e in r.events if e["event"] == "free" and e["api"] == "vulkan"]
    assert allocs and {e["owner"] for e in allocs} == {"wgpu"}
    assert sorted(e["base"] for e in allocs) == sorted(e["base"] for e in frees)
    assert [e for e in r.events if e["event"] == "violation"] == []


def test_a_vulkan_instance_created_before_the_attach_is_not_seen(dlshim):
    """The limit: the loader read its layer list when the instance was
    created; the compute after the attach goes through that instance."""
    r = dlshim.framework("attach_wgpu.py", "before", shim=False, env=VULKAN)
    assert r.rc == 0, r.stdout + r.stderr
    assert "sum 16777216" in r.stdout
    assert [e for e in r.events if e.get("api") == "vulkan"] == []


def exchange_events(r):
    return [(e["event"], e.get("producer"), e.get("consumer"), e.get("api"))
            for e in r.events if e["event"] in ("export", "import", "release")]


def test_the_exchange_table_after_the_attach(dlshim):
    """tvm-ffi's first use of PyTorch's table comes after the attach: it is
    handed the shim's wrapped copy, and both ways are seen."""
    r = dlshim.framework("attach_exchange.py", "cold", shim=False)
    assert r.rc == 0, r.stderr[-3000:]
    events = exchange_events(r)
    assert events[:4] == [
        ("export", "torch", None, "exchange_api"), ("import", "torch", "tvm_ffi", "exchange_api"),
        ("export", "tvm_ffi", None, "exchange_api"), ("import", "tvm_ffi", "torch", "exchange_api")]
    assert sorted(events[4:]) == [("release", "torch", "tvm_ffi", None),
                                  ("release", "tvm_ffi", "torch", None)]


def test_an_exchange_table_taken_before_the_attach_is_not_seen(dlshim):
    """The limit: tvm-ffi keeps the table it read before the attach (the
    real one), so its exchanges through it are unseen, and nothing is
    reported."""
    r = dlshim.framework("attach_exchange.py", "warm", shim=False)
    assert r.rc == 0, r.stderr[-3000:]
    assert exchange_events(r) == []
    assert [e for e in r.events if e["event"] == "violation"] == []
