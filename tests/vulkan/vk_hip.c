/*
 * Vulkan memory exported as a file descriptor and imported by HIP:
 * `vk_hip MODE` (HIP's headers and CUDA's cannot share a file, hence a
 * program of its own beside vk_share).  Real Vulkan and HIP calls only.
 *
 *   hip_clean   HIP imports the memory, maps a buffer, frees it and destroys
 *               the import, then Vulkan frees the memory
 *   hip_early   Vulkan frees the memory while HIP still maps it
 *   vk_to_hip   a submission fills the mapped buffer and signals a binary
 *               semaphore exported to HIP (VK_KHR_external_semaphore_fd:
 *               exit 77 without it); a non-blocking HIP stream waits for it,
 *               the host synchronizes that stream, then a CPU tensor over
 *               the mapping is handed to a consumer
 *   vk_to_hip_nowait  the same without the HIP stream's wait (race)
 *   tl_vk_to_hip  the same with a timeline semaphore (imported as ROCm 6's
 *               timeline type): an empty submission signals 1, the fill 2,
 *               and the HIP stream waits for 2
 *   tl_vk_to_hip_wait1  the HIP stream waits for 1 only, the fill held
 *               back (race)
 */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_setup.h"

#define HIP_CHECK(call)                                                      \
    do {                                                                     \
        hipError_t e_ = (call);                                              \
        if (e_ != hipSuccess) {                                              \
            printf("%s failed: %d\n", #call, (int)e_);                       \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static void hip_import(const char *mode, VkDeviceMemory memory)
{
    hipExternalMemoryHandleDesc desc = {.type = hipExternalMemoryHandleTypeOpaqueFd,
                                        .handle.fd = memory_fd(memory), .size = BYTES};
    hipExternalMemory_t ext;
    HIP_CHECK(hipImportExternalMemory(&ext, &desc));
    hipExternalMemoryBufferDesc bd = {.offset = 0, .size = BYTES};
    void *dev;
    HIP_CHECK(hipExternalMemoryGetMappedBuffer(&dev, ext, &bd));
    if (!strcmp(mode, "hip_early"))
        vkFreeMemory(device, memory, NULL); /* HIP still maps it */
    HIP_CHECK(hipFree(dev));
    HIP_CHECK(hipDestroyExternalMemory(ext));
    if (!strcmp(mode, "hip_clean"))
        vkFreeMemory(device, memory, NULL);
}

/* ROCm 6's hipExternalSemaphoreHandleTypeTimelineSemaphoreFd, which the HIP
 * 5 headers built against here do not name. */
#define HIP_TIMELINE_SEMAPHORE_FD 9

/* wait: 0 none, else the value waited for (a binary semaphore: any). */
static void vk_to_hip(int timeline, uint64_t wait)
{
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .timelineSemaphore = 1};
    open_device_with(timeline ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1, timeline ? &f12 : NULL,
                     VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
    queue_rig rig;
    rig_open(&rig);
    int fd;
    VkSemaphore sem = exported_semaphore(
        timeline ? VK_SEMAPHORE_TYPE_TIMELINE : VK_SEMAPHORE_TYPE_BINARY, &fd);
    hipExternalSemaphoreHandleDesc desc = {
        .type = timeline ? (hipExternalSemaphoreHandleType)HIP_TIMELINE_SEMAPHORE_FD
                         : hipExternalSemaphoreHandleTypeOpaqueFd,
        .handle.fd = fd};
    hipExternalSemaphore_t ext;
    HIP_CHECK(hipImportExternalSemaphore(&ext, &desc)); /* HIP owns the descriptor now */
    hipStream_t s;
    HIP_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    int racy = !wait || (timeline && wait < 2);
    if (timeline)
        rig_signal_value(&rig, VK_NULL_HANDLE, sem, 1);
    rig_fill_and_signal(&rig, sem, timeline ? 2 : 0, racy); /* as vk_extsem's vk_to_cuda */
    hipExternalSemaphoreWaitParams params;
    memset(&params, 0, sizeof(params));
    params.params.fence.value = wait;
    if (wait)
        HIP_CHECK(hipWaitExternalSemaphoresAsync(&ext, &params, 1, s));
    HIP_CHECK(hipStreamSynchronize(s));
    rig_hand_over(&rig);
    VK_CHECK(vkQueueWaitIdle(rig.queue));
    HIP_CHECK(hipDestroyExternalSemaphore(ext));
    HIP_CHECK(hipStreamDestroy(s));
    vkDestroySemaphore(device, sem, NULL);
    rig_close(&rig);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "hip_clean";
    setvbuf(stdout, NULL, _IOLBF, 0);
    int timeline = !strncmp(mode, "tl_", 3);
    if (!strncmp(mode + (timeline ? 3 : 0), "vk_to_hip", 9)) {
        vk_to_hip(timeline, strstr(mode, "_nowait") ? 0 : strstr(mode, "_wait1") ? 1 : 2);
        printf("done %s\n", mode);
        return 0;
    }
    open_device();
    VkBuffer buffer;
    VkDeviceMemory memory;
    make_buffer(&buffer, &memory);
    hip_import(mode, memory);
    vkDestroyBuffer(device, buffer, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
    printf("done %s\n", mode);
    return 0;
}
