"""The pytest plugin (python/dlshim/pytest.py) and the pip package (issue
25): run through the checkout's launcher with the project's venv, then
installed with `pip install .` into a clean venv.  tests/package/cases holds
the tests the plugin watches: one clean, one releasing a tensor twice (under
DLSHIM_ON_ERROR=protect), one keeping a share."""
import os
import shutil
import subprocess

import pytest

from conftest import LIB, ROOT, VENV_PYTHON, parse_jsonl

CASES = ROOT / "tests" / "package" / "cases"
HANDOFFS = CASES / "handoffs.py"
TWICE = next(n for n, l in enumerate(HANDOFFS.read_text().splitlines(), 1)
             if "deleter(ctypes.cast" in l)
DOUBLE_AT = f"{HANDOFFS}:{TWICE} in consume"


def env_with(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DLSHIM_", "PYTEST_"))}
    env.pop("LD_PRELOAD", None)
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "DLSHIM_FORMAT": "jsonl",
                "DLSHIM_ON_ERROR": "protect"}, **extra)
    return env


def run(args, env, cwd=CASES, timeout=300):
    return subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def pytest_args(python, *more):
    return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", CASES, *more,
            CASES / "test_cases.py"]


def launcher():
    return [ROOT / "bin" / "dlshim", "--lib", LIB, "--"]


def test_strict_fails_the_test_that_released_twice_naming_it_and_its_line(tmp_path):
    log = tmp_path / "ev.jsonl"
    r = run(launcher() + pytest_args(VENV_PYTHON, "--dlshim-strict"),
            env_with(DLSHIM_LOG=str(log)))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 2 passed" in r.stdout
    assert ("dlshim: 1 DLPack violation(s) in call of test_cases.py::test_double_release: "
            f"double_release at {DOUBLE_AT}") in r.stdout
    assert "FAILED test_cases.py::test_double_release" in r.stdout
    events = parse_jsonl(log.read_text())
    [v] = [e for e in events if e["event"] == "violation"]
    assert (v["test"], v["py"]) == ("test_cases.py::test_double_release", DOUBLE_AT)
    tests = {e.get("test") for e in events if e["event"] in ("export", "import", "release")}
    assert tests == {"test_cases.py::test_clean", "test_cases.py::test_double_release",
                     "test_cases.py::test_keeps_a_share"}


def test_without_strict_the_findings_are_listed_and_the_tests_pass(tmp_path):
    r = run(launcher() + pytest_args(VENV_PYTHON), env_with(DLSHIM_LOG=str(tmp_path / "ev")))
    assert r.returncode == 0, r.stdout + r.stderr
    section = r.stdout.split("= dlshim =")[1].splitlines()
    assert f"test_cases.py::test_double_release: 1 violation(s), last double_release at " \
           f"{DOUBLE_AT}" in section
    assert "test_cases.py::test_keeps_a_share: 1 share(s) still outstanding" in section


def test_xdist_workers_log_one_file_each(tmp_path):
    r = run(launcher() + pytest_args(VENV_PYTHON, "-n", "2", "--dlshim-strict"),
            env_with(DLSHIM_LOG=str(tmp_path / "ev.jsonl")))
    assert r.returncode == 1 and "1 failed, 2 passed" in r.stdout, r.stdout + r.stderr
    assert "double_release at " + DOUBLE_AT in r.stdout
    per_worker = {}
    for log in tmp_path.glob("ev.*.jsonl"):
        events = parse_jsonl(log.read_text())
        tests = {e["test"] for e in events if "test" in e}
        if tests:
            per_worker[log.name] = tests
    assert len(per_worker) == 2, per_worker  # both workers ran tests, each in its own file
    assert set().union(*per_worker.values()) == {
        "test_cases.py::test_clean", "test_cases.py::test_double_release",
        "test_cases.py::test_keeps_a_share"}


def test_without_the_preload_the_plugin_says_so_once_and_does_nothing():
    env = env_with(PYTHONPATH=str(ROOT / "python"))
    r = run(pytest_args(VENV_PYTHON, "-p", "dlshim.pytest"), env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("libdlshim.so is not preloaded") == 1


def test_strict_without_the_preload_attaches_the_shim_itself(tmp_path):
    """Plain pytest (an IDE's runner): the plugin attaches the shim at
    configure time, before the tests are collected and their modules
    loaded, so the strict mode fails the bad test as under the launcher."""
    log = tmp_path / "ev.jsonl"
    r = run(pytest_args(VENV_PYTHON, "-p", "dlshim.pytest", "--dlshim-strict"),
            env_with(PYTHONPATH=str(ROOT / "python"), DLSHIM_LOG=str(log)))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 2 passed" in r.stdout
    assert ("dlshim: 1 DLPack violation(s) in call of test_cases.py::test_double_release: "
            f"double_release at {DOUBLE_AT}") in r.stdout
    [v] = [e for e in parse_jsonl(log.read_text()) if e["event"] == "violation"]
    assert (v["test"], v["kind"]) == ("test_cases.py::test_double_release", "double_release")


def test_strict_where_the_shim_cannot_attach_fails_the_run_in_one_line():
    env = env_with(PYTHONPATH=str(ROOT / "python"), DLSHIM_DISABLE="1")
    r = run(pytest_args(VENV_PYTHON, "-p", "dlshim.pytest", "--dlshim-strict"), env)
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, r.stdout + r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("ERROR: dlshim")]
    assert lines == ["ERROR: dlshim: --dlshim-strict needs libdlshim.so preloaded or attached: "
                     "run `dlshim -- pytest ...`"], r.stderr
    assert "passed" not in r.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A clean venv with pytest and setuptools from the pins, then `pip
    install .` (built with that setuptools: nothing else to download)."""
    venv = tmp_path_factory.mktemp("pip") / "venv"
    host = shutil.which("python3")
    subprocess.run([host, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
           "--no-input", "-q"]
    pins = [l.strip() for l in (ROOT / "tests" / "requirements.txt").read_text().splitlines()
            if l.split("==")[0] in ("pytest", "iniconfig", "pluggy", "packaging", "Pygments",
                                    "setuptools")]
    r = subprocess.run(pip + pins, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run(pip + ["--no-build-isolation", str(ROOT)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return venv


def test_pip_installs_a_working_dlshim_command(installed, tmp_path):
    lib = next(installed.glob("lib/python3*/site-packages/dlshim/libdlshim.so"))
    log = tmp_path / "ev.jsonl"
    r = run([installed / "bin" / "dlshim", "--log", log, "--", installed / "bin" / "python",
             HANDOFFS, "double"], env_with())
    assert r.returncode == 0, r.stderr
    events = parse_jsonl(log.read_text())
    assert [e["event"] for e in events] == ["export", "import", "release", "violation",
                                            "summary"]
    assert events[3]["py"] == DOUBLE_AT
    assert lib.is_file()
    # python -m dlshim is the same launcher
    log2 = tmp_path / "ev2.jsonl"
    r = run([installed / "bin" / "python", "-m", "dlshim", "--log", log2, "--",
             installed / "bin" / "python", HANDOFFS], env_with())
    assert r.returncode == 0, r.stderr
    assert [e["event"] for e in parse_jsonl(log2.read_text())] == ["export", "import", "release",
                                                                    "summary"]


def test_pip_installed_launcher_brings_the_pytest_plugin(installed, tmp_path):
    r = run([installed / "bin" / "dlshim", "--log", tmp_path / "ev.jsonl", "--"] +
            pytest_args(installed / "bin" / "python", "--dlshim-strict"), env_with())
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("test_cases.py::test_double_release: double_release at " in r.stdout or
            f"double_release at {DOUBLE_AT}" in r.stdout), r.stdout
