"""DLSHIM_TRACE (Chrome trace) and bin/dlshim-report (text, --json, --html,
--trace, --complete-trace), checked on the structures they write."""
import json
import shutil
import signal
import struct
import subprocess
import zlib

import pytest

from conftest import DEVICE_BIN, REPORT, SIMDEV, STRESS_BIN, SYSTEM_PYTHON


def report(*args, check=True):
    p = subprocess.run([SYSTEM_PYTHON, str(REPORT), *map(str, args)], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def report_json(tmp_path, *logs):
    out = tmp_path / "report.json"
    p = report(*logs, "--json", out, "--quiet")
    return json.loads(out.read_text()), p


def traced(dlshim, tmp_path, run, *args, env=None, **kw):
    path = tmp_path / "trace.json"
    r = run(*args, env={"DLSHIM_TRACE": str(path), **(env or {})}, **kw)
    r.trace_text = path.read_text()
    return r


def shape(records):
    """What a trace says, without times: (ph, cat, name, id) per record."""
    return sorted((r["ph"], r.get("cat", ""), r["name"], r.get("id", "")) for r in records
                  if r["ph"] != "M")


# ---- DLSHIM_TRACE -------------------------------------------------------------

def test_trace_of_a_double_release(dlshim, tmp_path):
    r = traced(dlshim, tmp_path, dlshim.consumer, "double_release",
               env={"DLSHIM_ON_ERROR": "protect"})
    assert r.rc == 0
    trace = json.loads(r.trace_text)  # closed cleanly: plain JSON
    [exp] = r.of("export")
    t = exp["tensor"]
    begin = [x for x in trace if x["ph"] == "b"]
    end = [x for x in trace if x["ph"] == "e"]
    assert [(x["cat"], x["id"], x["name"]) for x in begin] == [("share", t, "share prod")]
    assert [(x["cat"], x["id"]) for x in end] == [("share", t)]
    assert begin[0]["args"] == exp and end[0]["ts"] > begin[0]["ts"]
    # The handoff arrow: a flow from a slice on export to a slice on import.
    [s] = [x for x in trace if x["ph"] == "s"]
    [f] = [x for x in trace if x["ph"] == "f"]
    assert s["id"] == f["id"] == t and f["bp"] == "e"
    slices = [x for x in trace if x["ph"] == "X"]
    assert {x["name"] for x in slices} == {"export by prod", "import by cons"}
    for flow in (s, f):
        assert any(x["ts"] <= flow["ts"] <= x["ts"] + x["dur"] and x["tid"] == flow["tid"]
                   for x in slices)
    [v] = [x for x in trace if x.get("cat") == "violation"]
    assert (v["ph"], v["cname"], v["args"]["kind"]) == ("i", "terrible", "double_release")
    assert v["args"] == r.violations()[0]
    assert [m["args"]["name"] for m in trace if m["ph"] == "M"] == \
        [f"consumer (pid {exp['pid']})"]


def test_trace_of_device_memory_copies_and_a_barrier(dlshim, tmp_path):
    r = traced(dlshim, tmp_path, dlshim.device, "copies", "roundtrip")
    trace = json.loads(r.trace_text)
    allocs = {a["base"] for a in r.of("alloc")}
    spans = [x for x in trace if x.get("cat") == "alloc"]
    assert {x["id"] for x in spans if x["ph"] == "b"} == allocs
    assert {x["id"] for x in spans if x["ph"] == "e"} == {f["base"] for f in r.of("free")}
    copies = [x for x in trace if x.get("cat") == "copy"]
    assert sorted(x["name"] for x in copies) == \
        ["copy d2h 65536 B", "copy h2d 65536 B", "roundtrip 65536 B"]

    path = tmp_path / "trace.json"
    r = dlshim.device("handoff", "unsynced", env={"DLSHIM_SYNC": "enforce",
                                                  "DLSHIM_TRACE": str(path)})
    trace = json.loads(path.read_text())
    [sync] = r.of("sync")
    barriers = [x for x in trace if x["name"] == "barrier"]
    # Once on the thread, once on the consumer stream's own named track.
    assert len(barriers) == 2
    [track] = [x["tid"] for x in barriers if x["tid"] != sync["tid"]]
    names = [m["args"]["name"] for m in trace if m["ph"] == "M" and m["tid"] == track]
    assert names == [sync["consumer_stream"]]


def test_trace_records_everything_unless_events_are_chosen(dlshim, tmp_path):
    path = tmp_path / "trace.json"
    run = [DEVICE_BIN / "copies", "roundtrip"]
    plain = dlshim.run(run, env={"LD_LIBRARY_PATH": str(SIMDEV)})
    assert plain.rc == 0 and plain.of("alloc") == []  # not in the default events
    dlshim.run(run, env={"LD_LIBRARY_PATH": str(SIMDEV), "DLSHIM_TRACE": str(path)})
    cats = {x["cat"] for x in json.loads(path.read_text()) if x["ph"] != "M"}
    assert cats == {"alloc", "copy"}
    dlshim.consumer("double_release", env={"DLSHIM_TRACE": str(path),
                                           "DLSHIM_EVENTS": "violation",
                                           "DLSHIM_ON_ERROR": "protect"})
    assert {x["cat"] for x in json.loads(path.read_text()) if x["ph"] != "M"} == {"violation"}


def test_a_forked_child_writes_its_own_trace(dlshim, tmp_path):
    script = ("import os, sys\n"
              "pid = os.fork()\n"
              "if pid == 0: sys.exit(0)\n"
              "os.waitpid(pid, 0)\n")
    r = dlshim.run([SYSTEM_PYTHON, "-c", script],
                   env={"DLSHIM_TRACE": str(tmp_path / "t-%p.json")}, log=False)
    assert r.rc == 0
    traces = sorted(tmp_path.glob("t-*.json"))
    assert len(traces) == 2
    for t in traces:
        [meta] = json.loads(t.read_text())  # complete, closed, one process each
        assert meta["pid"] == int(t.stem[2:])


def test_process_dying_of_a_signal_closes_its_trace(dlshim, tmp_path):
    # The second deleter call swallowed, the program aborts: the shim's
    # handler for the fatal signal writes the report and closes the trace
    # before the signal ends the process.
    r = traced(dlshim, tmp_path, dlshim.consumer, "double_release_then_abort",
               env={"DLSHIM_ON_ERROR": "protect"})
    assert r.rc == -signal.SIGABRT
    trace = json.loads(r.trace_text)  # closed: plain JSON
    assert any(x.get("cat") == "violation" for x in trace)
    assert r.violations("double_release") and r.summary["violations"] == {"double_release": 1}


def test_killed_process_leaves_a_completable_trace(dlshim, tmp_path):
    # SIGKILL: nothing runs, the trace stops where it stops, perhaps inside
    # the record being written.
    path = tmp_path / "trace.json"
    r = dlshim.run([STRESS_BIN / "stress", "leave", "sigkill", "2", "200"],
                   env={"LD_LIBRARY_PATH": str(SIMDEV), "DLSHIM_TRACE": str(path),
                        "DLSHIM_LOG_BUFFER": "0"}, torn_tail=True)
    assert r.rc == -signal.SIGKILL
    text = path.read_text()
    with pytest.raises(ValueError):
        json.loads(text)
    try:
        trace = json.loads(text + "]")
    except ValueError:
        text = text[:text.rfind(",\n{")]
        trace = json.loads(text + "]")
    assert any(x.get("cat") == "share" for x in trace)
    assert "completed" in report("--complete-trace", path).stdout
    assert shape(json.loads(path.read_text())) == shape(trace)
    # A record cut short is dropped, the rest kept.
    path.write_text(text[:-20])
    report("--complete-trace", path)
    assert shape(json.loads(path.read_text())) == shape(trace[:-1])


def test_report_trace_matches_the_live_trace(dlshim, tmp_path):
    r = traced(dlshim, tmp_path, dlshim.device, "copies", "roundtrip")
    out = tmp_path / "from-log.json"
    report(r.log_path, "--trace", out, "--quiet")
    assert shape(json.loads(out.read_text())) == shape(json.loads(r.trace_text))


# ---- dlshim-report ------------------------------------------------------------

SUMMARY_KEYS = ("shares", "zero_copy", "copies", "bytes_shared", "bytes_copied", "transfers",
                "bytes_transferred", "roundtrips", "barriers_inserted")


@pytest.mark.parametrize("program, mode, env", [
    ("copies", "roundtrip", {}),
    ("copies", "to_host", {}),
    ("copies", "shared_copy", {}),
    ("handoff", "unsynced", {"DLSHIM_SYNC": "enforce"}),
    ("handoff", "unsynced", {"DLSHIM_SYNC": "check"}),
])
def test_report_numbers_equal_the_exit_summary(dlshim, tmp_path, program, mode, env):
    r = dlshim.device(program, mode, env=env)
    s = r.summary
    rep, _ = report_json(tmp_path, r.log_path)
    assert {k: rep["totals"][k] for k in SUMMARY_KEYS} == {k: s[k] for k in SUMMARY_KEYS}
    assert {k: v["count"] for k, v in rep["violations"].items()} == s["violations"]
    assert len(rep["outstanding"]) == s["outstanding"]
    for p in s["pairs"]:
        [q] = [q for q in rep["pairs"] if (q["producer"], q["consumer"]) ==
               (p["producer"], p["consumer"])]
        assert {k: q[k] for k in p if k not in ("producer", "consumer")} == \
            {k: v for k, v in p.items() if k not in ("producer", "consumer")}


def test_report_of_violations_and_outstanding_shares(dlshim, tmp_path):
    a = dlshim.consumer("double_release", env={"DLSHIM_ON_ERROR": "protect"})
    b = dlshim.consumer("unconsumed")
    rep, _ = report_json(tmp_path, a.log_path, b.log_path)
    [first] = a.violations("double_release")
    assert rep["violations"]["double_release"] == {"count": 1, "first": first}
    assert [e["tensor"] for e in rep["outstanding"]] == \
        [e["tensor"] for e in b.of("export") if e["tensor"] not in
         {x["tensor"] for x in b.of("release")}]


def test_two_processes_merge(dlshim, tmp_path):
    runs = [dlshim.device("copies", "roundtrip"), dlshim.consumer("clean")]
    rep, _ = report_json(tmp_path, *(r.log_path for r in runs))
    assert set(rep["processes"]) == {str(r.summary["pid"]) for r in runs}
    for k in ("shares", "bytes_shared", "roundtrips"):
        assert rep["totals"][k] == sum(r.summary[k] for r in runs)
    # Live allocations: the owners' bytes never freed, from alloc/free events.
    live = {}
    freed = {f["base"] for f in runs[0].of("free")}
    for a in runs[0].of("alloc"):
        if a["base"] not in freed:
            live[a["owner"]] = live.get(a["owner"], 0) + a["bytes"]
    assert {o["owner"]: o["bytes"] for o in rep["live_allocations"]} == live


def test_truncated_and_malformed_lines_are_named_and_skipped(dlshim, tmp_path):
    r = dlshim.consumer("double_release", env={"DLSHIM_ON_ERROR": "protect"})
    lines = r.log_path.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "not json\n" + "[1,2]\n" + "".join(lines[1:]) + lines[0][:30])
    rep, p = report_json(tmp_path, bad)
    n = len(lines)
    assert rep["skipped_lines"] == 3
    assert [l.split(": ")[1] for l in p.stderr.splitlines()] == \
        [f"{bad}:2", f"{bad}:3", f"{bad}:{n + 3}"]
    assert "truncated" in p.stderr.splitlines()[-1]
    assert rep["totals"]["shares"] == r.summary["shares"] == 1
    assert rep["violations"]["double_release"]["count"] == 1


def test_text_report_is_the_default_output(dlshim, tmp_path):
    r = dlshim.consumer("clean")
    p = report(r.log_path)
    assert p.stdout.startswith("dlshim report: 1 process(es), 1 shares")
    missing = report(tmp_path / "missing.jsonl", check=False)
    assert missing.returncode == 2 and missing.stderr.startswith("dlshim-report: ")


# ---- the HTML page, rendered in headless Chromium -----------------------------

def decode_png(data):
    """RGB(A) 8-bit non-interlaced PNG -> (width, height, channels, rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, color, _, _, interlace = head
    assert depth == 8 and color in (2, 6) and interlace == 0
    ch = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], bytearray(w * ch)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b, c = prev[i], prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def screenshot(page, shot, width, height):
    """The page as headless Chromium draws it: (width, height, channels,
    rows), after checking it is that size and not blank."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is installed by scripts/install-deps check"
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--screenshot={shot}",
                        f"--window-size={width},{height}", page.as_uri()],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert shot.exists(), p.stderr
    w, h, ch, rows = decode_png(shot.read_bytes())
    assert (w, h) == (width, height)
    colors = {row[i:i + 3] for row in rows[::4] for i in range(0, w * ch, 4 * ch)}
    assert len(colors) > 20  # not blank
    return w, h, ch, rows


def test_html_page_renders_and_shows_the_violation(dlshim, tmp_path):
    r = dlshim.consumer("double_release", env={"DLSHIM_ON_ERROR": "protect"})
    page = tmp_path / "report.html"
    report(r.log_path, "--html", page, "--quiet")
    text = page.read_text()
    for external in ("<script", "src=", "href=", "url(", "@import", "<link"):
        assert external not in text  # self-contained: nothing is fetched
    assert "double_release" in text
    w, h, ch, rows = screenshot(page, tmp_path / "shot.png", 1200, 900)
    red = sum(1 for row in rows for i in range(0, w * ch, ch)
              if row[i] > 180 and row[i + 1] < 60 and row[i + 2] < 60)
    assert red > 200  # the violation banner and timeline marks
