"""scripts/check-layers: the core's objects use nothing hooks/ defines."""
import shutil
import subprocess

from conftest import BUILD, ROOT

CHECK = ROOT / "scripts" / "check-layers"


def check(build):
    return subprocess.run([str(CHECK), str(build)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


def test_the_core_stands_alone():
    r = check(BUILD)
    assert r.returncode == 0, r.stderr
    assert "references nothing hooks/ defines" in r.stdout


def test_a_core_object_that_calls_a_hook_file_is_named(tmp_path):
    """The same objects plus one core file that calls ds_py_mark_here
    (hooks/python_frames.c): the check fails and names both."""
    obj = tmp_path / "obj"
    shutil.copytree(BUILD / "obj" / "hooks", obj / "hooks")
    shutil.copytree(BUILD / "obj" / "shim", obj / "shim")
    src = tmp_path / "leaning.c"
    src.write_text("int ds_py_mark_here(void *m);\nvoid lean(void) { ds_py_mark_here(0); }\n")
    subprocess.run(["cc", "-c", str(src), "-o", str(obj / "shim" / "ledger" / "leaning.o")],
                   check=True)
    r = check(tmp_path)
    assert r.returncode == 1
    assert "ds_py_mark_here, used by leaning.o" in r.stderr
