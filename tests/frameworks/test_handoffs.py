"""DLPack 1.x as real producers use it (progs/handoffs.py): the read_only
and is_copied flags, dtype codes of DLPack 1.1 from PyTorch and JAX, and
the C exchange table, each between marks."""
import pytest

from conftest import Runner, between


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    r = Runner(tmp_path_factory.mktemp("handoffs")).framework("handoffs.py")
    assert r.rc == 0, r.stderr[-3000:]
    return r


def taken(r, name):
    return between(r.events, name, f"{name}: taken")


def test_a_read_only_numpy_array_exports_read_only(run):
    [exp, imp] = taken(run, "read only")
    assert exp["producer"] == "numpy" and exp["versioned"] and exp["flags"] == ["read_only"]
    assert imp["consumer"] == "numpy" and imp["zero_copy"] is True
    assert "read only consumer writeable: False" in run.stdout


def test_a_copy_asked_of_numpy_is_flagged_and_not_zero_copy(run):
    [exp, imp] = taken(run, "copy=True from numpy")
    assert exp["flags"] == ["is_copied"] and imp["zero_copy"] is False
    assert "copy from numpy shares bytes: False" in run.stdout
    [rel] = between(run.events, "copy=True from numpy: taken", "copy=True from numpy: dropped")
    assert rel["event"] == "release" and rel["tensor"] == exp["tensor"]


def test_pytorch_copies_on_request_without_the_flag(run):
    """PyTorch 2.13's __dlpack__(copy=True) hands over a fresh copy but does
    not set DLPACK_FLAG_BITMASK_IS_COPIED: the consumer shares that copy's
    bytes, so the import is of the buffer handed over, as flagged."""
    [exp, imp] = taken(run, "copy=True from torch")
    assert exp["flags"] == [] and imp["zero_copy"] is True
    assert "copy from torch shares bytes: False" in run.stdout


@pytest.mark.parametrize("name, producer, dtype", [
    ("float8 torch", "torch", "float8_e4m3fn"),
    ("float8 jax", "jax", "float8_e5m2"),
    ("float4 torch", "torch", "float4_e2m1fnx2"),
])
def test_dlpack_1_1_dtypes_are_named_not_malformed(run, name, producer, dtype):
    [exp, imp] = taken(run, name)
    assert (exp["producer"], exp["dtype"], imp["consumer"]) == (producer, dtype, "torch")


def test_exchange_table_both_ways(run):
    """tvm-ffi's echo takes a PyTorch tensor through PyTorch's exchange table
    (from_py_object: PyTorch exports, tvm-ffi imports) and gives back a
    PyTorch tensor through it (to_py_object: tvm-ffi exports, PyTorch
    imports).  No named capsule is made."""
    window = between(run.events, "echo", "echo: returned")
    assert [(e["event"], e.get("producer"), e.get("consumer"), e["api"]) for e in window] == [
        ("export", "torch", None, "exchange_api"), ("import", "torch", "tvm_ffi", "exchange_api"),
        ("export", "tvm_ffi", None, "exchange_api"), ("import", "tvm_ffi", "torch", "exchange_api")]
    assert "echo gives torch sharing bytes: True" in run.stdout
    released = between(run.events, "echo: returned", "echo: dropped")
    assert [(e["event"], e["consumer"]) for e in released] == [("release", "torch"),
                                                               ("release", "tvm_ffi")]


def test_paddle_publishes_the_exchange_table_too(run):
    window = taken(run, "paddle to tvm_ffi")
    assert [(e["event"], e["producer"], e["api"]) for e in window] == [
        ("export", "paddle", "exchange_api"), ("import", "paddle", "exchange_api")]
    [rel] = between(run.events, "paddle to tvm_ffi: taken", "paddle to tvm_ffi: dropped")
    assert rel["consumer"] == "tvm_ffi"


def test_no_violation(run):
    assert run.violations() == [] and run.summary["outstanding"] == 0
