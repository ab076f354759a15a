"""Helpers for the integration tests: run a program with or without the shim
and read back its jsonl events.

DLSHIM_TEST_BUILD names the build directory (the sanitizer run uses its own);
DLSHIM_TEST_PRELOAD is put before the shim in LD_PRELOAD (libasan there);
DLSHIM_TEST_WRAPPER runs every compiled test program under a tool
(`make check-valgrind` puts memcheck there)."""
import itertools
import json
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("DLSHIM_TEST_BUILD", ROOT / "build"))
LIB = BUILD / "libdlshim.so"
PRELOAD_FIRST = os.environ.get("DLSHIM_TEST_PRELOAD", "")
WRAPPER = os.environ.get("DLSHIM_TEST_WRAPPER", "").split()
CONSUMER = BUILD / "tests" / "consumer"
LAUNCHER = ROOT / "bin" / "dlshim"
REPORT = ROOT / "bin" / "dlshim-report"
PYTHON_DIR = ROOT / "tests" / "python"
EXT_DIR = BUILD / "tests" / "python"
SIMDEV = BUILD / "simdev"           # the simulated CUDA/HIP runtimes
DEVICE_BIN = BUILD / "tests" / "device"
STRESS_BIN = BUILD / "tests" / "stress"
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: libpython linked into the executable
EMBED = EXT_DIR / "embed"           # the same interpreter through libpython3.x.so
# The venv of `make venv`: current frameworks (tests/requirements.txt) on a
# CPython with a shared libpython.
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
# The machine's other current CPythons (pyenv's, as the machine has them):
# programs that need only the standard library run on each.
PYENV_ROOT = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))


def pyenv_python(minor):
    """The newest pyenv CPython 3.MINOR, or None."""
    found = [p for p in PYENV_ROOT.glob(f"versions/3.{minor}.*/bin/python3")
             if p.parts[-3].split(".")[2].isdigit()]  # not 3.13.0t, free-threaded
    return max(found, key=lambda p: int(p.parts[-3].split(".")[2]), default=None)
FRAMEWORK_PROGS = ROOT / "tests" / "frameworks" / "progs"


def parse_jsonl(text, where="log", torn_tail=False):
    """Every line must be one JSON object with the common fields.  With
    torn_tail, a last line without its newline (a write the end of the
    process cut short, docs/reliability.md) is left out."""
    if torn_tail and text and not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    events = []
    for n, line in enumerate(text.splitlines(), 1):
        ev = json.loads(line)
        assert isinstance(ev, dict), f"{where}:{n}: not an object"
        for field in ("event", "pid", "tid", "t_ns"):
            assert field in ev, f"{where}:{n}: no {field}"
        events.append(ev)
    return events


def assert_same_behaviour(bare, traced):
    """The shim changed nothing the program shows: its exit status and its
    output are the same without it."""
    assert (traced.rc, traced.stdout) == (bare.rc, bare.stdout), (traced.stderr[-2000:])


def between(events, start, end):
    """The events after MARK start and before MARK end (marks left out)."""
    names = [e.get("name") for e in events]
    i, j = names.index(start), names.index(end)
    return [e for e in events[i + 1:j] if e["event"] != "mark"]


class Result:
    def __init__(self, proc, events):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.events = events

    def of(self, name):
        return [e for e in self.events if e["event"] == name]

    def violations(self, kind=None):
        return [e for e in self.of("violation") if kind is None or e["kind"] == kind]

    @property
    def summary(self):
        found = self.of("summary")
        assert len(found) == 1, f"expected one summary, got {len(found)}"
        return found[0]

    def stderr_events(self):
        """The jsonl lines among stderr's (a log that fell back there, or the
        summary of a log that failed), parsed."""
        return parse_jsonl("\n".join(l for l in self.stderr.splitlines() if l.startswith("{")),
                           "stderr")

    def diagnostics(self):
        return [l for l in self.stderr.splitlines() if l.startswith("dlshim:")]


def base_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DLSHIM_") and k != "LD_PRELOAD"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def preload_value():
    return " ".join(p for p in (PRELOAD_FIRST, str(LIB)) if p)


class Runner:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.counter = itertools.count()

    def run(self, args, shim=True, env=None, log=True, timeout=120, torn_tail=False):
        """Runs args; with shim, under LD_PRELOAD with jsonl to a fresh file
        (torn_tail: see parse_jsonl)."""
        e = base_env()
        log_path = self.tmp / f"events-{next(self.counter)}.jsonl"
        if shim:
            e["LD_PRELOAD"] = preload_value()
            e["DLSHIM_FORMAT"] = "jsonl"
            if log:
                e["DLSHIM_LOG"] = str(log_path)
        e.update(env or {})
        args = [str(a) for a in args]
        if WRAPPER and args[0].startswith(str(BUILD / "tests") + "/"):
            args = WRAPPER + args
        proc = subprocess.run(args, env=e, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        events = []
        if shim and log and log_path.exists():
            events = parse_jsonl(log_path.read_text(), str(log_path), torn_tail)
        r = Result(proc, events)
        r.log_path = log_path
        return r

    def consumer(self, *args, **kw):
        return self.run([CONSUMER, *args], **kw)

    def device(self, program, *args, shim=True, env=None):
        """Runs a tests/device program on the simulated device, with every
        event on; .simdev_frees lists the frees that reached the device."""
        frees = self.tmp / f"simdev-{next(self.counter)}.log"
        e = {"LD_LIBRARY_PATH": str(SIMDEV), "SIMDEV_LOG": str(frees), "DLSHIM_EVENTS": "all"}
        e.update(env or {})
        r = self.run([DEVICE_BIN / program, *args], shim=shim, env=e)
        r.simdev_frees = frees.read_text().split() if frees.exists() else []
        return r

    def python(self, script, *args, host=SYSTEM_PYTHON, shim=True, env=None, folder=PYTHON_DIR,
               timeout=300):
        """Runs tests/python/SCRIPT (or folder/SCRIPT) with events and MARK
        lines both on stderr, in the order they happened; .events holds both
        (marks as {"event": "mark", "name": ...})."""
        e = {"TEST_EXT_DIR": str(EXT_DIR), "PYTHONDONTWRITEBYTECODE": "1",
             "DLSHIM_LOG": "stderr"}
        if PRELOAD_FIRST:
            # CPython and torch are not built for LeakSanitizer's exit check,
            # and the sanitized extension needs the runtime without the shim too.
            e["ASAN_OPTIONS"] = "detect_leaks=0"
            if not shim:
                e["LD_PRELOAD"] = PRELOAD_FIRST
        e.update(env or {})
        r = self.run([host, folder / script, *args], shim=shim, log=False, env=e,
                     timeout=timeout)
        stream = []
        for n, line in enumerate(r.stderr.splitlines(), 1):
            if line.startswith("{"):
                stream.extend(parse_jsonl(line, f"stderr:{n}"))
            elif line.startswith("MARK "):
                stream.append({"event": "mark", "name": line[5:]})
        r.events = stream
        return r

    def framework(self, script, *args, **kw):
        """Runs tests/frameworks/progs/SCRIPT with the venv's Python, as
        python() does."""
        return self.python(script, *args, host=VENV_PYTHON, folder=FRAMEWORK_PROGS, **kw)


@pytest.fixture
def dlshim(tmp_path):
    return Runner(tmp_path)


# ---- many threads exchanging at once: tests/python/free_threads.py ----------
FREE_THREADS = PYTHON_DIR / "free_threads.py"
_HANDOFF_EVENT = re.compile(r'\{"event":"(export|import|release)","pid":\d+,"tid":(\d+),'
                            r'"t_ns":\d+,(?:"py":"([^"]*)",)?"tensor":"(\w+)"')


def free_threads_expected():
    """(export, import, release) `py` of each kind of handoff the script runs
    in turn, from the lines it and ctypes_tensor.py tag `# py: TAG`."""
    at = {}
    for script in (FREE_THREADS, PYTHON_DIR / "ctypes_tensor.py"):
        function = None
        for n, text in enumerate(script.read_text().splitlines(), 1):
            if text.startswith("def "):
                function = text[4:text.index("(")]
            if "# py: " in text:
                at[text.split("# py: ")[1]] = f"{script}:{n} in {function}"
    return [(at["numpy handoff"], at["numpy handoff"], at["numpy release"]),
            (at["ctypes export"], at["ctypes to numpy"], at["numpy frees ctypes'"]),
            (at["ctypes export"], at["ctypes import"], at["released without the GIL"])]


def run_free_threads(runner, host, threads, handoffs, env=None):
    """Runs free_threads.py on `host` with its jsonl log in a file, and checks
    every line as it streams by (the log of 10^5 handoffs a thread is too
    large to hold parsed): each thread's events are export, import, release
    of one tensor, of kinds 0, 1, 2 in turn, each naming its tagged line;
    the summary counts every handoff and nothing outstanding or wrong.
    Returns the number of handoff events seen."""
    log = runner.tmp / f"free-threads-{next(runner.counter)}.jsonl"
    e = {"DLSHIM_LOG": str(log), "PYTHONDONTWRITEBYTECODE": "1"}
    if PRELOAD_FIRST:
        e["ASAN_OPTIONS"] = "detect_leaks=0"
    e.update(env or {})
    r = runner.run([host, FREE_THREADS, str(threads), str(handoffs)], log=False, env=e,
                   timeout=1800)
    assert r.rc == 0, r.stderr[-3000:]
    tids = r.stdout.split("tids ")[1].split()
    assert len(set(tids)) == threads
    expected = free_threads_expected()
    seen = {tid: 0 for tid in tids}
    tensor = {}
    wrong, summaries = [], []
    with open(log) as f:
        for n, line in enumerate(f, 1):
            m = _HANDOFF_EVENT.match(line)
            if not m:
                if line.startswith('{"event":"summary"'):
                    summaries.append(json.loads(line))
                else:
                    wrong.append(f"{n}: unexpected {line[:300]}")
                continue
            event, tid, py, t = m.groups()
            if tid not in seen:
                wrong.append(f"{n}: thread {tid} is no exchanging thread")
                continue
            i = seen[tid]
            seen[tid] += 1
            step = i % 3
            want = (("export", "import", "release")[step], expected[(i // 3) % 3][step])
            if step == 0:
                tensor[tid] = t
            if (event, py) != want or t != tensor[tid]:
                wrong.append(f"{n}: handoff {i // 3} of thread {tid}: {(event, py, t)}, "
                             f"expected {want + (tensor[tid],)}")
            if len(wrong) > 20:
                break
    assert not wrong, "\n".join(wrong[:20])
    assert seen == {tid: 3 * handoffs for tid in tids}
    [s] = summaries
    assert (s["shares"], s["outstanding"], s["violations"]) == (threads * handoffs, 0, {})
    return sum(seen.values())
