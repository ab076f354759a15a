/* vulkan_forms_undef.h — forgets every form of a Vulkan table row, after
 * an expansion of vulkan.def or vulkan_queues.def. */
#undef VK_HOOK
#undef VK_VOID
#undef VK_FREE
#undef VK_HOOK_ON
#undef VK_VOID_ON
#undef VK_BEFORE_ON
#undef VK_BEGIN
