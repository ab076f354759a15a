/*
 * vulkan_family.h — what the Vulkan family's three files share, and nothing
 * else: vulkan.c (the layer, device memory, buffers and host mappings:
 * vulkan.def), vulkan_queues.c (queues, command buffers, fences and
 * semaphores in the stream model: vulkan_queues.def) and
 * vulkan_descriptors.c (descriptor sets and what a dispatch writes through
 * them: vulkan_descriptors.def).
 *
 * vulkan.c owns the devices' dispatch (ds_vk_device_of), the family's
 * descriptor (ds_vk_api) and the tables of buffers and memories, which
 * vulkan_queues.c reads only through ds_vk_buffer_mapped and
 * ds_vk_buffer_in_memory; vulkan_queues.c
 * owns everything about queues and hands vulkan.c its wrappers
 * (ds_vk_queue_wrapper) and the host's bounded wait (ds_vk_queue_host_wait);
 * vulkan_descriptors.c owns the descriptor sets, hands vulkan.c its
 * wrappers (ds_vk_descriptor_wrapper) and records a dispatch's writes
 * through vulkan_queues.c's ds_vk_recorded_use, which empties its
 * bindings when a command buffer begins (ds_vk_bindings_reset).
 */
#ifndef DS_VULKAN_FAMILY_H
#define DS_VULKAN_FAMILY_H

#include <errno.h>

#include "abi/vulkan.h"
#include "hooks.h"

#define P(x) ((uintptr_t)(x))

/* A device: its handle, where its calls go next, and each wrapped
 * function's next pointer, named as the tables name it. */
typedef struct ds_vk_device {
    void *key; /* its dispatch table; NULL: a free slot */
    VkDevice device;
    int index; /* the physical device's, in enumeration order */
    PFN_vkGetDeviceProcAddr next_gdpa;
    PFN_vkDestroyDevice destroy;
    VkPhysicalDeviceMemoryProperties memory;
#define VK_HOOK(name, params, args, after) PFN_##name name;
#define VK_VOID(name, params, args, before) PFN_##name name;
#define VK_FREE(name, params, args, check, done) PFN_##name name;
#define VK_HOOK_ON(object, name, params, args, after) PFN_##name name;
#define VK_VOID_ON(object, name, params, args, before) PFN_##name name;
#define VK_BEFORE_ON(object, name, params, args, before) PFN_##name name;
#include "vulkan.def"
#include "vulkan_queues.def"
#include "vulkan_descriptors.def"
#include "vulkan_forms_undef.h"
} ds_vk_device;

/* ---- vulkan.c ------------------------------------------------------------------ */
/* The family's descriptor (-1 until installed). */
extern int ds_vk_api;
/* The device of a dispatchable object (a device, a queue, a command
 * buffer), or NULL. */
ds_vk_device *ds_vk_device_of(const void *object);
/* The structure of that type in a pNext chain (64 deep at most), or NULL. */
const void *ds_vk_find_in_chain(const void *next, VkStructureType type);
/* Lock DS_LOCK_HOOK_TABLES held.  Where `size` bytes at `offset` of a
 * buffer (VK_WHOLE_SIZE: to its end) lie in its memory's host mapping, as
 * a write; false where the buffer is unbound or its memory not mapped there. */
bool ds_vk_buffer_mapped(uint64_t buffer, uint64_t offset, uint64_t size, ds_range *out);
/* Lock DS_LOCK_HOOK_TABLES held.  The same bytes as bytes of the buffer's
 * memory (ds_range.space: its allocation's generation; start: the offset
 * in it), read or written: where another API's mapping of the memory and a
 * kDLVulkan tensor over it find them; false where the buffer is unbound. */
bool ds_vk_buffer_in_memory(uint64_t buffer, uint64_t offset, uint64_t size, bool write,
                            ds_range *out);

/* ---- vulkan_queues.c ----------------------------------------------------------- */
/* The wrapper of a function of vulkan_queues.def (NULL: not one of its
 * rows, or `d` lacks it; d NULL: any device). */
PFN_vkVoidFunction ds_vk_queue_wrapper(const ds_vk_device *d, const char *name);
/* The descriptor's host_wait: the host waits, bounded, for a queue. */
bool ds_vk_queue_host_wait(uintptr_t queue);
/* A write (or a read) the command buffer records: `size` bytes at `offset`
 * of the buffer (VK_WHOLE_SIZE: to its end), made when it is submitted. */
void ds_vk_recorded_use(VkCommandBuffer cb, VkBuffer buffer, VkDeviceSize offset,
                        VkDeviceSize size, bool write);

/* ---- vulkan_descriptors.c ------------------------------------------------------ */
/* The wrapper of a function of vulkan_descriptors.def, as ds_vk_queue_wrapper. */
PFN_vkVoidFunction ds_vk_descriptor_wrapper(const ds_vk_device *d, const char *name);
/* The command buffer begun again or reset: no descriptor set bound. */
void ds_vk_bindings_reset(VkCommandBuffer cb);

/* Whether to record: the family installed and the shim active. */
static inline bool ds_vk_on(void)
{
    return ds_vk_api >= 0 && ds_active();
}

#endif /* DS_VULKAN_FAMILY_H */
