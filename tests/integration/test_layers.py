"""scripts/check-layers: the core's layers call only down, form no circle,
and include only what their folder may see."""
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT

CHECK = ROOT / "scripts" / "check-layers"


def check(build, root=ROOT):
    return subprocess.run([str(CHECK), str(build), str(root)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


def objects_plus(tmp_path, folder, name, source):
    """The library's objects, plus one compiled from `source` into `folder`."""
    obj = tmp_path / "obj"
    shutil.copytree(BUILD / "obj" / "hooks", obj / "hooks")
    shutil.copytree(BUILD / "obj" / "shim", obj / "shim")
    src = tmp_path / (name + ".c")
    src.write_text(source)
    subprocess.run(["cc", "-c", str(src), "-o", str(obj / folder / (name + ".o"))], check=True)
    return tmp_path


def test_the_core_stands_in_layers():
    r = check(BUILD)
    assert r.returncode == 0, r.stderr
    assert "every call goes down, no circle, every include allowed" in r.stdout


@pytest.mark.parametrize("folder, name, callee, expected", [
    # a ledger file that calls into the Python hook family
    ("shim/ledger", "leaning", "int ds_py_mark_here(void)",
     "shim/ledger/leaning.o calls up into hooks/python_frames.o: ds_py_mark_here"),
    # output below the ledger's summary
    ("shim/output", "climbing", "int ds_summary_write(void)",
     "shim/output/climbing.o calls up into shim/ledger/summary.o: ds_summary_write"),
    # image and output share a rank: neither may call the other
    ("shim/image", "sideways", "int ds_log_flush(void)",
     "shim/image/sideways.o calls sideways into shim/output/log.o: ds_log_flush"),
])
def test_a_call_that_does_not_go_down_is_named(tmp_path, folder, name, callee, expected):
    function = callee.split()[1].split("(")[0]
    build = objects_plus(tmp_path, folder, name,
                         f"{callee};\nint {name}(void) {{ return {function}(); }}\n")
    r = check(build)
    assert r.returncode == 1
    assert expected in r.stderr


def test_a_circle_within_a_layer_fails(tmp_path):
    """Two ledger files that call each other."""
    build = objects_plus(tmp_path, "shim/ledger", "ring_a",
                         "void ring_b(void);\nvoid ring_a(void) { ring_b(); }\n")
    src = tmp_path / "ring_b.c"
    src.write_text("void ring_a(void);\nvoid ring_b(void) { ring_a(); }\n")
    subprocess.run(["cc", "-c", str(src), "-o", str(build / "obj" / "shim" / "ledger" / "ring_b.o")],
                   check=True)
    r = check(build)
    assert r.returncode == 1
    assert "a circle of calls: shim/ledger/ring_a.o -> shim/ledger/ring_b.o" in r.stderr


def test_a_hook_including_a_layer_header_fails(tmp_path):
    root = tmp_path / "src"
    shutil.copytree(ROOT / "shim", root / "shim")
    shutil.copytree(ROOT / "hooks", root / "hooks")
    frames = root / "hooks" / "python_frames.c"
    frames.write_text('#include "ledger/ledger.h"\n' + frames.read_text())
    r = check(BUILD, root)
    assert r.returncode == 1
    assert 'hooks/python_frames.c includes "ledger/ledger.h"' in r.stderr


MARKERS = ROOT / "scripts" / "check-markers"


def test_conflict_markers_in_a_tracked_file_fail(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "clean.md").write_text("Title\n=======\n")
    (tmp_path / "merged.md").write_text("a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> branch\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    r = subprocess.run([str(MARKERS), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "merged.md:2: <<<<<<<" in r.stderr and "merged.md:6: >>>>>>>" in r.stderr
    assert "clean.md" not in r.stderr
    (tmp_path / "merged.md").write_text("a\nc\n")
    r = subprocess.run([str(MARKERS), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
