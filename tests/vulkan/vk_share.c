/*
 * Vulkan memory shared as a kDLVulkan tensor and, exported as a file
 * descriptor, imported by CUDA: `vk_share MODE`.  Real Vulkan and CUDA
 * runtime calls only (lavapipe and the simulated device in CI; any Vulkan
 * driver with VK_KHR_external_memory_fd and a GPU elsewhere).
 *
 *   clean        the tensor is released and the memory freed after it
 *   early_free   the memory is freed while the consumer holds the tensor
 *   cuda_clean   CUDA imports the memory, reads what Vulkan wrote, frees its
 *                buffer and destroys the import, then Vulkan frees the memory
 *   cuda_early   Vulkan frees the memory while CUDA still maps it
 *   map_clean    a CPU tensor over the memory's host mapping, released
 *                before the unmap and the free
 *   map_unmap    the memory unmapped while the consumer holds that tensor
 *   map_free     the memory freed (unmapping it) while the consumer holds it
 *
 * It exits 0 when every call it made succeeded.
 */
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../device/cuda_check.h"
#include "vk_setup.h"

static int64_t shape[1] = {BYTES / 4};

static void no_deleter(DLManagedTensor *t)
{
    (void)t;
}

static void share_tensor(const char *mode, VkBuffer buffer, VkDeviceMemory memory)
{
    DLManagedTensor t = {
        .dl_tensor = {.data = (void *)buffer, .device = {kDLVulkan, 0}, .ndim = 1,
                      .dtype = {kDLUInt, 32, 1}, .shape = shape},
        .deleter = no_deleter};
    dlshim_export(&t, "vkproducer");
    dlshim_import(&t, "vkconsumer");
    if (!strcmp(mode, "early_free"))
        vkFreeMemory(device, memory, NULL); /* the consumer still holds it */
    t.deleter(&t);
    if (!strcmp(mode, "clean"))
        vkFreeMemory(device, memory, NULL);
}

/* A CPU tensor over the memory's host mapping. */
static void share_mapping(const char *mode, VkDeviceMemory memory)
{
    uint32_t *p;
    VK_CHECK(vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, (void **)&p));
    DLManagedTensor t = mapped_tensor(p);
    dlshim_export(&t, "vkproducer");
    dlshim_import(&t, "cpuconsumer");
    if (!strcmp(mode, "map_unmap"))
        vkUnmapMemory(device, memory); /* the consumer still reads p */
    if (!strcmp(mode, "map_free"))
        vkFreeMemory(device, memory, NULL); /* the same, and the memory goes */
    printf("consumer read %u\n", p[5]);
    t.deleter(&t);
    if (!strcmp(mode, "map_clean"))
        vkUnmapMemory(device, memory);
    if (strcmp(mode, "map_free"))
        vkFreeMemory(device, memory, NULL);
}

static void cuda_import(const char *mode, VkDeviceMemory memory)
{
    struct cudaExternalMemoryHandleDesc desc = {.type = cudaExternalMemoryHandleTypeOpaqueFd,
                                                .handle.fd = memory_fd(memory), .size = BYTES};
    cudaExternalMemory_t ext;
    CUDA_CHECK(cudaImportExternalMemory(&ext, &desc)); /* CUDA owns the descriptor now */
    struct cudaExternalMemoryBufferDesc bd = {.offset = 0, .size = BYTES};
    void *dev;
    CUDA_CHECK(cudaExternalMemoryGetMappedBuffer(&dev, ext, &bd));
    /* Through CUDA (the bytes are not compared: lavapipe's exported file
     * holds a header before the memory, which the simulated device maps
     * as it is). */
    uint32_t back[4];
    CUDA_CHECK(cudaMemcpy(back, (char *)dev + 16, sizeof(back), cudaMemcpyDeviceToHost));
    printf("read %zu bytes\n", sizeof(back));
    if (!strcmp(mode, "cuda_early"))
        vkFreeMemory(device, memory, NULL); /* CUDA still maps it */
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaDestroyExternalMemory(ext));
    if (!strcmp(mode, "cuda_clean"))
        vkFreeMemory(device, memory, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "clean";
    open_device();
    VkBuffer buffer;
    VkDeviceMemory memory;
    make_buffer(&buffer, &memory);
    if (!strncmp(mode, "cuda_", 5))
        cuda_import(mode, memory);

    else if (!strncmp(mode, "map_", 4))
        share_mapping(mode, memory);
    else
        share_tensor(mode, buffer, memory);
    vkDestroyBuffer(device, buffer, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
    printf("done %s\n", mode);
    return 0;
}
