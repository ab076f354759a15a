/*
 * A Vulkan semaphore (binary, or timeline: tl_* modes) exported as a file
 * descriptor and imported by CUDA, ordering a queue's work and a CUDA
 * stream's: `vk_extsem MODE`.
 * Real Vulkan and CUDA runtime calls only (in CI: lavapipe, given
 * VK_KHR_external_semaphore_fd by the simulated device's layer, and the
 * simulated CUDA device; any driver with the extension and a GPU elsewhere).
 *
 *   vk_to_cuda         a submission fills the mapped buffer and signals the
 *                      semaphore; a non-blocking CUDA stream waits for it,
 *                      the host synchronizes that stream, then a CPU tensor
 *                      over the mapping is handed to a consumer
 *   vk_to_cuda_nowait  the same without the CUDA stream's wait (race)
 *   cuda_to_vk         CUDA fills a buffer of its own on that stream and
 *                      signals the semaphore; a submission waits for it,
 *                      the host waits for the submission's fence, then the
 *                      buffer is handed to a consumer that copies it out on
 *                      the legacy default stream
 *   cuda_to_vk_nowait  the same without the submission's wait (race)
 *   vkmem_sem          CUDA imports the buffer's exported memory; a
 *                      submission fills the buffer and signals the
 *                      semaphore, the CUDA stream waits for it, then a CUDA
 *                      tensor over CUDA's mapping is handed to a consumer
 *                      that copies it out on that stream
 *   vkmem_fence        the same, ordered by the host's wait for the
 *                      submission's fence instead of the semaphore
 *   vkmem_nowait       the same with neither (race)
 *   vkmem_early_sem, vkmem_early_fence, vkmem_early_nowait
 *                      the same, the fill submitted before CUDA imports
 *                      and maps the memory
 *   vkmem_window_inside_sem, _fence, _nowait
 *                      CUDA maps only 32 KiB at offset 16 KiB of the
 *                      memory (a buffer sub-allocated in a larger one); the
 *                      tensor is 8 KiB at 8 KiB into that mapping (memory
 *                      bytes 24-32 KiB), and the fill writes memory bytes
 *                      28-32 KiB, inside it
 *   vkmem_window_outside_nowait
 *                      the same, the fill writing memory bytes 0-24 KiB:
 *                      the start of the mapping, none of the tensor's bytes
 *
 *
 * tl_MODE: the same with a timeline semaphore (Vulkan 1.2's, exported as
 * an opaque descriptor, imported by CUDA as a timeline semaphore's): the
 * producer signals 1 (Vulkan: an empty submission; CUDA: before its
 * write), then 2 after its write; the consumer's side waits for 2, or (a
 * mode ending in _wait1) only for 1, the race, the write held back as
 * without a wait.  Of the modes above: tl_vk_to_cuda(_wait1, _nowait),
 * tl_cuda_to_vk(_wait1, _nowait), tl_vkmem_sem(_wait1), tl_vkmem_nowait;
 * and
 *   tl_vk_to_cuda_early(_wait1)
 *                      as tl_vk_to_cuda, the CUDA stream's wait queued
 *                      before the queue's submissions (wait-before-signal)
 *   tl_cuda_to_host(_wait1)
 *                      CUDA fills a buffer of its own and signals; the
 *                      host waits for the value (vkWaitSemaphores), then
 *                      the buffer is handed to a consumer as in cuda_to_vk
 * A mode with _drv in it (tl_vk_to_cuda_drv, tl_cuda_to_vk_drv_wait1, ...)
 * imports, signals, waits for and destroys the semaphore through the
 * driver's functions, looked up with cudaGetDriverEntryPointByVersion.
 *
 * Without the extension it exits 77 (unavailable, as the other Vulkan
 * programs do where a feature is missing); it exits 0 when every call it
 * made succeeded.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/cuda_check.h"
#include "vk_setup.h"

/* The semaphore Vulkan and CUDA share: binary, or timeline (its values
 * then what a signal sets and a wait waits for; a binary one's ignored). */
typedef struct {
    VkSemaphore vk;
    cudaExternalSemaphore_t cuda;
    int timeline;
} shared;

/* The CUDA side through the driver's functions (a _drv mode), looked up
 * as CuPy and XLA look them up, or the runtime's. */
static int driver;

static void *driver_fn(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 13000, cudaEnableDefault, &found));
    return fn;
}

static void driver_check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        printf("%s failed: %d\n", what, (int)r);
        exit(1);
    }
}

/* An exportable semaphore, exported and imported by CUDA (which owns the
 * descriptor from then on). */
static shared shared_semaphore(int timeline)
{
    int fd;
    shared sh = {exported_semaphore(timeline ? VK_SEMAPHORE_TYPE_TIMELINE
                                             : VK_SEMAPHORE_TYPE_BINARY,
                                    &fd),
                 NULL, timeline};
    if (driver) {
        CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc = {
            .type = timeline ? CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
                             : CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
            .handle.fd = fd};
        __typeof__(cuImportExternalSemaphore) *import = driver_fn("cuImportExternalSemaphore");
        driver_check(import((CUexternalSemaphore *)&sh.cuda, &desc), "cuImportExternalSemaphore");
        return sh;
    }
    struct cudaExternalSemaphoreHandleDesc desc = {
        .type = timeline ? cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd
                         : cudaExternalSemaphoreHandleTypeOpaqueFd,
        .handle.fd = fd};
    CUDA_CHECK(cudaImportExternalSemaphore(&sh.cuda, &desc));
    return sh;
}

/* One submission of cb (or none) on the rig's queue: it waits for `wait`
 * (NULL: nothing) and signals `signal` (NULL: nothing) at their values,
 * then `fence` (or none). */
static void submit(const queue_rig *rig, VkCommandBuffer cb, const shared *wait,
                   uint64_t wait_value, const shared *signal, uint64_t signal_value,
                   VkFence fence)
{
    VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo tv = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = wait ? 1 : 0,
                                        .pWaitSemaphoreValues = &wait_value,
                                        .signalSemaphoreValueCount = signal ? 1 : 0,
                                        .pSignalSemaphoreValues = &signal_value};
    int timeline = (wait && wait->timeline) || (signal && signal->timeline);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = timeline ? &tv : NULL,
                       .waitSemaphoreCount = wait ? 1 : 0,
                       .pWaitSemaphores = wait ? &wait->vk : NULL, .pWaitDstStageMask = &stage,
                       .commandBufferCount = cb ? 1 : 0, .pCommandBuffers = &cb,
                       .signalSemaphoreCount = signal ? 1 : 0,
                       .pSignalSemaphores = signal ? &signal->vk : NULL};
    VK_CHECK(vkQueueSubmit(rig->queue, 1, &si, fence));
}

/* CUDA's stream s waits for (or signals) the value. */
static void cuda_waits(const shared *sh, uint64_t value, cudaStream_t s)
{
    if (driver) {
        CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS params = {.params.fence.value = value};
        __typeof__(cuWaitExternalSemaphoresAsync) *wait =
            driver_fn("cuWaitExternalSemaphoresAsync");
        driver_check(wait((const CUexternalSemaphore *)&sh->cuda, &params, 1, (CUstream)s),
                     "cuWaitExternalSemaphoresAsync");
        return;
    }
    struct cudaExternalSemaphoreWaitParams params;
    memset(&params, 0, sizeof(params));
    params.params.fence.value = value;
    CUDA_CHECK(cudaWaitExternalSemaphoresAsync(&sh->cuda, &params, 1, s));
}

static void cuda_signals(const shared *sh, uint64_t value, cudaStream_t s)
{
    if (driver) {
        CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS params = {.params.fence.value = value};
        __typeof__(cuSignalExternalSemaphoresAsync) *signal =
            driver_fn("cuSignalExternalSemaphoresAsync");
        driver_check(signal((const CUexternalSemaphore *)&sh->cuda, &params, 1, (CUstream)s),
                     "cuSignalExternalSemaphoresAsync");
        return;
    }
    struct cudaExternalSemaphoreSignalParams params;
    memset(&params, 0, sizeof(params));
    params.params.fence.value = value;
    CUDA_CHECK(cudaSignalExternalSemaphoresAsync(&sh->cuda, &params, 1, s));
}

/* How the consumer's side waits: for `value` (2, or 1 in a _wait1 mode:
 * the race), or not at all (_nowait: the race); a race's write is held
 * back until the consumer has read (the race then shows on any driver). */
typedef struct {
    int wait, racy, early;
    uint64_t value;
} waiting;

static waiting waiting_of(const char *mode)
{
    int wait1 = strstr(mode, "_wait1") != NULL, nowait = strstr(mode, "_nowait") != NULL;
    return (waiting){!nowait, wait1 || nowait, strstr(mode, "_early") != NULL, wait1 ? 1 : 2};
}

/* A timeline's producer on the queue signals 1 first (an empty
 * submission), the value a _wait1 consumer waits for. */
static void vk_signals_one(const queue_rig *rig, const shared *sh)
{
    if (sh->timeline)
        submit(rig, VK_NULL_HANDLE, NULL, 0, sh, 1, VK_NULL_HANDLE);
}

static void vk_to_cuda(queue_rig *rig, const shared *sh, cudaStream_t s, waiting w)
{
    /* Waited for, a GPU's stream waits for the fill, and the simulated
     * device's does not (its read is then timing's). */
    if (w.early)
        cuda_waits(sh, w.value, s);
    vk_signals_one(rig, sh);
    VkCommandBuffer cb = rig_begin(rig, w.racy);
    vkCmdFillBuffer(cb, rig->buffer, 0, VK_WHOLE_SIZE, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(cb));
    submit(rig, cb, NULL, 0, sh, 2, VK_NULL_HANDLE);
    if (w.wait && !w.early)
        cuda_waits(sh, w.value, s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    rig_hand_over(rig);
}

/* CUDA fills a buffer of its own on s, between signals of 1 and 2 (a
 * timeline's) or before the signal (a binary one's); the host then waits
 * for the submission's fence (`host`: for the value itself), and the
 * buffer is handed to a consumer copying it out on the legacy stream. */
static void cuda_to_vk(queue_rig *rig, const shared *sh, cudaStream_t s, waiting w, int host)
{
    void *x;
    CUDA_CHECK(cudaMalloc(&x, BYTES));
    if (sh->timeline)
        cuda_signals(sh, 1, s);
    CUDA_CHECK(cudaMemsetAsync(x, 7, BYTES, s));
    cuda_signals(sh, 2, s);
    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    if (host) {
        VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                  .semaphoreCount = 1, .pSemaphores = &sh->vk,
                                  .pValues = &w.value};
        VK_CHECK(vkWaitSemaphores(device, &wi, UINT64_MAX));
    } else {
        VkCommandBuffer cb = rig_begin(rig, 0);
        VK_CHECK(vkEndCommandBuffer(cb));
        submit(rig, cb, w.wait ? sh : NULL, w.value, NULL, 0, fence);
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    }
    DLManagedTensor t = device_tensor(x, kDLCUDA);
    dlshim_export(&t, "cudaproducer");
    dlshim_import(&t, "cudaconsumer");
    uint32_t back[4];
    CUDA_CHECK(cudaMemcpy(back, x, sizeof(back), cudaMemcpyDeviceToHost));
    printf("consumer saw %u\n", back[1]);
    t.deleter(&t);
    vkDestroyFence(device, fence, NULL);
    CUDA_CHECK(cudaFree(x));
}

/* Bytes of the memory: where CUDA maps it, where the consumer's tensor
 * lies, what the queue's fill writes. */
typedef struct {
    size_t map_at, map_len, tensor_at, tensor_len, fill_at, fill_len;
} layout;

static layout layout_of(const char *mode)
{
    if (!strstr(mode, "_window_"))
        return (layout){0, BYTES, 0, BYTES, 0, BYTES};
    size_t map_at = 16384, tensor_at = map_at + 8192;
    return strstr(mode, "_outside")
               ? (layout){map_at, 32768, tensor_at, 8192, 0, tensor_at}
               : (layout){map_at, 32768, tensor_at, 8192, tensor_at + 4096, 4096};
}

/* Vulkan's fill read through CUDA's import of the memory, on stream s.
 * (The bytes are not compared: lavapipe's exported file holds a header
 * before the memory, which the simulated device maps as it is.) */
static void vk_to_cudamem(queue_rig *rig, const shared *sh, cudaStream_t s, const char *mode)
{
    waiting w = waiting_of(mode);
    int fenced = strstr(mode, "_fence") != NULL;
    int early = strstr(mode, "_early") != NULL;
    layout l = layout_of(mode);
    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    /* Unwaited, the fill is held back until the consumer has read. */
    vk_signals_one(rig, sh);
    VkCommandBuffer cb = rig_begin(rig, w.racy);
    vkCmdFillBuffer(cb, rig->buffer, l.fill_at, l.fill_len, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(cb));
    if (early)
        submit(rig, cb, NULL, 0, fenced ? NULL : sh, 2, fence);
    struct cudaExternalMemoryHandleDesc desc = {.type = cudaExternalMemoryHandleTypeOpaqueFd,
                                                .handle.fd = memory_fd(rig->memory),
                                                .size = BYTES};
    cudaExternalMemory_t mem;
    CUDA_CHECK(cudaImportExternalMemory(&mem, &desc));
    struct cudaExternalMemoryBufferDesc bd = {.offset = l.map_at, .size = l.map_len};
    void *dev;
    CUDA_CHECK(cudaExternalMemoryGetMappedBuffer(&dev, mem, &bd));
    if (!early)
        submit(rig, cb, NULL, 0, fenced ? NULL : sh, 2, fence);
    if (fenced)
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    else if (w.wait)
        cuda_waits(sh, w.value, s);
    static int64_t shape[1];
    shape[0] = (int64_t)(l.tensor_len / 4);
    char *data = (char *)dev + (l.tensor_at - l.map_at);
    DLManagedTensor t = device_tensor(data, kDLCUDA);
    t.dl_tensor.shape = shape;
    dlshim_export(&t, "vkproducer");
    dlshim_import(&t, "cudaconsumer");
    uint32_t back[4];
    CUDA_CHECK(cudaMemcpyAsync(back, data + 16, sizeof(back), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    printf("consumer read %zu bytes\n", sizeof(back));
    t.deleter(&t);
    if (w.racy)
        VK_CHECK(vkSetEvent(device, rig->gate));
    VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    vkDestroyFence(device, fence, NULL);
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaDestroyExternalMemory(mem));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "vk_to_cuda";
    setvbuf(stdout, NULL, _IOLBF, 0);
    int timeline = !strncmp(mode, "tl_", 3);
    driver = strstr(mode, "_drv") != NULL;
    if (timeline)
        mode += 3;
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .timelineSemaphore = 1};
    open_device_with(timeline ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1, timeline ? &f12 : NULL,
                     VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
    queue_rig rig;
    rig_open(&rig);
    shared sh = shared_semaphore(timeline);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (!strncmp(mode, "vkmem_", 6))
        vk_to_cudamem(&rig, &sh, s, mode);
    else if (!strncmp(mode, "vk_to_cuda", 10))
        vk_to_cuda(&rig, &sh, s, waiting_of(mode));
    else
        cuda_to_vk(&rig, &sh, s, waiting_of(mode), !strncmp(mode, "cuda_to_host", 12));
    VK_CHECK(vkQueueWaitIdle(rig.queue));
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (driver) {
        __typeof__(cuDestroyExternalSemaphore) *destroy = driver_fn("cuDestroyExternalSemaphore");
        driver_check(destroy((CUexternalSemaphore)sh.cuda), "cuDestroyExternalSemaphore");
    } else {
        CUDA_CHECK(cudaDestroyExternalSemaphore(sh.cuda));
    }
    CUDA_CHECK(cudaStreamDestroy(s));
    vkDestroySemaphore(device, sh.vk, NULL);
    rig_close(&rig);
    printf("done %s%s\n", timeline ? "tl_" : "", mode);
    return 0;
}
