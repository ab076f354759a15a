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
 *   dynamic    bound as a dynamic storage buffer, dynamic offset 0 (race)
 *   dynamic_far  the same at dynamic offset 32 KiB, the tensor over the
 *              first 4 KiB alone: the shader writes none of its bytes
 *              (no race)
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
 *   template   the buffer's set updated through a descriptor update
 *              template to hold another buffer before it is bound (no race)
 *   templated  the buffer written into the set bound through a descriptor
 *              update template (vkUpdateDescriptorSetWithTemplate)
 *
 * Prefixed pushed_ (pushed alone: unsynced), set 0 is a push descriptor set
 * (VK_KHR_push_descriptor; exit 77 without it): the buffer is pushed with
 * vkCmdPushDescriptorSetKHR instead of bound, and in replaced mode another
 * buffer pushed to the same binding after it.  Prefixed pushed2_, the same
 * through vkCmdPushDescriptorSet2KHR; prefixed bind2_, the set bound with
 * vkCmdBindDescriptorSets2KHR (both VK_KHR_maintenance6: exit 77 without
 * it); prefixed core_, pushed through vkCmdPushDescriptorSet, Vulkan 1.4's
 * core name (maintenance6 asked for: the simulated device's layer gives
 * the 1.4 names too); prefixed tpushed_, pushed through a push descriptor
 * update template (vkCmdPushDescriptorSetWithTemplateKHR), and tcore_, the
 * same through its 1.4 core name vkCmdPushDescriptorSetWithTemplate;
 * prefixed tpushed2_, through vkCmdPushDescriptorSetWithTemplate2KHR
 * (maintenance6); core2_, bcore2_ and tcore2_, through the 1.4 core names
 * vkCmdPushDescriptorSet2, vkCmdBindDescriptorSets2 and
 * vkCmdPushDescriptorSetWithTemplate2; prefixed texel_, the set holds the
 * buffer as a storage texel buffer (a VK_FORMAT_R32_UINT view).  Of the modes above, unsynced, fence,
 * unwaited and replaced.
 *
 * It prints what the consumer read (1 is the old value, 16843009 the
 * shader's) and exits 0 when every call it made succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_maintenance6.h"
#include "vk_setup.h"

static compute_rig c; /* its pipeline, set layout and pool of sets */

static int far; /* dynamic_far */

/* How the buffer reaches the shader: by the mode's prefix (TEXEL: bound as
 * a storage texel buffer). */
enum { BOUND, PUSHED, PUSHED2, BOUND2, TEXEL, CORE, TPUSHED, TCORE, TPUSHED2, CORE2, BCORE2,
       TCORE2 } way;
static const char *const prefixes[] = {"",      "pushed",   "pushed2", "bind2",
                                       "texel", "core",     "tpushed", "tcore",
                                       "tpushed2", "core2", "bcore2",  "tcore2"};
static PFN_vkCmdPushDescriptorSetKHR push;
static PFN_vkCmdPushDescriptorSet2KHR push2;
static PFN_vkCmdBindDescriptorSets2KHR bind2;
static PFN_vkCmdPushDescriptorSetWithTemplateKHR tpush;
static PFN_vkCmdPushDescriptorSetWithTemplate2KHR tpush2;
static VkDescriptorUpdateTemplate ptemplate; /* tpushed, tcore, tpushed2, tcore2 */

/* The mode past its prefix, which sets `way` (a prefix alone: unsynced). */
static const char *way_of(const char *mode)
{
    for (unsigned i = 1; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t n = strlen(prefixes[i]);
        if (!strncmp(mode, prefixes[i], n) && (mode[n] == '_' || !mode[n])) {
            way = i;
            return mode[n] ? mode + n + 1 : "unsynced";
        }
    }
    return mode;
}

/* The buffer, through its set (or pushed). */
static void bind(VkCommandBuffer cb, VkDescriptorSet set, VkBuffer buffer, int dynamic)
{
    VkDescriptorBufferInfo bi = {.buffer = buffer, .offset = 0, .range = 4096};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = 0,
                              .descriptorCount = 1,
                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              .pBufferInfo = &bi};
    VkPushDescriptorSetInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PUSH_DESCRIPTOR_SET_INFO_KHR,
                                     .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
                                     .layout = c.layout, .descriptorWriteCount = 1,
                                     .pDescriptorWrites = &w};
    VkBindDescriptorSetsInfoKHR si = {.sType = VK_STRUCTURE_TYPE_BIND_DESCRIPTOR_SETS_INFO_KHR,
                                      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
                                      .layout = c.layout, .descriptorSetCount = 1,
                                      .pDescriptorSets = &set};
    if (way == PUSHED)
        push(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.layout, 0, 1, &w);
    if (way == PUSHED2)
        push2(cb, &pi);
    if (way == TPUSHED)
        tpush(cb, ptemplate, c.layout, 0, &bi);
    VkPushDescriptorSetWithTemplateInfoKHR ti = {
        .sType = VK_STRUCTURE_TYPE_PUSH_DESCRIPTOR_SET_WITH_TEMPLATE_INFO_KHR,
        .descriptorUpdateTemplate = ptemplate, .layout = c.layout, .set = 0, .pData = &bi};
    if (way == TPUSHED2)
        tpush2(cb, &ti);
    if (way == BOUND2)
        bind2(cb, &si);
    if (way != BOUND)
        return;
    uint32_t offset = far ? 32768 : 0;
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.layout, 0, 1, &set,
                            dynamic ? 1 : 0, dynamic ? &offset : NULL);
}

/* A template of one descriptor at binding 0, a VkDescriptorBufferInfo:
 * for set 0's layout, or pushed into set 0 of the pipeline layout. */
static VkDescriptorUpdateTemplate make_template(VkDescriptorType type,
                                                VkDescriptorUpdateTemplateType kind)
{
    VkDescriptorUpdateTemplateEntry entry = {.descriptorCount = 1, .descriptorType = type,
                                             .stride = sizeof(VkDescriptorBufferInfo)};
    VkDescriptorUpdateTemplateCreateInfo tci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_UPDATE_TEMPLATE_CREATE_INFO,
        .descriptorUpdateEntryCount = 1, .pDescriptorUpdateEntries = &entry,
        .templateType = kind, .descriptorSetLayout = c.set_layout,
        .pipelineBindPoint = VK_PIPELINE_BIND_POINT_COMPUTE, .pipelineLayout = c.layout};
    VkDescriptorUpdateTemplate update;
    VK_CHECK(vkCreateDescriptorUpdateTemplate(device, &tci, NULL, &update));
    return update;
}

/* Another host-visible buffer (of make_buffer's). */
static VkBuffer other;
static VkDeviceMemory other_memory;

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unsynced";
    setvbuf(stdout, NULL, _IOLBF, 0);
    mode = way_of(mode);
    int core = way == CORE || way == TCORE || way == CORE2 || way == BCORE2 || way == TCORE2;
    if (way == CORE)
        way = PUSHED;
    if (way == TCORE)
        way = TPUSHED;
    if (way == CORE2)
        way = PUSHED2;
    if (way == BCORE2)
        way = BOUND2;
    if (way == TCORE2)
        way = TPUSHED2;
    int pushed = way == PUSHED || way == PUSHED2 || way == TPUSHED || way == TPUSHED2,
        texel = way == TEXEL;
    if (texel)
        way = BOUND;
    if (way == BOUND)
        open_device();
    else
        open_device_with(VK_API_VERSION_1_1, NULL,
                         (way == PUSHED || way == TPUSHED) && !core
                             ? VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME
                             : VK_KHR_MAINTENANCE_6_EXTENSION_NAME);
    push = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(
        device, core ? "vkCmdPushDescriptorSet" : "vkCmdPushDescriptorSetKHR");
    push2 = (PFN_vkCmdPushDescriptorSet2KHR)vkGetDeviceProcAddr(
        device, core ? "vkCmdPushDescriptorSet2" : "vkCmdPushDescriptorSet2KHR");
    bind2 = (PFN_vkCmdBindDescriptorSets2KHR)vkGetDeviceProcAddr(
        device, core ? "vkCmdBindDescriptorSets2" : "vkCmdBindDescriptorSets2KHR");
    tpush2 = (PFN_vkCmdPushDescriptorSetWithTemplate2KHR)vkGetDeviceProcAddr(
        device, core ? "vkCmdPushDescriptorSetWithTemplate2"
                     : "vkCmdPushDescriptorSetWithTemplate2KHR");
    tpush = (PFN_vkCmdPushDescriptorSetWithTemplateKHR)vkGetDeviceProcAddr(
        device, core ? "vkCmdPushDescriptorSetWithTemplate" : "vkCmdPushDescriptorSetWithTemplateKHR");
    queue_rig rig;
    rig_open(&rig);
    make_buffer(&other, &other_memory);
    far = !strcmp(mode, "dynamic_far");
    int dynamic = far || !strcmp(mode, "dynamic");
    VkDescriptorType type = dynamic ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                            : texel ? VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER
                                    : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    compute_open(&c, type, pushed ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
                 false);
    if (way == TPUSHED || way == TPUSHED2)
        ptemplate = make_template(type, VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR);

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

    /* a push descriptor set layout has no sets */
    VkDescriptorSet set = pushed ? VK_NULL_HANDLE : compute_set(&c), bound = set;
    if (!pushed)
        compute_write(&c, set, rig.buffer);
    if (!strcmp(mode, "copied")) {
        bound = compute_set(&c);
        VkCopyDescriptorSet copy = {.sType = VK_STRUCTURE_TYPE_COPY_DESCRIPTOR_SET,
                                    .srcSet = set, .dstSet = bound, .descriptorCount = 1};
        vkUpdateDescriptorSets(device, 0, NULL, 1, &copy);
    }
    if (!strcmp(mode, "unbound")) {
        bound = compute_set(&c);
        compute_write(&c, bound, other);
    }
    if (!strcmp(mode, "template")) {
        VkDescriptorUpdateTemplate update =
            make_template(type, VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET);
        VkDescriptorBufferInfo bi = {.buffer = other, .offset = 0, .range = 4096};
        vkUpdateDescriptorSetWithTemplate(device, set, update, &bi);
        vkDestroyDescriptorUpdateTemplate(device, update, NULL);
    }
    if (!strcmp(mode, "templated")) {
        bound = compute_set(&c);
        VkDescriptorUpdateTemplate update =
            make_template(type, VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET);
        VkDescriptorBufferInfo bi = {.buffer = rig.buffer, .offset = 0, .range = 4096};
        vkUpdateDescriptorSetWithTemplate(device, bound, update, &bi);
        vkDestroyDescriptorUpdateTemplate(device, update, NULL);
    }
    if (!strcmp(mode, "reset")) {
        VK_CHECK(vkResetDescriptorPool(device, c.pool, 0));
        bound = compute_set(&c);
        compute_write(&c, bound, other);
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
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline);
    bind(cb, bound, rig.buffer, dynamic);
    if (!strcmp(mode, "replaced")) {
        VkDescriptorSet another = pushed ? VK_NULL_HANDLE : compute_set(&c);
        if (!pushed)
            compute_write(&c, another, other);
        bind(cb, another, other, dynamic);
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
    rig_submit(&rig, cb, VK_NULL_HANDLE, VK_NULL_HANDLE, fence);

    if (!strcmp(mode, "fence") || !strcmp(mode, "unwaited"))
        VK_CHECK(vkSetEvent(device, rig.gate));
    if (!strcmp(mode, "fence"))
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    rig_handoff(&rig, far ? 1024 : BYTES / 4);

    VK_CHECK(vkSetEvent(device, rig.gate));
    VK_CHECK(vkQueueWaitIdle(rig.queue));
    vkDestroyFence(device, fence, NULL);
    compute_close(&c);
    vkDestroyBuffer(device, args, NULL);
    vkFreeMemory(device, args_memory, NULL);
    vkDestroyBuffer(device, other, NULL);
    vkFreeMemory(device, other_memory, NULL);
    rig_close(&rig);
    return 0;
}
