/*
 * vulkan.c — Vulkan device memory, seen through a Vulkan layer.
 *
 * Vulkan programs reach their functions through vkGetInstanceProcAddr and
 * vkGetDeviceProcAddr, usually after loading libvulkan with dlopen, and the
 * loader hands out a driver's functions directly: no GOT slot or symbol
 * lookup the shim could take over sees them.  The loader's own way in is a
 * layer: a manifest (build/vulkan/dlshim_layer.json, beside the library)
 * names this library and its negotiation function, the shim enables it at
 * start-up (enable_layer; docs/design.md says why a layer), and the loader then
 * calls in here for every instance and device, with the next layer's
 * functions to forward to.  The layer lives in libdlshim.so itself, so it
 * shares the ledger of the preloaded shim.
 *
 * What it records: vkAllocateMemory / vkFreeMemory as alloc and free events
 * (api "vulkan", device "vulkan:N" with N the physical device's index, the
 * memory type's properties); buffers bound to memory, so that a kDLVulkan
 * tensor whose data is a VkBuffer (or a VkDeviceMemory) is linked to its
 * allocation; vkMapMemory / vkUnmapMemory, a host mapping being a view of
 * the memory whose CPU tensors count as its shares; vkGetMemoryFdKHR, so
 * that another API importing the descriptor maps the same allocation
 * (shim/ledger/external.c).  A free or unmap of shared memory under
 * DLSHIM_ON_ERROR=protect is deferred to the last release, as for CUDA, and
 * then made with the device's own function.
 *
 * The loader's layer interface (vk_layer.h) is followed by hand: no Debian
 * library offers a layer framework for C (the Vulkan-ValidationLayers'
 * utilities are C++ and not packaged).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vulkan_family.h"

#define DS_VK_INSTANCES 64u
#define DS_VK_DEVICES 64u
#define DS_VK_OBJECTS (1u << 16) /* memories and buffers each (a power of two) */

int ds_vk_api = -1;
static int ds_mapping_api = -1; /* host mappings: addresses, not handles */

/* The first word of a dispatchable object is the loader's dispatch table:
 * the same for an instance and its physical devices, one per device. */
static void *dispatch_key(const void *object)
{
    void *key = NULL;
    if (object)
        ds_safe_read(&key, object, sizeof(key));
    return key;
}

/* ---- instances and devices: where each call goes next ---------------------- */

typedef struct {
    void *key; /* NULL: free */
    VkInstance instance;
    PFN_vkGetInstanceProcAddr next_gipa;
    PFN_vkDestroyInstance destroy;
    PFN_vkEnumeratePhysicalDevices enumerate;
    PFN_vkGetPhysicalDeviceMemoryProperties memory_properties;
} instance_slot;


/* Written under the lock as instances and devices come and go; read
 * without it on each call (a slot's key is set last and cleared first). */
static instance_slot instances[DS_VK_INSTANCES];
static ds_vk_device devices[DS_VK_DEVICES];

static instance_slot *instance_of(const void *object)
{
    void *key = dispatch_key(object);
    for (unsigned i = 0; key && i < DS_VK_INSTANCES; i++)
        if (__atomic_load_n(&instances[i].key, __ATOMIC_ACQUIRE) == key)
            return &instances[i];
    return NULL;
}

ds_vk_device *ds_vk_device_of(const void *object)
{
    void *key = dispatch_key(object);
    for (unsigned i = 0; key && i < DS_VK_DEVICES; i++)
        if (__atomic_load_n(&devices[i].key, __ATOMIC_ACQUIRE) == key)
            return &devices[i];
    return NULL;
}

/* ---- memories and buffers ------------------------------------------------------ */

/* Open addressing over handles, mmap'd on first use (bounded: when full, an
 * object goes unseen, never wrong). */
typedef struct {
    uint64_t handle; /* 0: free; ~0: deleted */
    uint64_t memory; /* a buffer's memory (0: unbound); a memory's device slot + 1 */
    uint64_t mapped; /* a memory's host address while mapped, or 0 */
    uint64_t offset; /* a buffer's offset in its memory; where a memory's mapping starts */
    uint64_t size;   /* a buffer's size */
    VkAllocationCallbacks cb; /* a memory's callbacks, kept for a deferred free */
    bool has_cb;
    /* A memory's allocation generation: the space its queues' writes are
     * kept in, for other APIs' mappings of it and kDLVulkan tensors. */
    uint32_t space;
} object;

static object *memories, *buffers;

/* Lock held. */
static object *table(object **t)
{
    if (!*t) {
        *t = ds_map(sizeof(object) * DS_VK_OBJECTS, false);
    }
    return *t;
}

/* Lock held.  The entry of `handle`, or (insert) a free one for it. */
static object *find(object **t, uint64_t handle, bool insert)
{
    object *p = table(t), *hole = NULL;
    if (!p || !handle || handle == ~(uint64_t)0)
        return NULL;
    uint64_t h = (handle * 0x9e3779b97f4a7c15ull) >> 48;
    for (unsigned i = 0; i < DS_VK_OBJECTS; i++) {
        object *o = &p[(h + i) & (DS_VK_OBJECTS - 1)];
        if (o->handle == handle)
            return o;
        if (o->handle == ~(uint64_t)0 && !hole)
            hole = o;
        if (!o->handle)
            return insert ? (hole ? hole : o) : NULL;
    }
    return insert ? hole : NULL;
}

static void buffer_created(VkBuffer buffer, const VkBufferCreateInfo *info)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&buffers, P(buffer), true);
    if (o)
        *o = (object){.handle = P(buffer), .size = info->size};
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void buffer_bound(VkBuffer buffer, VkDeviceMemory memory, VkDeviceSize offset)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&buffers, P(buffer), true);
    if (o)
        *o = (object){.handle = P(buffer), .memory = P(memory), .offset = offset,
                      .size = o->handle == P(buffer) ? o->size : 0};
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void buffers_bound(uint32_t count, const VkBindBufferMemoryInfo *infos)
{
    for (uint32_t i = 0; i < count && i < 4096; i++)
        buffer_bound(infos[i].buffer, infos[i].memory, infos[i].memoryOffset);
}

static void buffer_forget(VkBuffer buffer)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&buffers, P(buffer), false);
    if (o)
        o->handle = ~(uint64_t)0;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* The descriptor's memory_of: a buffer's memory, and where in it the
 * buffer is bound. */
static bool memory_of(uintptr_t handle, uintptr_t *memory, uint64_t *offset)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&buffers, handle, false);
    bool bound = o && o->memory;
    if (bound) {
        *memory = (uintptr_t)o->memory;
        *offset = o->offset;
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    return bound;
}

/* Lock held (vulkan_family.h). */
bool ds_vk_buffer_mapped(uint64_t buffer, uint64_t offset, uint64_t size, ds_range *out)
{
    const object *b = find(&buffers, buffer, false);
    const object *m = b && b->memory ? find(&memories, b->memory, false) : NULL;
    if (!m || !m->mapped)
        return false;
    if (size == VK_WHOLE_SIZE)
        size = b->size > offset ? b->size - offset : 0;
    uint64_t at = b->offset + offset; /* in the memory */
    if (!size || at < m->offset)
        return false;
    *out = (ds_range){.start = (uintptr_t)(m->mapped + (at - m->offset)), .len = size,
                      .write = true};
    return true;
}

/* Lock held (vulkan_family.h). */
bool ds_vk_buffer_in_memory(uint64_t buffer, uint64_t offset, uint64_t size, bool write,
                            ds_range *out)
{
    const object *b = find(&buffers, buffer, false);
    const object *m = b && b->memory ? find(&memories, b->memory, false) : NULL;
    if (!m || !m->space)
        return false;
    if (size == VK_WHOLE_SIZE)
        size = b->size > offset ? b->size - offset : 0;
    *out = (ds_range){.start = (uintptr_t)(b->offset + offset), .len = size, .write = write,
                      .space = m->space};
    return size != 0;
}

/* Property bits: the memory type's own six, then two of the allocation's. */
enum { PROP_EXPORTABLE = 1u << 6, PROP_IMPORTED = 1u << 7 };
static const char *const property_names[8] = {
    "device_local", "host_visible", "host_coherent", "host_cached",
    "lazily_allocated", "protected", "exportable", "imported"};

const void *ds_vk_find_in_chain(const void *next, VkStructureType type)
{
    for (int i = 0; next && i < 64; i++) {
        const VkBaseInStructure *s = next;
        if (s->sType == type)
            return s;
        next = s->pNext;
    }
    return NULL;
}

static void allocated(VkDevice device, const VkMemoryAllocateInfo *info, VkDeviceMemory memory,
                      const void *caller)
{
    ds_vk_device *d = ds_vk_device_of(device);
    if (!d || !memory)
        return;
    uint8_t props = 0;
    if (info->memoryTypeIndex < d->memory.memoryTypeCount)
        props = (uint8_t)(d->memory.memoryTypes[info->memoryTypeIndex].propertyFlags & 0x3f);
    if (ds_vk_find_in_chain(info->pNext, VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO))
        props |= PROP_EXPORTABLE;
    if (ds_vk_find_in_chain(info->pNext, VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR) ||
        ds_vk_find_in_chain(info->pNext, VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT))
        props |= PROP_IMPORTED;
    ds_alloc_info a = {.base = P(memory), .size = info->allocationSize, .device = d->index,
                       .kind = DS_ALLOC_DEVICE, .api = ds_vk_api, .properties = props};
    uint32_t generation = ds_alloc_record(&a, ds_module_id_at(caller));
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&memories, P(memory), true);
    if (o)
        *o = (object){.handle = P(memory), .memory = (uint64_t)(d - devices) + 1,
                      .space = generation};
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* The device a memory's entry names, while it lives (for the calls the
 * shim makes itself). */
static ds_vk_device *device_of_memory(const object *o)
{
    ds_vk_device *d = o->memory && o->memory <= DS_VK_DEVICES ? &devices[o->memory - 1] : NULL;
    return d && __atomic_load_n(&d->key, __ATOMIC_ACQUIRE) ? d : NULL;
}

/* A free the shim deferred: the device's own vkFreeMemory, with the
 * callbacks the program freed it with. */
static void release(uintptr_t base, int kind)
{
    (void)kind;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&memories, base, false), copy = {0};
    if (o) {
        copy = *o;
        o->handle = ~(uint64_t)0;
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    ds_vk_device *d = device_of_memory(&copy);
    if (d && d->vkFreeMemory)
        d->vkFreeMemory(d->device, (VkDeviceMemory)base, copy.has_cb ? &copy.cb : NULL);
    if (copy.mapped)
        ds_alloc_forget((uintptr_t)copy.mapped, ds_mapping_api, "dlshim (deferred free)");
}

/* vkFreeMemory before it is forwarded: what the ledger says to do, and the
 * callbacks kept should it be deferred. */
static int free_check(VkDeviceMemory memory, const VkAllocationCallbacks *cb, const void *caller)
{
    if (!memory)
        return DS_FREE_FORWARD;
    int action = ds_alloc_free_check(P(memory), ds_vk_api, DS_ALLOC_DEVICE,
                                     ds_name(ds_caller_id(caller)));
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&memories, P(memory), false);
    if (o && action == DS_FREE_DEFER && cb) {
        o->cb = *cb;
        o->has_cb = true;
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    return action;
}

/* ---- host mappings: views of the memory, whose tensors are its shares --------- */

static void mapped(VkDeviceMemory memory, VkDeviceSize offset, VkDeviceSize size, void *data,
                   const void *caller)
{
    ds_alloc_info m;
    if (!data || ds_mapping_api < 0 || !ds_alloc_lookup_in(ds_vk_api, P(memory), &m))
        return;
    if (size == VK_WHOLE_SIZE)
        size = offset < m.size ? m.size - offset : 0;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&memories, P(memory), false);
    if (o) {
        o->mapped = P(data);
        o->offset = offset;
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    ds_alloc_info a = {.base = P(data), .size = size, .kind = DS_ALLOC_MAPPED,
                       .api = ds_mapping_api, .alias_of = P(memory),
                       .alias_generation = m.generation, .alias_offset = offset};
    ds_alloc_record(&a, ds_module_id_at(caller));
}

/* Where memory is mapped (0: nowhere), forgotten there when `clear`. */
static uintptr_t mapping_of(VkDeviceMemory memory, bool clear)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&memories, P(memory), false);
    uintptr_t p = o ? (uintptr_t)o->mapped : 0;
    if (o && clear)
        o->mapped = 0;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    return p;
}

/* vkUnmapMemory before it is forwarded: a tensor still shared from the
 * mapping would read unmapped memory. */
static int unmap_check(VkDeviceMemory memory, const void *caller)
{
    uintptr_t p = mapping_of(memory, false);
    if (!p)
        return DS_FREE_FORWARD;
    return ds_alloc_free_check(p, ds_mapping_api, DS_ALLOC_MAPPED,
                               ds_name(ds_caller_id(caller)));
}

/* The mapping gone: unmapped, or freed with its memory. */
static void unmapped(VkDeviceMemory memory, const void *caller)
{
    uintptr_t p = mapping_of(memory, true);
    if (p)
        ds_alloc_forget(p, ds_mapping_api, ds_name(ds_caller_id(caller)));
}

static void freed(VkDeviceMemory memory, const void *caller)
{
    unmapped(memory, caller); /* freeing mapped memory unmaps it */
    const char *who = ds_name(ds_caller_id(caller));
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *o = find(&memories, P(memory), false);
    if (o)
        o->handle = ~(uint64_t)0;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    ds_alloc_forget(P(memory), ds_vk_api, who);
}

/* An unmap the shim deferred: the memory mapped at `base`, unmapped with
 * its device's own vkUnmapMemory (a walk of the table: rare). */
static void release_mapping(uintptr_t base, int kind)
{
    (void)kind;
    object copy = {0};
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    object *t = memories;
    for (unsigned i = 0; t && i < DS_VK_OBJECTS && !copy.handle; i++)
        if (t[i].mapped == base && t[i].handle && t[i].handle != ~(uint64_t)0) {
            copy = t[i];
            t[i].mapped = 0;
        }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    ds_vk_device *d = device_of_memory(&copy);
    if (d && d->vkUnmapMemory)
        d->vkUnmapMemory(d->device, (VkDeviceMemory)copy.handle);
}

/* ---- the wrappers ---------------------------------------------------------------- */
#include "vulkan_wrap.h"
#include "vulkan.def"
#include "vulkan_forms_undef.h"

/* ---- the layer: instances, devices and the loader's lookups ------------------- */

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateInstance(const VkInstanceCreateInfo *info,
                                                           const VkAllocationCallbacks *cb,
                                                           VkInstance *out)
{
    /* The loader's link to the next layer, which this layer moves on for it. */
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)info->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                     link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (!link || !link->u.pLayerInfo)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next(VK_NULL_HANDLE, "vkCreateInstance");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;
    VkResult r = create(info, cb, out);
    if (r != VK_SUCCESS)
        return r;
    int errno_ = errno;
    instance_slot s = {
        .key = dispatch_key(*out),
        .instance = *out,
        .next_gipa = next,
        .destroy = (PFN_vkDestroyInstance)next(*out, "vkDestroyInstance"),
        .enumerate = (PFN_vkEnumeratePhysicalDevices)next(*out, "vkEnumeratePhysicalDevices"),
        .memory_properties = (PFN_vkGetPhysicalDeviceMemoryProperties)next(
            *out, "vkGetPhysicalDeviceMemoryProperties")};
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (unsigned i = 0; i < DS_VK_INSTANCES; i++)
        if (!instances[i].key) {
            void *key = s.key;
            s.key = NULL;
            instances[i] = s;
            __atomic_store_n(&instances[i].key, key, __ATOMIC_RELEASE);
            break;
        }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    errno = errno_;
    return r;
}

static VKAPI_ATTR void VKAPI_CALL layer_DestroyInstance(VkInstance instance,
                                                        const VkAllocationCallbacks *cb)
{
    instance_slot *s = instance_of(instance);
    if (!s)
        return;
    PFN_vkDestroyInstance destroy = s->destroy;
    __atomic_store_n(&s->key, NULL, __ATOMIC_RELEASE);
    if (destroy)
        destroy(instance, cb);
}

/* The index of a physical device among its instance's. */
static int physical_index(instance_slot *in, VkPhysicalDevice physical)
{
    VkPhysicalDevice all[16];
    uint32_t n = 16;
    if (!in->enumerate || in->enumerate(in->instance, &n, all) < 0)
        return 0;
    for (uint32_t i = 0; i < n && i < 16; i++)
        if (all[i] == physical)
            return (int)i;
    return 0;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateDevice(VkPhysicalDevice physical,
                                                         const VkDeviceCreateInfo *info,
                                                         const VkAllocationCallbacks *cb,
                                                         VkDevice *out)
{
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)info->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                     link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    instance_slot *in = instance_of(physical);
    if (!link || !link->u.pLayerInfo || !in)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)next_gipa(in->instance, "vkCreateDevice");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;
    VkResult r = create(physical, info, cb, out);
    if (r != VK_SUCCESS)
        return r;
    int errno_ = errno;
    ds_vk_device s = {.key = dispatch_key(*out), .device = *out, .next_gdpa = next_gdpa,
                     .index = physical_index(in, physical)};
    s.destroy = (PFN_vkDestroyDevice)next_gdpa(*out, "vkDestroyDevice");
    if (in->memory_properties)
        in->memory_properties(physical, &s.memory);
#define VK_HOOK(name, params, args, after) s.name = (PFN_##name)next_gdpa(*out, #name);
#define VK_VOID(name, params, args, before) s.name = (PFN_##name)next_gdpa(*out, #name);
#define VK_FREE(name, params, args, check, done) s.name = (PFN_##name)next_gdpa(*out, #name);
#define VK_HOOK_ON(object, name, params, args, after) VK_HOOK(name, params, args, after)
#define VK_VOID_ON(object, name, params, args, before) VK_HOOK(name, params, args, before)
#define VK_BEFORE_ON(object, name, params, args, before) VK_HOOK(name, params, args, before)
#include "vulkan.def"
#include "vulkan_queues.def"
#include "vulkan_descriptors.def"
#include "vulkan_forms_undef.h"
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (unsigned i = 0; i < DS_VK_DEVICES; i++)
        if (!devices[i].key) {
            void *key = s.key;
            s.key = NULL;
            devices[i] = s;
            __atomic_store_n(&devices[i].key, key, __ATOMIC_RELEASE);
            break;
        }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    errno = errno_;
    return r;
}

static VKAPI_ATTR void VKAPI_CALL layer_DestroyDevice(VkDevice device,
                                                      const VkAllocationCallbacks *cb)
{
    ds_vk_device *d = ds_vk_device_of(device);
    if (!d)
        return;
    PFN_vkDestroyDevice destroy = d->destroy;
    __atomic_store_n(&d->key, NULL, __ATOMIC_RELEASE);
    if (destroy)
        destroy(device, cb);
}

/* The device functions this layer answers for: its wrappers, where the
 * device below has the function. */
static PFN_vkVoidFunction device_wrapper(const ds_vk_device *d, const char *name)
{
#include "vulkan_lookup.h"
#include "vulkan.def"
#include "vulkan_forms_undef.h"
    if (!strcmp(name, "vkDestroyDevice"))
        return (PFN_vkVoidFunction)layer_DestroyDevice;
    PFN_vkVoidFunction queues = ds_vk_queue_wrapper(d, name);
    return queues ? queues : ds_vk_descriptor_wrapper(d, name);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetDeviceProcAddr(VkDevice device,
                                                                        const char *name)
{
    ds_vk_device *d = ds_vk_device_of(device);
    if (!name || !d)
        return NULL;
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)layer_GetDeviceProcAddr;
    PFN_vkVoidFunction ours = device_wrapper(d, name);
    /* cppcheck reads the result of a pointer to a function returning a
     * function pointer as an int */
    // cppcheck-suppress CastIntegerToAddressAtReturn
    return ours ? ours : d->next_gdpa(device, name);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetInstanceProcAddr(VkInstance instance,
                                                                          const char *name)
{
    if (!name)
        return NULL;
    if (!strcmp(name, "vkGetInstanceProcAddr"))
        return (PFN_vkVoidFunction)layer_GetInstanceProcAddr;
    if (!strcmp(name, "vkCreateInstance"))
        return (PFN_vkVoidFunction)layer_CreateInstance;
    if (!strcmp(name, "vkDestroyInstance"))
        return (PFN_vkVoidFunction)layer_DestroyInstance;
    if (!strcmp(name, "vkCreateDevice"))
        return (PFN_vkVoidFunction)layer_CreateDevice;
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)layer_GetDeviceProcAddr;
    PFN_vkVoidFunction ours = device_wrapper(NULL, name);
    if (ours)
        return ours;
    instance_slot *s = instance_of(instance);
    return s ? s->next_gipa(instance, name) : NULL;
}

/* The layer's one entry point, named in the manifest (the loader's
 * vkNegotiateLoaderLayerInterfaceVersion under dlshim's prefix, so that the
 * preloaded library defines no Vulkan symbol of its own). */
DS_PUBLIC VkResult dlshim_vulkan_negotiate(VkNegotiateLayerInterface *v);
DS_PUBLIC VkResult dlshim_vulkan_negotiate(VkNegotiateLayerInterface *v)
{
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT || v->loaderLayerInterfaceVersion < 2)
        return VK_ERROR_INITIALIZATION_FAILED;
    v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = layer_GetInstanceProcAddr;
    v->pfnGetDeviceProcAddr = layer_GetDeviceProcAddr;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}

/* ---- the family ------------------------------------------------------------------ */

static bool no_barrier(uintptr_t producer, uintptr_t consumer)
{
    (void)producer;
    (void)consumer;
    return false;
}

/* DLSHIM_SYNC=enforce, a queue's submission about to use a handoff another
 * queue's write is not ordered before: no command can be put ahead of it
 * from here, so the host waits (bounded) for the producer's queue before
 * the submission is forwarded. */
static bool queue_barrier(uintptr_t producer, uintptr_t consumer)
{
    (void)consumer;
    return ds_vk_queue_host_wait(producer);
}

static const ds_device_api api = {
    .name = "vulkan",
    .device_type = {[DS_ALLOC_DEVICE] = "vulkan", [DS_ALLOC_HOST] = "vulkan",
                    [DS_ALLOC_MANAGED] = "vulkan", [DS_ALLOC_ASYNC] = "vulkan"},
    .barrier = queue_barrier,
    .release = release,
    .handles = true,
    .tensor_device_type = kDLVulkan,
    .memory_of = memory_of,
    .property_names = property_names,
    .stream_noun = "queue",
    .host_wait = ds_vk_queue_host_wait};

#define DS_VK_LAYER "VK_LAYER_DLSHIM_ledger"

/* Whether the list (`sep`-separated) holds `item`. */
static bool listed(const char *list, const char *item, char sep)
{
    size_t n = strlen(item);
    for (const char *p = list; p && *p; p = strchr(p, sep), p = p ? p + 1 : NULL)
        if (!strncmp(p, item, n) && (p[n] == sep || p[n] == '\0'))
            return true;
    return false;
}

/* Enables the layer for this process (and what it runs) where the program
 * was not started by the launcher, which does the same: the manifest's
 * folder, beside this library, joins the loader's search path and the
 * layer the layers every instance gets; the loader reads both when the
 * program creates its first instance.  Only at start-up on the main thread
 * (the shim's constructor, before main): setenv is not safe while other
 * threads read the environment. */
static void enable_layer(void)
{
    Dl_info self;
    char dir[4096], manifest[4200];
    if (ds_tid() != (long)getpid() || !dladdr((void *)enable_layer, &self) || !self.dli_fname)
        return;
    const char *slash = strrchr(self.dli_fname, '/');
    size_t n = slash ? (size_t)(slash - self.dli_fname) : 0;
    if (n == 0 || n + sizeof("/vulkan") > sizeof(dir))
        return;
    memcpy(dir, self.dli_fname, n);
    memcpy(dir + n, "/vulkan", sizeof("/vulkan"));
    ds_fmt(manifest, sizeof(manifest), "%s/dlshim_layer.json", dir);
    if (access(manifest, R_OK) != 0)
        return;
    const char *paths = getenv("VK_ADD_LAYER_PATH"), *layers = getenv("VK_INSTANCE_LAYERS");
    char value[8192];
    if (!listed(paths, dir, ':')) {
        ds_fmt(value, sizeof(value), "%s%s%s", dir, paths && *paths ? ":" : "", paths ? paths : "");
        setenv("VK_ADD_LAYER_PATH", value, 1);
    }
    if (!listed(layers, DS_VK_LAYER, ':')) {
        ds_fmt(value, sizeof(value), "%s%s%s", layers ? layers : "", layers && *layers ? ":" : "",
               DS_VK_LAYER);
        setenv("VK_INSTANCE_LAYERS", value, 1);
    }
}

/* Host mappings of that memory: addresses, whose tensors are CPU tensors. */
static const ds_device_api mapping_api = {
    .name = "vulkan",
    .device_type = {[DS_ALLOC_MAPPED] = "cpu"},
    .barrier = no_barrier,
    .release = release_mapping};

static void install(void)
{
    ds_vk_api = ds_device_api_add(&api);
    ds_mapping_api = ds_device_api_add(&mapping_api);
    enable_layer();
}

DS_FAMILY(vulkan, .option = "vulkan", .order = DS_ORDER_DEVICES, .install = install);
