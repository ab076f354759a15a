/*
 * What the Vulkan test programs share: a device on the first physical
 * device with VK_KHR_external_memory_fd, an exportable, host-visible
 * buffer of BYTES bytes filled with 0, 1, 2, ..., the queue programs' rig,
 * and a compute pipeline that writes a storage buffer (real Vulkan calls
 * only).
 */
#include "vk_setup.h"

#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>

VkInstance instance;
VkPhysicalDevice physical;
VkDevice device;

void open_device(void)
{
    open_device_with(VK_API_VERSION_1_1, NULL, NULL);
}

uint32_t device_queues = 1;

void open_device_with(uint32_t api, const void *features, const char *extension)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = api};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &app};
    /* No driver or no device: exit status 77, unavailable rather than failed
     * (bin/gpu-check). */
    VkResult made = vkCreateInstance(&ici, NULL, &instance);
    if (made == VK_ERROR_INCOMPATIBLE_DRIVER) {
        printf("no Vulkan driver\n");
        exit(77);
    }
    VK_CHECK(made);
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, &physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        printf("no Vulkan device\n");
        exit(77);
    }
    float priority[2] = {1.0f, 1.0f};
    VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                     .queueFamilyIndex = 0,
                                     .queueCount = device_queues < 2 ? device_queues : 2,
                                     .pQueuePriorities = priority};
    const char *extensions[] = {VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME, extension};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = features,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &queue,
                              .enabledExtensionCount = extension ? 2 : 1,
                              .ppEnabledExtensionNames = extensions};
    VkResult made_device = vkCreateDevice(physical, &dci, NULL, &device);
    if (made_device == VK_ERROR_FEATURE_NOT_PRESENT ||
        made_device == VK_ERROR_EXTENSION_NOT_PRESENT) { /* unavailable, as above */
        printf("a Vulkan feature or extension the program needs is missing\n");
        exit(77);
    }
    VK_CHECK(made_device);
}

/* A host-visible memory type the buffer accepts. */
static uint32_t memory_type(uint32_t accepted)
{
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(physical, &props);
    VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < props.memoryTypeCount; i++)
        if ((accepted >> i) & 1u && (props.memoryTypes[i].propertyFlags & want) == want)
            return i;
    printf("no host-visible memory type\n");
    exit(1);
}

/* An exportable buffer and its memory, filled with 0, 1, 2, ... */
void make_buffer(VkBuffer *buffer, VkDeviceMemory *memory)
{
    VkExternalMemoryBufferCreateInfo ext = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
        .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ext,
                              .size = BYTES, .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                       VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_CHECK(vkCreateBuffer(device, &bci, NULL, buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, *buffer, &req);
    VkExportMemoryAllocateInfo export = {
        .sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
        .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &export,
                                .allocationSize = req.size,
                                .memoryTypeIndex = memory_type(req.memoryTypeBits)};
    VK_CHECK(vkAllocateMemory(device, &mai, NULL, memory));
    VK_CHECK(vkBindBufferMemory(device, *buffer, *memory, 0));
    uint32_t *p;
    VK_CHECK(vkMapMemory(device, *memory, 0, BYTES, 0, (void **)&p));
    for (uint32_t i = 0; i < BYTES / 4; i++)
        p[i] = i;
    vkUnmapMemory(device, *memory);
}

VkDeviceMemory memory_for(const VkMemoryRequirements *req)
{
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req->size,
                                .memoryTypeIndex = (uint32_t)__builtin_ctz(req->memoryTypeBits)};
    VkDeviceMemory memory;
    VK_CHECK(vkAllocateMemory(device, &mai, NULL, &memory));
    return memory;
}

VkBuffer device_buffer(VkDeviceMemory *memory)
{
    VkBuffer buffer;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = BYTES,
                              .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                       VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT};
    VK_CHECK(vkCreateBuffer(device, &bci, NULL, &buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, buffer, &req);
    *memory = memory_for(&req);
    VK_CHECK(vkBindBufferMemory(device, buffer, *memory, 0));
    return buffer;
}

int memory_fd(VkDeviceMemory memory)
{
    VkMemoryGetFdInfoKHR gfi = {.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                                .memory = memory,
                                .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    PFN_vkGetMemoryFdKHR get_fd =
        (PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(device, "vkGetMemoryFdKHR");
    int fd = -1;
    VK_CHECK(get_fd(device, &gfi, &fd));
    return fd;
}

static int64_t mapped_shape[1] = {BYTES / 4};

static void no_deleter(DLManagedTensor *t)
{
    (void)t;
}

DLManagedTensor device_tensor(void *data, DLDeviceType type)
{
    return (DLManagedTensor){.dl_tensor = {.data = data, .device = {type, 0}, .ndim = 1,
                                           .dtype = {kDLUInt, 32, 1}, .shape = mapped_shape},
                             .deleter = no_deleter};
}

DLManagedTensor mapped_tensor(uint32_t *p)
{
    return device_tensor(p, kDLCPU);
}

void rig_open(queue_rig *r)
{
    make_buffer(&r->buffer, &r->memory);
    VK_CHECK(vkMapMemory(device, r->memory, 0, BYTES, 0, (void **)&r->p));
    vkGetDeviceQueue(device, 0, 0, &r->queue);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .queueFamilyIndex = 0};
    VK_CHECK(vkCreateCommandPool(device, &pci, NULL, &r->pool));
    VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    VK_CHECK(vkCreateEvent(device, &eci, NULL, &r->gate));
}

VkCommandBuffer rig_begin_level(const queue_rig *r, VkCommandBufferLevel level)
{
    VkCommandBuffer cb;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = r->pool, .level = level,
                                       .commandBufferCount = 1};
    VK_CHECK(vkAllocateCommandBuffers(device, &cai, &cb));
    /* a primary ignores it */
    VkCommandBufferInheritanceInfo inherit = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .pInheritanceInfo = &inherit};
    VK_CHECK(vkBeginCommandBuffer(cb, &begin));
    return cb;
}

VkCommandBuffer rig_begin(const queue_rig *r, int gated)
{
    VkCommandBuffer cb = rig_begin_level(r, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    if (gated)
        vkCmdWaitEvents(cb, 1, &r->gate, VK_PIPELINE_STAGE_HOST_BIT,
                        VK_PIPELINE_STAGE_TRANSFER_BIT, 0, NULL, 0, NULL, 0, NULL);
    return cb;
}

void rig_handoff(const queue_rig *r, int64_t words)
{
    static int64_t shape[1];
    shape[0] = words;
    DLManagedTensor t = mapped_tensor(r->p);
    t.dl_tensor.shape = shape;
    dlshim_export(&t, "vkproducer");
    dlshim_import(&t, "cpuconsumer");
    printf("consumer saw %u\n", r->p[1]);
    t.deleter(&t);
}

void rig_close(queue_rig *r)
{
    VK_CHECK(vkSetEvent(device, r->gate));
    VK_CHECK(vkQueueWaitIdle(r->queue));
    vkDestroyEvent(device, r->gate, NULL);
    vkDestroyCommandPool(device, r->pool, NULL);
    vkUnmapMemory(device, r->memory);
    vkFreeMemory(device, r->memory, NULL);
    vkDestroyBuffer(device, r->buffer, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
}

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

/* The same through a storage texel buffer (a VK_FORMAT_R32_UINT view):
 *   layout(set = 0, binding = 0, r32ui) uniform writeonly uimageBuffer b;
 *   void main() { imageStore(b, int(gl_GlobalInvocationID.x), uvec4(0x01010101u)); } */
static const uint32_t texel_shader[] = {
    0x07230203, 0x00010000, 0x00000000, 0x00000016, 0x00000000, 0x00020011, 0x00000001,
    0x00020011, 0x0000002f, 0x0003000e, 0x00000000, 0x00000001, 0x0006000f, 0x00000005,
    0x00000001, 0x6e69616d, 0x00000000, 0x00000002, 0x00060010, 0x00000001, 0x00000011,
    0x00000001, 0x00000001, 0x00000001, 0x00040047, 0x00000002, 0x0000000b, 0x0000001c,
    0x00040047, 0x0000000c, 0x00000022, 0x00000000, 0x00040047, 0x0000000c, 0x00000021,
    0x00000000, 0x00030047, 0x0000000c, 0x00000019, 0x00020013, 0x00000003, 0x00030021,
    0x00000004, 0x00000003, 0x00040015, 0x00000005, 0x00000020, 0x00000000, 0x00040017,
    0x00000006, 0x00000005, 0x00000003, 0x00040020, 0x00000007, 0x00000001, 0x00000006,
    0x0004003b, 0x00000007, 0x00000002, 0x00000001, 0x00040015, 0x00000008, 0x00000020,
    0x00000001, 0x00040017, 0x00000009, 0x00000005, 0x00000004, 0x00090019, 0x0000000a,
    0x00000005, 0x00000005, 0x00000000, 0x00000000, 0x00000000, 0x00000002, 0x00000021,
    0x00040020, 0x0000000b, 0x00000000, 0x0000000a, 0x0004003b, 0x0000000b, 0x0000000c,
    0x00000000, 0x00040020, 0x0000000d, 0x00000001, 0x00000005, 0x0004002b, 0x00000005,
    0x0000000e, 0x00000000, 0x0004002b, 0x00000005, 0x0000000f, 0x01010101, 0x0007002c,
    0x00000009, 0x00000010, 0x0000000f, 0x0000000f, 0x0000000f, 0x0000000f, 0x00050036,
    0x00000003, 0x00000001, 0x00000000, 0x00000004, 0x000200f8, 0x00000011, 0x00050041,
    0x0000000d, 0x00000012, 0x00000002, 0x0000000e, 0x0004003d, 0x00000005, 0x00000013,
    0x00000012, 0x0004007c, 0x00000008, 0x00000014, 0x00000013, 0x0004003d, 0x0000000a,
    0x00000015, 0x0000000c, 0x00040063, 0x00000015, 0x00000014, 0x00000010, 0x000100fd,
    0x00010038
};

void compute_open(compute_rig *c, VkDescriptorType type, VkDescriptorSetLayoutCreateFlags flags,
                  bool uniform)
{
    c->type = type;
    c->views = 0;
    VkDescriptorSetLayoutBinding b[2] = {
        {.binding = 0, .descriptorType = type, .descriptorCount = 1,
         .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT},
        {.binding = 1, .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, .descriptorCount = 1,
         .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT}};
    VkDescriptorSetLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .flags = flags,
        .bindingCount = uniform ? 2 : 1, .pBindings = b};
    VK_CHECK(vkCreateDescriptorSetLayout(device, &lci, NULL, &c->set_layout));
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1, .pSetLayouts = &c->set_layout};
    VK_CHECK(vkCreatePipelineLayout(device, &pli, NULL, &c->layout));
    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = sizeof(shader), .pCode = shader};
    if (type == VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER) {
        smi.codeSize = sizeof(texel_shader);
        smi.pCode = texel_shader;
    }
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(device, &smi, NULL, &module));
    VkComputePipelineCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = module, .pName = "main"},
        .layout = c->layout};
    VK_CHECK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &cpi, NULL, &c->pipeline));
    vkDestroyShaderModule(device, module, NULL);
    VkDescriptorPoolSize size[2] = {{.type = type, .descriptorCount = 8},
                                    {.type = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
                                     .descriptorCount = 8}};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                      .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
                                      .maxSets = 8, .poolSizeCount = uniform ? 2 : 1,
                                      .pPoolSizes = size};
    VK_CHECK(vkCreateDescriptorPool(device, &dpi, NULL, &c->pool));
}

VkDescriptorSet compute_set(const compute_rig *c)
{
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = c->pool, .descriptorSetCount = 1,
                                      .pSetLayouts = &c->set_layout};
    VkDescriptorSet set;
    VK_CHECK(vkAllocateDescriptorSets(device, &ai, &set));
    return set;
}

void compute_input(VkDescriptorSet set, VkBuffer buffer)
{
    VkDescriptorBufferInfo bi = {.buffer = buffer, .offset = 0, .range = 4096};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set,
                              .dstBinding = 1, .descriptorCount = 1,
                              .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
                              .pBufferInfo = &bi};
    vkUpdateDescriptorSets(device, 1, &w, 0, NULL);
}

void compute_write(compute_rig *c, VkDescriptorSet set, VkBuffer buffer)
{
    VkDescriptorBufferInfo bi = {.buffer = buffer, .offset = 0, .range = 4096};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set,
                              .dstBinding = 0, .descriptorCount = 1, .descriptorType = c->type,
                              .pBufferInfo = &bi};
    if (c->type == VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER) {
        VkBufferViewCreateInfo vci = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                      .buffer = buffer, .format = VK_FORMAT_R32_UINT,
                                      .offset = 0, .range = 4096};
        if (c->views == sizeof(c->view) / sizeof(c->view[0]))
            exit(1);
        VK_CHECK(vkCreateBufferView(device, &vci, NULL, &c->view[c->views]));
        w.pBufferInfo = NULL;
        w.pTexelBufferView = &c->view[c->views++];
    }
    vkUpdateDescriptorSets(device, 1, &w, 0, NULL);
}

void compute_close(compute_rig *c)
{
    for (unsigned i = 0; i < c->views; i++)
        vkDestroyBufferView(device, c->view[i], NULL);
    vkDestroyDescriptorPool(device, c->pool, NULL);
    vkDestroyPipeline(device, c->pipeline, NULL);
    vkDestroyPipelineLayout(device, c->layout, NULL);
    vkDestroyDescriptorSetLayout(device, c->set_layout, NULL);
}

void submit_to(VkQueue queue, VkCommandBuffer cb, VkSemaphore wait, VkSemaphore signal,
               uint64_t value, VkFence fence)
{
    VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo tv = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = wait ? 1 : 0,
                                        .pWaitSemaphoreValues = &value,
                                        .signalSemaphoreValueCount = signal ? 1 : 0,
                                        .pSignalSemaphoreValues = &value};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = value ? &tv : NULL,
                       .waitSemaphoreCount = wait ? 1 : 0, .pWaitSemaphores = &wait,
                       .pWaitDstStageMask = &stage, .commandBufferCount = 1,
                       .pCommandBuffers = &cb, .signalSemaphoreCount = signal ? 1 : 0,
                       .pSignalSemaphores = &signal};
    VK_CHECK(vkQueueSubmit(queue, 1, &si, fence));
}

void rig_submit(const queue_rig *r, VkCommandBuffer cb, VkSemaphore wait, VkSemaphore signal,
                VkFence fence)
{
    submit_to(r->queue, cb, wait, signal, 0, fence);
}

VkSemaphore semaphore_made(VkSemaphoreType type)
{
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = type};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &tci};
    VkSemaphore s;
    VK_CHECK(vkCreateSemaphore(device, &sci, NULL, &s));
    return s;
}

void rig_signal_value(const queue_rig *r, VkCommandBuffer cb, VkSemaphore timeline,
                      uint64_t value)
{
    VkTimelineSemaphoreSubmitInfo tv = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .signalSemaphoreValueCount = 1,
                                        .pSignalSemaphoreValues = &value};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tv,
                       .commandBufferCount = cb ? 1 : 0, .pCommandBuffers = &cb,
                       .signalSemaphoreCount = 1, .pSignalSemaphores = &timeline};
    VK_CHECK(vkQueueSubmit(r->queue, 1, &si, VK_NULL_HANDLE));
}

VkSemaphore exported_semaphore(VkSemaphoreType type, int *fd)
{
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = type};
    VkExportSemaphoreCreateInfo export = {.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
                                          .pNext = &tci,
                                          .handleTypes =
                                              VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                 .pNext = &export};
    VkSemaphore s;
    VK_CHECK(vkCreateSemaphore(device, &sci, NULL, &s));
    PFN_vkGetSemaphoreFdKHR get_fd =
        (PFN_vkGetSemaphoreFdKHR)vkGetDeviceProcAddr(device, "vkGetSemaphoreFdKHR");
    VkSemaphoreGetFdInfoKHR gfi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
                                   .semaphore = s,
                                   .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    *fd = -1;
    VK_CHECK(get_fd(device, &gfi, fd));
    return s;
}

void rig_fill_and_signal(const queue_rig *r, VkSemaphore signal, uint64_t value, int gated)
{
    VkCommandBuffer cb = rig_begin(r, gated);
    vkCmdFillBuffer(cb, r->buffer, 0, VK_WHOLE_SIZE, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(cb));
    if (value)
        rig_signal_value(r, cb, signal, value);
    else
        rig_submit(r, cb, VK_NULL_HANDLE, signal, VK_NULL_HANDLE);
}

void rig_hand_over(const queue_rig *r)
{
    DLManagedTensor t = mapped_tensor(r->p);
    dlshim_export(&t, "vkproducer");
    dlshim_import(&t, "cpuconsumer");
    printf("consumer saw %u\n", r->p[1]);
    t.deleter(&t);
    VK_CHECK(vkSetEvent(device, r->gate));
}
