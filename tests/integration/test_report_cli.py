"""dlshim-report as a command: installed by pip and run from a checkout, its
exit status and one-line errors on logs it cannot use and outputs it cannot
write, a closed pipe, one clock for the processes of a run (a forked worker
and its parent), copied shares drawn, rows named by pair and Python line,
the table by Python line, and the page as Chromium draws it."""
import json
import os
import re
import subprocess
import tomllib

import pytest

from conftest import REPORT, ROOT, SYSTEM_PYTHON
from test_reports import screenshot

WORKER = ROOT / "tests" / "python" / "forked_worker.py"
COPIED_ORANGE = (0xe0, 0x8a, 0x1e)  # the report's "copied share" colour


def report(*args, **kw):
    return subprocess.run([SYSTEM_PYTHON, str(REPORT), *map(str, args)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, **kw)


def one_error_line(p):
    """The report stopped with status 2 and said why in one line."""
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dlshim-report: "), p.stderr
    return lines[0]


def line_of(text):
    """The number of the line of forked_worker.py that holds `text`."""
    [n] = [n for n, line in enumerate(WORKER.read_text().splitlines(), 1) if text in line]
    return n


@pytest.fixture
def forked_run(dlshim, tmp_path):
    """forked_worker.py's two logs, one per process (the worker's pid, logs)."""
    r = dlshim.python("forked_worker.py", env={"DLSHIM_LOG": str(tmp_path / "ev-%p.jsonl")})
    assert r.rc == 0, r.stderr[-2000:]
    logs = sorted(tmp_path.glob("ev-*.jsonl"))
    assert len(logs) == 2
    return int(r.stdout.split()[0]), logs


def svg_of(page, pid):
    """The timeline SVG of one process in the HTML page."""
    return re.search(rf'aria-label="timeline of pid {pid}">(.*?)</svg>', page, re.S).group(1)


def bars(svg):
    """(class, x, width, fill, title) of each share's bar, top row first."""
    return [(c, float(x), float(w), fill, title) for c, x, w, fill, title in re.findall(
        r'<rect class="(share|copied)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="10" '
        r'fill="([^"]+)"[^>]*><title>([^<]*)</title>', svg)]


# ---- installed by pip, launched from the checkout --------------------------

def test_pip_installs_the_command_and_the_checkout_launches_the_package(tmp_path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["dlshim-report"] == "dlshim.report:main"
    # The entry point pip writes imports the package's module and calls main.
    p = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; from dlshim.report import main; "
                        "sys.exit(main())", "--help"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "python")}, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("usage: dlshim-report"), p.stderr
    # bin/dlshim-report finds the package next to itself, wherever it is called from
    # (a link to it on PATH) and without the package installed.
    link = tmp_path / "dlshim-report"
    link.symlink_to(REPORT)
    p = subprocess.run([SYSTEM_PYTHON, "-S", str(link), "--help"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("usage: dlshim-report"), p.stderr
    assert len(REPORT.read_text().splitlines()) < 20  # a launcher, not a second copy
    # The launcher's help names the command as installed and in the checkout.
    help_text = subprocess.run(["sh", str(ROOT / "bin" / "dlshim"), "--help"],
                               capture_output=True, text=True, timeout=60).stdout
    assert "bin/dlshim-report" in help_text and "scripts/" not in help_text
    assert "--format jsonl" in help_text


# ---- logs it cannot use, outputs it cannot write, a closed pipe -------------

def test_unusable_logs_stop_the_report_with_one_line(dlshim, tmp_path):
    missing = tmp_path / "missing.jsonl"
    assert one_error_line(report(missing)) == \
        f"dlshim-report: {missing}: cannot read (No such file or directory)"
    assert one_error_line(report(tmp_path)) == \
        f"dlshim-report: {tmp_path}: cannot read (Is a directory)"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert one_error_line(report(empty)) == f"dlshim-report: {empty}: empty log (no events)"
    other = tmp_path / "other.txt"
    other.write_text("hello\nworld\n")
    assert one_error_line(report(other)) == \
        f"dlshim-report: {other}: not a dlshim jsonl log (no line is an event)"
    # A good log beside a bad one: still stopped, nothing half-reported.
    good = dlshim.consumer("clean")
    p = report(good.log_path, missing)
    one_error_line(p)
    assert p.stdout == ""


def test_a_trace_or_a_text_log_of_messages_alone_is_named(dlshim, tmp_path):
    trace, log = tmp_path / "trace.json", tmp_path / "text.log"
    dlshim.consumer("clean", log=False, env={"DLSHIM_FORMAT": "text", "DLSHIM_LOG": str(log),
                                             "DLSHIM_TRACE": str(trace)})
    assert log.read_text().startswith("dlshim: ")
    messages = tmp_path / "messages.log"
    messages.write_text("dlshim: warning: something the shim said\n")
    line = one_error_line(report(messages))
    assert line == (f"dlshim-report: {messages}: a text-format log with no event line "
                    "(only the shim's messages)")
    line = one_error_line(report(trace))
    assert line.startswith(f"dlshim-report: {trace}: a Chrome trace (DLSHIM_TRACE), not an "
                           "event log")


def test_closed_pipe_ends_quietly_and_bad_outputs_are_named(dlshim, tmp_path):
    # A report longer than a pipe holds: 4000 shares never released.
    r = dlshim.consumer("clean")
    [export] = r.of("export")
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps({**export, "tensor": hex(0x10000 + 64 * i)}) + "\n"
                           for i in range(4000)))
    page = tmp_path / "page.html"
    p = subprocess.run(f"'{SYSTEM_PYTHON}' '{REPORT}' '{big}' --html '{page}' | head -1",
                       shell=True, capture_output=True, text=True, timeout=120,
                       executable="/bin/bash")
    assert p.stdout.startswith("dlshim report: 1 process(es)") and p.stderr == ""
    assert page.read_text().endswith("</html>\n")  # the file asked for is still written
    p = subprocess.run(["/bin/bash", "-c", f"set -o pipefail; '{SYSTEM_PYTHON}' '{REPORT}' "
                        f"'{big}' | head -1 >/dev/null"], capture_output=True, text=True,
                       timeout=120)
    assert (p.returncode, p.stderr) == (141, "")  # as cat: killed by SIGPIPE, silently
    for option in ("--html", "--json", "--trace"):
        out = tmp_path / "missing" / "dir" / "out"
        assert one_error_line(report(r.log_path, option, out, "--quiet")) == \
            f"dlshim-report: cannot write {out}: No such file or directory"
    assert one_error_line(report(r.log_path, "--json", tmp_path, "--quiet")) == \
        f"dlshim-report: cannot write {tmp_path}: Is a directory"
    assert one_error_line(report("--complete-trace", tmp_path / "none.json")) == \
        f"dlshim-report: {tmp_path / 'none.json'}: cannot complete (No such file or directory)"


# ---- the timeline: one clock, copied shares, rows by pair and Python line -----

def test_a_forked_worker_lines_up_with_its_parent(forked_run, tmp_path):
    worker, logs = forked_run
    page, out = tmp_path / "r.html", tmp_path / "r.json"
    report(*logs, "--html", page, "--json", out, "--quiet")
    rep = json.loads(out.read_text())
    [parent] = [int(pid) for pid in rep["processes"] if int(pid) != worker]
    text = page.read_text()
    mine, theirs = bars(svg_of(text, parent)), bars(svg_of(text, worker))
    assert len(mine) == 4 and len(theirs) == 2
    # The worker shares 0.2 s after the parent's first three shares and before
    # its last one, and is drawn there, not stretched over its own span.
    starts = [b[1] for b in mine]
    assert starts[2] + 600 < theirs[0][1] <= theirs[1][1] <= starts[3]
    # A forked child's t_ns go on from its parent's origin: one clock.
    origins = {pid: p["clock_origin_ns"] for pid, p in rep["processes"].items()}
    assert origins[str(worker)] == origins[str(parent)] > 0


def test_copied_shares_are_drawn_and_rows_name_pair_and_line(forked_run, tmp_path):
    worker, logs = forked_run
    page = tmp_path / "r.html"
    report(*logs, "--html", page, "--quiet")
    text = page.read_text()
    fill = "#%02x%02x%02x" % COPIED_ORANGE
    assert f'background:{fill}"></i>copied share' in text  # in the legend
    [parent] = [p for p in re.findall(r'timeline of pid (\d+)', text) if int(p) != worker]
    mine = bars(svg_of(text, parent))
    [copied] = [b for b in mine if b[0] == "copied"]
    # Exported and released within microseconds, still a bar wide enough to see.
    assert copied[3] == fill and copied[2] >= 8
    tip = copied[4]
    assert "dlpack1ext \u2192 dlpack1ext (copied): 256 B int32 cpu:0" in tip
    assert f"exported at {WORKER}:{line_of('IS_COPIED))')} in copied_share" in tip
    assert f"imported at {WORKER}:" in tip
    # Its lifetime in milliseconds (well under one; under ThreadSanitizer on
    # a loaded machine a few).
    assert re.search(r"lifetime \d+\.\d{3} ms", tip), tip
    # The worker's last share is never released (os._exit): said so.
    assert "never released" in bars(svg_of(text, worker))[-1][4]
    # Rows are named by pair and line, not by an address the allocator reuses.
    labels = re.findall(r'<text x="4" y="[\d.]+" font-size="11">([^<]*)</text>', text)
    assert f"dlpack1ext \u2192 dlpack1ext  forked_worker.py:{line_of('IS_COPIED))')}" in labels
    assert not [label for label in labels if "0x" in label]


# ---- the text format -------------------------------------------------------------

def numbers(rep):
    """What a report says, less what differs between two runs (addresses,
    times, pids)."""
    return {"totals": rep["totals"], "pairs": rep["pairs"], "by_py": rep["by_py"],
            "transfers": rep["transfers"], "live_allocations": rep["live_allocations"],
            "violations": {k: v["count"] for k, v in rep["violations"].items()},
            "outstanding": [(e["producer"], e["bytes"], e.get("py")) for e in rep["outstanding"]],
            "summaries": sorted(
                (p["summary"]["shares"], p["summary"]["copies"], p["summary"]["outstanding"])
                for p in rep["processes"].values())}


def test_a_text_log_gives_the_report_of_its_jsonl_twin(dlshim, forked_run, tmp_path):
    # The default format, text, read back: the same run logged as text and
    # as jsonl gives the same report (a copy, an outstanding share, two
    # processes, Python lines with spaces in them).
    _, logs = forked_run
    r = dlshim.python("forked_worker.py", env={"DLSHIM_FORMAT": "text",
                                               "DLSHIM_LOG": str(tmp_path / "ev-%p.log")})
    assert r.rc == 0, r.stderr[-2000:]
    texts = sorted(tmp_path.glob("ev-*.log"))
    assert len(texts) == 2 and all(t.read_text().startswith("dlshim: ") for t in texts)
    of_jsonl, of_text = tmp_path / "j.json", tmp_path / "t.json"
    assert report(*logs, "--json", of_jsonl, "--quiet").returncode == 0
    p = report(*texts, "--json", of_text, "--quiet")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert numbers(json.loads(of_text.read_text())) == numbers(json.loads(of_jsonl.read_text()))
    # --jsonl gives a text log's events as jsonl lines, the fields typed as
    # the shim writes them (times to the microsecond).
    p = report("--jsonl", *texts)
    events = [json.loads(line) for line in p.stdout.splitlines()]
    [copied] = [e for e in events if e["event"] == "import" and e["zero_copy"] is False]
    assert copied["bytes"] == 256 and copied["py"].endswith(" in copied_share")
    assert all(e["t_ns"] % 1000 == 0 for e in events)
    exports = [e for e in events if e["event"] == "export"]
    assert exports and all(isinstance(e["shape"], list) and e["versioned"] in (True, False)
                           for e in exports)


def test_a_text_log_captured_from_stderr_among_the_programs_lines(tmp_path):
    # The program's own lines, and the summary's table, are passed over.
    log = tmp_path / "stderr.txt"
    log.write_text(
        "loading the model\n"
        'dlshim:    0.000100 7/7 export    py="a.py:3 in <module>" tensor=0x1 producer=torch '
        "api=capsule bytes=16 shape=[4] strides=- flags=[] meta={k=v,n=[1,2.5]}\n"
        "50 % done\n"
        "dlshim:    0.000200 7/8 import    tensor=0x1 consumer=numpy producer=torch "
        'api=capsule zero_copy=false bytes=16 note=""\n'
        "dlshim:   producer             consumer               shares\n")
    p = report("--jsonl", log)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert [json.loads(line) for line in p.stdout.splitlines()] == [
        {"event": "export", "pid": 7, "tid": 7, "t_ns": 100000, "py": "a.py:3 in <module>",
         "tensor": "0x1", "producer": "torch", "api": "capsule", "bytes": 16, "shape": [4],
         "strides": None, "flags": [], "meta": {"k": "v", "n": [1, 2.5]}},
        {"event": "import", "pid": 7, "tid": 8, "t_ns": 200000, "tensor": "0x1",
         "consumer": "numpy", "producer": "torch", "api": "capsule", "zero_copy": False,
         "bytes": 16, "note": ""}]
    out = tmp_path / "r.json"
    assert report(log, "--json", out, "--quiet").returncode == 0
    assert json.loads(out.read_text())["totals"]["copies"] == 1


def test_a_text_log_in_thread_order_comes_out_in_time_order(tmp_path):
    # --jsonl of a text log written in thread order (a thread's block whole):
    # each process's events sorted by time into the places its lines had.
    log = tmp_path / "threads.log"
    log.write_text(
        "dlshim:    0.000300 7/8 release   tensor=0x1 consumed=true\n"
        "dlshim:    0.000050 9/9 export    tensor=0x2 producer=numpy\n"
        "dlshim:    0.000100 7/7 export    tensor=0x1 producer=torch\n")
    p = report("--jsonl", log)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert [(e["pid"], e["t_ns"], e["event"]) for e in map(json.loads, p.stdout.splitlines())] == [
        (7, 100000, "export"), (9, 50000, "export"), (7, 300000, "release")]


@pytest.mark.parametrize("name", ["run.log", "run.log.zst"])
def test_a_text_log_names_its_violations(dlshim, tmp_path, name):
    log = tmp_path / name
    r = dlshim.consumer("double_release", log=False,
                        env={"DLSHIM_FORMAT": "text", "DLSHIM_LOG": str(log),
                             "DLSHIM_ON_ERROR": "protect"})
    assert r.rc == 0, r.stderr
    out = tmp_path / "r.json"
    assert report(log, "--json", out, "--quiet").returncode == 0
    rep = json.loads(out.read_text())
    assert {k: v["count"] for k, v in rep["violations"].items()} == {"double_release": 1}
    first = rep["violations"]["double_release"]["first"]
    assert first["event"] == "violation" and "detail" in first


# ---- by Python line -----------------------------------------------------------

def test_table_by_python_line_in_text_json_and_html(dlshim, forked_run, tmp_path):
    _, logs = forked_run
    page, out = tmp_path / "r.html", tmp_path / "r.json"
    p = report(*logs, "--html", page, "--json", out)
    assert p.returncode == 0, p.stderr
    by_py = json.loads(out.read_text())["by_py"]
    copy_at = f"{WORKER}:{line_of('IS_COPIED))')} in copied_share"
    share_at = f"{WORKER}:{line_of('ext.make(n))')} in share"
    # The silent copy first: the most bytes copied.
    assert by_py == [
        {"py": copy_at, "shares": 1, "copies": 1, "bytes_copied": 256, "violations": 0,
         "outstanding": 0},
        {"py": share_at, "shares": 5, "copies": 0, "bytes_copied": 0, "violations": 0,
         "outstanding": 1}]
    table = p.stdout.split("By Python line (py)")[1].split("\n\n")[0].splitlines()
    assert table[1].split() == ["py", "shares", "copies", "copied", "violations",
                                "outstanding"]
    assert table[2].split() == [*copy_at.split(), "1", "1", "256", "B", "0", "0"]
    html_table = page.read_text().split('id="by-py"')[1].split("</table>")[0]
    assert f">{copy_at}</a></td><td>1</td><td>1</td><td>256 B</td><td>0</td><td>0</td>" in \
        html_table
    # Violations count at their own line; events without one gather in one row.
    r = dlshim.consumer("double_release", env={"DLSHIM_ON_ERROR": "protect"})
    report(r.log_path, "--json", out, "--quiet")
    assert [(line["py"], line["violations"]) for line in json.loads(out.read_text())["by_py"]] \
        == [(None, 1)]


# ---- the page as Chromium draws it ---------------------------------------------

def test_screenshot_shows_the_timeline_and_the_copied_share(forked_run, tmp_path):
    _, logs = forked_run
    page = tmp_path / "r.html"
    report(*logs, "--html", page, "--quiet")
    w, h, ch, rows = screenshot(page, tmp_path / "shot.png", 1400, 1000)
    orange = sum(1 for row in rows for i in range(0, w * ch, ch)
                 if all(abs(row[i + k] - COPIED_ORANGE[k]) < 16 for k in range(3)))
    # The legend's swatch is 12 x 12; the copied share's bar adds 8 x 10 more.
    assert orange > 144 + 60


def test_an_empty_log_beside_others_is_passed_over(dlshim, tmp_path):
    """A process that did nothing writes no summary and leaves an empty file
    under a %p name (a launcher such as torchrun): the run's report still
    reads the others."""
    r = dlshim.consumer("clean")
    empty = tmp_path / "quiet.jsonl"
    empty.write_text("")
    p = report(r.log_path, empty)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.startswith("dlshim report: 1 process(es), 1 shares")


def test_jsonl_puts_each_process_in_time_order_in_its_places(tmp_path):
    # A log in thread order (DLSHIM_LOG_ORDER=thread) from a process 7 that
    # shares the file with a process 9: 7's lines are sorted by time into
    # the places 7's lines had; 9's lines and a torn last line stay put.
    def line(pid, tid, t):
        return f'{{"event":"export","pid":{pid},"tid":{tid},"t_ns":{t},"tensor":"0x1"}}\n'
    log = tmp_path / "threads.jsonl"
    log.write_text(line(7, 7, 10) + line(7, 7, 30) + line(9, 9, 5) + line(7, 8, 20) +
                   line(7, 8, 40) + '{"event":"rel')
    p = report("--jsonl", str(log))
    assert p.returncode == 0, p.stderr
    assert p.stdout == (line(7, 7, 10) + line(7, 8, 20) + line(9, 9, 5) + line(7, 7, 30) +
                        line(7, 8, 40) + '{"event":"rel')
    # A log in time order comes out as written.
    log.write_text(line(7, 7, 10) + line(9, 9, 5) + line(7, 8, 20))
    assert report("--jsonl", str(log)).stdout == log.read_text()
