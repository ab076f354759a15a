"""Device allocations through the CUDA runtime, the CUDA driver and HIP, on
the simulated device: every route, ownership, and the free policy."""
import pytest

from conftest import SIMDEV


def allocs(r, api=None):
    return [e for e in r.of("alloc") if api is None or e["api"] == api]


def freed_bases(r):
    return r.simdev_frees[1::2]  # SIMDEV_LOG lines are "free 0x..."


@pytest.mark.parametrize("route", ["direct", "dlsym"])
def test_runtime_routes(dlshim, route):
    r = dlshim.device("rt_alloc", route)
    assert r.rc == 0, r.stdout
    a = r.of("alloc")
    assert len(a) == 7 and len(r.of("free")) == 7
    # Recorded once, as the runtime call the program made: no second event
    # for the driver calls the runtime makes underneath.
    assert {e["api"] for e in a} == {"cuda_runtime"}
    assert {e["owner"] for e in a} == {"rt_alloc"}
    assert sorted(e["kind"] for e in a) == ["async_pool", "async_pool", "device", "device",
                                           "host_pinned", "host_pinned", "managed"]
    assert {e["device"] for e in a} == {"cuda:0", "cuda_host:0", "cuda_managed:0"}
    assert all(e["stream"] for e in a if e["kind"] == "async_pool")
    assert sorted(e["base"] for e in a) == sorted(e["base"] for e in r.of("free"))
    assert 2560 in [e["bytes"] for e in a]  # cudaMallocPitch: pitch x height
    assert r.summary["allocations_live"] == 0 and r.violations() == []


@pytest.mark.parametrize("route", ["direct", "dlsym", "getproc"])
def test_driver_routes(dlshim, route):
    r = dlshim.device("drv_alloc", route)
    assert r.rc == 0, r.stdout
    a = r.of("alloc")
    assert len(a) == 6 and len(r.of("free")) == 6
    assert {(e["api"], e["owner"]) for e in a} == {("cuda_driver", "drv_alloc")}
    assert r.summary["allocations_live"] == 0


def test_driver_entry_point_through_runtime(dlshim):
    r = dlshim.device("rt_alloc", "entry_point")
    assert r.rc == 0, r.stdout
    [a] = r.of("alloc")
    assert (a["api"], a["bytes"], a["owner"]) == ("cuda_driver", 2048, "rt_alloc")
    assert len(r.of("free")) == 1


@pytest.mark.parametrize("route", ["direct", "dlsym", "getproc"])
def test_hip_routes(dlshim, route):
    r = dlshim.device("hip_alloc", route)
    assert r.rc == 0, r.stdout
    a = r.of("alloc")
    assert len(a) == 5 and len(r.of("free")) == 5
    assert {(e["api"], e["owner"]) for e in a} == {("hip", "hip_alloc")}
    assert {e["device"] for e in a} == {"rocm:0", "rocm_host:0"}


@pytest.mark.parametrize("args", [("rt_alloc", "direct"), ("rt_alloc", "errors"),
                                  ("drv_alloc", "getproc"), ("hip_alloc", "dlsym"),
                                  ("rt_alloc", "cached_block"), ("culike_user",)],
                         ids=lambda a: "-".join(a))
def test_same_output_with_and_without_shim(dlshim, args):
    bare = dlshim.device(*args, shim=False)
    traced = dlshim.device(*args)
    assert bare.rc == traced.rc == 0
    assert bare.stdout == traced.stdout


def test_runtime_errors_come_back_unchanged(dlshim):
    r = dlshim.device("rt_alloc", "errors")
    assert "malloc NULL: 1\nfree bogus: 1\nfree NULL: 0\nfree host bogus: 1\n" in r.stdout
    assert r.of("alloc") == [] and r.violations() == []  # unknown addresses are not ours to judge


def test_no_device(dlshim):
    bare = dlshim.device("rt_alloc", "no_device", shim=False, env={"SIMDEV_NO_DEVICE": "1"})
    r = dlshim.device("rt_alloc", "no_device", env={"SIMDEV_NO_DEVICE": "1"})
    assert "malloc: 100" in r.stdout and r.stdout == bare.stdout  # cudaErrorNoDevice
    assert r.of("alloc") == []


def test_lookalike_names_untouched(dlshim):
    r = dlshim.device("culike_user")
    assert r.stdout.split()[:2] == ["11", "11"]  # the library's own cuMemAlloc (v1 name)
    assert r.of("alloc") == [] and r.of("free") == []


def test_eight_threads_exact_counts(dlshim):
    r = dlshim.device("rt_alloc", "threads", "200")
    assert r.rc == 0
    assert len(r.of("alloc")) == len(r.of("free")) == 1600
    assert len({e["tid"] for e in r.of("alloc")}) == 8
    s = r.summary
    assert s["allocations_live"] == 0 and s["violations"] == {}


def test_export_names_its_allocation(dlshim):
    r = dlshim.device("rt_alloc", "cached_block")
    [block] = [e for e in r.of("alloc") if e["bytes"] == 1 << 20]
    exports = r.of("export")
    assert len(exports) == 2
    assert all(e["allocation"] == block["base"] and e["allocation_owner"] == "rt_alloc"
               for e in exports)
    assert all(e["device"] == "cuda:0" for e in exports)
    assert r.violations() == []


def test_free_while_shared_warn(dlshim):
    r = dlshim.device("rt_alloc", "share_then_free")
    assert r.rc == 0
    [v] = r.violations()
    [buf] = [e for e in r.of("alloc") if e["bytes"] == 256]
    assert v["kind"] == "free_while_shared" and v["data"] == buf["base"]
    # warn changes nothing: the consumer reads freed memory, as without the shim.
    assert "expected 376" in r.stdout and "sum 376 " not in r.stdout
    assert freed_bases(r) == [buf["base"]]


def test_free_while_shared_protect_defers_the_free(dlshim):
    r = dlshim.device("rt_alloc", "share_then_free", env={"DLSHIM_ON_ERROR": "protect"})
    assert r.rc == 0
    assert "producer frees: 0" in r.stdout              # the program saw success
    assert "consumer reads: 0, sum 376 (expected 376)" in r.stdout
    [v] = r.violations("free_while_shared")
    [buf] = [e for e in r.of("alloc") if e["bytes"] == 256]
    order = [e["event"] for e in r.events if e["event"] in ("release", "free")]
    assert order == ["release", "free"]                 # freed at the last release
    [f] = r.of("free")
    assert f["base"] == buf["base"] and f["by"] == "dlshim (deferred free)"
    assert freed_bases(r) == [buf["base"]]              # exactly once, by the shim
    assert r.summary["allocations_live"] == 0


def test_double_free(dlshim):
    r = dlshim.device("rt_alloc", "double_free")
    [v] = r.violations()
    assert v["kind"] == "invalid_free"
    assert len(freed_bases(r)) == 2                     # warn: forwarded, the runtime refuses
    p = dlshim.device("rt_alloc", "double_free", env={"DLSHIM_ON_ERROR": "protect"})
    assert "second free: 1" in p.stdout                 # the runtime's own error code
    assert len(freed_bases(p)) == 1                     # protect: never reached the device
    assert len(p.violations("invalid_free")) == 1


def test_interior_free(dlshim):
    r = dlshim.device("rt_alloc", "interior_free", env={"DLSHIM_ON_ERROR": "protect"})
    [v] = r.violations()
    [buf] = r.of("alloc")
    assert v["kind"] == "invalid_free" and int(v["data"], 16) == int(buf["base"], 16) + 64
    assert "interior free: 1" in r.stdout and "real free: 0" in r.stdout
    assert freed_bases(r) == [buf["base"]]              # only the real one was forwarded


def test_leak_of_shared_allocation_at_exit(dlshim):
    r = dlshim.device("rt_alloc", "leak_shared")
    [v] = r.violations()
    [buf] = r.of("alloc")
    assert v["kind"] == "leak" and v["data"] == buf["base"]
    s = r.summary
    assert s["allocations_live"] == 1 and s["allocation_bytes_live"] == 256
    assert s["violations"] == {"leak": 1}


def test_alloc_events_are_off_by_default(dlshim):
    r = dlshim.device("rt_alloc", "direct", env={"DLSHIM_EVENTS": "default"})
    assert r.of("alloc") == [] and r.of("free") == []
    assert r.summary["allocations_live"] == 0


def test_memory_allocated_through_ctypes_is_the_python_codes(dlshim):
    """cudaMalloc and cudaFree called through ctypes: libffi makes the call,
    and the allocation's owner and its freer are named after the Python
    code behind it (the script's stem), as a capsule made through ctypes
    is."""
    r = dlshim.python("ctypes_device.py", env={"LD_LIBRARY_PATH": str(SIMDEV),
                                               "DLSHIM_EVENTS": "all"})
    assert r.rc == 0, r.stderr
    assert [(e["owner"], e["bytes"]) for e in r.of("alloc")] == [("ctypes_device", 4096)]
    assert [e["by"] for e in r.of("free")] == ["ctypes_device"]
