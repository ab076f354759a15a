"""Security: a preloaded library runs inside other people's processes.
Secure-execution processes disable it; its files are the user's own."""
import os
import pwd
import shutil

import pytest

from conftest import BUILD, LIB

PROBE = BUILD / "tests" / "secure_probe"
NOBODY = pwd.getpwnam("nobody")


def probe(dlshim, path, *args):
    return dlshim.run([path, LIB, *args], shim=False,
                      env={"DLSHIM_LOG": "stderr", "DLSHIM_FORMAT": "jsonl",
                           "DLSHIM_VERBOSE": "1", "ASAN_OPTIONS": "detect_leaks=0"})


def test_the_probe_is_traced_when_not_setuid(dlshim):
    r = probe(dlshim, PROBE)
    assert "secure=0" in r.stdout and "loaded=1" in r.stdout, r.stderr
    names = [e["event"] for e in r.stderr_events()]
    assert names == ["export", "import", "release", "summary"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a setuid binary needs root")
@pytest.mark.parametrize("bit", [0o4000, 0o2000], ids=["setuid", "setgid"])
def test_secure_execution_disables_the_shim(dlshim, tmp_path, bit):
    # Root running a program owned by nobody with the set-id bit: the kernel
    # sets AT_SECURE, as for any user running a setuid-root program.
    os.chmod(tmp_path, 0o755)
    exe = tmp_path / "secure_probe"
    shutil.copy(PROBE, exe)
    os.chown(exe, NOBODY.pw_uid, NOBODY.pw_gid)
    os.chmod(exe, 0o755 | bit)
    r = probe(dlshim, exe, "_exit")
    assert "secure=1" in r.stdout and "loaded=1" in r.stdout, r.stdout + r.stderr
    assert r.rc == 0
    assert r.stderr_events() == []                        # no event
    assert not any(l.startswith("dlshim:") for l in r.stderr.splitlines())  # no dump either


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user needs root")
@pytest.mark.parametrize("option", ["DLSHIM_LOG", "DLSHIM_TRACE"])
def test_another_users_file_is_never_written_or_emptied(dlshim, tmp_path, option):
    theirs = tmp_path / "theirs.json"
    theirs.write_text("their data\n")
    os.chown(theirs, NOBODY.pw_uid, NOBODY.pw_gid)
    r = dlshim.consumer("clean", log=False, env={option: str(theirs)})
    assert r.rc == 0
    assert theirs.read_text() == "their data\n"
    assert len([d for d in r.diagnostics() if "another user" in d]) == 1


def test_trace_symlink_is_not_followed(dlshim, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "trace.json"
    link.symlink_to(victim)
    r = dlshim.consumer("clean", env={"DLSHIM_TRACE": str(link)})
    assert r.rc == 0 and victim.read_text() == "keep\n"
    assert len(r.of("export")) == 1  # the log is unaffected


def test_pid_expansion_is_bounded(dlshim, tmp_path):
    # Each %p grows by the pid's digits: a path that fits before expansion
    # but not after is refused whole, never cut.
    spec = str(tmp_path) + "/" + "%p" * 1800  # 3.6 KB here, over 4 KB expanded
    r = dlshim.consumer("clean", env={"DLSHIM_TRACE": spec})
    assert r.rc == 0 and len(r.of("export")) == 1
    assert len([d for d in r.diagnostics() if "longer than" in d]) == 1
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("events-")] == []
