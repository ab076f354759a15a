"""The log buffer (DLSHIM_LOG_BUFFER): lines to a log file are written in
blocks, and at once where it matters: after a violation, at _exit, before a
fork.  The program pauses ("ready" on stdout, waiting for a line on stdin) so
that the log and the write count of a live process can be read."""
import os
import subprocess

from conftest import CONSUMER, WRAPPER, base_env, parse_jsonl, preload_value


class Held:
    """consumer hold N THEN, paused at its first "ready"."""

    def __init__(self, tmp_path, n, then, env=None):
        self.log = tmp_path / "events.jsonl"
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
        return parse_jsonl(self.log.read_text(), str(self.log)) if self.log.exists() else []

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
