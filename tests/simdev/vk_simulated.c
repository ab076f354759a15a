/*
 * vk_simulated.c — a Vulkan layer that gives a driver without them the
 * device extension VK_KHR_external_semaphore_fd, as far as a test of an
 * exported semaphore needs: Mesa's lavapipe (Debian 12's 22.3) exports
 * memory as a file descriptor but no semaphore, and the simulated CUDA
 * device (cuda_driver.c) imports one; and VK_KHR_maintenance6's descriptor
 * set commands, which lavapipe 22.3 lacks too.  The test programs call
 * Vulkan as they would on a driver with the extensions; this layer sits
 * below dlshim's, as a driver's own implementation would.
 *
 *   vkCreateDevice       the extension taken out of what the driver is asked
 *   vkCreateSemaphore    the same for the semaphore's export information
 *   vkGetSemaphoreFdKHR  a new file (a memfd) for each export: a
 *                        descriptor the importer owns and closes, whose
 *                        payload nothing here shares with the semaphore
 *   vkQueueSubmit        a wait for an exported semaphore is left out of
 *                        what the driver is given (with its timeline value,
 *                        where a VkTimelineSemaphoreSubmitInfo heads the
 *                        submission's chain): the other API signals it,
 *                        which the driver cannot see (the simulated
 *                        device's own semaphores do the same, as if the
 *                        other API had signalled)
 *   vkWaitSemaphores(KHR)  the same for the host's wait: an exported
 *                        timeline semaphore's value is taken as reached
 *   vkCmdBindDescriptorSets2KHR, vkCmdPushDescriptorSet2KHR,
 *   vkCmdPushDescriptorSetWithTemplate2KHR
 *                        the compute bind point's vkCmdBindDescriptorSets,
 *                        vkCmdPushDescriptorSetKHR and
 *                        vkCmdPushDescriptorSetWithTemplateKHR (maintenance6
 *                        asked for, the driver is asked for
 *                        VK_KHR_push_descriptor)
 *   vkCmdBindDescriptorSets2, vkCmdPushDescriptorSet(2),
 *   vkCmdPushDescriptorSetWithTemplate(2)
 *                        Vulkan 1.4's core names of the same, and of
 *                        vkCmdPushDescriptorSet(WithTemplate)KHR (lavapipe
 *                        22.3 is 1.3, with VK_KHR_push_descriptor)
 *
 * And a second queue in the first family, which lavapipe (one queue) lacks,
 * for a test of a handoff from one queue to another: the family says it has
 * two (vkGetPhysicalDeviceQueueFamilyProperties), a device asked for two is
 * made with one, and vkGetDeviceQueue's index 1 is an object of this layer
 * that vkQueueSubmit and vkQueueWaitIdle hand to the driver as its one
 * queue (so its work runs in order with the first's: the model sees two
 * queues, the data cannot show their race).
 *
 * One instance and one device at a time: the test programs make no more.
 * Its manifest (vk_simulated.json) names the extension, which the loader
 * then accepts in vkCreateDevice (and lists for the layer by name).
 */
#include <string.h>
#include <sys/mman.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include "../vulkan/vk_maintenance6.h"

#define EXPORT __attribute__((visibility("default")))
#define EXTENSION VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME
#define MAX_EXPORTED 64
#define MAX_LIST 64 /* extensions named, semaphores a submission waits for */

static VkInstance instance;
static PFN_vkGetInstanceProcAddr next_gipa;
static PFN_vkGetDeviceProcAddr next_gdpa;
static PFN_vkQueueSubmit next_submit;
static PFN_vkWaitSemaphores next_wait;
static PFN_vkCreateSemaphore next_create_semaphore;
static PFN_vkCmdBindDescriptorSets next_bind;
static PFN_vkCmdPushDescriptorSetKHR next_push;
static PFN_vkCmdPushDescriptorSetWithTemplateKHR next_push_template;
static PFN_vkGetPhysicalDeviceQueueFamilyProperties next_families;
static PFN_vkGetDeviceQueue next_get_queue;
static PFN_vkQueueWaitIdle next_wait_idle;
/* The second queue: its first word is the loader's (its dispatch). */
static struct {
    void *loader_data;
    VkQueue real;
} second;
static VkSemaphore exported[MAX_EXPORTED];
static unsigned n_exported;

static const void *link_info(const void *next, VkStructureType type)
{
    const VkLayerInstanceCreateInfo *l = next;
    while (l && !(l->sType == type && l->function == VK_LAYER_LINK_INFO))
        l = l->pNext;
    return l;
}

static VKAPI_ATTR VkResult VKAPI_CALL create_instance(const VkInstanceCreateInfo *info,
                                                      const VkAllocationCallbacks *cb,
                                                      VkInstance *out)
{
    VkLayerInstanceCreateInfo *l =
        (VkLayerInstanceCreateInfo *)link_info(info->pNext, VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO);
    if (!l)
        return VK_ERROR_INITIALIZATION_FAILED;
    next_gipa = l->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    l->u.pLayerInfo = l->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next_gipa(NULL, "vkCreateInstance");
    VkResult r = create(info, cb, out);
    if (r == VK_SUCCESS) {
        instance = *out;
        next_families = (PFN_vkGetPhysicalDeviceQueueFamilyProperties)next_gipa(
            instance, "vkGetPhysicalDeviceQueueFamilyProperties");
    }
    return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL get_semaphore_fd(VkDevice device,
                                                       const VkSemaphoreGetFdInfoKHR *info,
                                                       int *fd)
{
    (void)device;
    if (!info || !fd || info->handleType != VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT)
        return VK_ERROR_INVALID_EXTERNAL_HANDLE;
    *fd = memfd_create("simulated-semaphore", MFD_CLOEXEC);
    if (*fd < 0)
        return VK_ERROR_TOO_MANY_OBJECTS;
    if (n_exported < MAX_EXPORTED)
        exported[n_exported++] = info->semaphore;
    return VK_SUCCESS;
}

/* The driver asked for a semaphore without its export information, which
 * it would refuse: its type kept (a copy), anything else passed on. */
static VKAPI_ATTR VkResult VKAPI_CALL create_semaphore(VkDevice device,
                                                       const VkSemaphoreCreateInfo *info,
                                                       const VkAllocationCallbacks *cb,
                                                       VkSemaphore *out)
{
    VkSemaphoreCreateInfo asked = *info;
    VkSemaphoreTypeCreateInfo type;
    const void **tail = &asked.pNext;
    *tail = NULL;
    for (const VkBaseInStructure *n = info->pNext; n; n = n->pNext) {
        if (n->sType == VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO)
            continue;
        if (n->sType != VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO) {
            *tail = n;
            break;
        }
        type = *(const VkSemaphoreTypeCreateInfo *)n;
        *tail = &type;
        tail = (const void **)&type.pNext;
        *tail = NULL;
    }
    return next_create_semaphore(device, &asked, cb, out);
}

/* The driver's queue behind a queue handle. */
static VkQueue real_queue(VkQueue queue)
{
    return queue == (VkQueue)(void *)&second ? second.real : queue;
}

static VKAPI_ATTR void VKAPI_CALL family_properties(VkPhysicalDevice physical, uint32_t *count,
                                                    VkQueueFamilyProperties *families)
{
    next_families(physical, count, families);
    if (families && *count && families[0].queueCount < 2)
        families[0].queueCount = 2;
}

static VKAPI_ATTR void VKAPI_CALL get_queue(VkDevice device, uint32_t family, uint32_t index,
                                            VkQueue *out)
{
    if (family != 0 || index != 1) {
        next_get_queue(device, family, index, out);
        return;
    }
    next_get_queue(device, 0, 0, &second.real);
    second.loader_data = *(void **)second.real; /* the loader sets it again */
    *out = (VkQueue)(void *)&second;
}

static VKAPI_ATTR VkResult VKAPI_CALL queue_wait_idle(VkQueue queue)
{
    return next_wait_idle(real_queue(queue));
}

static int is_exported(VkSemaphore s)
{
    for (unsigned i = 0; i < n_exported; i++)
        if (exported[i] == s)
            return 1;
    return 0;
}

static VKAPI_ATTR VkResult VKAPI_CALL queue_submit(VkQueue queue, uint32_t count,
                                                   const VkSubmitInfo *submits, VkFence fence)
{
    VkSubmitInfo copy[MAX_LIST];
    VkSemaphore waits[MAX_LIST][MAX_LIST];
    VkPipelineStageFlags stages[MAX_LIST][MAX_LIST];
    VkTimelineSemaphoreSubmitInfo timelines[MAX_LIST];
    uint64_t values[MAX_LIST][MAX_LIST];
    queue = real_queue(queue);
    if (count > MAX_LIST)
        return next_submit(queue, count, submits, fence);
    for (uint32_t i = 0; i < count; i++) {
        copy[i] = submits[i];
        const VkTimelineSemaphoreSubmitInfo *tv = submits[i].pNext;
        if (tv && tv->sType != VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO)
            tv = NULL;
        uint32_t kept = 0;
        for (uint32_t k = 0; k < submits[i].waitSemaphoreCount && k < MAX_LIST; k++)
            if (!is_exported(submits[i].pWaitSemaphores[k])) {
                waits[i][kept] = submits[i].pWaitSemaphores[k];
                if (tv && k < tv->waitSemaphoreValueCount)
                    values[i][kept] = tv->pWaitSemaphoreValues[k];
                stages[i][kept++] = submits[i].pWaitDstStageMask[k];
            }
        copy[i].waitSemaphoreCount = kept;
        copy[i].pWaitSemaphores = waits[i];
        copy[i].pWaitDstStageMask = stages[i];
        if (tv) {
            timelines[i] = *tv;
            timelines[i].waitSemaphoreValueCount = kept;
            timelines[i].pWaitSemaphoreValues = values[i];
            copy[i].pNext = &timelines[i];
        }
    }
    return next_submit(queue, count, copy, fence);
}

static VKAPI_ATTR VkResult VKAPI_CALL wait_semaphores(VkDevice device,
                                                      const VkSemaphoreWaitInfo *info,
                                                      uint64_t timeout)
{
    VkSemaphore sems[MAX_LIST];
    uint64_t values[MAX_LIST];
    if (!info || info->semaphoreCount > MAX_LIST)
        return next_wait(device, info, timeout);
    VkSemaphoreWaitInfo kept = *info;
    kept.semaphoreCount = 0;
    kept.pSemaphores = sems;
    kept.pValues = values;
    for (uint32_t i = 0; i < info->semaphoreCount; i++)
        if (!is_exported(info->pSemaphores[i])) {
            sems[kept.semaphoreCount] = info->pSemaphores[i];
            values[kept.semaphoreCount++] = info->pValues[i];
        }
    return kept.semaphoreCount ? next_wait(device, &kept, timeout) : VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL bind_descriptor_sets2(VkCommandBuffer cb,
                                                       const VkBindDescriptorSetsInfoKHR *i)
{
    next_bind(cb, VK_PIPELINE_BIND_POINT_COMPUTE, i->layout, i->firstSet, i->descriptorSetCount,
              i->pDescriptorSets, i->dynamicOffsetCount, i->pDynamicOffsets);
}

static VKAPI_ATTR void VKAPI_CALL push_descriptor_set2(VkCommandBuffer cb,
                                                      const VkPushDescriptorSetInfoKHR *i)
{
    next_push(cb, VK_PIPELINE_BIND_POINT_COMPUTE, i->layout, i->set, i->descriptorWriteCount,
              i->pDescriptorWrites);
}

static VKAPI_ATTR void VKAPI_CALL push_descriptor_set(VkCommandBuffer cb,
                                                     VkPipelineBindPoint point,
                                                     VkPipelineLayout layout, uint32_t set,
                                                     uint32_t count,
                                                     const VkWriteDescriptorSet *writes)
{
    next_push(cb, point, layout, set, count, writes);
}

static VKAPI_ATTR void VKAPI_CALL push_descriptor_set_with_template(
    VkCommandBuffer cb, VkDescriptorUpdateTemplate update, VkPipelineLayout layout, uint32_t set,
    const void *data)
{
    next_push_template(cb, update, layout, set, data);
}

static VKAPI_ATTR void VKAPI_CALL push_descriptor_set_with_template2(
    VkCommandBuffer cb, const VkPushDescriptorSetWithTemplateInfoKHR *i)
{
    next_push_template(cb, i->descriptorUpdateTemplate, i->layout, i->set, i->pData);
}

static VKAPI_ATTR VkResult VKAPI_CALL create_device(VkPhysicalDevice physical,
                                                    const VkDeviceCreateInfo *info,
                                                    const VkAllocationCallbacks *cb,
                                                    VkDevice *out)
{
    VkLayerDeviceCreateInfo *l =
        (VkLayerDeviceCreateInfo *)link_info(info->pNext, VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO);
    if (!l)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = l->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    next_gdpa = l->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    l->u.pLayerInfo = l->u.pLayerInfo->pNext;
    const char *names[MAX_LIST];
    VkDeviceQueueCreateInfo queues[MAX_LIST];
    VkDeviceCreateInfo asked = *info;
    for (uint32_t i = 0; i < info->queueCreateInfoCount && i < MAX_LIST; i++) {
        queues[i] = info->pQueueCreateInfos[i];
        if (queues[i].queueFamilyIndex == 0 && queues[i].queueCount > 1)
            queues[i].queueCount = 1; /* the second is this layer's */
    }
    if (info->queueCreateInfoCount <= MAX_LIST)
        asked.pQueueCreateInfos = queues;
    asked.enabledExtensionCount = 0;
    asked.ppEnabledExtensionNames = names;
    for (uint32_t i = 0; i < info->enabledExtensionCount && i < MAX_LIST - 1; i++) {
        const char *e = info->ppEnabledExtensionNames[i];
        if (!strcmp(e, VK_KHR_MAINTENANCE_6_EXTENSION_NAME))
            names[asked.enabledExtensionCount++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
        else if (strcmp(e, EXTENSION))
            names[asked.enabledExtensionCount++] = e;
    }
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(instance, "vkCreateDevice");
    VkResult r = create(physical, &asked, cb, out);
    if (r == VK_SUCCESS) {
        next_submit = (PFN_vkQueueSubmit)next_gdpa(*out, "vkQueueSubmit");
        next_get_queue = (PFN_vkGetDeviceQueue)next_gdpa(*out, "vkGetDeviceQueue");
        next_wait_idle = (PFN_vkQueueWaitIdle)next_gdpa(*out, "vkQueueWaitIdle");
        next_create_semaphore = (PFN_vkCreateSemaphore)next_gdpa(*out, "vkCreateSemaphore");
        next_wait = (PFN_vkWaitSemaphores)next_gdpa(*out, "vkWaitSemaphores");
        if (!next_wait)
            next_wait = (PFN_vkWaitSemaphores)next_gdpa(*out, "vkWaitSemaphoresKHR");
        next_bind = (PFN_vkCmdBindDescriptorSets)next_gdpa(*out, "vkCmdBindDescriptorSets");
        next_push = (PFN_vkCmdPushDescriptorSetKHR)next_gdpa(*out, "vkCmdPushDescriptorSetKHR");
        next_push_template = (PFN_vkCmdPushDescriptorSetWithTemplateKHR)next_gdpa(
            *out, "vkCmdPushDescriptorSetWithTemplateKHR");
    }
    n_exported = 0;
    return r;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL get_device_proc(VkDevice device, const char *name);

static PFN_vkVoidFunction ours(const char *name)
{
    static const struct {
        const char *name;
        PFN_vkVoidFunction fn;
    } fns[] = {{"vkCreateInstance", (PFN_vkVoidFunction)create_instance},
               {"vkCreateDevice", (PFN_vkVoidFunction)create_device},
               {"vkGetDeviceProcAddr", (PFN_vkVoidFunction)get_device_proc},
               {"vkGetSemaphoreFdKHR", (PFN_vkVoidFunction)get_semaphore_fd},
               {"vkCreateSemaphore", (PFN_vkVoidFunction)create_semaphore},
               {"vkQueueSubmit", (PFN_vkVoidFunction)queue_submit},
               {"vkGetPhysicalDeviceQueueFamilyProperties",
                (PFN_vkVoidFunction)family_properties},
               {"vkGetDeviceQueue", (PFN_vkVoidFunction)get_queue},
               {"vkQueueWaitIdle", (PFN_vkVoidFunction)queue_wait_idle},
               {"vkWaitSemaphores", (PFN_vkVoidFunction)wait_semaphores},
               {"vkWaitSemaphoresKHR", (PFN_vkVoidFunction)wait_semaphores},
               {"vkCmdBindDescriptorSets2KHR", (PFN_vkVoidFunction)bind_descriptor_sets2},
               {"vkCmdPushDescriptorSet2KHR", (PFN_vkVoidFunction)push_descriptor_set2},
               {"vkCmdBindDescriptorSets2", (PFN_vkVoidFunction)bind_descriptor_sets2},
               {"vkCmdPushDescriptorSet2", (PFN_vkVoidFunction)push_descriptor_set2},
               {"vkCmdPushDescriptorSet", (PFN_vkVoidFunction)push_descriptor_set},
               {"vkCmdPushDescriptorSetWithTemplate",
                (PFN_vkVoidFunction)push_descriptor_set_with_template},
               {"vkCmdPushDescriptorSetWithTemplate2KHR",
                (PFN_vkVoidFunction)push_descriptor_set_with_template2},
               {"vkCmdPushDescriptorSetWithTemplate2",
                (PFN_vkVoidFunction)push_descriptor_set_with_template2}};
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
        if (!strcmp(name, fns[i].name))
            return fns[i].fn;
    return NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL get_device_proc(VkDevice device, const char *name)
{
    PFN_vkVoidFunction f =
        strcmp(name, "vkCreateDevice") && strcmp(name, "vkCreateInstance") ? ours(name) : NULL;
    return f ? f : next_gdpa(device, name);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL get_instance_proc(VkInstance inst,
                                                                  const char *name)
{
    if (!strcmp(name, "vkGetInstanceProcAddr"))
        return (PFN_vkVoidFunction)get_instance_proc;
    PFN_vkVoidFunction f = ours(name);
    return f ? f : next_gipa ? next_gipa(inst, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL
simulated_vulkan_negotiate(VkNegotiateLayerInterface *v)
{
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT)
        return VK_ERROR_INITIALIZATION_FAILED;
    if (v->loaderLayerInterfaceVersion > 2)
        v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = get_instance_proc;
    v->pfnGetDeviceProcAddr = get_device_proc;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
