"""bin/gpu-check on the simulated device, so that it cannot rot: every
device row passes, and the framework rows run and say why they cannot here
(Debian's PyTorch has no CUDA; CuPy and JAX are not packaged) instead of
passing.  The real-GPU table is docs/gpu-results.md."""
import json
import os
import subprocess

from conftest import BUILD, PRELOAD_FIRST, ROOT, SYSTEM_PYTHON

GPU_CHECK = ROOT / "bin" / "gpu-check"


def gpu_check(tmp_path, build, *extra, env=None, timeout=300):
    """bin/gpu-check's rows from `build`, on the simulated device: the
    process and its JSON (None where it wrote none: the caller's check of
    the exit status shows why)."""
    out = tmp_path / "gpu-check.json"
    args = [SYSTEM_PYTHON, GPU_CHECK, "--simdev", "--skip-build", "--build", build,
            "--json", out, *extra]
    if PRELOAD_FIRST:
        args += ["--preload-first", PRELOAD_FIRST]
    # CPython is not built for LeakSanitizer's exit check (as in conftest).
    env = dict(os.environ, **(env or {}),
               **({"ASAN_OPTIONS": "detect_leaks=0"} if PRELOAD_FIRST else {}))
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                       env=env, stdin=subprocess.DEVNULL)
    return p, json.loads(out.read_text()) if out.exists() else None


def test_gpu_check_on_the_simulated_device(tmp_path):
    p, result = gpu_check(tmp_path, BUILD, "--steps", "5", "--ops", "2000", timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = result["rows"]
    device = [r for r in rows if r["group"] == "device"]
    assert len(device) == 35 and all(r["status"] == "pass" for r in device), device
    # The cost of a stream operation: measured, never a failure on timing.
    hot = [r for r in rows if r["group"] == "hot-path"]
    assert len(hot) == 3 * 2 and all(r["status"] == "pass" and r["ns_without"] > 0 for r in hot)
    others = [r for r in rows if r["group"] not in ("device", "hot-path")]
    assert len(others) == 6 * 2 * 2 + 2 + 1
    assert all(r["status"] == "unavailable" and r["detail"] for r in others), others
    assert result["counts"] == {"pass": 35 + 6, "FAIL": 0, "unavailable": len(others)}
    assert result["machine"]["device"].startswith("simulated")


VULKAN_ROWS = {"Vulkan memory imported by CUDA", "Vulkan memory freed while CUDA maps it"}
SEMAPHORE_ROWS = {"Vulkan semaphore waited for by a CUDA stream, check",
                  "CUDA semaphore signal waited for by a submission, check",
                  "Vulkan write the CUDA stream did not wait for, check",
                  "CUDA write the submission did not wait for, check",
                  "Vulkan timeline value waited for by a CUDA stream, check",
                  "CUDA timeline value waited for by a submission, check",
                  "Vulkan write after the timeline value CUDA waited for, check",
                  "CUDA write after the timeline value the submission waited for, check"}
CONSUME_ROWS = {"kDLVulkan tensor copied on a second queue before the write, check",
                "kDLVulkan tensor copied on a second queue, enforce",
                "kDLVulkan tensor copied after a semaphore, check"}


def test_a_program_the_loader_cannot_start_is_unavailable_not_failed(tmp_path):
    # A GPU image without the Vulkan loader: the real dynamic loader refuses
    # the program (exit status 127), here through a copy of vk_share that
    # needs a library of another name.
    build = tmp_path / "build"
    (build / "tests" / "vulkan").mkdir(parents=True)
    for part in ("libdlshim.so", "simdev", "tests/device"):
        (build / part).symlink_to(BUILD / part)
    program = (BUILD / "tests" / "vulkan" / "vk_share").read_bytes()
    assert program.count(b"libvulkan.so.1\0") == 1
    copy = build / "tests" / "vulkan" / "vk_share"
    copy.write_bytes(program.replace(b"libvulkan.so.1\0", b"libvulkXn.so.1\0"))
    copy.chmod(0o755)
    p, result = gpu_check(tmp_path, build, "--only", "device")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["name"]: r for r in result["rows"]}
    for name in VULKAN_ROWS:
        assert rows[name]["status"] == "unavailable", rows[name]
        assert rows[name]["detail"] == "libvulkXn.so.1 is not on this machine"
    for name in SEMAPHORE_ROWS:  # not copied into this build
        assert (rows[name]["status"], rows[name]["detail"]) == \
            ("unavailable", "vulkan/vk_extsem not built")
    for name in CONSUME_ROWS:
        assert (rows[name]["status"], rows[name]["detail"]) == \
            ("unavailable", "vulkan/vk_consume not built")
    assert result["counts"] == {"pass": 22, "FAIL": 0, "unavailable": 13}


def test_a_machine_without_a_vulkan_driver_is_unavailable_not_failed(tmp_path):
    no_driver = str(tmp_path / "no-such-driver.json")
    p, result = gpu_check(tmp_path, BUILD, "--only", "device",
                          env={"VK_DRIVER_FILES": no_driver, "VK_ICD_FILENAMES": no_driver})
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["name"]: r for r in result["rows"]}
    for name in VULKAN_ROWS | SEMAPHORE_ROWS | CONSUME_ROWS:
        assert (rows[name]["status"], rows[name]["detail"]) == ("unavailable", "no Vulkan driver")
    assert result["counts"] == {"pass": 22, "FAIL": 0, "unavailable": 13}
