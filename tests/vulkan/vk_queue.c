/*
 * A queue's write handed to the host through DLPack: a fill of a buffer,
 * submitted to the queue, then a CPU tensor over the buffer's host mapping
 * exported and read by a consumer: `vk_queue MODE`.  Real Vulkan calls only
 * (lavapipe in CI).
 *
 * The fill is made late on purpose: the command buffer first waits for an
 * event the host sets (vkCmdWaitEvents on a vkSetEvent), and in the racy
 * mode the host sets it only after the consumer has read, so the race is
 * deterministic: without synchronization the consumer reads the old bytes.
 *
 *   unsynced      the tensor is handed over with nothing waited for (race)
 *   fence         vkWaitForFences on the submission's fence first
 *   fence_status  vkGetFenceStatus asked until it says signalled
 *   queue_idle    vkQueueWaitIdle first
 *   device_idle   vkDeviceWaitIdle first
 *   early_fence   a fence of an earlier submission waited for (race)
 *   unwaited      the event set (the fill may run) but nothing waited for:
 *                 what the consumer reads depends on timing (race)
 *
 * It prints what the consumer read (1 is the old value, 16843009 the
 * fill's) and exits 0 when every call it made succeeded.
 */
#include <dlpack/dlpack.h>
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_setup.h"

static VkCommandBuffer command_buffer(VkCommandPool pool)
{
    VkCommandBuffer cb;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    VK_CHECK(vkAllocateCommandBuffers(device, &cai, &cb));
    return cb;
}

static VkFence fence_made(void)
{
    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    return fence;
}

static void submit(VkQueue queue, VkCommandBuffer cb, VkFence fence)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &cb};
    VK_CHECK(vkQueueSubmit(queue, 1, &si, fence));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unsynced";
    setvbuf(stdout, NULL, _IOLBF, 0);
    open_device();
    VkBuffer buffer;
    VkDeviceMemory memory;
    make_buffer(&buffer, &memory);
    uint32_t *p;
    VK_CHECK(vkMapMemory(device, memory, 0, BYTES, 0, (void **)&p));
    VkQueue queue;
    vkGetDeviceQueue(device, 0, 0, &queue);
    VkCommandPool pool;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .queueFamilyIndex = 0};
    VK_CHECK(vkCreateCommandPool(device, &pci, NULL, &pool));
    VkEvent gate;
    VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    VK_CHECK(vkCreateEvent(device, &eci, NULL, &gate));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};

    /* early_fence: a submission that writes nothing, fenced and waited for. */
    VkFence early = fence_made();
    VkCommandBuffer empty = command_buffer(pool);
    VK_CHECK(vkBeginCommandBuffer(empty, &begin));
    VK_CHECK(vkEndCommandBuffer(empty));
    submit(queue, empty, early);
    VK_CHECK(vkWaitForFences(device, 1, &early, VK_TRUE, UINT64_MAX));

    /* The late fill. */
    VkFence fence = fence_made();
    VkCommandBuffer cb = command_buffer(pool);
    VK_CHECK(vkBeginCommandBuffer(cb, &begin));
    vkCmdWaitEvents(cb, 1, &gate, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                    NULL, 0, NULL, 0, NULL);
    vkCmdFillBuffer(cb, buffer, 0, VK_WHOLE_SIZE, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(cb));
    submit(queue, cb, fence);

    int racy = !strcmp(mode, "unsynced") || !strcmp(mode, "early_fence");  /* held back */
    if (!racy)
        VK_CHECK(vkSetEvent(device, gate));
    if (!strcmp(mode, "fence"))
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    if (!strcmp(mode, "fence_status"))
        while (vkGetFenceStatus(device, fence) != VK_SUCCESS)
            ;
    if (!strcmp(mode, "queue_idle"))
        VK_CHECK(vkQueueWaitIdle(queue));
    if (!strcmp(mode, "device_idle"))
        VK_CHECK(vkDeviceWaitIdle(device));
    if (!strcmp(mode, "early_fence"))
        VK_CHECK(vkWaitForFences(device, 1, &early, VK_TRUE, UINT64_MAX));

    DLManagedTensor t = mapped_tensor(p);
    dlshim_export(&t, "vkproducer");
    dlshim_import(&t, "cpuconsumer");
    printf("consumer saw %u\n", p[1]);
    t.deleter(&t);

    VK_CHECK(vkSetEvent(device, gate));
    VK_CHECK(vkQueueWaitIdle(queue));
    vkDestroyFence(device, fence, NULL);
    vkDestroyFence(device, early, NULL);
    vkDestroyEvent(device, gate, NULL);
    vkDestroyCommandPool(device, pool, NULL);
    vkUnmapMemory(device, memory);
    vkFreeMemory(device, memory, NULL);
    vkDestroyBuffer(device, buffer, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
    return 0;
}
