"""The frameworks' own DLPack tests, from the installed wheels, with and
without the shim: the same passed/skipped/failed counts, no violation, every
log line valid JSON.  The suites that ship in the wheels: NumPy's, PyArrow's
and Warp's (PyTorch, JAX, TensorFlow, Paddle, MLX and tvm-ffi ship none)."""
import collections
import json
import re
import subprocess

import pytest

from conftest import BUILD, LIB, PRELOAD_FIRST, VENV_PYTHON, base_env, parse_jsonl

SUITES = {
    "numpy": "numpy/_core/tests/test_dlpack.py",
    "pyarrow": "pyarrow/tests/test_dlpack.py",
    # Warp's module-level functions take fixtures pytest does not have; its
    # unittest class holds the tests, run per device (here: the CPU).
    "warp": "warp/tests/interop/test_dlpack.py::TestDLPack",
}


def site_packages():
    return subprocess.run([str(VENV_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def outcome(stdout):
    """{'passed': n, 'skipped': n, ...} from pytest's last line."""
    last = stdout.strip().splitlines()[-1]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)",
                                               last)}


def run_suite(tmp_path, suite, shim):
    env = base_env()
    env.update(TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1")
    log = tmp_path / "run-%p.jsonl"
    if shim:
        env.update(LD_PRELOAD=" ".join(p for p in (PRELOAD_FIRST, str(LIB)) if p),
                   DLSHIM_FORMAT="jsonl", DLSHIM_LOG=str(log))
    target = f"{site_packages()}/{SUITES[suite]}"
    proc = subprocess.run([str(VENV_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", target], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    return proc


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_peer_suite_under_the_shim(tmp_path, suite):
    bare_dir, traced_dir = tmp_path / "bare", tmp_path / "traced"
    bare_dir.mkdir()
    traced_dir.mkdir()
    bare = run_suite(bare_dir, suite, shim=False)
    traced = run_suite(traced_dir, suite, shim=True)
    counts = outcome(bare.stdout)
    assert counts.get("passed", 0) > 0, bare.stdout[-2000:]
    assert outcome(traced.stdout) == counts, (traced.stdout[-2000:], traced.stderr[-2000:])
    assert traced.returncode == bare.returncode
    events = []
    for log in sorted(traced_dir.glob("run-*.jsonl")):
        events += parse_jsonl(log.read_text(), str(log))  # every line must parse
    kinds = collections.Counter(e["event"] for e in events)
    assert kinds["export"] > 0 and kinds["import"] > 0, kinds
    violations = [e for e in events if e["event"] == "violation"]
    assert violations == [], json.dumps(violations[:5], indent=1)
    summaries = [e for e in events if e["event"] == "summary"]
    assert summaries and all(s["outstanding"] == 0 and s["untracked"] == 0 for s in summaries)
    out = BUILD / "frameworks"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"peer-{suite}.json").write_text(json.dumps(
        {"suite": SUITES[suite], "outcome": counts, "violations": 0}) + "\n")
