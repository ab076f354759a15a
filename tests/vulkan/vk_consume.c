/*
 * A queue's write handed to another queue as a kDLVulkan tensor: a fill of
 * a buffer on device memory (neither host-visible nor exportable),
 * submitted to the first queue, the buffer exported as a kDLVulkan tensor
 * by "vkproducer" and imported by "vkconsumer", which copies it into the
 * rig's mapped buffer on a second queue: `vk_consume MODE`.  Real Vulkan
 * calls only.
 *
 * The fill is held back as vk_queue's is (its command buffer first waits
 * for an event the host sets): in unsynced, memory, copy2 and apart until the
 * consumer's copy has been submitted, in the others until just before.
 *
 *   unsynced   the copy submitted with nothing waited for (race)
 *   opened     the event set, the copy submitted with nothing waited for:
 *              what it reads depends on timing (race)
 *   semaphore  the copy's submission waits for a semaphore the fill's
 *              signals
 *   timeline   the same through a timeline semaphore's value
 *   fence      the event set and the fill's fence waited for first
 *   memory     as unsynced, the tensor carrying the VkDeviceMemory itself
 *   copy2      as unsynced, the copy made by vkCmdCopyBuffer2 (Vulkan 1.3)
 *   uniform    as unsynced, the consumer's use a dispatch with the tensor's
 *              buffer bound as a uniform buffer (its output the rig's)
 *   apart      as unsynced, but the fill writes the buffer's first half and
 *              the tensor is its second (byte_offset): nothing it holds
 *              was written
 *
 * Needs two queues in the first family: lavapipe has one, and the
 * simulated device's layer (tests/simdev/vk_simulated.c) gives a second,
 * which runs on the driver's one (so the copy always reads the fill: the
 * race is the model's to see).  Without two queues it exits 77.  It prints
 * what the copy read ("consumer saw N": 16843009 the fill's value, 1 the
 * old) and exits 0 when every call it made succeeded.
 */
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_setup.h"

static int64_t shape[1] = {BYTES / 8};

static void no_deleter(DLManagedTensor *t)
{
    (void)t;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unsynced";
    setvbuf(stdout, NULL, _IOLBF, 0);
    int copy2 = !strcmp(mode, "copy2");
    device_queues = 2;
    if (copy2)
        open_device_with(VK_API_VERSION_1_3, NULL, NULL);
    else
        open_device();
    PFN_vkCmdCopyBuffer2 copy_buffer2 =
        (PFN_vkCmdCopyBuffer2)vkGetDeviceProcAddr(device, "vkCmdCopyBuffer2");
    if (copy2 && !copy_buffer2) {
        printf("no vkCmdCopyBuffer2\n");
        return 77;
    }
    uint32_t families = 1;
    VkQueueFamilyProperties family;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, &family);
    if (families < 1 || family.queueCount < 2) {
        printf("one queue only\n");
        return 77;
    }
    queue_rig rig;
    rig_open(&rig);
    VkQueue second;
    vkGetDeviceQueue(device, 0, 1, &second);

    /* The producer's buffer, on memory the host never sees. */
    VkDeviceMemory memory;
    VkBuffer buffer = device_buffer(&memory);

    int apart = !strcmp(mode, "apart"), timeline = !strcmp(mode, "timeline");
    VkSemaphore sem =
        !strcmp(mode, "semaphore") || timeline
            ? semaphore_made(timeline ? VK_SEMAPHORE_TYPE_TIMELINE : VK_SEMAPHORE_TYPE_BINARY)
            : VK_NULL_HANDLE;
    uint64_t value = timeline ? 1 : 0; /* signalled and waited for; 0: a binary semaphore */
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));

    /* The late fill, of the tensor's bytes (apart: of the others). */
    VkCommandBuffer fill = rig_begin(&rig, 1);
    vkCmdFillBuffer(fill, buffer, 0, apart ? BYTES / 2 : VK_WHOLE_SIZE, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(fill));
    submit_to(rig.queue, fill, VK_NULL_HANDLE, sem, value, fence);

    /* The handoff: the second half of the buffer where `apart`, the first
     * otherwise. */
    DLManagedTensor t = {
        .dl_tensor = {.data = !strcmp(mode, "memory") ? (void *)memory : (void *)buffer,
                      .device = {kDLVulkan, 0}, .ndim = 1, .dtype = {kDLUInt, 32, 1},
                      .shape = shape, .byte_offset = apart ? BYTES / 2 : 0},
        .deleter = no_deleter};
    dlshim_export(&t, "vkproducer");
    dlshim_import(&t, "vkconsumer");

    int uniform = !strcmp(mode, "uniform");
    int racy = !strcmp(mode, "unsynced") || !strcmp(mode, "memory") || apart || copy2 || uniform;
    if (!racy)
        VK_CHECK(vkSetEvent(device, rig.gate));
    if (!strcmp(mode, "fence"))
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));

    /* The consumer's copy of the tensor's bytes, on the second queue. */
    VkCommandBuffer copy = rig_begin(&rig, 0);
    VkBufferCopy region = {.srcOffset = t.dl_tensor.byte_offset, .dstOffset = 0,
                           .size = BYTES / 2};
    VkBufferCopy2 region2 = {.sType = VK_STRUCTURE_TYPE_BUFFER_COPY_2,
                             .srcOffset = region.srcOffset, .size = region.size};
    VkCopyBufferInfo2 info = {.sType = VK_STRUCTURE_TYPE_COPY_BUFFER_INFO_2, .srcBuffer = buffer,
                              .dstBuffer = rig.buffer, .regionCount = 1, .pRegions = &region2};
    compute_rig c;
    if (uniform) {
        compute_open(&c, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 0, true);
        VkDescriptorSet set = compute_set(&c);
        compute_write(&c, set, rig.buffer);
        compute_input(set, buffer);
        vkCmdBindPipeline(copy, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline);
        vkCmdBindDescriptorSets(copy, VK_PIPELINE_BIND_POINT_COMPUTE, c.layout, 0, 1, &set, 0,
                                NULL);
        vkCmdDispatch(copy, 16, 1, 1);
    } else if (copy2) {
        copy_buffer2(copy, &info);
    } else {
        vkCmdCopyBuffer(copy, buffer, rig.buffer, 1, &region);
    }
    VK_CHECK(vkEndCommandBuffer(copy));
    submit_to(second, copy, sem, VK_NULL_HANDLE, value, VK_NULL_HANDLE);

    VK_CHECK(vkSetEvent(device, rig.gate));
    VK_CHECK(vkQueueWaitIdle(second));
    VK_CHECK(vkQueueWaitIdle(rig.queue));
    printf("consumer saw %u\n", rig.p[1]);
    t.deleter(&t);

    if (uniform)
        compute_close(&c);
    vkDestroyFence(device, fence, NULL);
    if (sem)
        vkDestroySemaphore(device, sem, NULL);
    vkDestroyBuffer(device, buffer, NULL);
    vkFreeMemory(device, memory, NULL);
    rig_close(&rig);
    return 0;
}
