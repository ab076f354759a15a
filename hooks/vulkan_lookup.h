/*
 * vulkan_lookup.h — the forms of a Vulkan table's rows as a lookup by name,
 * inside a function of `const ds_vk_device *d` and `const char *name`: each
 * row returns its wrapper when `name` is its function's (NULL where the
 * device `d` lacks the function; d NULL: any device).  Forgotten after the
 * table with vulkan_forms_undef.h.
 */
#define VK_HOOK(fn, params, args, after) \
    if (!strcmp(name, #fn))              \
        return d && !d->fn ? NULL : (PFN_vkVoidFunction)wrap_##fn;
#define VK_VOID(fn, params, args, before) VK_HOOK(fn, params, args, before)
#define VK_FREE(fn, params, args, check, done) VK_HOOK(fn, params, args, check)
#define VK_HOOK_ON(object, fn, params, args, after) VK_HOOK(fn, params, args, after)
#define VK_VOID_ON(object, fn, params, args, before) VK_HOOK(fn, params, args, before)
#define VK_BEFORE_ON(object, fn, params, args, before) VK_HOOK(fn, params, args, before)
