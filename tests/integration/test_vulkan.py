"""Vulkan device memory through dlshim's Vulkan layer, on Mesa's lavapipe (a
real Vulkan 1.3 driver on the CPU), and its external-memory export imported
by CUDA on the simulated device: tests/vulkan/vk_share."""
import os

import pytest

from conftest import BUILD, PRELOAD_FIRST

VK_SHARE = BUILD / "tests" / "vulkan" / "vk_share"
VK_HIP = BUILD / "tests" / "vulkan" / "vk_hip"
LAVAPIPE = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"


def run(dlshim, mode, shim=True, env=None, program=VK_SHARE):
    e = {"VK_ICD_FILENAMES": LAVAPIPE, "LD_LIBRARY_PATH": str(BUILD / "simdev"),
         "DLSHIM_EVENTS": "all"}
    if PRELOAD_FIRST:  # the sanitizer runs: Mesa is not built for LeakSanitizer's exit check
        e["ASAN_OPTIONS"] = "detect_leaks=0"
    e.update(env or {})
    r = dlshim.run([program, mode], shim=shim, env=e)
    assert r.rc == 0, r.stdout + r.stderr
    return r


def vulkan_allocs(r, event="alloc", kind="device"):
    """Vulkan memory (kind device), or its host mappings (kind mapped)."""
    return [e for e in r.of(event) if e["api"] == "vulkan" and e["kind"] == kind]


@pytest.fixture(autouse=True)
def lavapipe():
    if not os.path.exists(LAVAPIPE):
        pytest.fail("lavapipe missing: scripts/install-deps installs mesa-vulkan-drivers")


def test_memory_is_logged_with_owner_size_and_type(dlshim):
    r = run(dlshim, "clean")
    [a] = vulkan_allocs(r)
    assert (a["device"], a["kind"], a["owner"], a["bytes"]) == ("vulkan:0", "device", "vk_share",
                                                                 65536)
    assert {"host_visible", "host_coherent", "exportable"} <= set(a["memory"])
    [f] = vulkan_allocs(r, "free")
    assert (f["base"], f["by"]) == (a["base"], "vk_share")
    assert r.violations() == [] and r.summary["allocations_live"] == 0


def test_tensor_of_a_buffer_is_linked_to_its_memory(dlshim):
    r = run(dlshim, "clean")
    [a] = vulkan_allocs(r)
    [x] = r.of("export")
    # data is the VkBuffer; the layer knows which memory it is bound to.
    assert x["device"] == "vulkan:0" and x["data"] != a["base"]
    assert (x["allocation"], x["allocation_owner"]) == (a["base"], "vk_share")


def test_early_free_of_shared_memory(dlshim):
    r = run(dlshim, "early_free")
    [v] = r.violations("free_while_shared")
    [a] = vulkan_allocs(r)
    assert v["data"] == a["base"]
    # reported, and (default policy) let through at once
    [f] = vulkan_allocs(r, "free")
    assert f["by"] == "vk_share"
    assert r.events.index(f) < r.events.index(r.of("release")[0])


def test_early_free_is_deferred_under_protect(dlshim):
    r = run(dlshim, "early_free", env={"DLSHIM_ON_ERROR": "protect"})
    assert len(r.violations("free_while_shared")) == 1
    [f] = vulkan_allocs(r, "free")
    assert f["by"] == "dlshim (deferred free)"
    assert r.events.index(f) > r.events.index(r.of("release")[0])
    assert r.summary["allocations_live"] == 0


def test_cuda_import_is_an_alias(dlshim):
    r = run(dlshim, "cuda_clean")
    [vk] = vulkan_allocs(r)
    [cu] = [e for e in r.of("alloc") if e["api"] == "cuda_runtime"]
    assert (cu["alias_of"], cu["alias_api"], cu["alias_owner"]) == (vk["base"], "vulkan",
                                                                    "vk_share")
    assert cu["bytes"] == 65536 and cu["device"] == "cuda:0"
    assert r.violations() == [] and r.summary["allocations_live"] == 0


def test_vulkan_free_while_cuda_maps_it(dlshim):
    r = run(dlshim, "cuda_early")
    [v] = r.violations("free_while_shared")
    [vk] = vulkan_allocs(r)
    assert v["data"] == vk["base"] and "cuda_runtime still maps it" in v["detail"]


def test_vulkan_free_waits_for_cuda_under_protect(dlshim):
    r = run(dlshim, "cuda_early", env={"DLSHIM_ON_ERROR": "protect"})
    assert len(r.violations("free_while_shared")) == 1
    [cu_free] = [e for e in r.of("free") if e["api"] == "cuda_runtime"]
    [vk_free] = vulkan_allocs(r, "free")
    assert vk_free["by"] == "dlshim (deferred free)"
    assert r.events.index(vk_free) > r.events.index(cu_free)
    assert r.summary["allocations_live"] == 0


def test_hip_import_is_an_alias_too(dlshim):
    r = run(dlshim, "hip_clean", program=VK_HIP)
    [vk] = vulkan_allocs(r)
    [hip] = [e for e in r.of("alloc") if e["api"] == "hip"]
    assert (hip["alias_of"], hip["alias_api"], hip["device"]) == (vk["base"], "vulkan", "rocm:0")
    assert r.violations() == [] and r.summary["allocations_live"] == 0
    early = run(dlshim, "hip_early", program=VK_HIP, env={"DLSHIM_ON_ERROR": "protect"})
    [v] = early.violations("free_while_shared")
    assert "hip still maps it" in v["detail"]
    [vk_free] = vulkan_allocs(early, "free")
    [hip_free] = [e for e in early.of("free") if e["api"] == "hip"]
    assert vk_free["by"] == "dlshim (deferred free)"
    assert early.events.index(vk_free) > early.events.index(hip_free)


@pytest.mark.parametrize("mode", ["clean", "cuda_clean", "map_clean"])
def test_same_output_with_and_without_shim(dlshim, mode):
    bare = run(dlshim, mode, shim=False)
    traced = run(dlshim, mode)
    assert bare.stdout == traced.stdout


def test_layer_off_with_the_family(dlshim):
    r = run(dlshim, "clean", env={"DLSHIM_HOOKS": "python,cuda"})
    assert vulkan_allocs(r) == []
    [x] = r.of("export")
    assert "allocation" not in x


def test_host_mapping_is_a_view_of_its_memory(dlshim):
    r = run(dlshim, "map_clean")
    [mem] = vulkan_allocs(r)
    maps = vulkan_allocs(r, kind="mapped")
    assert len(maps) == 2  # the program's fill, then the shared view
    assert {(m["alias_of"], m["device"], m["bytes"]) for m in maps} == {(mem["base"], "cpu:0",
                                                                        65536)}
    [x] = r.of("export")
    assert x["allocation"] == maps[1]["base"] and x["device"] == "cpu:0"
    assert r.violations() == [] and r.summary["allocations_live"] == 0


def test_unmap_while_a_cpu_tensor_is_shared(dlshim):
    r = run(dlshim, "map_unmap")
    [v] = r.violations("free_while_shared")
    assert v["data"] == vulkan_allocs(r, kind="mapped")[1]["base"]
    protected = run(dlshim, "map_unmap", env={"DLSHIM_ON_ERROR": "protect"})
    unmap = vulkan_allocs(protected, "free", kind="mapped")[1]
    assert unmap["by"] == "dlshim (deferred free)"
    assert protected.events.index(unmap) > protected.events.index(protected.of("release")[0])


def test_free_of_mapped_memory_waits_for_the_cpu_tensor_under_protect(dlshim):
    # Without protect the consumer's read after the free faults on lavapipe.
    r = run(dlshim, "map_free", env={"DLSHIM_ON_ERROR": "protect"})
    [mem] = vulkan_allocs(r)
    [v] = r.violations("free_while_shared")
    assert v["data"] == mem["base"] and "consumer read 5" in r.stdout
    [free] = vulkan_allocs(r, "free")
    assert free["by"] == "dlshim (deferred free)"
    assert r.events.index(free) > r.events.index(r.of("release")[0])
    assert r.summary["allocations_live"] == 0


# ---- queues in the stream model: tests/vulkan/vk_queue (a fill submitted to
# the queue, held back by an event the host sets, then a CPU tensor over the
# buffer's host mapping handed to a consumer that reads it; image_…: an image
# copied into the buffer instead of the fill; secondary_…: the fill recorded
# in a secondary command buffer that the primary executes)
VK_QUEUE = BUILD / "tests" / "vulkan" / "vk_queue"
FILLED, OLD = "consumer saw 16843009", "consumer saw 1"


def queue(dlshim, mode, sync=None, shim=True):
    return run(dlshim, mode, shim=shim, program=VK_QUEUE,
               env={"DLSHIM_SYNC": sync} if sync else None)


@pytest.mark.parametrize("mode", ["unsynced", "early_fence", "image_unsynced",
                                  "image_early_fence", "secondary_unsynced",
                                  "secondary_early_fence", "image2_unsynced", "copy2_unsynced",
                                  "copy2_early_fence"])
def test_a_queue_write_read_on_the_host_before_it_is_waited_for(dlshim, mode):
    assert OLD in queue(dlshim, mode, shim=False).stdout  # the race is real
    r = queue(dlshim, mode, "check")
    assert OLD in r.stdout  # check changes nothing
    [v] = r.violations()
    [exp] = r.of("export")
    assert (v["kind"], v["tensor"], v["producer"], v["consumer"]) == \
        ("unsynchronized_handoff", exp["tensor"], "vkproducer", "cpuconsumer")
    assert v["producer_stream"].startswith("queue 0x") and v["consumer_stream"] == "host"


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["fence", "fence_status", "queue_idle", "device_idle",
                                  "image_fence", "image_queue_idle", "secondary_fence",
                                  "image2_fence", "copy2_fence"])
def test_a_queue_write_waited_for_is_silent(dlshim, mode, sync):
    bare, r = queue(dlshim, mode, shim=False), queue(dlshim, mode, sync)
    assert FILLED in r.stdout and r.stdout == bare.stdout
    assert r.violations() == [] and r.of("sync") == []


@pytest.mark.parametrize("mode", ["unwaited", "image_unwaited", "secondary_unwaited",
                                  "image2_unwaited", "copy2_unwaited"])
def test_enforce_waits_for_the_queue_on_the_consumers_behalf(dlshim, mode):
    # The fill (or the image's copy) may run, but nothing waits for it: the
    # shim waits for the submission's fence before the consumer reads.
    r = queue(dlshim, mode, "enforce")
    assert FILLED in r.stdout and r.violations() == []
    [s] = r.of("sync")
    assert s["producer_stream"].startswith("queue 0x") and s["consumer_stream"] == "host"
    assert r.summary["barriers_inserted"] == 1


def test_enforce_never_waits_forever_for_a_queue_the_program_holds_back(dlshim):
    # The program sets the event the fill waits for only after the read: a
    # wait for the fence would never end, so it gives up and reports.
    r = queue(dlshim, "unsynced", "enforce")
    assert OLD in r.stdout
    assert [v["kind"] for v in r.violations()] == ["unsynchronized_handoff"]
    assert r.of("sync") == []


# ---- semaphores as edges: tests/vulkan/vk_timeline (the same held-back fill,
# signalling a timeline semaphore to 2 and a binary one, no fence; submitted
# with vkQueueSubmit, vkQueueSubmit2 or vkQueueSubmit2KHR).  Lavapipe has one
# queue: the binary semaphore's edge between queues cannot be shown there,
# only that waiting through it is silent.
VK_TIMELINE = BUILD / "tests" / "vulkan" / "vk_timeline"
HANDOFF_EVENTS = ("export", "import", "release", "sync", "violation")


def timeline(dlshim, mode, how, sync=None, shim=True):
    e = {"VK_ICD_FILENAMES": LAVAPIPE, "DLSHIM_EVENTS": "all"}
    if PRELOAD_FIRST:
        e["ASAN_OPTIONS"] = "detect_leaks=0"
    if sync:
        e["DLSHIM_SYNC"] = sync
    r = dlshim.run([VK_TIMELINE, mode, how], shim=shim, env=e)
    if r.rc == 77:  # lavapipe on Debian 12 (Mesa 22.3) has both: never expected here
        pytest.skip(f"lavapipe lacks what vk_timeline {mode} {how} needs: {r.stdout.strip()}")
    assert r.rc == 0, r.stdout + r.stderr
    return r


def handoff(r):
    """The handoff's events, in order, and the kinds of its violations."""
    return ([e["event"] for e in r.events if e["event"] in HANDOFF_EVENTS],
            [v["kind"] for v in r.violations()])


def assert_reported_before_the_import(r):
    """One unsynchronized_handoff of the tensor exported, from a queue to the
    host, logged before the consumer's import."""
    assert handoff(r) == (["export", "violation", "import", "release"],
                          ["unsynchronized_handoff"])
    [v], [exp] = r.violations(), r.of("export")
    assert (v["tensor"], v["producer"], v["consumer"]) == (exp["tensor"], "vkproducer",
                                                           "cpuconsumer")
    assert v["producer_stream"].startswith("queue 0x") and v["consumer_stream"] == "host"


WAITED = [("wait", "submit"), ("wait", "submit2"), ("wait", "submit2khr"),
          ("wait_khr", "submit"), ("wait_any", "submit"), ("wait_any", "submit2"),
          ("counter", "submit"), ("counter", "submit2"), ("queue_wait", "submit"),
          ("queue_wait", "submit2"), ("binary_wait", "submit"), ("binary_wait", "submit2")]


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode,how", WAITED)
def test_a_semaphore_waited_for_orders_the_write_before_the_host(dlshim, mode, how, sync):
    bare, r = timeline(dlshim, mode, how, shim=False), timeline(dlshim, mode, how, sync)
    assert FILLED in r.stdout and r.stdout == bare.stdout
    assert handoff(r) == (["export", "import", "release"], [])


@pytest.mark.parametrize("how", ["submit", "submit2", "submit2khr"])
@pytest.mark.parametrize("mode", ["early", "unsynced"])
def test_a_timeline_value_waited_for_before_the_writes(dlshim, mode, how):
    # early: the host waited for value 1, the fill signals 2.
    assert OLD in timeline(dlshim, mode, how, shim=False).stdout  # the race is real
    r = timeline(dlshim, mode, how, "check")
    assert OLD in r.stdout
    assert_reported_before_the_import(r)


@pytest.mark.parametrize("how", ["submit", "submit2"])
def test_enforce_waits_for_the_timeline_value_on_the_consumers_behalf(dlshim, how):
    # No fence: the shim waits for the value the queue's last submission
    # signals before the consumer reads.
    r = timeline(dlshim, "unwaited", how, "enforce")
    assert FILLED in r.stdout
    assert handoff(r) == (["export", "sync", "import", "release"], [])
    [s] = r.of("sync")
    assert s["producer_stream"].startswith("queue 0x") and s["consumer_stream"] == "host"
    assert r.summary["barriers_inserted"] == 1


@pytest.mark.parametrize("mode", ["early", "unsynced"])
def test_enforce_never_waits_forever_for_a_timeline_the_program_holds_back(dlshim, mode):
    # The value is signalled only after the event the host sets after the
    # read: the wait gives up (one second) and reports.
    r = timeline(dlshim, mode, "submit2", "enforce")
    assert OLD in r.stdout
    assert handoff(r) == (["export", "violation", "import", "release"],
                          ["unsynchronized_handoff"])


# ---- dispatches through descriptor sets: tests/vulkan/vk_dispatch (a compute
# shader writing the storage buffer at set 0, binding 0, held back by an
# event the host sets, then a CPU tensor over the buffer's host mapping
# handed to a consumer that reads it; pushed…: the buffer pushed with
# vkCmdPushDescriptorSetKHR instead of bound through a set; tpushed…: pushed
# through a push descriptor update template;
# texel…: bound as a storage texel buffer, through a buffer view; pushed2… and
# bind2…: VK_KHR_maintenance6's vkCmdPushDescriptorSet2KHR and
# vkCmdBindDescriptorSets2KHR, tpushed2…: vkCmdPushDescriptorSetWithTemplate2KHR, and
# core…/tcore…/core2…/bcore2…/tcore2…: vkCmdPushDescriptorSet,
# vkCmdPushDescriptorSetWithTemplate, vkCmdPushDescriptorSet2, vkCmdBindDescriptorSets2 and
# vkCmdPushDescriptorSetWithTemplate2, Vulkan 1.4's core names, all of which
# lavapipe 22.3 lacks: the simulated
# device's layer gives them, below dlshim's, as it gives vk_extsem its
# exported semaphores)
VK_DISPATCH = BUILD / "tests" / "vulkan" / "vk_dispatch"
SIMULATED_LAYER = "VK_LAYER_DLSHIM_simulated_vulkan"


def dispatch(dlshim, mode, sync=None, shim=True):
    env = {"DLSHIM_SYNC": sync} if sync else {}
    if mode.startswith(("pushed2", "bind2", "core", "tcore", "tpushed2", "bcore2")):
        env["VK_ADD_LAYER_PATH"] = str(BUILD / "simdev" / "vulkan")
        env["VK_INSTANCE_LAYERS"] = ("VK_LAYER_DLSHIM_ledger:" if shim else "") + \
            SIMULATED_LAYER
    return run(dlshim, mode, shim=shim, program=VK_DISPATCH, env=env)


@pytest.mark.parametrize("mode", ["unsynced", "dynamic", "copied", "templated", "indirect",
                                  "pushed", "pushed2", "bind2", "texel", "core", "tpushed",
                                  "tcore", "tpushed2", "core2", "bcore2", "tcore2"])
def test_a_dispatch_writes_the_storage_buffers_bound(dlshim, mode):
    assert OLD in dispatch(dlshim, mode, shim=False).stdout  # the race is real
    r = dispatch(dlshim, mode, "check")
    assert OLD in r.stdout
    assert_reported_before_the_import(r)


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["fence", "pushed_fence", "pushed2_fence", "bind2_fence",
                                  "texel_fence", "core_fence", "tpushed_fence", "tcore_fence",
                                  "tpushed2_fence", "core2_fence", "bcore2_fence",
                                  "tcore2_fence"])
def test_a_dispatch_waited_for_is_silent(dlshim, mode, sync):
    bare, r = dispatch(dlshim, mode, shim=False), dispatch(dlshim, mode, sync)
    assert FILLED in r.stdout and r.stdout == bare.stdout
    assert handoff(r) == (["export", "import", "release"], [])


@pytest.mark.parametrize("mode", ["unwaited", "pushed_unwaited", "pushed2_unwaited",
                                  "bind2_unwaited", "texel_unwaited", "core_unwaited",
                                  "tpushed_unwaited", "tcore_unwaited", "tpushed2_unwaited",
                                  "core2_unwaited", "bcore2_unwaited", "tcore2_unwaited"])
def test_enforce_waits_for_the_dispatch_on_the_consumers_behalf(dlshim, mode):
    r = dispatch(dlshim, mode, "enforce")
    assert FILLED in r.stdout
    assert handoff(r) == (["export", "sync", "import", "release"], [])
    assert r.summary["barriers_inserted"] == 1


@pytest.mark.parametrize("mode", ["unbound", "replaced", "reset", "template", "dynamic_far",
                                  "pushed_replaced", "pushed2_replaced", "bind2_replaced",
                                  "texel_replaced", "core_replaced", "tpushed_replaced",
                                  "tpushed2_replaced", "core2_replaced", "bcore2_replaced"])
def test_bytes_no_dispatch_writes_are_not_counted(dlshim, mode):
    # The buffer is in a set, but not one bound when the dispatch is
    # recorded: the dispatch writes another buffer, and this one is not
    # written at all (the consumer reads the old bytes, with or without the
    # shim, and no wait is owed).  dynamic_far: bound, but its dynamic
    # offset puts the write past the bytes handed over.  pushed_replaced:
    # pushed, then another buffer pushed to the same binding.
    bare, r = dispatch(dlshim, mode, shim=False), dispatch(dlshim, mode, "check")
    assert OLD in bare.stdout and r.stdout == bare.stdout
    assert handoff(r) == (["export", "import", "release"], [])
# ---- a kDLVulkan tensor from one queue to another: tests/vulkan/vk_consume
# (a fill of a buffer on device memory, held back by an event the host sets,
# the buffer handed over as a kDLVulkan tensor, and the consumer's copy of
# it submitted to a second queue).  Lavapipe has one queue: the simulated
# device's layer gives a second, run on the driver's one, so what the copy
# reads is the fill's either way (the race is the model's to see).
VK_CONSUME = BUILD / "tests" / "vulkan" / "vk_consume"


def consume(dlshim, mode, sync):
    return run(dlshim, mode, program=VK_CONSUME,
               env={"DLSHIM_SYNC": sync, "VK_ADD_LAYER_PATH": str(BUILD / "simdev" / "vulkan"),
                    "VK_INSTANCE_LAYERS": "VK_LAYER_DLSHIM_ledger:" + SIMULATED_LAYER})


def assert_queue_to_queue(e, offset=0):
    assert (e["producer"], e["consumer"], e["memory_offset"]) == ("vkproducer", "vkconsumer",
                                                                 offset)
    assert e["producer_stream"].startswith("queue 0x")
    assert e["consumer_stream"].startswith("queue 0x")
    assert e["producer_stream"] != e["consumer_stream"]


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["unsynced", "memory", "copy2", "uniform"])
def test_a_kdlvulkan_tensor_used_on_another_queue_before_the_write_is_ordered(dlshim, mode,
                                                                             sync):
    # The fill runs only after the consumer's copy is submitted: under
    # enforce the host's wait for the producer's queue gives up (a second)
    # and reports.  memory: the tensor carries the VkDeviceMemory itself;
    # copy2: the consumer copies with vkCmdCopyBuffer2; uniform: its use is a
    # dispatch with the tensor bound as a uniform buffer (a read).
    r = consume(dlshim, mode, sync)
    assert handoff(r) == (["export", "import", "violation", "release"],
                          ["unsynchronized_handoff"])
    [v], [exp] = r.violations(), r.of("export")
    assert v["tensor"] == exp["tensor"]
    assert_queue_to_queue(v)


def test_enforce_waits_for_the_producers_queue_before_the_consumers_submission(dlshim):
    r = consume(dlshim, "opened", "check")
    assert handoff(r)[1] == ["unsynchronized_handoff"]
    r = consume(dlshim, "opened", "enforce")
    assert FILLED in r.stdout
    assert handoff(r) == (["export", "import", "sync", "release"], [])
    assert_queue_to_queue(r.of("sync")[0])
    assert r.summary["barriers_inserted"] == 1


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["semaphore", "timeline", "fence", "apart"])
def test_a_kdlvulkan_tensor_whose_write_is_ordered_or_elsewhere_is_silent(dlshim, mode, sync):
    # semaphore, timeline: the copy's submission waits for what the fill's
    # signals; fence: the host waited for the fill; apart: the fill wrote
    # the buffer's first half, the tensor is its second (byte_offset).
    r = consume(dlshim, mode, sync)
    assert handoff(r) == (["export", "import", "release"], [])
    assert r.summary["barriers_inserted"] == 0


# ---- a semaphore exported to CUDA: tests/vulkan/vk_extsem (Vulkan's
# vkGetSemaphoreFdKHR, the descriptor imported by cudaImportExternalSemaphore
# on the simulated device).  Lavapipe on Debian 12 has no
# VK_KHR_external_semaphore_fd: the simulated device's layer
# (tests/simdev/vk_simulated.c) gives it, below dlshim's layer as a
# driver's would be.  Without it the program exits 77, which fails here.
VK_EXTSEM = BUILD / "tests" / "vulkan" / "vk_extsem"


def extsem(dlshim, mode, sync=None, shim=True, program=VK_EXTSEM):
    # The simulated device runs each operation as it is queued: its
    # semaphore waits do not wait for lavapipe's signals (nor lavapipe's for
    # its), so its stream threads would really race the program's reads,
    # which ThreadSanitizer reports (the model's verdict is the same).
    env = {"VK_ADD_LAYER_PATH": str(BUILD / "simdev" / "vulkan"),
           "VK_INSTANCE_LAYERS": "VK_LAYER_DLSHIM_ledger:" + SIMULATED_LAYER,
           "SIMDEV_IMMEDIATE": "1"}
    if sync:
        env["DLSHIM_SYNC"] = sync
    return run(dlshim, mode, shim=shim, env=env, program=program)


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["vk_to_cuda", "cuda_to_vk"])
def test_a_semaphore_shared_with_cuda_orders_the_two_apis(dlshim, mode, sync):
    # vk_to_cuda: the queue's fill, then the CUDA stream's wait for the
    # semaphore it signals, then the host's synchronize of that stream;
    # cuda_to_vk: the CUDA stream's fill, its signal, a submission's wait
    # and the host's wait for its fence.  Each orders the write before the
    # consumer only through the semaphore.
    # (What the consumer reads is not compared: the simulated device's
    # semaphore wait does not wait for lavapipe's signal, nor the reverse.)
    assert extsem(dlshim, mode, shim=False).rc == 0
    r = extsem(dlshim, mode, sync)
    assert handoff(r) == (["export", "import", "release"], [])
    assert r.summary["barriers_inserted"] == 0


# mode: the race, its events in order, who produced and consumed on which
# stream (the producer's by its prefix).
RACES = [("vk_to_cuda_nowait", ["export", "violation", "import", "release"],
          ("vkproducer", "cpuconsumer", "queue 0x", "host")),
         ("cuda_to_vk_nowait", ["export", "import", "violation", "release"],
          ("cudaproducer", "cudaconsumer", "stream 0x", "legacy default stream"))]


@pytest.mark.parametrize("mode,events,who", RACES)
def test_a_write_the_other_api_did_not_wait_for_is_reported(dlshim, mode, events, who):
    r = extsem(dlshim, mode, "check")
    assert handoff(r) == (events, ["unsynchronized_handoff"])
    [v], [exp] = r.violations(), r.of("export")
    assert v["tensor"] == exp["tensor"]
    assert (v["producer"], v["consumer"], v["consumer_stream"]) == (who[0], who[1], who[3])
    assert v["producer_stream"].startswith(who[2])


@pytest.mark.parametrize("mode,program", [("vk_to_cuda_nowait", VK_EXTSEM),
                                          ("vk_to_hip_nowait", VK_HIP)])
def test_the_vulkan_write_race_is_real(dlshim, mode, program):
    # The fill is held back until after the read: the consumer reads stale data.
    assert OLD in extsem(dlshim, mode, shim=False, program=program).stdout


def test_enforce_orders_the_cuda_write_the_submission_did_not_wait_for(dlshim):
    r = extsem(dlshim, "cuda_to_vk_nowait", "enforce")
    assert r.violations() == [] and r.summary["barriers_inserted"] == 1
    [s] = r.of("sync")
    assert (s["producer"], s["consumer"]) == ("cudaproducer", "cudaconsumer")


# ---- a timeline semaphore exported to CUDA (tl_* modes of vk_extsem: Vulkan
# 1.2's, imported as cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd):
# the producer signals 1, writes, signals 2; the consumer's side waits for
# 2 (silent) or only for 1 (_wait1: the write held back, the race).  Its
# signals and waits are of values, which the simulated device's layer and
# device do not carry between the two APIs (a wait for the other API's
# value is no wait there): the events are what is asserted.
# (_drv: CUDA's side through the driver's functions.)
TIMELINE_ORDERED = ["tl_vk_to_cuda", "tl_cuda_to_vk", "tl_cuda_to_host", "tl_vkmem_sem",
                    "tl_vk_to_cuda_drv", "tl_cuda_to_vk_drv", "tl_vk_to_cuda_early"]


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", TIMELINE_ORDERED)
def test_a_timeline_semaphore_shared_with_cuda_orders_the_two_apis(dlshim, mode, sync):
    # tl_vk_to_cuda: the queue's fill signals 2, the CUDA stream waits for
    # 2, the host synchronizes that stream; tl_vkmem_sem: the same, read
    # through CUDA's import of the memory on that stream; tl_cuda_to_vk:
    # the CUDA stream's fill signals 2, a submission waits for 2 and the
    # host for its fence; tl_cuda_to_host: the host waits for 2 itself;
    # tl_vk_to_cuda_early: the CUDA stream's wait for 2 queued before the
    # queue's submissions (wait-before-signal: ordered from the signal on).
    assert extsem(dlshim, mode, shim=False).rc == 0
    r = extsem(dlshim, mode, sync)
    assert handoff(r) == (["export", "import", "release"], [])
    assert r.summary["barriers_inserted"] == 0


# mode: the race, its events in order, who produced and consumed on which
# stream (each stream by its prefix).
TIMELINE_RACES = [
    ("tl_vk_to_cuda_wait1", ["export", "violation", "import", "release"],
     ("vkproducer", "cpuconsumer", "queue 0x", "host")),
    ("tl_vk_to_cuda_nowait", ["export", "violation", "import", "release"],
     ("vkproducer", "cpuconsumer", "queue 0x", "host")),
    ("tl_vk_to_cuda_early_wait1", ["export", "violation", "import", "release"],
     ("vkproducer", "cpuconsumer", "queue 0x", "host")),
    ("tl_vkmem_sem_wait1", ["export", "import", "violation", "release"],
     ("vkproducer", "cudaconsumer", "queue 0x", "stream 0x")),
    ("tl_cuda_to_vk_wait1", ["export", "import", "violation", "release"],
     ("cudaproducer", "cudaconsumer", "stream 0x", "legacy default stream")),
    ("tl_cuda_to_vk_nowait", ["export", "import", "violation", "release"],
     ("cudaproducer", "cudaconsumer", "stream 0x", "legacy default stream")),
    ("tl_cuda_to_host_wait1", ["export", "import", "violation", "release"],
     ("cudaproducer", "cudaconsumer", "stream 0x", "legacy default stream")),
    ("tl_vk_to_cuda_drv_wait1", ["export", "violation", "import", "release"],
     ("vkproducer", "cpuconsumer", "queue 0x", "host")),
    ("tl_cuda_to_vk_drv_wait1", ["export", "import", "violation", "release"],
     ("cudaproducer", "cudaconsumer", "stream 0x", "legacy default stream"))]


@pytest.mark.parametrize("mode,events,who", TIMELINE_RACES)
def test_a_wait_for_an_earlier_timeline_value_is_reported(dlshim, mode, events, who):
    # A wait for 1 merges the producer's signal of 1 only: its write,
    # before the signal of 2, is unordered before the consumer.
    r = extsem(dlshim, mode, "check")
    assert handoff(r) == (events, ["unsynchronized_handoff"])
    [v], [exp] = r.violations(), r.of("export")
    assert v["tensor"] == exp["tensor"]
    assert (v["producer"], v["consumer"]) == who[:2]
    assert v["producer_stream"].startswith(who[2])
    assert v["consumer_stream"].startswith(who[3])


def test_the_write_after_the_timeline_value_waited_for_is_a_real_race(dlshim):
    # The fill, signalling 2, is held back until after the read: a consumer
    # that waited for 1 reads stale data.
    assert OLD in extsem(dlshim, "tl_vk_to_cuda_wait1", shim=False).stdout


# ---- Vulkan memory imported by CUDA (cudaImportExternalMemory and
# cudaExternalMemoryGetMappedBuffer), the queue's fill read through a CUDA
# tensor over CUDA's mapping on a CUDA stream: the whole memory mapped, the
# fill submitted after the mapping (vkmem_*) or before it (vkmem_early_*);
# or 32 KiB mapped at offset 16 KiB of the memory, the tensor 8 KiB of it,
# the fill inside the tensor's bytes (vkmem_window_inside_*) or over the
# mapping's start but none of them (vkmem_window_outside_*).  What the
# consumer reads is not compared: the simulated device maps lavapipe's
# exported file, whose header comes before the memory, so its bytes do not
# alias Vulkan's; the events are what is asserted.
@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["vkmem_sem", "vkmem_fence", "vkmem_early_sem",
                                  "vkmem_early_fence", "vkmem_window_inside_sem",
                                  "vkmem_window_inside_fence", "vkmem_window_outside_nowait"])
def test_a_vulkan_write_ordered_before_a_cuda_import_of_its_memory_is_silent(dlshim, mode,
                                                                              sync):
    assert extsem(dlshim, mode, shim=False).rc == 0
    r = extsem(dlshim, mode, sync)
    assert r.rc == 0
    assert handoff(r) == (["export", "import", "release"], [])
    assert r.summary["barriers_inserted"] == 0


@pytest.mark.parametrize("sync", ["check", "enforce"])
@pytest.mark.parametrize("mode", ["vkmem_nowait", "vkmem_early_nowait",
                                  "vkmem_window_inside_nowait"])
def test_a_vulkan_write_unordered_before_a_cuda_import_of_its_memory_is_reported(dlshim, mode,
                                                                                  sync):
    # Enforce has no barrier to put between a queue and a CUDA stream (and
    # the program holds the fill back itself): it reports, and never waits.
    r = extsem(dlshim, mode, sync)
    assert r.rc == 0
    assert handoff(r) == (["export", "import", "violation", "release"],
                          ["unsynchronized_handoff"])
    [v], [exp] = r.violations(), r.of("export")
    assert v["tensor"] == exp["tensor"]
    assert (v["producer"], v["consumer"]) == ("vkproducer", "cudaconsumer")
    assert v["producer_stream"].startswith("queue 0x")
    assert v["consumer_stream"].startswith("stream 0x")


@pytest.mark.parametrize("sync", ["check", "enforce"])
def test_a_semaphore_shared_with_hip_orders_the_queue_before_its_stream(dlshim, sync):
    assert extsem(dlshim, "vk_to_hip", shim=False, program=VK_HIP).rc == 0
    r = extsem(dlshim, "vk_to_hip", sync, program=VK_HIP)
    assert handoff(r) == (["export", "import", "release"], [])


@pytest.mark.parametrize("sync", ["check", "enforce"])
def test_a_timeline_semaphore_shared_with_hip_orders_the_queue_by_value(dlshim, sync):
    # Imported as ROCm 6's timeline type: the HIP stream waits for the fill's value, 2.
    assert extsem(dlshim, "tl_vk_to_hip", shim=False, program=VK_HIP).rc == 0
    r = extsem(dlshim, "tl_vk_to_hip", sync, program=VK_HIP)
    assert handoff(r) == (["export", "import", "release"], [])


def test_a_hip_wait_for_an_earlier_timeline_value_is_reported(dlshim):
    # The HIP stream waits for 1 (an empty submission's) only; the fill signals 2.
    assert OLD in extsem(dlshim, "tl_vk_to_hip_wait1", shim=False, program=VK_HIP).stdout
    r = extsem(dlshim, "tl_vk_to_hip_wait1", "check", program=VK_HIP)
    assert OLD in r.stdout
    assert handoff(r) == (["export", "violation", "import", "release"],
                          ["unsynchronized_handoff"])
    [v] = r.violations()
    assert (v["producer"], v["consumer"]) == ("vkproducer", "cpuconsumer")
    assert v["producer_stream"].startswith("queue 0x") and v["consumer_stream"] == "host"


def test_a_vulkan_write_the_hip_stream_did_not_wait_for(dlshim):
    r = extsem(dlshim, "vk_to_hip_nowait", "check", program=VK_HIP)
    assert handoff(r) == (["export", "violation", "import", "release"],
                          ["unsynchronized_handoff"])
    [v] = r.violations()
    assert (v["producer"], v["consumer"], v["consumer_stream"]) == ("vkproducer", "cpuconsumer",
                                                                    "host")
