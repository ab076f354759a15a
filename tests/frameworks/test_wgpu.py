"""wgpu (wgpu-py on wgpu-native) running a compute shader on Vulkan, under
the shim's Vulkan layer, on Mesa's lavapipe: its memory is seen, owned and
balanced, nothing is reported, and the program's output is unchanged."""
import os

import pytest

LAVAPIPE = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
ENV = {"VK_ICD_FILENAMES": LAVAPIPE, "DLSHIM_EVENTS": "all", "XDG_RUNTIME_DIR": "/tmp"}


@pytest.fixture(autouse=True)
def lavapipe():
    if not os.path.exists(LAVAPIPE):
        pytest.fail("lavapipe missing: scripts/install-deps installs mesa-vulkan-drivers")


def test_compute_shader_memory_is_seen_and_balanced(dlshim):
    r = dlshim.framework("wgpu_compute.py", env=ENV)
    assert r.rc == 0, r.stdout + r.stderr
    assert "adapter Vulkan CPU" in r.stdout and "sum 16777216" in r.stdout
    allocs = [e for e in r.of("alloc") if e["api"] == "vulkan" and e["kind"] == "device"]
    frees = [e for e in r.of("free") if e["api"] == "vulkan" and e["kind"] == "device"]
    assert allocs, "no Vulkan allocation seen"
    assert {e["owner"] for e in allocs} == {"wgpu"}
    assert {e["device"] for e in allocs} == {"vulkan:0"}
    assert all(e["bytes"] > 0 and e["memory"] for e in allocs)
    # every allocation freed, once, by wgpu-native
    assert sorted(e["base"] for e in allocs) == sorted(e["base"] for e in frees)
    assert {e["by"] for e in frees} == {"wgpu"}
    # its host mappings (reading the result back), each of a memory seen
    maps = [e for e in r.of("alloc") if e["kind"] == "mapped"]
    assert maps and {e["alias_of"] for e in maps} <= {e["base"] for e in allocs}
    assert len([e for e in r.of("free") if e["kind"] == "mapped"]) == len(maps)
    assert r.violations() == [] and r.summary["allocations_live"] == 0


def test_same_output_with_and_without_shim(dlshim):
    bare = dlshim.framework("wgpu_compute.py", env=ENV, shim=False)
    traced = dlshim.framework("wgpu_compute.py", env=ENV)
    assert bare.rc == traced.rc == 0
    assert bare.stdout == traced.stdout
