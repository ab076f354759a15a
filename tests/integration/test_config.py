"""Configuration: every variable's effect, bad values and the log file."""
import re
import stat
import subprocess

from conftest import LIB, ROOT, parse_jsonl


def option_names():
    text = (ROOT / "shim" / "base" / "options.def").read_text()
    return ["DLSHIM_" + n for n in re.findall(r"^DS_OPTION\(\w+, (\w+),", text, re.M)]


def test_disable_loads_but_does_nothing(dlshim):
    bare = dlshim.consumer("clean", shim=False)
    r = dlshim.consumer("clean", env={"DLSHIM_DISABLE": "1"})
    assert r.rc == 0 and r.stdout == bare.stdout
    assert r.events == [] and r.diagnostics() == []


def test_silent_by_default_without_exchanges(dlshim):
    r = dlshim.run(["/bin/true"], log=False, env={"DLSHIM_SUMMARY": "0"})
    assert r.rc == 0 and r.stderr == ""


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


def test_log_is_appended_not_truncated(dlshim, tmp_path):
    path = tmp_path / "shared.jsonl"
    for _ in range(2):
        dlshim.consumer("clean", log=False, env={"DLSHIM_LOG": str(path)})
    assert len([e for e in parse_jsonl(path.read_text()) if e["event"] == "summary"]) == 2


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
    # manifest names it), and the functions interposed by symbol.
    assert names == ["dlclose", "dlopen", "dlshim_export", "dlshim_export_versioned",
                     "dlshim_get_status", "dlshim_import", "dlshim_import_versioned",
                     "dlshim_set_test", "dlshim_vulkan_negotiate", "dlsym"]
