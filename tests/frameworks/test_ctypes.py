"""Capsules made and taken through ctypes (progs/ctypes_capsules.py, and
Warp, which does all of its DLPack that way): named after the Python code
that made the call, never `libffi` or `_ctypes`; dtype and device codes
outside dlshim's tables logged by number; a consumer that never lets go
reported at exit with its producer and consumer."""
import pytest

from conftest import Runner, between


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    r = Runner(tmp_path_factory.mktemp("ctypes")).framework("ctypes_capsules.py")
    assert r.rc == 0, r.stderr[-3000:]
    return r


def test_a_capsule_made_through_ctypes_is_named_after_the_script(run):
    [exp, imp] = between(run.events, "codes", "codes: taken")
    assert exp["producer"] == "ctypes_capsules" and imp["consumer"] == "ctypes_capsules"


def test_codes_outside_the_tables_are_logged_by_number(run):
    [exp, _] = between(run.events, "codes", "codes: taken")
    assert (exp["device"], exp["dtype"], exp["bytes"]) == ("device99:0", "code42_8", 4)
    [rel] = between(run.events, "codes: taken", "codes: released")
    assert rel["consumed"] is True
    [exp4, _, _] = between(run.events, "float4", "float4: released")
    assert (exp4["dtype"], exp4["bytes"]) == ("float4_e2m1fn", 4)  # 8 packed 4-bit values
    assert run.violations() == []


def test_a_capsule_filled_after_it_is_made_is_exported_as_filled(run):
    [exp, imp] = between(run.events, "late", "late: taken")
    assert (exp["producer"], exp["dtype"], exp["shape"], exp["bytes"]) == \
        ("ctypes_capsules", "float32", [4], 16)
    assert imp["consumer"] == "ctypes_capsules" and imp["tensor"] == exp["tensor"]
    [rel] = between(run.events, "late: taken", "late: released")
    assert rel["tensor"] == exp["tensor"] and rel["consumed"] is True
    assert run.violations() == []


def test_a_capsule_let_go_before_its_rename_on_another_thread_was_a_copy(run):
    """Taken as JAX takes data it copies (opened, deleter called, then
    renamed), on a thread other than the one that made the capsule, each
    step a statement of its own: the release is the taker's, not yet an
    import (a helper that reads in place and lets go does the same); the
    rename that follows makes it the import of a copy, counted as one."""
    events = between(run.events, "across threads", "across threads: dropped")
    assert [(e["event"], e.get("consumer")) for e in events] == \
        [("export", None), ("release", None), ("import", "ctypes_capsules")]
    [exp, rel, imp] = events
    assert exp["producer"] == "numpy" and imp["zero_copy"] is False
    assert rel["consumed"] is False and rel["tensor"] == imp["tensor"] == exp["tensor"]
    assert run.violations() == []


def test_a_share_never_released_is_named_at_exit(run):
    [exp, imp] = between(run.events, "kept", "kept: taken")
    s = run.summary
    assert s["outstanding"] == 1
    assert s["outstanding_shares"] == [{"tensor": exp["tensor"], "producer": "numpy",
                                        "consumer": "ctypes_capsules", "bytes": 24}]


def test_the_text_summary_lists_it(dlshim):
    r = dlshim.framework("ctypes_capsules.py", env={"DLSHIM_FORMAT": "text"})
    assert r.rc == 0
    lines = [l.split() for l in r.stderr.splitlines() if l.startswith("dlshim:   ")]
    header = [l for l in lines if l[1] == "outstanding"]
    assert header and header[0][2:4] == ["producer", "consumer"]
    rows = [l for l in lines if l[1].startswith("0x")]
    assert [(l[2], l[3], l[4]) for l in rows] == [("numpy", "ctypes_capsules", "24")]


def test_warp_makes_and_takes_capsules_through_ctypes(dlshim):
    r = dlshim.framework("matrix.py", "warp,numpy", "numpy,warp")
    assert r.rc == 0, r.stderr[-3000:]
    pairs = {(e["producer"], e["consumer"]) for e in r.of("import")}
    assert {("warp", "numpy"), ("numpy", "warp"), ("warp", "warp")} <= pairs
    names = {e["producer"] for e in r.of("export")} | {e["consumer"] for e in r.of("import")}
    assert not names & {"libffi", "_ctypes", "unknown"}
