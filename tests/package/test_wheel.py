"""The wheel of `make wheel` (build/wheel): its tag, what auditwheel says of
it, and a first run on every current CPython: installed with `pip
--no-index` into a fresh venv with no compiler on PATH, then a traced
exchange through the installed `dlshim` command (torch -> NumPy on 3.11,
whose frameworks the project's venv lends through a .pth file; NumPy -> JAX
on 3.12 and 3.13, installed at the pins of tests/requirements.txt)."""
import os
import shutil
import subprocess
import zipfile

import pytest

from conftest import BUILD, ROOT, VENV_PYTHON, parse_jsonl, pyenv_python

WHEELS = sorted((BUILD / "wheel").glob("dlshim-*.whl"))
CASE = ROOT / "tests" / "package" / "cases" / "wheel_exchange.py"
# The line of each case's handoff: torch's first, JAX's second.
HANDOFF = dict(zip(("torch", "jax"), (n for n, l in enumerate(CASE.read_text().splitlines(), 1)
                                     if "# HANDOFF" in l)))


def pins(*names):
    want = {n.lower() for n in names}
    lines = (ROOT / "tests" / "requirements.txt").read_text().splitlines()
    return [l.strip() for l in lines if l.split("==")[0].lower() in want]


def test_one_wheel_for_every_python_on_glibc_2_17():
    [wheel] = WHEELS
    assert wheel.name.endswith("-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"), \
        wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    for part in ("dlshim/libdlshim.so", "dlshim/vulkan/dlshim_layer.json", "dlshim/launcher.sh",
                 "dlshim/pytest.py", "dlshim/report.py"):
        assert part in names, part
    assert any(n.endswith(".data/scripts/dlshim") for n in names)
    r = subprocess.run([VENV_PYTHON, "-m", "auditwheel", "show", wheel], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'is consistent with the following platform tag:\n"manylinux_2_17_x86_64"' in r.stdout


def fresh_venv(tmp, minor):
    host = pyenv_python(minor)
    if host is None:
        pytest.fail(f"pyenv has no CPython 3.{minor} (pyenv install 3.{minor})")
    venv = tmp / f"venv3{minor}"
    subprocess.run([host, "-m", "venv", venv], check=True, timeout=300)
    return venv


def pip(venv, *args, env=None):
    r = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", "--no-input", *args],
                       capture_output=True, text=True, timeout=1200, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("minor, case", [(11, "torch"), (12, "jax"), (13, "jax")])
def test_the_wheel_installs_without_a_compiler_and_traces(tmp_path, minor, case):
    [wheel] = WHEELS
    venv = fresh_venv(tmp_path, minor)
    bare = tmp_path / "no-compiler"
    bare.mkdir()
    no_cc = dict(os.environ, PATH=str(bare))
    assert shutil.which("cc", path=no_cc["PATH"]) is None
    pip(venv, "--no-index", wheel, env=no_cc)
    # the command is the shell launcher itself (no Python between the shell
    # and the program: tests/integration/test_launcher.py)
    assert (venv / "bin" / "dlshim").read_bytes() == (ROOT / "bin" / "dlshim").read_bytes()
    if case == "torch":  # the project venv's torch and NumPy (CPython 3.11)
        [site] = venv.glob("lib/python3.11/site-packages")
        [lent] = (ROOT / ".venv").glob("lib/python3.11/site-packages")
        (site / "frameworks.pth").write_text(f"{lent}\n")
    else:
        pip(venv, *pins("numpy", "jax", "jaxlib", "ml_dtypes", "opt-einsum", "scipy"))
    log = tmp_path / "run.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLSHIM_")}
    env.pop("LD_PRELOAD", None)
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    r = subprocess.run([venv / "bin" / "dlshim", "--format", "jsonl", "--log", log, "--",
                        venv / "bin" / "python", CASE, case], capture_output=True, text=True,
                       timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "done\n", r.stdout + r.stderr
    events = parse_jsonl(log.read_text())
    producer, consumer = ("torch", "numpy") if case == "torch" else ("numpy", "jax")
    # The case's 4 KiB array (JAX's sum then takes small arrays of its own)
    imports = [e for e in events if e["event"] == "import" and e["consumer"] == consumer
               and e["bytes"] == 4096]
    assert len(imports) == 1
    for imp in imports:
        assert (imp["producer"], imp["zero_copy"]) == (producer, True)
        assert imp["py"] == f"{CASE}:{HANDOFF[case]} in <module>"
    [summary] = [e for e in events if e["event"] == "summary"]
    assert summary["violations"] == {} and summary["outstanding"] == 0
    r = subprocess.run([venv / "bin" / "dlshim-report", log], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.startswith("dlshim report: 1 process(es)"), r.stderr
