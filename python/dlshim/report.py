"""dlshim-report: what happened to every shared buffer, from dlshim logs.

    dlshim-report LOG.jsonl [LOG2.jsonl ...] [--html OUT.html] [--trace OUT.json]
                  [--json OUT.json]
    dlshim-report --complete-trace TRACE.json
    dlshim-report --jsonl LOG.jsonl.zst | jq ...

Reads the logs of one or more processes (DLSHIM_FORMAT=jsonl, or text, the
default; e.g. one per rank from `dlshim --log run-%r.jsonl`) and prints the
summary tables merged across them, violations also per rank when the events carry one, each with
the Python line (`py`) that caused it first, and a table by Python line
(shares, copies, violations and outstanding shares of each).  --html writes
one self-contained page (summary and an SVG timeline per rank or process on
the run's one clock, each violation linked to its Python file; no network,
scripts or fonts); --trace the Chrome trace
(Perfetto, chrome://tracing) of the same events, as DLSHIM_TRACE would have
written it; --json the report's numbers for other tools.  --complete-trace
closes a DLSHIM_TRACE file left open by a process that was killed.
A log written compressed (DLSHIM_LOG=run.jsonl.zst: zstd frames) is read
as a plain one, through the system's libzstd.so.1; --jsonl prints the plain
lines of the logs and nothing else, each process's in time order (a log
written with DLSHIM_LOG_ORDER=thread groups a write's lines by thread), a
text log's events rewritten as jsonl.

A malformed or truncated line is reported with its file and line number and
skipped.  A log that cannot be read, is empty, or holds no event (a text log
of the shim's messages alone, a Chrome trace) ends the report with one line
on stderr and status 2, as does an output file that cannot be written.
Python 3 standard library only.
"""
import argparse
import html
import json
import os
import re
import signal
import sys
from collections import defaultdict

COMMON = ("event", "pid", "tid", "t_ns")


class ReportError(Exception):
    """A log the report cannot read or an output it cannot write: one line
    for stderr, and status 2."""


class EmptyLog(ReportError):
    """A log with no line: a process that logged nothing (it shared nothing,
    so it wrote no summary either).  Beside other logs it is passed over;
    alone, there is nothing to report."""


def not_a_log(path, first):
    """Why a file whose first line is `first` holds no event: what it is, when
    that can be told, and what to give instead."""
    if first.startswith(b"dlshim:"):
        return f"{path}: a text-format log with no event line (only the shim's messages)"
    if first.startswith(b"[") and b'"ph":' in first:
        return (f"{path}: a Chrome trace (DLSHIM_TRACE), not an event log; open it in "
                "ui.perfetto.dev, or give the jsonl log (--format jsonl --log FILE)")
    return f"{path}: not a dlshim jsonl log (no line is an event)"


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_frames(path, data):
    """The text of a log written compressed (DLSHIM_LOG=run.jsonl.zst): zstd
    frames, one per block the shim wrote, decoded with the system's
    libzstd.so.1 through ctypes.  A last frame cut short (a killed
    process) ends the text: the lines before it are whole."""
    import ctypes
    try:
        z = ctypes.CDLL("libzstd.so.1")
    except OSError:
        raise ReportError(f"{path}: a zstd-compressed log, and libzstd.so.1 cannot be loaded "
                          "(Debian: apt install libzstd1)") from None
    z.ZSTD_findFrameCompressedSize.restype = ctypes.c_size_t
    z.ZSTD_findFrameCompressedSize.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    z.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    z.ZSTD_getFrameContentSize.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    z.ZSTD_decompress.restype = ctypes.c_size_t
    z.ZSTD_decompress.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                  ctypes.c_size_t)
    z.ZSTD_isError.argtypes = (ctypes.c_size_t,)
    out, at = [], 0
    while at < len(data):
        rest = data[at:]
        n = z.ZSTD_findFrameCompressedSize(rest, len(rest))
        size = z.ZSTD_getFrameContentSize(rest, len(rest))
        if z.ZSTD_isError(n) or size >= 2 ** 63:  # cut short, or not a frame the shim writes
            break
        dst = ctypes.create_string_buffer(max(size, 1))
        got = z.ZSTD_decompress(dst, size, rest, n)
        if z.ZSTD_isError(got):
            break
        out.append(dst.raw[:got])
        at += n
    return b"".join(out)


def read_bytes(path):
    """A log's text, decompressed when it is zstd (whatever its name)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ReportError(f"{path}: cannot read ({e.strerror})") from None
    return zstd_frames(path, data) if data.startswith(ZSTD_MAGIC) else data


# The fields every jsonl line begins with, in the order the shim writes them.
LINE_HEAD = re.compile(rb'\{"event":"[^"]*","pid":(\d+),"tid":\d+,"t_ns":(\d+)')
LINE_START = re.compile(rb'^' + LINE_HEAD.pattern, re.M)


def time_order(heads):
    """Where each line goes for each process's lines to be in time order:
    `heads` holds a line's (pid, t_ns), or None for a line that is no event.
    Stable (one thread's ties keep their order); each process's lines take
    the places its lines had, so lines of processes that share a file stay
    where they were, and a line that is no event (a torn last line) too."""
    places = defaultdict(list)
    for i, head in enumerate(heads):
        if head is not None:
            places[head[0]].append((head[1], i))
    order = list(range(len(heads)))
    for at in places.values():
        for (_, dst), (_, src) in zip(at, sorted(at, key=lambda x: x[0])):
            order[dst] = src
    return order


def in_time_order(data):
    """A jsonl log with each process's lines in time order (time_order): a
    log written in thread order (DLSHIM_LOG_ORDER=thread) has a write's lines
    grouped by thread."""
    last = {}
    for m in LINE_START.finditer(data):
        pid, t = m.group(1), int(m.group(2))
        if t < last.get(pid, t):
            break
        last[pid] = t
    else:
        return data  # in order already (a log in time order): as written, not copied
    lines = data.splitlines(keepends=True)
    heads = [(m.group(1), int(m.group(2))) if (m := LINE_HEAD.match(line)) else None
             for line in lines]
    return b"".join(lines[i] for i in time_order(heads))


# ---- the text format (DLSHIM_FORMAT=text) -------------------------------------
# The shim's text line is its JSON rewritten (shim/output/text.c): the four
# common fields become a prefix (seconds to the microsecond, pid/tid, the
# event), `"k":v` becomes `k=v`, strings lose their quotes unless empty or
# holding a space (a quote inside one became '?'), null becomes '-', nested
# objects and arrays keep their brackets with ',' between.  Read back here by
# hand (no library knows this format); what the rewriting lost stays lost:
# t_ns to the microsecond, and a string that reads as a number, true, false
# or '-' comes back as one.
TEXT_HEAD = re.compile(r"dlshim: +(\d+)\.(\d{6}) (\d+)/(\d+) (\S+) *")
TEXT_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?\Z")


def text_bare(word):
    if word in ("true", "false"):
        return word == "true"
    if word == "-":
        return None
    if TEXT_NUMBER.match(word):
        return float(word) if any(c in word for c in ".eE") else int(word)
    return word


def text_value(s, i, stop):
    """The value at s[i] and where it ends; `stop`: what ends a bare word."""
    if s[i] == '"':
        end = s.index('"', i + 1)
        return s[i + 1:end], end + 1
    if s[i] in "[{":
        close, object_ = ("}", True) if s[i] == "{" else ("]", False)
        out, i = ({} if object_ else []), i + 1
        while s[i] != close:
            if object_:
                eq = s.index("=", i)
                key, (v, i) = s[i:eq], text_value(s, eq + 1, ",]}")
                out[key] = v
            else:
                v, i = text_value(s, i, ",]}")
                out.append(v)
            if s[i] == ",":
                i += 1
        return out, i + 1
    end = i
    while end < len(s) and s[end] not in stop:
        end += 1
    return text_bare(s[i:end]), end


def text_event(line):
    """The event of one text line, or None for a line that is none (the
    summary's tables, the shim's messages, the program's own output)."""
    m = TEXT_HEAD.match(line)
    if not m:
        return None
    seconds, micros, pid, tid, name = m.groups()
    ev = {"event": name, "pid": int(pid), "tid": int(tid),
          "t_ns": int(seconds) * 1000000000 + int(micros) * 1000}
    s, i = line.rstrip("\n"), m.end()
    while i < len(s):
        eq = s.index("=", i)
        ev[s[i:eq]], i = text_value(s, eq + 1, " ")
        if i < len(s) and s[i] != " ":
            raise ValueError("a value runs on")
        i += 1
    return ev


def text_log(path, lines):
    """The events of a text log: its event lines (a line that is none is
    passed over: the tables after a summary, the shim's messages and, in a
    log written to stderr, the program's own lines)."""
    events, problems = [], []
    for number, raw in lines:
        try:
            ev = text_event(raw.decode("utf-8", "replace"))
        except (ValueError, IndexError):
            why = "truncated" if not raw.endswith(b"\n") else "not a dlshim text line"
            problems.append(f"{path}:{number}: skipped a malformed line: {why}")
            continue
        if ev is not None:
            events.append(ev)
    return events, problems


def is_text(data):
    """A text log: its first line is the shim's, or (stderr captured with the
    program's own lines first) it is no JSON and some line is the shim's."""
    first = data[:4096].lstrip()[:8]
    return first.startswith(b"dlshim:") or (
        not first.startswith((b"{", b"[")) and (b"\ndlshim: " in data))


def jsonl_of(path):
    """A log's lines as jsonl: a jsonl log's each process's in time order, a
    text log's events rewritten as JSON."""
    data = read_bytes(path)
    if not is_text(data):
        return in_time_order(data)
    lines = [(n, raw) for n, raw in enumerate(data.splitlines(keepends=True), 1) if raw.strip()]
    events, problems = text_log(path, lines)
    for p in problems:
        print(f"dlshim-report: {p}", file=sys.stderr)
    order = time_order([(e["pid"], e["t_ns"]) for e in events])
    return "".join(json.dumps(events[i], separators=(",", ":")) + "\n" for i in order).encode()


def read_log(path):
    """The well-formed events of one file, in file order, and a line for each
    line skipped."""
    data = read_bytes(path)
    lines = [(number, raw) for number, raw in enumerate(data.splitlines(keepends=True), 1)
             if raw.strip()]
    if not lines:
        raise EmptyLog(f"{path}: empty log (no events)")
    first = lines[0][1].lstrip()
    if is_text(data):
        events, problems = text_log(path, lines)
        if not events:
            raise ReportError(not_a_log(path, first))
        return events, problems
    # A trace would otherwise give a warning per line and an empty report:
    # say what the file is instead.
    if first.startswith(b"["):
        raise ReportError(not_a_log(path, first))
    events, problems = [], []
    for number, raw in lines:
        try:
            ev = json.loads(raw.decode("utf-8", "replace"))
        except ValueError as e:
            why = "truncated" if not raw.endswith(b"\n") else f"not JSON ({e.msg})"
            problems.append(f"{path}:{number}: skipped a malformed line: {why}")
            continue
        if not isinstance(ev, dict) or any(k not in ev for k in COMMON) or \
                not isinstance(ev["event"], str) or \
                not all(isinstance(ev[k], int) for k in COMMON[1:]):
            problems.append(f"{path}:{number}: skipped a line that is not a dlshim event")
            continue
        events.append(ev)
    if not events:
        raise ReportError(not_a_log(path, first))
    return events, problems


def new_line():
    return {"shares": 0, "copies": 0, "bytes_copied": 0, "violations": 0, "outstanding": 0}


def new_pair():
    return {"shares": 0, "zero_copy": 0, "copies": 0, "bytes": 0, "bytes_copied": 0,
            "roundtrips": 0}


def analyse(events):
    """The report's numbers (also what --json writes)."""
    totals = {"shares": 0, "zero_copy": 0, "copies": 0, "bytes_shared": 0, "bytes_copied": 0,
              "transfers": 0, "bytes_transferred": 0, "roundtrips": 0, "barriers_inserted": 0,
              "violations": 0}
    pairs = defaultdict(new_pair)
    transfers = defaultdict(lambda: {"count": 0, "bytes": 0})
    violations = {}
    live_shares = {}     # (pid, tensor) -> export event
    live_allocs = {}     # (pid, base) -> alloc event
    roundtrips = []
    processes = defaultdict(lambda: {"events": 0, "summary": None, "clock_origin_ns": None,
                                     "rank": None})
    per_rank = defaultdict(lambda: {"count": 0, "first": None})  # (rank, kind)
    by_py = defaultdict(new_line)  # the event's own py: where the import, violation happened
    log_full = []  # DLSHIM_LOG_MAX_SIZE reached: what follows counts the lines written
    for ev in events:
        kind, pid = ev["event"], ev["pid"]
        proc = processes[pid]
        proc["events"] += 1
        if isinstance(ev.get("rank"), int):
            proc["rank"] = ev["rank"]
        if kind == "export":
            live_shares[(pid, ev.get("tensor"))] = ev
        elif kind == "release":
            live_shares.pop((pid, ev.get("tensor")), None)
        elif kind == "import":
            p = pairs[(ev.get("producer"), ev.get("consumer"))]
            b = ev.get("bytes", 0) or 0
            copied = ev.get("zero_copy") is False
            for d in (p, totals):
                d["shares"] += 1
                d["copies" if copied else "zero_copy"] += 1
                d["bytes" if d is p else "bytes_shared"] += b
            line = by_py[ev.get("py")]
            line["shares"] += 1
            if copied:
                for d in (p, totals, line):
                    d["bytes_copied"] += b
                line["copies"] += 1
        elif kind == "alloc":
            live_allocs[(pid, ev.get("base"))] = ev
        elif kind == "free":
            live_allocs.pop((pid, ev.get("base")), None)
        elif kind == "copy":
            t = transfers[(ev.get("direction"), ev.get("src_owner"), ev.get("dst_owner"))]
            t["count"] += 1
            t["bytes"] += ev.get("bytes", 0) or 0
            totals["transfers"] += 1
            totals["bytes_transferred"] += ev.get("bytes", 0) or 0
        elif kind == "roundtrip":
            totals["roundtrips"] += 1
            pairs[(ev.get("from_owner"), ev.get("to_owner"))]["roundtrips"] += 1
            roundtrips.append(ev)
        elif kind == "sync":
            totals["barriers_inserted"] += 1
        elif kind == "violation":
            totals["violations"] += 1
            by_py[ev.get("py")]["violations"] += 1
            v = violations.setdefault(ev.get("kind", "?"), {"count": 0, "first": ev})
            v["count"] += 1
            if isinstance(ev.get("rank"), int):
                pr = per_rank[(ev["rank"], ev.get("kind", "?"))]
                pr["count"] += 1
                pr["first"] = pr["first"] or ev
        elif kind == "summary":
            proc["summary"] = ev
            proc["clock_origin_ns"] = ev.get("clock_origin_ns")
        elif kind == "log_full":
            log_full.append(ev)
    for ev in live_shares.values():  # outstanding: counted where they were exported
        by_py[ev.get("py")]["outstanding"] += 1
    owners = defaultdict(lambda: {"allocations": 0, "bytes": 0})
    for ev in live_allocs.values():
        o = owners[ev.get("owner", "?")]
        o["allocations"] += 1
        o["bytes"] += ev.get("bytes", 0) or 0
    return {
        "processes": {str(pid): {"events": p["events"], "summary": p["summary"],
                                 "rank": p["rank"], "clock_origin_ns": p["clock_origin_ns"]}
                      for pid, p in sorted(processes.items())},
        "violations_per_rank": [dict(rank=k[0], kind=k[1], **v)
                                for k, v in sorted(per_rank.items())],
        "totals": totals,
        "pairs": [dict(producer=k[0], consumer=k[1], **v) for k, v in
                  sorted(pairs.items(), key=lambda kv: (-kv[1]["shares"], str(kv[0])))],
        "transfers": [dict(direction=k[0], src_owner=k[1], dst_owner=k[2], **v) for k, v in
                      sorted(transfers.items(), key=lambda kv: -kv[1]["bytes"])],
        "roundtrips": roundtrips,
        "violations": {k: v for k, v in sorted(violations.items())},
        "by_py": [dict(py=k, **v) for k, v in sorted(by_py.items(), key=lambda kv: (
            -kv[1]["bytes_copied"], -kv[1]["copies"], -kv[1]["violations"],
            -kv[1]["outstanding"], -kv[1]["shares"], str(kv[0])))],
        "outstanding": sorted(live_shares.values(), key=lambda e: (e["pid"], e["t_ns"])),
        "live_allocations": [dict(owner=k, **v) for k, v in
                             sorted(owners.items(), key=lambda kv: -kv[1]["bytes"])],
        "log_full": [{"pid": ev["pid"], "max_size": ev.get("max_size"),
                      "capped_events": (processes[ev["pid"]]["summary"] or {}).get("capped_events")}
                     for ev in log_full],
    }


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def seen(ev):
    """Where and when an event happened: its rank (or pid) and time."""
    who = f"rank {ev['rank']}" if isinstance(ev.get("rank"), int) else f"pid {ev['pid']}"
    return f"{who} at {ev['t_ns'] / 1e9:.6f} s"


def tables(r):
    """The text report as (title, header, rows) tables."""
    out = []
    out.append(("Pairs (producer -> consumer)",
                ("producer", "consumer", "shares", "zero-copy", "copies", "bytes", "copied",
                 "roundtrips"),
                [(p["producer"], p["consumer"], p["shares"], p["zero_copy"], p["copies"],
                  human(p["bytes"]), human(p["bytes_copied"]), p["roundtrips"])
                 for p in r["pairs"]]))
    out.append(("Copies", ("direction", "from", "to", "count", "bytes"),
                [(t["direction"], t["src_owner"] or "untracked", t["dst_owner"] or "untracked",
                  t["count"], human(t["bytes"])) for t in r["transfers"]]))
    out.append(("Roundtrips (device -> host -> device)", ("from", "to", "bytes", "pid"),
                [(e.get("from_owner"), e.get("to_owner"), human(e.get("bytes", 0)), e["pid"])
                 for e in r["roundtrips"]]))
    out.append(("Violations", ("kind", "count", "first at", "first seen", "detail"),
                [(k, v["count"], v["first"].get("py"), seen(v["first"]),
                  v["first"].get("detail", "")) for k, v in r["violations"].items()]))
    if r["violations_per_rank"]:
        out.append(("Violations per rank", ("rank", "kind", "count", "first at", "first seen"),
                    [(v["rank"], v["kind"], v["count"], v["first"].get("py"), seen(v["first"]))
                     for v in r["violations_per_rank"]]))
    out.append(("By Python line (py): where the shares, copies and violations happen",
                ("py", "shares", "copies", "copied", "violations", "outstanding"),
                [(line["py"] or "(no Python line)", line["shares"], line["copies"],
                  human(line["bytes_copied"]), line["violations"], line["outstanding"])
                 for line in r["by_py"]]))
    out.append(("Outstanding shares (exported, never released)",
                ("tensor", "producer", "device", "bytes", "pid"),
                [(e.get("tensor"), e.get("producer"), e.get("device"), human(e.get("bytes", 0)),
                  e["pid"]) for e in r["outstanding"]]))
    out.append(("Top owners by live allocation bytes", ("owner", "allocations", "bytes"),
                [(o["owner"], o["allocations"], human(o["bytes"]))
                 for o in r["live_allocations"][:10]]))
    return out


def log_full_note(f):
    """What a capped log (a `log_full` line) means for the numbers."""
    return (f"process {f['pid']}'s log reached DLSHIM_LOG_MAX_SIZE "
            f"({human(f['max_size'] or 0)}): {f['capped_events']} later events were not "
            f"written; the tables count the lines written (a tensor released after the "
            f"cap shows as outstanding)")


def print_text(r, out):
    t = r["totals"]
    out.write(f"dlshim report: {len(r['processes'])} process(es), {t['shares']} shares "
              f"({t['zero_copy']} zero-copy, {t['copies']} copies), "
              f"{human(t['bytes_shared'])} shared, {t['violations']} violation(s)\n")
    for f in r["log_full"]:
        out.write(f"note: {log_full_note(f)}\n")
    for title, header, rows in tables(r):
        out.write(f"\n{title}\n")
        if not rows:
            out.write("  (none)\n")
            continue
        rows = [tuple("-" if c is None else str(c) for c in row) for row in rows]
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
        for row in (header, *rows):
            out.write("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


# ---- Chrome trace: the same records as shim/output/trace.c ------------------------

def origins(events):
    """CLOCK_MONOTONIC when the shim loaded, by pid, for the processes whose
    summary gives it (a forked child's is its parent's: its t_ns go on from
    there)."""
    o = {}
    for ev in events:
        if ev["event"] == "summary" and isinstance(ev.get("clock_origin_ns"), int):
            o[ev["pid"]] = ev["clock_origin_ns"]
    return o


def trace_records(events):
    org = origins(events)
    recs, named = [], set()

    def rec(ev, name, cat, ph, at=0, **extra):
        ts = (org.get(ev["pid"], 0) + ev["t_ns"] + at) / 1000
        r = {"name": name, "cat": cat, "ph": ph, "ts": ts, "pid": ev["pid"], "tid": ev["tid"]}
        r.update(extra)
        recs.append(r)

    for ev in events:
        kind, pid = ev["event"], ev["pid"]
        if pid not in named:
            named.add(pid)
            recs.append({"name": "process_name", "ph": "M", "pid": pid, "tid": pid,
                         "args": {"name": f"pid {pid}"}})
        if kind == "export":
            rec(ev, f"share {ev.get('producer')}", "share", "b", id=ev.get("tensor"), args=ev)
            rec(ev, f"export by {ev.get('producer')}", "dlpack", "X", dur=1)
            rec(ev, "handoff", "handoff", "s", 1, id=ev.get("tensor"))
        elif kind == "release":
            rec(ev, f"share {ev.get('producer')}", "share", "e", id=ev.get("tensor"), args=ev)
        elif kind in ("alloc", "free"):
            rec(ev, f"alloc {ev.get('owner')}", "alloc", "b" if kind == "alloc" else "e",
                id=ev.get("base"), args=ev)
        elif kind == "import":
            rec(ev, f"import by {ev.get('consumer')}", "dlpack", "X", dur=1, args=ev)
            rec(ev, "handoff", "handoff", "f", 1, id=ev.get("tensor"), bp="e")
        elif kind == "entry":
            dur = ev.get("duration_ns", 0) or 0
            rec(ev, f"entry {ev.get('symbol')}", "entry", "X", -dur, dur=dur / 1000, args=ev)
        elif kind == "violation":
            rec(ev, f"violation {ev.get('kind')}", "violation", "i", s="p", cname="terrible",
                args=ev)
        elif kind == "copy":
            rec(ev, f"copy {ev.get('direction')} {ev.get('bytes')} B", "copy", "i", s="t", args=ev)
        elif kind == "roundtrip":
            rec(ev, f"roundtrip {ev.get('bytes')} B", "copy", "i", s="p", args=ev)
        elif kind == "sync":
            rec(ev, "barrier", "sync", "i", s="t", args=ev)
        elif kind != "summary":
            rec(ev, kind, "dlshim", "i", s="t", args=ev)
    return recs


def complete_trace(path):
    """Appends the closing bracket a killed process could not write."""
    with open(path, "rb+") as f:
        data = f.read()
        body = data.rstrip()
        if body.endswith(b"]"):
            return False
        # Cut a record the kill interrupted mid-write (records are one write,
        # so this is rare): back to the last complete one.
        while body and not body.endswith(b"}"):
            body = body[:-1]
        while body:
            try:
                json.loads(body + b"]")
                break
            except ValueError:
                cut = body.rfind(b",\n{")
                body = body[:cut] if cut > 0 else b""
        f.seek(0)
        f.truncate()
        f.write((body or b"[") + b"\n]\n")
        return True


# ---- HTML: one self-contained page; hovering relies on SVG <title> only ---

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 10px;text-align:left;
border-bottom:1px solid #ddd}th{background:#f2f2f2}
.bad{background:#fde8e8;border-left:6px solid #d01c1c;padding:8px 12px}
.bad h2{color:#b00000;margin-top:0}.warn{background:#fff6d6;padding:8px 12px}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:12px;vertical-align:middle;margin-right:4px}
svg{border:1px solid #ccc;background:#fcfcfc}
"""
COLORS = {"share": "#2b7bba", "copied": "#e08a1e", "alloc": "#9aa7b5", "copy": "#6a3d9a",
          "violation": "#d01c1c", "import": "#0b3d66"}
ROW, LABEL_W, PLOT_W, MAX_ROWS, MIN_BAR = 18, 260, 900, 400, 8


def esc(x):
    return html.escape("-" if x is None else str(x), quote=True)


def short_py(where):
    """"/path/train.py:42 in step" -> "train.py:42": what fits in a row label."""
    return os.path.basename(str(where).split(" in ", 1)[0]) if where else ""


def duration(ns):
    return f"{ns / 1e6:.3f} ms" if ns < 1e9 else f"{ns / 1e9:.3f} s"


def share_tip(row):
    """The hover text of a share: the pair, its bytes, where it was exported and
    imported, how long it lived."""
    e = row["info"]
    imp = row["import"]
    how = "" if imp is None else " (copied)" if row["copied"] else " (zero-copy)"
    lines = [f"{row['pair']}{how}: {human(e.get('bytes', 0))} {e.get('dtype') or ''} "
             f"{e.get('device') or ''}",
             f"exported at {e.get('py') or '(no Python line)'}"]
    if imp is not None:
        lines.append(f"imported at {imp.get('py') or '(no Python line)'}")
    if row["end"] is None:
        lines.append("never released: outstanding at the end of the log")
    else:
        lines.append(f"lifetime {duration(row['end'] - row['start'])}")
    lines.append(f"tensor {e.get('tensor')} (pid {e['pid']})")
    return "\n".join(lines)


def alloc_tip(row):
    e = row["info"]
    life = ("never freed" if row["end"] is None
            else f"lifetime {duration(row['end'] - row['start'])}")
    return (f"allocation by {e.get('owner')}: {human(e.get('bytes', 0))} {e.get('device') or ''}"
            f"\n{life}\nbase {e.get('base')} (pid {e['pid']})")


def timeline(pid, evs, clock, t0, t1):
    """The SVG of one process on the axis t0..t1 (ns on `clock`, shared by the
    processes of a run so that they line up): a row per share and per
    allocation, a row of copies, violations as red lines with markers."""
    span = max(t1 - t0, 1)
    x = lambda ns: LABEL_W + (ns - t0) * PLOT_W / span
    rows, by_key = [], {}  # addresses are reused: a key maps to its latest row
    copies, violations = [], []
    for e in evs:
        k = e["event"]
        if k == "export":
            row = {"kind": "share", "pair": f"{e.get('producer')} \u2192 (not imported)",
                   "py": e.get("py"), "start": clock(e), "end": None, "marks": [],
                   "copied": False, "info": e, "import": None}
            by_key[("share", e.get("tensor"))] = row
            rows.append(row)
        elif k == "alloc":
            row = {"kind": "alloc", "start": clock(e), "end": None, "marks": [], "copied": False,
                   "info": e, "label": f"{e.get('owner')} {human(e.get('bytes', 0))} "
                                      f"{e.get('device')}"}
            by_key[("alloc", e.get("base"))] = row
            rows.append(row)
        elif k in ("release", "free"):
            row = by_key.get(("share" if k == "release" else "alloc",
                              e.get("tensor") or e.get("base")))
            if row and row["end"] is None:
                row["end"] = clock(e)
        elif k == "import":
            row = by_key.get(("share", e.get("tensor")))
            if row:
                row["pair"] = f"{e.get('producer')} \u2192 {e.get('consumer')}"
                row["import"] = row["import"] or e
                row["py"] = row["py"] or e.get("py")
                row["copied"] |= e.get("zero_copy") is False
                row["marks"].append(("import", clock(e), e))
        elif k in ("copy", "roundtrip"):
            copies.append(e)
        elif k == "violation":
            violations.append(e)
            row = by_key.get(("share", e.get("tensor"))) or by_key.get(("alloc", e.get("data")))
            if row:
                row["marks"].append(("violation", clock(e), e))
    hidden = max(len(rows) - MAX_ROWS, 0)
    rows = rows[:MAX_ROWS]
    height = (len(rows) + 3) * ROW + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + PLOT_W + 50}" '
           f'height="{height}" role="img" aria-label="timeline of pid {pid}">']
    for i in range(6):  # time axis
        ns = t0 + span * i / 5
        out.append(f'<line x1="{x(ns):.1f}" y1="0" x2="{x(ns):.1f}" y2="{height - 18}" '
                   f'stroke="#e4e4e4"/><text x="{x(ns):.1f}" y="{height - 4}" font-size="11" '
                   f'text-anchor="middle">{(ns - t0) / 1e6:.3f} ms</text>')
    for i, row in enumerate(rows):
        y = (i + 1) * ROW
        kind = "copied" if row["copied"] else row["kind"]
        if row["kind"] == "share":
            label = f"{row['pair']}  {short_py(row['py'])}"
            tip = share_tip(row)
        else:
            label, tip = row["label"], alloc_tip(row)
        end = row["end"] if row["end"] is not None else t1
        out.append(f'<text x="4" y="{y + 11}" font-size="11">{esc(label[:44])}</text>')
        # A share released within the same microsecond still gets a bar that
        # shows its colour.
        w = max(x(end) - x(row["start"]), MIN_BAR)
        dash = ' stroke="#333" stroke-dasharray="3 2"' if row["end"] is None else ""
        out.append(f'<rect class="{kind}" x="{x(row["start"]):.1f}" y="{y + 2}" width="{w:.1f}" '
                   f'height="10" fill="{COLORS[kind]}"{dash}><title>{esc(tip)}</title></rect>')
        for mark, at, e in row["marks"]:
            if mark == "import":  # under the bar: a short share's colour stays visible
                out.append(f'<path d="M{x(at):.1f},{y + 13} l4,5 h-8 z" '
                           f'fill="{COLORS["import"]}"><title>{esc(share_tip(row))}</title></path>')
            else:
                out.append(f'<path d="M{x(at):.1f},{y} l6,14 h-12 z" fill="{COLORS["violation"]}">'
                           f'<title>{esc(e.get("kind"))}: {esc(e.get("detail"))}'
                           f'{esc(" at " + e["py"]) if e.get("py") else ""}</title></path>')
    y = (len(rows) + 1) * ROW
    out.append(f'<text x="4" y="{y + 11}" font-size="11">copies ({len(copies)})</text>')
    for e in copies:
        tip = (f"{e['event']} {e.get('direction', '')} {human(e.get('bytes', 0))} "
               f"{e.get('src_owner') or e.get('from_owner')} \u2192 "
               f"{e.get('dst_owner') or e.get('to_owner')}"
               f"{' at ' + e['py'] if e.get('py') else ''}")
        out.append(f'<rect x="{x(clock(e)) - 1:.1f}" y="{y + 2}" width="3" height="12" '
                   f'fill="{COLORS["copy"]}"><title>{esc(tip)}</title></rect>')
    for e in violations:
        out.append(f'<line x1="{x(clock(e)):.1f}" y1="0" x2="{x(clock(e)):.1f}" '
                   f'y2="{height - 18}" stroke="{COLORS["violation"]}" stroke-width="2"><title>'
                   f'{esc(e.get("kind"))}: {esc(e.get("detail"))}</title></line>')
    out.append("</svg>")
    if hidden:
        out.append(f"<p>{hidden} more buffers not drawn (the first {MAX_ROWS} are shown).</p>")
    return "\n".join(out)


def source_link(where):
    """A `py` location ("/path/file.py:LINE in f") as a link to its file."""
    path = str(where).rsplit(":", 1)[0] if where else ""
    if not path.startswith("/"):
        return esc(where)
    return f'<a href="file://{esc(path)}">{esc(where)}</a>'


def html_table(header, rows, links=()):
    """Cells in the columns of `links` are Python locations, shown as links."""
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{source_link(c) if i in links else esc(c)}</td>"
                             for i, c in enumerate(row)) + "</tr>" for row in rows]
    return "\n".join(out) + "</table>"


def render_html(r, events, tabs, problems, names):
    t = r["totals"]
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             f"<title>dlshim report: {esc(', '.join(names))}</title><style>{CSS}</style></head>",
             f"<body><h1>dlshim report</h1><p>{esc(', '.join(names))}: "
             f"{len(r['processes'])} process(es), {t['shares']} shares ({t['zero_copy']} "
             f"zero-copy, {t['copies']} copies), {esc(human(t['bytes_shared']))} shared, "
             f"{t['transfers']} transfers, {t['roundtrips']} roundtrips, "
             f"{t['violations']} violation(s).</p>"]
    parts += [f'<p class="bad">{esc(log_full_note(f))}</p>' for f in r["log_full"]]
    if r["violations"]:
        parts.append('<div class="bad" id="violations"><h2>Violations</h2>')
        for title, header, rows in tabs:
            if title.startswith("Violations"):
                if title != "Violations":
                    parts.append(f"<h3>{esc(title)}</h3>")
                at = header.index("first at")
                parts.append(html_table(header, rows, links={at}))
        parts.append("</div>")
    if problems:
        parts.append('<div class="warn"><b>Skipped lines</b><br>' +
                     "<br>".join(esc(p) for p in problems[:50]) + "</div>")
    for title, header, rows in tabs:
        if title.startswith("By Python line"):
            parts.append(f'<h2 id="by-py">{esc(title)}</h2>' +
                         html_table(header, rows, links={header.index("py")}))
    parts.append('<h2>Timeline</h2><p class="legend">' + "".join(
        f'<span><i class="sw" style="background:{c}"></i>{n}</span>' for n, c in (
            ("zero-copy share", COLORS["share"]), ("copied share", COLORS["copied"]),
            ("allocation", COLORS["alloc"]), ("import", COLORS["import"]),
            ("copy", COLORS["copy"]), ("violation", COLORS["violation"]))) +
        " Dashed: never released. Hover for details. Every process is drawn on one "
        "clock (ms since the run's first event), so a forked worker lines up with its "
        "parent.</p>")
    by_pid = defaultdict(list)
    for e in events:
        if e["event"] != "summary":
            by_pid[e["pid"]].append(e)
    org = origins(events)
    clock = lambda e: org.get(e["pid"], 0) + e["t_ns"]
    on_clock = [clock(e) for pid, evs in by_pid.items() if pid in org for e in evs]
    rank_of = {int(pid): p["rank"] for pid, p in r["processes"].items()}
    order = lambda kv: (rank_of.get(kv[0]) is None, rank_of.get(kv[0]) or 0, kv[0])
    for pid, evs in sorted(by_pid.items(), key=order):
        rank = rank_of.get(pid)
        title = f"rank {rank} (pid {pid})" if rank is not None else f"pid {pid}"
        if pid in org:
            span, note = (min(on_clock), max(on_clock)), ""
        else:
            # The origin is only in the summary: a process killed before
            # writing it has times relative to an unknown start.
            span = (min(map(clock, evs)), max(map(clock, evs)))
            note = ("<p>No summary in this process's log (killed?): its clock origin is "
                    "unknown, so it is drawn on its own time axis, not the run's.</p>")
        parts.append(f"<h3>{title}</h3>{note}" + timeline(pid, evs, clock, *span))
    for title, header, rows in tabs:
        if not title.startswith(("Violations", "By Python line")):
            parts.append(f"<h2>{esc(title)}</h2>" + (html_table(header, rows) if rows
                                                     else "<p>none</p>"))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write(path, text):
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise ReportError(f"cannot write {path}: {e.strerror}") from None


def to_stdout(write):
    """Runs write(sys.stdout); False when the reader has gone (`| head`).  Then
    stdout is pointed at /dev/null so that the flush at exit does not fail
    again."""
    try:
        write(sys.stdout)
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False


def run(a, ap):
    if a.complete_trace:
        try:
            done = complete_trace(a.complete_trace)
        except OSError as e:
            raise ReportError(f"{a.complete_trace}: cannot complete ({e.strerror})") from None
        state = "completed" if done else "already complete"
        return to_stdout(lambda out: out.write(f"{a.complete_trace}: {state}\n"))
    if not a.logs:
        ap.error("give at least one log")
    if a.jsonl:
        # Plain jsonl lines (for jq, grep): each file in turn.
        return to_stdout(lambda out: [out.buffer.write(jsonl_of(p)) for p in a.logs])
    events, problems, empty = [], [], []
    for path in a.logs:
        try:
            found, skipped = read_log(path)
        except EmptyLog as e:
            empty.append(e)
            continue
        events += found
        problems += skipped
    if not events:
        raise empty[0]
    for p in problems:
        print(f"dlshim-report: {p}", file=sys.stderr)
    # Merge by time on one clock: each process's own origin, when known.
    org = origins(events)
    events.sort(key=lambda e: org.get(e["pid"], 0) + e["t_ns"])
    r = analyse(events)
    r["skipped_lines"] = len(problems)
    shown = True
    if not a.quiet:
        shown = to_stdout(lambda out: print_text(r, out))
    # The files asked for are written even when the reader of stdout has gone.
    if a.json:
        write(a.json, json.dumps(r, indent=1))
    if a.trace:
        write(a.trace, json.dumps(trace_records(events)))
    if a.html:
        names = [os.path.basename(p) for p in a.logs]
        write(a.html, render_html(r, events, tables(r), problems, names))
    return shown


def main(argv=None):
    ap = argparse.ArgumentParser(prog="dlshim-report", description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="*",
                    help="logs: jsonl (DLSHIM_FORMAT=jsonl, plain or .zst) or text")
    ap.add_argument("--html", metavar="OUT", help="write a self-contained HTML report")
    ap.add_argument("--trace", metavar="OUT", help="write a Chrome trace (Perfetto)")
    ap.add_argument("--json", metavar="OUT", help="write the report's numbers as JSON")
    ap.add_argument("--complete-trace", metavar="TRACE",
                    help="close a DLSHIM_TRACE file whose process was killed")
    ap.add_argument("--quiet", action="store_true", help="no text report on stdout")
    ap.add_argument("--jsonl", action="store_true",
                    help="print the logs' plain jsonl lines (a .zst log decompressed, a "
                         "text log rewritten; each process's in time order), no report")
    a = ap.parse_args(argv)
    try:
        shown = run(a, ap)
    except ReportError as e:
        print(f"dlshim-report: {e}", file=sys.stderr)
        return 2
    # A closed pipe ends the report as it ends other tools: no message, the
    # status of a process killed by SIGPIPE.
    return 0 if shown else 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
