/*
 * abi/vulkan.h — the part of Vulkan (vulkan_core.h 1.3, and the loader's
 * layer interface, vk_layer.h) that the Vulkan family's files use: result
 * codes, handles, the structures the layer reads or keeps, the function
 * pointer types it forwards through, and the loader's link structures.
 * The shim must build with a C compiler and libc alone, and nothing links
 * to libvulkan, so these declarations are its own.  Left out: everything
 * else; structures the shim only passes on stay incomplete.  Handles are
 * 64-bit platforms' (non-dispatchable ones are pointers there), calling
 * conventions Linux's (none).
 *
 * tests/abi checks every declaration against the real headers, as
 * abi/cuda.h says (DS_ABI_SDK_TYPES).
 */
#ifndef DS_ABI_VULKAN_H
#define DS_ABI_VULKAN_H

#include <stddef.h>
#include <stdint.h>

#define VKAPI_ATTR
#define VKAPI_CALL

#define VK_NULL_HANDLE ((void*)0)
#define VK_WHOLE_SIZE (~0ULL)
#define VK_MAX_MEMORY_TYPES 32U
#define VK_MAX_MEMORY_HEAPS 16U

typedef uint32_t VkFlags;
typedef uint64_t VkDeviceSize;
typedef VkFlags VkMemoryMapFlags;
typedef VkFlags VkMemoryPropertyFlags;
typedef VkFlags VkMemoryHeapFlags;
typedef VkFlags VkInstanceCreateFlags;
typedef VkFlags VkDeviceCreateFlags;
typedef VkFlags VkPipelineStageFlags;
typedef VkFlags VkCommandBufferResetFlags;
typedef VkFlags VkSemaphoreCreateFlags;
typedef VkFlags VkSemaphoreWaitFlags;
typedef VkFlags VkSubmitFlags;
typedef uint64_t VkPipelineStageFlags2;
typedef VkFlags VkImageAspectFlags;
typedef VkFlags VkShaderStageFlags;
typedef VkFlags VkDescriptorSetLayoutCreateFlags;
typedef VkFlags VkDescriptorPoolResetFlags;
typedef VkFlags VkBufferViewCreateFlags;
typedef uint32_t VkBool32;

typedef struct VkInstance_T *VkInstance;
typedef struct VkPhysicalDevice_T *VkPhysicalDevice;
typedef struct VkDevice_T *VkDevice;
typedef struct VkDeviceMemory_T *VkDeviceMemory;
typedef struct VkBuffer_T *VkBuffer;
typedef struct VkQueue_T *VkQueue;
typedef struct VkCommandBuffer_T *VkCommandBuffer;
typedef struct VkFence_T *VkFence;
typedef struct VkSemaphore_T *VkSemaphore;
typedef struct VkImage_T *VkImage;
typedef struct VkSampler_T *VkSampler;
typedef struct VkBufferView_T *VkBufferView;
typedef struct VkDescriptorSet_T *VkDescriptorSet;
typedef struct VkDescriptorSetLayout_T *VkDescriptorSetLayout;
typedef struct VkDescriptorPool_T *VkDescriptorPool;
typedef struct VkPipelineLayout_T *VkPipelineLayout;
typedef struct VkDescriptorUpdateTemplate_T *VkDescriptorUpdateTemplate;

#ifndef DS_ABI_SDK_TYPES
/* Vulkan's enums are 32 bits wide by their MAX_ENUM values. */
typedef enum VkResult {
    VK_SUCCESS = 0,
    VK_NOT_READY = 1,
    VK_TIMEOUT = 2,
    VK_ERROR_INITIALIZATION_FAILED = -3,
    VK_RESULT_MAX_ENUM = 0x7FFFFFFF
} VkResult;
typedef enum VkStructureType {
    VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO = 47,
    VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO = 48,
    VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO = 1000072002,
    VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR = 1000074000,
    VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT = 1000178000,
    VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO = 1000207002,
    VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO = 1000207003,
    VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO = 1000207004,
    VK_STRUCTURE_TYPE_MAX_ENUM = 0x7FFFFFFF
} VkStructureType;
typedef enum VkSystemAllocationScope {
    VK_SYSTEM_ALLOCATION_SCOPE_MAX_ENUM = 0x7FFFFFFF
} VkSystemAllocationScope;
typedef enum VkInternalAllocationType {
    VK_INTERNAL_ALLOCATION_TYPE_MAX_ENUM = 0x7FFFFFFF
} VkInternalAllocationType;
typedef enum VkSemaphoreType {
    VK_SEMAPHORE_TYPE_BINARY = 0,
    VK_SEMAPHORE_TYPE_TIMELINE = 1,
    VK_SEMAPHORE_TYPE_MAX_ENUM = 0x7FFFFFFF
} VkSemaphoreType;
typedef enum VkSemaphoreWaitFlagBits {
    VK_SEMAPHORE_WAIT_ANY_BIT = 1,
    VK_SEMAPHORE_WAIT_FLAG_BITS_MAX_ENUM = 0x7FFFFFFF
} VkSemaphoreWaitFlagBits;
typedef enum VkImageLayout { VK_IMAGE_LAYOUT_MAX_ENUM = 0x7FFFFFFF } VkImageLayout;
typedef enum VkDescriptorType {
    VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER = 5,
    VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER = 6,
    VK_DESCRIPTOR_TYPE_STORAGE_BUFFER = 7,
    VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC = 8,
    VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC = 9,
    VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK = 1000138000,
    VK_DESCRIPTOR_TYPE_MAX_ENUM = 0x7FFFFFFF
} VkDescriptorType;
typedef enum VkFormat { VK_FORMAT_MAX_ENUM = 0x7FFFFFFF } VkFormat;
typedef enum VkPipelineBindPoint {
    VK_PIPELINE_BIND_POINT_COMPUTE = 1,
    VK_PIPELINE_BIND_POINT_MAX_ENUM = 0x7FFFFFFF
} VkPipelineBindPoint;
typedef enum VkShaderStageFlagBits {
    VK_SHADER_STAGE_COMPUTE_BIT = 0x20,
    VK_SHADER_STAGE_FLAG_BITS_MAX_ENUM = 0x7FFFFFFF
} VkShaderStageFlagBits;
typedef enum VkDescriptorSetLayoutCreateFlagBits {
    VK_DESCRIPTOR_SET_LAYOUT_CREATE_UPDATE_AFTER_BIND_POOL_BIT = 2,
    VK_DESCRIPTOR_SET_LAYOUT_CREATE_FLAG_BITS_MAX_ENUM = 0x7FFFFFFF
} VkDescriptorSetLayoutCreateFlagBits;
typedef enum VkExternalMemoryHandleTypeFlagBits {
    VK_EXTERNAL_MEMORY_HANDLE_TYPE_FLAG_BITS_MAX_ENUM = 0x7FFFFFFF
} VkExternalMemoryHandleTypeFlagBits;
typedef enum VkExternalSemaphoreHandleTypeFlagBits {
    VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT = 1,
    VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_FLAG_BITS_MAX_ENUM = 0x7FFFFFFF
} VkExternalSemaphoreHandleTypeFlagBits;
#endif

typedef void (*PFN_vkVoidFunction)(void);
typedef void* (*PFN_vkAllocationFunction)(void *pUserData, size_t size,
    size_t alignment, VkSystemAllocationScope allocationScope);
typedef void* (*PFN_vkReallocationFunction)(void *pUserData, void *pOriginal,
    size_t size, size_t alignment, VkSystemAllocationScope allocationScope);
typedef void (*PFN_vkFreeFunction)(void *pUserData, void *pMemory);
typedef void (*PFN_vkInternalAllocationNotification)(void *pUserData, size_t size,
    VkInternalAllocationType allocationType, VkSystemAllocationScope allocationScope);
typedef void (*PFN_vkInternalFreeNotification)(void *pUserData, size_t size,
    VkInternalAllocationType allocationType, VkSystemAllocationScope allocationScope);

/* Passed on only. */
typedef struct VkApplicationInfo VkApplicationInfo;
typedef struct VkDeviceQueueCreateInfo VkDeviceQueueCreateInfo;
typedef struct VkPhysicalDeviceFeatures VkPhysicalDeviceFeatures;
typedef struct VkDescriptorImageInfo VkDescriptorImageInfo;

#ifndef DS_ABI_SDK_TYPES
typedef struct VkBaseInStructure {
    VkStructureType sType;
    const struct VkBaseInStructure *pNext;
} VkBaseInStructure;

typedef struct VkAllocationCallbacks {
    void *pUserData;
    PFN_vkAllocationFunction pfnAllocation;
    PFN_vkReallocationFunction pfnReallocation;
    PFN_vkFreeFunction pfnFree;
    PFN_vkInternalAllocationNotification pfnInternalAllocation;
    PFN_vkInternalFreeNotification pfnInternalFree;
} VkAllocationCallbacks;

typedef struct VkInstanceCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkInstanceCreateFlags flags;
    const VkApplicationInfo *pApplicationInfo;
    uint32_t enabledLayerCount;
    const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount;
    const char *const *ppEnabledExtensionNames;
} VkInstanceCreateInfo;

typedef struct VkDeviceCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkDeviceCreateFlags flags;
    uint32_t queueCreateInfoCount;
    const VkDeviceQueueCreateInfo *pQueueCreateInfos;
    uint32_t enabledLayerCount;
    const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount;
    const char *const *ppEnabledExtensionNames;
    const VkPhysicalDeviceFeatures *pEnabledFeatures;
} VkDeviceCreateInfo;

typedef struct VkMemoryType {
    VkMemoryPropertyFlags propertyFlags;
    uint32_t heapIndex;
} VkMemoryType;

typedef struct VkMemoryHeap {
    VkDeviceSize size;
    VkMemoryHeapFlags flags;
} VkMemoryHeap;

typedef struct VkPhysicalDeviceMemoryProperties {
    uint32_t memoryTypeCount;
    VkMemoryType memoryTypes[VK_MAX_MEMORY_TYPES];
    uint32_t memoryHeapCount;
    VkMemoryHeap memoryHeaps[VK_MAX_MEMORY_HEAPS];
} VkPhysicalDeviceMemoryProperties;

typedef struct VkMemoryAllocateInfo {
    VkStructureType sType;
    const void *pNext;
    VkDeviceSize allocationSize;
    uint32_t memoryTypeIndex;
} VkMemoryAllocateInfo;

typedef struct VkBindBufferMemoryInfo {
    VkStructureType sType;
    const void *pNext;
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize memoryOffset;
} VkBindBufferMemoryInfo;

typedef struct VkMemoryGetFdInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkDeviceMemory memory;
    VkExternalMemoryHandleTypeFlagBits handleType;
} VkMemoryGetFdInfoKHR;

typedef struct VkSemaphoreGetFdInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkSemaphore semaphore;
    VkExternalSemaphoreHandleTypeFlagBits handleType;
} VkSemaphoreGetFdInfoKHR;

/* Its size is what the layer reads. */
typedef enum VkSharingMode { VK_SHARING_MODE_MAX_ENUM = 0x7FFFFFFF } VkSharingMode;
typedef struct VkBufferCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    VkDeviceSize size;
    VkFlags usage;
    VkSharingMode sharingMode;
    uint32_t queueFamilyIndexCount;
    const uint32_t *pQueueFamilyIndices;
} VkBufferCreateInfo;

typedef struct VkSubmitInfo {
    VkStructureType sType;
    const void *pNext;
    uint32_t waitSemaphoreCount;
    const VkSemaphore *pWaitSemaphores;
    const VkPipelineStageFlags *pWaitDstStageMask;
    uint32_t commandBufferCount;
    const VkCommandBuffer *pCommandBuffers;
    uint32_t signalSemaphoreCount;
    const VkSemaphore *pSignalSemaphores;
} VkSubmitInfo;

typedef struct VkBufferCopy {
    VkDeviceSize srcOffset;
    VkDeviceSize dstOffset;
    VkDeviceSize size;
} VkBufferCopy;

/* Semaphores: their type, timeline values in a submission, host waits. */
typedef struct VkSemaphoreCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkSemaphoreCreateFlags flags;
} VkSemaphoreCreateInfo;

typedef struct VkSemaphoreTypeCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkSemaphoreType semaphoreType;
    uint64_t initialValue;
} VkSemaphoreTypeCreateInfo;

typedef struct VkTimelineSemaphoreSubmitInfo {
    VkStructureType sType;
    const void *pNext;
    uint32_t waitSemaphoreValueCount;
    const uint64_t *pWaitSemaphoreValues;
    uint32_t signalSemaphoreValueCount;
    const uint64_t *pSignalSemaphoreValues;
} VkTimelineSemaphoreSubmitInfo;

typedef struct VkSemaphoreWaitInfo {
    VkStructureType sType;
    const void *pNext;
    VkSemaphoreWaitFlags flags;
    uint32_t semaphoreCount;
    const VkSemaphore *pSemaphores;
    const uint64_t *pValues;
} VkSemaphoreWaitInfo;

/* vkQueueSubmit2 (Vulkan 1.3, VK_KHR_synchronization2). */
typedef struct VkSemaphoreSubmitInfo {
    VkStructureType sType;
    const void *pNext;
    VkSemaphore semaphore;
    uint64_t value;
    VkPipelineStageFlags2 stageMask;
    uint32_t deviceIndex;
} VkSemaphoreSubmitInfo;

typedef struct VkCommandBufferSubmitInfo {
    VkStructureType sType;
    const void *pNext;
    VkCommandBuffer commandBuffer;
    uint32_t deviceMask;
} VkCommandBufferSubmitInfo;

typedef struct VkSubmitInfo2 {
    VkStructureType sType;
    const void *pNext;
    VkSubmitFlags flags;
    uint32_t waitSemaphoreInfoCount;
    const VkSemaphoreSubmitInfo *pWaitSemaphoreInfos;
    uint32_t commandBufferInfoCount;
    const VkCommandBufferSubmitInfo *pCommandBufferInfos;
    uint32_t signalSemaphoreInfoCount;
    const VkSemaphoreSubmitInfo *pSignalSemaphoreInfos;
} VkSubmitInfo2;

/* vkCmdCopyImageToBuffer's regions. */
typedef struct VkImageSubresourceLayers {
    VkImageAspectFlags aspectMask;
    uint32_t mipLevel;
    uint32_t baseArrayLayer;
    uint32_t layerCount;
} VkImageSubresourceLayers;

typedef struct VkOffset3D {
    int32_t x;
    int32_t y;
    int32_t z;
} VkOffset3D;

typedef struct VkExtent3D {
    uint32_t width;
    uint32_t height;
    uint32_t depth;
} VkExtent3D;

typedef struct VkBufferImageCopy {
    VkDeviceSize bufferOffset;
    uint32_t bufferRowLength;
    uint32_t bufferImageHeight;
    VkImageSubresourceLayers imageSubresource;
    VkOffset3D imageOffset;
    VkExtent3D imageExtent;
} VkBufferImageCopy;

/* The copy2 forms (Vulkan 1.3, VK_KHR_copy_commands2): the same regions,
 * each a structure of its own, in one info. */
typedef struct VkBufferCopy2 {
    VkStructureType sType;
    const void *pNext;
    VkDeviceSize srcOffset;
    VkDeviceSize dstOffset;
    VkDeviceSize size;
} VkBufferCopy2;

typedef struct VkCopyBufferInfo2 {
    VkStructureType sType;
    const void *pNext;
    VkBuffer srcBuffer;
    VkBuffer dstBuffer;
    uint32_t regionCount;
    const VkBufferCopy2 *pRegions;
} VkCopyBufferInfo2;

typedef struct VkBufferImageCopy2 {
    VkStructureType sType;
    const void *pNext;
    VkDeviceSize bufferOffset;
    uint32_t bufferRowLength;
    uint32_t bufferImageHeight;
    VkImageSubresourceLayers imageSubresource;
    VkOffset3D imageOffset;
    VkExtent3D imageExtent;
} VkBufferImageCopy2;

typedef struct VkCopyBufferToImageInfo2 {
    VkStructureType sType;
    const void *pNext;
    VkBuffer srcBuffer;
    VkImage dstImage;
    VkImageLayout dstImageLayout;
    uint32_t regionCount;
    const VkBufferImageCopy2 *pRegions;
} VkCopyBufferToImageInfo2;

typedef struct VkCopyImageToBufferInfo2 {
    VkStructureType sType;
    const void *pNext;
    VkImage srcImage;
    VkImageLayout srcImageLayout;
    VkBuffer dstBuffer;
    uint32_t regionCount;
    const VkBufferImageCopy2 *pRegions;
} VkCopyImageToBufferInfo2;

/* Descriptor sets: their layouts, what is written into them, copies. */
typedef struct VkDescriptorSetLayoutBinding {
    uint32_t binding;
    VkDescriptorType descriptorType;
    uint32_t descriptorCount;
    VkShaderStageFlags stageFlags;
    const VkSampler *pImmutableSamplers;
} VkDescriptorSetLayoutBinding;

typedef struct VkDescriptorSetLayoutCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkDescriptorSetLayoutCreateFlags flags;
    uint32_t bindingCount;
    const VkDescriptorSetLayoutBinding *pBindings;
} VkDescriptorSetLayoutCreateInfo;

typedef struct VkDescriptorSetAllocateInfo {
    VkStructureType sType;
    const void *pNext;
    VkDescriptorPool descriptorPool;
    uint32_t descriptorSetCount;
    const VkDescriptorSetLayout *pSetLayouts;
} VkDescriptorSetAllocateInfo;

typedef struct VkBufferViewCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkBufferViewCreateFlags flags;
    VkBuffer buffer;
    VkFormat format;
    VkDeviceSize offset;
    VkDeviceSize range;
} VkBufferViewCreateInfo;

typedef struct VkDescriptorBufferInfo {
    VkBuffer buffer;
    VkDeviceSize offset;
    VkDeviceSize range;
} VkDescriptorBufferInfo;

typedef struct VkWriteDescriptorSet {
    VkStructureType sType;
    const void *pNext;
    VkDescriptorSet dstSet;
    uint32_t dstBinding;
    uint32_t dstArrayElement;
    uint32_t descriptorCount;
    VkDescriptorType descriptorType;
    const VkDescriptorImageInfo *pImageInfo;
    const VkDescriptorBufferInfo *pBufferInfo;
    const VkBufferView *pTexelBufferView;
} VkWriteDescriptorSet;

typedef struct VkCopyDescriptorSet {
    VkStructureType sType;
    const void *pNext;
    VkDescriptorSet srcSet;
    uint32_t srcBinding;
    uint32_t srcArrayElement;
    VkDescriptorSet dstSet;
    uint32_t dstBinding;
    uint32_t dstArrayElement;
    uint32_t descriptorCount;
} VkCopyDescriptorSet;

/* Descriptor update templates (Vulkan 1.1, VK_KHR_descriptor_update_template). */
typedef enum VkDescriptorUpdateTemplateType {
    VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET = 0,
    VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR = 1,
    VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_MAX_ENUM = 0x7FFFFFFF
} VkDescriptorUpdateTemplateType;
typedef VkFlags VkDescriptorUpdateTemplateCreateFlags;

typedef struct VkDescriptorUpdateTemplateEntry {
    uint32_t dstBinding;
    uint32_t dstArrayElement;
    uint32_t descriptorCount;
    VkDescriptorType descriptorType;
    size_t offset;
    size_t stride;
} VkDescriptorUpdateTemplateEntry;

typedef struct VkDescriptorUpdateTemplateCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkDescriptorUpdateTemplateCreateFlags flags;
    uint32_t descriptorUpdateEntryCount;
    const VkDescriptorUpdateTemplateEntry *pDescriptorUpdateEntries;
    VkDescriptorUpdateTemplateType templateType;
    VkDescriptorSetLayout descriptorSetLayout;
    VkPipelineBindPoint pipelineBindPoint;
    VkPipelineLayout pipelineLayout;
    uint32_t set;
} VkDescriptorUpdateTemplateCreateInfo;
#endif
typedef struct VkCommandBufferBeginInfo VkCommandBufferBeginInfo;

/* VK_KHR_maintenance6 (Vulkan 1.4's core), newer than Debian 12's headers
 * (1.3.239): tests/abi checks these against tests/vulkan/vk_maintenance6.h
 * there, which stands in for the headers that lack them. */
#ifndef DS_ABI_SDK_TYPES
typedef struct VkBindDescriptorSetsInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkShaderStageFlags stageFlags;
    VkPipelineLayout layout;
    uint32_t firstSet;
    uint32_t descriptorSetCount;
    const VkDescriptorSet *pDescriptorSets;
    uint32_t dynamicOffsetCount;
    const uint32_t *pDynamicOffsets;
} VkBindDescriptorSetsInfoKHR;

typedef struct VkPushDescriptorSetInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkShaderStageFlags stageFlags;
    VkPipelineLayout layout;
    uint32_t set;
    uint32_t descriptorWriteCount;
    const VkWriteDescriptorSet *pDescriptorWrites;
} VkPushDescriptorSetInfoKHR;

typedef struct VkPushDescriptorSetWithTemplateInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkDescriptorUpdateTemplate descriptorUpdateTemplate;
    VkPipelineLayout layout;
    uint32_t set;
    const void *pData;
} VkPushDescriptorSetWithTemplateInfoKHR;

/* Vulkan 1.4's core names of the same structures (the KHR ones alias
 * them). */
typedef VkBindDescriptorSetsInfoKHR VkBindDescriptorSetsInfo;
typedef VkPushDescriptorSetInfoKHR VkPushDescriptorSetInfo;
typedef VkPushDescriptorSetWithTemplateInfoKHR VkPushDescriptorSetWithTemplateInfo;
#endif

/* The functions the layer forwards to or answers for. */
typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance instance,
    const char *pName);
typedef PFN_vkVoidFunction (*PFN_vkGetDeviceProcAddr)(VkDevice device,
    const char *pName);
typedef VkResult (*PFN_vkCreateInstance)(const VkInstanceCreateInfo *pCreateInfo,
    const VkAllocationCallbacks *pAllocator, VkInstance *pInstance);
typedef void (*PFN_vkDestroyInstance)(VkInstance instance,
    const VkAllocationCallbacks *pAllocator);
typedef VkResult (*PFN_vkEnumeratePhysicalDevices)(VkInstance instance,
    uint32_t *pPhysicalDeviceCount, VkPhysicalDevice *pPhysicalDevices);
typedef void (*PFN_vkGetPhysicalDeviceMemoryProperties)(
    VkPhysicalDevice physicalDevice, VkPhysicalDeviceMemoryProperties *pMemoryProperties);
typedef VkResult (*PFN_vkCreateDevice)(VkPhysicalDevice physicalDevice,
    const VkDeviceCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator,
    VkDevice *pDevice);
typedef void (*PFN_vkDestroyDevice)(VkDevice device,
    const VkAllocationCallbacks *pAllocator);
typedef VkResult (*PFN_vkAllocateMemory)(VkDevice device,
    const VkMemoryAllocateInfo *pAllocateInfo, const VkAllocationCallbacks *pAllocator,
    VkDeviceMemory *pMemory);
typedef void (*PFN_vkFreeMemory)(VkDevice device, VkDeviceMemory memory,
    const VkAllocationCallbacks *pAllocator);
typedef VkResult (*PFN_vkMapMemory)(VkDevice device, VkDeviceMemory memory,
    VkDeviceSize offset, VkDeviceSize size, VkMemoryMapFlags flags, void **ppData);
typedef void (*PFN_vkUnmapMemory)(VkDevice device, VkDeviceMemory memory);
typedef VkResult (*PFN_vkCreateBuffer)(VkDevice device,
    const VkBufferCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator,
    VkBuffer *pBuffer);
typedef void (*PFN_vkDestroyBuffer)(VkDevice device, VkBuffer buffer,
    const VkAllocationCallbacks *pAllocator);
typedef VkResult (*PFN_vkBindBufferMemory)(VkDevice device, VkBuffer buffer,
    VkDeviceMemory memory, VkDeviceSize memoryOffset);
typedef VkResult (*PFN_vkBindBufferMemory2)(VkDevice device, uint32_t bindInfoCount,
    const VkBindBufferMemoryInfo *pBindInfos);
typedef VkResult (*PFN_vkBindBufferMemory2KHR)(VkDevice device,
    uint32_t bindInfoCount, const VkBindBufferMemoryInfo *pBindInfos);
/* Queues and what they run: recorded writes, submissions, fences. */
typedef VkResult (*PFN_vkBeginCommandBuffer)(VkCommandBuffer commandBuffer,
    const VkCommandBufferBeginInfo *pBeginInfo);
typedef VkResult (*PFN_vkResetCommandBuffer)(VkCommandBuffer commandBuffer,
    VkCommandBufferResetFlags flags);
typedef void (*PFN_vkCmdFillBuffer)(VkCommandBuffer commandBuffer, VkBuffer dstBuffer,
    VkDeviceSize dstOffset, VkDeviceSize size, uint32_t data);
typedef void (*PFN_vkCmdUpdateBuffer)(VkCommandBuffer commandBuffer, VkBuffer dstBuffer,
    VkDeviceSize dstOffset, VkDeviceSize dataSize, const void *pData);
typedef void (*PFN_vkCmdCopyBuffer)(VkCommandBuffer commandBuffer, VkBuffer srcBuffer,
    VkBuffer dstBuffer, uint32_t regionCount, const VkBufferCopy *pRegions);
typedef void (*PFN_vkCmdCopyBuffer2)(VkCommandBuffer commandBuffer,
    const VkCopyBufferInfo2 *pCopyBufferInfo);
typedef void (*PFN_vkCmdCopyBuffer2KHR)(VkCommandBuffer commandBuffer,
    const VkCopyBufferInfo2 *pCopyBufferInfo);
typedef void (*PFN_vkCmdCopyBufferToImage2)(VkCommandBuffer commandBuffer,
    const VkCopyBufferToImageInfo2 *pCopyBufferToImageInfo);
typedef void (*PFN_vkCmdCopyBufferToImage2KHR)(VkCommandBuffer commandBuffer,
    const VkCopyBufferToImageInfo2 *pCopyBufferToImageInfo);
typedef void (*PFN_vkCmdCopyImageToBuffer2)(VkCommandBuffer commandBuffer,
    const VkCopyImageToBufferInfo2 *pCopyImageToBufferInfo);
typedef void (*PFN_vkCmdCopyImageToBuffer2KHR)(VkCommandBuffer commandBuffer,
    const VkCopyImageToBufferInfo2 *pCopyImageToBufferInfo);
typedef VkResult (*PFN_vkQueueSubmit)(VkQueue queue, uint32_t submitCount,
    const VkSubmitInfo *pSubmits, VkFence fence);
typedef VkResult (*PFN_vkQueueWaitIdle)(VkQueue queue);
typedef VkResult (*PFN_vkDeviceWaitIdle)(VkDevice device);
typedef VkResult (*PFN_vkWaitForFences)(VkDevice device, uint32_t fenceCount,
    const VkFence *pFences, VkBool32 waitAll, uint64_t timeout);
typedef VkResult (*PFN_vkGetFenceStatus)(VkDevice device, VkFence fence);
typedef void (*PFN_vkDestroyFence)(VkDevice device, VkFence fence,
    const VkAllocationCallbacks *pAllocator);
typedef void (*PFN_vkDestroySemaphore)(VkDevice device, VkSemaphore semaphore,
    const VkAllocationCallbacks *pAllocator);
typedef VkResult (*PFN_vkCreateSemaphore)(VkDevice device,
    const VkSemaphoreCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator,
    VkSemaphore *pSemaphore);
typedef VkResult (*PFN_vkWaitSemaphores)(VkDevice device,
    const VkSemaphoreWaitInfo *pWaitInfo, uint64_t timeout);
typedef VkResult (*PFN_vkWaitSemaphoresKHR)(VkDevice device,
    const VkSemaphoreWaitInfo *pWaitInfo, uint64_t timeout);
typedef VkResult (*PFN_vkGetSemaphoreCounterValue)(VkDevice device, VkSemaphore semaphore,
    uint64_t *pValue);
typedef VkResult (*PFN_vkGetSemaphoreCounterValueKHR)(VkDevice device,
    VkSemaphore semaphore, uint64_t *pValue);
typedef VkResult (*PFN_vkQueueSubmit2)(VkQueue queue, uint32_t submitCount,
    const VkSubmitInfo2 *pSubmits, VkFence fence);
typedef VkResult (*PFN_vkQueueSubmit2KHR)(VkQueue queue, uint32_t submitCount,
    const VkSubmitInfo2 *pSubmits, VkFence fence);
typedef void (*PFN_vkCmdCopyImageToBuffer)(VkCommandBuffer commandBuffer, VkImage srcImage,
    VkImageLayout srcImageLayout, VkBuffer dstBuffer, uint32_t regionCount,
    const VkBufferImageCopy *pRegions);
typedef void (*PFN_vkCmdCopyBufferToImage)(VkCommandBuffer commandBuffer, VkBuffer srcBuffer,
    VkImage dstImage, VkImageLayout dstImageLayout, uint32_t regionCount,
    const VkBufferImageCopy *pRegions);
typedef VkResult (*PFN_vkGetMemoryFdKHR)(VkDevice device,
    const VkMemoryGetFdInfoKHR *pGetFdInfo, int *pFd);
typedef VkResult (*PFN_vkCreateDescriptorSetLayout)(VkDevice device,
    const VkDescriptorSetLayoutCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator,
    VkDescriptorSetLayout *pSetLayout);
typedef void (*PFN_vkDestroyDescriptorSetLayout)(VkDevice device,
    VkDescriptorSetLayout descriptorSetLayout, const VkAllocationCallbacks *pAllocator);
typedef VkResult (*PFN_vkAllocateDescriptorSets)(VkDevice device,
    const VkDescriptorSetAllocateInfo *pAllocateInfo, VkDescriptorSet *pDescriptorSets);
typedef VkResult (*PFN_vkFreeDescriptorSets)(VkDevice device, VkDescriptorPool descriptorPool,
    uint32_t descriptorSetCount, const VkDescriptorSet *pDescriptorSets);
typedef VkResult (*PFN_vkResetDescriptorPool)(VkDevice device, VkDescriptorPool descriptorPool,
    VkDescriptorPoolResetFlags flags);
typedef void (*PFN_vkDestroyDescriptorPool)(VkDevice device, VkDescriptorPool descriptorPool,
    const VkAllocationCallbacks *pAllocator);
typedef void (*PFN_vkUpdateDescriptorSets)(VkDevice device, uint32_t descriptorWriteCount,
    const VkWriteDescriptorSet *pDescriptorWrites, uint32_t descriptorCopyCount,
    const VkCopyDescriptorSet *pDescriptorCopies);
typedef void (*PFN_vkUpdateDescriptorSetWithTemplate)(VkDevice device,
    VkDescriptorSet descriptorSet, VkDescriptorUpdateTemplate descriptorUpdateTemplate,
    const void *pData);
typedef void (*PFN_vkUpdateDescriptorSetWithTemplateKHR)(VkDevice device,
    VkDescriptorSet descriptorSet, VkDescriptorUpdateTemplate descriptorUpdateTemplate,
    const void *pData);
typedef void (*PFN_vkCmdBindDescriptorSets)(VkCommandBuffer commandBuffer,
    VkPipelineBindPoint pipelineBindPoint, VkPipelineLayout layout, uint32_t firstSet,
    uint32_t descriptorSetCount, const VkDescriptorSet *pDescriptorSets,
    uint32_t dynamicOffsetCount, const uint32_t *pDynamicOffsets);
typedef void (*PFN_vkCmdPushDescriptorSetKHR)(VkCommandBuffer commandBuffer,
    VkPipelineBindPoint pipelineBindPoint, VkPipelineLayout layout, uint32_t set,
    uint32_t descriptorWriteCount, const VkWriteDescriptorSet *pDescriptorWrites);
typedef void (*PFN_vkCmdPushDescriptorSetWithTemplateKHR)(VkCommandBuffer commandBuffer,
    VkDescriptorUpdateTemplate descriptorUpdateTemplate, VkPipelineLayout layout, uint32_t set,
    const void *pData);
typedef void (*PFN_vkCmdSetDescriptorBufferOffsetsEXT)(VkCommandBuffer commandBuffer,
    VkPipelineBindPoint pipelineBindPoint, VkPipelineLayout layout, uint32_t firstSet,
    uint32_t setCount, const uint32_t *pBufferIndices, const VkDeviceSize *pOffsets);
typedef void (*PFN_vkCmdDispatch)(VkCommandBuffer commandBuffer, uint32_t groupCountX,
    uint32_t groupCountY, uint32_t groupCountZ);
typedef void (*PFN_vkCmdDispatchIndirect)(VkCommandBuffer commandBuffer, VkBuffer buffer,
    VkDeviceSize offset);
typedef void (*PFN_vkCmdDispatchBase)(VkCommandBuffer commandBuffer, uint32_t baseGroupX,
    uint32_t baseGroupY, uint32_t baseGroupZ, uint32_t groupCountX, uint32_t groupCountY,
    uint32_t groupCountZ);
typedef void (*PFN_vkCmdDispatchBaseKHR)(VkCommandBuffer commandBuffer, uint32_t baseGroupX,
    uint32_t baseGroupY, uint32_t baseGroupZ, uint32_t groupCountX, uint32_t groupCountY,
    uint32_t groupCountZ);
typedef VkResult (*PFN_vkGetSemaphoreFdKHR)(VkDevice device,
    const VkSemaphoreGetFdInfoKHR *pGetFdInfo, int *pFd);
typedef VkResult (*PFN_vkCreateBufferView)(VkDevice device,
    const VkBufferViewCreateInfo *pCreateInfo, const VkAllocationCallbacks *pAllocator,
    VkBufferView *pView);
typedef void (*PFN_vkDestroyBufferView)(VkDevice device, VkBufferView bufferView,
    const VkAllocationCallbacks *pAllocator);
typedef void (*PFN_vkCmdExecuteCommands)(VkCommandBuffer commandBuffer,
    uint32_t commandBufferCount, const VkCommandBuffer *pCommandBuffers);
typedef void (*PFN_vkCmdBindDescriptorSets2KHR)(VkCommandBuffer commandBuffer,
    const VkBindDescriptorSetsInfoKHR *pBindDescriptorSetsInfo);
typedef void (*PFN_vkCmdPushDescriptorSet2KHR)(VkCommandBuffer commandBuffer,
    const VkPushDescriptorSetInfoKHR *pPushDescriptorSetInfo);
typedef VkResult (*PFN_vkCreateDescriptorUpdateTemplate)(VkDevice device,
    const VkDescriptorUpdateTemplateCreateInfo *pCreateInfo,
    const VkAllocationCallbacks *pAllocator, VkDescriptorUpdateTemplate *pDescriptorUpdateTemplate);
typedef VkResult (*PFN_vkCreateDescriptorUpdateTemplateKHR)(VkDevice device,
    const VkDescriptorUpdateTemplateCreateInfo *pCreateInfo,
    const VkAllocationCallbacks *pAllocator, VkDescriptorUpdateTemplate *pDescriptorUpdateTemplate);
typedef void (*PFN_vkDestroyDescriptorUpdateTemplate)(VkDevice device,
    VkDescriptorUpdateTemplate descriptorUpdateTemplate, const VkAllocationCallbacks *pAllocator);
typedef void (*PFN_vkDestroyDescriptorUpdateTemplateKHR)(VkDevice device,
    VkDescriptorUpdateTemplate descriptorUpdateTemplate, const VkAllocationCallbacks *pAllocator);
typedef void (*PFN_vkCmdPushDescriptorSetWithTemplate2KHR)(VkCommandBuffer commandBuffer,
    const VkPushDescriptorSetWithTemplateInfoKHR *pPushDescriptorSetWithTemplateInfo);
/* Vulkan 1.4's core names of the push descriptor and maintenance6
 * commands, which a 1.4 application gets un-suffixed. */
typedef void (*PFN_vkCmdBindDescriptorSets2)(VkCommandBuffer commandBuffer,
    const VkBindDescriptorSetsInfo *pBindDescriptorSetsInfo);
typedef void (*PFN_vkCmdPushDescriptorSet)(VkCommandBuffer commandBuffer,
    VkPipelineBindPoint pipelineBindPoint, VkPipelineLayout layout, uint32_t set,
    uint32_t descriptorWriteCount, const VkWriteDescriptorSet *pDescriptorWrites);
typedef void (*PFN_vkCmdPushDescriptorSet2)(VkCommandBuffer commandBuffer,
    const VkPushDescriptorSetInfo *pPushDescriptorSetInfo);
typedef void (*PFN_vkCmdPushDescriptorSetWithTemplate)(VkCommandBuffer commandBuffer,
    VkDescriptorUpdateTemplate descriptorUpdateTemplate, VkPipelineLayout layout, uint32_t set,
    const void *pData);
typedef void (*PFN_vkCmdPushDescriptorSetWithTemplate2)(VkCommandBuffer commandBuffer,
    const VkPushDescriptorSetWithTemplateInfo *pPushDescriptorSetWithTemplateInfo);

/* ---- the loader's layer interface (vk_layer.h) ---- */
typedef PFN_vkVoidFunction (*PFN_GetPhysicalDeviceProcAddr)(VkInstance instance,
    const char *pName);
typedef VkResult (*PFN_vkSetInstanceLoaderData)(VkInstance instance, void *object);
typedef VkResult (*PFN_vkSetDeviceLoaderData)(VkDevice device, void *object);
typedef VkResult (*PFN_vkLayerCreateDevice)(VkInstance instance,
    VkPhysicalDevice physicalDevice, const VkDeviceCreateInfo *pCreateInfo,
    const VkAllocationCallbacks *pAllocator, VkDevice *pDevice,
    PFN_vkGetInstanceProcAddr layerGIPA, PFN_vkGetDeviceProcAddr *nextGDPA);
typedef void (*PFN_vkLayerDestroyDevice)(VkDevice physicalDevice,
    const VkAllocationCallbacks *pAllocator, PFN_vkDestroyDevice destroyFunction);
typedef VkFlags VkLoaderFeatureFlags;

#ifndef DS_ABI_SDK_TYPES
typedef enum VkLayerFunction_ { VK_LAYER_LINK_INFO = 0 } VkLayerFunction;
typedef enum VkNegotiateLayerStructType {
    LAYER_NEGOTIATE_INTERFACE_STRUCT = 1
} VkNegotiateLayerStructType;

typedef struct VkLayerInstanceLink_ {
    struct VkLayerInstanceLink_ *pNext;
    PFN_vkGetInstanceProcAddr pfnNextGetInstanceProcAddr;
    PFN_GetPhysicalDeviceProcAddr pfnNextGetPhysicalDeviceProcAddr;
} VkLayerInstanceLink;

typedef struct {
    VkStructureType sType;
    const void *pNext;
    VkLayerFunction function;
    union {
        VkLayerInstanceLink *pLayerInfo;
        PFN_vkSetInstanceLoaderData pfnSetInstanceLoaderData;
        struct {
            PFN_vkLayerCreateDevice pfnLayerCreateDevice;
            PFN_vkLayerDestroyDevice pfnLayerDestroyDevice;
        } layerDevice;
        VkLoaderFeatureFlags loaderFeatures;
    } u;
} VkLayerInstanceCreateInfo;

typedef struct VkLayerDeviceLink_ {
    struct VkLayerDeviceLink_ *pNext;
    PFN_vkGetInstanceProcAddr pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr pfnNextGetDeviceProcAddr;
} VkLayerDeviceLink;

typedef struct {
    VkStructureType sType;
    const void *pNext;
    VkLayerFunction function;
    union {
        VkLayerDeviceLink *pLayerInfo;
        PFN_vkSetDeviceLoaderData pfnSetDeviceLoaderData;
    } u;
} VkLayerDeviceCreateInfo;

typedef struct VkNegotiateLayerInterface {
    VkNegotiateLayerStructType sType;
    void *pNext;
    uint32_t loaderLayerInterfaceVersion;
    PFN_vkGetInstanceProcAddr pfnGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr pfnGetDeviceProcAddr;
    PFN_GetPhysicalDeviceProcAddr pfnGetPhysicalDeviceProcAddr;
} VkNegotiateLayerInterface;
#endif

#endif /* DS_ABI_VULKAN_H */
