"""Per-thread default streams: tests/device/handoff.c built as `nvcc
--default-stream per-thread` builds it (handoff_ptsz: the header turns its
stream calls into cudaMemsetAsync_ptsz, cudaEventRecord_ptsz, … and its
synchronous ones into cudaMemset_ptds, …), on the simulated device, whose
runtime and driver export those twins.  The shim's wrappers of the twins
(generated from the same .def rows as the legacy ones) feed the stream
model with stream 0 as the calling thread's default stream: the races of a
normal build are reported and fixed the same, and driver functions looked
up with the per-thread flag come back as the per-thread wrappers."""
import functools

import pytest

import test_sync

FRESH, STALE = "consumer saw 16843009", "consumer saw 0"
PROGRAM = "handoff_ptsz"
# driver_default_consumer: the consumer's copy made with a driver function
# looked up through cudaGetDriverEntryPointByVersion_ptsz (the per-thread
# twin, cuMemcpyDtoHAsync_v2_ptsz) on stream 0, this thread's default stream.
RACY = ["unsynced", "settled", "event_before", "legacy_nonblocking", "driver_consumer",
        "driver_default_consumer"]
SYNCHRONIZED = ["event", "event_driver", "host_sync", "same_stream", "semaphore", "host_fn",
                "host_fn_driver", "stream_callback", "stream_callback_driver"]


handoff = functools.partial(test_sync.handoff, program=PROGRAM)


def test_the_program_calls_the_per_thread_twins():
    from conftest import DEVICE_BIN
    import subprocess
    out = subprocess.run(["nm", "-D", str(DEVICE_BIN / PROGRAM)], capture_output=True,
                         text=True, check=True).stdout
    for name in ("cudaMemsetAsync_ptsz", "cudaEventRecord_ptsz", "cudaMemcpyAsync_ptsz",
                 "cudaStreamWaitEvent_ptsz", "cudaMemset_ptds",
                 "cudaGetDriverEntryPointByVersion_ptsz"):
        assert f" {name}@" in out, name
    assert " cudaMemsetAsync@" not in out and " cudaMemset@" not in out


@pytest.mark.parametrize("mode", RACY)
def test_race_is_real_without_the_shim(dlshim, mode):
    assert STALE in handoff(dlshim, mode, shim=False).stdout


@pytest.mark.parametrize("mode", RACY)
def test_check_reports_the_race(dlshim, mode):
    r = handoff(dlshim, mode, "check")
    assert r.rc == 0 and STALE in r.stdout  # check changes nothing
    [v] = r.violations()
    [exp] = r.of("export")
    assert v["kind"] == "unsynchronized_handoff" and v["tensor"] == exp["tensor"]
    assert (v["producer"], v["consumer"]) == ("producer", "consumer")
    assert v["producer_stream"] != v["consumer_stream"]
    if mode == "legacy_nonblocking":
        # stream 0 in a _ptsz call: this thread's default stream, not the legacy one
        assert v["producer_stream"].startswith("per-thread default stream of thread")
    if mode == "driver_default_consumer":
        assert v["consumer_stream"].startswith("per-thread default stream of thread")
    assert r.of("sync") == []


@pytest.mark.parametrize("mode", RACY)
def test_enforce_inserts_the_barrier(dlshim, mode):
    r = handoff(dlshim, mode, "enforce")
    assert r.rc == 0 and FRESH in r.stdout
    [s] = r.of("sync")
    [exp] = r.of("export")
    assert s["tensor"] == exp["tensor"] and s["producer_stream"] != s["consumer_stream"]
    assert r.violations() == []
    assert r.summary["barriers_inserted"] == 1


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", SYNCHRONIZED)
def test_synchronized_programs_stay_silent(dlshim, mode, sync):
    r = handoff(dlshim, mode, sync)
    assert r.rc == 0 and FRESH in r.stdout
    assert r.violations() == [] and r.of("sync") == []
    assert r.summary["barriers_inserted"] == 0


# ---- HIP: hip_handoff built with HIP_API_PER_THREAD_DEFAULT_STREAM, as
# `hipcc -fgpu-default-stream=per-thread` builds it: HIP names each twin
# name_spt (stream and synchronous calls alike); the simulated runtime
# exports HIP 6's set.
hip = functools.partial(test_sync.handoff, program="hip_handoff_spt")


def test_the_hip_program_calls_the_spt_twins():
    from conftest import DEVICE_BIN
    import subprocess
    out = subprocess.run(["nm", "-D", str(DEVICE_BIN / "hip_handoff_spt")], capture_output=True,
                         text=True, check=True).stdout
    for name in ("hipMemsetAsync_spt", "hipEventRecord_spt", "hipMemcpyAsync_spt",
                 "hipStreamWaitEvent_spt", "hipStreamAddCallback_spt", "hipMemset_spt"):
        assert f" {name}@" in out, name
    assert " hipMemsetAsync@" not in out and " hipMemcpyAsync@" not in out


@pytest.mark.parametrize("mode", ["unsynced", "default_consumer"])
def test_hip_per_thread_races_are_reported_and_fixed(dlshim, mode):
    # default_consumer: the consumer's copy on stream 0, which the legacy
    # build orders after the producer's stream (the null stream) and the
    # per-thread build does not (this thread's own default stream).
    assert STALE in hip(dlshim, mode, shim=False).stdout
    checked = hip(dlshim, mode, "check")
    assert STALE in checked.stdout
    [v] = checked.violations()
    assert v["kind"] == "unsynchronized_handoff"
    if mode == "default_consumer":
        assert v["consumer_stream"].startswith("per-thread default stream of thread")
    enforced = hip(dlshim, mode, "enforce")
    assert FRESH in enforced.stdout and enforced.violations() == []
    assert len(enforced.of("sync")) == 1


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["event", "stream_callback"])
def test_hip_per_thread_synchronized_stays_silent(dlshim, mode, sync):
    r = hip(dlshim, mode, sync)
    assert r.rc == 0 and FRESH in r.stdout
    assert r.violations() == [] and r.of("sync") == []


def test_hip_null_stream_orders_the_legacy_build(dlshim):
    r = test_sync.handoff(dlshim, "default_consumer", "check", program="hip_handoff")
    assert FRESH in r.stdout and r.violations() == [] and r.of("sync") == []
