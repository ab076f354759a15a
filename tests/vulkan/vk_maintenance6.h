/*
 * vk_maintenance6.h — VK_KHR_maintenance6's descriptor set commands, for
 * Vulkan headers older than 1.3.280 that lack them (Debian 12's 1.3.239):
 * the test programs call them, the simulated device's layer
 * (tests/simdev/vk_semaphore_fd.c) gives them to a driver without them.
 * Newer headers' own declarations are used where they have them.
 */
#ifndef VK_MAINTENANCE6_H
#define VK_MAINTENANCE6_H

#include <vulkan/vulkan.h>

#ifndef VK_KHR_maintenance6
#define VK_KHR_MAINTENANCE_6_EXTENSION_NAME "VK_KHR_maintenance6"
#define VK_STRUCTURE_TYPE_BIND_DESCRIPTOR_SETS_INFO_KHR ((VkStructureType)1000545003)
#define VK_STRUCTURE_TYPE_PUSH_DESCRIPTOR_SET_INFO_KHR ((VkStructureType)1000545005)

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

typedef void(VKAPI_PTR *PFN_vkCmdBindDescriptorSets2KHR)(VkCommandBuffer commandBuffer,
                                                         const VkBindDescriptorSetsInfoKHR *info);
typedef void(VKAPI_PTR *PFN_vkCmdPushDescriptorSet2KHR)(VkCommandBuffer commandBuffer,
                                                        const VkPushDescriptorSetInfoKHR *info);
#endif

#endif
