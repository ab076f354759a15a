"""GOT patching of the executable itself, linked every way: PIE, non-PIE,
-fno-plt (GLOB_DAT calls) and full RELRO (-z now), against a test double of
the capsule API in a shared library (as libpython is to a Python extension).
The per-module unit tests (lazy, partial/full RELRO, -fno-plt shared
libraries, reloads, malformed images) are tests/unit/test_elf.c."""
import pytest

from conftest import BUILD


@pytest.mark.parametrize("variant", ["pie", "nopie", "noplt", "now"])
def test_executable_link_variants(dlshim, variant):
    exe = BUILD / "tests" / f"capsule_{variant}"
    bare = dlshim.run([exe], shim=False)
    r = dlshim.run([exe])
    assert r.rc == bare.rc == 0 and r.stdout == bare.stdout == "sum=10\n"
    consumed, dropped = r.of("export")
    assert consumed["producer"] == dropped["producer"] == f"capsule_{variant}"
    [imp] = r.of("import")
    assert imp["tensor"] == consumed["tensor"] and imp["consumer"] == f"capsule_{variant}"
    rel = {e["tensor"]: e["consumed"] for e in r.of("release")}
    assert rel == {consumed["tensor"]: True, dropped["tensor"]: False}
    assert r.violations() == []
