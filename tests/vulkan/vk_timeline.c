/*
 * A queue's write handed to the host through DLPack, ordered (or not) by
 * semaphores: `vk_timeline MODE SUBMIT`.  As vk_queue, a fill of a buffer
 * is submitted held back by an event the host sets (vkCmdWaitEvents on a
 * vkSetEvent), so that the racy modes are deterministic: the host sets it
 * only after the consumer has read.  The fill's submission signals the
 * timeline semaphore `timeline` to 2 (an earlier, empty one signalled 1)
 * and the binary semaphore `binary`; no fence.  Real Vulkan calls only
 * (lavapipe in CI), on a Vulkan 1.3 device with timeline semaphores and
 * synchronization2 (exit 77 where either is missing).
 *
 *   wait         vkWaitSemaphores for 2 first
 *   wait_khr     the same through vkWaitSemaphoresKHR
 *   wait_any     vkWaitSemaphores for any of (timeline 2, another at 5,
 *                never signalled)
 *   counter      vkGetSemaphoreCounterValue asked until it says 2
 *   queue_wait   a second submission waits for timeline 2 and signals a
 *                fence, which the host waits for
 *   binary_wait  a second submission waits for the binary semaphore and
 *                signals a fence, which the host waits for
 *   early        vkWaitSemaphores for 1, the earlier submission's (race)
 *   unsynced     nothing waited for, the fill held back (race)
 *   unwaited     the event set (the fill may run) but nothing waited for:
 *                what the consumer reads depends on timing (race)
 *
 * SUBMIT: `submit` (vkQueueSubmit with VkTimelineSemaphoreSubmitInfo),
 * `submit2` (vkQueueSubmit2) or `submit2khr` (vkQueueSubmit2KHR).
 *
 * It prints what the consumer read (1 is the old value, 16843009 the
 * fill's) and exits 0 when every call it made succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_setup.h"

static const char *how = "submit";
static VkQueue queue;

/* One submission: at most one semaphore waited for and up to two
 * signalled, each with its value (ignored for a binary one). */
typedef struct {
    VkCommandBuffer cb; /* or NULL */
    VkSemaphore wait;
    uint64_t wait_value;
    VkSemaphore signal[2];
    uint64_t signal_value[2];
    VkFence fence;
} submission;

static void submit(const submission *s)
{
    uint32_t waits = s->wait ? 1 : 0, signals = s->signal[1] ? 2 : s->signal[0] ? 1 : 0;
    if (!strcmp(how, "submit")) {
        VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
        VkTimelineSemaphoreSubmitInfo tv = {
            .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
            .waitSemaphoreValueCount = waits, .pWaitSemaphoreValues = &s->wait_value,
            .signalSemaphoreValueCount = signals, .pSignalSemaphoreValues = s->signal_value};
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tv,
                           .waitSemaphoreCount = waits, .pWaitSemaphores = &s->wait,
                           .pWaitDstStageMask = &stage, .commandBufferCount = s->cb ? 1 : 0,
                           .pCommandBuffers = &s->cb, .signalSemaphoreCount = signals,
                           .pSignalSemaphores = s->signal};
        VK_CHECK(vkQueueSubmit(queue, 1, &si, s->fence));
        return;
    }
    VkSemaphoreSubmitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO,
                                  .semaphore = s->wait, .value = s->wait_value,
                                  .stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT};
    VkSemaphoreSubmitInfo signal[2];
    for (int i = 0; i < 2; i++)
        signal[i] = (VkSemaphoreSubmitInfo){.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO,
                                            .semaphore = s->signal[i],
                                            .value = s->signal_value[i],
                                            .stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT};
    VkCommandBufferSubmitInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO,
                                     .commandBuffer = s->cb};
    VkSubmitInfo2 si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO_2,
                        .waitSemaphoreInfoCount = waits, .pWaitSemaphoreInfos = &wait,
                        .commandBufferInfoCount = s->cb ? 1 : 0, .pCommandBufferInfos = &cbi,
                        .signalSemaphoreInfoCount = signals, .pSignalSemaphoreInfos = signal};
    if (!strcmp(how, "submit2khr")) {
        PFN_vkQueueSubmit2KHR submit2 =
            (PFN_vkQueueSubmit2KHR)vkGetDeviceProcAddr(device, "vkQueueSubmit2KHR");
        if (!submit2) {
            printf("no vkQueueSubmit2KHR\n");
            exit(77);
        }
        VK_CHECK(submit2(queue, 1, &si, s->fence));
    } else {
        VK_CHECK(vkQueueSubmit2(queue, 1, &si, s->fence));
    }
}

static VkResult wait_for(VkSemaphore s, uint64_t value, VkSemaphoreWaitFlags flags,
                         VkSemaphore other, uint64_t other_value, int khr)
{
    VkSemaphore sems[2] = {s, other};
    uint64_t values[2] = {value, other_value};
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .flags = flags,
                              .semaphoreCount = other ? 2 : 1, .pSemaphores = sems,
                              .pValues = values};
    if (khr) {
        PFN_vkWaitSemaphoresKHR wait =
            (PFN_vkWaitSemaphoresKHR)vkGetDeviceProcAddr(device, "vkWaitSemaphoresKHR");
        if (!wait) {
            printf("no vkWaitSemaphoresKHR\n");
            exit(77);
        }
        return wait(device, &wi, UINT64_MAX);
    }
    return vkWaitSemaphores(device, &wi, UINT64_MAX);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unsynced";
    how = argc > 2 ? argv[2] : "submit";
    setvbuf(stdout, NULL, _IOLBF, 0);
    VkPhysicalDeviceVulkan13Features f13 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, .synchronization2 = 1};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13,
        .timelineSemaphore = 1};
    /* The KHR forms of the calls: their extensions' names, which lavapipe
     * lists beside the core 1.3 functions (one extension per device here). */
    const char *extension = !strcmp(how, "submit2khr")   ? "VK_KHR_synchronization2"
                            : !strcmp(mode, "wait_khr") ? "VK_KHR_timeline_semaphore"
                                                        : NULL;
    open_device_with(VK_API_VERSION_1_3, &f12, extension);
    queue_rig rig;
    rig_open(&rig);
    queue = rig.queue;
    VkSemaphore timeline = semaphore_made(VK_SEMAPHORE_TYPE_TIMELINE);
    VkSemaphore never = semaphore_made(VK_SEMAPHORE_TYPE_TIMELINE);
    VkSemaphore binary = semaphore_made(VK_SEMAPHORE_TYPE_BINARY);

    /* An empty submission signals 1, waited for by the host. */
    submit(&(submission){.signal = {timeline}, .signal_value = {1}});
    VK_CHECK(wait_for(timeline, 1, 0, VK_NULL_HANDLE, 0, 0));

    /* The late fill signals 2, and the binary semaphore. */
    VkCommandBuffer cb = rig_begin(&rig, 1);
    vkCmdFillBuffer(cb, rig.buffer, 0, VK_WHOLE_SIZE, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(cb));
    submit(&(submission){.cb = cb, .signal = {timeline, binary}, .signal_value = {2, 0}});

    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    int racy = !strcmp(mode, "unsynced") || !strcmp(mode, "early"); /* held back */
    if (!racy)
        VK_CHECK(vkSetEvent(device, rig.gate));
    if (!strcmp(mode, "wait") || !strcmp(mode, "wait_khr"))
        VK_CHECK(wait_for(timeline, 2, 0, VK_NULL_HANDLE, 0, !strcmp(mode, "wait_khr")));
    if (!strcmp(mode, "wait_any"))
        VK_CHECK(wait_for(timeline, 2, VK_SEMAPHORE_WAIT_ANY_BIT, never, 5, 0));
    if (!strcmp(mode, "counter")) {
        uint64_t value = 0;
        while (value < 2)
            VK_CHECK(vkGetSemaphoreCounterValue(device, timeline, &value));
    }
    if (!strcmp(mode, "queue_wait") || !strcmp(mode, "binary_wait")) {
        int b = !strcmp(mode, "binary_wait");
        submit(&(submission){.wait = b ? binary : timeline, .wait_value = b ? 0 : 2,
                             .fence = fence});
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    }
    if (!strcmp(mode, "early"))
        VK_CHECK(wait_for(timeline, 1, 0, VK_NULL_HANDLE, 0, 0));

    rig_handoff(&rig, BYTES / 4);

    VK_CHECK(vkSetEvent(device, rig.gate));
    if (strcmp(mode, "binary_wait") != 0) /* the binary semaphore's signal is waited for */
        submit(&(submission){.wait = binary});
    VK_CHECK(vkQueueWaitIdle(queue));
    vkDestroyFence(device, fence, NULL);
    vkDestroySemaphore(device, timeline, NULL);
    vkDestroySemaphore(device, never, NULL);
    vkDestroySemaphore(device, binary, NULL);
    rig_close(&rig);
    return 0;
}
