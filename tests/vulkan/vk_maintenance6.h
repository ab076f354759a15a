/*
 * vk_maintenance6.h — VK_KHR_maintenance6's descriptor set commands, for
 * Vulkan headers older than 1.3.280 that lack them (Debian 12's 1.3.239):
 * the test programs call them, the simulated device's layer
 * (tests/simdev/vk_simulated.c) gives them to a driver without them.
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

#ifndef VK_VERSION_1_4
#define VK_STRUCTURE_TYPE_PUSH_DESCRIPTOR_SET_WITH_TEMPLATE_INFO_KHR ((VkStructureType)1000545006)

typedef struct VkPushDescriptorSetWithTemplateInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkDescriptorUpdateTemplate descriptorUpdateTemplate;
    VkPipelineLayout layout;
    uint32_t set;
    const void *pData;
} VkPushDescriptorSetWithTemplateInfoKHR;

/* Vulkan 1.4's core names (headers before 1.4.303 lack them). */
typedef VkBindDescriptorSetsInfoKHR VkBindDescriptorSetsInfo;
typedef VkPushDescriptorSetInfoKHR VkPushDescriptorSetInfo;
typedef VkPushDescriptorSetWithTemplateInfoKHR VkPushDescriptorSetWithTemplateInfo;

typedef void(VKAPI_PTR *PFN_vkCmdPushDescriptorSetWithTemplate2KHR)(
    VkCommandBuffer commandBuffer, const VkPushDescriptorSetWithTemplateInfoKHR *info);
typedef void(VKAPI_PTR *PFN_vkCmdBindDescriptorSets2)(VkCommandBuffer commandBuffer,
                                                      const VkBindDescriptorSetsInfo *info);
typedef void(VKAPI_PTR *PFN_vkCmdPushDescriptorSet)(VkCommandBuffer commandBuffer,
                                                    VkPipelineBindPoint pipelineBindPoint,
                                                    VkPipelineLayout layout, uint32_t set,
                                                    uint32_t descriptorWriteCount,
                                                    const VkWriteDescriptorSet *writes);
typedef void(VKAPI_PTR *PFN_vkCmdPushDescriptorSet2)(VkCommandBuffer commandBuffer,
                                                     const VkPushDescriptorSetInfo *info);
typedef void(VKAPI_PTR *PFN_vkCmdPushDescriptorSetWithTemplate)(
    VkCommandBuffer commandBuffer, VkDescriptorUpdateTemplate update, VkPipelineLayout layout,
    uint32_t set, const void *data);
typedef void(VKAPI_PTR *PFN_vkCmdPushDescriptorSetWithTemplate2)(
    VkCommandBuffer commandBuffer, const VkPushDescriptorSetWithTemplateInfo *info);
#endif

#endif
