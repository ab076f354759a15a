"""The library builds with a C compiler and libc alone: with the SDK headers
hidden (Vulkan, DLPack, HIP, CUDA, libffi), `make` still builds it, with the
same exports, and the simulated-device, Vulkan and entry-point suites pass
with it in place of the usual build."""
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import BUILD, LIB, ROOT

# A property of the plain build: the sanitizer, TSan and valgrind runs of the
# suite would rebuild the plain library and run it outside their variant.
pytestmark = pytest.mark.skipif(BUILD != ROOT / "build",
                                reason="the SDK-free build is checked in the plain suite")

CUDA_INCLUDE = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
HIDDEN_DIRS = ["/usr/include/vulkan", "/usr/include/dlpack", "/usr/include/hip",
               str(CUDA_INCLUDE.resolve())]
HIDDEN_FILES = ["/usr/include/x86_64-linux-gnu/ffi.h", "/usr/include/x86_64-linux-gnu/ffitarget.h"]
HEADERS = ["vulkan/vulkan.h", "vulkan/vk_layer.h", "dlpack/dlpack.h", "hip/hip_runtime_api.h",
           "cuda.h", "cuda_runtime_api.h", "ffi.h"]
SUITES = ["tests/integration/test_device.py", "tests/integration/test_vulkan.py",
          "tests/integration/test_entry.py"]

# In a private mount namespace: the SDK folders under empty tmpfs mounts,
# libffi's headers under a file that stops any compile including it; then
# proof that none is visible any more, and the build.
SCRIPT = r"""
set -eu
for d in {dirs}; do [ -d "$d" ] && mount -t tmpfs -o ro tmpfs "$d"; done
printf '#error "hidden by test_sdk_free"\n' > "$1/hidden.h"
for f in {files}; do [ -e "$f" ] && mount --bind "$1/hidden.h" "$f"; done
for h in {headers}; do
    if echo "#include <$h>" | cc -I{cuda} -xc -E - >/dev/null 2>&1; then
        echo "still visible: $h"; exit 3
    fi
done
make -C {root} --no-print-directory BUILD="$1/build" "$1/build/libdlshim.so" \
    "$1/build/vulkan/dlshim_layer.json"
"""


def exports(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                         text=True, check=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines())


@pytest.fixture(scope="module")
def sdk_free_build(tmp_path_factory):
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -m is not permitted here (it needs root): the SDK headers "
                    "cannot be hidden, so the SDK-free build is not checked")
    tmp = tmp_path_factory.mktemp("sdk_free")
    script = SCRIPT.format(dirs=" ".join(HIDDEN_DIRS), files=" ".join(HIDDEN_FILES),
                           headers=" ".join(HEADERS), cuda=CUDA_INCLUDE, root=ROOT)
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(tmp)],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"the build without SDK headers failed:\n{r.stdout}\n{r.stderr}"
    return tmp / "build"


def test_builds_with_the_same_exports(sdk_free_build):
    assert exports(sdk_free_build / "libdlshim.so") == exports(LIB)


def test_device_vulkan_and_entry_suites_pass_with_it(sdk_free_build, tmp_path):
    # The usual build's test programs, with the SDK-free library and layer.
    mixed = tmp_path / "build"
    mixed.mkdir()
    for entry in BUILD.iterdir():
        if entry.name not in ("libdlshim.so", "vulkan"):
            (mixed / entry.name).symlink_to(entry)
    for name in ("libdlshim.so", "vulkan"):
        (mixed / name).symlink_to(sdk_free_build / name)
    env = dict(os.environ, DLSHIM_TEST_BUILD=str(mixed))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
