"""include/dlshim.h: compiles as C11 and C++ against old and new DLPack
headers, needs no link flag, and is a no-op without the shim."""
import shutil
import subprocess

import pytest

from conftest import BUILD, LIB, ROOT

SOURCE = ROOT / "tests" / "integration" / "header_user.c"
COMPAT = ROOT / "tests" / "integration" / "compat"
STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic"]

COMPILERS = {
    "c11": ["gcc", "-std=c11", "-x", "c"],
    "c++17": ["g++", "-std=c++17", "-x", "c++"],
    "clang-c11": ["clang", "-std=c11", "-x", "c"],
}


def build(tmp_path, compiler, dlpack, extra=()):
    cmd = COMPILERS[compiler]
    if shutil.which(cmd[0]) is None:
        pytest.fail(f"{cmd[0]} is not installed (scripts/install-deps installs it)")
    includes = [f"-I{COMPAT}"] if dlpack == "dlpack1" else []
    out = tmp_path / f"user-{compiler}-{dlpack}"
    subprocess.run([*cmd, *STRICT, *includes, f"-I{ROOT / 'include'}", str(SOURCE),
                    "-x", "none", *extra, "-o", str(out)], check=True)
    return out


@pytest.mark.parametrize("dlpack", ["system", "dlpack1"])
@pytest.mark.parametrize("compiler", sorted(COMPILERS))
def test_header_builds_and_runs(dlshim, tmp_path, compiler, dlpack):
    exe = build(tmp_path, compiler, dlpack)
    bare = dlshim.run([exe], shim=False)
    assert bare.rc == 0 and bare.stdout == "ok\n" and bare.stderr == ""
    traced = dlshim.run([exe])
    assert traced.rc == 0 and traced.stdout == "ok\n"
    [exp] = traced.of("export")
    assert exp["producer"] == "header_user" and exp["flags"] == ["read_only"]
    assert len(traced.of("import")) == 1 and len(traced.of("release")) == 1


def test_link_directly_variant(dlshim, tmp_path):
    exe = build(tmp_path, "c11", "system",
                ["-DDLSHIM_LINK_DIRECTLY", f"-L{BUILD}", "-ldlshim", f"-Wl,-rpath,{BUILD}"])
    r = dlshim.run([exe])
    assert r.rc == 0 and len(r.of("export")) == 1
