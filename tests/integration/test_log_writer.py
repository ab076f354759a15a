"""The log's writer thread (DLSHIM_LOG_WRITER=thread, shim/output/log.c): a
thread whose block fills hands it to a thread of the shim's, `dlshim-log`,
which writes it while the thread that made the events goes on.  Which thread
made which write(2) is read from strace; every line must still be in the
file once, in order, however the process ends: _exit, a fatal signal, fork,
dlclose, the log's cap."""
import collections
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CONSUMER, PRELOAD_FIRST, WRAPPER, base_env, parse_jsonl, preload_value
from test_log_buffer import Held, run_dlclose
from test_log_threads import check_ring, zst_events

SANITIZED = "asan" in PRELOAD_FIRST or "tsan" in PRELOAD_FIRST
N = 300 if SANITIZED or WRAPPER else 2000
STRACE = shutil.which("strace")


def strace_works():
    if not STRACE or WRAPPER:
        return False
    p = subprocess.run([STRACE, "-f", "-qq", "-o", "/dev/null", "true"], capture_output=True)
    return p.returncode == 0


pytestmark = pytest.mark.skipif(not strace_works(), reason="needs strace (and ptrace allowed)")

THREAD = {"DLSHIM_LOG_WRITER": "thread"}
CALL = re.compile(r"^(\d+)\s+(prctl|write|writev)\((\w+|\d+),?\s*(\"[^\"]*\")?")


def under_strace():
    """LeakSanitizer stops the threads through ptrace, which strace holds:
    off for a traced run (the sanitizer build checks leaks in every other
    test)."""
    asan = base_env().get("ASAN_OPTIONS")
    return {"ASAN_OPTIONS": ":".join(filter(None, [asan, "detect_leaks=0"]))}


class Traced:
    """A run under strace -f: the log's events, and per thread the write(2)
    and writev(2) calls to the log (descriptors above 2)."""

    def __init__(self, tmp_path, args, env=None, name="events.jsonl"):
        self.log = tmp_path / name
        trace = tmp_path / "strace.txt"
        e = base_env()
        e.update({"LD_PRELOAD": preload_value(), "DLSHIM_FORMAT": "jsonl",
                  "DLSHIM_LOG": str(self.log)})
        e.update(env or {})
        e.update(under_strace())
        cmd = [STRACE, "-f", "-qq", "-e", "trace=prctl,write,writev", "-o", str(trace),
               str(CONSUMER), *map(str, args)]
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300)
        self.rc, self.stderr = p.returncode, p.stderr
        self.writers = set()
        self.writes = collections.Counter()
        for line in trace.read_text().splitlines():
            m = CALL.match(line)
            if not m:
                continue
            tid, call, first, name = m.groups()
            if call == "prctl" and first == "PR_SET_NAME" and name == '"dlshim-log"':
                self.writers.add(tid)
            elif call != "prctl" and first.isdigit() and int(first) > 2:
                self.writes[tid] += 1

    def events(self):
        if self.log.name.endswith(".zst"):
            return zst_events(self.log)
        return parse_jsonl(self.log.read_text(), str(self.log))

    def by_writer(self):
        return sum(n for tid, n in self.writes.items() if tid in self.writers)


def test_the_thread_that_makes_events_hands_its_blocks_to_the_writer(tmp_path):
    # One thread, 60000 lines (about 200 blocks of 64 KiB): the first block
    # is written in place (it starts the writer), the exit's flush and the
    # summary too; the writer writes the rest, but for the blocks that
    # filled while it was behind (it was not given a core: a loaded
    # machine), which the thread writes in place.  Three tries for that.
    for attempt in range(3):
        run = tmp_path / str(attempt)
        run.mkdir()
        t = Traced(run, ["cycles", 20000], THREAD)
        assert t.rc == 0, t.stderr
        assert [e["event"] for e in t.events()] == \
            ["export", "import", "release"] * 20000 + ["summary"]
        assert len(t.writers) == 1
        others = sum(t.writes.values()) - t.by_writer()
        if t.by_writer() > 100 and others < t.by_writer() / 5:
            return
    pytest.fail(f"the writer wrote {t.by_writer()} blocks, the other threads {others}")


@pytest.mark.parametrize("writer", ["inline", None])
def test_inline_starts_no_thread(tmp_path, writer):
    # inline is the default: the thread whose block filled writes it.
    t = Traced(tmp_path, ["cycles", 20000], {"DLSHIM_LOG_WRITER": writer} if writer else {})
    assert t.rc == 0, t.stderr
    assert len(t.events()) == 60001
    assert not t.writers and len(t.writes) == 1 and sum(t.writes.values()) > 100


@pytest.mark.parametrize("threads", [8, 24])
def test_threads_at_once_keep_every_line_with_the_writer(tmp_path, threads):
    n = N if threads == 8 else N // 4
    t = Traced(tmp_path, ["ring", n, "return", threads], THREAD)
    assert t.rc == 0, t.stderr
    events = t.events()
    check_ring(events, n, threads=threads)
    assert events[-1]["event"] == "summary" and events[-1]["dropped_events"] == 0
    assert len(t.writers) == 1 and t.by_writer() > 0


def test_the_writer_in_thread_order(tmp_path):
    # The writer writes each slot's block whole (DLSHIM_LOG_ORDER=thread):
    # every line there once (what the order looks like: test_log_threads).
    # Eight threads, as above: enough blocks that the writer writes some.
    t = Traced(tmp_path, ["ring", N], {**THREAD, "DLSHIM_LOG_ORDER": "thread"})
    assert t.rc == 0, t.stderr
    check_ring(zst_events(t.log), N)
    assert sorted(map(str, t.events())) == sorted(map(str, zst_events(t.log)))
    assert len(t.writers) == 1 and t.by_writer() > 0


@pytest.mark.parametrize("then", ["_exit", "segv"])
def test_leaving_writes_what_the_writer_was_handed(tmp_path, then):
    if then == "segv" and SANITIZED:
        pytest.skip("the sanitizer's own SIGSEGV handler is installed first: the shim's is not")
    t = Traced(tmp_path, ["ring", N, then], THREAD)
    assert t.rc == (0 if then == "_exit" else -11), t.stderr
    events = t.events()
    check_ring(events, N)
    assert events[-1]["event"] == "summary"
    assert len(t.writers) == 1 and t.by_writer() > 0


def test_a_forked_child_writes_in_place(tmp_path):
    # Thread 1 forks while the others log: the parent's lines are written
    # once, before the fork; the child, without its parent's writer, starts
    # none (a threaded process's child may not) and writes its N cycles
    # itself.
    t = Traced(tmp_path, ["ring", N, "fork"], THREAD)
    assert t.rc == 0, t.stderr
    events = t.events()
    pids = list(dict.fromkeys(e["pid"] for e in events))
    assert len(pids) == 2
    parent, child = pids
    check_ring(events, N, pid=parent)
    mine = [e["event"] for e in events if e["pid"] == child]
    assert mine == ["export", "import", "release"] * N + ["summary"]
    assert len(t.writers) == 1


@pytest.mark.parametrize("then", ["_exit", "exit"])
def test_dlclose_with_the_writer_running(tmp_path, then):
    # dlopen'd, 3000 handoffs (the writer started), dlclose, then _exit (the
    # hook writes what was held) or exit (the destructor stops the writer).
    trace = tmp_path / "strace.txt"
    events = run_dlclose(tmp_path / "events.jsonl", ["3000", then],
                         {**THREAD, **under_strace()},
                         [STRACE, "-f", "-qq", "-e", "trace=prctl", "-o", str(trace)])
    assert [x["event"] for x in events] == ["export", "import"] * 3000 + ["summary"]
    assert '"dlshim-log"' in trace.read_text()


def test_the_cap_holds_with_the_writer(tmp_path):
    # 1 MiB: blocks enough before the cap for the writer to write some
    t = Traced(tmp_path, ["cycles", 3000], {"DLSHIM_LOG_MAX_SIZE": "1M", **THREAD})
    assert t.rc == 0, t.stderr
    assert t.log.stat().st_size <= 1024 * 1024
    events = t.events()
    kinds = [e["event"] for e in events]
    assert kinds[-2:] == ["log_full", "summary"] and kinds.count("log_full") == 1
    summary = events[-1]
    assert len(kinds) - 2 + summary["capped_events"] == 9000 and summary["dropped_events"] == 0
    assert kinds[:-2] == (["export", "import", "release"] * 3000)[:len(kinds) - 2]
    assert len(t.writers) == 1 and t.by_writer() > 0


def test_a_compressed_log_with_the_writer(tmp_path):
    t = Traced(tmp_path, ["ring", N], THREAD, name="run.jsonl.zst")
    assert t.rc == 0, t.stderr
    check_ring(t.events(), N)
    assert len(t.writers) == 1 and t.by_writer() > 0


def test_a_violation_is_written_at_once_with_the_writer(tmp_path):
    # 20000 cycles first (the writer started and writing), then a double
    # release: every line before it, and it, are in the file while the
    # process is still running.
    held = Held(tmp_path, 20000, "violation", env={"DLSHIM_ON_ERROR": "protect", **THREAD})
    tids = [t.name for t in (Path(f"/proc/{held.proc.pid}/task")).iterdir()]
    names = [(Path(f"/proc/{held.proc.pid}/task/{t}/comm")).read_text().strip() for t in tids]
    assert "dlshim-log" in names
    held.go_on()
    held.expect("violated")
    events = held.events()
    assert [e["event"] for e in events] == ["export", "import", "release"] * 20001 + ["violation"]
    held.go_on()
    assert held.finish() == 0
    assert held.events()[-1]["event"] == "summary"
