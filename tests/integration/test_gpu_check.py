"""scripts/gpu-check on the simulated device, so that it cannot rot: every
device row passes, and the framework rows run and say why they cannot here
(Debian's PyTorch has no CUDA; CuPy and JAX are not packaged) instead of
passing.  The real-GPU table is docs/gpu-results.md."""
import json
import os
import subprocess

from conftest import BUILD, PRELOAD_FIRST, ROOT, SYSTEM_PYTHON

GPU_CHECK = ROOT / "scripts" / "gpu-check"


def test_gpu_check_on_the_simulated_device(tmp_path):
    out = tmp_path / "gpu-check.json"
    args = [SYSTEM_PYTHON, GPU_CHECK, "--simdev", "--skip-build", "--build", BUILD,
            "--json", out, "--steps", "5", "--ops", "2000"]
    if PRELOAD_FIRST:
        args += ["--preload-first", PRELOAD_FIRST]
    # CPython is not built for LeakSanitizer's exit check (as in conftest).
    env = dict(os.environ, **({"ASAN_OPTIONS": "detect_leaks=0"} if PRELOAD_FIRST else {}))
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900,
                       env=env, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(out.read_text())
    rows = result["rows"]
    device = [r for r in rows if r["group"] == "device"]
    assert len(device) == 18 and all(r["status"] == "pass" for r in device), device
    # The cost of a stream operation: measured, never a failure on timing.
    hot = [r for r in rows if r["group"] == "hot-path"]
    assert len(hot) == 3 * 2 and all(r["status"] == "pass" and r["ns_without"] > 0 for r in hot)
    others = [r for r in rows if r["group"] not in ("device", "hot-path")]
    assert len(others) == 6 * 2 * 2 + 2 + 1
    assert all(r["status"] == "unavailable" and r["detail"] for r in others), others
    assert result["counts"] == {"pass": 18 + 6, "FAIL": 0, "unavailable": len(others)}
    assert result["machine"]["device"].startswith("simulated")
