/*
 * vulkan_queues.c — Vulkan queues in the stream model (the Vulkan family's
 * second file; vulkan.c is the layer and the memory, vulkan_family.h what
 * the two share).
 *
 * A queue is a stream of the model, a submission an operation on it, a
 * fence or a semaphore it signals an event recorded there; a fence waited
 * for (or found signalled), a queue or device waited idle, the host's wait.
 * What a submission writes is what its command buffers recorded: fills,
 * updates and copies into buffers, as bytes of their memory's host mapping
 * (where a CPU tensor over it is read: ds_sync_host_reads).  Dispatches
 * write through descriptor sets, which are not followed: such a write is
 * unseen, which can hide a race, never make one.
 *
 * Wraps (vulkan_queues.def): vkBeginCommandBuffer, vkResetCommandBuffer,
 * vkCmdFillBuffer, vkCmdUpdateBuffer, vkCmdCopyBuffer, vkQueueSubmit,
 * vkQueueWaitIdle, vkDeviceWaitIdle, vkWaitForFences, vkGetFenceStatus,
 * vkDestroyFence, vkDestroySemaphore.  Left out: what that table says.
 */
#include <string.h>

#include "vulkan_family.h"

#define DS_VK_RECORDINGS 4096u /* command buffers (a power of two) */
#define DS_VK_RECORDED 16u     /* writes kept per command buffer; more are unseen */

typedef struct {
    uint64_t buffer, offset, size;
} recorded;

typedef struct {
    uint64_t handle; /* the command buffer; 0: free */
    uint32_t n;
    recorded w[DS_VK_RECORDED];
} recording;

static recording *recordings;

/* Lock held.  The recording of a command buffer, or (insert) a slot for
 * it; NULL when the table is full (its writes go unseen).  A command
 * buffer freed is never removed: its handle, made again, begins afresh. */
static recording *recording_of(VkCommandBuffer cb, bool insert)
{
    if (!recordings)
        recordings = ds_map(sizeof(recording) * DS_VK_RECORDINGS, false);
    if (!recordings || !cb)
        return NULL;
    uint64_t h = (P(cb) * 0x9e3779b97f4a7c15ull) >> 52;
    for (unsigned i = 0; i < DS_VK_RECORDINGS; i++) {
        recording *r = &recordings[(h + i) & (DS_VK_RECORDINGS - 1)];
        if (r->handle == P(cb))
            return r;
        if (!r->handle) {
            if (!insert)
                return NULL;
            r->handle = P(cb);
            return r;
        }
    }
    return NULL;
}

static void recording_reset(VkCommandBuffer cb)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    recording *r = recording_of(cb, false);
    if (r)
        r->n = 0;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void recorded_write(VkCommandBuffer cb, VkBuffer buffer, VkDeviceSize offset,
                           VkDeviceSize size)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    recording *r = recording_of(cb, true);
    if (r && r->n < DS_VK_RECORDED)
        r->w[r->n++] = (recorded){P(buffer), offset, size};
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void recorded_copies(VkCommandBuffer cb, VkBuffer dst, uint32_t count,
                            const VkBufferCopy *regions)
{
    for (uint32_t i = 0; i < count && i < DS_VK_RECORDED; i++)
        recorded_write(cb, dst, regions[i].dstOffset, regions[i].size);
}

/* The writes of one submission's command buffers, as mapped ranges. */
static int submission_writes(const VkSubmitInfo *submit, ds_range *out, int max)
{
    int n = 0;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (uint32_t c = 0; c < submit->commandBufferCount && c < 64; c++) {
        const recording *r = recording_of(submit->pCommandBuffers[c], false);
        for (uint32_t k = 0; r && k < r->n && n < max; k++)
            n += ds_vk_buffer_mapped(r->w[k].buffer, r->w[k].offset, r->w[k].size, &out[n]);
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    return n;
}

/* Each queue's device and the fence of its last fenced submission, for the
 * host's wait under DLSHIM_SYNC=enforce (queue_host_wait). */
#define DS_VK_QUEUES 64u
typedef struct {
    VkQueue queue; /* NULL: free */
    VkFence fence;
    const ds_vk_device *device;
} queue_fence;
static queue_fence queue_fences[DS_VK_QUEUES];

static void fence_queued(VkQueue queue, VkFence fence)
{
    const ds_vk_device *d = ds_vk_device_of(queue);
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (unsigned i = 0; d && i < DS_VK_QUEUES; i++)
        if (queue_fences[i].queue == queue || !queue_fences[i].queue) {
            queue_fences[i] = (queue_fence){queue, fence, d};
            break;
        }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* The host waits, a second at most, for the queue's last fenced submission
 * (and, as drivers complete a queue's work in order, for what was submitted
 * before it): never forever, since the program may hold the queue back
 * itself until after the read (a wait on an event the host sets later). */
bool ds_vk_queue_host_wait(uintptr_t queue)
{
    queue_fence q = {0};
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (unsigned i = 0; i < DS_VK_QUEUES && queue_fences[i].queue; i++)
        if (P(queue_fences[i].queue) == queue)
            q = queue_fences[i];
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    if (!q.fence || !q.device->vkWaitForFences ||
        q.device->vkWaitForFences(q.device->device, 1, &q.fence, 1, 1000000000ull) != VK_SUCCESS)
        return false;
    ds_sync_host_waits_event(ds_vk_api, P(q.fence));
    return true;
}

static void submitted(VkQueue queue, uint32_t count, const VkSubmitInfo *submits, VkFence fence,
                      const void *caller)
{
    if (!ds_sync_enabled())
        return;
    for (uint32_t i = 0; i < count && i < 64; i++) {
        const VkSubmitInfo *s = &submits[i];
        for (uint32_t k = 0; k < s->waitSemaphoreCount && k < 64; k++)
            ds_sync_stream_waits(ds_vk_api, P(queue), P(s->pWaitSemaphores[k]), false);
        ds_range writes[64];
        int n = submission_writes(s, writes, (int)DS_ARRAY_LEN(writes));
        ds_sync_op(ds_vk_api, P(queue), false, writes, n, caller);
        for (uint32_t k = 0; k < s->signalSemaphoreCount && k < 64; k++)
            ds_sync_event_recorded(ds_vk_api, P(s->pSignalSemaphores[k]), P(queue), false);
    }
    if (fence) {
        ds_sync_event_recorded(ds_vk_api, P(fence), P(queue), false);
        fence_queued(queue, fence);
    }
}

/* vkWaitForFences returned VK_SUCCESS: all of them signalled, or (waitAll
 * false) at least one, found by asking each. */
static void fences_waited(const ds_vk_device *d, uint32_t count, const VkFence *fences,
                          VkBool32 all)
{
    for (uint32_t i = 0; i < count && i < 64; i++)
        if (all || count == 1 ||
            (d->vkGetFenceStatus && d->vkGetFenceStatus(d->device, fences[i]) == VK_SUCCESS))
            ds_sync_host_waits_event(ds_vk_api, P(fences[i]));
}

/* ---- the wrappers ---------------------------------------------------------------- */
#include "vulkan_wrap.h"
#include "vulkan_queues.def"
#include "vulkan_forms_undef.h"

PFN_vkVoidFunction ds_vk_queue_wrapper(const ds_vk_device *d, const char *name)
{
#define VK_HOOK(fn, params, args, after) \
    if (!strcmp(name, #fn))              \
        return d && !d->fn ? NULL : (PFN_vkVoidFunction)wrap_##fn;
#define VK_VOID(fn, params, args, before) VK_HOOK(fn, params, args, before)
#define VK_HOOK_ON(object, fn, params, args, after) VK_HOOK(fn, params, args, after)
#define VK_VOID_ON(object, fn, params, args, before) VK_HOOK(fn, params, args, before)
#include "vulkan_queues.def"
#include "vulkan_forms_undef.h"
    return NULL;
}
