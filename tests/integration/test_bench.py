"""make bench's programs and runner work (their timings are never judged):
each program runs with and without the shim and reports what bench/run reads."""
import importlib.machinery
import importlib.util
import json
import os
import subprocess

import pytest

from conftest import BUILD, PRELOAD_FIRST, ROOT, SIMDEV, SYSTEM_PYTHON

BENCH = BUILD / "bench"


def last_json(r):
    assert r.rc == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_call_programs_run_under_the_shim(dlshim):
    env = {"LD_LIBRARY_PATH": str(SIMDEV), "DLSHIM_EVENTS": "all"}
    for mode in ("alloc_direct", "alloc_dlsym", "alloc_getproc", "cycle", "trampoline"):
        plain = dlshim.run([BENCH / "calls", mode, "50"], shim=False, env=env)
        assert last_json(plain)["mode"] == mode
        r = dlshim.run([BENCH / "calls", mode, "50"], env=env)
        assert last_json(r)["ns"] > 0
        # The shim really was in the measured path.
        if mode.startswith("alloc"):
            assert len(r.of("alloc")) == len(r.of("free")) >= 50
        else:
            assert len(r.of("export")) == len(r.of("release")) == 50


def test_host_free_programs_run_under_the_shim(dlshim):
    """The host free rows: the held shares are really exported and imported
    (and released at the end), the loop's own blocks lie in none of them."""
    env = {"LD_LIBRARY_PATH": str(SIMDEV), "DLSHIM_EVENTS": "all"}
    for args, shares in ((["host_free_cold"], 0), (["host_free", "0"], 1),
                         (["host_free", "10"], 11)):
        plain = dlshim.run([BENCH / "calls", args[0], "50", *args[1:]], shim=False, env=env)
        assert last_json(plain)["mode"] == args[0]
        r = dlshim.run([BENCH / "calls", args[0], "50", *args[1:]], env=env)
        assert last_json(r)["ns"] > 0 and r.violations() == []
        assert len(r.of("export")) == len(r.of("import")) == len(r.of("release")) == shares


def test_stream_and_registry_programs(dlshim):
    env = {"LD_LIBRARY_PATH": str(SIMDEV), "DLSHIM_SYNC": "check"}
    r = dlshim.run([BENCH / "streams", "8", "200"], env=env)
    assert last_json(r)["streams"] == 8 and r.violations() == []
    # One operation alone, beside live shares (the device hot path rows):
    # the shares are handed over synchronized and held to the end.
    for op in ("launch", "copy", "record"):
        plain = dlshim.run([BENCH / "streams", op, "3", "50"], shim=False, env=env)
        assert last_json(plain) == {**last_json(plain), "op": op, "shares": 3}
        r = dlshim.run([BENCH / "streams", op, "3", "50"], env={**env, "DLSHIM_EVENTS": "all"})
        assert last_json(r)["op"] == op and r.violations() == []
        assert len(r.of("export")) == len(r.of("import")) == len(r.of("release")) == 3
        assert r.summary["copies"] == 0  # every share zero-copy
        assert r.summary["transfers"] == len(r.of("copy")) == (50 if op == "copy" else 0)
    reg = dlshim.run([BENCH / "registry", "5000"], shim=False)
    out = last_json(reg)
    assert out["allocations"] == 5000 and out["bytes_per_allocation"] > 0
    # The memory rows that give the lookup its scale were measured.
    assert out["miss_alone_ns"] > 0 and out["misses_overlapped_ns"] > 0


def test_thread_scaling_program_runs_under_the_shim(dlshim):
    """The thread rows (issue 53): every thread's cycles are really handed
    over through the shim (host and device tensors), and its device loop is
    clean."""
    env = {"LD_LIBRARY_PATH": str(SIMDEV), "DLSHIM_EVENTS": "all", "SIMDEV_IMMEDIATE": "1"}
    plain = dlshim.run([BENCH / "threads", "cycle", "3", "50"], shim=False, env=env)
    assert last_json(plain)["threads"] == 3
    r = dlshim.run([BENCH / "threads", "cycle", "3", "50"], env=env)
    assert last_json(r)["per_s"] > 0
    assert len(r.of("export")) == len(r.of("import")) == len(r.of("release")) == 150
    assert len({e["tid"] for e in r.of("export")}) == 3
    # Device tensors: each thread's own allocation, every handoff found in it.
    r = dlshim.run([BENCH / "threads", "gcycle", "3", "50"], env=env)
    exports = r.of("export")
    assert len(exports) == len(r.of("import")) == len(r.of("release")) == 150
    assert {e["device"] for e in exports} == {"cuda:0"} and r.violations() == []
    assert len({(e["tid"], e["allocation"]) for e in exports}) == len(r.of("alloc")) == 3
    r = dlshim.run([BENCH / "threads", "device", "3", "20"], env={**env, "DLSHIM_SYNC": "check"})
    assert last_json(r)["mode"] == "device" and r.violations() == []
    assert r.summary["transfers"] == len(r.of("copy")) == 60
    # While each thread's handoff waits (its consumer never uses it): no race.
    r = dlshim.run([BENCH / "threads", "pdevice", "3", "20"], env={**env, "DLSHIM_SYNC": "check"})
    assert last_json(r)["mode"] == "pdevice" and r.violations() == []
    assert len(r.of("export")) == len(r.of("import")) == len(r.of("release")) == 3
    assert r.summary["transfers"] == len(r.of("copy")) == 60


def test_python_exchange_loop_is_zero_copy_under_the_shim(dlshim):
    # CPython and torch are not built for LeakSanitizer (the sanitizer run).
    r = dlshim.run([SYSTEM_PYTHON, ROOT / "bench" / "exchange.py", "10"],
                   env={"ASAN_OPTIONS": "detect_leaks=0"})
    assert last_json(r)["ns"] > 0
    # 1000 warm-up + 10 timed + 1 checked round trips, two handoffs each.
    assert r.summary["shares"] == 2 * 1011 and r.summary["copies"] == 0


def test_runner_reports_every_group(tmp_path):
    out = tmp_path / "results.json"
    p = subprocess.run([SYSTEM_PYTHON, str(ROOT / "bench" / "run"), "--build", str(BUILD),
                        "--quick", "--repeat", "1", "--out", str(out), "--no-instructions",
                        "--no-venv", "--preload-first", PRELOAD_FIRST],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())["rows"]
    assert {r["group"][:2] for r in rows} == {"1.", "2.", "3.", "4.", "5.", "9.", "10", "11"}
    assert all("target" not in r or "pass" in r for r in rows)


def load_runner():
    loader = importlib.machinery.SourceFileLoader("bench_run", str(ROOT / "bench" / "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# The instruction row's counter, on the annotation API's cycle (torch under
# callgrind takes minutes): runs of 1,000 and 3,000 cycles differ by exactly
# the cycles' instructions, and the shim's bookkeeping is among them.
@pytest.mark.skipif(PRELOAD_FIRST != "", reason="valgrind does not run a sanitizer's runtime")
def test_runner_counts_instructions_with_callgrind():
    runner = load_runner()
    cmd = [str(BENCH / "calls"), "cycle"]

    def per_cycle(shim):
        a, b = (runner.callgrind_instructions(cmd + [str(n)], {}, str(BUILD), shim)
                for n in (1000, 3000))
        return (b - a) / 2000

    base, shim = per_cycle(False), per_cycle(True)
    assert base > 0
    assert shim - base > 100  # a ledger export, import and release, with the lock


# The start-up row in instructions, on a program that does nothing (true
# ignores the -c argument): what remains is the shim's own loading,
# initialisation and patching.
@pytest.mark.skipif(PRELOAD_FIRST != "", reason="valgrind does not run a sanitizer's runtime")
def test_startup_row_counts_what_the_shim_adds(monkeypatch):
    runner = load_runner()
    monkeypatch.setattr(runner, "PYTHON", "/bin/true")
    rows = runner.startup_instructions(str(BUILD))
    assert [r["name"] for r in rows] == ["no shim (baseline)", "added by the shim (log off)"]
    assert rows[0]["measure"] > 0 and rows[1]["measure"] > 10000


# The device rows' counts: the simulated device runs each operation as it
# is queued (SIMDEV_IMMEDIATE=1), so two builds of the same path count the
# same instructions per operation.  With stream workers, check and enforce
# (the same path when nothing races) differed by a hundred per copy, as
# valgrind interleaved the worker with the program differently.
@pytest.mark.skipif(PRELOAD_FIRST != "", reason="valgrind does not run a sanitizer's runtime")
def test_device_rows_count_the_same_path_alike():
    runner = load_runner()
    cmd = [str(BENCH / "streams"), "copy", "1"]

    def per_copy(sync):
        env = {"SIMDEV_IMMEDIATE": "1", "DLSHIM_SYNC": sync}
        a, b = (runner.callgrind_instructions(cmd + [str(n)], env, str(BUILD), True)
                for n in (1000, 3000))
        return (b - a) / 2000

    check, enforce = per_copy("check"), per_copy("enforce")
    assert abs(check - enforce) < 1, (check, enforce)


# The loop's instruction rows compare like with like: the environment's size
# moves where CPython's objects land (about ±1 % of the loop), so every run
# at one layout has an environment of one size, with or without the shim and
# whatever variables its row adds, and the layouts differ by what they say.
def test_runs_at_one_layout_have_environments_of_one_size():
    runner = load_runner()
    rows = [({}, False), ({}, True), ({"DLSHIM_FORMAT": "jsonl", "DLSHIM_LOG": "/tmp/a.log"}, True),
            ({"PYTHONHASHSEED": "0", "DLSHIM_PY": "0"}, True)]
    size = {layout: {runner.env_bytes(runner.run_env(extra, str(BUILD), shim, layout))
                     for extra, shim in rows}
            for layout in runner.LAYOUTS}
    assert all(len(sizes) == 1 for sizes in size.values()), size
    one = [min(size[layout]) for layout in runner.LAYOUTS]
    assert [b - one[0] for b in one] == [layout - runner.LAYOUTS[0] for layout in runner.LAYOUTS]
    # Without a layout, nothing is added: the wall-clock rows run as a user would.
    assert runner.LAYOUT_FILLER not in runner.run_env({}, str(BUILD), False)


# The loop's rows at several layouts: each variant is counted at each layout,
# and a ratio pairs the runs of one layout (a stand-in for callgrind counts
# per run: 1,000 Ir a round trip bare, 1,100 with the shim, plus the layout).
def test_loop_rows_pair_runs_by_layout(monkeypatch, tmp_path):
    runner = load_runner()
    seen = []

    def fake_count(cmd, env_extra, build, shim, layout=None):
        seen.append((shim, layout, env_extra.get("DLSHIM_FORMAT")))
        n = int(cmd[-1])
        if "DLSHIM_LOG" in env_extra:
            with open(env_extra["DLSHIM_LOG"], "w") as f:
                f.write('{"event":"export"}\n' * 6 * n)
        return n * ((1100 if shim else 1000) + 10 * layout)

    monkeypatch.setattr(runner, "callgrind_instructions", fake_count)
    monkeypatch.setattr(runner, "LAYOUT_COUNT", 3)
    (tmp_path / "bench").mkdir()
    rows = runner.python_loop_instructions(str(tmp_path), 10, 30, "python", "1")
    assert {(shim, layout) for shim, layout, _ in seen} == \
        {(s, layout) for s in (False, True) for layout in runner.LAYOUTS}
    off = rows[1]
    assert off["values"] == [1100 + 10 * layout for layout in runner.LAYOUTS]
    assert off["ratio"] == sorted((1100 + 10 * k) / (1000 + 10 * k) for k in runner.LAYOUTS)[1]
    assert "6 per round trip" in rows[3]["name"]


def test_vulkan_submit_program(dlshim):
    """Group 10: both submission forms and the recorded dispatch run under
    the shim, their writes and timeline values modelled, nothing reported
    (lavapipe)."""
    if not (BENCH / "vk_submit").exists():
        pytest.fail("bench/vk_submit was not built (libvulkan-dev)")
    env = {"VK_ICD_FILENAMES": "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
           "DLSHIM_SYNC": "check", "DLSHIM_SUMMARY": "1"}
    if PRELOAD_FIRST:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    for form in ("submit", "submit2", "dispatch"):
        plain = dlshim.run([BENCH / "vk_submit", form, "130"], shim=False, env=env)
        assert last_json(plain)["form"] == form
        r = dlshim.run([BENCH / "vk_submit", form, "130"], env=env)
        assert last_json(r)["ns"] > 0 and r.violations() == []
        assert r.summary["allocations_live"] == 0
