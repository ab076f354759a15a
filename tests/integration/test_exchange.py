"""The DLPack ledger seen through the annotation API: exports, imports,
releases and the summary, for clean exchanges."""
import pytest


def test_clean_legacy_exchange(dlshim):
    r = dlshim.consumer("clean")
    assert r.rc == 0
    [exp] = r.of("export")
    assert exp["producer"] == "prod" and exp["versioned"] is False
    assert exp["device"] == "cpu:0" and exp["dtype"] == "float32"
    assert exp["shape"] == [2, 3] and exp["strides"] is None
    assert exp["bytes"] == 24 and exp["flags"] == [] and exp["byte_offset"] == 0
    assert exp["data"].startswith("0x")
    [imp] = r.of("import")
    assert imp == {**imp, "tensor": exp["tensor"], "consumer": "cons", "producer": "prod",
                   "zero_copy": True, "bytes": 24}
    [rel] = r.of("release")
    assert rel["tensor"] == exp["tensor"] and rel["consumed"] is True
    assert rel["lifetime_ns"] >= 0
    assert r.violations() == []
    s = r.summary
    assert (s["shares"], s["zero_copy"], s["copies"]) == (1, 1, 0)
    assert (s["bytes_shared"], s["bytes_copied"], s["outstanding"]) == (24, 0, 0)
    assert s["violations"] == {}
    assert s["pairs"] == [{"producer": "prod", "consumer": "cons", "shares": 1,
                           "zero_copy": 1, "copies": 0, "bytes": 24, "bytes_copied": 0,
                           "roundtrips": 0}]
    order = [e["event"] for e in r.events]
    assert order == ["export", "import", "release", "summary"]
    assert [e["t_ns"] for e in r.events] == sorted(e["t_ns"] for e in r.events)


# Written in the log's buffer, and built then written (no buffer): either
# way the events' times are the record's, one clock read each.
@pytest.mark.parametrize("buffer", ["64K", "0"])
def test_release_lifetime_is_the_events_times(dlshim, buffer):
    r = dlshim.consumer("clean", env={"DLSHIM_LOG_BUFFER": buffer})
    [exp], [rel] = r.of("export"), r.of("release")
    assert rel["lifetime_ns"] == rel["t_ns"] - exp["t_ns"]


def test_versioned_exchange_reports_flags(dlshim):
    r = dlshim.consumer("versioned")
    [exp] = r.of("export")
    assert exp["versioned"] is True and exp["flags"] == ["read_only"]
    assert exp["shape"] == [4] and exp["bytes"] == 16
    [imp] = r.of("import")
    assert imp["zero_copy"] is True
    assert r.of("release")[0]["consumed"] is True


def test_is_copied_flag_counts_as_copy(dlshim):
    r = dlshim.consumer("copied")
    [exp] = r.of("export")
    assert exp["flags"] == ["read_only", "is_copied"]
    [imp] = r.of("import")
    assert imp["zero_copy"] is False
    s = r.summary
    assert (s["shares"], s["zero_copy"], s["copies"], s["bytes_copied"]) == (1, 0, 1, 16)
    assert s["pairs"][0]["copies"] == 1


def test_unconsumed_export_released_by_producer(dlshim):
    r = dlshim.consumer("unconsumed")
    assert r.of("import") == []
    [rel] = r.of("release")
    assert rel["consumed"] is False and rel["consumer"] is None
    assert r.violations() == []
    assert r.summary["shares"] == 0 and r.summary["outstanding"] == 0


def test_null_deleter_is_tracked_without_trampoline(dlshim):
    r = dlshim.consumer("null_deleter")
    assert "deleter=null" in r.stdout  # the shim did not install a deleter
    assert len(r.of("export")) == 1 and len(r.of("import")) == 1
    assert r.of("release") == []
    assert r.summary["outstanding"] == 0
    assert r.violations() == []


def test_import_without_export_names_unknown_producer(dlshim):
    r = dlshim.consumer("unknown_import")
    [exp] = r.of("export")
    assert exp["producer"] == "unknown" and exp["dtype"] == "int64" and exp["bytes"] == 32
    [imp] = r.of("import")
    assert imp["producer"] == "unknown" and imp["consumer"] == "cons"
    assert r.of("release")[0]["consumed"] is True
    assert r.violations() == []


def test_deleter_that_exports_again(dlshim):
    # The producer decorates an exported tensor's deleter (which is then the
    # shim's trampoline) and exports it again; the decorator's call into the
    # old deleter is a chain, not a double release.  Inside it, a second
    # tensor is exported, imported and released.
    r = dlshim.consumer("deleter_reenters")
    assert r.rc == 0
    first, again, inner = r.of("export")
    assert first["tensor"] == again["tensor"] != inner["tensor"]
    assert len(r.of("import")) == 2
    assert [e["tensor"] for e in r.of("release")] == [first["tensor"], inner["tensor"]]
    assert r.violations() == []
    assert "live=0" in r.stdout


def test_errno_is_preserved(dlshim):
    r = dlshim.consumer("errno")
    assert "errno=1234,4321" in r.stdout


def test_eight_threads_exact_counts(dlshim):
    per_thread = 500
    r = dlshim.consumer("threads", per_thread)
    assert r.rc == 0 and "live=0" in r.stdout
    total = 8 * per_thread
    assert len(r.of("export")) == total
    assert len(r.of("import")) == total
    rels = r.of("release")
    assert len(rels) == total and all(e["consumed"] for e in rels)
    s = r.summary
    assert (s["shares"], s["zero_copy"], s["outstanding"]) == (total, total, 0)
    assert s["violations"] == {} and s["dropped_events"] == 0
    # The deleters ran on other threads than the exports.
    export_tid = {e["tensor"]: e["tid"] for e in r.of("export")}
    assert any(export_tid[e["tensor"]] != e["tid"] for e in rels)


def test_record_cap_evicts_released_records(dlshim):
    r = dlshim.consumer("cycles", 5000, env={"DLSHIM_MAX_RECORDS": "1024"})
    s = r.summary
    assert (s["shares"], s["outstanding"], s["untracked"]) == (5000, 0, 0)
    assert s["violations"] == {} and s["evicted_records"] >= 5000 - 1024
    assert len(r.of("release")) == 5000


def test_record_cap_full_of_live_records(dlshim):
    # 4000 tensors alive at once under a cap of 1024: the excess is counted as
    # untracked, never evicted (their deleters must still be forwarded), and
    # no violation is invented.
    r = dlshim.consumer("threads", 500, env={"DLSHIM_MAX_RECORDS": "1024"})
    assert r.rc == 0 and "live=0" in r.stdout
    s = r.summary
    assert s["untracked"] > 0 and s["violations"] == {} and s["outstanding"] == 0


CORRECT_RUNS = [["clean"], ["versioned"], ["copied"], ["unconsumed"], ["null_deleter"],
                ["unknown_import"], ["deleter_reenters"], ["threads", "20"], ["errno"],
                ["future_version"], ["malformed", "null_shape"]]


@pytest.mark.parametrize("args", CORRECT_RUNS, ids=lambda a: "-".join(a))
def test_same_output_with_and_without_shim(dlshim, args):
    bare = dlshim.consumer(*args, shim=False)
    traced = dlshim.consumer(*args)
    assert bare.rc == traced.rc == 0
    assert bare.stdout == traced.stdout
    assert len(traced.events) > 0
