"""Entry points traced by signature (DLSHIM_ENTRY, DLSHIM_ENTRY_FILE) with no
annotation in either library, and libtorch's C++ DLPack API with none at all."""
import pathlib

import pytest

from conftest import BUILD, ROOT, assert_same_behaviour

ENTRY = BUILD / "tests" / "entry"
USER = ENTRY / "spec_user"
TORCH_USER = ROOT / "build" / "cxx" / "torch_user"
SPEC_FILE = ROOT / "tests" / "entry" / "specs.txt"
# The three examples, exactly as written, plus the malformed producer.
SPECS = ";".join(["libprod.so:prod_make(i64,i64)->T@export",
                  "libcons.so:cons_take(T@import,ptr)->i32",
                  "libbridge.so:bridge_share(V@export,i32)->void",
                  "libprod.so:prod_make_bad()->T@export"])


def spec_user(dlshim, mode, specs=SPECS, **kw):
    env = {"DLSHIM_ENTRY": specs, "DLSHIM_EVENTS": "all"}
    env.update(kw.pop("env", {}))
    return dlshim.run([USER, mode], env=env, **kw)


def check_clean(r):
    assert r.rc == 0 and "sum 6" in r.stdout
    [exp] = r.of("export")
    [imp] = r.of("import")
    [rel] = r.of("release")
    assert (exp["producer"], exp["dtype"], exp["shape"]) == ("libprod", "float32", [2, 3])
    assert (imp["tensor"], imp["consumer"], imp["producer"]) == (exp["tensor"], "libcons",
                                                                 "libprod")
    assert rel["tensor"] == exp["tensor"] and rel["consumed"] is True
    make, take = r.of("entry")
    assert (make["symbol"], make["module"], make["args"], make["ret"]) == \
        ("prod_make", "libprod", [2, 3], exp["tensor"])
    assert (take["symbol"], take["args"], take["ret"]) == ("cons_take", [exp["tensor"], "0x0"], 6)
    assert make["duration_ns"] >= 0
    assert r.violations() == []


def test_traced_by_environment_specs(dlshim):
    check_clean(spec_user(dlshim, "clean"))


def test_traced_by_spec_file(dlshim):
    check_clean(spec_user(dlshim, "clean", specs="", env={"DLSHIM_ENTRY_FILE": str(SPEC_FILE)}))


def test_double_release(dlshim):
    assert spec_user(dlshim, "double_release", shim=False).rc != 0
    r = spec_user(dlshim, "double_release", env={"DLSHIM_ON_ERROR": "protect"})
    assert r.rc == 0
    [v] = r.violations()
    assert v["kind"] == "double_release" and v["tensor"] == r.of("export")[0]["tensor"]


def test_malformed_tensor(dlshim):
    r = spec_user(dlshim, "malformed")
    assert r.rc == 0
    [v] = r.violations()
    assert v["kind"] == "malformed_tensor" and v["tensor"] == r.of("export")[0]["tensor"]


def test_symbol_resolved_by_dlsym(dlshim):
    r = spec_user(dlshim, "dlsym")
    assert r.rc == 0 and "sum 9" in r.stdout
    [exp] = r.of("export")
    assert exp["producer"] == "libprod" and exp["shape"] == [3, 3]


def test_versioned_export_by_argument(dlshim):
    r = spec_user(dlshim, "bridge")
    assert r.rc == 0
    [exp] = r.of("export")
    assert (exp["producer"], exp["versioned"]) == ("libbridge", True)
    [entry] = r.of("entry")
    assert entry["args"] == [exp["tensor"], 1] and entry["ret"] is None


def test_missing_symbol_is_a_warning(dlshim):
    bare = spec_user(dlshim, "clean", shim=False)
    r = spec_user(dlshim, "clean", specs="libprod.so:no_such(i64)->T@export;nowhere()")
    assert r.rc == 0 and r.stdout == bare.stdout
    diags = r.diagnostics()
    assert len([d for d in diags if "no_such" in d]) == 1
    assert len([d for d in diags if "nowhere" in d]) == 1
    assert r.of("export") == []


def test_a_bad_spec_is_skipped_with_its_column(dlshim):
    r = spec_user(dlshim, "clean",
                  specs="libprod.so:prod_make(i64,i64)->T@export;libcons.so:cons_take(T@lend,ptr)")
    [d] = [d for d in r.diagnostics() if "DLSHIM_ENTRY" in d]
    assert "spec 2" in d and "column 24" in d  # where "lend" starts
    assert len(r.of("export")) == 1 and r.of("import") == []  # the good one works, the bad one not


@pytest.mark.parametrize("mode", ["clean", "bridge", "malformed"])
def test_same_output_without_the_shim(dlshim, mode):
    assert_same_behaviour(spec_user(dlshim, mode, shim=False), spec_user(dlshim, mode))


def test_libtorch_cpp_with_no_configuration(dlshim):
    r = dlshim.run([TORCH_USER, "roundtrip"])
    assert r.rc == 0 and "sum 6" in r.stdout
    [exp] = r.of("export")
    [imp] = r.of("import")
    [rel] = r.of("release")
    assert (exp["producer"], exp["shape"]) == ("torch", [2, 3])
    assert (imp["consumer"], imp["tensor"]) == ("torch", exp["tensor"])
    assert rel["consumed"] is True and r.violations() == []


def test_libtorch_cpp_unconsumed(dlshim):
    r = dlshim.run([TORCH_USER, "drop"])
    [rel] = r.of("release")
    assert rel["consumed"] is False and r.of("import") == []
