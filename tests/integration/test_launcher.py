"""bin/dlshim: flags become variables, the exit status is the program's."""
import json
import shutil

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
    assert launch(dlshim).rc == 2
    assert launch(dlshim, "--log").rc == 2


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
        else:
            cases = [([flag, one], one), ([flag + "=" + two], two)]
        for args, want in cases:
            r = launch(dlshim, "--log", "off", *args, "printenv", var)
            assert r.rc == 0 and r.stdout.strip() == want, (args, r.stdout, r.stderr)
    assert launch(dlshim, "--no-log", "true").rc == 2  # not an on/off option
