/*
 * A Vulkan binary semaphore exported as a file descriptor and imported by
 * CUDA, ordering a queue's work and a CUDA stream's: `vk_extsem MODE`.
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
 * Without the extension it exits 77 (unavailable, as the other Vulkan
 * programs do where a feature is missing); it exits 0 when every call it
 * made succeeded.
 */
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/cuda_check.h"
#include "vk_setup.h"

/* An exportable binary semaphore, exported and imported by CUDA (which
 * owns the descriptor from then on). */
static VkSemaphore shared_semaphore(cudaExternalSemaphore_t *ext)
{
    int fd;
    VkSemaphore s = exported_semaphore(&fd);
    struct cudaExternalSemaphoreHandleDesc desc = {
        .type = cudaExternalSemaphoreHandleTypeOpaqueFd, .handle.fd = fd};
    CUDA_CHECK(cudaImportExternalSemaphore(ext, &desc));
    return s;
}

static void vk_to_cuda(queue_rig *rig, VkSemaphore sem, cudaExternalSemaphore_t ext,
                       cudaStream_t s, int wait)
{
    /* Unwaited, the fill is held back until the consumer has read (the
     * race then shows on any driver); waited for, a GPU's stream waits for
     * it, and the simulated device's does not (its read is then timing's). */
    rig_fill_and_signal(rig, sem, !wait);
    struct cudaExternalSemaphoreWaitParams params;
    memset(&params, 0, sizeof(params));
    if (wait)
        CUDA_CHECK(cudaWaitExternalSemaphoresAsync(&ext, &params, 1, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    rig_hand_over(rig);
}

static void cuda_to_vk(queue_rig *rig, VkSemaphore sem, cudaExternalSemaphore_t ext,
                       cudaStream_t s, int wait)
{
    void *x;
    CUDA_CHECK(cudaMalloc(&x, BYTES));
    CUDA_CHECK(cudaMemsetAsync(x, 7, BYTES, s));
    struct cudaExternalSemaphoreSignalParams params;
    memset(&params, 0, sizeof(params));
    CUDA_CHECK(cudaSignalExternalSemaphoresAsync(&ext, &params, 1, s));
    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    VkCommandBuffer cb = rig_begin(rig, 0);
    VK_CHECK(vkEndCommandBuffer(cb));
    rig_submit(rig, cb, wait ? sem : VK_NULL_HANDLE, VK_NULL_HANDLE, fence);
    VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
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
static void vk_to_cudamem(queue_rig *rig, VkSemaphore sem, cudaExternalSemaphore_t ext,
                          cudaStream_t s, const char *mode)
{
    int nowait = strstr(mode, "_nowait") != NULL, fenced = strstr(mode, "_fence") != NULL;
    int early = strstr(mode, "_early") != NULL;
    layout l = layout_of(mode);
    VkFence fence;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(device, &fci, NULL, &fence));
    /* Unwaited, the fill is held back until the consumer has read. */
    VkCommandBuffer cb = rig_begin(rig, nowait);
    vkCmdFillBuffer(cb, rig->buffer, l.fill_at, l.fill_len, 0x01010101u);
    VK_CHECK(vkEndCommandBuffer(cb));
    if (early)
        rig_submit(rig, cb, VK_NULL_HANDLE, fenced ? VK_NULL_HANDLE : sem, fence);
    struct cudaExternalMemoryHandleDesc desc = {.type = cudaExternalMemoryHandleTypeOpaqueFd,
                                                .handle.fd = memory_fd(rig->memory),
                                                .size = BYTES};
    cudaExternalMemory_t mem;
    CUDA_CHECK(cudaImportExternalMemory(&mem, &desc));
    struct cudaExternalMemoryBufferDesc bd = {.offset = l.map_at, .size = l.map_len};
    void *dev;
    CUDA_CHECK(cudaExternalMemoryGetMappedBuffer(&dev, mem, &bd));
    if (!early)
        rig_submit(rig, cb, VK_NULL_HANDLE, fenced ? VK_NULL_HANDLE : sem, fence);
    if (fenced)
        VK_CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
    else if (!nowait) {
        struct cudaExternalSemaphoreWaitParams params;
        memset(&params, 0, sizeof(params));
        CUDA_CHECK(cudaWaitExternalSemaphoresAsync(&ext, &params, 1, s));
    }
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
    if (nowait)
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
    open_device_with(VK_API_VERSION_1_1, NULL, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
    queue_rig rig;
    rig_open(&rig);
    cudaExternalSemaphore_t ext;
    VkSemaphore sem = shared_semaphore(&ext);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int wait = !strstr(mode, "_nowait");
    if (!strncmp(mode, "vkmem_", 6))
        vk_to_cudamem(&rig, sem, ext, s, mode);
    else if (!strncmp(mode, "vk_to_cuda", 10))
        vk_to_cuda(&rig, sem, ext, s, wait);
    else
        cuda_to_vk(&rig, sem, ext, s, wait);
    VK_CHECK(vkQueueWaitIdle(rig.queue));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaDestroyExternalSemaphore(ext));
    CUDA_CHECK(cudaStreamDestroy(s));
    vkDestroySemaphore(device, sem, NULL);
    rig_close(&rig);
    printf("done %s\n", mode);
    return 0;
}
