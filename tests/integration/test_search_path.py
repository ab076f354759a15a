"""A library opened by its bare name from a library with an RPATH or a
RUNPATH is the one glibc would find for that caller (hooks/dlopen.c): the
shim's dlopen wrapper must not make the search its own.  On a GPU machine
it did: cuDNN opens its sub-libraries through its RUNPATH, and under the
shim the system's older cuDNN came first (PyTorch refused to start).

libpick.so exists twice: in first/, the openers' $ORIGIN/first, and in
second/, put on LD_LIBRARY_PATH.  glibc: an RPATH comes before
LD_LIBRARY_PATH, which comes before a RUNPATH."""
import pytest

from conftest import BUILD, PRELOAD_FIRST

SEARCH = BUILD / "tests" / "search"


def picked(dlshim, opener, shim, library_path):
    env = {"LD_LIBRARY_PATH": str(SEARCH / "second")} if library_path else {}
    r = dlshim.run([SEARCH / "search_path", SEARCH / f"libopener_{opener}.so"], shim=shim,
                   env=env)
    assert r.rc == 0, r.stdout + r.stderr
    return r.stdout.strip()


# The sanitizers intercept dlopen themselves and search as their runtime,
# not as the caller: glibc's own answer (the reference) changes under them.
@pytest.mark.skipif(bool(PRELOAD_FIRST), reason="the sanitizer runtime's dlopen interceptor "
                    "searches as itself, so there is no glibc answer to compare with")
@pytest.mark.parametrize("opener,library_path,expected", [
    ("rpath", True, "picked 1"),     # the RPATH first, LD_LIBRARY_PATH after
    ("runpath", True, "picked 2"),   # LD_LIBRARY_PATH first, the RUNPATH after
    ("rpath", False, "picked 1"),
    ("runpath", False, "picked 1"),
])
def test_a_bare_dlopen_searches_as_for_its_caller(dlshim, opener, library_path, expected):
    assert picked(dlshim, opener, False, library_path) == expected  # glibc, for reference
    assert picked(dlshim, opener, True, library_path) == expected
