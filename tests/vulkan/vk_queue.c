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
 * Prefixed image_, the buffer is written by an image's copy instead of the
 * fill, image2_ the same through vkCmdCopyImageToBuffer2 (Vulkan 1.3);
 * prefixed copy2_, by vkCmdCopyBuffer2 from a buffer filled first;
 * prefixed secondary_, the fill is recorded in a secondary command buffer
 * that the gated primary executes (vkCmdExecuteCommands).
 *
 * It prints what the consumer read (1 is the old value, 16843009 the
 * fill's) and exits 0 when every call it made succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_setup.h"

static VkFence fence_made(void)
{
    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    return fence;
}

/* Vulkan 1.3's copy2 forms (image2_, copy2_), and whether the mode asks. */
static PFN_vkCmdCopyImageToBuffer2 copy_image2;
static PFN_vkCmdCopyBuffer2 copy_buffer2;
static int copy2;

/* A 64 x 1 RGBA8 image on device memory of its own, for image_ modes. */
static VkImage image;
static VkDeviceMemory image_memory;

static VkImage image_made(void)
{
    VkImageCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
                             .imageType = VK_IMAGE_TYPE_2D, .format = VK_FORMAT_R8G8B8A8_UINT,
                             .extent = {64, 1, 1}, .mipLevels = 1, .arrayLayers = 1,
                             .samples = VK_SAMPLE_COUNT_1_BIT, .tiling = VK_IMAGE_TILING_OPTIMAL,
                             .usage = VK_IMAGE_USAGE_TRANSFER_SRC_BIT |
                                      VK_IMAGE_USAGE_TRANSFER_DST_BIT,
                             .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED};
    VK_CHECK(vkCreateImage(device, &ici, NULL, &image));
    VkMemoryRequirements req;
    vkGetImageMemoryRequirements(device, image, &req);
    image_memory = memory_for(&req);
    VK_CHECK(vkBindImageMemory(device, image, image_memory, 0));
    return image;
}

static void layout(VkCommandBuffer cb, VkImage img, VkImageLayout from, VkImageLayout to)
{
    VkImageMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT |
                                               VK_ACCESS_TRANSFER_WRITE_BIT,
                              .oldLayout = from, .newLayout = to,
                              .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                              .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED, .image = img,
                              .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1}};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0,
                         NULL, 0, NULL, 1, &b);
}

/* The image cleared to bytes of 1, then copied into the buffer's start. */
static void image_copied(VkCommandBuffer cb, VkImage img, VkBuffer buffer)
{
    layout(cb, img, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL);
    VkClearColorValue ones = {.uint32 = {1, 1, 1, 1}};
    VkImageSubresourceRange all = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    vkCmdClearColorImage(cb, img, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, &ones, 1, &all);
    layout(cb, img, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL);
    VkBufferImageCopy region = {.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
                                .imageExtent = {64, 1, 1}};
    if (!copy2) {
        vkCmdCopyImageToBuffer(cb, img, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, buffer, 1, &region);
        return;
    }
    VkBufferImageCopy2 region2 = {.sType = VK_STRUCTURE_TYPE_BUFFER_IMAGE_COPY_2,
                                  .imageSubresource = region.imageSubresource,
                                  .imageExtent = region.imageExtent};
    VkCopyImageToBufferInfo2 info = {.sType = VK_STRUCTURE_TYPE_COPY_IMAGE_TO_BUFFER_INFO_2,
                                     .srcImage = img,
                                     .srcImageLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                                     .dstBuffer = buffer, .regionCount = 1,
                                     .pRegions = &region2};
    copy_image2(cb, &info);
}

/* A buffer filled with the fill's bytes, copied into `buffer` by
 * vkCmdCopyBuffer2. */
static VkBuffer staging;
static VkDeviceMemory staging_memory;

static void copied2(VkCommandBuffer cb, VkBuffer buffer)
{
    staging = device_buffer(&staging_memory);
    vkCmdFillBuffer(cb, staging, 0, VK_WHOLE_SIZE, 0x01010101u);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                         &mb, 0, NULL, 0, NULL);
    VkBufferCopy2 region = {.sType = VK_STRUCTURE_TYPE_BUFFER_COPY_2, .size = BYTES};
    VkCopyBufferInfo2 info = {.sType = VK_STRUCTURE_TYPE_COPY_BUFFER_INFO_2, .srcBuffer = staging,
                              .dstBuffer = buffer, .regionCount = 1, .pRegions = &region};
    copy_buffer2(cb, &info);
}

/* The fill recorded in a secondary command buffer, executed from cb. */
static void fill_executed(const queue_rig *rig, VkCommandBuffer cb)
{
    VkCommandBuffer secondary = rig_begin_level(rig, VK_COMMAND_BUFFER_LEVEL_SECONDARY);
    vkCmdFillBuffer(secondary, rig->buffer, 0, VK_WHOLE_SIZE, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(secondary));
    vkCmdExecuteCommands(cb, 1, &secondary);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unsynced";
    int from_image = !strncmp(mode, "image_", 6) || !strncmp(mode, "image2_", 7);
    copy2 = !strncmp(mode, "image2_", 7) || !strncmp(mode, "copy2_", 6);
    int from_copy2 = !strncmp(mode, "copy2_", 6);
    mode += from_image ? (copy2 ? 7 : 6) : from_copy2 ? 6 : 0;
    int from_secondary = !strncmp(mode, "secondary_", 10);
    mode += from_secondary ? 10 : 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (copy2) {
        open_device_with(VK_API_VERSION_1_3, NULL, NULL);
        copy_image2 =
            (PFN_vkCmdCopyImageToBuffer2)vkGetDeviceProcAddr(device, "vkCmdCopyImageToBuffer2");
        copy_buffer2 = (PFN_vkCmdCopyBuffer2)vkGetDeviceProcAddr(device, "vkCmdCopyBuffer2");
        if (!copy_image2 || !copy_buffer2) {
            printf("no Vulkan 1.3 copy commands\n");
            return 77;
        }
    } else {
        open_device();
    }
    queue_rig rig;
    rig_open(&rig);
    VkQueue queue = rig.queue;

    /* early_fence: a submission that writes nothing, fenced and waited for. */
    VkFence early = fence_made();
    VkCommandBuffer empty = rig_begin(&rig, 0);
    VK_CHECK(vkEndCommandBuffer(empty));
    rig_submit(&rig, empty, VK_NULL_HANDLE, VK_NULL_HANDLE, early);
    VK_CHECK(vkWaitForFences(device, 1, &early, VK_TRUE, UINT64_MAX));

    /* The late fill. */
    VkFence fence = fence_made();
    VkCommandBuffer cb = rig_begin(&rig, 1);
    if (from_image)
        image_copied(cb, image_made(), rig.buffer);
    else if (from_copy2)
        copied2(cb, rig.buffer);
    else if (from_secondary)
        fill_executed(&rig, cb);
    else
        vkCmdFillBuffer(cb, rig.buffer, 0, VK_WHOLE_SIZE, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(cb));
    rig_submit(&rig, cb, VK_NULL_HANDLE, VK_NULL_HANDLE, fence);

    int racy = !strcmp(mode, "unsynced") || !strcmp(mode, "early_fence");  /* held back */
    if (!racy)
        VK_CHECK(vkSetEvent(device, rig.gate));
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

    rig_handoff(&rig, BYTES / 4);

    VK_CHECK(vkSetEvent(device, rig.gate));
    VK_CHECK(vkQueueWaitIdle(queue));
    vkDestroyFence(device, fence, NULL);
    vkDestroyFence(device, early, NULL);
    if (from_image) {
        vkDestroyImage(device, image, NULL);
        vkFreeMemory(device, image_memory, NULL);
    }
    if (from_copy2) {
        vkDestroyBuffer(device, staging, NULL);
        vkFreeMemory(device, staging_memory, NULL);
    }
    rig_close(&rig);
    return 0;
}
