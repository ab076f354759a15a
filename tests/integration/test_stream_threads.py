"""The stream model under threads on streams of their own
(tests/device/handoff.c's `ring`): T threads hand tensors round a ring,
each consumer's stream waiting for the producer's event but in the racy
rounds.  The model's answers are exact whatever the threads' interleaving:
no false unsynchronized_handoff, one per thread in each racy round (check),
a barrier for each instead (enforce), every handoff, copy and host function
counted.  `make check-tsan` runs it under ThreadSanitizer, with the
lock-order check of shim/base/locks.def on (DS_DEBUG_LOCKS)."""
import pytest

from conftest import PRELOAD_FIRST, WRAPPER

SLOW = bool(PRELOAD_FIRST or WRAPPER)  # sanitizers, valgrind
THREADS, ROUNDS, RACY_EVERY = 4, (200 if SLOW else 2000), 5


def run(dlshim, sync, racy_every=RACY_EVERY):
    # With racy rounds the simulated device runs each operation as it is
    # queued, on the calling thread: a racy round's fill and copy are then
    # ordered by the program's barrier between them (no data race in the
    # simulated memory for ThreadSanitizer to see), while the stream model,
    # told of no wait, sees the race.
    env = {"DLSHIM_SYNC": sync, **({"SIMDEV_IMMEDIATE": "1"} if racy_every else {})}
    r = dlshim.device("handoff", "ring", THREADS, ROUNDS, racy_every, env=env)
    assert r.rc == 0, r.stderr
    handoffs = THREADS * ROUNDS
    assert f"host functions ran {handoffs}" in r.stdout
    for name in ("export", "import", "release"):
        assert len(r.of(name)) == handoffs, name
    s = r.summary
    assert (s["shares"], s["outstanding"], s["transfers"]) == (handoffs, 0, handoffs)
    return r


@pytest.mark.parametrize("sync", ["check", "enforce"])
def test_synchronized_rings_are_silent(dlshim, sync):
    r = run(dlshim, sync, racy_every=0)
    assert r.violations() == [] and r.of("sync") == []
    assert r.summary["barriers_inserted"] == 0


def test_check_reports_each_racy_handoff_once(dlshim):
    r = run(dlshim, "check")
    racy = THREADS * (ROUNDS // RACY_EVERY)
    found = r.violations()
    assert [v["kind"] for v in found] == ["unsynchronized_handoff"] * racy
    assert {(v["producer"], v["consumer"]) for v in found} == {("producer", "consumer")}
    assert all(v["producer_stream"] != v["consumer_stream"] for v in found)
    assert r.summary["violations"] == {"unsynchronized_handoff": racy}


def test_enforce_fixes_each_racy_handoff(dlshim):
    r = run(dlshim, "enforce")
    racy = THREADS * (ROUNDS // RACY_EVERY)
    assert r.violations() == []
    assert len(r.of("sync")) == racy and r.summary["barriers_inserted"] == racy
