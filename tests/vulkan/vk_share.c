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
#include <vulkan/vulkan.h>

#define BYTES 65536u
#define VK_CHECK(call)                                                       \
    do {                                                                     \
        VkResult r_ = (call);                                                \
        if (r_ != VK_SUCCESS) {                                              \
            printf("%s failed: %d\n", #call, (int)r_);                       \
            exit(1);                                                         \
        }                                                                    \
    } while (0)
#define CUDA_CHECK(call)                                                     \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            printf("%s failed: %d\n", #call, (int)e_);                       \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static VkInstance instance;
static VkPhysicalDevice physical;
static VkDevice device;
static int64_t shape[1] = {BYTES / 4};

static void open_device(void)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &app};
    VK_CHECK(vkCreateInstance(&ici, NULL, &instance));
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, &physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        printf("no Vulkan device\n");
        exit(1);
    }
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                     .queueFamilyIndex = 0, .queueCount = 1,
                                     .pQueuePriorities = &priority};
    const char *extensions[] = {VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &queue,
                              .enabledExtensionCount = 1, .ppEnabledExtensionNames = extensions};
    VK_CHECK(vkCreateDevice(physical, &dci, NULL, &device));
}

/* A host-visible memory type the buffer accepts. */
static uint32_t memory_type(uint32_t accepted)
{
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(physical, &props);
    VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < props.memoryTypeCount; i++)
        if ((accepted >> i) & 1u && (props.memoryTypes[i].propertyFlags & want) == want)
            return i;
    printf("no host-visible memory type\n");
    exit(1);
}

/* An exportable buffer and its memory, filled with 0, 1, 2, ... */
static void make_buffer(VkBuffer *buffer, VkDeviceMemory *memory)
{
    VkExternalMemoryBufferCreateInfo ext = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
        .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ext,
                              .size = BYTES, .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_CHECK(vkCreateBuffer(device, &bci, NULL, buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, *buffer, &req);
    VkExportMemoryAllocateInfo export = {
        .sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
        .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &export,
                                .allocationSize = req.size,
                                .memoryTypeIndex = memory_type(req.memoryTypeBits)};
    VK_CHECK(vkAllocateMemory(device, &mai, NULL, memory));
    VK_CHECK(vkBindBufferMemory(device, *buffer, *memory, 0));
    uint32_t *p;
    VK_CHECK(vkMapMemory(device, *memory, 0, BYTES, 0, (void **)&p));
    for (uint32_t i = 0; i < BYTES / 4; i++)
        p[i] = i;
    vkUnmapMemory(device, *memory);
}

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
    DLManagedTensor t = {
        .dl_tensor = {.data = p, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLUInt, 32, 1},
                      .shape = shape},
        .deleter = no_deleter};
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
    VkMemoryGetFdInfoKHR gfi = {.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                                .memory = memory,
                                .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    PFN_vkGetMemoryFdKHR get_fd =
        (PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(device, "vkGetMemoryFdKHR");
    int fd = -1;
    VK_CHECK(get_fd(device, &gfi, &fd));
    struct cudaExternalMemoryHandleDesc desc = {.type = cudaExternalMemoryHandleTypeOpaqueFd,
                                                .handle.fd = fd, .size = BYTES};
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
