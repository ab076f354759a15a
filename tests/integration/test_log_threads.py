"""The log's slots of lines (shim/output/log.c): each thread adds its lines
to a slot of its own, and a flush merges the slots by the lines' times.
`consumer ring N THEN [T]`: T threads (8) hand tensors round a ring at once,
each exporting one, passing it on, importing and releasing its neighbour's,
N times.  Every line must be in the file once, whole, each thread's in its
order, each tensor's export before its import before its release, however
the process ends (in thread order, DLSHIM_LOG_ORDER=thread, once
dlshim-report --jsonl has sorted them)."""
import collections
import subprocess

import pytest

from conftest import PRELOAD_FIRST, REPORT, SYSTEM_PYTHON, WRAPPER, parse_jsonl

SANITIZED = "asan" in PRELOAD_FIRST or "tsan" in PRELOAD_FIRST
N = 300 if SANITIZED or WRAPPER else 2000


def zst_events(path):
    p = subprocess.run([SYSTEM_PYTHON, str(REPORT), "--jsonl", str(path)], capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return parse_jsonl(p.stdout.decode(), str(path))


def check_ring(events, n, threads=8, pid=None):
    """The handoff lines of one process: every one there, in order."""
    if pid is None:
        pid = events[0]["pid"]
    lines = [e for e in events if e["pid"] == pid and e["event"] in ("export", "import", "release")]
    assert len(lines) == 3 * n * threads
    per_thread = collections.defaultdict(list)
    for e in lines:
        per_thread[e["tid"]].append(e)
    assert len(per_thread) == threads
    for mine in per_thread.values():
        assert [e["event"] for e in mine] == ["export", "import", "release"] * n
        assert [e["t_ns"] for e in mine] == sorted(e["t_ns"] for e in mine)
    # A tensor's lines come in its order, though threads wrote them: its
    # address is used again only after its release.
    after = {"export": None, "import": "export", "release": "import"}
    state = {}
    for i, e in enumerate(lines):
        assert state.get(e["tensor"]) == after[e["event"]], (i, e)
        state[e["tensor"]] = None if e["event"] == "release" else e["event"]
    assert all(s is None for s in state.values())


@pytest.mark.parametrize("buffer", ["64K", "4K", "200"])
def test_threads_at_once_keep_every_line_in_order(dlshim, buffer):
    # 64K: lines written in the slots themselves; 4K: built on the stack and
    # copied there (smaller than the direct path's room); 200: an export is
    # longer than a block and is written at once, after what the slots held.
    r = dlshim.consumer("ring", str(N), env={"DLSHIM_LOG_BUFFER": buffer})
    assert r.rc == 0, r.stderr
    check_ring(r.events, N)
    s = r.events[-1]
    assert s["event"] == "summary" and s["shares"] == 8 * N and s["dropped_events"] == 0


def longest_run_of_one_thread(events):
    """The most lines of one thread with no other thread's line between."""
    longest, run, tid = 0, 0, None
    for e in events:
        run = run + 1 if e["tid"] == tid else 1
        tid = e["tid"]
        longest = max(longest, run)
    return longest


# Two threads in a ring: each waits for the other's tensor, so neither is
# ever more than an exchange or two ahead, and in time order neither has
# more than a few lines in a row (4 to 6 measured), however the threads are
# scheduled.  A write in thread order holds a block of each thread's lines
# (over 100 measured, with valgrind on a machine kept busy by six other
# processes: a write comes at half a block or 100 ms after the last).
RUN_BETWEEN = 40


def test_in_time_order_threads_lines_interleave(dlshim):
    r = dlshim.consumer("ring", str(N), "return", "2")
    assert r.rc == 0, r.stderr
    assert longest_run_of_one_thread(r.events[:-1]) < RUN_BETWEEN


@pytest.mark.parametrize("log", ["run.jsonl", "run.jsonl.zst"])
def test_thread_order_writes_each_threads_block_whole(dlshim, tmp_path, log):
    # DLSHIM_LOG_ORDER=thread: every line there once; dlshim-report --jsonl
    # gives them back in time order, a tensor's export before its import on
    # another thread.
    path = tmp_path / log
    env = {"DLSHIM_LOG": str(path), "DLSHIM_LOG_ORDER": "thread"}
    r = dlshim.consumer("ring", str(N), env=env)
    assert r.rc == 0, r.stderr
    events = zst_events(path)
    check_ring(events, N)
    assert events[-1]["event"] == "summary" and events[-1]["dropped_events"] == 0
    if log.endswith(".zst"):
        return
    raw = parse_jsonl(path.read_text(), str(path))
    assert sorted(map(str, raw)) == sorted(map(str, events))
    # A write's lines grouped by thread: a block of one thread's lines.
    path.unlink()
    r = dlshim.consumer("ring", str(N), "return", "2", env=env)
    assert r.rc == 0, r.stderr
    assert longest_run_of_one_thread(parse_jsonl(path.read_text(), str(path))[:-1]) >= \
        RUN_BETWEEN


def test_more_threads_than_slots_share_one(dlshim):
    # 24 threads, 15 slots of their own: the rest share slot 0.
    n = N // 4
    r = dlshim.consumer("ring", str(n), "return", "24")
    assert r.rc == 0, r.stderr
    check_ring(r.events, n, threads=24)


def test_a_compressed_log_of_threads_at_once(dlshim, tmp_path):
    log = tmp_path / "run.jsonl.zst"
    r = dlshim.consumer("ring", str(N), env={"DLSHIM_LOG": str(log)})
    assert r.rc == 0, r.stderr
    check_ring(zst_events(log), N)


@pytest.mark.parametrize("then", ["_exit", "segv"])
def test_leaving_from_another_thread_writes_every_threads_lines(dlshim, then):
    # Thread 1 leaves while the other seven are alive, their lines in their
    # slots: the _exit hook (or the fatal-signal handler) writes them all.
    if then == "segv" and SANITIZED:
        pytest.skip("the sanitizer's own SIGSEGV handler is installed first: the shim's is not")
    r = dlshim.consumer("ring", str(N), then)
    assert r.rc == (0 if then == "_exit" else -11)
    check_ring(r.events, N)
    assert r.events[-1]["event"] == "summary"


def test_fork_from_a_thread_while_others_log(dlshim):
    # Thread 1 forks while the others are alive: the parent's lines are
    # written before the fork, once; the child starts with empty slots.
    r = dlshim.consumer("ring", str(N), "fork")
    assert r.rc == 0, r.stderr
    pids = list(dict.fromkeys(e["pid"] for e in r.events))
    assert len(pids) == 2
    parent, child = pids
    check_ring(r.events, N, pid=parent)
    mine = [e["event"] for e in r.events if e["pid"] == child]
    assert mine == ["export", "import", "release"] * N + ["summary"]
    assert len([e for e in r.events if e["event"] == "summary"]) == 2


def test_threads_that_ended_left_their_lines(dlshim):
    # `threads`: eight threads export and end, eight more import and
    # release and end; lines of ended threads wait in their slots (taken
    # again by the next eight) until the summary's flush.
    r = dlshim.consumer("threads", str(N))
    assert r.rc == 0, r.stderr
    kinds = collections.Counter(e["event"] for e in r.events)
    assert kinds["export"] == kinds["import"] == kinds["release"] == 8 * N
    state = {}
    after = {"export": None, "import": "export", "release": "import"}
    for e in r.events:
        if e["event"] in after:
            assert state.get(e["tensor"]) == after[e["event"]]
            state[e["tensor"]] = None if e["event"] == "release" else e["event"]
