"""Every way current frameworks consume a capsule is one import, never a
leak or a double release; a producer's capsule destructor that releases the
tensor itself is a release by the producer, not a consumption
(progs/styles.py has the scenarios, each between marks)."""
import json

import pytest

from conftest import Runner, between


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    r = Runner(tmp_path_factory.mktemp("styles")).framework("styles.py")
    assert r.rc == 0, r.stderr[-3000:]
    [line] = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    r.shared = json.loads(line[len("RESULT "):])
    return r


def shape(window):
    """What a window holds: (event, who, detail) per event."""
    out = []
    for e in window:
        if e["event"] == "export":
            out.append(("export", e["producer"], e["versioned"]))
        elif e["event"] == "import":
            out.append(("import", e["consumer"], e["zero_copy"]))
        elif e["event"] == "release":
            out.append(("release", e["consumer"], e.get("copy_on_import", False)))
        else:
            out.append((e["event"], e.get("kind"), None))
    return out


def exchange(r, name):
    return (shape(between(r.events, name, f"{name}: taken")),
            shape(between(r.events, f"{name}: measured", f"{name}: dropped")))


@pytest.mark.parametrize("name, producer, consumer, versioned", [
    ("rename", "torch", "numpy", True),
    ("rename, then clear the destructor (JAX)", "numpy", "jax", False),
    ("rename, then clear the destructor (TensorFlow)", "numpy", "tensorflow", False),
    ("clear the destructor, then rename (tvm-ffi)", "numpy", "tvm_ffi", False),
])
def test_zero_copy_consumption_is_one_import(run, name, producer, consumer, versioned):
    assert run.shared[name] is True  # the framework shares the bytes
    taking, dropping = exchange(run, name)
    assert taking == [("export", producer, versioned), ("import", consumer, True)]
    assert dropping == [("release", consumer, False)]


def test_clearing_the_destructor_alone_is_an_import_and_mlx_copies(run):
    name = "clear the destructor only (MLX)"
    assert run.shared[name] is False  # MLX holds its own copy
    taking, dropping = exchange(run, name)
    assert taking == [("export", "numpy", False), ("import", "mlx", True),
                      ("release", "mlx", True)]
    assert dropping == []


def test_a_consumer_that_lets_go_before_it_renames_took_a_copy(run):
    """JAX copies data that is not 64-byte aligned: it opens the capsule,
    copies, calls the deleter, and only then renames the capsule."""
    name = "take, let go, then rename (JAX copying)"
    assert run.shared[name] is False
    taking, dropping = exchange(run, name)
    assert taking == [("export", "numpy", False), ("import", "jax", False),
                      ("release", "jax", True)]
    assert dropping == []


def test_numpys_own_capsule_around_an_import_is_not_an_export(run):
    imported = shape(between(run.events, "numpy re-exports: imported", "numpy re-exports: taken"))
    assert imported == [("export", "numpy", True), ("import", "torch", True)]
    dropped = shape(between(run.events, "numpy re-exports: taken", "numpy re-exports: dropped"))
    assert sorted(dropped) == [("release", "numpy", False), ("release", "torch", False)]


@pytest.mark.parametrize("name", [
    "TensorFlow's destructor releases and clears itself",
    "JAX's destructor frees without the deleter",
    "PyTorch's destructor calls the deleter",
])
def test_a_dropped_capsule_is_released_by_its_producer(run, name):
    window = between(run.events, f"{name}: made", f"{name}: dropped")
    assert [(e["event"], e["consumed"]) for e in window] == [("release", False)]


def test_nothing_outstanding_and_no_violation(run):
    assert run.violations() == []
    assert run.summary["outstanding"] == 0
