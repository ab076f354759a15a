/*
 * A compute dispatch's write handed to the host through DLPack: a shader
 * that writes its storage buffer, bound through a descriptor set, then a
 * CPU tensor over the buffer's host mapping exported and read by a
 * consumer: `vk_dispatch MODE`.  Real Vulkan calls only (lavapipe in CI).
 *
 * As vk_queue, the dispatch is made late on purpose: the command buffer
 * first waits for an event the host sets, and in the racy modes the host
 * sets it only after the consumer has read, so that the race is
 * deterministic.  The shader writes 0x01010101 to the first 16 words of the
 * buffer at binding 0 of set 0.
 *
 *   unsynced   the buffer bound, nothing waited for (race)
 *   fence      vkWaitForFences on the submission's fence first
 *   dynamic    bound as a dynamic storage buffer, with a dynamic offset
 *              (race)
 *   copied     written to another set, copied into the one bound
 *              (vkUpdateDescriptorSets' copies; race)
 *   indirect   vkCmdDispatchIndirect (race)
 *   unwaited   the event set (the dispatch may run) but nothing waited
 *              for: what the consumer reads depends on timing (race)
 *   unbound    the buffer written into a set that is never bound; the
 *              dispatch writes another buffer (no race on this one)
 *   replaced   the buffer's set bound, then another set bound in its
 *              place before the dispatch (no race)
 *   reset      the buffer's set freed with its pool reset; a set allocated
 *              afresh (the same handle, likely) holds another buffer
 *              (no race)
 *
 * It prints what the consumer read (1 is the old value, 16843009 the
 * shader's) and exits 0 when every call it made succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_setup.h"

/* Hand-assembled SPIR-V 1.0 (no shader compiler in the build):
 *   layout(local_size_x = 1) in;
 *   layout(set = 0, binding = 0) buffer B { uint d[]; };
 *   void main() { d[gl_GlobalInvocationID.x] = 0x01010101u; } */
static const uint32_t shader[] = {
    0x07230203, 0x00010000, 0x00000000, 0x00000014, 0x00000000, 0x00020011, 0x00000001,
    0x0003000e, 0x00000000, 0x00000001, 0x0006000f, 0x00000005, 0x00000001, 0x6e69616d,
    0x00000000, 0x00000002, 0x00060010, 0x00000001, 0x00000011, 0x00000001, 0x00000001,
    0x00000001, 0x00040047, 0x00000002, 0x0000000b, 0x0000001c, 0x00040047, 0x00000008,
    0x00000006, 0x00000004, 0x00050048, 0x00000009, 0x00000000, 0x00000023, 0x00000000,
    0x00030047, 0x00000009, 0x00000003, 0x00040047, 0x0000000b, 0x00000022, 0x00000000,
    0x00040047, 0x0000000b, 0x00000021, 0x00000000, 0x00020013, 0x00000003, 0x00030021,
    0x00000004, 0x00000003, 0x00040015, 0x00000005, 0x00000020, 0x00000000, 0x00040017,
    0x00000006, 0x00000005, 0x00000003, 0x00040020, 0x00000007, 0x00000001, 0x00000006,
    0x0004003b, 0x00000007, 0x00000002, 0x00000001, 0x0003001d, 0x00000008, 0x00000005,
    0x0003001e, 0x00000009, 0x00000008, 0x00040020, 0x0000000a, 0x00000002, 0x00000009,
    0x0004003b, 0x0000000a, 0x0000000b, 0x00000002, 0x00040020, 0x0000000c, 0x00000001,
    0x00000005, 0x00040020, 0x0000000d, 0x00000002, 0x00000005, 0x0004002b, 0x00000005,
    0x0000000e, 0x00000000, 0x0004002b, 0x00000005, 0x0000000f, 0x01010101, 0x00050036,
    0x00000003, 0x00000001, 0x00000000, 0x00000004, 0x000200f8, 0x00000010, 0x00050041,
    0x0000000c, 0x00000011, 0x00000002, 0x0000000e, 0x0004003d, 0x00000005, 0x00000012,
    0x00000011, 0x00060041, 0x0000000d, 0x00000013, 0x0000000b, 0x0000000e, 0x00000012,
    0x0003003e, 0x00000013, 0x0000000f, 0x000100fd, 0x00010038
};

static VkDescriptorSetLayout set_layout;
static VkPipelineLayout pipeline_layout;
static VkPipeline pipeline;
static VkDescriptorPool pool;

static void pipeline_made(VkDescriptorType type)
{
    VkDescriptorSetLayoutBinding b = {.binding = 0, .descriptorType = type,
                                      .descriptorCount = 1,
                                      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 1,
        .pBindings = &b};
    VK_CHECK(vkCreateDescriptorSetLayout(device, &lci, NULL, &set_layout));
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1, .pSetLayouts = &set_layout};
    VK_CHECK(vkCreatePipelineLayout(device, &pli, NULL, &pipeline_layout));
    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = sizeof(shader), .pCode = shader};
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(device, &smi, NULL, &module));
    VkComputePipelineCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = module, .pName = "main"},
        .layout = pipeline_layout};
    VK_CHECK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &cpi, NULL, &pipeline));
    vkDestroyShaderModule(device, module, NULL);
    VkDescriptorPoolSize size = {.type = type, .descriptorCount = 8};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                      .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
                                      .maxSets = 8, .poolSizeCount = 1, .pPoolSizes = &size};
    VK_CHECK(vkCreateDescriptorPool(device, &dpi, NULL, &pool));
}

static VkDescriptorSet set_made(void)
{
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = pool, .descriptorSetCount = 1,
                                      .pSetLayouts = &set_layout};
    VkDescriptorSet set;
    VK_CHECK(vkAllocateDescriptorSets(device, &ai, &set));
    return set;
}

/* The buffer's first 4 KiB at binding 0 of the set. */
static void set_written(VkDescriptorSet set, VkBuffer buffer, VkDescriptorType type)
{
    VkDescriptorBufferInfo bi = {.buffer = buffer, .offset = 0, .range = 4096};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set,
                              .dstBinding = 0, .descriptorCount = 1, .descriptorType = type,
                              .pBufferInfo = &bi};
    vkUpdateDescriptorSets(device, 1, &w, 0, NULL);
}

static void bind(VkCommandBuffer cb, VkDescriptorSet set, int dynamic)
{
    uint32_t offset = 0;
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout, 0, 1, &set,
                            dynamic ? 1 : 0, dynamic ? &offset : NULL);
}

/* Another host-visible buffer (of make_buffer's). */
static VkBuffer other;
static VkDeviceMemory other_memory;

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unsynced";
    setvbuf(stdout, NULL, _IOLBF, 0);
    open_device();
    queue_rig rig;
    rig_open(&rig);
    make_buffer(&other, &other_memory);
    int dynamic = !strcmp(mode, "dynamic");
    VkDescriptorType type =
        dynamic ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    pipeline_made(type);

    /* The indirect dispatch's arguments: 16 x 1 x 1. */
    VkBuffer args;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 64,
                              .usage = VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_CHECK(vkCreateBuffer(device, &bci, NULL, &args));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, args, &req);
    VkDeviceMemory args_memory = memory_for(&req);
    VK_CHECK(vkBindBufferMemory(device, args, args_memory, 0));

    VkDescriptorSet set = set_made(), bound = set;
    set_written(set, rig.buffer, type);
    if (!strcmp(mode, "copied")) {
        bound = set_made();
        VkCopyDescriptorSet c = {.sType = VK_STRUCTURE_TYPE_COPY_DESCRIPTOR_SET, .srcSet = set,
                                 .dstSet = bound, .descriptorCount = 1};
        vkUpdateDescriptorSets(device, 0, NULL, 1, &c);
    }
    if (!strcmp(mode, "unbound")) {
        bound = set_made();
        set_written(bound, other, type);
    }
    if (!strcmp(mode, "reset")) {
        VK_CHECK(vkResetDescriptorPool(device, pool, 0));
        bound = set_made();
        set_written(bound, other, type);
    }

    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    VkCommandBuffer cb = rig_begin(&rig, 0);
    if (!strcmp(mode, "indirect")) {
        uint32_t groups[3] = {16, 1, 1};
        vkCmdUpdateBuffer(cb, args, 0, sizeof(groups), groups);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_INDIRECT_COMMAND_READ_BIT};
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    }
    vkCmdWaitEvents(cb, 1, &rig.gate, VK_PIPELINE_STAGE_HOST_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, NULL, 0, NULL, 0, NULL);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    bind(cb, bound, dynamic);
    if (!strcmp(mode, "replaced")) {
        VkDescriptorSet another = set_made();
        set_written(another, other, type);
        bind(cb, another, dynamic);
    }
    if (!strcmp(mode, "indirect"))
        vkCmdDispatchIndirect(cb, args, 0);
    else
        vkCmdDispatch(cb, 16, 1, 1);
    VkMemoryBarrier host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &host, 0, NULL, 0, NULL);
    VK_CHECK(vkEndCommandBuffer(cb));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &cb};
    VK_CHECK(vkQueueSubmit(rig.queue, 1, &si, fence));

    if (!strcmp(mode, "fence") || !strcmp(mode, "unwaited"))
        VK_CHECK(vkSetEvent(device, rig.gate));
    if (!strcmp(mode, "fence"))
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    rig_handoff(&rig);

    VK_CHECK(vkSetEvent(device, rig.gate));
    VK_CHECK(vkQueueWaitIdle(rig.queue));
    vkDestroyFence(device, fence, NULL);
    vkDestroyDescriptorPool(device, pool, NULL);
    vkDestroyPipeline(device, pipeline, NULL);
    vkDestroyPipelineLayout(device, pipeline_layout, NULL);
    vkDestroyDescriptorSetLayout(device, set_layout, NULL);
    vkDestroyBuffer(device, args, NULL);
    vkFreeMemory(device, args_memory, NULL);
    vkDestroyBuffer(device, other, NULL);
    vkFreeMemory(device, other_memory, NULL);
    rig_close(&rig);
    return 0;
}
