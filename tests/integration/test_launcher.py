"""bin/dlshim: flags become variables, the exit status is the program's."""
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import CONSUMER, LAUNCHER, LIB, PRELOAD_FIRST, ROOT, parse_jsonl

# ThreadSanitizer's runtime crashes /bin/sh when preloaded into it, and the
# launcher is a shell script: its tests run in the plain and ASan suites.
pytestmark = pytest.mark.skipif("libtsan" in PRELOAD_FIRST,
                                reason="libtsan cannot be preloaded into /bin/sh")


def launch(dlshim, *args, env=None):
    e = {"LD_PRELOAD": PRELOAD_FIRST} if PRELOAD_FIRST else {}
    e.update(env or {})
    return dlshim.run([LAUNCHER, "--lib", LIB, *args], shim=False, env=e)


def test_flags_reach_the_shim(dlshim, tmp_path):
    log = tmp_path / "l-%p.jsonl"
    r = launch(dlshim, "--format", "jsonl", "--log", log, "--events=export,summary",
               "--trace", tmp_path / "t-%p.json", "--", CONSUMER, "clean")
    assert r.rc == 0
    [path] = list(tmp_path.glob("l-*.jsonl"))
    assert [e["event"] for e in parse_jsonl(path.read_text())] == ["export", "summary"]
    [trace] = list(tmp_path.glob("t-*.json"))
    assert trace.name == path.name.replace("l-", "t-").replace(".jsonl", ".json")
    assert [x["ph"] for x in json.loads(trace.read_text()) if x["ph"] != "M"] == ["b", "X", "s"]


def test_flags_override_environment(dlshim, tmp_path):
    log = tmp_path / "x.jsonl"
    r = launch(dlshim, "--format", "jsonl", "--log", log, CONSUMER, "clean",
               env={"DLSHIM_FORMAT": "text", "DLSHIM_LOG": "stderr"})
    assert r.rc == 0 and r.stderr == ""
    assert len(parse_jsonl(log.read_text())) == 4


def test_exit_status_is_the_programs(dlshim):
    assert launch(dlshim, "--log", "off", "sh", "-c", "exit 7").rc == 7


def test_exitcode_and_protect(dlshim):
    r = launch(dlshim, "--log", "off", "--exitcode", "5", "--on-error", "protect",
               CONSUMER, "double_release")
    assert r.rc == 5


def test_backtrace_and_no_summary(dlshim, tmp_path):
    log = tmp_path / "b.jsonl"
    r = launch(dlshim, "--format", "jsonl", "--log", log, "--backtrace", "3", "--no-summary",
               "--on-error", "protect", CONSUMER, "double_release")
    events = parse_jsonl(log.read_text())
    [v] = [e for e in events if e["event"] == "violation"]
    assert 1 <= len(v["backtrace"]) <= 3
    assert not [e for e in events if e["event"] == "summary"]
    assert r.rc == 0


def test_preload_order(dlshim):
    other = "/lib/x86_64-linux-gnu/libm.so.6"
    r = launch(dlshim, "--log", "off", "printenv", "LD_PRELOAD",
               env={"LD_PRELOAD": " ".join(p for p in (PRELOAD_FIRST, other) if p)})
    parts = r.stdout.split()
    expected = [p for p in (PRELOAD_FIRST, str(LIB), other) if p]
    assert parts == expected  # a sanitizer runtime stays first; the shim comes next


def test_usage_errors(dlshim):
    assert launch(dlshim, "--help").rc == 0
    assert launch(dlshim, "--no-such-flag", "true").rc == 2
    r = launch(dlshim)
    assert r.rc == 2 and r.stderr == ("dlshim: no program given: dlshim [OPTIONS] [--] PROGRAM "
                                      "[ARGS...] (see --help)\n")
    assert launch(dlshim, "--log").rc == 2


def test_help_fits_a_terminal_and_names_on_off_flags(dlshim):
    lines = launch(dlshim, "--help").stdout.splitlines()
    assert max(len(l) for l in lines) <= 79
    assert "  --[no-]summary         the summary event at exit: 1 always, 0 never; unset:" in lines
    # a flag too long for the margin: its description starts on the next line
    at = lines.index("  --on-error warn|protect|abort")
    assert lines[at + 1].startswith(" " * 25 + "what a violation does")


@pytest.mark.parametrize("layout", ["bin/dlshim:build/libdlshim.so",
                                    "bin/dlshim:lib/dlshim/libdlshim.so"])
def test_finds_the_library_next_to_itself(dlshim, tmp_path, layout):
    script_rel, lib_rel = layout.split(":")
    script, lib = tmp_path / script_rel, tmp_path / lib_rel
    script.parent.mkdir(parents=True)
    lib.parent.mkdir(parents=True)
    shutil.copy(LAUNCHER, script)
    shutil.copy(LIB, lib)
    e = {"LD_PRELOAD": PRELOAD_FIRST} if PRELOAD_FIRST else {}
    r = dlshim.run([script, "--format", "jsonl", "--log", "stderr", CONSUMER, "clean"],
                   shim=False, env=e)
    assert len(parse_jsonl(r.stderr)) == 4


def options():
    """(NAME, TYPE) of every option, read from shim/base/options.def."""
    import re
    text = (ROOT / "shim" / "base" / "options.def").read_text()
    return re.findall(r"^DS_OPTION\(\w+, (\w+), (\w+),", text, re.M)


def test_every_option_is_a_flag(dlshim, tmp_path):
    """The launcher's flags come from the option table: each DLSHIM_* option
    is --name VALUE (on/off ones also --name and --no-name). Values are paths
    in tmp_path, as the file options (--trace) write where they point."""
    one, two = str(tmp_path / "one"), str(tmp_path / "x,y")
    found = options()
    assert len(found) >= 17
    for name, kind in found:
        flag = "--" + name.lower().replace("_", "-")
        var = "DLSHIM_" + name
        if kind == "BOOL":
            cases = [([flag], "1"), (["--no-" + flag[2:]], "0"), ([flag + "=0"], "0")]
        elif name == "RUN":  # the shim names a run itself where the value is not a time
            cases = [([flag, "12345"], "12345"), ([flag + "=678"], "678")]
        else:
            cases = [([flag, one], one), ([flag + "=" + two], two)]
        for args, want in cases:
            r = launch(dlshim, "--log", "off", *args, "printenv", var)
            assert r.rc == 0 and r.stdout.strip() == want, (args, r.stdout, r.stderr)
    assert launch(dlshim, "--no-log", "true").rc == 2  # not an on/off option


# ---- the launchers change nothing but DLSHIM_* and LD_PRELOAD -----------------
# Each is compared with the same program preloaded by hand, started from the
# same parent state: SIGINT ignored and SIGUSR1 blocked (what a job started
# in the background of a script might get), SIGPIPE and SIGXFSZ at their
# defaults (pytest's own Python ignores them).
def python_module():
    return [sys.executable, "-m", "dlshim"]


LAUNCHERS = {"bin/dlshim": lambda: [str(LAUNCHER)], "python -m dlshim": python_module}


def parent_state(ignore_pipe):
    def set_up():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN if ignore_pipe else signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    return set_up


def start(args, launcher, ignore_pipe=False, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLSHIM_")}
    env["PYTHONPATH"] = str(ROOT / "python")
    env["DLSHIM_LOG"] = "off"
    preload = " ".join(p for p in (PRELOAD_FIRST, str(LIB)) if p)
    if launcher:
        env["LD_PRELOAD"] = PRELOAD_FIRST
        args = LAUNCHERS[launcher]() + ["--lib", str(LIB), "--"] + args
    else:
        env["LD_PRELOAD"] = preload
    return subprocess.Popen(args, env=env, preexec_fn=parent_state(ignore_pipe),
                            restore_signals=False, stdin=subprocess.DEVNULL, **kw)


def seen(args, launcher, ignore_pipe=False):
    p = start(args, launcher, ignore_pipe, stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=60)
    return p.returncode, out


def signal_state(out):
    return [l for l in out.splitlines() if l.startswith(("SigIgn", "SigBlk"))]


def outside_env(out):
    return sorted(l for l in out.split("\0")
                  if l and not l.startswith(("DLSHIM_", "LD_PRELOAD=")))


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_launchers_change_no_signal_state_or_environment(launcher):
    status = ["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"]
    rc, direct = seen(status, None)
    assert rc == 0 and len(signal_state(direct)) == 2
    assert signal_state(seen(status, launcher)[1]) == signal_state(direct)
    env_direct, env_launched = seen(["env", "-0"], None)[1], seen(["env", "-0"], launcher)[1]
    assert outside_env(env_launched) == outside_env(env_direct)


def test_the_shell_launcher_keeps_an_ignored_sigpipe():
    """python -m dlshim cannot: Python ignored SIGPIPE before it ran, and
    what the parent had is lost (README, "Launchers")."""
    status = ["grep", "-E", "^SigIgn", "/proc/self/status"]
    _, direct = seen(status, None, ignore_pipe=True)
    assert seen(status, "bin/dlshim", ignore_pipe=True)[1] == direct


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("program, status", [
    (["yes"], -signal.SIGPIPE),                  # `dlshim -- yes | head -1`
    (["sh", "-c", "kill -TERM $$"], -signal.SIGTERM),
    (["sh", "-c", "exit 3"], 3),
])
def test_exit_status_and_death_by_signal_are_the_programs(launcher, program, status):
    for who in (None, launcher):
        p = start(program, who, stdout=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()  # what `head -1` does after its line
        assert p.wait(timeout=60) == status, who
