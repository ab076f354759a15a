/*
 * bench/vk_submit.c — what the Vulkan layer adds to a queue submission,
 * measured by bench/run with DLSHIM_SYNC=off/check/enforce and without the
 * shim, on whatever Vulkan driver the loader finds (lavapipe in CI).  Real
 * Vulkan calls only.
 *
 *   vk_submit FORM N   prints {"form":FORM,"ns":<per submission>}
 *
 * N submissions of one command buffer that fills 256 bytes of a mapped
 * buffer (a write the layer records and maps), each signalling the next
 * value of a timeline semaphore, through vkQueueSubmit (FORM `submit`) or
 * vkQueueSubmit2 (`submit2`); every 64th the host waits for its value
 * (vkWaitSemaphores), and at the end for the last.  Exit 77 where the
 * driver lacks Vulkan 1.3's timeline semaphores or synchronization2.
 *
 * FORM `dispatch`: what the layer adds to recording a compute dispatch
 * instead (the descriptor set's bind, the dispatch's storage buffer
 * recorded as its write): N times the command pool reset and the command
 * buffer recorded again (begin, bind the pipeline and a set holding the
 * mapped buffer, dispatch 16 x 1 x 1, end), then submitted once and waited
 * for; ns per recording.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk_setup.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void wait_value(VkSemaphore s, uint64_t value)
{
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1, .pSemaphores = &s, .pValues = &value};
    VK_CHECK(vkWaitSemaphores(device, &wi, UINT64_MAX));
}

static int dispatches(queue_rig *rig, long n)
{
    compute_rig c;
    compute_open(&c, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 0, false);
    VkDescriptorSet set = compute_set(&c);
    compute_write(&c, set, rig->buffer);
    VkCommandBuffer cb = rig_begin(rig, 0);
    VK_CHECK(vkEndCommandBuffer(cb));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    double start = now_ns();
    for (long i = 0; i < n; i++) {
        VK_CHECK(vkResetCommandPool(device, rig->pool, 0));
        VK_CHECK(vkBeginCommandBuffer(cb, &begin));
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline);
        vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.layout, 0, 1, &set, 0,
                                NULL);
        vkCmdDispatch(cb, 16, 1, 1);
        VK_CHECK(vkEndCommandBuffer(cb));
    }
    double ns = (now_ns() - start) / (double)(n > 0 ? n : 1);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &cb};
    VK_CHECK(vkQueueSubmit(rig->queue, 1, &si, VK_NULL_HANDLE));
    VK_CHECK(vkQueueWaitIdle(rig->queue));
    compute_close(&c);
    rig_close(rig);
    printf("{\"form\":\"dispatch\",\"ns\":%.1f}\n", ns);
    return 0;
}

int main(int argc, char **argv)
{
    const char *form = argc > 1 ? argv[1] : "submit";
    long n = argc > 2 ? atol(argv[2]) : 1000;
    int two = !strcmp(form, "submit2");
    VkPhysicalDeviceVulkan13Features f13 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, .synchronization2 = 1};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13,
        .timelineSemaphore = 1};
    open_device_with(VK_API_VERSION_1_3, &f12, NULL);
    queue_rig rig;
    rig_open(&rig);
    if (!strcmp(form, "dispatch"))
        return dispatches(&rig, n);
    VkCommandBuffer cb;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = rig.pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    VK_CHECK(vkAllocateCommandBuffers(device, &cai, &cb));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
    VK_CHECK(vkBeginCommandBuffer(cb, &begin));
    vkCmdFillBuffer(cb, rig.buffer, 0, 256, 7);
    VK_CHECK(vkEndCommandBuffer(cb));
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &tci};
    VkSemaphore timeline;
    VK_CHECK(vkCreateSemaphore(device, &sci, NULL, &timeline));

    double start = now_ns();
    for (long i = 1; i <= n; i++) {
        uint64_t value = (uint64_t)i;
        if (two) {
            VkSemaphoreSubmitInfo signal = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO,
                                            .semaphore = timeline, .value = value,
                                            .stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT};
            VkCommandBufferSubmitInfo cbi = {
                .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO, .commandBuffer = cb};
            VkSubmitInfo2 si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO_2,
                                .commandBufferInfoCount = 1, .pCommandBufferInfos = &cbi,
                                .signalSemaphoreInfoCount = 1, .pSignalSemaphoreInfos = &signal};
            VK_CHECK(vkQueueSubmit2(rig.queue, 1, &si, VK_NULL_HANDLE));
        } else {
            VkTimelineSemaphoreSubmitInfo tv = {
                .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &value};
            VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tv,
                               .commandBufferCount = 1, .pCommandBuffers = &cb,
                               .signalSemaphoreCount = 1, .pSignalSemaphores = &timeline};
            VK_CHECK(vkQueueSubmit(rig.queue, 1, &si, VK_NULL_HANDLE));
        }
        if (i % 64 == 0)
            wait_value(timeline, value);
    }
    wait_value(timeline, (uint64_t)n);
    double ns = (now_ns() - start) / (double)(n > 0 ? n : 1);

    vkDestroySemaphore(device, timeline, NULL);
    rig_close(&rig);
    printf("{\"form\":\"%s\",\"ns\":%.1f}\n", form, ns);
    return 0;
}
