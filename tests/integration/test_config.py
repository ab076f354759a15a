"""Configuration: every variable's effect, bad values and the log file."""
import os
import re
import stat
import subprocess

from conftest import CONSUMER, LIB, ROOT, parse_jsonl


def option_names():
    text = (ROOT / "shim" / "base" / "options.def").read_text()
    return ["DLSHIM_" + n for n in re.findall(r"^DS_OPTION\(\w+, (\w+),", text, re.M)]


def test_disable_loads_but_does_nothing(dlshim):
    bare = dlshim.consumer("clean", shim=False)
    r = dlshim.consumer("clean", env={"DLSHIM_DISABLE": "1"})
    assert r.rc == 0 and r.stdout == bare.stdout
    assert r.events == [] and r.diagnostics() == []


def test_silent_by_default_without_exchanges(dlshim):
    """A shell pipeline that touches no tensor prints nothing (it printed one
    summary per process); asked for, each of its processes writes one."""
    pipeline = ["sh", "-c", "ls / | cat >/dev/null"]
    r = dlshim.run(pipeline, log=False, env={"DLSHIM_LOG": "stderr"})
    assert r.rc == 0 and r.stderr == ""
    r = dlshim.run(pipeline)
    assert r.rc == 0 and r.events == []
    r = dlshim.run(pipeline, env={"DLSHIM_SUMMARY": "1"})
    assert len(r.events) >= 2 and {e["event"] for e in r.events} == {"summary"}
    assert len({e["pid"] for e in r.events}) == len(r.events)  # one per process
    r = dlshim.run(["/bin/true"], log=False, env={"DLSHIM_SUMMARY": "0"})
    assert r.rc == 0 and r.stderr == ""


def test_a_process_with_a_diagnostic_still_summarises(dlshim):
    r = dlshim.run(["/bin/true"], env={"DLSHIM_ON_ERROR": "never"})
    assert [e["event"] for e in r.events] == ["summary"]
    assert any("DLSHIM_ON_ERROR" in l for l in r.diagnostics())


def test_events_filter(dlshim):
    r = dlshim.consumer("clean", env={"DLSHIM_EVENTS": "import,summary"})
    assert [e["event"] for e in r.events] == ["import", "summary"]


def test_summary_off(dlshim):
    r = dlshim.consumer("clean", env={"DLSHIM_SUMMARY": "off"})
    assert r.of("summary") == [] and len(r.of("export")) == 1


def test_log_off(dlshim):
    r = dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": "off"})
    assert r.rc == 0 and r.stderr == ""


def test_log_to_stderr_in_jsonl(dlshim):
    r = dlshim.consumer("clean", log=False)
    events = parse_jsonl(r.stderr, "stderr")
    assert [e["event"] for e in events] == ["export", "import", "release", "summary"]


def test_bad_values_warn_once_and_keep_defaults(dlshim):
    env = {"DLSHIM_ON_ERROR": "explode", "DLSHIM_SUMMARY": "maybe",
           "DLSHIM_EXITCODE": "lots", "DLSHIM_BACKTRACE": "-1", "DLSHIM_NO_SUCH_THING": "1"}
    r = dlshim.consumer("import_after_release", env=env)
    diags = r.diagnostics()
    for name in env:
        assert len([d for d in diags if name in d]) == 1, name
    assert r.rc == 0                      # exitcode stayed unset
    assert len(r.violations()) == 1       # on_error stayed warn
    assert "backtrace" not in r.violations()[0]
    assert len(r.of("summary")) == 1      # summary stayed on


def test_messages_name_what_is_wrong(dlshim, tmp_path):
    r = dlshim.consumer("clean", log=False, env={"DLSHIM_HOOKS": "python,cudaa",
                                                  "DLSHIM_PYSTACK": "99"})
    [hooks] = [d for d in r.diagnostics() if "DLSHIM_HOOKS" in d]
    assert "not valid: cudaa is not one (expected a comma list of all, default, python" in hooks
    [pystack] = [d for d in r.diagnostics() if "DLSHIM_PYSTACK" in d]
    assert "(expected an integer from 0 to 16);" in pystack  # no K/M/G for 0 to 16
    [size] = [d for d in dlshim.consumer("clean", env={"DLSHIM_LOG_BUFFER": "x"}).diagnostics()]
    assert "K/M/G suffixes allowed" in size


def test_an_unknown_escape_in_a_log_path_falls_back_to_stderr(dlshim, tmp_path):
    r = dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": str(tmp_path / "x-%q.jsonl")})
    assert r.rc == 0 and list(tmp_path.iterdir()) == []
    assert "dlshim: DLSHIM_LOG: %q in the path is not known (%p: the process id, %r: the rank, " \
           "%%: a %)" in r.diagnostics()
    assert "events go to stderr instead" in r.stderr
    assert len(parse_jsonl("\n".join(l for l in r.stderr.splitlines() if l.startswith("{")))) == 4


def test_values_of_any_length_and_bytes(dlshim):
    env = {"DLSHIM_FORMAT": "x" * 100000, "DLSHIM_EVENTS": "import,\x01\x7f\u00e9"}
    r = dlshim.consumer("clean", env={**env, "DLSHIM_FORMAT": "jsonl"})
    assert r.rc == 0 and len(r.of("export")) == 1  # bad EVENTS fell back to default
    r = dlshim.consumer("clean", log=False, env=env)
    assert r.rc == 0
    assert all(len(d) < 1024 for d in r.diagnostics())


def test_int_suffixes(dlshim):
    r = dlshim.consumer("clean", env={"DLSHIM_MAX_RECORDS": "2K"})
    assert r.diagnostics() == [] and r.summary["shares"] == 1


def test_verbose_dumps_every_option(dlshim):
    r = dlshim.consumer("clean", env={"DLSHIM_VERBOSE": "1"})
    diags = "\n".join(r.diagnostics())
    for name in option_names():
        assert name in diags


def test_log_path_pid_and_mode(dlshim, tmp_path):
    pattern = tmp_path / "run-%p.jsonl"
    r = dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": str(pattern)})
    [path] = list(tmp_path.glob("run-*.jsonl"))
    events = parse_jsonl(path.read_text())
    assert path.name == f"run-{events[0]['pid']}.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert r.stderr == ""


def summaries(path):
    return [e for e in parse_jsonl(path.read_text()) if e["event"] == "summary"]


def test_each_run_starts_its_log_afresh(dlshim, tmp_path):
    path = tmp_path / "shared.jsonl"
    for _ in range(2):
        dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": str(path)})
    assert len(summaries(path)) == 1
    dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": str(path), "DLSHIM_LOG_APPEND": "1"})
    assert len(summaries(path)) == 2


def test_the_processes_of_one_run_share_its_log(dlshim, tmp_path):
    path = tmp_path / "shared.jsonl"
    path.write_text('{"event":"summary","pid":1}\n')  # yesterday's run
    twice = f"{CONSUMER} clean && {CONSUMER} clean"
    r = dlshim.run(["sh", "-c", twice], log=False, env={"DLSHIM_LOG": str(path)})
    assert r.rc == 0
    assert len({e["pid"] for e in summaries(path)}) == 2 and len(summaries(path)) == 2


def test_a_rank_log_of_a_previous_run_is_started_afresh(dlshim, tmp_path):
    """Named by rank, each run's processes find their rank's file: one
    written before the run began is yesterday's, one written since is
    theirs."""
    old = tmp_path / "rank-7.jsonl"
    old.write_text('{"event":"summary","pid":1}\n')
    os.utime(old, (1_000_000_000, 1_000_000_000))
    twice = f"{CONSUMER} clean && {CONSUMER} clean"
    r = dlshim.run(["sh", "-c", twice], log=False,
                   env={"DLSHIM_LOG": str(tmp_path / "rank-%r.jsonl"), "RANK": "7"})
    assert r.rc == 0
    assert [e["pid"] != 1 for e in summaries(old)] == [True, True]


def test_the_run_is_named_for_the_processes_it_starts(dlshim):
    r = dlshim.run(["sh", "-c", "echo $DLSHIM_RUN"], log=False, env={"DLSHIM_LOG": "off"})
    assert int(r.stdout) > 1_600_000_000 * 10**9
    r = dlshim.run(["sh", "-c", "echo $DLSHIM_RUN"], log=False,
                   env={"DLSHIM_LOG": "off", "DLSHIM_RUN": "12345"})
    assert r.stdout.strip() == "12345"


def test_log_symlink_is_not_followed(dlshim, tmp_path):
    target = tmp_path / "victim"
    target.write_text("")
    link = tmp_path / "log.jsonl"
    link.symlink_to(target)
    r = dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": str(link)})
    assert target.read_text() == ""
    assert len([d for d in r.diagnostics() if str(link) in d]) == 1
    # Fell back to stderr.
    events = r.stderr_events()
    assert len(events) == 4


def test_log_path_too_long_falls_back(dlshim, tmp_path):
    long_path = str(tmp_path) + "/" + "%p" * 3000
    r = dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": long_path})
    assert r.rc == 0
    assert len(r.diagnostics()) == 1
    assert len(r.stderr_events()) == 4


def test_text_format_has_one_line_per_event(dlshim, tmp_path):
    path = tmp_path / "text.log"
    dlshim.consumer("clean", log=False, env={"DLSHIM_FORMAT": "text", "DLSHIM_LOG": str(path)})
    lines = path.read_text().splitlines()
    assert all(l.startswith("dlshim: ") for l in lines)
    names = [l.split()[3] for l in lines[:4]]
    assert names == ["export", "import", "release", "summary"]


def test_only_the_public_api_is_exported():
    out = subprocess.run(["nm", "-D", "--defined-only", str(LIB)], capture_output=True,
                         text=True, check=True).stdout
    names = sorted(l.split()[-1] for l in out.splitlines() if l.strip())
    # The public API of include/dlshim.h, the Vulkan layer's entry point (its
    # manifest names it), the start of a shim loaded late (dlshim.attach()),
    # and the functions interposed by symbol.
    assert names == ["dlclose", "dlopen", "dlshim_attach", "dlshim_export", "dlshim_export_versioned",
                     "dlshim_get_status", "dlshim_import", "dlshim_import_versioned",
                     "dlshim_set_test", "dlshim_vulkan_negotiate", "dlsym"]
