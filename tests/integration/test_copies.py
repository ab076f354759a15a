"""Copy accounting: zero-copy vs copied handoffs, copy events for transfers
touching tracked memory or shares, and CPU roundtrips between owners."""
import pytest

from conftest import assert_same_behaviour


def copies(dlshim, mode, **kw):
    return dlshim.device("copies", mode, **kw)


def test_zero_copy_device_handoff(dlshim):
    r = copies(dlshim, "zero_copy")
    [imp] = r.of("import")
    assert imp["zero_copy"] is True
    assert r.of("copy") == [] and r.summary["copies"] == 0


def test_a_copy_the_program_made_before_exporting_is_its_own(dlshim):
    # A C program copies device bytes to the host, then annotates their
    # export: no export call made the copy, so the consumer shares the host
    # buffer zero-copy, and the copy is counted as a transfer.
    r = copies(dlshim, "to_host")
    [c] = r.of("copy")
    [exp] = r.of("export")
    assert (c["direction"], c["bytes"]) == ("d2h", 65536)
    assert (c["src_owner"], c["src_device"], c["dst_owner"], c["dst_device"]) == \
        ("copies", "cuda:0", None, "cpu:0")
    assert exp["device"] == "cpu:0" and "copied_from" not in exp
    [imp] = r.of("import")
    assert imp["zero_copy"] is True
    s = r.summary
    assert (s["shares"], s["zero_copy"], s["copies"], s["transfers"]) == (1, 1, 0, 1)


def test_only_a_copy_inside_the_export_call_is_the_producers(dlshim):
    """A device-to-host copy made inside the call that makes the capsule is
    the producer's copy for its consumer (copied_from); the same copy made by
    the program at the line before its export is the program's own."""
    from conftest import SIMDEV, between
    r = dlshim.python("copy_in_export.py",
                      env={"LD_LIBRARY_PATH": str(SIMDEV), "DLSHIM_EVENTS": "all"})
    assert r.rc == 0, r.stderr[-2000:]
    handed = ("copy", "export")
    [c1, inside] = [e for e in between(r.events, "start", "copied inside") if e["event"] in handed]
    [c2, before] = [e for e in between(r.events, "copied inside", "copied before")
                    if e["event"] in handed]
    assert (c1["event"], c1["direction"], inside["event"]) == ("copy", "d2h", "export")
    assert inside["copied_from"] == c1["src"] and inside["py"].endswith("copy_in_export.py:10 in <module>")
    assert (c2["event"], c2["direction"], before["event"]) == ("copy", "d2h", "export")
    assert "copied_from" not in before and before["py"].endswith("copy_in_export.py:13 in <module>")


def test_a_device_buffer_filled_from_the_host_is_shared_zero_copy(dlshim):
    # jax.device_put, then an export: the host-to-device copy is the
    # program's own; no producer's __dlpack__ copies onto a device for its
    # consumer (found on the H100: every JAX array was reported a copy).
    r = copies(dlshim, "on_device")
    assert [c["direction"] for c in r.of("copy")] == ["h2d"]
    [exp] = r.of("export")
    assert "copied_from" not in exp
    [imp] = r.of("import")
    assert imp["zero_copy"] is True
    assert (r.summary["zero_copy"], r.summary["copies"]) == (1, 0)


def test_is_copied_flag(dlshim):
    r = copies(dlshim, "flagged")
    [exp] = r.of("export")
    assert exp["flags"] == ["is_copied"] and "copied_from" not in exp
    assert r.of("import")[0]["zero_copy"] is False


def test_roundtrip_between_two_owners(dlshim):
    r = copies(dlshim, "roundtrip")
    assert r.rc == 0
    out, back = r.of("copy")
    assert (out["direction"], out["src_owner"]) == ("d2h", "libjaxlike")
    assert (back["direction"], back["dst_owner"]) == ("h2d", "libtorchlike")
    assert out["dst"] == back["src"]
    [trip] = r.of("roundtrip")
    assert (trip["bytes"], trip["from_owner"], trip["to_owner"]) == (65536, "libjaxlike",
                                                                     "libtorchlike")
    assert (trip["from_device"], trip["to_device"]) == ("cuda:0", "cuda:0")
    assert trip["detail"]
    s = r.summary
    assert s["roundtrips"] == 1
    [pair] = [p for p in s["pairs"] if p["producer"] == "libjaxlike"]
    assert (pair["consumer"], pair["roundtrips"]) == ("libtorchlike", 1)


def test_untracked_memory_and_unshared_buffers(dlshim):
    r = copies(dlshim, "untracked")
    [c] = r.of("copy")  # the host-to-host copy of malloc memory is not one of ours
    assert c["direction"] == "d2h" and c["src_share"] is None and c["dst_share"] is None
    assert r.summary["transfers"] == 1 and r.summary["bytes_transferred"] == 65536


def test_every_form_and_inferred_directions(dlshim):
    r = copies(dlshim, "forms")
    assert [(c["direction"], c["bytes"]) for c in r.of("copy")] == [("d2d", 2048),
                                                                    ("peer", 1024),
                                                                    ("h2d", 2048)]


def test_managed_and_pinned_memory_are_named_alike_everywhere(dlshim):
    """An allocation's device is named the same in its alloc event and in
    the copies that touch it (docs/events.md: cuda_managed, cuda_host)."""
    r = copies(dlshim, "managed")
    assert r.rc == 0, r.stdout
    devices = {a["base"]: a["device"] for a in r.of("alloc")}
    managed = next(b for b, d in devices.items() if d == "cuda_managed:0")
    pinned = next(b for b, d in devices.items() if d == "cuda_host:0")
    into, out = r.of("copy")
    assert (into["dst"], into["dst_device"]) == (managed, "cuda_managed:0")
    assert (out["src"], out["src_device"]) == (managed, "cuda_managed:0")
    assert (out["dst"], out["dst_device"]) == (pinned, "cuda_host:0")


def test_copy_of_a_live_share_names_it(dlshim):
    r = copies(dlshim, "shared_copy")
    [exp] = r.of("export")
    [c] = r.of("copy")
    assert c["src_share"] == exp["tensor"] and c["dst_share"] is None


@pytest.mark.parametrize("mode", ["to_host", "roundtrip", "forms"])
def test_same_output_without_the_shim(dlshim, mode):
    assert_same_behaviour(copies(dlshim, mode, shim=False), copies(dlshim, mode))


def test_summary_table_matches_events(dlshim):
    r = copies(dlshim, "to_host")
    imports = r.of("import")
    s = r.summary
    assert s["shares"] == len(imports)
    assert s["copies"] == sum(not i["zero_copy"] for i in imports)
    assert s["bytes_copied"] == sum(i["bytes"] for i in imports if not i["zero_copy"])
    assert s["transfers"] == len(r.of("copy"))
    assert s["bytes_transferred"] == sum(c["bytes"] for c in r.of("copy"))


@pytest.mark.parametrize("events", ["default", "all"])
def test_repeated_copies_are_each_counted(dlshim, events):
    # Without copy events (default) a repeat takes the copy hooks' way that
    # calls nothing: each is counted all the same, the untracked ones never.
    r = copies(dlshim, "repeated", env={"DLSHIM_EVENTS": events})
    assert r.rc == 0, r.stderr[-2000:]
    s = r.summary
    assert (s["transfers"], s["bytes_transferred"]) == (5, 5 * 64 * 1024)
    assert len(r.of("copy")) == (5 if events == "all" else 0)


def test_host_copies_of_shared_buffers_in_python(dlshim):
    r = dlshim.python("host_copies.py",
                      env={"DLSHIM_HOOKS": "default,host-copy", "DLSHIM_EVENTS": "all"})
    assert r.rc == 0, r.stderr[-2000:]
    from test_python import between
    [exp] = r.of("export")
    [c] = [e for e in between(r.events, "numpy.array", "torch.tensor") if e["event"] == "copy"]
    assert (c["direction"], c["bytes"], c["src_share"], c["by"]) == ("h2h", 4 << 20, exp["tensor"],
                                                                   "numpy")
    # PyTorch copies with its own vectorized loops, not memcpy: not seen.
    assert [e for e in between(r.events, "torch.tensor", "end") if e["event"] == "copy"] == []


def test_host_copy_family_is_off_by_default(dlshim):
    r = dlshim.python("host_copies.py", env={"DLSHIM_EVENTS": "all"})
    assert r.of("copy") == []
