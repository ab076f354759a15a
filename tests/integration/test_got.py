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


def test_capsule_api_out_of_the_global_scope(dlshim):
    """A program that opens its Python RTLD_LOCAL (an embedding host): the
    shim cannot look the capsule API up by name, yet the consumer's rename
    is still its import, answered from the GetPointer it made just before."""
    lib = BUILD / "tests" / "libcapsule_user.so"
    r = dlshim.run([BUILD / "tests" / "local_scope", lib, "capsule_main"])
    assert r.rc == 0 and r.stdout == "sum=10\n"
    consumed, dropped = r.of("export")
    assert consumed["producer"] == dropped["producer"] == "libcapsule_user"
    [imp] = r.of("import")
    assert imp["tensor"] == consumed["tensor"] and imp["consumer"] == "libcapsule_user"
    rel = {e["tensor"]: e["consumed"] for e in r.of("release")}
    assert rel == {consumed["tensor"]: True, dropped["tensor"]: False}
    assert r.violations() == []


def test_rename_of_a_capsule_made_where_an_opened_one_was(dlshim):
    """The tensor a rename imports is the renamed capsule's, even when the
    capsule this thread opened last lay at the same address and was freed."""
    r = dlshim.run([BUILD / "tests" / "capsule_pie", "reuse"])
    assert r.rc == 0 and r.stdout == "reused=1\n"  # the scenario happened
    first, second = r.of("export")
    [imp] = r.of("import")
    assert imp["tensor"] == second["tensor"] != first["tensor"]
    rel = {e["tensor"]: e["consumed"] for e in r.of("release")}
    assert rel == {first["tensor"]: False, second["tensor"]: True}
    assert r.violations() == []
