"""Python programs, unmodified, under the shim: capsules between PyTorch,
NumPy and a DLPack 1.x extension, in Debian's python3 (libpython linked into
the executable) and through the shared libpython."""
import re
import subprocess

import pytest

from conftest import (EMBED, LIB, PRELOAD_FIRST, PYTHON_DIR, SYSTEM_PYTHON, between, parse_jsonl,
                      pyenv_python, run_free_threads)


def shares(events):
    return [e for e in events if e["event"] == "import"]


def test_layouts_are_what_the_tests_claim():
    ldd = subprocess.run(["ldd", SYSTEM_PYTHON], capture_output=True, text=True).stdout
    assert "libpython" not in ldd  # the static layout, as on Debian and conda
    ldd = subprocess.run(["ldd", str(EMBED)], capture_output=True, text=True).stdout
    assert "libpython3" in ldd


def check_torch_numpy(r):
    assert r.rc == 0, r.stderr[-2000:]
    ev = r.events
    exports, imports = r.of("export"), r.of("import")
    assert [(e["producer"], e["dtype"], e["shape"]) for e in exports] == [
        ("torch", "float32", [2, 3]), ("numpy", "int64", [4])]
    assert [(e["producer"], e["consumer"], e["zero_copy"], e["bytes"]) for e in imports] == [
        ("torch", "numpy", True, 24), ("numpy", "torch", True, 32)]
    for exp, imp in zip(exports, imports):
        assert exp["tensor"] == imp["tensor"]
    # Each release happens when the consumer's object dies, not before.
    [rel1] = between(ev, "numpy array dropped", "numpy to torch")
    assert rel1["event"] == "release" and rel1["tensor"] == exports[0]["tensor"]
    assert rel1["consumed"] is True and rel1["consumer"] == "numpy"
    [rel2] = between(ev, "torch tensor dropped", "end")
    assert rel2["tensor"] == exports[1]["tensor"] and rel2["consumer"] == "torch"
    assert r.violations() == []
    s = r.summary
    assert (s["shares"], s["zero_copy"], s["copies"], s["outstanding"]) == (2, 2, 0, 0)
    assert sorted((p["producer"], p["consumer"], p["shares"], p["bytes"]) for p in s["pairs"]) == [
        ("numpy", "torch", 1, 32), ("torch", "numpy", 1, 24)]


def check_lines(r):
    """Each event names the script's line (`py`): the export and import
    where the consumer takes the tensor, the release where it dies, the
    GIL held or not (torch lets it go before it frees a tensor: the thread's
    own frames are read without it)."""
    script = PYTHON_DIR / "torch_numpy.py"
    lines = script.read_text().splitlines()
    line = lambda text: f"{script}:{lines.index(text) + 1} in <module>"
    shown = [(e["event"], e.get("py")) for e in r.events if e["event"] in
             ("export", "import", "release")]
    assert shown == [("export", line("a = np.from_dlpack(t)")),
                     ("import", line("a = np.from_dlpack(t)")),
                     ("release", line("del a")),
                     ("export", line("u = torch.from_dlpack(b)")),
                     ("import", line("u = torch.from_dlpack(b)")),
                     ("release", line("del u"))]


def test_torch_numpy_both_ways(dlshim):
    r = dlshim.python("torch_numpy.py")
    check_torch_numpy(r)
    check_lines(r)


def test_torch_numpy_through_shared_libpython(dlshim):
    r = dlshim.python("torch_numpy.py", host=EMBED)
    check_torch_numpy(r)
    check_lines(r)


def test_both_layouts_give_identical_events(dlshim):
    def shape_of(r):
        keep = ("event", "name", "producer", "consumer", "versioned", "dtype", "shape",
                "zero_copy", "consumed", "bytes")
        return [{k: e[k] for k in keep if k in e} for e in r.events if e["event"] != "summary"]
    static = dlshim.python("torch_numpy.py")
    shared = dlshim.python("torch_numpy.py", host=EMBED)
    assert shape_of(static) == shape_of(shared)


def test_torch_family_alone_covers_torchs_python_binding(dlshim):
    """libtorch's hooks leave PyTorch's own Python binding to the capsule
    hooks, which see the same handoffs; with the capsule family off they
    patch it too, and torch's side of each handoff is still seen."""
    r = dlshim.python("torch_numpy.py", env={"DLSHIM_HOOKS": "torch"})
    assert r.rc == 0, r.stderr[-2000:]
    assert [(e["producer"], e["shape"]) for e in r.of("export")] == [
        ("torch", [2, 3]), ("unknown", [4])]
    assert [(e["producer"], e["consumer"]) for e in r.of("import")] == [("unknown", "torch")]


def test_unconsumed_capsule(dlshim):
    r = dlshim.python("unconsumed.py")
    assert r.rc == 0
    [exp] = r.of("export")
    assert exp["producer"] == "torch"
    assert shares(r.events) == []
    [rel] = between(r.events, "capsule dropped", "end")
    assert rel["event"] == "release" and rel["consumed"] is False
    assert r.violations() == [] and r.summary["outstanding"] == 0


def test_consumer_outlives_producer(dlshim):
    r = dlshim.python("consumer_outlives.py")
    assert r.rc == 0 and "sum after producer died 499500.0" in r.stdout
    assert between(r.events, "producer deleted", "consumer deleted") == []
    [rel] = between(r.events, "consumer deleted", "end")
    assert rel["event"] == "release" and rel["consumer"] == "numpy"


def test_threads(dlshim):
    r = dlshim.python("threads.py")
    assert r.rc == 0
    total = 4 * 50
    imports = r.of("import")
    assert len(imports) == total
    assert all((e["producer"], e["consumer"]) == ("torch", "numpy") for e in imports)
    assert len(r.of("release")) == total
    assert len({e["tid"] for e in imports}) == 4
    assert r.summary["shares"] == total and r.summary["outstanding"] == 0


@pytest.mark.parametrize("minor", [11, 12, 13])
def test_lines_read_without_the_gil_under_threads_and_a_busy_collector(dlshim, minor):
    """Releases made with the GIL let go (a CFUNCTYPE call of the deleter)
    on four threads while two others allocate, collect garbage and make
    frame objects of every thread's frames: each release names its own
    thread's line, on each CPython's frame layout (3.11: Debian's static
    interpreter), checked at start-up and used (DLSHIM_VERBOSE says so; the
    C API alone could not name these lines)."""
    host = SYSTEM_PYTHON if minor == 11 else pyenv_python(minor)
    assert host, f"CPython 3.{minor} not found under pyenv"
    rounds = 100
    r = dlshim.python("gil_free_lines.py", "4", str(rounds), host=host,
                      env={"DLSHIM_VERBOSE": "1"})
    assert r.rc == 0, r.stderr[-2000:]
    assert (f"dlshim: python frames: CPython 3.{minor}, frames read through its checked layout, "
            "names in place") in r.stderr.splitlines()
    side = dict(pair.split(":") for pair in r.stdout.split("ids ")[1].split())
    script = PYTHON_DIR / "gil_free_lines.py"
    lines = script.read_text().splitlines()
    where = {s: f"{script}:{n} in release_in_{s}" for s in "ab"
             for n, text in enumerate(lines, 1) if text.endswith(f"# released in {s}")}
    releases = r.of("release")
    assert len(releases) == 4 * rounds
    assert all(e["py"] == where[side[str(e["tid"])]] for e in releases)
    assert r.violations() == [] and r.summary["outstanding"] == 0


# 10^5 handoffs a thread; under a sanitizer's runtime (only the shim is
# instrumented: ~2x slower) 10^4, which interleave the eight threads as much.
FREE_THREAD_HANDOFFS = 10_000 if PRELOAD_FIRST else 100_000


def test_eight_threads_exchanging_at_once(dlshim):
    """Eight threads, each letting the GIL go around every exchange
    (NumPy to NumPy, ctypes to NumPy, ctypes to ctypes released without the
    GIL), 10^5 handoffs each: every event counted, in each thread's order,
    each naming its own thread's line (docs/design.md, "Free-threaded
    CPython": what a GIL build can show of threads that interleave)."""
    n = run_free_threads(dlshim, SYSTEM_PYTHON, 8, FREE_THREAD_HANDOFFS)
    assert n == 8 * 3 * FREE_THREAD_HANDOFFS


def test_module_loaded_after_start_is_patched(dlshim):
    r = dlshim.python("late_import.py")
    assert r.rc == 0
    before = [e for e in r.events[:[e.get("name") for e in r.events].index("importing numpy")]
              if e["event"] == "import"]
    assert [e["consumer"] for e in before] == ["dlpack1ext"]
    after = shares(between(r.events, "importing numpy", "end"))
    assert [(e["producer"], e["consumer"]) for e in after] == [("numpy", "torch")]


# glibc keeps ~1.7 KB of static TLS for libraries with initial-exec TLS
# loaded after start, shared by all of them; PyTorch leaves ~1.5 KB of it.
TLS_BUDGET = 1280


def test_thread_local_storage_fits_the_reserve_left_after_torch():
    out = subprocess.run(["readelf", "-lW", str(LIB)], capture_output=True, text=True,
                         check=True).stdout
    [memsz] = [int(line.split()[5], 16) for line in out.splitlines()
               if re.match(r"\s*TLS\s", line)]
    assert 0 < memsz <= TLS_BUDGET


def test_shim_loads_with_dlopen_after_torch(dlshim):
    """Not preloaded: dlopen'ed by a process holding PyTorch, whose own TLS
    takes most of that reserve (docs/reliability.md).  It loads, patches the
    modules already there and sees the handoff."""
    r = dlshim.python("late_dlopen.py", shim=False,
                      env={"DLSHIM_LIB": str(LIB), "DLSHIM_FORMAT": "jsonl"})
    assert r.rc == 0, r.stderr[-2000:]
    assert [(e["producer"], e["consumer"], e["zero_copy"]) for e in shares(r.events)] == [
        ("torch", "numpy", True)]
    assert r.violations() == []


def test_dlpack1_extension(dlshim):
    r = dlshim.python("dlpack1.py")
    assert r.rc == 0, r.stderr[-2000:]
    ev = r.events
    for name in ("copied", "jax style", "by destructor"):
        [rel] = between(ev, f"drop {name}", f"dropped {name}")
        assert rel["event"] == "release" and rel["consumed"] is True

    exports, imports = r.of("export"), r.of("import")
    assert all(e["versioned"] and e["producer"] == "dlpack1ext" for e in exports)
    assert exports[0]["flags"] == ["read_only", "is_copied"]
    assert [e["zero_copy"] for e in imports] == [False, True, True, True, True]
    # JAX style (rename, then NULL destructor) is one import, not two; a NULL
    # destructor alone is an import too: copied, jax style, by destructor, and
    # the exchange table's two.
    assert len(imports) == 5

    # The exchange table: from_py_object is the owner's export and the
    # caller's import (to_py_object hands the same tensor back to the same
    # module: no second handoff); the allocator's tensor is one more.
    window = between(ev, "dropped by destructor", "drop exchange")
    assert [(e["event"], e["api"]) for e in window] == [
        ("export", "exchange_api"), ("import", "exchange_api"),
        ("export", "exchange_api"), ("import", "exchange_api")]
    assert window[0]["tensor"] == window[1]["tensor"] != window[2]["tensor"] == window[3]["tensor"]
    assert window[1]["consumer"] == window[3]["consumer"] == "dlpack1ext"
    released = between(ev, "drop exchange", "dropped exchange")
    assert sorted(e["consumed"] for e in released) == [True, True]

    [last] = between(ev, "drop unconsumed", "end")
    assert last["event"] == "release" and last["consumed"] is False
    assert r.violations() == []
    s = r.summary
    assert (s["shares"], s["copies"], s["outstanding"]) == (5, 1, 0)


@pytest.mark.parametrize("script", ["torch_numpy.py", "unconsumed.py", "consumer_outlives.py",
                                    "threads.py", "late_import.py", "dlpack1.py",
                                    "rust_exchange.py"])
def test_same_output_with_and_without_shim(dlshim, script):
    bare = dlshim.python(script, shim=False)
    traced = dlshim.python(script)
    assert bare.rc == traced.rc == 0
    assert bare.stdout == traced.stdout
    assert traced.of("export")


def test_rust_pyo3_extension(dlshim):
    r = dlshim.python("rust_exchange.py")
    assert r.rc == 0, r.stderr[-2000:]
    ev = r.events

    def pairs(window):
        return [(e["producer"], e["consumer"]) for e in window if e["event"] == "import"]

    legacy = [e for e in ev if e["event"] == "export"][0]
    assert (legacy["producer"], legacy["versioned"], legacy["dtype"]) == ("dlpack_rs", False, "float64")
    [rel] = between(ev, "drop rust legacy", "rust versioned")
    assert rel["consumed"] is True and rel["consumer"] == "dlpack_rs"
    versioned = between(ev, "rust versioned", "drop rust versioned")
    assert [e["event"] for e in versioned] == ["export", "import"]
    assert versioned[0]["versioned"] is True and versioned[0]["flags"] == ["read_only"]
    assert pairs(between(ev, "torch to rust", "rust to numpy")) == [("torch", "dlpack_rs")]
    assert pairs(between(ev, "rust to numpy", "unconsumed")) == [("dlpack_rs", "numpy")]
    unconsumed = between(ev, "unconsumed", "end")
    assert [(e["event"], e.get("consumed")) for e in unconsumed] == [("export", None),
                                                                     ("release", False)]
    assert r.violations() == [] and r.summary["outstanding"] == 0


def test_children_leaving_with_os_exit(dlshim, tmp_path):
    """A worker that ends with os._exit writes its summary, with the share it
    still holds; a child that did nothing the shim tracks since fork writes
    none (fork+exec helpers, an exec that failed)."""
    r = dlshim.python("exit_child.py", env={"DLSHIM_LOG": str(tmp_path / "ev-%p.jsonl")})
    assert r.rc == 0, r.stderr[-2000:]
    children = {}
    for line in r.stdout.splitlines():
        work, _, pid, _, code = line.split()
        assert code == "5"
        children[work] = int(pid)
    logs = {int(f.stem.split("-")[1]): parse_jsonl(f.read_text(), str(f))
            for f in tmp_path.glob("ev-*.jsonl")}
    assert children["nothing"] not in logs and children["exec"] not in logs
    worker = logs[children["share"]]
    [summary] = [e for e in worker if e["event"] == "summary"]
    assert summary["shares"] == 1 and summary["outstanding"] == 1
    assert [(s["producer"], s["consumer"]) for s in summary["outstanding_shares"]] == [
        ("torch", "numpy")]
    [parent] = [p for p in logs if p not in children.values()]
    assert len([e for e in logs[parent] if e["event"] == "summary"]) == 1
