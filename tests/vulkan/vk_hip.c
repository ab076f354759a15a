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

static void vk_to_hip(int wait)
{
    open_device_with(VK_API_VERSION_1_1, NULL, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
    queue_rig rig;
    rig_open(&rig);
    int fd;
    VkSemaphore sem = exported_semaphore(VK_SEMAPHORE_TYPE_BINARY, &fd);
    hipExternalSemaphoreHandleDesc desc = {.type = hipExternalSemaphoreHandleTypeOpaqueFd,
                                           .handle.fd = fd};
    hipExternalSemaphore_t ext;
    HIP_CHECK(hipImportExternalSemaphore(&ext, &desc)); /* HIP owns the descriptor now */
    hipStream_t s;
    HIP_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    rig_fill_and_signal(&rig, sem, !wait); /* as vk_extsem's vk_to_cuda */
    hipExternalSemaphoreWaitParams params;
    memset(&params, 0, sizeof(params));
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
    if (!strncmp(mode, "vk_to_hip", 9)) {
        vk_to_hip(!strstr(mode, "_nowait"));
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
