/* vk_setup.c: the device and buffer the Vulkan test programs share. */
#ifndef VK_SETUP_H
#define VK_SETUP_H

#include <dlpack/dlpack.h>
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
extern VkInstance instance;
extern VkPhysicalDevice physical;
extern VkDevice device;

void open_device(void);
/* An exportable buffer and its memory, filled with 0, 1, 2, ... */
void make_buffer(VkBuffer *buffer, VkDeviceMemory *memory);
/* A CPU tensor of the BYTES / 4 uint32 at p (a host mapping), whose
 * deleter frees nothing. */
DLManagedTensor mapped_tensor(uint32_t *p);
/* The memory exported as an opaque file descriptor. */
int memory_fd(VkDeviceMemory memory);

#endif
