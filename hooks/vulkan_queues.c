/*
 * vulkan_queues.c — Vulkan queues in the stream model (the Vulkan family's
 * second file; vulkan.c is the layer and the memory, vulkan_descriptors.c
 * what dispatches write, vulkan_family.h what the files share).
 *
 * A queue is a stream of the model, a submission an operation on it, a
 * fence or a semaphore it signals an event recorded there; a fence waited
 * for (or found signalled), a queue or device waited idle, the host's wait.
 * What a submission writes is what its command buffers recorded: fills,
 * updates, buffer copies and image-to-buffer copies (their surely written
 * bytes) into buffers, and the storage buffers a dispatch has bound
 * (vulkan_descriptors.c records them here: ds_vk_recorded_use), as bytes
 * of their memory's host mapping (where a CPU tensor over it is read:
 * ds_sync_host_reads) and as offsets in the memory itself
 * (ds_vk_buffer_in_memory), where a CUDA or HIP tensor over their mapping
 * of an import of it finds them when it is imported, whenever that
 * mapping was made (ds_alloc_alias_range), and a kDLVulkan tensor over the
 * memory finds them too.  What a copy reads is recorded as well, in the
 * memory: with the writes, the uses that are a kDLVulkan tensor's first
 * on its consumer's queue.  A submission is modelled before it is
 * forwarded, so that DLSHIM_SYNC=enforce can make the host wait for the
 * producer's queue first (vulkan.c's barrier).  A secondary command
 * buffer records its writes as a primary does; vkCmdExecuteCommands hands
 * them to the primary that executes it, whose submission makes them.
 *
 * Semaphores are edges: a binary one an event (recorded where a submission
 * signals it, waited for where one waits), a timeline one an event per
 * value signalled, which a submission's or the host's wait for a value
 * merges up to the first signal that reaches it (the stream model's table
 * of timelines, shim/ledger/timelines.c).  A semaphore exported as an opaque file
 * descriptor (vkGetSemaphoreFdKHR) and imported by CUDA or HIP is the same
 * event, or the same timeline, on their side (shim/ledger/external.c): a
 * CUDA stream's wait for it (for a value) merges what a submission
 * signalled (up to that value), a submission's wait what a CUDA stream
 * signalled.
 *
 * Wraps (vulkan_queues.def): vkBeginCommandBuffer, vkResetCommandBuffer,
 * vkCmdFillBuffer, vkCmdUpdateBuffer, vkCmdCopyBuffer, vkCmdCopyImageToBuffer,
 * vkCmdCopyBufferToImage and their copy2 forms (core and KHR),
 * vkCmdExecuteCommands, vkQueueSubmit, vkQueueSubmit2(KHR), vkQueueWaitIdle, vkDeviceWaitIdle,
 * vkWaitForFences, vkGetFenceStatus, vkDestroyFence, vkCreateSemaphore,
 * vkDestroySemaphore, vkGetSemaphoreFdKHR, vkWaitSemaphores(KHR),
 * vkGetSemaphoreCounterValue(KHR).
 * Left out: what that table says; sync-file exports of semaphores (not
 * linked).
 */
#include <string.h>

#include "vulkan_family.h"

#define DS_VK_RECORDINGS 4096u /* command buffers (a power of two) */
/* Writes kept per command buffer, a primary's with those of the secondaries
 * it executes.  More are unseen rather than widened into a write of the
 * whole buffer: a conservative overflow would report handoffs of bytes no
 * command wrote, which the model never does (an unseen write can hide a
 * race, never make one).  Distinct writes are few (a write kept once: see
 * ds_vk_recorded_use), so the bound is 32, twice a single command
 * buffer's old 16, for a primary that gathers a few secondaries' writes. */
#define DS_VK_RECORDED 32u

/* A buffer's bytes a command writes, or (write 0) reads: a read counts
 * only as a use, the first of a handoff by its consumer's queue. */
typedef struct {
    uint64_t buffer, offset, size, write;
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
    ds_vk_bindings_reset(cb);
}

/* Lock held.  A use kept once: dispatch after dispatch through the same
 * sets writes the same ranges, which would otherwise fill the recording.
 * Full, a write takes the place of a read (whose bytes then go unseen as a
 * kDLVulkan tensor's first use, rather than a write's as the last). */
static void kept(recording *r, const recorded *w)
{
    uint32_t k = 0;
    while (r && k < r->n && memcmp(&r->w[k], w, sizeof(*w)) != 0)
        k++;
    if (!r || k < r->n)
        return;
    if (r->n < DS_VK_RECORDED) {
        r->w[r->n++] = *w;
        return;
    }
    for (k = 0; w->write && k < r->n; k++)
        if (!r->w[k].write) {
            r->w[k] = *w;
            return;
        }
}

void ds_vk_recorded_use(VkCommandBuffer cb, VkBuffer buffer, VkDeviceSize offset,
                        VkDeviceSize size, bool write)
{
    if (!ds_sync_enabled())
        return;
    recorded w = {P(buffer), offset, size, write};
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    kept(recording_of(cb, true), &w);
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* Secondary command buffers executed from a primary: their writes, as
 * recorded by now (a secondary recorded again later invalidates the
 * primary, which must be recorded again too), become the primary's, made
 * when it is submitted. */
static void secondaries_executed(VkCommandBuffer primary, uint32_t count,
                                 const VkCommandBuffer *secondaries)
{
    if (!ds_sync_enabled() || !secondaries)
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    recording *to = recording_of(primary, true);
    for (uint32_t i = 0; to && i < count; i++) {
        const recording *from = recording_of(secondaries[i], false);
        for (uint32_t k = 0; from && from != to && k < from->n; k++)
            kept(to, &from->w[k]);
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void recorded_copies(VkCommandBuffer cb, VkBuffer src, VkBuffer dst, uint32_t count,
                            const VkBufferCopy *regions)
{
    for (uint32_t i = 0; regions && i < count && i < DS_VK_RECORDED; i++) {
        ds_vk_recorded_use(cb, src, regions[i].srcOffset, regions[i].size, false);
        ds_vk_recorded_use(cb, dst, regions[i].dstOffset, regions[i].size, true);
    }
}

static void recorded_copies2(VkCommandBuffer cb, const VkCopyBufferInfo2 *info)
{
    for (uint32_t i = 0; info && info->pRegions && i < info->regionCount && i < DS_VK_RECORDED;
         i++) {
        const VkBufferCopy2 *r = &info->pRegions[i];
        ds_vk_recorded_use(cb, info->srcBuffer, r->srcOffset, r->size, false);
        ds_vk_recorded_use(cb, info->dstBuffer, r->dstOffset, r->size, true);
    }
}

/* An image copied into a buffer (write), or a buffer into an image: of
 * each region, the buffer's bytes it writes or reads whatever the format (a
 * texel or a block is at least a byte, a block row at least as many bytes
 * as it has texels): its first row's first `width` bytes at bufferOffset.
 * Fewer than it touches: an unseen byte can hide a race, never make one. */
static void recorded_image_region(VkCommandBuffer cb, VkBuffer buffer, VkDeviceSize offset,
                                  const VkImageSubresourceLayers *layers,
                                  const VkExtent3D *extent, bool write)
{
    if (extent->width && extent->height && extent->depth && layers->layerCount)
        ds_vk_recorded_use(cb, buffer, offset, extent->width, write);
}

static void recorded_image_copies(VkCommandBuffer cb, VkBuffer buffer, uint32_t count,
                                  const VkBufferImageCopy *regions, bool write)
{
    for (uint32_t i = 0; regions && i < count && i < DS_VK_RECORDED; i++)
        recorded_image_region(cb, buffer, regions[i].bufferOffset, &regions[i].imageSubresource,
                              &regions[i].imageExtent, write);
}

/* The same of a copy2 form's regions. */
static void recorded_image_copies2(VkCommandBuffer cb, VkBuffer buffer, uint32_t count,
                                   const VkBufferImageCopy2 *regions, bool write)
{
    for (uint32_t i = 0; regions && i < count && i < DS_VK_RECORDED; i++)
        recorded_image_region(cb, buffer, regions[i].bufferOffset, &regions[i].imageSubresource,
                              &regions[i].imageExtent, write);
}

static void image_to_buffer2(VkCommandBuffer cb, const VkCopyImageToBufferInfo2 *info)
{
    if (info)
        recorded_image_copies2(cb, info->dstBuffer, info->regionCount, info->pRegions, true);
}

static void buffer_to_image2(VkCommandBuffer cb, const VkCopyBufferToImageInfo2 *info)
{
    if (info)
        recorded_image_copies2(cb, info->srcBuffer, info->regionCount, info->pRegions, false);
}

/* ---- timeline semaphores: a clock per value signalled --------------------------
 * The table of timeline semaphores and their signals is the stream model's
 * (shim/ledger/timelines.c), shared with CUDA and HIP: a queue's signal of
 * a value there is what a CUDA stream's wait for it on an import of the
 * semaphore merges, and the reverse. */
static bool is_timeline(VkSemaphore semaphore)
{
    return ds_timeline_is(ds_vk_api, P(semaphore));
}

static void semaphore_created(VkSemaphore semaphore, const VkSemaphoreCreateInfo *info)
{
    const VkSemaphoreTypeCreateInfo *type =
        info ? ds_vk_find_in_chain(info->pNext, VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO)
             : NULL;
    if (type && type->semaphoreType == VK_SEMAPHORE_TYPE_TIMELINE)
        ds_timeline_created(ds_vk_api, P(semaphore), type->initialValue);
}

static void semaphore_destroyed(VkSemaphore semaphore)
{
    ds_sync_event_destroyed(ds_vk_api, P(semaphore));
    ds_extsem_semaphore_gone(ds_vk_api, P(semaphore));
    ds_timeline_destroyed(ds_vk_api, P(semaphore));
}

/* A semaphore exported as an opaque descriptor, binary or timeline, for
 * the API that imports it (a sync file is a copy of one pending signal:
 * not linked). */
static void semaphore_exported(const VkSemaphoreGetFdInfoKHR *info, int fd)
{
    if (info->handleType == VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT)
        ds_extsem_exported(ds_vk_api, P(info->semaphore), fd);
}

static void timeline_waited(uintptr_t queue, VkSemaphore semaphore, uint64_t value)
{
    if (queue)
        ds_timeline_waited(ds_vk_api, P(semaphore), value, ds_vk_api, queue, false);
    else
        ds_timeline_host_waited(ds_vk_api, P(semaphore), value);
}

/* The host waited for a queue (0: every queue) to be idle: its clock
 * covers what they signalled, which is forgotten (keeping the table of
 * signals small where the host waits that way, not on values). */
static void queue_idle(uintptr_t queue)
{
    if (queue)
        ds_sync_host_waits_stream(ds_vk_api, queue, false);
    else
        ds_sync_host_waits_all(ds_vk_api);
    ds_timeline_stream_idle(ds_vk_api, queue);
}

/* vkWaitSemaphores returned VK_SUCCESS: every value reached, or (the
 * any flag) at least one, found by asking each semaphore its counter. */
static void semaphores_waited(const ds_vk_device *d, const VkSemaphoreWaitInfo *info)
{
    if (!info || !info->pSemaphores || !info->pValues)
        return;
    PFN_vkGetSemaphoreCounterValue counter =
        d->vkGetSemaphoreCounterValue ? d->vkGetSemaphoreCounterValue
                                      : d->vkGetSemaphoreCounterValueKHR;
    bool any = info->flags & VK_SEMAPHORE_WAIT_ANY_BIT && info->semaphoreCount > 1;
    for (uint32_t i = 0; i < info->semaphoreCount && i < 64; i++) {
        uint64_t value = info->pValues[i];
        if (any && (!counter || counter(d->device, info->pSemaphores[i], &value) != VK_SUCCESS))
            continue;
        timeline_waited(0, info->pSemaphores[i], value);
    }
}

static void counter_read(VkSemaphore semaphore, const uint64_t *value)
{
    if (value)
        timeline_waited(0, semaphore, *value);
}

/* ---- submissions ----------------------------------------------------------------- */

/* Each queue's device and what the host can wait for to see its last
 * submission that gave one done (a fence, or a timeline value it signals),
 * for the host's wait under DLSHIM_SYNC=enforce (ds_vk_queue_host_wait). */
#define DS_VK_QUEUES 64u
typedef struct {
    VkQueue queue; /* NULL: free */
    VkFence fence; /* or */
    VkSemaphore timeline;
    uint64_t value;
    const ds_vk_device *device;
} queue_fence;
static queue_fence queue_fences[DS_VK_QUEUES];

static void fence_queued(VkQueue queue, VkFence fence, VkSemaphore timeline, uint64_t value)
{
    const ds_vk_device *d = ds_vk_device_of(queue);
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (unsigned i = 0; d && i < DS_VK_QUEUES; i++)
        if (queue_fences[i].queue == queue || !queue_fences[i].queue) {
            queue_fences[i] = (queue_fence){queue, fence, timeline, value, d};
            break;
        }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* The host waits, a second at most, for the queue's last submission that
 * can be waited for (and, as drivers complete a queue's work in order, for
 * what was submitted before it): never forever, since the program may hold
 * the queue back itself until after the read (a wait on an event the host
 * sets later). */
bool ds_vk_queue_host_wait(uintptr_t queue)
{
    queue_fence q = {0};
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (unsigned i = 0; i < DS_VK_QUEUES && queue_fences[i].queue; i++)
        if (P(queue_fences[i].queue) == queue)
            q = queue_fences[i];
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    const ds_vk_device *d = q.device;
    if (q.fence) {
        if (!d->vkWaitForFences ||
            d->vkWaitForFences(d->device, 1, &q.fence, 1, 1000000000ull) != VK_SUCCESS)
            return false;
        ds_sync_host_waits_event(ds_vk_api, P(q.fence));
        return true;
    }
    if (!q.timeline)
        return false;
    PFN_vkWaitSemaphores wait = d->vkWaitSemaphores ? d->vkWaitSemaphores : d->vkWaitSemaphoresKHR;
    VkSemaphoreWaitInfo info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                .semaphoreCount = 1, .pSemaphores = &q.timeline,
                                .pValues = &q.value};
    if (!wait || wait(d->device, &info, 1000000000ull) != VK_SUCCESS)
        return false;
    timeline_waited(0, q.timeline, q.value);
    return true;
}

/* One submission, whichever call made it: its semaphores (`value` read only
 * for timeline ones), its command buffers. */
typedef struct {
    uint32_t waits, buffers, signals;
    VkSemaphore wait[64], signal[64];
    uint64_t wait_value[64], signal_value[64];
    VkCommandBuffer buffer[64];
} submission;

/* What one submission's command buffers write, as ranges in the memory's
 * host mapping (where a CPU tensor over it is read) and in the memory
 * itself (what another API's mapping of it translates to, and where a
 * kDLVulkan tensor's bytes are: no host mapping needed), and what they
 * read, in the memory (a kDLVulkan tensor's consumer's first use). */
static int submission_ranges(const submission *s, ds_range *out, int max)
{
    int n = 0;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (uint32_t c = 0; c < s->buffers; c++) {
        const recording *r = recording_of(s->buffer[c], false);
        for (uint32_t k = 0; r && k < r->n && n + 1 < max; k++) {
            const recorded *w = &r->w[k];
            if (w->write)
                n += ds_vk_buffer_mapped(w->buffer, w->offset, w->size, &out[n]);
            n += ds_vk_buffer_in_memory(w->buffer, w->offset, w->size, w->write, &out[n]);
        }
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    return n;
}

/* A submission on the queue's clock: what it waits for merged, what it
 * writes ticked, what it signals recorded.  The last timeline value it
 * signals is kept in *timeline / *value. */
static void submission_modelled(VkQueue queue, const submission *s, const void *caller,
                                VkSemaphore *timeline, uint64_t *value)
{
    for (uint32_t k = 0; k < s->waits; k++)
        if (is_timeline(s->wait[k]))
            timeline_waited(P(queue), s->wait[k], s->wait_value[k]);
        else
            ds_sync_stream_waits(ds_vk_api, P(queue), P(s->wait[k]), false);
    ds_range used[64];
    int n = submission_ranges(s, used, (int)DS_ARRAY_LEN(used));
    ds_sync_op(ds_vk_api, P(queue), false, used, n, caller);
    for (uint32_t k = 0; k < s->signals; k++)
        if (is_timeline(s->signal[k])) {
            ds_timeline_signalled(ds_vk_api, P(s->signal[k]), s->signal_value[k], ds_vk_api,
                                  P(queue), false);
            *timeline = s->signal[k];
            *value = s->signal_value[k];
        } else {
            ds_sync_event_recorded(ds_vk_api, P(s->signal[k]), P(queue), false);
        }
}

/* Counts bounded: a program's struct is read at most 64 deep. */
static uint32_t bounded(uint32_t n, const void *array)
{
    return array ? (n < 64 ? n : 64) : 0;
}

/* The i-th VkSubmitInfo as a submission: timeline values from its
 * VkTimelineSemaphoreSubmitInfo, where it has one for that semaphore. */
static void read_submit(const void *submits, uint32_t i, submission *s)
{
    const VkSubmitInfo *si = &((const VkSubmitInfo *)submits)[i];
    const VkTimelineSemaphoreSubmitInfo *tv =
        ds_vk_find_in_chain(si->pNext, VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);
    *s = (submission){.waits = bounded(si->waitSemaphoreCount, si->pWaitSemaphores),
                      .buffers = bounded(si->commandBufferCount, si->pCommandBuffers),
                      .signals = bounded(si->signalSemaphoreCount, si->pSignalSemaphores)};
    for (uint32_t k = 0; k < s->waits; k++) {
        s->wait[k] = si->pWaitSemaphores[k];
        s->wait_value[k] = tv && tv->pWaitSemaphoreValues && k < tv->waitSemaphoreValueCount
                               ? tv->pWaitSemaphoreValues[k]
                               : 0;
    }
    for (uint32_t k = 0; k < s->buffers; k++)
        s->buffer[k] = si->pCommandBuffers[k];
    for (uint32_t k = 0; k < s->signals; k++) {
        s->signal[k] = si->pSignalSemaphores[k];
        s->signal_value[k] = tv && tv->pSignalSemaphoreValues &&
                                     k < tv->signalSemaphoreValueCount
                                 ? tv->pSignalSemaphoreValues[k]
                                 : 0;
    }
}

/* The i-th VkSubmitInfo2 (vkQueueSubmit2) as a submission. */
static void read_submit2(const void *submits, uint32_t i, submission *s)
{
    const VkSubmitInfo2 *si = &((const VkSubmitInfo2 *)submits)[i];
    *s = (submission){.waits = bounded(si->waitSemaphoreInfoCount, si->pWaitSemaphoreInfos),
                      .buffers = bounded(si->commandBufferInfoCount, si->pCommandBufferInfos),
                      .signals = bounded(si->signalSemaphoreInfoCount, si->pSignalSemaphoreInfos)};
    for (uint32_t k = 0; k < s->waits; k++) {
        s->wait[k] = si->pWaitSemaphoreInfos[k].semaphore;
        s->wait_value[k] = si->pWaitSemaphoreInfos[k].value;
    }
    for (uint32_t k = 0; k < s->buffers; k++)
        s->buffer[k] = si->pCommandBufferInfos[k].commandBuffer;
    for (uint32_t k = 0; k < s->signals; k++) {
        s->signal[k] = si->pSignalSemaphoreInfos[k].semaphore;
        s->signal_value[k] = si->pSignalSemaphoreInfos[k].value;
    }
}

/* A vkQueueSubmit or vkQueueSubmit2 about to be forwarded: each of its
 * submissions (64 at most, each read by `read`), then its fence. */
static void submitted(VkQueue queue, uint32_t count, const void *submits,
                      void (*read)(const void *, uint32_t, submission *), VkFence fence,
                      const void *caller)
{
    if (!ds_sync_enabled())
        return;
    VkSemaphore timeline = VK_NULL_HANDLE;
    uint64_t value = 0;
    for (uint32_t i = 0; submits && i < count && i < 64; i++) {
        submission s;
        read(submits, i, &s);
        submission_modelled(queue, &s, caller, &timeline, &value);
    }
    if (fence)
        ds_sync_event_recorded(ds_vk_api, P(fence), P(queue), false);
    if (fence || timeline)
        fence_queued(queue, fence, timeline, value);
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
#include "vulkan_lookup.h"
#include "vulkan_queues.def"
#include "vulkan_forms_undef.h"
    return NULL;
}
