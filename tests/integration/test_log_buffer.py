"""The log buffer (DLSHIM_LOG_BUFFER): lines to a log file are written in
blocks, and at once where it matters: after a violation, at _exit, before a
fork.  The program pauses ("ready" on stdout, waiting for a line on stdin) so
that the log and the write count of a live process can be read."""
import json
import os
import select
import subprocess

import pytest

from conftest import (CONSUMER, LIB, PRELOAD_FIRST, REPORT, SYSTEM_PYTHON, WRAPPER, base_env, parse_jsonl,
                      preload_value)


def zst_events(path):
    """A compressed log's events, through `dlshim-report --jsonl` (the one
    command a jq user runs)."""
    p = subprocess.run([SYSTEM_PYTHON, str(REPORT), "--jsonl", str(path)], capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return parse_jsonl(p.stdout.decode(), str(path))


class Held:
    """consumer hold N THEN, paused at its first "ready"."""

    def __init__(self, tmp_path, n, then, env=None, name="events.jsonl"):
        self.log = tmp_path / name
        e = base_env()
        e.update({"LD_PRELOAD": preload_value(), "DLSHIM_FORMAT": "jsonl",
                  "DLSHIM_LOG": str(self.log)})
        e.update(env or {})
        self.proc = subprocess.Popen(WRAPPER + [str(CONSUMER), "hold", str(n), then], env=e,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.expect("ready")

    def expect(self, word):
        assert self.proc.stdout.readline().strip() == word

    def go_on(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def write_calls(self):
        """write(2)-family system calls the process has made so far."""
        with open(f"/proc/{self.proc.pid}/io") as f:
            return int(next(l for l in f if l.startswith("syscw:")).split()[1])

    def events(self):
        if not self.log.exists():
            return []
        if self.log.suffix == ".zst":
            return zst_events(self.log)
        return parse_jsonl(self.log.read_text(), str(self.log))

    def finish(self):
        self.proc.stdin.close()
        self.proc.stdout.read()
        self.proc.stderr.read()
        return self.proc.wait(timeout=60)


def test_lines_to_a_file_are_written_in_blocks(tmp_path):
    held = Held(tmp_path, 200, "return")  # 600 events, ~100 KB of jsonl
    buffered_writes = held.write_calls()
    assert held.finish() == 0
    events = held.events()
    assert [e["event"] for e in events] == ["export", "import", "release"] * 200 + ["summary"]
    assert [e["t_ns"] for e in events] == sorted(e["t_ns"] for e in events)
    assert events[-1]["dropped_events"] == 0

    (tmp_path / "unbuffered").mkdir()
    unbuffered = Held(tmp_path / "unbuffered", 200, "return", env={"DLSHIM_LOG_BUFFER": "0"})
    unbuffered_writes = unbuffered.write_calls()
    assert len(unbuffered.events()) == 600  # every line is in the file while it runs
    assert unbuffered.finish() == 0
    # One write per line without the buffer; a block per 64 KiB (or per 100 ms
    # of a slow run under a sanitizer) with it.
    assert unbuffered_writes >= 600
    assert buffered_writes < 100


def test_a_violation_is_written_at_once(tmp_path):
    held = Held(tmp_path, 2, "violation", env={"DLSHIM_ON_ERROR": "protect"})
    held.go_on()
    held.expect("violated")
    events = held.events()  # the process is still running
    assert [e["event"] for e in events] == ["export", "import", "release"] * 3 + ["violation"]
    assert events[-1]["kind"] == "double_release"
    held.go_on()
    assert held.finish() == 0
    assert held.events()[-1]["event"] == "summary"


def test_exit_without_handlers_writes_what_was_held(tmp_path):
    held = Held(tmp_path, 3, "_exit")
    held.go_on()
    assert held.finish() == 0
    # Written by the _exit hook: what the buffer held, then the summary.
    events = held.events()
    assert [e["event"] for e in events] == ["export", "import", "release"] * 3 + ["summary"]
    assert events[-1]["shares"] == 3 and "partial" not in events[-1]


def test_a_forked_child_does_not_write_its_parents_lines(dlshim):
    r = dlshim.consumer("fork_cycles", "20")
    assert r.rc == 0
    pids = {e["pid"] for e in r.events}
    assert len(pids) == 2
    for pid in pids:
        mine = [e for e in r.events if e["pid"] == pid]
        assert len([e for e in mine if e["event"] == "summary"]) == 1
    # 20 before the fork (parent), 20 in the child, 20 in the parent after.
    assert len(r.of("export")) == 60 and len(r.of("release")) == 60
    assert len({(e["pid"], e["t_ns"]) for e in r.events}) == len(r.events)


def test_a_buffer_smaller_than_a_line_keeps_the_order(dlshim):
    # 200 bytes: imports fit, exports do not; an export is written after
    # the lines held before it, never ahead of them.
    r = dlshim.consumer("cycles", "50", env={"DLSHIM_LOG_BUFFER": "200"})
    assert r.rc == 0
    assert [e["event"] for e in r.events] == ["export", "import", "release"] * 50 + ["summary"]


def test_a_fault_writes_what_was_held(tmp_path):
    if "asan" in PRELOAD_FIRST or "tsan" in PRELOAD_FIRST:
        pytest.skip("the sanitizer's own SIGSEGV handler is installed first: the shim's is not")
    held = Held(tmp_path, 3, "segv")
    assert held.events() == []  # all of it still in the buffer
    held.go_on()
    assert held.finish() == -11  # SIGSEGV, as without the shim
    # Written by the fatal-signal handler: what the buffer held, then the summary.
    events = held.events()
    assert [e["event"] for e in events] == ["export", "import", "release"] * 3 + ["summary"]


def test_a_device_nobody_reads_live_gets_blocks(tmp_path):
    # /dev/null is a character device: it was written a line at a time.
    held = Held(tmp_path, 200, "return", env={"DLSHIM_LOG": "/dev/null"})
    writes = held.write_calls()
    assert held.finish() == 0
    assert writes < 100  # 600 lines


def test_a_terminal_still_gets_each_line_at_once(tmp_path):
    import pty
    leader, follower = pty.openpty()
    try:
        held = Held(tmp_path, 2, "return", env={"DLSHIM_LOG": os.ttyname(follower)})
        os.close(follower)
        follower = -1
        seen = b""
        while seen.count(b"\n") < 6:  # the lines are there while it waits
            assert select.select([leader], [], [], 60)[0], seen
            seen += os.read(leader, 4096)
        assert held.finish() == 0
        assert [json.loads(l)["event"] for l in seen.decode().splitlines()[:6]] == \
            ["export", "import", "release"] * 2
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def capped_run(dlshim, cap, env=None):
    e = {"DLSHIM_LOG_MAX_SIZE": str(cap)}
    e.update(env or {})
    return dlshim.consumer("cycles", "3000", env=e)  # 9000 lines, ~1.5 MB


@pytest.mark.parametrize("buffer", ["64K", "0"])
def test_a_log_file_stops_at_its_max_size(dlshim, buffer):
    r = capped_run(dlshim, "200K", {"DLSHIM_LOG_BUFFER": buffer})
    assert r.rc == 0  # the program never sees it
    assert os.path.getsize(r.log_path) <= 200 * 1024
    kinds = [e["event"] for e in r.events]
    assert kinds[-2:] == ["log_full", "summary"]
    assert kinds.count("log_full") == 1
    full, summary = r.events[-2], r.events[-1]
    assert full["max_size"] == 200 * 1024 and "DLSHIM_LOG_MAX_SIZE" in full["note"]
    assert summary["shares"] == 3000 and summary["dropped_events"] == 0
    # every line is either in the file or counted
    assert len(kinds) - 2 + summary["capped_events"] == 9000
    assert summary["capped_events"] > 5000
    # what is there is the start of the run, in order
    assert kinds[:-2] == (["export", "import", "release"] * 3000)[:len(kinds) - 2]
    # and the report says the log is not the whole run
    page = r.log_path.with_suffix(".html")
    p = subprocess.run([SYSTEM_PYTHON, str(REPORT), str(r.log_path), "--html", str(page)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    note = (f"log reached DLSHIM_LOG_MAX_SIZE (200.0 KiB): {summary['capped_events']} later "
            "events were not written")
    assert note in p.stdout and note in page.read_text()


def test_a_log_file_under_its_max_size_is_whole(dlshim):
    r = dlshim.consumer("cycles", "100", env={"DLSHIM_LOG_MAX_SIZE": "1M"})
    assert r.rc == 0
    assert [e["event"] for e in r.events] == ["export", "import", "release"] * 100 + ["summary"]
    assert r.events[-1]["capped_events"] == 0


def test_the_max_size_counts_what_the_file_held(dlshim, tmp_path):
    log = tmp_path / "kept.jsonl"
    log.write_text('{"event":"old"}\n' * 10000)  # 160 KB a previous run wrote
    r = dlshim.consumer("cycles", "100", env={"DLSHIM_LOG": str(log), "DLSHIM_LOG_APPEND": "1",
                                                "DLSHIM_LOG_MAX_SIZE": "200K"})
    assert r.rc == 0
    assert os.path.getsize(log) <= 200 * 1024
    lines = log.read_text().splitlines()
    assert lines[:10000] == ['{"event":"old"}'] * 10000
    assert '"event":"log_full"' in lines[-2] and '"capped_events":' in lines[-1]


def run_dlclose(log, args=(), env=None, before=()):
    """consumer dlclose ARGS: the shim dlopen'd (not preloaded), handoffs,
    dlclose, a pause ("closed"), then the ending ARGS names; its log's
    events.  `before`: a command line the consumer runs under (strace)."""
    e = base_env()
    e.pop("LD_PRELOAD", None)
    e.update({"DLSHIM_FORMAT": "jsonl", "DLSHIM_LOG": str(log), "DLSHIM_SUMMARY": "1"})
    e.update(env or {})
    proc = subprocess.Popen([*before, str(CONSUMER), "dlclose", str(LIB), *args], env=e,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "closed"
    proc.stdin.close()
    proc.stdout.read()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    return parse_jsonl(log.read_text(), str(log))


def test_dlclose_leaves_the_library_and_its_log_in_place(tmp_path):
    # The shim opened with dlopen (not preloaded), a handoff, dlclose, then
    # _exit.  The modules it patched still call into it (_exit here), so
    # dlclose must not unmap it (it did, and the program died of SIGSEGV at
    # _exit); what the buffer held is written at _exit, as when preloaded.
    events = run_dlclose(tmp_path / "events.jsonl")
    assert [x["event"] for x in events] == ["export", "import", "summary"]
    assert events[-1]["shares"] == 1


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def test_a_log_named_zst_is_written_compressed(dlshim, tmp_path):
    log = tmp_path / "run.jsonl.zst"
    r = dlshim.consumer("cycles", "3000", env={"DLSHIM_LOG": str(log)})
    assert r.rc == 0 and r.stderr == ""
    data = log.read_bytes()
    assert data.startswith(ZSTD_MAGIC)
    events = zst_events(log)
    assert [e["event"] for e in events] == ["export", "import", "release"] * 3000 + ["summary"]
    assert events[-1]["dropped_events"] == 0
    assert len(data) / 9000 < 30  # bytes per event on disk (plain: ~190 here)
    # and the report reads it as it reads a plain log
    p = subprocess.run([SYSTEM_PYTHON, str(REPORT), str(log)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "3000 shares" in p.stdout


def test_a_compressed_log_keeps_what_a_fault_held(tmp_path):
    if "asan" in PRELOAD_FIRST or "tsan" in PRELOAD_FIRST:
        pytest.skip("the sanitizer's own SIGSEGV handler is installed first: the shim's is not")
    held = Held(tmp_path, 3, "segv", name="run.jsonl.zst")
    assert held.events() == []
    held.go_on()
    assert held.finish() == -11
    assert [e["event"] for e in held.events()] == ["export", "import", "release"] * 3 + ["summary"]


def test_a_compressed_log_of_a_parent_and_its_child(dlshim, tmp_path):
    log = tmp_path / "run.jsonl.zst"
    r = dlshim.consumer("fork_cycles", "20", env={"DLSHIM_LOG": str(log)})
    assert r.rc == 0
    events = zst_events(log)  # frames of both processes, appended to one file
    assert len({e["pid"] for e in events}) == 2
    assert len([e for e in events if e["event"] == "export"]) == 60
    assert len([e for e in events if e["event"] == "summary"]) == 2


def test_a_compressed_log_stops_at_its_max_size(dlshim, tmp_path):
    log = tmp_path / "run.jsonl.zst"
    r = dlshim.consumer("cycles", "3000", env={"DLSHIM_LOG": str(log),
                                               "DLSHIM_LOG_MAX_SIZE": "200K"})
    assert r.rc == 0
    # the cap counts the bytes before compression: the file is far under it
    assert os.path.getsize(log) <= 200 * 1024
    events = zst_events(log)
    assert [e["event"] for e in events[-2:]] == ["log_full", "summary"]
    assert len(events) - 2 + events[-1]["capped_events"] == 9000


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.zst"])
def test_threads_at_the_cap_count_every_line(dlshim, tmp_path, name):
    # Threads race to the cap: every event is in the file or counted, once.
    log = tmp_path / name
    r = dlshim.consumer("threads", "500", env={"DLSHIM_LOG": str(log),
                                               "DLSHIM_LOG_MAX_SIZE": "300K"})
    assert r.rc == 0
    assert os.path.getsize(log) <= 300 * 1024
    events = zst_events(log) if name.endswith(".zst") else parse_jsonl(log.read_text(), str(log))
    kinds = [e["event"] for e in events]
    assert kinds.count("log_full") == 1 and kinds[-2:] == ["log_full", "summary"]
    s = events[-1]
    written = len(kinds) - 2
    assert s["dropped_events"] == 0 and s["capped_events"] > 0
    assert written + s["capped_events"] == 3 * s["shares"]  # export, import, release each
