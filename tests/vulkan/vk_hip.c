/*
 * Vulkan memory exported as a file descriptor and imported by HIP:
 * `vk_hip MODE` (HIP's headers and CUDA's cannot share a file, hence a
 * program of its own beside vk_share).  Real Vulkan and HIP calls only.
 *
 *   hip_clean   HIP imports the memory, maps a buffer, frees it and destroys
 *               the import, then Vulkan frees the memory
 *   hip_early   Vulkan frees the memory while HIP still maps it
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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "hip_clean";
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
