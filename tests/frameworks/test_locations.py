"""Python source lines in events (`py`, `py_stack`), the rank of a
distributed job (`rank`, `%r`), torchrun with two ranks and dlshim-report
merging their logs (issue 25)."""
import json
import re
import subprocess
import sys

import pytest

from conftest import FRAMEWORK_PROGS, LIB, ROOT, VENV_PYTHON, between, parse_jsonl

PROG = FRAMEWORK_PROGS / "locations.py"
LINES = {m.group(1): n for n, text in enumerate(PROG.read_text().splitlines(), 1)
         for m in [re.search(r"# line: (\w+)", text)] if m}


def at(name, function):
    return f"{PROG}:{LINES[name]} in {function}"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from conftest import Runner
    r = Runner(tmp_path_factory.mktemp("locations")).framework(
        "locations.py", env={"DLSHIM_ON_ERROR": "protect", "DLSHIM_PYSTACK": "2",
                             "DLSHIM_PYSTACK_EXPORTS": "1"})
    assert r.rc == 0, r.stderr[-3000:]
    return r


def test_every_handoff_names_the_users_line(run):
    [exp, imp, rel] = between(run.events, "numpy", "torch")
    assert exp["py"] == imp["py"] == at("numpy_takes", "numpy_takes_torch")
    assert rel["py"] == at("numpy_lets_go", "numpy_takes_torch")


def test_frames_inside_a_framework_are_skipped(run):
    """torch.from_dlpack is Python code in site-packages/torch: the line
    named is the caller's."""
    imports = [e for e in between(run.events, "torch", "double") if e["event"] == "import"]
    assert [e["py"] for e in imports] == [at("torch_takes", "torch_takes_numpy")]


def test_a_violation_names_its_line_and_stack(run):
    [v] = run.violations("double_release")
    assert v["py"] == at("twice", "release_twice")
    assert v["py_stack"] == [at("twice", "release_twice"), at("outer", "outer")]
    [exp] = [e for e in between(run.events, "double", "end") if e["event"] == "export"]
    # The stack is every frame, the framework's too; `py` is the user's.
    assert exp["py"] == at("exported", "release_twice")
    assert re.fullmatch(r".*/site-packages/torch/_tensor\.py:\d+ in Tensor\.__dlpack__",
                        exp["py_stack"][0])
    assert exp["py_stack"][1] == at("exported", "release_twice")


def test_py_can_be_turned_off(dlshim):
    r = dlshim.framework("locations.py", env={"DLSHIM_ON_ERROR": "protect", "DLSHIM_PY": "0",
                                              "DLSHIM_PYSTACK": "4"})
    assert r.rc == 0 and r.of("export")
    assert not [e for e in r.events if "py" in e or "py_stack" in e]


def test_text_shows_the_line_first(dlshim):
    r = dlshim.framework("locations.py", env={"DLSHIM_ON_ERROR": "protect",
                                              "DLSHIM_FORMAT": "text"})
    [line] = [l for l in r.stderr.splitlines() if " violation " in l]
    assert line.split()[4] == f'py="{at("twice", "release_twice")}"'.split()[0]


@pytest.mark.parametrize("variable", ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                      "SLURM_PROCID"])
def test_the_rank_names_the_log_and_is_in_every_event(dlshim, tmp_path, variable):
    r = dlshim.framework("locations.py", env={"DLSHIM_ON_ERROR": "protect", variable: "3",
                                              "DLSHIM_LOG": str(tmp_path / "ev-%r.jsonl")})
    assert r.rc == 0
    events = parse_jsonl((tmp_path / "ev-3.jsonl").read_text())
    assert events and all(e["rank"] == 3 for e in events)
    assert events[-1]["event"] == "summary"


def test_without_a_rank_percent_r_is_the_pid(dlshim, tmp_path):
    r = dlshim.framework("locations.py", env={"DLSHIM_ON_ERROR": "protect",
                                              "DLSHIM_LOG": str(tmp_path / "ev-%r.jsonl")})
    assert r.rc == 0
    [log] = tmp_path.glob("ev-*.jsonl")
    events = parse_jsonl(log.read_text())
    assert log.name == f"ev-{events[0]['pid']}.jsonl" and "rank" not in events[0]


def test_torchrun_two_ranks_one_log_each_and_the_report_merges_them(tmp_path):
    """torchrun (gloo, CPU) of progs/ranks.py: rank 1 alone releases a
    tensor twice."""
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(LIB), "DLSHIM_FORMAT": "jsonl",
           "DLSHIM_ON_ERROR": "protect", "DLSHIM_LOG": str(tmp_path / "ev-%r.jsonl"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([str(VENV_PYTHON), "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--standalone", str(FRAMEWORK_PROGS / "ranks.py")],
                       env=env, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    logs = {n: parse_jsonl((tmp_path / f"ev-{n}.jsonl").read_text()) for n in (0, 1)}
    for rank, events in logs.items():
        assert all(e["rank"] == rank for e in events)
        assert len([e for e in events if e["event"] == "import"]) >= 2
    assert [e["kind"] for e in logs[0] if e["event"] == "violation"] == []
    [v] = [e for e in logs[1] if e["event"] == "violation"]
    assert v["kind"] == "double_release" and v["py"].startswith(f"{FRAMEWORK_PROGS}/ranks.py:")
    out = tmp_path / "report.json"
    rep = subprocess.run([sys.executable, str(ROOT / "bin" / "dlshim-report"), "--quiet",
                          "--json", str(out), "--html", str(tmp_path / "report.html"),
                          *map(str, sorted(tmp_path.glob("ev-*.jsonl")))],
                         capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    report = json.loads(out.read_text())
    assert [(v["rank"], v["kind"], v["count"]) for v in report["violations_per_rank"]] == \
        [(1, "double_release", 1)]
    ranks = sorted(p["rank"] for p in report["processes"].values() if p["rank"] is not None)
    assert ranks == [0, 1]
    page = (tmp_path / "report.html").read_text()
    assert "<h3>rank 0 (pid" in page and "<h3>rank 1 (pid" in page
    assert f'href="file://{FRAMEWORK_PROGS}/ranks.py"' in page
